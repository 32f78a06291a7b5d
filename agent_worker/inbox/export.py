"""The approval inbox's export for auditors (``GET /export.csv?from=YYYY-MM-DD&to=YYYY-MM-DD[&personal=1]``): the
answers given over a range of days, as CSV (``agent_worker.answers``), from the business database's audit trail.

Any signed-in person may export the answers; the customers' personal data with them (``personal=1``) only the
people ``AGENT_WEB_AUDITORS`` names. Approving a refund is a support lead's job, reading every customer's address
and every reason typed about them in one file is an auditor's, so an empty list lets nobody.
"""

from __future__ import annotations

import asyncio

import structlog
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse

from activities.business.audit import SqlAuditTrail
from agent_worker import answers
from agent_worker.inbox.pages import Pages

log = structlog.get_logger(__name__)


class Export:
    """The CSV export of one inbox's ``Pages``, read from the audit trail that keeps every answer."""

    def __init__(self, pages: Pages, trail: SqlAuditTrail, *, auditors: frozenset[str] = frozenset()) -> None:
        self.pages, self.trail, self.auditors = pages, trail, auditors

    async def export(self, request: Request) -> Response:
        """The answers over a range of days as CSV, for auditors, to a person signed in; the customer's personal
        data only with ``personal=1`` and only to an auditor (403 to anyone else, nothing read). Refused, saying why,
        for a range ``answers.days`` does not take."""
        person = await self.pages.person(request)
        if person is None:
            return self.pages.must_sign_in(request, page=False)
        start, end = request.query_params.get("from", ""), request.query_params.get("to", "")
        personal = request.query_params.get("personal", "") == "1"
        if personal and person.name not in self.auditors:
            log.warning("inbox export with personal data refused", who=person.name)
            return PlainTextResponse(
                "not exported: the customers' personal data is for the people AGENT_WEB_AUDITORS names; "
                "leave out personal=1 for the answers without it",
                status_code=403,
            )
        try:
            lines = await asyncio.to_thread(answers.export, self.trail, start, end, personal=personal)
        except answers.ExportRefusedError as error:
            return PlainTextResponse(f"not exported: {error}", status_code=400)
        log.info("inbox export", who=person.name, start=start, end=end, personal=personal)
        disposition = f'attachment; filename="{answers.filename(start, end, personal=personal)}"'
        return StreamingResponse(
            lines, media_type="text/csv; charset=utf-8", headers={"Content-Disposition": disposition}
        )
