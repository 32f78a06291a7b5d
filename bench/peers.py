"""The same support ticket on this project and on its peers, side by side: ``./dev run python -m bench.peers``
(``--tickets N``, ``--quick``, ``--systems ours,pydantic-ai,...``).

The ticket: look up the order, refund it, email the customer, answer; four model calls from a scripted model at zero
think time, so the figures are orchestration, not the model. Each system runs it against one ``temporal server
start-dev`` on this machine, in one run, at both settings of the server's poll limit (``bench.stack.POLL_LIMITS``,
one fresh server each), with its worker as a process of its own so its CPU is read from /proc:

- this project's worker, a real ``agent-worker worker`` (with its ownership check, idempotency keys and audit);
- Pydantic AI's Temporal integration (``bench/peer_workers/pydantic_ai_ticket.py``);
- the OpenAI Agents SDK's Temporal integration (``bench/peer_workers/openai_agents_ticket.py``);
- temporal-agent-harness, its turn on Pydantic AI (``bench/peer_workers/harness_ticket.py``), its tickets sent
  through its own client in a process of its own.

Each peer runs in a virtual environment the bench builds itself with uv (under ``.tools/peers/``, once per pinned
requirement set), so their pins never touch this project's. Its tools act on the bench's SQLite shop
(``bench/peer_workers/shop.py``) and its model plays the same script.

For each system, after a warm-up that spends the server's burst: N tickets one after another, then N at once; the
medians of milliseconds per ticket, step and activity, the worker's and the server's CPU per activity and per ticket,
and history events and bytes per ticket. The table goes to stdout and, but for ``--quick``, to
``bench/results/peers.md``, with the date, the machine and its load.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle

from activities.business import Business
from activities.contracts.names import WORKFLOW_NAME
from activities.contracts.ticket import Outcome
from agent_worker.client import connect, ensure_search_attributes
from agent_worker.config import Settings
from agent_worker.exits import exit_hard
from bench.peer_workers.shop import STEPS, Shop
from bench.stack import (
    BURST_SECONDS,
    POLL_LIMITS,
    HistorySize,
    Process,
    dev_server,
    history_size,
    load,
    machine,
    median,
    publish,
)
from bench.throughput import fresh_orders, ticket, worker_process

ROOT = Path(__file__).resolve().parent.parent
PEER_WORKERS = Path(__file__).parent / "peer_workers"
VENVS = ROOT / ".tools" / "peers"

Starter = Callable[[], Awaitable[WorkflowHandle[Any, Any]]]


@dataclass(frozen=True)
class Peer:
    """A peer: the requirements of its own environment, the module its worker runs, what its ticket lacks."""

    key: str
    name: str
    requirements: tuple[str, ...]
    module: str
    reported: tuple[str, ...]
    """Packages whose installed versions the table names."""
    missing: str
    driven: bool = False
    """Its tickets are started through a client of its own (``drive`` in its module), in a process of its own."""


OURS = "ours"
OURS_NAME = "agent-worker (this project)"
OURS_DOES = (
    "the whole ticket: the order checked to be the customer's, the refund under an idempotency key and the money "
    "policy (no approval wait here: 49.00 is under the ticket's limit), the email keyed, an audit activity"
)
NOT_IN_PEERS = (
    "no ownership check, no idempotency key on the refund or the email, no money policy, no audit trail: the "
    "integration leaves them to the author (the framework can pause a tool call for a person's approval: "
    "{approval}; this ticket needs none)"
)
PEERS = {
    peer.key: peer
    for peer in (
        Peer(
            "pydantic-ai",
            "Pydantic AI + Temporal (TemporalDurability)",
            ("pydantic-ai-slim[temporal]==2.68.0",),
            "pydantic_ai_ticket",
            ("pydantic-ai-slim", "temporalio"),
            NOT_IN_PEERS.format(approval="`requires_approval` deferred tools"),
        ),
        Peer(
            "openai-agents",
            "OpenAI Agents SDK + Temporal (OpenAIAgentsPlugin)",
            ("temporalio-openai-agents==1.1.0",),
            "openai_agents_ticket",
            ("openai-agents", "temporalio-openai-agents", "temporalio"),
            NOT_IN_PEERS.format(approval="`needs_approval` on a function tool"),
        ),
        Peer(
            "harness",
            "temporal-agent-harness (Pydantic AI turn)",
            ("temporal-agent-harness[pydantic-ai]==0.8.0", "pydantic-ai-slim[temporal]==2.68.0"),
            "harness_ticket",
            ("temporal-agent-harness", "pydantic-ai-slim", "temporalio"),
            "no ownership check, no idempotency key on the refund or the email, no money policy: the author writes "
            "them (its approval gate is on every tool call, set here to pass them all: this ticket needs no person; "
            "its event stream records each call). A ticket is a session: started, the question sent as an update, "
            "the turn read off its event stream by the harness's client in a process of its own (its CPU is not "
            "the worker's), then closed; all of that is in its times",
            driven=True,
        ),
    )
}
SYSTEMS = (OURS, *PEERS)


# --- the peers' environments -----------------------------------------------------------------------------------


def uv() -> str:
    """The uv ``./dev`` installs into ``.tools/``, else one on PATH."""
    local = ROOT / ".tools" / "bin" / "uv"
    found = str(local) if local.exists() else shutil.which("uv")
    if found is None:
        raise SystemExit("uv not found: run ./dev once (it installs uv into .tools/), or put uv on PATH")
    return found


async def run(*command: str) -> str:
    process = await asyncio.create_subprocess_exec(
        *command,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
        env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"},
    )
    out, err = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {process.returncode}: {err.decode()[-2000:]}")
    return out.decode()


async def peer_python(peer: Peer) -> Path:
    """The interpreter of ``peer``'s own environment, built with uv on first use (this interpreter's Python, the
    peer's pinned requirements) and kept under ``.tools/peers/`` per requirement set."""
    digest = hashlib.sha256("\n".join((sys.version, *peer.requirements)).encode()).hexdigest()[:12]
    venv = VENVS / f"{peer.key}-{digest}"
    python = venv / "bin" / "python"
    if not (venv / ".complete").exists():
        print(f"building {peer.name}'s environment in {venv}", file=sys.stderr)
        await run(uv(), "venv", "--quiet", "--clear", "--python", sys.executable, str(venv))
        await run(uv(), "pip", "install", "--quiet", "--python", str(python), *peer.requirements)
        (venv / ".complete").write_text("\n".join(peer.requirements))
    return python


