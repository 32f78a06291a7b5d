"""Throughput and cost per ticket: ``./dev run python -m bench.throughput [--tickets 500 --parked 1000]``.

Everything runs on this machine in one go, with the scripted model at zero think time, so the figures are
orchestration and not the model:

1. Per-step overhead, at both settings of the server's poll limit (``bench.stack.POLL_LIMITS``), each on a fresh
   server. After a warm-up that spends the burst of fast dispatch a fresh server allows, rounds of one ticket (four
   model calls, three tools) and then a workflow of as many empty activities as the ticket ran: the baseline is
   measured in the same state as the tickets, never in the burst alone. Reported: milliseconds per ticket, step and
   activity against the empty activity; the worker's and the server's CPU per activity and per ticket; history
   events and bytes per ticket; where an activity's share of the time went, from the histories. The plain loop
   (``baseline/plain_loop.py``: same model, same store, no orchestrator) runs the same ticket for scale.
2. Throughput. N tickets started at once on one worker process: tickets per second to completion, p50
   and p99 latency, and the CPU the worker and the Temporal server each used, to show which is the limit.
3. Parked tickets. M tickets waiting for approval at once: the worker's resident memory before and while
   they wait, then the time to drain them all once approved.
4. Replay. Stored histories replayed per second: what CI pays on every change.

The worker runs as a real ``agent-worker worker`` process and the server as a real ``temporal server
start-dev`` process, so each one's CPU and memory are read from /proc. The table goes to stdout and to
``bench/results/throughput.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from activities.business import Business
from activities.contracts.conversation import TicketContext
from activities.contracts.names import APPROVE_SIGNAL, WORKFLOW_NAME
from activities.contracts.ticket import Outcome
from activities.contracts.world import Order
from activities.scripted_model import ScriptedModel
from agent_worker.cli.replay import HISTORIES, history_files, replay
from agent_worker.client import connect, ensure_search_attributes
from agent_worker.config import Settings
from agent_worker.exits import exit_hard
from baseline.plain_loop import PlainLoop
from bench.stack import (
    BURST_SECONDS,
    POLL_LIMITS,
    HistorySize,
    Process,
    dev_server,
    history_size,
    idle_cpu_ms_per_second,
    load,
    machine,
    median,
)
from tests.support import tickets
from tests.support.processes import spawn_worker, worker_env
from tests.support.tickets import answer
from tests.support.waits import poll

RESULTS = Path(__file__).parent / "results"


@asynccontextmanager
async def worker_process(
    address: str, store: Business, task_queue: str, extra_env: dict[str, str]
) -> AsyncIterator[Process]:
    """An ``agent-worker worker`` on ``store``: its SQLite file, or the URL of a database on a server."""
    on_file = store.database.writer.dialect.name == "sqlite"
    database = {} if on_file else {"AGENT_DATABASE_URL": store.database.url}
    settings = {"AGENT_LOG_LEVEL": "WARNING", **database, **extra_env}
    path = store.database.path if on_file else None
    worker = Process(await spawn_worker(worker_env(address, task_queue, path, **settings)))
    try:
        yield worker
    finally:
        await worker.stop()


def ticket(order_id: str, **options: Any) -> dict[str, Any]:
    return tickets.ticket(f"My parcel for order {order_id} never arrived", **options)


def fresh_orders(store: Business, count: int, amount: int = 4900) -> list[str]:
    ids = [f"B-{uuid.uuid4().int % 10**9:09d}" for _ in range(count)]
    for order_id in ids:
        store.orders.add(Order(order_id=order_id, amount_cents=amount, customer_email="ann@example.com"))
    return ids


# --- 1. per-step overhead ----------------------------------------------------------------------------------


@activity.defn(name="bench_empty")
async def empty() -> None:
    """Nothing: what is left of an activity's cost is the server's round trip."""


@workflow.defn(name="BenchEmptyActivities")
class EmptyActivities:
    @workflow.run
    async def run(self, count: int) -> None:
        for _ in range(count):
            await workflow.execute_activity(empty, start_to_close_timeout=timedelta(seconds=10))


@asynccontextmanager
async def empty_worker(address: str) -> AsyncIterator[tuple[Client, str]]:
    """A worker in this process for the empty activity, on a plain client: none of the product's plugin, so the
    figure is the server's round trip and the SDK's, not our wiring's. Unsandboxed for the same reason."""
    client = await Client.connect(address)
    task_queue = f"bench-empty-{uuid.uuid4()}"
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[EmptyActivities],
        activities=[empty],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        yield client, task_queue


