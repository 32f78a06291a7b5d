"""The approval inbox's lists (``GET /``): the tabs (waiting for approval, for the customer, for an event; stuck;
recently closed), read from visibility, so they work with no worker running, and under "mine" the answers the
person gave, from the audit trail. The page refreshes its list every few seconds."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from activities.business.audit import SqlAuditTrail
from activities.contracts.approvals import AnsweredRequest
from agent_worker.inbox.desk import TABS, Listing
from agent_worker.inbox.filters import FilterError, Filters
from agent_worker.inbox.formats import now
from agent_worker.inbox.pages import Pages

ANSWERED_DAYS = 30
"""How far back "mine" lists the answers the person gave."""
ANSWERED_SHOWN = 50
"""The most of them it lists, the latest first; the export has them all."""


class Lists:
    """The tabs of one inbox's ``Pages``, and the answers a person gave, from the business database's audit
    trail."""

    def __init__(self, pages: Pages, trail: SqlAuditTrail) -> None:
        self.pages, self.trail = pages, trail
        pages.templates.env.globals.update(answered_days=ANSWERED_DAYS)

    async def inbox(self, request: Request) -> Response:
        """A tab, most urgent first, with every tab's count, narrowed by the filters in the page's query (a GET form
        that needs no script); a filter it does not take is refused, saying what it takes, and nothing is read."""
        pages = self.pages
        person = await pages.person(request)
        if person is None:
            return pages.must_sign_in(request)
        tab = request.query_params.get("tab", "approval")
        if tab not in TABS:
            tab = "approval"
        partial = "partial" in request.query_params
        csrf = pages.auth.keys.csrf(person.binding)
        context: dict[str, Any] = {"person": person, "csrf": csrf, "tab": tab, "counts": {}, "answered": None}
        try:
            filters = Filters.of(request.query_params)
        except FilterError as error:
            context.update(filters=Filters(), refused=str(error), listing=Listing([], None, 0))
            return pages.page(request, "_list.html" if partial else "inbox.html", 400, **context)
        counts = await pages.desk.counts()
        listing = await pages.desk.listed(tab, filters, person.name, total=counts[tab])
        answered = await self.answered_by(person.name) if filters.mine else None
        context.update(filters=filters, refused="", listing=listing, counts=counts, answered=answered)
        return pages.page(request, "_list.html" if partial else "inbox.html", **context)

    async def answered_by(self, name: str) -> list[tuple[str, AnsweredRequest]]:
        """The answers ``name`` gave in the last ``ANSWERED_DAYS`` days, the latest first, each with its ticket's id,
        from the audit trail."""
        until = now()

        def read() -> list[tuple[str, AnsweredRequest]]:
            since = until - timedelta(days=ANSWERED_DAYS)
            return list(self.trail.answered(since, until, approver=name, limit=ANSWERED_SHOWN, latest_first=True))

        return await asyncio.to_thread(read)