async def versions(python: Path, packages: tuple[str, ...]) -> str:
    script = "import sys, importlib.metadata as m; print(', '.join(f'{p} {m.version(p)}' for p in sys.argv[1:]))"
    return (await run(str(python), "-c", script, *packages)).strip()


# --- one system's worker and its tickets ------------------------------------------------------------------------


@dataclass
class System:
    """A running worker and how to start one of its tickets."""

    worker: Process
    start: Starter
    client: Client


@asynccontextmanager
async def our_system(address: str, scratch: Path) -> AsyncIterator[System]:
    store = Business.sqlite(scratch / "business.sqlite3").create()
    client = await connect(Settings(), address)
    await ensure_search_attributes(client)
    task_queue = f"ours-{uuid.uuid4()}"

    async def start() -> WorkflowHandle[Any, Any]:
        (order_id,) = fresh_orders(store, 1)
        return await client.start_workflow(
            WORKFLOW_NAME,
            ticket(order_id, approval_limit_cents=100_000),
            id=f"ours-{uuid.uuid4()}",
            task_queue=task_queue,
            result_type=Outcome,
        )

    async with worker_process(address, store, task_queue, {}) as worker:
        yield System(worker, start, client)


@asynccontextmanager
async def peer_system(peer: Peer, python: Path, address: str, scratch: Path) -> AsyncIterator[System]:
    shop = Shop(scratch / f"{peer.key}-shop.sqlite3").create()
    client = await Client.connect(address)
    task_queue = f"{peer.key}-{uuid.uuid4()}"
    env = {**os.environ, "TEMPORAL_ADDRESS": address, "PEER_TASK_QUEUE": task_queue, "PEER_SHOP": shop.path}
    log = scratch / f"{peer.key}-worker.log"
    with log.open("wb") as output:
        process = await asyncio.create_subprocess_exec(
            str(python),
            "run.py",
            peer.module,
            cwd=PEER_WORKERS,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=output,
            stderr=output,
            env=env,
        )
    worker = Process(process)
    driver = await Driver.start(python, peer.module, env, scratch / f"{peer.key}-driver.log") if peer.driven else None

    async def start() -> WorkflowHandle[Any, Any]:
        order_id = f"B-{uuid.uuid4().int % 10**9:09d}"
        shop.add_order(order_id, 4900, "ann@example.com")
        question = f"My parcel for order {order_id} never arrived"
        if driver is not None:
            return client.get_workflow_handle(await driver.ticket(question))
        return await client.start_workflow(
            "PeerTicket", {"question": question}, id=f"{peer.key}-{uuid.uuid4()}", task_queue=task_queue
        )

    try:
        yield System(worker, start, client)
    except Exception as error:
        error.add_note(f"{peer.name}'s worker said: {log.read_text()[-3000:]}")
        raise
    finally:
        if driver is not None:
            await driver.stop()
        await worker.stop()
    if shop.count("refunds") != shop.count("orders") or shop.count("emails") != shop.count("orders"):
        raise RuntimeError(f"{peer.name} did not refund and email every order: {log.read_text()[-3000:]}")


