"""``agent-worker codec-server``: decrypts payloads for the Web UI and ``temporal --codec-endpoint``.

History on the server is ciphertext (``agent_worker.codec``); this endpoint turns it back into text for the
people allowed to see it, and for no one else. It speaks Temporal's codec server protocol: ``POST /decode``
and ``POST /encode`` with ``{"payloads": [...]}`` in protobuf JSON. It serves in one of two modes:

- **Local** (no authentication configured): for a Web UI on the same machine, such as the dev server's.
  That UI has no sign-on, so it can send no token (it sends ``Content-Type`` and ``X-Namespace``, no
  credentials). The server then listens only on a loopback address (``serve`` refuses any other) and
  answers only requests whose ``Host`` is a loopback name, so a web page whose host name an attacker
  re-points at 127.0.0.1 (DNS rebinding) is refused as well.
- **Authenticated** (``agent_worker.codec_server.auth``): every request needs a bearer token, a JWT access token
  the Web UI passes on from its single sign-on or a static token for the CLI, and it may listen anywhere.

In both, CORS (Starlette's ``CORSMiddleware``) answers only the configured Web UI origin, and a request that carries
another ``Origin`` is refused before anything is decoded. No ``Access-Control-Allow-Credentials``: the token travels
in a header, not a cookie, and the Web UI sends no cookies unless told to ("include credentials", off by default).

It opens payloads strictly (``EncryptionCodec.open``), where the worker's ``decode`` hands on a marker: a
person asking to see a payload is told why it cannot be shown (422, naming the key id, or saying it failed
authentication) rather than shown a marker that looks like data.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import structlog
from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send
from temporalio.api.common.v1 import Payload, Payloads

from agent_worker import serving
from agent_worker.codec import EncryptionCodec, UnreadablePayloadError
from agent_worker.codec_server.auth import BearerAuth, KeysUnavailableError, UnauthorizedError
from agent_worker.loopback import loopback_name, loopback_only

log = structlog.get_logger(__name__)

Transform = Callable[[Sequence[Payload]], Awaitable[list[Payload]]]
ALLOWED_HEADERS = ("Authorization", "Content-Type", "X-Namespace")
MAX_BODY_BYTES = 4 * 1024 * 1024
"""The most a request may carry: Temporal takes no gRPC message above 4 MiB, so no payload the Web UI or the CLI
holds is larger, and a caller cannot make the server hold more in memory."""
MAX_AGE = 600
"""Seconds a browser may keep a preflight's approval."""
LOCAL = "local"
"""Who a request is in local mode: whoever can reach the loopback."""


class UnsafeBindError(ValueError):
    """Local mode asked to listen where others can reach it."""


class _Guard:
    """Outside CORS, so that nothing is served to a page it must not serve: in local mode, a request whose ``Host``
    is not a loopback name (DNS rebinding); in both, one whose ``Origin`` is not the Web UI's, and a preflight with
    no ``Origin`` at all."""

    def __init__(self, app: ASGIApp, *, origin: str, local: bool) -> None:
        self.app, self.origin, self.local = app, origin, local

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refused = None
        sent_from = request.headers.get("Origin")
        if self.local and not loopback_name(request.url.hostname):
            refused = refuse(403, f"this codec server serves only loopback host names, not {request.url.hostname!r}")
        elif sent_from is not None and sent_from != self.origin:
            refused = refuse(403, f"requests from {sent_from} are not served; this codec server answers {self.origin}")
        elif request.method == "OPTIONS" and sent_from is None:  # not a browser's preflight
            refused = Response(status_code=403)
        if refused is not None:
            await refused(scope, receive, send)
            return
        await self.app(scope, receive, send)


class _Cors(CORSMiddleware):
    """Starlette's CORS, its preflight approved with 204, as the answer to a preflight has no content."""

    def preflight_response(self, request_headers: Headers) -> Response:
        answer = super().preflight_response(request_headers)
        if answer.status_code != 200:
            return answer
        headers = {k: v for k, v in answer.headers.items() if k not in {"content-length", "content-type"}}
        return Response(status_code=204, headers=headers)