async def empty_activities_ms(client: Client, task_queue: str, count: int) -> float:
    """Milliseconds per empty activity over one workflow running ``count`` of them one after another."""
    started = time.perf_counter()
    await client.execute_workflow(EmptyActivities.run, count, id=f"empty-{uuid.uuid4()}", task_queue=task_queue)
    return (time.perf_counter() - started) * 1000 / count


STEPS = 4
"""Model calls in the benchmark's ticket: look up, refund, email, answer."""


async def plain_loop_ms_per_step(store: Business, scratch: Path, runs: int = 20) -> float:
    loop = PlainLoop(store, ScriptedModel(store.model_calls), scratch / "plain-loop-saves")
    started = time.perf_counter()
    for order_id in fresh_orders(store, runs):
        context = TicketContext(ticket_id=f"T-{uuid.uuid4().hex[:8]}", customer_email="ann@example.com")
        await loop.handle(context, f"My parcel for order {order_id} never arrived")
    return (time.perf_counter() - started) * 1000 / (runs * STEPS)


async def one_ticket(client: Client, store: Business, task_queue: str) -> tuple[float, WorkflowHandle[Any, Outcome]]:
    """One ticket to its end, waited for: its milliseconds and its handle."""
    (order_id,) = fresh_orders(store, 1)
    started = time.perf_counter()
    handle = await client.start_workflow(
        WORKFLOW_NAME,
        ticket(order_id, approval_limit_cents=100_000),
        id=f"bench-{uuid.uuid4()}",
        task_queue=task_queue,
        result_type=Outcome,
    )
    await handle.result()
    return (time.perf_counter() - started) * 1000, handle


@dataclass
class SteadyState:
    """A ticket against the empty activity at one setting of the server, both measured in the same state: after a
    warm-up that spends the server's burst, one round after another of a ticket and then a workflow of as many empty
    activities as a ticket runs."""

    setting: str
    ticket_ms: list[float]
    empty_ms: list[float]
    """Milliseconds per empty activity, one figure a round."""
    activities: float
    """Activities a ticket runs."""
    worker_cpu_s: float
    """The worker process's CPU over the tickets."""
    server_cpu_tickets_s: float
    server_cpu_empty_s: float
    server_idle_ms_per_s: float
    history: list[HistorySize]
    split: Breakdown

    @property
    def runs(self) -> int:
        return len(self.ticket_ms)


