"""The baseline, not the product: the plain agent loop the seed article measures Temporal against.

It is the usual way to make an agent restartable without an orchestrator: save the conversation after
every tool call and, when run again for the same ticket, continue from the last save. It drives the same
scripted model, business store and payment provider as the product, and its refunds carry no idempotency
key worth the name (a new one every call, as good as none, as in the seed), so the crash tests and
``bench/crash_vs_plain_loop.py`` compare orchestration and nothing else.

    python -m baseline.plain_loop --ticket-id T-1 --email ann@example.com --question "... order A-1001 ..."

It reads the product's ``AGENT_*`` settings: the business database, and ``AGENT_FAULTS`` to kill it at a step (only
``kill``: there is no timeout here to hang past). The crash lab's ``DEMONSTRATION=refund_guard=off`` lets the
provider pay past the charge (``tests.support.demonstrations``). Killed after the provider
paid and before the save, the rerun asks the model again about the step whose answer was lost with the
save; the model answers differently, and a second, different refund is paid.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from activities.business import Business
from activities.contracts.conversation import (
    Decision,
    Message,
    ThinkRequest,
    TicketContext,
    ToolResultBlock,
    ToolUseBlock,
)
from activities.contracts.fields import money
from activities.contracts.world import EmailRequest, RefundRequest
from activities.language_model import LanguageModel
from activities.scripted_model import ScriptedModel
from activities.tools import IssueRefundArgs, LookupOrderArgs, SendEmailArgs
from agent_worker import logs, wiring
from agent_worker.config import Settings
from agent_worker.exits import exit_hard
from tests.support.demonstrations import Demonstration
from tests.support.faults import Faults, FaultSpecError, injector, kill_this_process

MAX_STEPS = 10
CONVERSATION = TypeAdapter(list[Message])


def lookup_order(store: Business, tool_input: dict[str, Any]) -> str:
    return store.orders.order(LookupOrderArgs.model_validate(tool_input).order_id).model_dump_json()


def issue_refund(store: Business, tool_input: dict[str, Any]) -> str:
    args = IssueRefundArgs.model_validate(tool_input)
    receipt = store.payments.refund(
        RefundRequest(order_id=args.order_id, amount_cents=args.amount_cents, idempotency_key=f"plain:{uuid.uuid4()}")
    )
    return f"Refunded {money(receipt.amount_cents)} on order {receipt.order_id} (refund #{receipt.refund_id})."


def send_email(store: Business, tool_input: dict[str, Any]) -> str:
    args = SendEmailArgs.model_validate(tool_input)
    request = EmailRequest(to=args.to, subject=args.subject, body=args.body, idempotency_key=f"plain:{uuid.uuid4()}")
    receipt = store.mail.send_email(request)
    return f"Email #{receipt.email_id} sent to {receipt.to}."


TOOLS: dict[str, Callable[[Business, dict[str, Any]], str]] = {
    "lookup_order": lookup_order,
    "issue_refund": issue_refund,
    "send_email": send_email,
}


@dataclass
class PlainLoop:
    store: Business
    model: LanguageModel
    saves: Path
    faults: Faults | None = None

    async def handle(self, ticket: TicketContext, question: str) -> str:
        messages = self.load(ticket.ticket_id) or [Message.user_text(question)]
        for _ in range(MAX_STEPS):
            step = sum(1 for m in messages if m.role == "assistant") + 1
            decision = await self.think(ticket, step, messages)
            messages.append(Message(role="assistant", content=decision.content))
            if not decision.tool_calls:
                return decision.text
            messages.append(Message(role="user", content=[self.use(call) for call in decision.tool_calls]))
            self.save(ticket.ticket_id, messages)
        return f"Gave up after {MAX_STEPS} steps"

    async def think(self, ticket: TicketContext, step: int, messages: list[Message]) -> Decision:
        self.fault("before:think")
        decision = await self.model.decide(ThinkRequest(ticket=ticket, step=step, messages=messages))
        self.store.model_calls.record(ticket.ticket_id, step)
        self.fault("after:think")
        return decision

    def use(self, call: ToolUseBlock) -> ToolResultBlock:
        tool = TOOLS.get(call.name)
        if tool is None:
            return ToolResultBlock(tool_use_id=call.id, content=f"There is no tool named {call.name!r}.", is_error=True)
        self.fault(f"before:{call.name}")
        try:
            content, is_error = tool(self.store, call.input), False
        except (LookupError, ValueError) as error:  # bad arguments and the provider's refusals go to the model
            content, is_error = str(error), True
        self.fault(f"after:{call.name}")
        return ToolResultBlock(tool_use_id=call.id, content=content, is_error=is_error)

    def fault(self, point: str) -> None:
        fault = self.faults.due(point) if self.faults else None
        if fault is not None:
            kill_this_process(fault)

    def load(self, ticket_id: str) -> list[Message] | None:
        path = self.saves / f"{ticket_id}.json"
        return CONVERSATION.validate_json(path.read_bytes()) if path.exists() else None

    def save(self, ticket_id: str, messages: list[Message]) -> None:
        self.saves.mkdir(parents=True, exist_ok=True)
        path = self.saves / f"{ticket_id}.json"
        partial = path.with_suffix(".partial")
        partial.write_bytes(CONVERSATION.dump_json(messages))
        partial.replace(path)  # a crash mid-write leaves the previous save, never half of one


def main(argv: list[str] | None = None) -> None:
    cli = argparse.ArgumentParser(prog="python -m baseline.plain_loop", description=__doc__.splitlines()[0])
    cli.add_argument("--ticket-id", required=True)
    cli.add_argument("--email", required=True)
    cli.add_argument("--question", required=True)
    args = cli.parse_args(argv)
    settings = Settings()
    logs.configure(settings.log_level, settings.log_format)
    store = wiring.business(settings).create()
    if (demonstration := Demonstration.from_env()) is not None:
        store = demonstration.guard(store)
    faults = injector(settings)
    if faults is not None and any(f.action != "kill" for f in faults.faults):
        raise FaultSpecError("The plain loop has no timeouts to hang past: only kill faults apply to it")
    saves = store.database.path.with_name(store.database.path.name + ".plain-loop")
    loop = PlainLoop(store, ScriptedModel(store.model_calls), saves, faults)
    ticket = TicketContext(ticket_id=args.ticket_id, customer_email=args.email)
    print(asyncio.run(loop.handle(ticket, args.question)))
    exit_hard(0)  # the exit code is the test's evidence: keep it ours, whatever teardown does


if __name__ == "__main__":
    main()
