"""Scale beyond one worker: ``./dev run python -m bench.scale [--tickets 1000] [--workers 1,2,4] [--embedded 500]
[--quick] [--docs]``.

The question is where the limit moves when a desk adds workers: to the Temporal server, to the workers, or to the
business database they share. For each worker count, a fresh ``temporal server start-dev`` (the embedded stack's
flags, ``DEV_SERVER_ARGS``, which raise the poll limit), a fresh PostgreSQL schema on the machine's PostgreSQL, and
that many real ``agent-worker worker`` processes on one task queue; once every worker polls and a warm-up ticket or
two each has run, N tickets are started at once (the scripted model at zero think time, as ``bench.peers`` and
``bench.throughput`` run it, so the figures are orchestration, not the model). Reported: tickets a second from the
first start to the last close, p50 and p99 ticket time, and the CPU seconds of the server, each worker and
PostgreSQL (every process named ``postgres``: it serves other work on a shared machine too), with the machine's busy
CPU beside them, read from /proc before and after. The server's default poll limit (20) is not measured: with
hundreds of tickets at once both settings measured the same within the noise (``docs/benchmarks.md``, "The server's
poll limit"), so a second pass would double the run to show nothing new.

One more row answers the issue's target, "at least 10 tickets a second per worker process, for 500 tickets started
at once, on the embedded stack": one worker on a SQLite file and the same server, as ``agent-worker dev`` runs
them; it is ``bench.throughput``'s throughput section, measured here beside the PostgreSQL rows.

The table goes to stdout, to ``bench/results/scale.md`` and, with ``--docs``, into ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from activities.business import Business
from agent_worker.client import connect, ensure_search_attributes
from agent_worker.config import Settings
from agent_worker.exits import exit_hard
from bench.stack import Process, cpu_seconds_of, dev_server, load, machine, machine_busy_seconds, publish
from bench.throughput import throughput, worker_process
from tests.support.stores import postgres_available, postgres_schema
from tests.support.waits import poll

POSTGRESQL, EMBEDDED = "PostgreSQL", "embedded (SQLite)"
WARM_UP = 2
"""Tickets per worker run before anything is measured: each worker's first tickets pay for its imports."""
TARGET = 10.0
"""The issue's target, tickets a second per worker process for 500 at once on the embedded stack."""


@dataclass
class Usage:
    """CPU seconds so far: the server's, each worker's, PostgreSQL's, and the whole machine's busy time; and the
    wall clock they were read at, so a difference of two readings carries its own interval."""

    server: float
    workers: list[float]
    postgres: float
    machine: float
    wall: float

    @classmethod
    def read(cls, server: Process, workers: list[Process]) -> Usage:
        return cls(
            server.cpu_seconds(),
            [w.cpu_seconds() for w in workers],
            cpu_seconds_of("postgres"),
            machine_busy_seconds(),
            time.perf_counter(),
        )

    def __sub__(self, before: Usage) -> Usage:
        return Usage(
            self.server - before.server,
            [after - earlier for after, earlier in zip(self.workers, before.workers, strict=True)],
            self.postgres - before.postgres,
            self.machine - before.machine,
            self.wall - before.wall,
        )


@dataclass
class Row:
    store: str
    workers: int
    tickets: int
    flow: dict[str, float]
    """``bench.throughput.throughput``'s figures: tickets_per_second, p50_s, p99_s, elapsed_s."""
    used: Usage
    closed: int
    """Runs the server lists as completed on the task queue, the warm-up's left out."""
    load: float
    """The machine's 1-minute load average as the tickets were started."""


@asynccontextmanager
async def business(store: str, scratch: Path) -> AsyncIterator[Business]:
    """A business database no earlier row has touched: a new schema dropped afterwards, or a new SQLite file."""
    async with AsyncExitStack() as stack:
        url = stack.enter_context(postgres_schema("scale")) if store == POSTGRESQL else None
        made = Business.at(url).create() if url else Business.sqlite(scratch / "business.sqlite3").create()
        stack.callback(made.close)
        yield made


async def polling(client: Client, task_queue: str, workers: int) -> None:
    """Wait until ``workers`` distinct workers poll ``task_queue`` for workflow and activity tasks alike, so no
    ticket waits for a worker to start and every worker has its share from the first one."""

    async def all_poll() -> bool:
        for kind in (TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY):
            described = await client.workflow_service.describe_task_queue(
                DescribeTaskQueueRequest(
                    namespace=client.namespace, task_queue=TaskQueue(name=task_queue), task_queue_type=kind
                )
            )
            if len({p.identity for p in described.pollers}) < workers:
                return False
        return True

    await poll(all_poll, timeout=60, interval=0.2, what=f"{workers} workers to poll {task_queue}")


async def completed(client: Client, task_queue: str, expected: int) -> int:
    """Runs the server's visibility lists as completed on ``task_queue``, once it lists ``expected`` or 10 s on."""
    query = f"TaskQueue = '{task_queue}' AND ExecutionStatus = 'Completed'"

    async def counted() -> int | None:
        count = (await client.count_workflows(query)).count
        return count if count >= expected else None

    try:
        return await poll(counted, timeout=10, interval=0.5, what="visibility to list every ticket")
    except TimeoutError:
        return (await client.count_workflows(query)).count


