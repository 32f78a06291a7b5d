"""The approval inbox's export for auditors (``GET /export.csv?from=YYYY-MM-DD&to=YYYY-MM-DD[&personal=1]``): the
answers given over a range of days, as CSV (``agent_worker.answers``), from the business database's audit trail."""

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

    def __init__(self, pages: Pages, trail: SqlAuditTrail) -> None:
        self.pages, self.trail = pages, trail

    async def export(self, request: Request) -> Response:
        """The answers over a range of days as CSV, for auditors, to a person signed in; the customer's personal
        data only with ``personal=1``. Refused, saying why, for a range ``answers.days`` does not take."""
        person = await self.pages.person(request)
        if person is None:
            return self.pages.must_sign_in(request, page=False)
        start, end = request.query_params.get("from", ""), request.query_params.get("to", "")
        personal = request.query_params.get("personal", "") == "1"
        try:
            lines = await asyncio.to_thread(answers.export, self.trail, start, end, personal=personal)
        except answers.ExportRefusedError as error:
            return PlainTextResponse(f"not exported: {error}", status_code=400)
        log.info("inbox export", who=person.name, start=start, end=end, personal=personal)
        disposition = f'attachment; filename="{answers.filename(start, end, personal=personal)}"'
        return StreamingResponse(
            lines, media_type="text/csv; charset=utf-8", headers={"Content-Disposition": disposition}
        )
