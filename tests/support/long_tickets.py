"""Long tickets: one order's 20 KB event log read per step, for as many steps as asked, and the models that read
them. The history-growth tests, the benchmark (``bench/history_growth.py``) and the recorded histories run the
same tickets, so the figures in the README and the tests' bounds are about one thing."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from activities.business import Business
from activities.contracts.conversation import (
    Decision,
    Message,
    TextBlock,
    ThinkRequest,
    TicketContext,
    ToolUseBlock,
    Usage,
)
from activities.contracts.world import Order

EVENT_LOG_BYTES = 20_000


def order_id(step: int) -> str:
    return f"L-{step:05d}"


def seed_long_orders(store: Business, steps: int, size: int = EVENT_LOG_BYTES) -> None:
    """An order per step, each with an event log of ``size`` bytes that no other order shares."""
    for step in range(1, steps):
        store.orders.add(Order(order_id=order_id(step), amount_cents=1000, customer_email="ann@example.com"))
        line = f"{order_id(step)} scanned at depot, parcel on its way. "
        store.orders.add_event(order_id(step), (line * (size // len(line) + 1))[:size])


@dataclass
class LongTicketModel:
    """Reads one order's event log per step and answers at ``steps``; checks that every log it was handed
    arrived whole, wherever it was kept."""

    steps: int
    name: str = "long-ticket"

    async def decide(self, request: ThinkRequest) -> Decision:
        results = [b for m in request.messages for b in m.content if b.type == "tool_result"]
        if len(results) != request.step - 1 or any(len(r.content) < EVENT_LOG_BYTES for r in results):
            text = f"step {request.step}: {len(results)} results, not all whole"
            return Decision(content=[TextBlock(text=text)], stop_reason="end_turn")
        if request.step >= self.steps:
            return Decision(content=[TextBlock(text="All parcels are on their way.")], stop_reason="end_turn")
        call = ToolUseBlock(id=f"toolu_{request.step}", name="order_events", input={"order_id": order_id(request.step)})
        return Decision(content=[call], stop_reason="tool_use")


BYTES_PER_TOKEN = 4


@dataclass
class ContextBoundModel:
    """Reads one order's event log per step like ``LongTicketModel``, but as a real model sees it: it reports
    the conversation it is sent as its input tokens (4 bytes a token), and summarises when asked, so the
    ticket's ``summarize_above_tokens`` keeps what it reads bounded however long the ticket runs."""

    steps: int
    name: str = "context-bound"
    largest_input_tokens: int = 0
    summaries: int = 0

    async def decide(self, request: ThinkRequest) -> Decision:
        tokens = tokens_of(request.messages)
        self.largest_input_tokens = max(self.largest_input_tokens, tokens)
        if request.step >= self.steps:
            text = f"All parcels are on their way (read {self.summaries} summaries)."
            return Decision(content=[TextBlock(text=text)], stop_reason="end_turn", usage=Usage(input_tokens=tokens))
        call = ToolUseBlock(id=f"toolu_{request.step}", name="order_events", input={"order_id": order_id(request.step)})
        return Decision(content=[call], stop_reason="tool_use", usage=Usage(input_tokens=tokens, output_tokens=20))

    async def summarize(self, _ticket: TicketContext, messages: list[Message]) -> Decision:
        self.summaries += 1
        logs = [b.tool_use_id for m in messages for b in m.content if b.type == "tool_result"]
        text = f"Read {len(logs)} event logs ({', '.join(logs)}): every parcel is on its way."
        return Decision(content=[TextBlock(text=text)], usage=Usage(input_tokens=tokens_of(messages), output_tokens=30))


def tokens_of(messages: list[Message]) -> int:
    return sum(len(m.model_dump_json()) for m in messages) // BYTES_PER_TOKEN


def long_ticket(steps: int, *, steps_per_run: int = 100) -> dict[str, Any]:
    return {
        "ticket_id": f"T-long-{uuid.uuid4().hex[:6]}",
        "question": "Where are all my parcels?",
        "customer_email": "ann@example.com",
        "options": {"max_steps": steps, "continue_as_new_after_steps": steps_per_run},
    }
