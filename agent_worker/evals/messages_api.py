"""The model behind a scenario: a local Messages API the worker's real ``anthropic`` client talks HTTP to.

Each scenario's worker gets a base URL of its own, ``http://127.0.0.1:PORT/<configuration>/<scenario>``, so every
request is known by the scenario and configuration that sent it. What answers depends on the source:

- ``recorded``: the responses stored for that scenario (``recordings.py``), looked up by the digest of the request.
  A request whose digest was never recorded (the prompt, the tools, the model or the conversation changed since)
  is answered with the 400 the real API gives a bad request, and the scenario is marked stale: it fails as stale,
  never passes on a response given to another question.
- ``script``: the scenario's own ``script:``, one turn per request, in order; a request past its end is refused,
  and the scenario marked so.
- ``claude``: the request goes on to Anthropic's API through the ``anthropic`` SDK, with the SDK's own credentials
  (``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``), and Claude's response comes back as it was sent.

Every exchange is kept, so ``--record`` can store them whatever the source.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agent_worker import serving
from agent_worker.evals.scenario import Scenario

Body = dict[str, Any]
Key = tuple[str, str]
"""A (configuration, scenario): whose request it is."""


def digest(request: Body) -> str:
    """What names a request: its whole body, canonically written. The worker sends the same body for the same
    conversation, prompt, tools and settings, so a change to any of them is a new digest."""
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class Exchange:
    request_digest: str
    response: Body


class CannotAnswerError(Exception):
    """A request the source cannot answer: the scenario is marked with ``why`` and the worker gets a 400."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class Source(Protocol):
    name: str

    async def respond(self, key: Key, request: Body, index: int) -> Body:
        """The response to the ``index``-th request (from 0) of a (configuration, scenario); else raises
        ``CannotAnswerError``."""
        ...


@dataclass
class Recorded:
    """Responses stored per scenario, found by the request's digest (the same request twice, as after a worker
    crash, gets the same response)."""

    recordings: Mapping[Key, list[Exchange]]
    name: str = "recorded"

    async def respond(self, key: Key, request: Body, index: int) -> Body:
        stored = self.recordings.get(key)
        if stored is None:
            raise CannotAnswerError("not recorded: no stored responses for this scenario (run with --record)")
        asked = digest(request)
        for exchange in stored:
            if exchange.request_digest == asked:
                return exchange.response
        raise CannotAnswerError(
            f"stale: request {index + 1} is not the one recorded (the prompt, the tools, the model or the "
            f"conversation changed since): record again with --record"
        )


@dataclass
class Scripted:
    """Each scenario's ``script:``, one turn a request. Token counts are estimated from the bytes sent and
    received (about four characters a token), so that cost and budgets have something to judge."""

    scenarios: Mapping[str, Scenario]
    name: str = "script"

    async def respond(self, key: Key, request: Body, index: int) -> Body:
        scenario = key[1]
        script = self.scenarios[scenario].script
        if index >= len(script):
            raise CannotAnswerError(f"script ran out: request {index + 1}, and the script has {len(script)} turns")
        turn = script[index]
        content: list[Body] = []
        if turn.say is not None:
            content.append({"type": "text", "text": turn.say})
        prefix = hashlib.sha256(scenario.encode()).hexdigest()[:8]
        for k, (tool, tool_input) in enumerate(turn.call.items()):
            content.append({"type": "tool_use", "id": f"toolu_{prefix}_{index}_{k}", "name": tool, "input": tool_input})
        return {
            "id": f"msg_{prefix}_{index}",
            "type": "message",
            "role": "assistant",
            "model": request.get("model", "script"),
            "content": content,
            "stop_reason": turn.stop or ("tool_use" if turn.call else "end_turn"),
            "stop_sequence": None,
            "usage": {
                "input_tokens": tokens(request),
                "output_tokens": tokens(content),
                "cache_read_input_tokens": 0,
                "cache_creation_input_tokens": 0,
            },
        }


def tokens(value: Any) -> int:
    return math.ceil(len(json.dumps(value, ensure_ascii=False)) / 4)


class Claude:
    """Anthropic's API, through the SDK as configured by its own environment."""

    name = "claude"

    def __init__(self) -> None:
        import anthropic  # noqa: PLC0415 - seconds to import; only a run on Claude needs it

        self.client = anthropic.AsyncAnthropic(max_retries=2)
        if not (self.client.api_key or self.client.auth_token):
            raise CannotAnswerError(
                "--model claude needs ANTHROPIC_API_KEY (or another credential the anthropic SDK reads)"
            )

    async def respond(self, key: Key, request: Body, index: int) -> Body:
        import anthropic  # noqa: PLC0415

        known = {"model", "max_tokens", "system", "tools", "tool_choice", "messages"}
        try:
            response = await self.client.messages.create(
                **{k: v for k, v in request.items() if k in known},
                extra_body={k: v for k, v in request.items() if k not in known} or None,
            )
        except anthropic.APIStatusError as error:
            raise CannotAnswerError(
                f"Claude refused request {index + 1} of {key[1]}: {error.status_code} {error.message}"
            ) from None
        body: Body = response.model_dump(mode="json", exclude_none=True)
        return body


@dataclass
class MessagesAPI:
    """The local API: one source, every exchange kept per (configuration, scenario), and why a scenario's
    request was refused, if one was."""

    source: Source
    exchanges: dict[Key, list[Exchange]] = field(default_factory=lambda: defaultdict(list))
    refused: dict[Key, str] = field(default_factory=dict)
    _serving: serving.Serving | None = None
    port: int = 0

    async def start(self) -> MessagesAPI:
        app = Starlette(routes=[Route("/{config}/{scenario}/v1/messages", self._messages, methods=["POST"])])
        self._serving = await serving.serve(app, serving.bind("127.0.0.1", 0), "stand-in Messages API")
        self.port = self._serving.port
        return self

    async def stop(self) -> None:
        if self._serving is not None:
            await self._serving.cleanup()

    def base_url(self, config: str, scenario: str) -> str:
        return f"http://127.0.0.1:{self.port}/{config}/{scenario}"

    async def _messages(self, request: Request) -> JSONResponse:
        key = (request.path_params["config"], request.path_params["scenario"])
        body: Body = await request.json()
        asked = self.exchanges[key]
        try:
            response = await self.source.respond(key, body, len(asked))
        except CannotAnswerError as refused:
            self.refused.setdefault(key, refused.why)
            error = {"type": "error", "error": {"type": "invalid_request_error", "message": refused.why}}
            return JSONResponse(error, status_code=400)
        asked.append(Exchange(digest(body), response))
        return JSONResponse(response)
