"""How many bytes of Temporal history a long ticket costs: the whole conversation every step, or linear.

    ./dev run python -m bench.history_growth [--steps 50] [--long-steps 1000]

A scripted ticket asks for one order's event log (20 KB each, a different order every step) at every step
and answers at the last one. It runs on the dev server twice in one go: naive (the whole conversation sent
to ``think`` every step and every result inline, as runs did before the linear-history patch) and linear
(results above 8 KB in the content store, ``think`` sent only what is new). Then a 1,000-step ticket of the
same kind runs linear, continuing as new every 100 model calls, twice: with a model that reads the whole
conversation (20 MB by the end, which no real model could), and with one that reports what it reads as
tokens and summarises older turns past 25,000. For each it prints the bytes of history
(the sum of the events' protobuf sizes, what the server counts against its 50 MB limit) per step and in
total, the largest single payload (the server refuses one above 2 MB, the SDK warns from 512 KB, and the
target here is 256 KB), and events.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf.message import Message as Proto
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

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
from activities.contracts.names import WORKFLOW_NAME
from activities.contracts.ticket import Outcome
from activities.contracts.world import Order
from agent_worker.config import Settings
from agent_worker.exits import exit_hard
from agent_worker.worker import build_worker

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
SUMMARIZE_ABOVE_TOKENS = 25_000
"""The benchmark's summary threshold: 100 KB of conversation, five steps' event logs."""


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


def long_ticket(steps: int, *, linear: bool, steps_per_run: int = 100) -> dict[str, Any]:
    return {
        "ticket_id": f"T-long-{uuid.uuid4().hex[:6]}",
        "question": "Where are all my parcels?",
        "customer_email": "ann@example.com",
        "options": {"max_steps": steps, "linear_history": linear, "continue_as_new_after_steps": steps_per_run},
    }


@dataclass
class RunSize:
    history_bytes: int
    events: int
    largest_payload: int
    think_bytes: list[int]
    """Bytes each step's think activity added (its scheduled and completed events)."""


def payload_sizes(message: Proto) -> Iterator[int]:
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            values = list(value.values())
        elif field.is_repeated:
            values = list(value)
        else:
            values = [value]
        for item in values:
            if isinstance(item, Payload):
                yield item.ByteSize()
            elif isinstance(item, Proto):
                yield from payload_sizes(item)


async def measure(client: Client, workflow_id: str, run_id: str | None) -> RunSize:
    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    think: dict[int, int] = {}
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            if event.activity_task_scheduled_event_attributes.activity_type.name == "think":
                think[event.event_id] = event.ByteSize()
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            scheduled = event.activity_task_completed_event_attributes.scheduled_event_id
            if scheduled in think:
                think[scheduled] += event.ByteSize()
    return RunSize(
        history_bytes=sum(e.ByteSize() for e in history.events),
        events=len(history.events),
        largest_payload=max((s for e in history.events for s in payload_sizes(e)), default=0),
        think_bytes=list(think.values()),
    )


async def run_chain(client: Client, handle: WorkflowHandle[Any, Outcome]) -> list[RunSize]:
    """The sizes of every run of a ticket, first to last, following its continue-as-new chain."""
    sizes, run_id = [], handle.first_execution_run_id
    while run_id:
        sizes.append(await measure(client, handle.id, run_id))
        history = await client.get_workflow_handle(handle.id, run_id=run_id).fetch_history()
        last = history.events[-1]
        continued = last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
        run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id if continued else None
    return sizes


def kb(n: int) -> str:
    return f"{n / 1024:,.1f} KB"


async def bench(steps: int, long_steps: int, steps_per_run: int) -> int:
    from agent_worker.devserver import start_dev_server  # noqa: PLC0415 - only the script starts a server

    env = await start_dev_server(None)
    failures = 0
    try:
        with tempfile.TemporaryDirectory() as scratch:
            store = Business.sqlite(Path(scratch) / "business.sqlite3").create()
            seed_long_orders(store, max(steps, long_steps))
            rows: list[tuple[str, int, list[RunSize], float, str]] = []
            for label, n, linear, inline_max, summarize_above in (
                ("naive", steps, False, 10**9, None),
                ("linear", steps, True, 8192, None),
                ("linear, continue-as-new", long_steps, True, 8192, None),
                ("linear, continue-as-new, summaries", long_steps, True, 8192, SUMMARIZE_ABOVE_TOKENS),
            ):
                queue = f"bench-{uuid.uuid4()}"
                settings = Settings(task_queue=queue, db_path=store.database.path, model_backend="scripted",
                                    inline_result_max_bytes=inline_max)  # fmt: skip
                model = ContextBoundModel(n) if summarize_above else LongTicketModel(n)
                request = long_ticket(n, linear=linear, steps_per_run=steps_per_run)
                request["options"]["summarize_above_tokens"] = summarize_above
                started = time.monotonic()
                async with build_worker(env.client, settings, store, model):
                    handle = await env.client.start_workflow(
                        WORKFLOW_NAME, request, id=f"bench-{uuid.uuid4()}", task_queue=queue, result_type=Outcome,
                    )  # fmt: skip
                    try:
                        outcome = await handle.result()
                        status = f"{outcome.status.value} after {outcome.steps} steps"
                        if isinstance(model, ContextBoundModel):
                            status += (
                                f"; {model.summaries} summaries, the model read at most "
                                f"{model.largest_input_tokens:,} tokens"
                            )
                    except Exception as error:  # noqa: BLE001 - the naive run may hit the server's limits: report it
                        status, failures = f"FAILED: {error}", failures + 1
                seconds = time.monotonic() - started
                rows.append((label, n, await run_chain(env.client, handle), seconds, status))
            print_table(rows)
    finally:
        await env.shutdown()
    return failures


def print_table(rows: list[tuple[str, int, list[RunSize], float, str]]) -> None:
    print(
        "| ticket | steps | runs | history, total | largest run | largest payload | events "
        "| think bytes/step (first, last) | time | outcome |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, n, runs, seconds, status in rows:
        per_step = [b for run in runs for b in run.think_bytes]
        print(
            f"| {label} | {n} | {len(runs)} | {kb(sum(r.history_bytes for r in runs))} "
            f"| {kb(max(r.history_bytes for r in runs))} | {kb(max(r.largest_payload for r in runs))} "
            f"| {sum(r.events for r in runs)} | {kb(per_step[0])}, {kb(per_step[-1])} | {seconds:.0f} s | {status} |"
        )
    naive, linear = (sum(r.history_bytes for r in rows[i][2]) for i in (0, 1))
    print(f"\nnaive / linear history for {rows[0][1]} steps: {naive / linear:.1f}x")
    for label, _, runs, _, _ in rows[:2]:
        sizes = [b for run in runs for b in run.think_bytes]
        print(f"{label}: think bytes per step: " + " ".join(f"{s // 1024}" for s in sizes) + " (KB)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--long-steps", type=int, default=1000)
    parser.add_argument("--steps-per-run", type=int, default=100)
    args = parser.parse_args()
    code = asyncio.run(bench(args.steps, args.long_steps, args.steps_per_run))
    exit_hard(code)
