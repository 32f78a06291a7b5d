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
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from activities.business import Business
from activities.contracts.names import WORKFLOW_NAME
from activities.contracts.ticket import Outcome
from agent_worker.cli.worker import local_worker
from agent_worker.config import Settings
from agent_worker.config.model_settings import ClaudeSettings
from agent_worker.exits import exit_hard
from tests.support.history import RunSize, measure
from tests.support.long_tickets import ContextBoundModel, LongTicketModel, long_ticket, seed_long_orders

SUMMARIZE_ABOVE_TOKENS = 25_000
"""The benchmark's summary threshold: 100 KB of conversation, five steps' event logs."""


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
    from agent_worker.cli.devserver import start_dev_server  # noqa: PLC0415 - only the script starts a server

    env = await start_dev_server(None)
    failures = 0
    try:
        with tempfile.TemporaryDirectory() as scratch:
            store = Business.sqlite(Path(scratch) / "business.sqlite3").create()
            seed_long_orders(store, max(steps, long_steps))
            rows: list[tuple[str, int, list[RunSize], float, str]] = []
            for label, n, inline_max, summarize_above in (
                ("linear", steps, 8192, None),
                ("linear, continue-as-new", long_steps, 8192, None),
                ("linear, continue-as-new, summaries", long_steps, 8192, SUMMARIZE_ABOVE_TOKENS),
            ):
                queue = f"bench-{uuid.uuid4()}"
                settings = Settings(
                    task_queue=queue,
                    db_path=store.database.path,
                    claude=ClaudeSettings(backend="scripted"),
                    inline_result_max_bytes=inline_max,
                )
                model = ContextBoundModel(n) if summarize_above else LongTicketModel(n)
                request = long_ticket(n, steps_per_run=steps_per_run)
                request["options"]["summarize_above_tokens"] = summarize_above
                started = time.monotonic()
                async with local_worker(env.client, settings, store, model):
                    handle = await env.client.start_workflow(
                        WORKFLOW_NAME,
                        request,
                        id=f"bench-{uuid.uuid4()}",
                        task_queue=queue,
                        result_type=Outcome,
                    )
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