async def steady_state(
    setting: str, server_args: list[str], scratch: Path, store: Business, options: Options
) -> SteadyState:
    async with dev_server(scratch, server_args) as (server, address):
        client = await connect(Settings(), address)
        await ensure_search_attributes(client)
        idle = await idle_cpu_ms_per_second(server)
        task_queue = f"bench-{uuid.uuid4()}"
        async with (
            worker_process(address, store, task_queue, options.worker_env or {}) as worker,
            empty_worker(address) as empty_side,
        ):
            plain, empty_queue = empty_side
            # The worker's start-up is not part of any figure: a ticket that waited for it took 3 s longer.
            _, first = await one_ticket(client, store, task_queue)
            per_ticket = (await history_size(first)).activities
            warm_until = time.perf_counter() + BURST_SECONDS
            while time.perf_counter() < warm_until:
                await empty_activities_ms(plain, empty_queue, per_ticket)
            ticket_ms, empty_ms, handles = [], [], []
            worker_cpu = server_tickets = server_empty = 0.0
            for _ in range(options.runs):
                cpu = worker.cpu_seconds(), server.cpu_seconds()
                ms, handle = await one_ticket(client, store, task_queue)
                worker_cpu += worker.cpu_seconds() - cpu[0]
                server_tickets += server.cpu_seconds() - cpu[1]
                ticket_ms.append(ms)
                handles.append(handle)
                cpu = worker.cpu_seconds(), server.cpu_seconds()
                empty_ms.append(await empty_activities_ms(plain, empty_queue, per_ticket))
                server_empty += server.cpu_seconds() - cpu[1]
            sizes = [await history_size(h) for h in handles]
            split = await breakdown(handles)
    return SteadyState(
        setting, ticket_ms, empty_ms, split.activities, worker_cpu, server_tickets, server_empty, idle, sizes, split
    )


@dataclass
class Breakdown:
    """Where one activity's share of a ticket went, in milliseconds, from the server's own event times.

    Scheduled-to-started is the server's: the task waits in matching until a poller takes it (zero when the
    activity was started eagerly, in the reply to the workflow task that scheduled it). Started-to-completed
    is ours plus one RPC: the worker decodes the input, runs the code (SQLite, the scripted model), encodes
    the result and reports it. The same split holds for the workflow task that follows each activity.
    """

    activities: float
    activity_dispatch_ms: float
    activity_run_ms: float
    workflow_task_dispatch_ms: float
    workflow_task_run_ms: float
    eager: float
    """Share of activities that were started eagerly."""


async def breakdown(handles: list[WorkflowHandle[Any, Outcome]]) -> Breakdown:
    pairs: dict[str, list[float]] = {"ad": [], "ar": [], "wd": [], "wr": []}
    activities = eager = 0
    for handle in handles:
        times: dict[int, float] = {}
        async for event in handle.fetch_history_events():
            at = event.event_time.ToDatetime().timestamp() * 1000
            times[event.event_id] = at
            kind = event.event_type
            if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                activities += 1
            elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                done = event.activity_task_completed_event_attributes
                dispatch = times[done.started_event_id] - times[done.scheduled_event_id]
                pairs["ad"].append(dispatch)
                pairs["ar"].append(at - times[done.started_event_id])
                eager += dispatch < 1
            elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
                task = event.workflow_task_completed_event_attributes
                pairs["wd"].append(times[task.started_event_id] - times[task.scheduled_event_id])
                pairs["wr"].append(at - times[task.started_event_id])
    per_ticket = activities / len(handles)
    total = {key: sum(values) / len(handles) / per_ticket for key, values in pairs.items()}
    return Breakdown(per_ticket, total["ad"], total["ar"], total["wd"], total["wr"], eager / max(activities, 1))


# --- 2. throughput -------------------------------------------------------------------------------------------


async def throughput(client: Client, store: Business, task_queue: str, count: int) -> dict[str, float]:
    orders = fresh_orders(store, count)
    started = time.perf_counter()
    handles = await asyncio.gather(
        *(
            client.start_workflow(
                WORKFLOW_NAME,
                ticket(o, approval_limit_cents=100_000),
                id=f"bench-{uuid.uuid4()}",
                task_queue=task_queue,
                result_type=Outcome,
            )
            for o in orders
        )
    )
    latencies = await asyncio.gather(*(finished_after(h, started) for h in handles))
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "tickets_per_second": count / elapsed,
        "p50_s": statistics.median(latencies),
        "p99_s": latencies[int(len(latencies) * 0.99) - 1],
        "elapsed_s": elapsed,
    }


async def finished_after(handle: WorkflowHandle[Any, Outcome], started: float) -> float:
    await handle.result()
    return time.perf_counter() - started


# --- 3. parked tickets ---------------------------------------------------------------------------------------


