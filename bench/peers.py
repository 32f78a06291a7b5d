"""The same support ticket on this project and on its peers, side by side: ``./dev run python -m bench.peers``
(``--tickets N``, ``--rounds R``, ``--quick``, ``--systems ours,pydantic-ai,...``, ``--docs``).

The ticket: look up the order, refund it, email the customer, answer; four model calls from a scripted model at zero
think time, so the figures are orchestration, not the model. Every system's worker is a process of its own, its CPU
read from /proc, all of them up at once against one ``temporal server start-dev`` on this machine:

- this project's worker, a real ``agent-worker worker`` (with its ownership check, idempotency keys and audit);
- Pydantic AI's Temporal integration (``bench/peer_workers/pydantic_ai_ticket.py``);
- the OpenAI Agents SDK's Temporal integration (``bench/peer_workers/openai_agents_ticket.py``), tracing off;
- temporal-agent-harness, its turn on Pydantic AI (``bench/peer_workers/harness_ticket.py``), its tickets sent
  through its own client in a process of its own.

Each peer runs in a virtual environment the bench builds itself with uv (under ``.tools/peers/``, once per pinned
requirement set), so their pins never touch this project's. Its tools act on the bench's SQLite shop
(``bench/peer_workers/shop.py``) and its model plays the same script.

A figure from a shared 2-core machine moves with the load, and systems measured one after another in their own
windows meet different loads. So the systems alternate: in each round each runs N tickets one after another, then N
at once, the first system rotating round by round; ours is compared with each peer by the ratio within each round,
and a verdict ("lower", "higher") is printed only when every round agrees by more than ``NOISE``, else "within
noise". The table goes to stdout and, but for ``--quick``, to ``bench/results/peers.md``, with the date, the
machine and its load.

Beside the CPU a ticket costs on a cluster of one's own, the table gives what it costs on Temporal Cloud: its Actions,
counted from every ticket's history by Temporal's published rules (``tests/support/actions.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
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
from tests.support.actions import RULES_URL, billable_actions
from tests.support.verdicts import FEWEST_ROUNDS, NOISE, rotated, verdict

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
    environment: tuple[tuple[str, str], ...] = ()
    """Settings of its worker's environment that make the comparison fair."""
    driven: bool = False
    """Its tickets are started through a client of its own (``drive`` in its module), in a process of its own."""


OURS = "ours"
OURS_NAME = "agent-worker (this project)"
OURS_DOES = (
    "the whole ticket: the order checked to be the customer's, the refund under an idempotency key and the money "
    "policy (no approval wait here: 49.00 is under the ticket's limit), the email keyed, and an audit trail of the "
    "policy in force, the refund, the email and the close, each written by the work it records"
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
            environment=(("OPENAI_AGENTS_DISABLE_TRACING", "1"),),  # no exporter here: tracing would be pure cost
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

    name: str
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
        yield System(OURS_NAME, worker, start, client)


@asynccontextmanager
async def peer_system(peer: Peer, python: Path, address: str, scratch: Path) -> AsyncIterator[System]:
    shop = Shop(scratch / f"{peer.key}-shop.sqlite3").create()
    client = await Client.connect(address)
    task_queue = f"{peer.key}-{uuid.uuid4()}"
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": address,
        "PEER_TASK_QUEUE": task_queue,
        "PEER_SHOP": shop.path,
        **dict(peer.environment),
    }
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
        yield System(peer.name, worker, start, client)
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
                future = waiting.pop(request, None)
                if future is None or future.done():  # the bench gave up on it: a late answer has no one to go to
                    continue
                if answer.startswith("! "):
                    future.set_exception(RuntimeError(f"{answer[2:]}; {last_words(log)}"))
                else:
                    future.set_result(answer)
            for future in waiting.values():
                if not future.done():
                    future.set_exception(RuntimeError(f"the driver ended: {last_words(log)}"))

        return cls(Process(process), waiting, asyncio.create_task(read()))

    async def ticket(self, question: str) -> str:
        request = uuid.uuid4().hex
        self.waiting[request] = asyncio.get_running_loop().create_future()
        stdin = self.process.process.stdin
        assert stdin is not None
        stdin.write(f"{request} {question}\n".encode())
        await stdin.drain()
        try:
            return await asyncio.wait_for(self.waiting[request], TICKET_TIMEOUT)
        except TimeoutError:
            raise TimeoutError(
                f"waited {TICKET_TIMEOUT:g} s for the driver to say it had run the ticket {question!r} through its "
                "turn and closed it"
            ) from None
        finally:
            self.waiting.pop(request, None)

    async def stop(self) -> None:
        await self.process.stop()
        await self.reader


