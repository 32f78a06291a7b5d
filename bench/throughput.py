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
import sys
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

from activities.contracts import APPROVE_SIGNAL, WORKFLOW_NAME, Order, Outcome, TicketContext
from activities.scripted_model import ScriptedModel
from activities.store import BusinessStore
from agent_worker.client import connect, ensure_search_attributes
from agent_worker.devserver import binary, free_port
from agent_worker.replay import HISTORIES, history_files, replay
from baseline.plain_loop import PlainLoop

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
async def dev_server(scratch: Path) -> AsyncIterator[tuple[Process, str]]:
    port = free_port()
    server = await asyncio.create_subprocess_exec(
        binary("temporal"), "server", "start-dev", "--headless", "--port", str(port),
        "--http-port", str(free_port()), "--metrics-port", str(free_port()), "--log-level", "error",
        "--db-filename", str(scratch / "temporal.sqlite3"), "--search-attribute", "AwaitingApprovalCents=Int",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    address = f"127.0.0.1:{port}"
    try:
        async with asyncio.timeout(30):
            while True:
                try:
                    await (await connect(address)).count_workflows()
                    break
                except (SystemExit, RuntimeError):
                    await asyncio.sleep(0.2)
        yield Process(server), address
    finally:
        server.terminate()
        await server.wait()


@asynccontextmanager
async def worker_process(address: str, store: BusinessStore, task_queue: str) -> AsyncIterator[Process]:
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": address,
        "AGENT_TASK_QUEUE": task_queue,
        "AGENT_DB_PATH": str(store.path),
        "AGENT_LOG_LEVEL": "WARNING",
        "AGENT_MODEL_BACKEND": "scripted",
    }
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "agent-worker"), "worker", env=env, stderr=asyncio.subprocess.DEVNULL
    )
    worker = Process(process)
    try:
        yield worker
    finally:
        await worker.stop()


def ticket(order_id: str, **options: Any) -> dict[str, Any]:
    return {"ticket_id": f"T-{uuid.uuid4().hex[:8]}", "question": f"My parcel for order {order_id} never arrived",
            "customer_email": "ann@example.com", "options": options}  # fmt: skip


def fresh_orders(store: BusinessStore, count: int, amount: int = 4900) -> list[str]:
    ids = [f"B-{uuid.uuid4().int % 10**9:09d}" for _ in range(count)]
    for order_id in ids:
        store.add_order(Order(order_id=order_id, amount_cents=amount, customer_email="ann@example.com"))
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


async def empty_activity_ms(client: Client, count: int = 40) -> float:
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


async def plain_loop_ms_per_step(store: BusinessStore, scratch: Path, runs: int = 20) -> float:
    loop = PlainLoop(store, ScriptedModel(store), scratch / "plain-loop-saves")
    started = time.perf_counter()
    for order_id in fresh_orders(store, runs):
        context = TicketContext(ticket_id=f"T-{uuid.uuid4().hex[:8]}", customer_email="ann@example.com")
        await loop.handle(context, f"My parcel for order {order_id} never arrived")
    return (time.perf_counter() - started) * 1000 / (runs * STEPS)


async def durable_ms_per_step(
    client: Client, store: BusinessStore, task_queue: str, runs: int = 20
) -> tuple[float, int]:
    """Milliseconds per agent step, and how many activities one ticket ran."""
    started = time.perf_counter()
    handle = None
    for order_id in fresh_orders(store, runs):
        handle = await client.start_workflow(
            WORKFLOW_NAME, ticket(order_id, approval_limit_cents=100_000),
            id=f"bench-{uuid.uuid4()}", task_queue=task_queue, result_type=Outcome,
        )  # fmt: skip
        await handle.result()
    elapsed_ms = (time.perf_counter() - started) * 1000
    assert handle is not None
    scheduled = EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    activities = len([e async for e in handle.fetch_history_events() if e.event_type == scheduled])
    return elapsed_ms / (runs * STEPS), activities


# --- 2. throughput -------------------------------------------------------------------------------------------


async def throughput(client: Client, store: BusinessStore, task_queue: str, count: int) -> dict[str, float]:
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


async def parked(client: Client, store: BusinessStore, task_queue: str, count: int) -> list[WorkflowHandle[Any, Any]]:
    handles = []
    for batch in range(0, count, 100):
        orders = fresh_orders(store, min(100, count - batch))
        handles += await asyncio.gather(*(
            client.start_workflow(WORKFLOW_NAME, ticket(o), id=f"parked-{uuid.uuid4()}", task_queue=task_queue)
            for o in orders
        ))  # fmt: skip
    query = f"AwaitingApprovalCents > 0 AND TaskQueue = '{task_queue}'"
    async with asyncio.timeout(600):
        while (await client.count_workflows(query)).count < count:
            await asyncio.sleep(1)
    return handles