def last_words(log: Path) -> str:
    """The end of what a peer's process wrote: why it failed, most likely."""
    return log.read_text()[-2000:]


@dataclass
class Driver:
    """A peer's own client in a process of its own, for a peer whose ticket is more than a workflow started and
    awaited: it is sent ``<request> <question>`` lines and answers ``<request> <workflow id>`` once the ticket's
    workflow is on its way to its end (``<request> ! <error>`` if it failed)."""

    process: Process
    waiting: dict[str, asyncio.Future[str]]
    reader: asyncio.Task[None]

    @classmethod
    async def start(cls, python: Path, module: str, env: dict[str, str], log: Path) -> Driver:
        with log.open("wb") as errors:
            process = await asyncio.create_subprocess_exec(
                str(python),
                "run.py",
                module,
                "drive",
                cwd=PEER_WORKERS,
                env=env,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=errors,
            )
        waiting: dict[str, asyncio.Future[str]] = {}

        async def read() -> None:
            assert process.stdout is not None
            async for raw in process.stdout:
                request, answer = raw.decode().rstrip("\n").split(" ", 1)
                if answer.startswith("! "):
                    waiting.pop(request).set_exception(RuntimeError(f"{answer[2:]}; {last_words(log)}"))
                else:
                    waiting.pop(request).set_result(answer)
            for future in waiting.values():
                future.set_exception(RuntimeError(f"the driver ended: {last_words(log)}"))

        return cls(Process(process), waiting, asyncio.create_task(read()))

    async def ticket(self, question: str) -> str:
        request = uuid.uuid4().hex
        self.waiting[request] = asyncio.get_running_loop().create_future()
        stdin = self.process.process.stdin
        assert stdin is not None
        stdin.write(f"{request} {question}\n".encode())
        await stdin.drain()
        return await asyncio.wait_for(self.waiting[request], TICKET_TIMEOUT)

    async def stop(self) -> None:
        await self.process.stop()
        await self.reader


# --- measuring ----------------------------------------------------------------------------------------------------


@dataclass
class Figures:
    """One system at one setting of the server."""

    system: str
    setting: str
    tickets: int
    sequential_ms: list[float] = field(default_factory=list)
    sequential_cpu: tuple[float, float] = (0.0, 0.0)
    """The worker's and the server's CPU seconds over the tickets one after another."""
    histories: list[HistorySize] = field(default_factory=list)
    activity_names: Counter[str] = field(default_factory=Counter)
    """The activities one ticket ran, by name."""
    at_once_ms: list[float] = field(default_factory=list)
    at_once_elapsed_s: float = 0.0
    at_once_cpu: tuple[float, float] = (0.0, 0.0)
    load: float = 0.0
    """The machine's 1-minute load average as the measured tickets started."""

    @property
    def activities(self) -> float:
        return median([h.activities for h in self.histories])