async def parked(client: Client, store: Business, task_queue: str, count: int) -> list[WorkflowHandle[Any, Any]]:
    handles = []
    for batch in range(0, count, 100):
        orders = fresh_orders(store, min(100, count - batch))
        handles += await asyncio.gather(
            *(
                client.start_workflow(WORKFLOW_NAME, ticket(o), id=f"parked-{uuid.uuid4()}", task_queue=task_queue)
                for o in orders
            )
        )
    query = f"AwaitingApprovalCents > 0 AND TaskQueue = '{task_queue}'"

    async def all_waiting() -> bool:
        return (await client.count_workflows(query)).count >= count

    await poll(all_waiting, timeout=600, interval=1, what=f"{count} tickets to wait for approval")
    return handles


async def drain(handles: list[WorkflowHandle[Any, Any]]) -> float:
    started = time.perf_counter()
    approval = answer(4900, approver="bench")
    for batch in range(0, len(handles), 100):
        await asyncio.gather(*(h.signal(APPROVE_SIGNAL, approval) for h in handles[batch : batch + 100]))
    await asyncio.gather(*(h.result() for h in handles))
    return time.perf_counter() - started


async def slowest_workflow_tasks(handles: list[WorkflowHandle[Any, Any]]) -> list[float]:
    """Seconds from started to completed of the workflow tasks in these tickets' histories, slowest first.

    A workflow task is timed out by the server after 10 s; one that waited in a busy worker for most of
    that is the warning sign of a worker taking on more than its one Python thread can run promptly.
    """
    runs = []
    for handle in handles:
        times: dict[int, float] = {}
        async for event in handle.fetch_history_events():
            times[event.event_id] = event.event_time.ToDatetime().timestamp()
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
                task = event.workflow_task_completed_event_attributes
                runs.append(times[event.event_id] - times[task.started_event_id])
    return sorted(runs, reverse=True)


# --- the run ---------------------------------------------------------------------------------------------------

SECTIONS = ("overhead", "throughput", "parked", "replay")


@dataclass
class Options:
    tickets: int = 500
    parked: int = 1000
    runs: int = 20
    """Rounds of a ticket and the empty activities at each setting of the server's poll limit."""
    only: tuple[str, ...] = SECTIONS
    worker_env: dict[str, str] | None = None
    """Settings for the worker process (``AGENT_MAX_CACHED_WORKFLOWS=150``, ``MALLOC_ARENA_MAX=2``)."""
    server_args: tuple[str, ...] = ()
    """More arguments for ``temporal server start-dev`` than the ones the product's dev server uses."""


Row = tuple[str, str, str]