def make_app(codec: EncryptionCodec, auth: BearerAuth | None, origin: str) -> Starlette:
    """The codec server: with ``auth`` None, the local mode (the caller must bind it to a loopback address)."""

    async def decode(payloads: Sequence[Payload]) -> list[Payload]:
        return [codec.open(payload) for payload in payloads]

    return Starlette(
        routes=[
            Route("/decode", route(decode, auth), methods=["POST"]),
            Route("/encode", route(codec.encode, auth), methods=["POST"]),
        ],
        middleware=[
            Middleware(_Guard, origin=origin, local=auth is None),
            # No allow_credentials: the token travels in a header, never a cookie.
            Middleware(
                _Cors, allow_origins=[origin], allow_methods=["POST"], allow_headers=ALLOWED_HEADERS, max_age=MAX_AGE
            ),
        ],
    )


async def authenticate(auth: BearerAuth | None, request: Request) -> str | Response:
    """Who sent the request, or the answer that refuses it: 401 saying why, or 503 when the identity provider's keys
    cannot be fetched (the codec server's problem, not the caller's)."""
    if auth is None:
        return LOCAL
    try:
        return await auth.identify(request.headers.get("Authorization"))
    except UnauthorizedError as error:
        challenge = f'Bearer error="invalid_token", error_description="{error}"'
        return refuse(401, str(error), **{"WWW-Authenticate": challenge})
    except KeysUnavailableError as error:
        reason = str(error)
    log.error("codec server cannot check tokens", reason=reason)
    return refuse(503, reason)


def refuse(status: int, error: str, **headers: str) -> Response:
    return JSONResponse({"error": error}, status_code=status, headers=headers)


async def bounded_body(request: Request) -> bytes | None:
    """The request's body, read no further than ``MAX_BODY_BYTES``: None past it."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            return None
    return bytes(body)


def route(transform: Transform, auth: BearerAuth | None) -> Callable[[Request], Awaitable[Response]]:
    async def handle(request: Request) -> Response:
        who = await authenticate(auth, request)
        if isinstance(who, Response):
            return who
        action = request.url.path.strip("/")
        body = await bounded_body(request)
        if body is None:
            return refuse(413, f"cannot {action}: a request of more than {MAX_BODY_BYTES} bytes is no payload's")
        try:
            payloads = json_format.Parse(body, Payloads())
            result = await transform(payloads.payloads)
        except UnreadablePayloadError as error:  # the request is well formed; a payload in it does not open
            return JSONResponse({"error": f"cannot {action}: {error}", "key_id": error.key_id}, status_code=422)
        except (json_format.ParseError, ValueError, KeyError) as error:
            return JSONResponse({"error": f"cannot {action}: {error}"}, status_code=400)
        # Who read what, never the payloads themselves: the codec server's own access log. At debug level: a
        # page of the Web UI makes a request per event.
        namespace = request.headers.get("X-Namespace")
        log.debug("codec server served", action=action, who=who, namespace=namespace, count=len(result))
        answer = json_format.MessageToJson(Payloads(payloads=result))
        return Response(answer, media_type="application/json")

    return handle


async def serve(codec: EncryptionCodec, auth: BearerAuth | None, origin: str, host: str, port: int) -> serving.Serving:
    """Listen on ``host:port``; without ``auth``, only if ``host`` is a loopback address (``UnsafeBindError``).
    Stopped by the ``cleanup`` of what it returns."""
    if auth is None and not loopback_only(host):
        raise UnsafeBindError(
            f"refusing to serve decrypted payloads on {host or 'every interface'} without authentication: anyone "
            f"who can reach it could read every ticket. Listen on 127.0.0.1 for a Web UI on this machine, or set "
            f"AGENT_CODEC_SERVER_JWKS_URL, AGENT_CODEC_SERVER_AUDIENCE and AGENT_CODEC_SERVER_ISSUER (the Web UI's "
            f"single sign-on) or AGENT_CODEC_SERVER_TOKEN (the temporal CLI's --codec-auth)"
        )
    return await serving.serve(make_app(codec, auth, origin), serving.bind(host, port), "codec server")
