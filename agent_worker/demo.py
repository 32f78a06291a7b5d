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
import textwrap
from collections.abc import Sequence
from typing import Any

from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHandle

from activities.contracts import (
    APPROVE_SIGNAL,
    AWAITING_APPROVAL_ATTRIBUTE,
    AWAITING_APPROVAL_QUERY,
    WORKFLOW_NAME,
    Approval,
    Order,
    Outcome,
    TicketInput,
    money,
)
from agent_worker.config import Settings
from agent_worker.devserver import DEFAULT_PORT, DEFAULT_UI_PORT, free_port, start_dev_server
from agent_worker.worker import build_worker

INDENT = "      "


def say(*lines: str) -> None:
    for line in lines:
        print(line, flush=True)


async def run_demo(settings: Settings, *, decision: bool | None, question: str | None) -> Outcome:
    if decision is None and not sys.stdin.isatty():
        raise SystemExit("stdin is not a terminal, so nobody can answer the approval: pass --approve or --decline")
    store = settings.store().create()
    order = next_demo_order(store.refunds(), customer="ann@example.com")
    store.add_order(order)
    ticket_id = f"T-{order.order_id}"
    ticket = TicketInput(
        ticket_id=ticket_id,
        question=question or f"My parcel for order {order.order_id} never arrived. Can I have my money back?",
        customer_email=order.customer_email,
    )

    port, ui_port = free_port(DEFAULT_PORT), free_port(DEFAULT_UI_PORT)
    say(f"Starting Temporal (dev server on 127.0.0.1:{port}, Web UI on http://localhost:{ui_port}) ...")
    env = await start_dev_server(
        settings.data_dir / "temporal.sqlite3", port=port, ui_port=ui_port, data_converter=settings.data_converter()
    )
    try:
        async with build_worker(env.client, settings, store):
            say(
                f"Worker polling task queue {settings.task_queue!r}; business database {store.path}.",
                f"Order {order.order_id} was charged {money(order.amount_cents)}; refunds above "
                f"{money(ticket.options.approval_limit_cents)} wait for a person.",
                "",
                f"Customer ({ticket.customer_email}): {ticket.question}",
            )
            handle = await env.client.start_workflow(
                WORKFLOW_NAME,
                ticket.model_dump(mode="json"),
                id=f"ticket-{ticket_id}",
                task_queue=settings.task_queue,
                result_type=Outcome,
            )
            await narrate(env.client, handle, decision=decision)
            outcome: Outcome = await handle.result()
        say(
            "",
            f"Outcome: {outcome.status.value} after {outcome.steps} steps and {outcome.model_calls} model calls.",
        )
        say(*how_to_look(handle.id, port))
        return outcome
    finally:
        await env.shutdown()


def next_demo_order(refunds: Sequence[Any], customer: str) -> Order:
    """A fresh order per demo run, so a rerun is a new ticket instead of a refund the provider refuses."""
    number = 2001 + len(refunds)
    return Order(order_id=f"A-{number}", amount_cents=4900, customer_email=customer)


async def narrate(client: Client, handle: WorkflowHandle[Any, Outcome], *, decision: bool | None) -> None:
    scheduled: dict[int, str] = {}
    async for event in handle.fetch_history_events(wait_new_event=True):
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            name = event.activity_task_scheduled_event_attributes.activity_type.name
            scheduled[event.event_id] = name
            if name == "think":
                say("", f"  [step] asking the model (event {event.event_id})")
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            completed = event.activity_task_completed_event_attributes
            result = (await decode(client, completed.result) or [None])[0]
            say(*describe_result(scheduled.get(completed.scheduled_event_id, "?"), result))
        elif kind in (
            EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
            EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
        ):
            say(f"{INDENT}the activity failed: {failure_message(event)}")
        elif kind == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
            fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
            if AWAITING_APPROVAL_ATTRIBUTE in fields and fields[AWAITING_APPROVAL_ATTRIBUTE].data not in (
                b"",
                b"null",
            ):
                await ask_for_approval(handle, decision=decision)
        elif kind == EventType.EVENT_TYPE_TIMER_FIRED:
            say(f"{INDENT}nobody answered in time: the refund is not made")
        elif kind in (
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
        ):
            return


async def ask_for_approval(handle: WorkflowHandle[Any, Outcome], *, decision: bool | None) -> None:
    amount = await handle.query(AWAITING_APPROVAL_QUERY, result_type=int | None)  # type: ignore[arg-type]
    if amount is None:
        return
    say(f"  [approval] the refund of {money(amount)} waits for a person (a durable timer runs meanwhile)")
    if decision is None:
        reply = await asyncio.to_thread(input, f"{INDENT}approve a refund of {money(amount)}? [y/N] ")
        decision = reply.strip().lower() in {"y", "yes"}
    else:
        say(f"{INDENT}{'approving' if decision else 'declining'} it, as --{'approve' if decision else 'decline'} says")
    await handle.signal(APPROVE_SIGNAL, Approval(amount_cents=amount, approved=decision, approver="demo-operator"))


async def decode(client: Client, payloads: Payloads) -> list[Any]:
    return await client.data_converter.decode(payloads.payloads)


def describe_result(activity: str, result: Any) -> list[str]:
    if activity == "think" and isinstance(result, dict):
        lines = []
        for block in result.get("content", []):
            if block.get("type") == "tool_use":
                args = ", ".join(f"{k}={v!r}" for k, v in block["input"].items())
                lines.append(f"{INDENT}the model asks for {block['name']}({args})")
            elif block.get("type") == "text":
                lines.append(f"{INDENT}the model answers: " + textwrap.shorten(block["text"], 200))
        return lines
    return [f"{INDENT}{activity} returned {json.dumps(result)}"]


def failure_message(event: HistoryEvent) -> str:
    attrs = (
        event.activity_task_failed_event_attributes
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
        else event.activity_task_timed_out_event_attributes
    )
    return attrs.failure.message or "timed out"


EXAMPLE_TICKET = (
    '{"ticket_id": "T-1", "question": "My parcel for order A-1001 never arrived", '
    '"customer_email": "ann@example.com", "options": {"approval_limit_cents": 2000}}'
)


def how_to_look(workflow_id: str, port: int) -> list[str]:
    approve = '{"amount_cents": 4900, "approved": true, "approver": "you"}'
    return [
        "",
        f"This demo's server (127.0.0.1:{port}) stops with it; the run is kept in its history file. To look at it",
        "and run more tickets, keep a server, its Web UI and a worker up with `agent-worker dev`, then open",
        f"  http://localhost:{DEFAULT_UI_PORT}/namespaces/default/workflows/{workflow_id}",
        "and drive tickets with the temporal CLI:",
        (
            f"  temporal workflow start --type {WORKFLOW_NAME} --task-queue support-agent --workflow-id ticket-T-1 "
            f"--input {shlex.quote(EXAMPLE_TICKET)}"
        ),
        f"  temporal workflow query --workflow-id ticket-T-1 --name {AWAITING_APPROVAL_QUERY}",
        f"  temporal workflow list --query '{AWAITING_APPROVAL_ATTRIBUTE} > 0'",
        f"  temporal workflow signal --workflow-id ticket-T-1 --name {APPROVE_SIGNAL} --input {shlex.quote(approve)}",
        "  temporal workflow result --workflow-id ticket-T-1",
    ]