TICKET_TIMEOUT = 120.0
"""Seconds a ticket may take before the bench gives up on the system: the first one waits for the worker to start."""


async def finish(handle: WorkflowHandle[Any, Any], started: float) -> float:
    result = await asyncio.wait_for(handle.result(), TICKET_TIMEOUT)
    if isinstance(result, Outcome) and result.status != "resolved":
        raise RuntimeError(f"{handle.id} ended {result.status}: {result.answer}")
    return (time.perf_counter() - started) * 1000


async def measure(system: System, figures: Figures, warm_up: int, server: Process) -> Figures:
    tickets = figures.tickets
    warm_until = time.perf_counter() + BURST_SECONDS
    done = 0
    while done < warm_up or time.perf_counter() < warm_until:  # the worker's start-up and the server's burst
        await finish(await system.start(), time.perf_counter())
        done += 1
    figures.load = os.getloadavg()[0]
    cpu = system.worker.cpu_seconds(), server.cpu_seconds()
    handles = []
    for _ in range(tickets):
        started = time.perf_counter()
        handle = await system.start()
        figures.sequential_ms.append(await finish(handle, started))
        handles.append(handle)
    figures.sequential_cpu = system.worker.cpu_seconds() - cpu[0], server.cpu_seconds() - cpu[1]
    cpu = system.worker.cpu_seconds(), server.cpu_seconds()
    started = time.perf_counter()
    at_once = await asyncio.gather(*(system.start() for _ in range(tickets)))
    figures.at_once_ms = list(await asyncio.gather(*(finish(h, started) for h in at_once)))
    figures.at_once_elapsed_s = time.perf_counter() - started
    figures.at_once_cpu = system.worker.cpu_seconds() - cpu[0], server.cpu_seconds() - cpu[1]
    figures.histories = [await history_size(h) for h in handles]
    events = await handles[-1].fetch_history()
    figures.activity_names = Counter(
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in events.events
        if e.HasField("activity_task_scheduled_event_attributes")
    )
    return figures


@dataclass
class Options:
    tickets: int = 30
    warm_up: int = 3
    systems: tuple[str, ...] = SYSTEMS
    quick: bool = False
    docs: bool = False


async def main(options: Options) -> str:
    load_before = load()
    pythons = {key: await peer_python(PEERS[key]) for key in options.systems if key in PEERS}
    installed = {key: await versions(python, PEERS[key].reported) for key, python in pythons.items()}
    installed[OURS] = await versions(Path(sys.executable), ("agent-worker", "temporalio"))
    with contextlib.suppress(OSError, RuntimeError):  # not a git checkout: the versions say enough
        installed[OURS] += f" at {(await run('git', '-C', str(ROOT), 'rev-parse', '--short', 'HEAD')).strip()}"
    results: list[Figures] = []
    failures: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="peers-") as directory:
        for n, (setting, server_args) in enumerate(POLL_LIMITS.items()):
            scratch = Path(directory) / f"server-{n}"
            async with dev_server(scratch, server_args) as (server, address):
                for key in options.systems:
                    if key in failures:
                        continue
                    name = OURS_NAME if key == OURS else PEERS[key].name
                    running = (
                        our_system(address, scratch)
                        if key == OURS
                        else peer_system(PEERS[key], pythons[key], address, scratch)
                    )
                    try:
                        async with running as system:
                            results.append(
                                await measure(system, Figures(name, setting, options.tickets), options.warm_up, server)
                            )
                    except Exception as error:  # noqa: BLE001 - one system failing is a row of the table, not the end
                        failures[key] = f"{type(error).__name__}: {error} {' '.join(getattr(error, '__notes__', []))}"
    return report(options, results, failures, installed, load_before)


# --- the table --------------------------------------------------------------------------------------------------