async def main(options: Options) -> str:
    rows: list[Row] = []
    load_before = load()
    with tempfile.TemporaryDirectory(prefix="throughput-") as directory:
        scratch = Path(directory)
        store = Business.sqlite(scratch / "business.sqlite3").create()
        worker_settings = options.worker_env or {}
        if "overhead" in options.only:
            plain_ms = await plain_loop_ms_per_step(store, scratch)
            states = [
                await steady_state(name, [*args, *options.server_args], scratch / f"server-{n}", store, options)
                for n, (name, args) in enumerate(POLL_LIMITS.items())
            ]
            rows += overhead_rows(plain_ms, states)
        async with dev_server(scratch / "server", options.server_args) as (server, address):
            client = await connect(Settings(), address)
            await ensure_search_attributes(client)
            task_queue = f"bench-{uuid.uuid4()}"
            async with worker_process(address, store, task_queue, worker_settings) as worker:
                await one_ticket(client, store, task_queue)  # the worker's start-up is not part of any figure
                if "throughput" in options.only:
                    cpu = worker.cpu_seconds(), server.cpu_seconds()
                    flow = await throughput(client, store, task_queue, options.tickets)
                    used = worker.cpu_seconds() - cpu[0], server.cpu_seconds() - cpu[1]
                    rows += throughput_rows(options.tickets, flow, used)
                if "parked" in options.only:
                    rss_idle = worker.rss_mb()
                    handles = await parked(client, store, task_queue, options.parked)
                    await asyncio.sleep(3)  # let the last workflow tasks finish and the cache settle
                    rss_parked = worker.rss_mb()
                    cpu = worker.cpu_seconds(), server.cpu_seconds()
                    drain_s = await drain(handles)
                    used = worker.cpu_seconds() - cpu[0], server.cpu_seconds() - cpu[1]
                    rss = rss_idle, rss_parked, worker.rss_mb()
                    slowest = await slowest_workflow_tasks(handles[::10])
                    rows += parked_rows(options.parked, rss, drain_s, used, slowest)
        if "replay" in options.only:
            paths = history_files([HISTORIES])
            started = time.perf_counter()
            for _ in range(3):
                await replay(paths)
            replays_per_s = 3 * len(paths) / (time.perf_counter() - started)
            rows.append(
                ("replay of stored histories", f"{replays_per_s:.1f} histories/s", f"{len(paths)} files, 3 passes")
            )
    width = max(len(r[0]) for r in rows)
    lines = [f"| {'measure':<{width}} | figure | note |", f"|{'-' * (width + 2)}|---|---|"]
    lines += [f"| {name:<{width}} | {figure} | {note} |" for name, figure, note in rows]
    settings = " ".join(f"{k}={v}" for k, v in worker_settings.items()) or "default worker settings"
    flags = " ".join(options.server_args) or "the embedded stack's server flags"
    return (
        f"Throughput: scripted model, one worker process ({settings}), {flags}.\n"
        f"{machine()}; load average at the start {load_before}.\n\n" + "\n".join(lines) + "\n"
    )


def overhead_rows(plain_ms: float, states: list[SteadyState]) -> list[Row]:
    """The headline figures at each setting of the server's poll limit, then where a step's time went."""
    rows: list[Row] = []
    first = states[0]
    sizes = [size for state in states for size in state.history]
    rows.append(
        (
            "history per ticket",
            (f"{median([s.events for s in sizes]):.0f} events, {median([s.bytes for s in sizes]) / 1024:.1f} KB"),
            f"{first.activities:.0f} activities and {STEPS} model calls a ticket; medians",
        )
    )
    rows.append(("plain loop, per step (no orchestrator)", f"{plain_ms:.2f} ms", "same model, store and tools"))
    for state in states:
        per_ticket = median(state.ticket_ms)
        per_activity = per_ticket / state.activities
        empty = median(state.empty_ms)
        activities = state.runs * state.activities
        rows += [
            (f"**{state.setting}**", "", f"{state.runs} rounds of a ticket, then as many empty activities"),
            (
                "  empty activity, steady state",
                f"{empty:.1f} ms",
                (
                    f"server CPU {1000 * state.server_cpu_empty_s / activities:.1f} ms each; "
                    f"idle server {state.server_idle_ms_per_s:.1f} CPU-ms/s"
                ),
            ),
            ("  ticket", f"{per_ticket:.0f} ms", f"{per_ticket / STEPS:.1f} ms a step; median"),
            ("  ticket, per activity", f"{per_activity:.1f} ms", f"{per_activity / empty:.2f}x the empty activity"),
            (
                "  worker CPU",
                f"{1000 * state.worker_cpu_s / activities:.1f} ms an activity",
                f"{1000 * state.worker_cpu_s / state.runs:.0f} ms a ticket",
            ),
            (
                "  server CPU",
                f"{1000 * state.server_cpu_tickets_s / activities:.1f} ms an activity",
                f"{1000 * state.server_cpu_tickets_s / state.runs:.0f} ms a ticket",
            ),
            *breakdown_rows(state.split),
        ]
    return rows


