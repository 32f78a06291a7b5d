"""``agent-worker demo``: one support ticket through the whole loop, narrated as it happens.

The transcript is read from the run's event history as the server records it (``fetch_history_events``
with ``wait_new_event``), not from the worker's memory: what it prints is what a new worker would replay
after a crash, and what the Web UI shows.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
from collections.abc import Sequence
from typing import Any

from temporalio.client import Client

from activities.contracts import fields
from activities.contracts.approvals import Approval
from activities.contracts.conversation import UsageReport
from activities.contracts.names import (
    APPROVE_SIGNAL,
    AWAITING_APPROVAL_ATTRIBUTE,
    AWAITING_APPROVAL_QUERY,
    CUSTOMER_MESSAGE,
    WORKFLOW_NAME,
)
from activities.contracts.ticket import CustomerMessage, Outcome, TicketInput, TicketOptions
from activities.contracts.world import Order
from agent_worker import tickets, wiring
from agent_worker.cli.devserver import dev_stack, free_port
from agent_worker.cli.worker import local_worker
from agent_worker.config import Settings
from agent_worker.defaults import DEFAULT_PORT, DEFAULT_UI_PORT
from agent_worker.inbox.server import with_key_for_this_process
from agent_worker.transcript.terminal import INDENT, narrate, say


async def run_demo(settings: Settings, *, decision: bool | None, question: str | None) -> Outcome:
    if decision is None and not sys.stdin.isatty():
        raise SystemExit("stdin is not a terminal, so nobody can answer the approval: pass --approve or --decline")
    settings, _ = with_key_for_this_process(settings)  # the inbox and the worker run here, and share it
    limit_cents = wiring.money_policy(settings).approval.limit_cents
    store, model = wiring.dev_business_and_model(settings)
    order = next_demo_order(store.payments.refunds(), customer="ann@example.com")
    store.orders.add(order)
    ticket_id = f"T-{order.order_id}"
    ticket = TicketInput(
        ticket_id=ticket_id,
        question=question or f"My parcel for order {order.order_id} never arrived. Can I have my money back?",
        customer_email=order.customer_email,
        options=TicketOptions(reply_window_seconds=REPLY_WINDOW_SECONDS),
    )

    port, ui_port = free_port(DEFAULT_PORT), free_port(DEFAULT_UI_PORT)
    say(f"Starting Temporal (dev server on 127.0.0.1:{port}, Web UI on http://localhost:{ui_port}) ...")
    async with dev_stack(settings, port=port, ui_port=ui_port) as (env, inbox):
        async with local_worker(env.client, settings, store, model):
            say(
                f"Worker polling task queue {settings.task_queue!r}; business database {store}.",
                f"The {inbox.describe()}.",
                f"Order {order.order_id} was charged {fields.amount(order.amount_cents, order.currency)}; refunds "
                f"above {fields.amount(limit_cents, order.currency)} wait for a person.",
            )
            started = await tickets.start(env.client, ticket, settings.task_queue, anew=True)
            handle = tickets.handle(env.client, started.workflow_id, run_id=started.run_id)
            customer = Customer(env.client, handle.id)
            page = inbox.ticket_page(handle.id)
            await narrate(
                env.client,
                handle,
                follow=True,
                on_waiting=lambda: ask_for_approval(env.client, handle.id, decision=decision, page=page),
                on_answered=customer.reply,
            )
            outcome = await handle.result()
        say(
            "",
            f"Outcome: {outcome.status.value} after {len(outcome.turns)} turns, {outcome.steps} steps and "
            f"{outcome.model_calls} model calls.",
            describe_usage(outcome.usage),
        )
        say(*how_to_look(handle.id, port))
        if decision is None:  # a person is at the terminal, and may be looking at the ticket's page
            await read_line(f"\nThe approval inbox shows the closed ticket at {page} until you press Enter. ")
        return outcome


REPLY_WINDOW_SECONDS = 5
"""How long the demo's ticket stays open for a reply after each answer (a desk would keep it open for days)."""
DEMO_REPLY = "Thank you! Will the refund show on my card statement?"


class Customer:
    """The demo's customer: replies once to the first answer, then lets the ticket close."""

    def __init__(self, client: Client, workflow_id: str) -> None:
        self.client, self.workflow_id, self.replied = client, workflow_id, False

    async def reply(self) -> None:
        if self.replied:
            say(f"{INDENT}(no more replies: the ticket closes when its {REPLY_WINDOW_SECONDS} s window passes)")
            return
        self.replied = True  # the transcript tells the reply, from the history, once the ticket has taken it
        await tickets.reply(self.client, self.workflow_id, CustomerMessage(text=DEMO_REPLY))


