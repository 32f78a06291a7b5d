"""The approval inbox as a Starlette application: pages rendered on the server, forms that work without script.

Routes, under the base path, each served by the module that owns its concern:

- ``GET /``: the tabs, and under "mine" the answers the person gave (``lists``).
- ``GET /ticket?id=ID``: a ticket's page, kept current by polling its live part (``&partial=1``) with the ``ETag``
  it was drawn at (``304`` while nothing happened); ``GET /tickets/ID``, the address before, still leads there
  (``ticket_page``). A ticket's id rides in the query string, encoded by ``pages.ticket_path`` alone.
- ``POST /ticket/answer?id=ID``: approve or decline, and for a large approval the confirmation page first
  (``answering``); the ``approve`` update it sends, and what the person is told of it (``sending``).
- ``GET /export.csv?from=YYYY-MM-DD&to=YYYY-MM-DD[&personal=1]``: the answers over a range of days, as CSV, for
  auditors; the customers' data only for the people ``AGENT_WEB_AUDITORS`` names (``export``).
- ``GET|POST /login``, ``POST /logout`` (``login``); ``GET /healthz`` for a proxy's health check; ``/static/`` for
  the script and the style sheet.

What every page shares (its templates, who is asking, the inbox's origin) is ``pages``. Every page is ``no-store``
and may not be framed; the content security policy lets in no script but the inbox's own file and no inline script
at all, so text from a ticket (a customer's words, the model's) can never run. Every POST must come from the
inbox's own origin and carry the CSRF token of the person sending it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from activities.business.audit import SqlAuditTrail
from agent_worker.inbox.answering import Answering
from agent_worker.inbox.auth import Authenticator
from agent_worker.inbox.desk import Desk
from agent_worker.inbox.export import Export
from agent_worker.inbox.guard import Guard, Site
from agent_worker.inbox.lists import Lists
from agent_worker.inbox.login import Login
from agent_worker.inbox.pages import HERE, Pages, ticket_path
from agent_worker.inbox.sending import Sender
from agent_worker.inbox.ticket_page import TicketPage

if TYPE_CHECKING:
    from activities.business.database import Database

__all__ = ["make_app", "ticket_path"]
"""``ticket_path`` lives in ``pages``; it is named here too, where the server and the tests take it from."""


def make_app(  # noqa: PLR0913 - what the inbox is bound to
    desk: Desk,
    auth: Authenticator,
    signing_key: bytes,
    site: Site,
    database: Database,
    *,
    confirm_above_cents: int,
    auditors: frozenset[str] = frozenset(),
) -> ASGIApp:
    """The inbox bound to one desk (Temporal), one authenticator, the key answers are signed with, one site, and the
    business database whose audit trail keeps every answer ("mine" and the export read it, the customers' data in
    the export for ``auditors`` alone)."""
    pages, trail = Pages(desk, auth, site), SqlAuditTrail(database)
    login, lists, ticket = Login(pages), Lists(pages, trail), TicketPage(pages)
    export = Export(pages, trail, auditors=auditors)
    answering = Answering(pages, ticket, Sender(desk, signing_key), confirm_above_cents=confirm_above_cents)
    routes: list[BaseRoute] = [
        Route("/", lists.inbox, methods=["GET"]),
        Route("/login", login.login_page, methods=["GET"]),
        Route("/login", login.login, methods=["POST"]),
        Route("/logout", login.logout, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/export.csv", export.export, methods=["GET"]),
        # The ticket's id is in the query string, whatever it holds (``ticket_path``).
        Route("/ticket", ticket.ticket, methods=["GET"]),
        Route("/ticket/answer", answering.answer, methods=["POST"]),
        Route("/ticket/answer", ticket.back_to_ticket, methods=["GET"]),
        Route("/ticket/verify-sender", answering.verify_sender, methods=["POST"]),
        Route("/tickets/{workflow_id:path}", ticket.old_address, methods=["GET"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    if site.base_path:
        routes = [Mount(site.base_path, routes=routes)]
    return Guard(Starlette(routes=routes), site, auth)


async def healthz(_request: Request) -> Response:
    return PlainTextResponse("ok")
