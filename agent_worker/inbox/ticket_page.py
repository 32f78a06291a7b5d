"""A ticket's page in the approval inbox: ``GET /ticket?id=ID`` (the request, the order as looked up, what the agent
asked for and why, the transcript in sentences), kept current by ``GET /ticket/events?id=ID``, a stream of
server-sent events that follows the run's history and tells the page when to fetch its live part again.

A ticket's id may be any text (``/``, ``%``, ``?``, ``#``, ``..``, spaces), so it is never part of a path, which
browsers and proxies normalise: it rides in the query string, encoded by ``ticket_path`` alone. ``GET /tickets/ID``,
the address before, still leads there, and ``GET /ticket/answer`` (the answer's address opened as a page) too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse

from activities.contracts.approvals import Approval
from agent_worker.inbox.auth import Person
from agent_worker.inbox.desk import NotATicketError
from agent_worker.inbox.formats import now
from agent_worker.inbox.notices import Notice, unseal
from agent_worker.inbox.pages import Pages
from agent_worker.inbox.standing import standing
from agent_worker.transcript import CLOSED

REASON_MAX: int = Approval.model_json_schema()["properties"]["reason"]["anyOf"][0]["maxLength"]
"""The longest reason the ``approve`` update takes, from its contract: the form holds the person to it as they type."""


class TicketPage:
    """A ticket's page, its live part and its stream of events, for one inbox's ``Pages``."""

    def __init__(self, pages: Pages) -> None:
        self.pages = pages
        pages.templates.env.globals.update(reason_max=REASON_MAX)

    async def old_address(self, request: Request) -> Response:
        """``/tickets/ID``, as links shared before the id moved to the query string read: the same ticket's page.
        (An id that ends in ``/events`` or holds ``..`` never worked there, and is not guessed at now.)"""
        return RedirectResponse(self.pages.ticket_url(request.path_params["workflow_id"]), status_code=301)

    async def back_to_ticket(self, request: Request) -> Response:
        """The answer's address opened as a page (shared, or typed): the ticket's page, sending nothing."""
        workflow_id = request.query_params.get("id")
        pages = self.pages
        return RedirectResponse(pages.ticket_url(workflow_id) if workflow_id else f"{pages.site.base_path}/", 303)

    def no_ticket(self, request: Request, person: Person, workflow_id: str | None) -> Response:
        message = f"There is no ticket {workflow_id}." if workflow_id else "This address names no ticket."
        return self.pages.page(request, "error.html", 404, person=person, message=message)

    async def ticket(self, request: Request, notice: Notice | None = None, status: int = 200) -> Response:
        pages = self.pages
        person = await pages.person(request)
        if person is None:
            return pages.must_sign_in(request)
        workflow_id = request.query_params.get("id")
        if not workflow_id:
            return self.no_ticket(request, person, workflow_id)
        try:
            ticket = await pages.desk.ticket(workflow_id)
        except NotATicketError:
            return self.no_ticket(request, person, workflow_id)
        if notice is None and request.method == "GET":  # what became of this person's answer, if it was theirs
            keys, sealed = pages.auth.keys, request.query_params.get("notice")
            notice = unseal(keys, sealed, binding=person.binding, workflow_id=workflow_id, now=now())
        partial = "partial" in request.query_params and request.method == "GET"
        context = {
            "person": person,
            "csrf": pages.auth.keys.csrf(person.binding),
            "ticket": ticket,
            "notice": notice,
            "standing": standing(ticket.request, person.name) if ticket.request else None,
        }
        return pages.page(request, "_ticket.html" if partial else "ticket.html", status, **context)

    async def events(self, request: Request) -> Response:
        """Server-sent events while the ticket runs: ``history`` when its history grows (the page then fetches its
        live part again), ``closed`` when the run ends. The page says which run and event it showed, so nothing that
        happened between its rendering and this stream is missed; a run that continued as new ends the stream, and
        the browser reconnects to the next one."""
        if await self.pages.person(request, active=False) is None:
            return self.pages.must_sign_in(request, page=False)
        workflow_id = request.query_params.get("id", "")
        shown_run = request.query_params.get("run", "")
        try:
            shown = int(request.query_params.get("after", "0"))
        except ValueError:
            shown = 0
        return StreamingResponse(
            self.follow(workflow_id, shown_run, shown),
            media_type="text/event-stream",
            headers={"X-Accel-Buffering": "no"},  # nginx and the like: pass each event on as it comes
        )

    async def follow(self, workflow_id: str, shown_run: str, shown: int) -> AsyncIterator[str]:
        yield "retry: 2000\n\n"
        desk = self.pages.desk
        try:
            description = await desk.check(workflow_id)
        except NotATicketError:
            yield "event: closed\ndata: gone\n\n"
            return
        if description.run_id != shown_run:
            yield "event: history\ndata: new run\n\n"
            shown = 0
        run = desk.client.get_workflow_handle(workflow_id, run_id=description.run_id)
        async for event in run.fetch_history_events(wait_new_event=True):
            if event.event_id > shown:
                yield f"event: history\ndata: {event.event_id}\n\n"
            if event.event_type in CLOSED:
                if not event.HasField("workflow_execution_continued_as_new_event_attributes"):
                    yield f"event: closed\ndata: {CLOSED[event.event_type]}\n\n"
                return  # a run that continued as new: the browser reconnects, and follows the next run