# --- measuring ----------------------------------------------------------------------------------------------------

TICKET_TIMEOUT = 120.0
"""Seconds a ticket may take before the bench gives up on the system: the first one waits for the worker to start."""


@dataclass
class Round:
    """One system's turn in one round: N tickets one after another, then N at once."""

    sequential_ms: list[float]
    worker_ms: float
    """The worker's CPU milliseconds per ticket, one after another."""
    server_ms: float
    """The server's CPU milliseconds per ticket, one after another: only this system was running tickets."""
    at_once_ms: list[float]
    at_once_elapsed_s: float
    at_once_worker_ms: float
    at_once_server_ms: float
    load: float
    """The machine's 1-minute load average as the round's tickets began."""
    actions: float
    """Temporal Cloud Actions per ticket, the mean over the round's tickets, counted from their histories."""


@dataclass
class Figures:
    """One system over the whole run: its rounds, and the shape of its ticket (the same every time)."""

    system: str
    rounds: list[Round] = field(default_factory=list)
    history: HistorySize | None = None
    activity_names: Counter[str] = field(default_factory=Counter)
    """The activities one ticket ran, by name."""

    def per_round(self, figure: Callable[[Round], float]) -> list[float]:
        return [figure(r) for r in self.rounds]


def sequential(r: Round) -> float:
    return median(r.sequential_ms)


def worker(r: Round) -> float:
    return r.worker_ms


def server(r: Round) -> float:
    return r.server_ms


def at_once_worker(r: Round) -> float:
    return r.at_once_worker_ms


def actions(r: Round) -> float:
    return r.actions


COMPARED: dict[str, Callable[[Round], float]] = {
    "worker CPU ms / ticket": worker,
    "worker CPU ms / ticket, N at once": at_once_worker,
    "server CPU ms / ticket": server,
    "ms / ticket": sequential,
    "actions / ticket": actions,
}
"""The figures ours is compared with each peer's on, round by round: what a ticket costs first."""


@contextlib.contextmanager
def during(step: str) -> Iterator[None]:
    """Names the step a failure came in (the system, the round, the ticket) on the failure: a timeout says nothing
    of itself, and the table shows only the failure."""
    try:
        yield
    except Exception as error:
        error.add_note(step)
        raise


async def finish(handle: WorkflowHandle[Any, Any], started: float) -> float:
    try:
        result = await asyncio.wait_for(handle.result(), TICKET_TIMEOUT)
    except TimeoutError:
        raise TimeoutError(f"waited {TICKET_TIMEOUT:g} s for the result of workflow {handle.id}") from None
    if isinstance(result, Outcome) and result.status != "resolved":
        raise RuntimeError(f"{handle.id} ended {result.status}: {result.answer}")
    return (time.perf_counter() - started) * 1000


async def warm(system: System, warm_up: int) -> None:
    """The worker's start-up and the server's burst, spent before anything is measured."""
    warm_until = time.perf_counter() + BURST_SECONDS
    done = 0
    while done < warm_up or time.perf_counter() < warm_until:
        with during(f"{system.name}, warm-up ticket {done + 1}"):
            await finish(await system.start(), time.perf_counter())
        done += 1


async def measure(system: System, tickets: int, server_process: Process, figures: Figures, round_: str) -> None:
    """One round of ``system``: its tickets one after another, then as many at once; then their Actions, counted
    from their histories once both CPU windows have closed, so reading the histories costs neither."""
    load_now = os.getloadavg()[0]
    cpu = system.worker.cpu_seconds(), server_process.cpu_seconds()
    handles, sequential_ms = [], []
    for i in range(tickets):
        with during(f"{system.name}, {round_}, ticket {i + 1} of {tickets} one after another"):
            started = time.perf_counter()
            handle = await system.start()
            sequential_ms.append(await finish(handle, started))
        handles.append(handle)
    worker_s, server_s = system.worker.cpu_seconds() - cpu[0], server_process.cpu_seconds() - cpu[1]
    cpu = system.worker.cpu_seconds(), server_process.cpu_seconds()
    with during(f"{system.name}, {round_}, {tickets} tickets at once"):
        started = time.perf_counter()
        at_once = await asyncio.gather(*(system.start() for _ in range(tickets)))
        at_once_ms = list(await asyncio.gather(*(finish(h, started) for h in at_once)))
        elapsed = time.perf_counter() - started
    at_once_worker_s, at_once_server_s = system.worker.cpu_seconds() - cpu[0], server_process.cpu_seconds() - cpu[1]
    totals = [billable_actions((await h.fetch_history()).events).total() for h in [*handles, *at_once]]
    figures.rounds.append(
        Round(
            sequential_ms=sequential_ms,
            worker_ms=1000 * worker_s / tickets,
            server_ms=1000 * server_s / tickets,
            at_once_ms=at_once_ms,
            at_once_elapsed_s=elapsed,
            at_once_worker_ms=1000 * at_once_worker_s / tickets,
            at_once_server_ms=1000 * at_once_server_s / tickets,
            load=load_now,
            actions=statistics.fmean(totals),
        )
    )
    if figures.history is None:
        figures.history = await history_size(handles[-1])
        events = await handles[-1].fetch_history()
        figures.activity_names = Counter(
            e.activity_task_scheduled_event_attributes.activity_type.name
            for e in events.events
            if e.HasField("activity_task_scheduled_event_attributes")
        )


