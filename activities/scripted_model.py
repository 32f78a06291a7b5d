"""A scripted stand-in for the model: for tests, benchmarks and the demo, and a worker told to run it on purpose.

It plays a support desk's script for whatever order the customer names: look the order up,
refund its amount, email the customer, answer. It keeps the one property of a real model that matters to
durability: asked again about the same step, it answers differently. Each time it has already been asked
about the refund step, it proposes 10.00 less, as a model at a non-zero temperature might change its mind (never
more than the order: the workflow refuses a refund past what is left of the charge, so the changed answer must be
one it can pay). That is what makes "was the model asked twice?" visible in the refunds table.

The script refunds for real, on whatever orders the database holds. A worker an operator runs on it (not the dev
stack, whose orders are the demo's) says so on every ticket (``announce``), where whoever reads the logs of the
tickets will see it, not only once at a start long scrolled away.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from temporalio import activity

from activities.business.model_calls import ModelCalls
from activities.contracts.conversation import (
    ContentBlock,
    Decision,
    Message,
    TextBlock,
    ThinkRequest,
    TicketContext,
    ToolResultBlock,
    ToolUseBlock,
)
from activities.contracts.fields import amount, find_order_id
from activities.contracts.world import OrderLookup

CHANGE_OF_MIND_CENTS = 1000
SUMMARY_RESULT_CHARS = 200
ON_ITS_WAY = "on its way"
"""A question with these words makes the script wait for the carrier's scan before it refunds anything."""
WAIT_HOURS = 48
MAX_REFUND_REQUESTS = 2
"""A refund whose outcome the agent was not told is asked for once more, as a model told to resolve the
ticket plausibly would, and then handed over: what a refund told "the tool failed" leads to."""


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


def current_turn(messages: list[Message]) -> tuple[str, list[Message], bool]:
    """What the customer wrote that the model is answering now, the messages since, and whether it is a reply
    to an answer given before (a ticket kept open for replies) rather than the question."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == "assistant" and not any(isinstance(b, ToolUseBlock) for b in message.content):
            since = messages[index + 1 :]
            return first_user_text(since), since, True
    return first_user_text(messages), messages, False


class ScriptedModel:
    name = "scripted"

    def __init__(self, model_calls: ModelCalls, think_seconds: float = 0.0, *, announce: bool = False) -> None:
        self.model_calls = model_calls
        self.think_seconds = think_seconds
        self.announce = announce
        """Warn at each ticket's first model call that a script, not a model, decides its refunds."""

    async def decide(self, request: ThinkRequest) -> Decision:
        calls = await asyncio.to_thread(self.model_calls.of, request.ticket.ticket_id)
        if self.announce and not calls:  # the call log is shared: once per ticket, whichever worker takes it
            activity.logger.warning(
                "a script, not a model, is deciding this ticket's refunds (AGENT_MODEL_BACKEND=scripted)",
                extra={"ticket_id": request.ticket.ticket_id},
            )
        asked_before = sum(1 for call in calls if call.step == request.step)
        if self.think_seconds:
            await asyncio.sleep(self.think_seconds)
        return script(request, asked_before)

    async def summarize(self, _ticket: TicketContext, messages: list[Message]) -> Decision:
        """What a model's summary keeps: the question, and every tool call with the start of its result."""
        lines = [f"The customer asked: {first_user_text(messages)}"]
        lines += [
            f"- {e.call.name}({json.dumps(e.call.input, sort_keys=True)}) "
            f"{'failed' if e.result.is_error else 'returned'}: {e.result.content[:SUMMARY_RESULT_CHARS]}"
            for e in exchanges(messages)
        ]
        return answer("\n".join(lines))


@dataclass(frozen=True)
class ScriptedTurn:
    """What the script looks at to choose its next move."""

    request: ThinkRequest
    history: list[Exchange]
    order_id: str
    asked_before: int
    text: str
    """What the customer wrote that this turn answers."""

    def use(self, name: str, **tool_input: object) -> Decision:
        call_id = f"toolu_{self.request.step:02d}_{len(self.history)}"
        return Decision(content=[ToolUseBlock(id=call_id, name=name, input=tool_input)], stop_reason="tool_use")

    def email(self, subject: str, body: str) -> Decision:
        return self.use("send_email", to=self.request.ticket.customer_email, subject=subject, body=body)


