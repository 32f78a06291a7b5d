"""The approval inbox's outer wall: which host names it answers to, and the headers every response carries.

A page elsewhere can point a host name of its own at the inbox's address (DNS rebinding) and then read the inbox's
pages as if they were its own; the inbox answers only the host names it is known by (the public URL's, or on the
loopback, loopback names), reading the ``Host`` header itself. Every response says it may not be framed, must not
be sniffed as another type, and may run no script but the inbox's own file.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_worker.inbox.auth import Authenticator, origin_of
from agent_worker.loopback import loopback_name

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


@dataclass(frozen=True)
class Site:
    """Where the inbox is, as people reach it."""

    base_path: str = ""
    public_url: str | None = None
    """Set: the only host the inbox answers to and the only origin it takes forms from."""
    loopback: bool = True
    """Listening on a loopback address only: then, with no public URL, only loopback host names are served."""

    @property
    def public_origin(self) -> str | None:
        return origin_of(self.public_url) if self.public_url else None


class Guard:
    """Refuses requests for a host this inbox does not serve (a name an attacker re-pointed at it), and adds the
    security headers to every response. Plain ASGI: it changes no body, and streams (the export) pass through as they
    come."""

    def __init__(self, app: ASGIApp, site: Site, auth: Authenticator) -> None:
        self.app, self.site, self.auth = app, site, auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        if refusal := self.refuse(request):
            await PlainTextResponse(refusal, status_code=421, headers=SECURITY_HEADERS)(scope, receive, send)
            return
        static = request.url.path.startswith(f"{self.site.base_path}/static/")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
                if not static:
                    headers["Cache-Control"] = "no-store"
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def refuse(self, request: Request) -> str | None:
        if request.url.path == f"{self.site.base_path}/healthz":
            return None  # a health check comes by any name, and learns nothing but "ok"
        host = host_name(request.headers.get("host", ""))
        public = self.site.public_url
        if public is not None:
            wanted = urlsplit(public).netloc.lower()
            if request.headers.get("host", "").lower() != wanted:
                return f"this inbox answers to {wanted}"
        elif self.site.loopback and not self.auth.trusted(peer(request)) and not loopback_name(host):
            return "this inbox serves only loopback host names (localhost, 127.0.0.1)"
        return None


def host_name(header: str) -> str | None:
    """The name in a ``Host`` header (``name``, ``name:port``, ``[v6]:port``); None if it is not one. Read here rather
    than from Starlette's URL, which falls back to the listening address for a malformed header."""
    parts = urlsplit(f"//{header}")
    try:
        parts.port  # noqa: B018 - raises for a port that is not a number
    except ValueError:
        return None
    if not parts.hostname or parts.path or parts.query or parts.fragment or parts.username is not None:
        return None
    return parts.hostname


def peer(request: Request) -> str | None:
    return request.client.host if request.client else None
