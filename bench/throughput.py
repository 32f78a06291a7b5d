"""Throughput and cost per ticket: ``./dev run python -m bench.throughput [--tickets 500 --parked 1000]``.

Everything runs on this machine in one go, with the scripted model at zero think time, so the figures are
orchestration and not the model:

1. Per-step overhead. The same ticket (four model calls, three tools) through the plain loop (the
   baseline in ``baseline/plain_loop.py``: same model, same store, no orchestrator) and through the
   durable workflow, against the server's own round trip for an empty activity measured in the same run.
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
from agent_worker.client import connect, ensure_search_attributes
from agent_worker.config import Settings
from agent_worker.devserver import DEV_SERVER_ARGS, binary, free_port
from agent_worker.exits import exit_hard
from agent_worker.replay import HISTORIES, history_files, replay
from baseline.plain_loop import PlainLoop
from tests.support import tickets
from tests.support.processes import spawn_worker, worker_env
from tests.support.tickets import answer
from tests.support.waits import poll

RESULTS = Path(__file__).parent / "results"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class Process:
    """A child process whose CPU seconds and resident memory are read from /proc."""

    process: asyncio.subprocess.Process

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def rss_mb(self) -> float:
        return int(Path(f"/proc/{self.process.pid}/statm").read_text().split()[1]) * PAGE / 2**20

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.terminate()
            await asyncio.wait_for(self.process.wait(), 60)


@asynccontextmanager
async def dev_server(scratch: Path, extra: list[str]) -> AsyncIterator[tuple[Process, str]]:
    port = free_port()
    server = await asyncio.create_subprocess_exec(
        binary("temporal"), "server", "start-dev", "--headless", "--port", str(port),
        "--http-port", str(free_port()), "--metrics-port", str(free_port()), "--log-level", "error",
        "--db-filename", str(scratch / "temporal.sqlite3"), "--search-attribute", "AwaitingApprovalCents=Int", *extra,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    address = f"127.0.0.1:{port}"

    async def serving() -> bool:
        try:
            await (await connect(Settings(), address)).count_workflows()
        except (SystemExit, RuntimeError):
            return False
        return True

    try:
        await poll(serving, timeout=30, interval=0.2, what=f"the dev server on {address}")
        yield Process(server), address
    finally:
        server.terminate()
        await server.wait()


@asynccontextmanager
async def worker_process(
    address: str, store: Business, task_queue: str, extra_env: dict[str, str]
) -> AsyncIterator[Process]:
    settings = {"AGENT_LOG_LEVEL": "WARNING", **extra_env}
    worker = Process(await spawn_worker(worker_env(address, task_queue, store.database.path, **settings)))
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


EMPTY_ACTIVITIES = 40


async def empty_activity_ms(client: Client, count: int) -> float:
    task_queue = f"bench-empty-{uuid.uuid4()}"
    async with Worker(  # unsandboxed: the figure is the server's round trip, not workflow code's cost
        client, task_queue=task_queue, workflows=[EmptyActivities], activities=[empty],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):  # fmt: skip
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


async def durable_ms_per_step(
    client: Client, store: Business, task_queue: str, runs: int = 20
) -> tuple[float, list[WorkflowHandle[Any, Outcome]]]:
    """Milliseconds per agent step, and the tickets' handles (their histories say where the time went)."""
    started = time.perf_counter()
    handles = []
    for order_id in fresh_orders(store, runs):
        handle = await client.start_workflow(
            WORKFLOW_NAME, ticket(order_id, approval_limit_cents=100_000),
            id=f"bench-{uuid.uuid4()}", task_queue=task_queue, result_type=Outcome,
        )  # fmt: skip
        await handle.result()
        handles.append(handle)
    return (time.perf_counter() - started) * 1000 / (runs * STEPS), handles


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
    handles = await asyncio.gather(*(
        client.start_workflow(WORKFLOW_NAME, ticket(o, approval_limit_cents=100_000), id=f"bench-{uuid.uuid4()}",
                              task_queue=task_queue, result_type=Outcome)
        for o in orders
    ))  # fmt: skip
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
        handles += await asyncio.gather(*(
            client.start_workflow(WORKFLOW_NAME, ticket(o), id=f"parked-{uuid.uuid4()}", task_queue=task_queue)
            for o in orders
        ))  # fmt: skip
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
    only: tuple[str, ...] = SECTIONS
    worker_env: dict[str, str] | None = None
    """Settings for the worker process (``AGENT_MAX_CACHED_WORKFLOWS=150``, ``MALLOC_ARENA_MAX=2``)."""
    server_args: tuple[str, ...] = ()
    """More arguments for ``temporal server start-dev`` than the ones the product's dev server uses."""