def describe_usage(report: UsageReport) -> str:
    total = report.total
    if not (total.input_tokens or total.output_tokens):
        return "Tokens: none counted (the scripted stand-in uses none; set ANTHROPIC_API_KEY to run on Claude)."
    return (
        f"Tokens: {total.input_tokens:,} input, {total.output_tokens:,} output, {total.cache_read_input_tokens:,} "
        f"read from the prompt cache, {total.cache_creation_input_tokens:,} written to it; "
        f"estimated cost ${total.cost_usd:.4f}."
    )


def next_demo_order(refunds: Sequence[Any], customer: str) -> Order:
    """A fresh order per demo run, so a rerun is a new ticket instead of a refund the provider refuses."""
    number = 2001 + len(refunds)
    return Order(order_id=f"A-{number}", amount_cents=4900, customer_email=customer)


async def ask_for_approval(client: Client, workflow_id: str, *, decision: bool | None, page: str) -> None:
    """Answer the request as ``--approve`` or ``--decline`` says, or ask the person: at the terminal, or in the
    approval inbox, whichever they answer first."""
    request = await tickets.awaiting_approval(client, workflow_id)
    if request is None:
        return
    amount = request.amount_cents
    if decision is None:
        say(f"{INDENT}answer it in the approval inbox, {page}, or here:")
        shown = fields.amount(amount, request.currency)
        prompt = f"{INDENT}approve a refund of {shown} (request {request.request_id})? [y/N] "
        terminal = asyncio.create_task(read_line(prompt))
        inbox = asyncio.create_task(answered_elsewhere(client, workflow_id, request.request_id))
        await asyncio.wait({terminal, inbox}, return_when=asyncio.FIRST_COMPLETED)
        for task in (terminal, inbox):
            task.cancel()
        if not terminal.done() or terminal.cancelled():
            say("", f"{INDENT}answered in the approval inbox")
            return
        decision = terminal.result().strip().lower() in {"y", "yes"}
    else:
        say(f"{INDENT}{'approving' if decision else 'declining'} it, as --{'approve' if decision else 'decline'} says")
    answer = Approval(amount_cents=amount, approved=decision, approver="demo-operator", request_id=request.request_id)
    await tickets.approve(client, workflow_id, answer)


async def answered_elsewhere(client: Client, workflow_id: str, request_id: str) -> None:
    """Return once the request no longer waits: someone answered it in the approval inbox (a bounded poll of the
    query; the worker runs in this process)."""
    while True:
        await asyncio.sleep(0.5)
        waiting = await tickets.awaiting_approval(client, workflow_id)
        if waiting is None or waiting.request_id != request_id:
            return


async def read_line(prompt: str) -> str:
    """A line typed at the terminal, read without a thread, so that waiting for it can be called off (the person
    answered in the browser instead)."""
    print(prompt, end="", flush=True)
    loop = asyncio.get_running_loop()
    line: asyncio.Future[str] = loop.create_future()

    def readable() -> None:
        if not line.done():
            line.set_result(sys.stdin.readline())

    loop.add_reader(sys.stdin.fileno(), readable)
    try:
        return await line
    finally:
        loop.remove_reader(sys.stdin.fileno())


EXAMPLE_TICKET = (
    '{"ticket_id": "T-1", "question": "My parcel for order A-1001 never arrived", '
    '"customer_email": "ann@example.com", "options": {"approval_limit_cents": 2000}}'
)


def how_to_look(workflow_id: str, port: int) -> list[str]:
    approve = '{"amount_cents": 4900, "approved": true, "approver": "you"}'
    return [
        "",
        f"This demo's server (127.0.0.1:{port}) stops with it; the run is kept in its history file. To look at it",
        'and run more tickets, put the project\'s commands on your PATH (`eval "$(./dev env)"` in the project',
        "folder), keep a server, its Web UI, the approval inbox and a worker up with `agent-worker dev`, then open",
        f"  http://localhost:{DEFAULT_UI_PORT}/namespaces/default/workflows/{workflow_id}",
        "and drive tickets with the temporal CLI:",
        (
            f"  temporal workflow start --type {WORKFLOW_NAME} --task-queue support-agent --workflow-id ticket-T-1 "
            f"--input {shlex.quote(EXAMPLE_TICKET)}"
        ),
        f"  temporal workflow query --workflow-id ticket-T-1 --name {AWAITING_APPROVAL_QUERY}",
        f"  temporal workflow list --query '{AWAITING_APPROVAL_ATTRIBUTE} > 0'",
        f"  temporal workflow signal --workflow-id ticket-T-1 --name {APPROVE_SIGNAL} --input {shlex.quote(approve)}",
        (
            f"  temporal workflow update execute --workflow-id ticket-T-1 --name {CUSTOMER_MESSAGE} "
            f"--input {shlex.quote(json.dumps({'text': 'Thanks!'}))}   # a reply, while the ticket is open"
        ),
        "  temporal workflow result --workflow-id ticket-T-1",
    ]