def breakdown_rows(split: Breakdown) -> list[Row]:
    server = split.activity_dispatch_ms + split.workflow_task_dispatch_ms
    ours = split.activity_run_ms + split.workflow_task_run_ms
    return [
        (
            "  - server: activity task dispatch",
            f"{split.activity_dispatch_ms:.1f} ms",
            f"scheduled -> started; {split.eager:.0%} started eagerly",
        ),
        (
            "  - server: workflow task dispatch",
            f"{split.workflow_task_dispatch_ms:.1f} ms",
            "scheduled -> started, per activity",
        ),
        (
            "  - worker: activity run + report",
            f"{split.activity_run_ms:.1f} ms",
            "started -> completed: decode, our code (SQLite, model), encode, one RPC",
        ),
        (
            "  - worker: workflow task run + report",
            f"{split.workflow_task_run_ms:.1f} ms",
            "started -> completed, per activity: workflow code in the sandbox, one RPC",
        ),
        ("  - split of an activity's share", f"server {server:.1f} ms, worker {ours:.1f} ms", "from the histories"),
    ]


def throughput_rows(tickets: int, flow: dict[str, float], cpu: tuple[float, float]) -> list[Row]:
    return [
        (
            f"throughput, {tickets} tickets at once",
            f"{flow['tickets_per_second']:.1f} tickets/s",
            f"p50 {flow['p50_s']:.1f} s, p99 {flow['p99_s']:.1f} s, all done in {flow['elapsed_s']:.1f} s",
        ),
        (
            "CPU during the throughput run",
            f"worker {cpu[0]:.1f} s, server {cpu[1]:.1f} s",
            (
                f"{cpu[0] / flow['elapsed_s']:.0%} and {cpu[1] / flow['elapsed_s']:.0%} of a core, "
                f"{flow['elapsed_s']:.1f} s wall on {os.cpu_count()} cores"
            ),
        ),
    ]


def parked_rows(
    count: int, rss: tuple[float, float, float], drain_s: float, cpu: tuple[float, float], slowest: list[float]
) -> list[Row]:
    idle, waiting, after = rss
    return [
        (
            f"worker memory, 0 -> {count} parked tickets",
            f"{idle:.0f} -> {waiting:.0f} MB",
            f"+{waiting - idle:.0f} MB while they wait; {after:.0f} MB once drained",
        ),
        (
            f"drain {count} approved tickets",
            f"{drain_s:.1f} s",
            f"{count / drain_s:.1f} tickets/s; CPU worker {cpu[0]:.1f} s, server {cpu[1]:.1f} s",
        ),
        (
            "  slowest workflow task in the drain",
            f"{slowest[0]:.1f} s",
            (
                f"{sum(s > 5 for s in slowest)} of {len(slowest)} over 5 s (every 10th ticket), "
                f"p99 {slowest[len(slowest) // 100]:.1f} s; the server times one out at 10 s"
            ),
        ),
    ]


def arguments() -> Options:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--tickets", type=int, default=500)
    cli.add_argument("--parked", type=int, default=1000)
    cli.add_argument("--runs", type=int, default=20, help="rounds of a ticket and the empty activities, per setting")
    cli.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated sections of {', '.join(SECTIONS)}")
    cli.add_argument(
        "--worker-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting for the worker process, e.g. AGENT_MAX_CACHED_WORKFLOWS=150 (repeatable)",
    )
    cli.add_argument(
        "--server-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="one more argument for temporal server start-dev (repeatable)",
    )
    args = cli.parse_args()
    only = tuple(args.only.split(","))
    if unknown := set(only) - set(SECTIONS):
        cli.error(f"unknown sections: {', '.join(sorted(unknown))}")
    env = dict(pair.split("=", 1) for pair in args.worker_env)
    return Options(args.tickets, args.parked, args.runs, only, env, tuple(args.server_arg))


if __name__ == "__main__":
    options = arguments()
    report = asyncio.run(main(options))
    print(report)
    if options.only == SECTIONS and not options.worker_env and not options.server_args:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "throughput.md").write_text(report)
    exit_hard(0)
