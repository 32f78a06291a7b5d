"""A local stand-in for Anthropic's Messages API, for the real ``anthropic`` client to talk HTTP to.

It answers ``POST /v1/messages`` with the replies a test scripts, in order (a response, an error status
with its headers, or a reply that comes too late), or, with none scripted, what a test's ``plays`` answers for
the request (a model behind it: ``tests.support.scripted_api``), and records every request it was sent. It
keeps the rules of the real API that the agent must not break, and answers a request that breaks one with the 400
the real API would send: the conversation starts with the user and alternates; no turn is empty; every
``tool_use`` is answered by a ``tool_result`` with its id at the start of the next user turn; and an
assistant turn that came from the API goes back exactly as it came, thinking blocks and all.

It runs in a thread (``http.server``), on 127.0.0.1 and a port the system picks, so it answers while the
test's event loop waits on a worker.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "claude-sonnet-5-5"
USAGE = {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}

_ids = itertools.count(1)


@dataclass(frozen=True)
class Reply:
    body: dict[str, Any]
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    """Seconds to wait before answering: longer than the client's timeout makes a timeout."""


@dataclass(frozen=True)
class Recorded:
    headers: dict[str, str]
    body: dict[str, Any]
    at: float
    """``time.monotonic()`` when the request arrived."""

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = self.body["messages"]
        return messages


def message(
    *content: dict[str, Any], stop_reason: str = "end_turn", usage: dict[str, int] | None = None, **extra: Any
) -> Reply:
    return Reply(
        {
            "id": f"msg_{next(_ids):04d}",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": list(content),
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {**USAGE, **(usage or {})},
            **extra,
        }
    )


def text(words: str) -> dict[str, Any]:
    return {"type": "text", "text": words}


def tool_use(name: str, **tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{next(_ids):04d}", "name": name, "input": tool_input}


def thinking(thought: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": thought, "signature": f"sig-{next(_ids):04d}"}


def error(status: int, kind: str, detail: str, headers: dict[str, str] | None = None, delay: float = 0) -> Reply:
    return Reply({"type": "error", "error": {"type": kind, "message": detail}}, status, headers or {}, delay)


class FakeMessagesAPI:
    def __init__(self, plays: Callable[[dict[str, Any]], Reply] | None = None) -> None:
        self.plays = plays
        """What answers a request when no reply is scripted; called outside the lock, from the request's own
        thread, so it may take its time (hold a step) while other requests are answered."""
        self.replies: deque[Reply] = deque()
        self.requests: list[Recorded] = []
        self.issued: list[list[dict[str, Any]]] = []
        """The content of every response sent, to check that assistant turns come back unchanged."""
        self.lock = threading.Lock()
        self.closing = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        self.server.fake = self  # type: ignore[attr-defined] # how a handler finds the script it plays

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, *replies: Reply) -> None:
        with self.lock:
            self.replies.extend(replies)

    @contextmanager
    def running(self) -> Iterator[FakeMessagesAPI]:
        thread = threading.Thread(target=self.server.serve_forever, name="fake-messages-api", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.closing.set()
            self.server.shutdown()
            self.server.server_close()
            thread.join(5)

    def answer(self, body: dict[str, Any]) -> Reply:
        with self.lock:
            broken = self.broken_rule(body)
            if broken:
                return error(400, "invalid_request_error", broken)
            reply = self.replies.popleft() if self.replies else None
        if reply is None:
            if self.plays is None:
                return error(400, "invalid_request_error", "the fake Messages API has no reply scripted for this")
            reply = self.plays(body)
        if reply.status == 200:
            with self.lock:
                self.issued.append(reply.body["content"])
        return reply

    def broken_rule(self, body: dict[str, Any]) -> str | None:
        """What the real API would refuse in this request, in its words; None if nothing."""
        messages: list[dict[str, Any]] = body.get("messages", [])
        if not messages or messages[0]["role"] != "user":
            return "messages: the first message must use the user role"
        for n, this in enumerate(messages):
            after = messages[n + 1] if n + 1 < len(messages) else None
            if not this["content"]:
                return f"messages.{n}: all messages must have non-empty content"
            if after is not None and after["role"] == this["role"]:
                return f"messages.{n + 1}: roles must alternate between user and assistant"
            if this["role"] == "assistant":
                problem = self.not_as_sent(this["content"]) or (after and unanswered(this, after))
                if problem:
                    return f"messages.{n}: {problem}"
        return None

    def not_as_sent(self, content: list[dict[str, Any]]) -> str | None:
        sent = [_without_cache_control(block) for block in content]
        for issued in self.issued:
            if any(sent[i : i + len(issued)] == issued for i in range(len(sent) - len(issued) + 1)):
                return None
        return "an assistant turn must be sent back exactly as the API returned it (thinking blocks included)"


def unanswered(assistant: dict[str, Any], user: dict[str, Any]) -> str | None:
    asked = [b["id"] for b in assistant["content"] if b["type"] == "tool_use"]
    leading = list(itertools.takewhile(lambda b: b["type"] == "tool_result", user["content"]))
    answered = [b["tool_use_id"] for b in leading]
    if sorted(asked) != sorted(answered) or any(b["type"] == "tool_result" for b in user["content"][len(leading) :]):
        return (
            f"tool_use ids {asked} must each be answered by a tool_result block at the start of the next user "
            f"turn, which answers {answered}"
        )
    return None


def _without_cache_control(block: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in block.items() if key != "cache_control"}


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        fake: FakeMessagesAPI = self.server.fake  # type: ignore[attr-defined]
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        with fake.lock:
            fake.requests.append(Recorded({k.lower(): v for k, v in self.headers.items()}, body, time.monotonic()))
        reply = fake.answer(body)
        if reply.delay and fake.closing.wait(reply.delay):
            return
        payload = json.dumps(reply.body).encode()
        try:
            self.send_response(reply.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.send_header("request-id", f"req_{next(_ids):04d}")
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up waiting (a timeout test): nobody is left to answer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        """Quiet: pytest shows what the test asserts, not an access log."""