@dataclass
class Options:
    tickets: int = 10
    rounds: int = 7
    warm_up: int = 3
    systems: tuple[str, ...] = SYSTEMS
    quick: bool = False
    docs: bool = False


SERVER = "poll limit 1000"
"""The one server configuration every system runs against: the embedded stack's flags. At the server's default
poll limit every system waits on the poll and the figures say little about the systems themselves."""


async def main(options: Options) -> str:
    load_before = load()
    pythons = {key: await peer_python(PEERS[key]) for key in options.systems if key in PEERS}
    installed = {key: await versions(python, PEERS[key].reported) for key, python in pythons.items()}
    installed[OURS] = await versions(Path(sys.executable), ("agent-worker", "temporalio"))
    with contextlib.suppress(OSError, RuntimeError):  # not a git checkout: the versions say enough
        installed[OURS] += f" at {(await run('git', '-C', str(ROOT), 'rev-parse', '--short', 'HEAD')).strip()}"
    results = {key: Figures(OURS_NAME if key == OURS else PEERS[key].name) for key in options.systems}
    failures: dict[str, str] = {}

    def failed(key: str, error: BaseException) -> None:
        if key not in failures:
            failures[key] = "; ".join((f"{type(error).__name__}: {error}", *getattr(error, "__notes__", [])))
            print(f"{results[key].system} failed: {failures[key]}", file=sys.stderr)

    with tempfile.TemporaryDirectory(prefix="peers-") as directory:
        scratch = Path(directory)
        async with dev_server(scratch, POLL_LIMITS[SERVER]) as (server_process, address):
            running: dict[str, System] = {}
            async with contextlib.AsyncExitStack() as stack:
                for key in options.systems:  # every worker up at once: each round runs them on the same server
                    try:
                        system = (
                            our_system(address, scratch)
                            if key == OURS
                            else peer_system(PEERS[key], pythons[key], address, scratch)
                        )
                        running[key] = await stack.enter_async_context(guarded(system, functools.partial(failed, key)))
                        await warm(running[key], options.warm_up)
                    except Exception as error:  # noqa: BLE001 - one system failing is a row of the table, not the end
                        failed(key, error)
                for n in range(options.rounds):
                    for key in rotated([k for k in options.systems if k in running], n):
                        if key in failures:
                            continue
                        try:
                            round_ = f"round {n + 1} of {options.rounds}"
                            await measure(running[key], options.tickets, server_process, results[key], round_)
                        except Exception as error:  # noqa: BLE001 - as above
                            failed(key, error)
    return report(options, results, failures, installed, load_before)


@asynccontextmanager
async def guarded(
    system: AbstractAsyncContextManager[System], failed: Callable[[BaseException], None]
) -> AsyncIterator[System]:
    """``system``, whose failure on the way out (a peer that did not refund every order) is a row of the table."""
    entered = await system.__aenter__()
    try:
        yield entered
    finally:
        try:
            await system.__aexit__(None, None, None)
        except Exception as error:  # noqa: BLE001 - as above
            failed(error)


# --- the table --------------------------------------------------------------------------------------------------


def spread(values: Sequence[float], digits: int = 0) -> str:
    """A median and the range of the rounds beside it: ``141 (133 to 150)``."""
    if not values:
        return ""
    return f"{median(values):.{digits}f} ({min(values):.{digits}f} to {max(values):.{digits}f})"


def counted(values: Sequence[float]) -> str:
    """A count that every round agrees on, alone (``26``); else its median and range as ``spread`` gives them."""
    if values and min(values) == max(values):
        return f"{values[0]:g}"
    return spread(values, 1)


