"""What every page of the approval inbox stands on: its templates, who is asking, the inbox's own origin, and the
one way to name a ticket's page.

Each group of routes (``login``, ``lists``, ``ticket_page``, ``answering``, ``export``) is bound to one ``Pages``,
so they render with the same templates and judge a request's sender and origin alike.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.templating import Jinja2Templates

from agent_worker.inbox.auth import SESSION_COOKIE, Authenticator, Person, same_origin
from agent_worker.inbox.desk import TABS, Desk
from agent_worker.inbox.formats import ago, shown, utc
from agent_worker.inbox.guard import Site, peer
from agent_worker.inbox.standing import progress, what_yours_does
from agent_worker.loopback import loopback_name
from agent_worker.transcript import SAID, decided_plainly, plainly, unanswered_plainly

HERE = Path(__file__).parent


def ticket_path(workflow_id: str, action: str = "", **params: object) -> str:
    """The one way to name a ticket's page (``action``: its ``events`` or ``answer``), relative to the inbox's root:
    ``ticket?id=...``, every character of the id but letters, digits and ``_.-~`` percent-encoded, so no id can
    read as a path, another parameter or a fragment."""
    query = urlencode({"id": workflow_id, **{k: str(v) for k, v in params.items()}}, quote_via=quote, safe="")
    return f"ticket{'/' + action if action else ''}?{query}"


def forbidden(text: str) -> Response:
    return PlainTextResponse(text, status_code=403)


class Pages:
    """The inbox's templates and its view of a request, bound to one desk (Temporal), one authenticator and one
    site."""

    def __init__(self, desk: Desk, auth: Authenticator, site: Site) -> None:
        self.desk, self.auth, self.site = desk, auth, site
        self.templates = Jinja2Templates(directory=HERE / "templates")
        self.templates.env.filters.update(money=shown, ago=ago, utc=utc, ticket_url=self.ticket_url)
        self.templates.env.filters.update(progress=progress, what_yours_does=what_yours_does)
        self.templates.env.filters.update(plainly=plainly, decided=decided_plainly)
        self.templates.env.filters.update(payout_noun=desk.tools.payout_noun, unanswered=unanswered_plainly)
        self.templates.env.globals.update(base=site.base_path, tabs=TABS, said=SAID)

    # --- who is asking ---------------------------------------------------------------------------------------

    async def person(self, request: Request, *, active: bool | None = None) -> Person | None:
        """Who sent the request (the session's row is read in a thread: the database blocks). A page's live part,
        fetched by the page itself, is not the person's doing: it keeps no session from idling out."""
        token = request.cookies.get(SESSION_COOKIE)
        active = "partial" not in request.query_params if active is None else active
        return await asyncio.to_thread(self.auth.person, peer(request), request.headers, token, active=active)

    def address(self, request: Request) -> str | None:
        """Where the person is, for the sign-in throttle: the connection's address, or behind a trusted proxy (or
        load balancer), the last address its ``X-Forwarded-For`` names, the one the proxy itself saw."""
        connection = peer(request)
        forwarded = request.headers.get("x-forwarded-for", "")
        if self.auth.trusted(connection) and forwarded.strip():
            return forwarded.split(",")[-1].strip()
        return connection

    def own_origin(self, request: Request) -> str:
        """The inbox's origin as the browser sees it: the public URL's, else the request's own (its scheme as the
        single-sign-on proxy reports it, from the proxy only)."""
        if self.site.public_origin:
            return self.site.public_origin
        scheme = request.url.scheme
        forwarded = request.headers.get("x-forwarded-proto", "").lower()
        if self.auth.trusted(peer(request)) and forwarded in {"http", "https"}:
            scheme = forwarded
        return f"{scheme}://{request.headers.get('host', '')}".lower()

    def secure(self, request: Request) -> bool:
        """Whether cookies get ``Secure``: everywhere but plain http on this machine itself (a browser keeps no
        ``Secure`` cookie from an http page elsewhere, and on the loopback nothing crosses a network)."""
        origin = self.own_origin(request)
        return origin.startswith("https://") or not loopback_name(urlsplit(origin).hostname)

    def from_here(self, request: Request) -> bool:
        return same_origin(request.headers.get("origin"), request.headers.get("referer"), self.own_origin(request))

    def must_sign_in(self, request: Request, *, page: bool = True) -> Response:
        """To the sign-in page from a page; a plain 401 to a script (a live part) or a form."""
        if page and request.method == "GET" and "partial" not in request.query_params:
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse(f"{self.site.base_path}/login?next={quote(target)}", status_code=303)
        return PlainTextResponse("sign in first", status_code=401)

    @property
    def cookie_path(self) -> str:
        return self.site.base_path or "/"

    # --- pages -----------------------------------------------------------------------------------------------

    def page(self, request: Request, name: str, status: int = 200, **context: Any) -> Response:
        return self.templates.TemplateResponse(request, name, context, status_code=status)

    def ticket_url(self, workflow_id: str, action: str = "", **params: object) -> str:
        """The ``ticket_url`` filter: a ticket's address under this inbox's base path (``ticket_path``)."""
        return f"{self.site.base_path}/{ticket_path(workflow_id, action, **params)}"
