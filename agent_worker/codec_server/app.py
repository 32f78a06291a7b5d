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

In both, CORS answers only the configured Web UI origin, and a request that carries another ``Origin`` is
refused before anything is decoded. No ``Access-Control-Allow-Credentials``: the token travels in a header,
not a cookie, and the Web UI sends no cookies unless told to ("include credentials", off by default).

It opens payloads strictly (``EncryptionCodec.open``), where the worker's ``decode`` hands on a marker: a
person asking to see a payload is told why it cannot be shown (422, naming the key id, or saying it failed
authentication) rather than shown a marker that looks like data.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import structlog
from aiohttp import web
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from agent_worker.codec import EncryptionCodec, UnreadablePayloadError
from agent_worker.codec_server.auth import BearerAuth, KeysUnavailableError, UnauthorizedError
from agent_worker.loopback import loopback_name, loopback_only

log = structlog.get_logger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ALLOWED_HEADERS = "Authorization, Content-Type, X-Namespace"
LOCAL = "local"
"""Who a request is in local mode: whoever can reach the loopback."""
WHO = web.RequestKey("who", str)


class UnsafeBindError(ValueError):
    """Local mode asked to listen where others can reach it."""


def make_app(codec: EncryptionCodec, auth: BearerAuth | None, origin: str) -> web.Application:
    """The codec server: with ``auth`` None, the local mode (the caller must bind it to a loopback address)."""

    def cors(response: web.StreamResponse, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Origin") == origin:
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Access-Control-Allow-Methods"] = "POST"
            response.headers["Access-Control-Allow-Headers"] = ALLOWED_HEADERS
            response.headers["Access-Control-Max-Age"] = "600"
            response.headers["Vary"] = "Origin"
        return response

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if auth is None and not loopback_name(request.url.host):
            return refuse(403, f"this codec server serves only loopback host names, not {request.url.host!r}")
        sent_from = request.headers.get("Origin")
        if sent_from is not None and sent_from != origin:
            return refuse(403, f"requests from {sent_from} are not served; this codec server answers {origin}")
        if request.method == "OPTIONS":  # a browser's preflight carries no credentials
            return cors(web.Response(status=204 if sent_from else 403), request)
        refused = await authenticate(auth, request)
        return cors(refused or await handler(request), request)

    async def decode(payloads: Sequence[Payload]) -> list[Payload]:
        return [codec.open(payload) for payload in payloads]

    app = web.Application(middlewares=[guard])
    app.router.add_post("/decode", route(decode))
    app.router.add_post("/encode", route(codec.encode))
    app.router.add_route("OPTIONS", "/{tail:.*}", route(decode))  # answered by the guard
    return app


async def authenticate(auth: BearerAuth | None, request: web.Request) -> web.Response | None:
    """Note who sent the request, or the answer that refuses it: 401 saying why, or 503 when the identity
    provider's keys cannot be fetched (the codec server's problem, not the caller's)."""
    if auth is None:
        request[WHO] = LOCAL
        return None
    try:
        request[WHO] = await auth.identify(request.headers.get("Authorization"))
    except UnauthorizedError as error:
        challenge = f'Bearer error="invalid_token", error_description="{error}"'
        return refuse(401, str(error), **{"WWW-Authenticate": challenge})
    except KeysUnavailableError as error:
        reason = str(error)
    else:
        return None
    log.error("codec server cannot check tokens", reason=reason)
    return refuse(503, reason)


def refuse(status: int, error: str, **headers: str) -> web.Response:
    return web.json_response({"error": error}, status=status, headers=headers)


def route(transform: Callable[[Sequence[Payload]], Awaitable[list[Payload]]]) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        action = request.path.strip("/")
        try:
            payloads = json_format.Parse(await request.text(), Payloads())
            result = await transform(payloads.payloads)
        except UnreadablePayloadError as error:  # the request is well formed; a payload in it does not open
            return web.json_response({"error": f"cannot {action}: {error}", "key_id": error.key_id}, status=422)
        except (json_format.ParseError, ValueError, KeyError) as error:
            return web.json_response({"error": f"cannot {action}: {error}"}, status=400)
        # Who read what, never the payloads themselves: the codec server's own access log. At debug level: a
        # page of the Web UI makes a request per event.
        namespace = request.headers.get("X-Namespace")
        log.debug("codec server served", action=action, who=request[WHO], namespace=namespace, count=len(result))
        body = json_format.MessageToJson(Payloads(payloads=result))
        return web.Response(text=body, content_type="application/json")

    return handle


async def serve(codec: EncryptionCodec, auth: BearerAuth | None, origin: str, host: str, port: int) -> web.AppRunner:
    """Listen on ``host:port``; without ``auth``, only if ``host`` is a loopback address (``UnsafeBindError``)."""
    if auth is None and not loopback_only(host):
        raise UnsafeBindError(
            f"refusing to serve decrypted payloads on {host or 'every interface'} without authentication: anyone "
            f"who can reach it could read every ticket. Listen on 127.0.0.1 for a Web UI on this machine, or set "
            f"AGENT_CODEC_SERVER_JWKS_URL, AGENT_CODEC_SERVER_AUDIENCE and AGENT_CODEC_SERVER_ISSUER (the Web UI's "
            f"single sign-on) or AGENT_CODEC_SERVER_TOKEN (the temporal CLI's --codec-auth)"
        )
    runner = web.AppRunner(make_app(codec, auth, origin), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