def report(
    options: Options,
    results: dict[str, Figures],
    failures: dict[str, str],
    installed: dict[str, str],
    load_before: str,
) -> str:
    n = options.tickets
    measured = {key: f for key, f in results.items() if f.rounds and f.history and key not in failures}
    loads = [r.load for f in measured.values() for r in f.rounds]
    lines = [
        f"# The same ticket on each system{' (--quick: not a measurement)' if options.quick else ''}",
        "",
        f"{machine()}; load average at the start {load_before}.",
        (
            f"{options.rounds} rounds on one `temporal server start-dev` ({SERVER}, the embedded stack's flags), "
            f"every system's worker up throughout; in each round each system in turn (the first one rotating) runs "
            f"{n} tickets one after another, then {n} at once. Scripted model, zero think time, {STEPS} model calls "
            f"a ticket; CPU read from /proc; history from the server, and every ticket's Temporal Cloud Actions "
            f"counted from it by the rules of <{RULES_URL}> (the least it is billed: queries and heartbeats leave no "
            f"event). Each figure is the median of the rounds, their range in brackets; the 1-minute load average "
            f"as the rounds ran: {min(loads, default=0):.1f} to {max(loads, default=0):.1f}."
        ),
        "",
        "**One after another**",
        "",
        (
            "| system | ms / ticket | worker CPU ms / ticket | worker CPU ms / activity | server CPU ms / ticket "
            "| actions / ticket | activities | events / ticket | history KB / ticket |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for f in measured.values():
        assert f.history is not None
        activities = f.history.activities
        lines.append(
            f"| {f.system} | {spread(f.per_round(sequential))} | {spread(f.per_round(worker))} | "
            f"{spread([w / activities for w in f.per_round(worker)], 1)} | {spread(f.per_round(server))} | "
            f"{counted(f.per_round(actions))} | {activities} | {f.history.events} | {f.history.bytes / 1024:.1f} |"
        )
    lines += [
        "",
        f"**{n} at once**",
        "",
        "| system | tickets / s | ms / ticket | worker CPU ms / ticket | server CPU ms / ticket |",
        "|---|---|---|---|---|",
    ]
    for f in measured.values():
        lines.append(
            f"| {f.system} | {spread([n / r.at_once_elapsed_s for r in f.rounds], 1)} | "
            f"{spread([median(r.at_once_ms) for r in f.rounds])} | {spread(f.per_round(at_once_worker))} | "
            f"{spread([r.at_once_server_ms for r in f.rounds])} |"
        )
    if OURS in measured and len(measured) > 1:
        lines += [
            "",
            (
                f"**Ours over each peer, within each round** (below 1: ours spends less; a verdict only when every "
                f"round agrees by more than {NOISE:.0%}, and only from {FEWEST_ROUNDS} rounds up)"
            ),
            "",
            "| peer | figure | ratio | verdict |",
            "|---|---|---|---|",
        ]
        ours = measured[OURS]
        for key, peer in measured.items():
            if key == OURS:
                continue
            for name, figure in COMPARED.items():
                ratios = [a / b for a, b in zip(ours.per_round(figure), peer.per_round(figure), strict=False) if b]
                lines.append(f"| {peer.system} | {name} | {spread(ratios, 2)} | {verdict(ratios)} |")
    lines += ["", "**What each system's ticket does**", "", "| system | versions | activities a ticket | missing |"]
    lines.append("|---|---|---|---|")
    for key in options.systems:
        done = results[key]
        ran = ", ".join(f"{a} x{c}" if c > 1 else a for a, c in done.activity_names.items())
        if key in failures:
            missing = f"**failed**: {failures[key][:600]}"
        else:
            missing = OURS_DOES if key == OURS else PEERS[key].missing
        lines.append(f"| {done.system} | {installed.get(key, '')} | {ran} | {missing} |")
    lines += ["", f"Load average at the end: {load()}.", ""]
    return "\n".join(lines)


def arguments() -> Options:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument(
        "--tickets", type=int, default=10, help="tickets a system runs a round, one after another, then at once"
    )
    cli.add_argument("--rounds", type=int, default=7, help="rounds, each system in turn in each")
    cli.add_argument("--quick", action="store_true", help="a smoke run: 1 round of 2 tickets; no results file")
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
        return Options(tickets=2, rounds=1, warm_up=1, systems=systems, quick=True)
    if args.rounds < 1 or args.tickets < 1:
        cli.error("--rounds and --tickets must be at least 1")
    return Options(tickets=args.tickets, rounds=args.rounds, systems=systems, docs=args.docs)


if __name__ == "__main__":
    options = arguments()
    publish("peers", asyncio.run(main(options)), results=not options.quick, docs=options.docs)
    exit_hard(0)