Row = tuple[str, str, str]


async def main(options: Options) -> str:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="throughput-") as directory:
        scratch = Path(directory)
        store = Business.sqlite(scratch / "business.sqlite3").create()
        async with dev_server(scratch, [*DEV_SERVER_ARGS, *options.server_args]) as (server, address):
            client = await connect(Settings(), address)
            await ensure_search_attributes(client)
            task_queue = f"bench-{uuid.uuid4()}"
            empty_cpu = server.cpu_seconds()
            empty_ms = await empty_activity_ms(client, EMPTY_ACTIVITIES) if "overhead" in options.only else 0.0
            empty_cpu_ms = (server.cpu_seconds() - empty_cpu) * 1000 / EMPTY_ACTIVITIES
            if "overhead" in options.only:
                plain_ms = await plain_loop_ms_per_step(store, scratch)
            async with worker_process(address, store, task_queue, options.worker_env or {}) as worker:
                # The worker's start-up is not part of any figure: a ticket that waited for it took 3 s longer.
                await durable_ms_per_step(client, store, task_queue, runs=1)
                if "overhead" in options.only:
                    cpu = worker.cpu_seconds(), server.cpu_seconds()
                    durable_ms, handles = await durable_ms_per_step(client, store, task_queue)
                    step_cpu = (worker.cpu_seconds() - cpu[0], server.cpu_seconds() - cpu[1])
                    split = await breakdown(handles)
                    rows += overhead_rows((empty_ms, empty_cpu_ms), plain_ms, durable_ms, split, step_cpu)
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
            rows.append(("replay of stored histories", f"{replays_per_s:.1f} histories/s",
                         f"{len(paths)} files, 3 passes"))  # fmt: skip
    width = max(len(r[0]) for r in rows)
    lines = [f"| {'measure':<{width}} | figure | note |", f"|{'-' * (width + 2)}|---|---|"]
    lines += [f"| {name:<{width}} | {figure} | {note} |" for name, figure, note in rows]
    settings = " ".join(f"{k}={v}" for k, v in (options.worker_env or {}).items()) or "default worker settings"
    return (
        f"Throughput on {os.cpu_count()} cores, scripted model, one worker process ({settings})\n\n"
        + "\n".join(lines)
        + "\n"
    )


