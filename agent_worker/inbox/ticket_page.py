"""A ticket's page in the approval inbox: ``GET /ticket?id=ID`` (the request, the order as looked up, what the agent
asked for and why, the transcript in sentences), kept current by polling its live part, ``GET /ticket?id=ID&partial=1``,
with the ``ETag`` it was drawn at: while nothing happened the answer is an empty ``304 Not Modified``.

Polling, not a held connection: a browser opens at most six connections to a host over HTTP/1.1, and a stream per
tab (server-sent events, as before) left the seventh tab unable to load. A poll holds a connection for a moment, a
hidden tab does not poll, and the version is one ``describe`` of the run (its run, its history's length, its
status), so an unchanged ticket costs no history read and no rendering.

A ticket's id may be any text (``/``, ``%``, ``?``, ``#``, ``..``, spaces), so it is never part of a path, which
browsers and proxies normalise: it rides in the query string, encoded by ``ticket_path`` alone. ``GET /tickets/ID``,
the address before, still leads there, and ``GET /ticket/answer`` (the answer's address opened as a page) too.
"""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from activities.contracts.approvals import Approval
from agent_worker.inbox.auth import Person
from agent_worker.inbox.desk import NotATicketError, status_name
from agent_worker.inbox.formats import now
from agent_worker.inbox.notices import Notice, unseal
from agent_worker.inbox.pages import Pages
from agent_worker.inbox.standing import standing

REASON_MAX: int = Approval.model_json_schema()["properties"]["reason"]["anyOf"][0]["maxLength"]
"""The longest reason the ``approve`` update takes, from its contract: the form holds the person to it as they type."""


class TicketPage:
    """A ticket's page and its live part, for one inbox's ``Pages``."""

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
        partial = "partial" in request.query_params and request.method == "GET"
        try:
            if partial:  # the page polls: an unchanged ticket is answered from one describe, with no body
                description = await pages.desk.check(workflow_id)
                status_now = status_name(description.status)
                drawn = self.version(person, description.run_id, description.history_length, status_now)
                if drawn in if_none_match(request):
                    return Response(status_code=304, headers={"ETag": drawn})
            ticket = await pages.desk.ticket(workflow_id)
        except NotATicketError:
            return self.no_ticket(request, person, workflow_id)
        if notice is None and request.method == "GET":  # what became of this person's answer, if it was theirs
            keys, sealed = pages.auth.keys, request.query_params.get("notice")
            notice = unseal(keys, sealed, binding=person.binding, workflow_id=workflow_id, now=now())
        version = self.version(person, ticket.run_id, ticket.history_length, ticket.status)
        context = {
            "person": person,
            "csrf": pages.auth.keys.csrf(person.binding),
            "ticket": ticket,
            "notice": notice,
            "standing": standing(ticket.request, person.name) if ticket.request else None,
            "version": version,
        }
        response = pages.page(request, "_ticket.html" if partial else "ticket.html", status, **context)
        if partial:
            response.headers["ETag"] = version
        return response

    def version(self, person: Person, run_id: str, history_length: int, status: str) -> str:
        """The live part's ``ETag``: it changes whenever the run's history grows, the run continues as new or closes,
        and differs from person to person (their page holds their own buttons and token), telling nobody anything."""
        drawn = json.dumps([person.binding, run_id, history_length, status])
        return f'"{self.pages.auth.keys.mac("live", drawn)[:32]}"'


def if_none_match(request: Request) -> set[str]:
    """The versions a poll says it has, as strong tags: a proxy that compresses may have weakened them (``W/``)."""
    header = request.headers.get("if-none-match", "")
    return {tag.strip().removeprefix("W/") for tag in header.split(",") if tag.strip()}