async def drain(handles: list[WorkflowHandle[Any, Any]]) -> float:
    started = time.perf_counter()
    approval = {"amount_cents": 4900, "approved": True, "approver": "bench"}
    for batch in range(0, len(handles), 100):
        await asyncio.gather(*(h.signal(APPROVE_SIGNAL, approval) for h in handles[batch : batch + 100]))
    await asyncio.gather(*(h.result() for h in handles))
    return time.perf_counter() - started


# --- the run ---------------------------------------------------------------------------------------------------


async def main(tickets: int, parked_count: int) -> str:
    with tempfile.TemporaryDirectory(prefix="throughput-") as directory:
        scratch = Path(directory)
        store = BusinessStore(scratch / "business.sqlite3").create()
        async with dev_server(scratch) as (server, address):
            client = await connect(address)
            await ensure_search_attributes(client)
            task_queue = f"bench-{uuid.uuid4()}"
            empty_ms = await empty_activity_ms(client)
            plain_ms = await plain_loop_ms_per_step(store, scratch)
            async with worker_process(address, store, task_queue) as worker:
                await asyncio.sleep(1)  # the worker's start-up is not part of any figure
                durable_ms, activities = await durable_ms_per_step(client, store, task_queue)
                cpu = (worker.cpu_seconds(), server.cpu_seconds())
                flow = await throughput(client, store, task_queue, tickets)
                worker_cpu, server_cpu = worker.cpu_seconds() - cpu[0], server.cpu_seconds() - cpu[1]
                rss_idle = worker.rss_mb()
                handles = await parked(client, store, task_queue, parked_count)
                rss_parked = worker.rss_mb()
                drain_s = await drain(handles)
            paths = history_files([HISTORIES])
            started = time.perf_counter()
            for _ in range(3):
                await replay(paths)
            replays_per_s = 3 * len(paths) / (time.perf_counter() - started)
    rows = [
        ("empty activity, server round trip", f"{empty_ms:.1f} ms", "baseline for the overhead target"),
        ("plain loop, per step (no orchestrator)", f"{plain_ms:.2f} ms", "same model, store and tools"),
        ("durable workflow, per step", f"{durable_ms:.1f} ms", f"{durable_ms / plain_ms:.0f}x the plain loop"),
        ("durable workflow, per activity", f"{durable_ms * STEPS / activities:.1f} ms",
         f"{durable_ms * STEPS / activities / empty_ms:.2f}x the empty activity ({activities} activities a ticket)"),
        (f"throughput, {tickets} tickets at once", f"{flow['tickets_per_second']:.1f} tickets/s",
         f"p50 {flow['p50_s']:.1f} s, p99 {flow['p99_s']:.1f} s, all done in {flow['elapsed_s']:.1f} s"),
        ("CPU during the throughput run", f"worker {worker_cpu:.1f} s, server {server_cpu:.1f} s",
         f"of {flow['elapsed_s']:.1f} s wall on {os.cpu_count()} cores"),
        (f"worker memory, 0 -> {parked_count} parked tickets", f"{rss_idle:.0f} -> {rss_parked:.0f} MB",
         f"+{rss_parked - rss_idle:.0f} MB while they wait"),
        (f"drain {parked_count} approved tickets", f"{drain_s:.1f} s", f"{parked_count / drain_s:.1f} tickets/s"),
        ("replay of stored histories", f"{replays_per_s:.1f} histories/s", f"{len(paths)} files, 3 passes"),
    ]  # fmt: skip
    width = max(len(r[0]) for r in rows)
    lines = [f"| {'measure':<{width}} | figure | note |", f"|{'-' * (width + 2)}|---|---|"]
    lines += [f"| {name:<{width}} | {figure} | {note} |" for name, figure, note in rows]
    return f"Throughput on {os.cpu_count()} cores, scripted model, one worker process\n\n" + "\n".join(lines) + "\n"


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--tickets", type=int, default=500)
    cli.add_argument("--parked", type=int, default=1000)
    args = cli.parse_args()
    report = asyncio.run(main(args.tickets, args.parked))
    print(report)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "throughput.md").write_text(report)
    sys.stdout.flush()
    os._exit(0)  # temporalio can crash at interpreter exit (sdk-python issue 300): the exit code is ours