def overhead_rows(
    empty: tuple[float, float], plain_ms: float, durable_ms: float, split: Breakdown, cpu: tuple[float, float]
) -> list[Row]:
    empty_ms, empty_cpu_ms = empty
    per_activity = durable_ms * STEPS / split.activities
    server = split.activity_dispatch_ms + split.workflow_task_dispatch_ms
    ours = split.activity_run_ms + split.workflow_task_run_ms
    tickets = 20 * STEPS * durable_ms / 1000
    return [
        ("empty activity, server round trip", f"{empty_ms:.1f} ms",
         f"baseline for the overhead target; server CPU {empty_cpu_ms:.1f} ms each"),
        ("plain loop, per step (no orchestrator)", f"{plain_ms:.2f} ms", "same model, store and tools"),
        ("durable workflow, per step", f"{durable_ms:.1f} ms", f"{durable_ms / plain_ms:.0f}x the plain loop"),
        ("durable workflow, per activity", f"{per_activity:.1f} ms",
         f"{per_activity / empty_ms:.2f}x the empty activity ({split.activities:.0f} activities a ticket)"),
        ("  server: activity task dispatch", f"{split.activity_dispatch_ms:.1f} ms",
         f"scheduled -> started; {split.eager:.0%} started eagerly"),
        ("  server: workflow task dispatch", f"{split.workflow_task_dispatch_ms:.1f} ms",
         "scheduled -> started, per activity"),
        ("  worker: activity run + report", f"{split.activity_run_ms:.1f} ms",
         "started -> completed: decode, our code (SQLite, model), encode, one RPC"),
        ("  worker: workflow task run + report", f"{split.workflow_task_run_ms:.1f} ms",
         "started -> completed, per activity: workflow code in the sandbox, one RPC"),
        ("  split of a step's time", f"server {server:.1f} ms, worker {ours:.1f} ms",
         f"{per_activity - server - ours:.1f} ms between tasks (client start/result)"),
        ("CPU for those sequential tickets", f"worker {cpu[0]:.1f} s, server {cpu[1]:.1f} s",
         (f"{1000 * cpu[0] / (20 * split.activities):.1f} / {1000 * cpu[1] / (20 * split.activities):.1f} "
          f"CPU-ms per activity over {tickets:.1f} s wall")),
    ]  # fmt: skip


def throughput_rows(tickets: int, flow: dict[str, float], cpu: tuple[float, float]) -> list[Row]:
    return [
        (f"throughput, {tickets} tickets at once", f"{flow['tickets_per_second']:.1f} tickets/s",
         f"p50 {flow['p50_s']:.1f} s, p99 {flow['p99_s']:.1f} s, all done in {flow['elapsed_s']:.1f} s"),
        ("CPU during the throughput run", f"worker {cpu[0]:.1f} s, server {cpu[1]:.1f} s",
         (f"{cpu[0] / flow['elapsed_s']:.0%} and {cpu[1] / flow['elapsed_s']:.0%} of a core, "
          f"{flow['elapsed_s']:.1f} s wall on {os.cpu_count()} cores")),
    ]  # fmt: skip


def parked_rows(
    count: int, rss: tuple[float, float, float], drain_s: float, cpu: tuple[float, float], slowest: list[float]
) -> list[Row]:
    idle, waiting, after = rss
    return [
        (f"worker memory, 0 -> {count} parked tickets", f"{idle:.0f} -> {waiting:.0f} MB",
         f"+{waiting - idle:.0f} MB while they wait; {after:.0f} MB once drained"),
        (f"drain {count} approved tickets", f"{drain_s:.1f} s",
         f"{count / drain_s:.1f} tickets/s; CPU worker {cpu[0]:.1f} s, server {cpu[1]:.1f} s"),
        ("  slowest workflow task in the drain", f"{slowest[0]:.1f} s",
         (f"{sum(s > 5 for s in slowest)} of {len(slowest)} over 5 s (every 10th ticket), "
          f"p99 {slowest[len(slowest) // 100]:.1f} s; the server times one out at 10 s")),
    ]  # fmt: skip


def arguments() -> Options:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--tickets", type=int, default=500)
    cli.add_argument("--parked", type=int, default=1000)
    cli.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated sections of {', '.join(SECTIONS)}")
    cli.add_argument(
        "--worker-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting for the worker process, e.g. AGENT_MAX_CACHED_WORKFLOWS=150 (repeatable)",
    )
    cli.add_argument("--server-arg", action="append", default=[], metavar="ARG",
                     help="one more argument for temporal server start-dev (repeatable)")  # fmt: skip
    args = cli.parse_args()
    only = tuple(args.only.split(","))
    if unknown := set(only) - set(SECTIONS):
        cli.error(f"unknown sections: {', '.join(sorted(unknown))}")
    env = dict(pair.split("=", 1) for pair in args.worker_env)
    return Options(args.tickets, args.parked, only, env, tuple(args.server_arg))


if __name__ == "__main__":
    options = arguments()
    report = asyncio.run(main(options))
    print(report)
    if options.only == SECTIONS and not options.worker_env and not options.server_args:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "throughput.md").write_text(report)
    exit_hard(0)