async def measure(store: str, workers: int, tickets: int, scratch: Path) -> Row:
    """One row: a fresh server, a fresh business database and ``workers`` fresh workers, ``tickets`` at once."""
    async with business(store, scratch) as made, dev_server(scratch / "server") as (server, address):
        client = await connect(Settings(), address)
        await ensure_search_attributes(client)
        task_queue = f"scale-{uuid.uuid4()}"
        async with AsyncExitStack() as stack:
            processes = [
                await stack.enter_async_context(worker_process(address, made, task_queue, {})) for _ in range(workers)
            ]
            await polling(client, task_queue, workers)
            await throughput(client, made, task_queue, WARM_UP * workers)
            at_start = os.getloadavg()[0]
            before = Usage.read(server, processes)
            flow = await throughput(client, made, task_queue, tickets)
            used = Usage.read(server, processes) - before
        closed = await completed(client, task_queue, tickets + WARM_UP * workers) - WARM_UP * workers
    return Row(store, workers, tickets, flow, used, closed, at_start)


@dataclass
class Options:
    tickets: int = 1000
    workers: tuple[int, ...] = (1, 2, 4)
    embedded: int = 500
    """Tickets at once for the embedded stack's row; 0 leaves it out."""
    quick: bool = False
    docs: bool = False


async def main(options: Options) -> str:
    if not postgres_available():
        raise SystemExit("no PostgreSQL on 127.0.0.1:5432: the workers share their business database there")
    load_before = load()
    runs = [(POSTGRESQL, n, options.tickets) for n in options.workers]
    if options.embedded:
        runs.append((EMBEDDED, 1, options.embedded))
    rows = []
    with tempfile.TemporaryDirectory(prefix="scale-") as directory:
        for n, (store, workers, tickets) in enumerate(runs):
            rows.append(await measure(store, workers, tickets, Path(directory) / f"row-{n}"))
    return report(options, rows, load_before)


def report(options: Options, rows: list[Row], load_before: str) -> str:
    lines = [
        f"# Scale beyond one worker{' (--quick: not a measurement)' if options.quick else ''}",
        "",
        f"{machine()}; load average at the start {load_before}.",
        (
            "Each row: a fresh `temporal server start-dev` (the embedded stack's flags), a fresh business database, "
            f"its workers polling and {WARM_UP} warm-up tickets a worker run, then the tickets started at once; "
            "scripted model, zero think time. Tickets / s from the first start to the last close; CPU seconds "
            "over those tickets from /proc, with each one's share of a core in parentheses (2 cores make 200%). "
            "PostgreSQL: every `postgres` process, so other work on the machine counts too (on the SQLite row it "
            "is only others'); machine: every core's busy time, whoever's. Load: the 1-minute load average as the "
            "tickets started."
        ),
        "",
        (
            "| store | workers | tickets | closed | tickets / s | per worker | p50 s | p99 s | server CPU s "
            "| workers' CPU s (each) | PostgreSQL CPU s | machine busy s | CPU ms / ticket: server, workers, "
            "PostgreSQL | load |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        used, n = row.used, row.tickets
        wall = used.wall
        each = ", ".join(f"{cpu:.1f}" for cpu in used.workers)
        workers = sum(used.workers)
        per_ticket = ", ".join(f"{1000 * cpu / n:.0f}" for cpu in (used.server, workers, used.postgres))
        lines.append(
            f"| {row.store} | {row.workers} | {n} | {row.closed} | {row.flow['tickets_per_second']:.1f} | "
            f"{row.flow['tickets_per_second'] / row.workers:.1f} | {row.flow['p50_s']:.1f} | {row.flow['p99_s']:.1f} "
            f"| {used.server:.1f} ({used.server / wall:.0%}) | {workers:.1f} ({workers / wall:.0%}; {each}) | "
            f"{used.postgres:.1f} ({used.postgres / wall:.0%}) | {used.machine:.1f} ({used.machine / wall:.0%}) | "
            f"{per_ticket} | {row.load:.1f} |"
        )
    embedded = next((row for row in rows if row.store == EMBEDDED), None)
    if embedded is not None:
        rate = embedded.flow["tickets_per_second"]
        lines += [
            "",
            (
                f"The issue's target, at least {TARGET:.0f} tickets / s per worker process for {options.embedded} "
                f"tickets at once on the embedded stack: {rate:.1f} tickets / s on one worker, "
                f"{'met' if rate >= TARGET else 'not met'}."
            ),
        ]
    lines += ["", f"Load average at the end: {load()}.", ""]
    return "\n".join(lines)


def arguments() -> Options:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--tickets", type=int, default=1000, help="tickets started at once on PostgreSQL, per row")
    cli.add_argument("--workers", default="1,2,4", help="comma-separated worker counts, one row each")
    cli.add_argument("--embedded", type=int, default=500, help="tickets at once on the embedded stack; 0: no row")
    cli.add_argument("--quick", action="store_true", help="a smoke run: 10 tickets a row, 1 and 2 workers; no file")
    cli.add_argument("--docs", action="store_true", help="also put the table in docs/benchmarks.md")
    args = cli.parse_args()
    if args.quick and args.docs:
        cli.error("--quick is not a measurement: it does not go in the docs")
    workers = tuple(int(n) for n in args.workers.split(","))
    if args.quick:
        quick_workers = workers if args.workers != cli.get_default("workers") else (1, 2)
        return Options(tickets=10, workers=quick_workers, embedded=10 if args.embedded else 0, quick=True)
    return Options(args.tickets, workers, args.embedded, docs=args.docs)


if __name__ == "__main__":
    options = arguments()
    publish("scale", asyncio.run(main(options)), results=not options.quick, docs=options.docs)
    exit_hard(0)