def script(request: ThinkRequest, asked_before: int) -> Decision:
    """The next move for a conversation, given how often this step was asked about already. A reply to an
    earlier answer is a new turn: the script plays again for the order it names, or thanks the customer."""
    text, messages, reply = current_turn(request.messages)
    order_id = find_order_id(text)
    if order_id is None and reply:
        return answer(
            "Thank you for your message. A refund shows on your statement within 5 to 10 business days. If there "
            "is anything else, reply with the order's number."
        )
    if order_id is None:
        return answer("Which order is this about? Please reply with its number, such as A-1001.")
    turn = ScriptedTurn(request, exchanges(messages), order_id, asked_before, text)
    if not turn.history:
        return turn.use("lookup_order", order_id=order_id)
    after = AFTER.get(turn.history[-1].call.name)
    return after(turn, turn.history[-1]) if after else answer("I have passed your ticket to a colleague.")


def after_lookup(turn: ScriptedTurn, last: Exchange) -> Decision:
    if last.result.is_error:
        return answer(f"I could not find order {turn.order_id}. A colleague will look into your ticket.")
    order = OrderLookup.model_validate(json.loads(last.result.content))
    if ON_ITS_WAY in turn.text.lower():
        return turn.use("wait_for_delivery_scan", order_id=turn.order_id, hours=WAIT_HOURS)
    return refund(turn, order)


def after_wait(turn: ScriptedTurn, last: Exchange) -> Decision:
    """The carrier said something: tell the customer. It did not: the parcel is lost, refund it."""
    if last.result.is_error or last.result.content.startswith("Reported"):
        return answer(f"About order {turn.order_id}: {last.result.content}")
    lookup = next(e for e in turn.history if e.call.name == "lookup_order")
    return refund(turn, OrderLookup.model_validate(json.loads(lookup.result.content)))


def refund(turn: ScriptedTurn, order: OrderLookup) -> Decision:
    less = order.amount_cents - CHANGE_OF_MIND_CENTS * turn.asked_before
    amount = less if less > 0 else order.amount_cents
    return turn.use("issue_refund", order_id=turn.order_id, amount_cents=amount)


def after_refund(turn: ScriptedTurn, last: Exchange) -> Decision:
    if not last.result.is_error:
        refund = re.search(r"refund #\d+", last.result.content)
        paid = amount(int(last.call.input["amount_cents"]), looked_up_currency(turn))
        suffix = f" ({refund.group(0)})." if refund else "."
        return turn.email(
            f"Your refund for {turn.order_id}", f"We have refunded {paid} for order {turn.order_id}{suffix}"
        )
    if "approve" in last.result.content or "declined" in last.result.content:
        return turn.email(
            f"About your order {turn.order_id}",
            f"We could not approve a refund for order {turn.order_id}. A colleague will be in touch.",
        )
    if sum(1 for e in turn.history if e.call.name == "issue_refund") < MAX_REFUND_REQUESTS:
        return turn.use("issue_refund", **last.call.input)
    return answer(f"I could not refund order {turn.order_id}: {last.result.content} A colleague will take over.")


def looked_up_currency(turn: ScriptedTurn) -> str | None:
    """The currency of the order as the turn looked it up (None if it did not, or could not)."""
    for exchange in turn.history:
        if exchange.call.name == "lookup_order" and not exchange.result.is_error:
            return OrderLookup.model_validate(json.loads(exchange.result.content)).currency
    return None


def after_email(turn: ScriptedTurn, last: Exchange) -> Decision:
    if last.result.is_error:
        return answer(f"About order {turn.order_id}: I could not email you ({last.result.content}); a colleague will.")
    return answer(f"I have emailed you about order {turn.order_id}: {last.call.input.get('body', '')}")


AFTER: dict[str, Callable[[ScriptedTurn, Exchange], Decision]] = {
    "lookup_order": after_lookup,
    "issue_refund": after_refund,
    "send_email": after_email,
    "wait_for_delivery_scan": after_wait,
}


def answer(text: str) -> Decision:
    content: list[ContentBlock] = [TextBlock(text=text)]
    return Decision(content=content, stop_reason="end_turn")
