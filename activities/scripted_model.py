"""A scripted stand-in for the model, used wherever no Anthropic API key is configured.

It plays the seed article's support script for whatever order the customer names: look the order up,
refund its amount, email the customer, answer. It keeps the one property of a real model that matters to
durability: asked again about the same step, it answers differently. Each time it has already been asked
about the refund step, it proposes 10.00 more, as a model at a non-zero temperature might change its mind.
That is what makes "was the model asked twice?" visible in the refunds table.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass

from activities.contracts import (
    ContentBlock,
    Decision,
    Message,
    Order,
    TextBlock,
    ThinkRequest,
    ToolResultBlock,
    ToolUseBlock,
    find_order_id,
    money,
)
from activities.store import BusinessStore

CHANGE_OF_MIND_CENTS = 1000
MAX_REFUND_REQUESTS = 2
"""A refund whose outcome the agent was not told is asked for once more, as a model told to resolve the
ticket plausibly would (the seed's table row 5), and then handed over."""


@dataclass(frozen=True)
class Exchange:
    """One tool call and the result the model was given for it."""

    call: ToolUseBlock
    result: ToolResultBlock


def exchanges(messages: list[Message]) -> list[Exchange]:
    calls = {b.id: b for m in messages for b in m.content if isinstance(b, ToolUseBlock)}
    return [
        Exchange(calls[b.tool_use_id], b)
        for m in messages
        for b in m.content
        if isinstance(b, ToolResultBlock) and b.tool_use_id in calls
    ]


def first_user_text(messages: list[Message]) -> str:
    for message in messages:
        if message.role == "user":
            return " ".join(b.text for b in message.content if isinstance(b, TextBlock))
    return ""


class ScriptedModel:
    name = "scripted"

    def __init__(self, store: BusinessStore, think_seconds: float = 0.0) -> None:
        self.store = store
        self.think_seconds = think_seconds

    async def decide(self, request: ThinkRequest) -> Decision:
        calls = await asyncio.to_thread(self.store.model_calls, request.ticket.ticket_id)
        asked_before = sum(1 for call in calls if call.step == request.step)
        if self.think_seconds:
            await asyncio.sleep(self.think_seconds)
        return script(request, asked_before)


def script(request: ThinkRequest, asked_before: int) -> Decision:
    """The next move for a conversation, given how often this step was asked about already."""
    history = exchanges(request.messages)
    order_id = find_order_id(first_user_text(request.messages))

    def use(name: str, **tool_input: object) -> Decision:
        call = ToolUseBlock(id=f"toolu_{request.step:02d}_{len(history)}", name=name, input=tool_input)
        return Decision(content=[call], stop_reason="tool_use")

    if order_id is None:
        return answer("Which order is this about? Please reply with its number, such as A-1001.")
    if not history:
        return use("lookup_order", order_id=order_id)

    last = history[-1]
    if last.call.name == "lookup_order":
        if last.result.is_error:
            return answer(f"I could not find order {order_id}. A colleague will look into your ticket.")
        order = Order.model_validate(json.loads(last.result.content))
        return use("issue_refund", order_id=order_id, amount_cents=order.amount_cents + CHANGE_OF_MIND_CENTS * asked_before)

    if last.call.name == "issue_refund":
        if not last.result.is_error:
            refund = re.search(r"refund #\d+", last.result.content)
            body = f"We have refunded {money(int(last.call.input['amount_cents']))} for order {order_id}" + (
                f" ({refund.group(0)})." if refund else "."
            )
            return use("send_email", to=request.ticket.customer_email, subject=f"Your refund for {order_id}", body=body)
        if "approve" in last.result.content or "declined" in last.result.content:
            return use(
                "send_email", to=request.ticket.customer_email, subject=f"About your order {order_id}",
                body=f"We could not approve a refund for order {order_id}. A colleague will be in touch.",
            )
        refund_requests = sum(1 for e in history if e.call.name == "issue_refund")
        if refund_requests < MAX_REFUND_REQUESTS:
            return use("issue_refund", **last.call.input)
        return answer(f"I could not refund order {order_id}: {last.result.content} A colleague will take over.")

    if last.call.name == "send_email":
        return answer(f"I have emailed you about order {order_id}: {last.call.input.get('body', '')}")

    return answer("I have passed your ticket to a colleague.")


def answer(text: str) -> Decision:
    content: list[ContentBlock] = [TextBlock(text=text)]
    return Decision(content=content, stop_reason="end_turn")
