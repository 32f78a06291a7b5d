"""``agent-worker codec-server``: decrypts payloads for the Web UI and ``temporal --codec-endpoint``.

History on the server is ciphertext (``agent_worker.codec``); this endpoint turns it back into text for the
people allowed to see it, and for no one else: every request needs the bearer token, CORS answers only the
configured Web UI origin, and it listens on 127.0.0.1 unless told otherwise. It speaks Temporal's codec
server protocol: ``POST /decode`` and ``POST /encode`` with ``{"payloads": [...]}`` in protobuf JSON.

It opens payloads strictly (``EncryptionCodec.open``), where the worker's ``decode`` hands on a marker: a
person asking to see a payload is told why it cannot be shown (422, naming the key id, or saying it failed
authentication) rather than shown a marker that looks like data.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from agent_worker.codec import EncryptionCodec, UnreadablePayloadError

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ALLOWED_HEADERS = "Authorization, Content-Type, X-Namespace"


def make_app(codec: EncryptionCodec, token: str, origin: str) -> web.Application:
    def cors(response: web.StreamResponse, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Origin") == origin:
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Access-Control-Allow-Credentials"] = "true"
            response.headers["Access-Control-Allow-Methods"] = "POST"
            response.headers["Access-Control-Allow-Headers"] = ALLOWED_HEADERS
            response.headers["Vary"] = "Origin"
        return response

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method == "OPTIONS":  # a browser's preflight carries no credentials
            allowed = request.headers.get("Origin") == origin
            return cors(web.Response(status=204 if allowed else 403), request)
        supplied = request.headers.get("Authorization", "")
        if not hmac.compare_digest(supplied.encode(), f"Bearer {token}".encode()):
            return cors(web.json_response({"error": "a valid bearer token is required"}, status=401), request)
        return cors(await handler(request), request)

    async def decode(payloads: Sequence[Payload]) -> list[Payload]:
        return [codec.open(payload) for payload in payloads]

    app = web.Application(middlewares=[guard])
    app.router.add_post("/decode", route(decode))
    app.router.add_post("/encode", route(codec.encode))
    app.router.add_route("OPTIONS", "/{tail:.*}", route(decode))  # answered by the guard
    return app


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
        body = json_format.MessageToJson(Payloads(payloads=result))
        return web.Response(text=body, content_type="application/json")

    return handle


async def serve(codec: EncryptionCodec, token: str, origin: str, host: str, port: int) -> web.AppRunner:
    runner = web.AppRunner(make_app(codec, token, origin), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
