"""The product's scripted desk (``activities.scripted_model``) played behind the local Messages API, so that worker
processes on Claude's backend, the real ``anthropic`` client included, serve many tickets at once as they would
against the real API, and a test can hold one ticket's model step until it lets it go: a ticket caught mid-turn,
with nothing in the product bent to catch it.

The script is the product's, with one reading added that a model would make: a carrier's scan that reports the
parcel ``lost`` is refunded, as the script refunds a scan that never came. So a ticket that waits for an event
ends, like the others, with one refund and one email.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from activities.contracts.conversation import Decision, Message, ThinkRequest, TicketContext
from activities.contracts.fields import find_order_id
from activities.contracts.world import OrderLookup
from activities.scripted_model import ScriptedTurn, current_turn, exchanges, refund, script
from tests.support.fake_messages_api import FakeMessagesAPI, Reply, message

LOST = "lost"
"""The event a relay sends for a parcel the carrier lost: ``{"order_id": ..., "event": "lost"}``."""
THIS_TICKET = re.compile(r"This ticket: (?P<ticket_id>\S+)\. The customer's email address: (?P<email>\S+)\.")
"""How Claude's system prompt names the ticket (``activities.prompt.ticket_context``)."""


@dataclass
class Hold:
    """One ticket's model step, held in the API's thread from when it is asked until the test releases it."""

    entered: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)

    async def reached(self, timeout: float = 60) -> None:
        """Wait until the step has been asked, and waits."""
        if not await asyncio.to_thread(self.entered.wait, timeout):
            raise TimeoutError(f"waited {timeout} s for the held model step to be asked")

    def release(self) -> None:
        self.released.set()


class ScriptedAPI:
    """The script behind a ``FakeMessagesAPI``; ``asked`` counts each ticket's requests per step."""

    def __init__(self) -> None:
        self.api = FakeMessagesAPI(plays=self.answer)
        self.asked: Counter[tuple[str, int]] = Counter()
        self._holds: dict[tuple[str, int], Hold] = {}
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return self.api.url

    @contextmanager
    def running(self) -> Iterator[ScriptedAPI]:
        try:
            with self.api.running():
                yield self
        finally:
            for hold in self._holds.values():  # a test that failed holding a step lets its thread go
                hold.release()

    def hold(self, ticket_id: str, step: int) -> Hold:
        """Hold ``ticket_id``'s model call at ``step`` (the first time it is asked) until released."""
        with self._lock:
            return self._holds.setdefault((ticket_id, step), Hold())

    def steps_asked(self, ticket_id: str) -> dict[int, int]:
        """How many times each of the ticket's steps was asked of the model."""
        with self._lock:
            return {step: n for (ticket, step), n in sorted(self.asked.items()) if ticket == ticket_id}

    def answer(self, body: dict[str, Any]) -> Reply:
        request = think_request(body)
        key = (request.ticket.ticket_id, request.step)
        with self._lock:
            self.asked[key] += 1
            hold = self._holds.get(key)
        if hold is not None and not hold.entered.is_set():
            hold.entered.set()
            while not (hold.released.wait(0.2) or self.api.closing.is_set()):
                pass
        decision = decide(request)
        return message(*(block.model_dump(mode="json") for block in decision.content), stop_reason=decision.stop_reason)


def think_request(body: dict[str, Any]) -> ThinkRequest:
    """The request as the script reads it: the ticket from the system prompt, the conversation as sent, and the step
    counted from the model's earlier answers in it (one a step, as the script answers)."""
    system = " ".join(block["text"] for block in body["system"])
    named = THIS_TICKET.search(system)
    assert named is not None, f"no ticket named in the system prompt: {system[-200:]}"
    messages = [
        Message.model_validate(
            {
                "role": m["role"],
                "content": [{k: v for k, v in block.items() if k != "cache_control"} for block in m["content"]],
            }
        )
        for m in body["messages"]
    ]
    step = 1 + sum(1 for m in messages if m.role == "assistant")
    return ThinkRequest(
        ticket=TicketContext(ticket_id=named["ticket_id"], customer_email=named["email"]), step=step, messages=messages
    )


def decide(request: ThinkRequest) -> Decision:
    """The product's script, answering each step as it does when first asked (a step asked again shows in
    ``ScriptedAPI.asked`` instead), but for a scan that reports the parcel lost: that is refunded."""
    text, messages, _ = current_turn(request.messages)
    done = exchanges(messages)
    order_id = find_order_id(text)
    if order_id and done and done[-1].call.name == "wait_for_delivery_scan" and done[-1].result.content.endswith(LOST):
        lookup = next(e for e in done if e.call.name == "lookup_order")
        order = OrderLookup.model_validate_json(lookup.result.content)
        return refund(ScriptedTurn(request, done, order_id, 0, text), order)
    return script(request, asked_before=0)
