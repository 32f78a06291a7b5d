"""What the benchmarks share: a real ``temporal server start-dev`` and worker processes whose CPU is read from /proc,
the two settings of the server's poll limit every figure is given at, and the machine and its load as the figures
were taken.

A figure from a 2-core machine shared with other work means little without the load beside it, and a figure taken
in the dev server's start-up burst means little at all (see ``POLL_LIMITS``), so every benchmark takes both from here.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import platform
import statistics
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client, WorkflowHandle

from agent_worker.cli.devserver import DEV_SERVER_ARGS, TRANSFER_POLL_RPS, binary, free_port
from tests.support.waits import poll

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")

POLL_LIMITS: dict[str, list[str]] = {
    "poll limit 20 (server default)": ["--dynamic-config-value", f"{TRANSFER_POLL_RPS}=20"],
    "poll limit 1000": ["--dynamic-config-value", f"{TRANSFER_POLL_RPS}=1000"],
}
"""The two settings of the history service's transfer-queue poll limit every overhead figure is measured at.

At the server's default, 20 polls a second, a workflow that runs one activity after another cannot go much faster
than 50 ms a step once the few seconds of burst a fresh (or idle) server allows are spent; raised, the server no
longer hides the worker's own cost. Each entry is given after ``DEV_SERVER_ARGS``, so it overrides whatever they say
(the last ``--dynamic-config-value`` for a key counts)."""


BURST_SECONDS = 3.0
"""How long a warm-up keeps the server busy before anything is measured: longer than the burst of fast dispatch a
fresh or idle dev server allows, so every figure after it is the server's steady state."""


@dataclass
class Process:
    """A child process whose CPU seconds and resident memory are read from /proc."""

    process: asyncio.subprocess.Process

    def cpu_seconds(self) -> float:
        return cpu_seconds(Path(f"/proc/{self.process.pid}/stat").read_text())

    def rss_mb(self) -> float:
        return int(Path(f"/proc/{self.process.pid}/statm").read_text().split()[1]) * PAGE / 2**20

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.terminate()
            await asyncio.wait_for(self.process.wait(), 60)


def cpu_seconds(stat: str, *, reaped_children: bool = False) -> float:
    """User and system CPU seconds from a ``/proc/PID/stat`` line, with those of the children the process has
    waited for if ``reaped_children``."""
    fields = stat.rsplit(")", 1)[1].split()
    return sum(int(value) for value in fields[11 : 15 if reaped_children else 13]) / CLOCK_TICKS


def cpu_seconds_of(name: str) -> float:
    """CPU seconds of every process called ``name`` (``postgres``), whatever came and went between two readings.

    A server that runs a process per connection (PostgreSQL) opens and closes them as pools grow and shrink, so
    summing the live ones would lose every connection closed in between; but the parent reaps each one, and its
    reaped children's times hold what they spent, so they are counted with it."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # gone since the listing: its parent has its times now
            continue
        if text[text.find("(") + 1 : text.rfind(")")] == name:
            total += cpu_seconds(text, reaped_children=True)
    return total


def machine_busy_seconds() -> float:
    """CPU seconds all the machine's cores spent busy, whoever's work it was: beside a bench's own processes it
    says how much of the machine other work took, and whether the machine itself was the limit."""
    times = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    idle, iowait = times[3], times[4]  # user, nice, system, idle, iowait, irq, softirq, steal
    return (sum(times) - idle - iowait) / CLOCK_TICKS


@asynccontextmanager
async def dev_server(scratch: Path, extra: Sequence[str] = ()) -> AsyncIterator[tuple[Process, str]]:
    """``temporal server start-dev`` with the embedded stack's flags (``DEV_SERVER_ARGS``) and then ``extra``, its
    history in ``scratch``; yields the process and its ``host:port`` once it answers."""
    scratch.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - once, before the server exists
    port = free_port()
    server = await asyncio.create_subprocess_exec(
        binary("temporal"),
        "server",
        "start-dev",
        "--headless",
        "--port",
        str(port),
        "--http-port",
        str(free_port()),
        "--metrics-port",
        str(free_port()),
        "--log-level",
        "error",
        "--db-filename",
        str(scratch / "temporal.sqlite3"),
        "--search-attribute",
        "AwaitingApprovalCents=Int",
        *DEV_SERVER_ARGS,
        *extra,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    address = f"127.0.0.1:{port}"

    async def serving() -> bool:
        try:
            await (await Client.connect(address)).count_workflows()
        except RuntimeError:
            return False
        return True

    try:
        await poll(serving, timeout=30, interval=0.2, what=f"the dev server on {address}")
        yield Process(server), address
    finally:
        server.terminate()
        await server.wait()


async def idle_cpu_ms_per_second(process: Process, seconds: float = 5) -> float:
    """CPU-milliseconds ``process`` spends a second while nothing is asked of it: what a setting costs at rest."""
    before = process.cpu_seconds()
    await asyncio.sleep(seconds)
    return (process.cpu_seconds() - before) * 1000 / seconds


@dataclass
class HistorySize:
    events: int
    bytes: int
    activities: int


async def history_size(handle: WorkflowHandle[object, object]) -> HistorySize:
    """A run's history as the server stores it: events, the sum of their protobuf sizes, activities scheduled."""
    history = await handle.fetch_history()
    scheduled = sum(e.HasField("activity_task_scheduled_event_attributes") for e in history.events)
    return HistorySize(len(history.events), sum(e.ByteSize() for e in history.events), scheduled)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def machine() -> str:
    """The date, the machine and how loaded it was: the line every benchmark's table opens with."""
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "unknown CPU",
    )
    today = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"{today}, {len(os.sched_getaffinity(0))} CPUs ({model}), load average {load()}"


def load() -> str:
    return " / ".join(f"{value:.2f}" for value in os.getloadavg()) + " (1 / 5 / 15 min)"


RESULTS = Path(__file__).parent / "results"
DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


def publish(bench: str, table: str, *, results: bool, docs: bool) -> None:
    """A bench's table to stdout, to ``bench/results/<bench>.md`` if ``results``, and if ``docs`` into
    ``docs/benchmarks.md`` (but for its heading) between the page's ``<!-- bench.<bench>: begin -->`` and
    ``<!-- bench.<bench>: end -->`` lines, replacing what was there: the page's copy is the bench's own output."""
    print(table)
    if results:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"{bench}.md").write_text(table)
    if not docs:
        return
    begin, end = f"<!-- bench.{bench}: begin -->", f"<!-- bench.{bench}: end -->"
    text = DOCS.read_text()
    if begin not in text or end not in text:
        raise SystemExit(f"{DOCS} has no {begin} ... {end} block to put the table in")
    body = table.split("\n", 2)[2].strip()
    head, rest = text.split(begin, 1)
    DOCS.write_text(f"{head}{begin}\n{body}\n{end}{rest.split(end, 1)[1]}")