def report(
    options: Options, results: list[Figures], failures: dict[str, str], installed: dict[str, str], load_before: str
) -> str:
    n = options.tickets
    lines = [
        f"# The same ticket on each system{' (--quick: not a measurement)' if options.quick else ''}",
        "",
        f"{machine()}; load average at the start {load_before}.",
        (
            f"Medians over {n} tickets after a warm-up, one after another and then {n} at once; one "
            f"`temporal server start-dev` per poll limit, the embedded stack's flags otherwise; scripted model, "
            f"zero think time, {STEPS} model calls a ticket. CPU read from /proc; history from the server; load: the "
            f"machine's 1-minute load average as a system's measured tickets began."
        ),
        "",
        "**One after another**",
        "",
        (
            "| system | server | ms / ticket | ms / step | ms / activity | activities | worker CPU ms / activity "
            "| worker CPU ms / ticket | server CPU ms / ticket | events / ticket | history KB / ticket | load |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in results:
        ms = median(f.sequential_ms)
        worker, server = (1000 * cpu / f.tickets for cpu in f.sequential_cpu)
        lines.append(
            f"| {f.system} | {f.setting} | {ms:.0f} | {ms / STEPS:.1f} | {ms / f.activities:.1f} | "
            f"{f.activities:.0f} | {worker / f.activities:.1f} | {worker:.0f} | {server:.0f} | "
            f"{median([h.events for h in f.histories]):.0f} | {median([h.bytes for h in f.histories]) / 1024:.1f} | "
            f"{f.load:.1f} |"
        )
    lines += [
        "",
        f"**{n} at once**",
        "",
        (
            "| system | server | tickets / s | ms / ticket (median) | slowest ms | worker CPU ms / ticket "
            "| worker CPU ms / activity | server CPU ms / ticket |"
        ),
        "|---|---|---|---|---|---|---|---|",
    ]
    for f in results:
        worker, server = (1000 * cpu / f.tickets for cpu in f.at_once_cpu)
        lines.append(
            f"| {f.system} | {f.setting} | {f.tickets / f.at_once_elapsed_s:.1f} | {median(f.at_once_ms):.0f} | "
            f"{max(f.at_once_ms):.0f} | {worker:.0f} | {worker / f.activities:.1f} | {server:.0f} |"
        )
    lines += ["", "**What each system's ticket does**", "", "| system | versions | activities a ticket | missing |"]
    lines.append("|---|---|---|---|")
    for key in options.systems:
        name = OURS_NAME if key == OURS else PEERS[key].name
        done = next((f for f in results if f.system == name), None)
        activities = ", ".join(f"{a} x{c}" if c > 1 else a for a, c in done.activity_names.items()) if done else ""
        if key in failures:
            missing = f"**failed**: {failures[key][:600]}"
        else:
            missing = OURS_DOES if key == OURS else PEERS[key].missing
        version = installed.get(key, "")
        lines.append(f"| {name} | {version} | {activities} | {missing} |")
    lines += ["", f"Load average at the end: {load()}.", ""]
    return "\n".join(lines)


def arguments() -> Options:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--tickets", type=int, default=30, help="tickets a system runs one after another, then at once")
    cli.add_argument("--quick", action="store_true", help="a smoke run: 2 tickets, 1 warm-up; no results file")
    cli.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated, of {', '.join(SYSTEMS)}")
    cli.add_argument(
        "--docs", action="store_true", help="also put the table in docs/benchmarks.md, between its markers"
    )
    args = cli.parse_args()
    systems = tuple(args.systems.split(","))
    if unknown := set(systems) - set(SYSTEMS):
        cli.error(f"unknown systems: {', '.join(sorted(unknown))}")
    if args.quick and args.docs:
        cli.error("--quick is not a measurement: it does not go in the docs")
    if args.quick:
        return Options(tickets=2, warm_up=1, systems=systems, quick=True)
    return Options(tickets=args.tickets, systems=systems, docs=args.docs)


if __name__ == "__main__":
    options = arguments()
    publish("peers", asyncio.run(main(options)), results=not options.quick, docs=options.docs)
    exit_hard(0)
