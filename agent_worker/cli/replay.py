"""Replaying stored histories against the current workflow code, as the workers run it: the gate that stops a
breaking change.

Temporal rebuilds a run on a new worker by replaying its code against the recorded history, so a change that makes
the code take another path (another activity first, a branch on the wall clock) breaks every run in flight, and
possibly without an error on a live worker. Run over real histories of every path worth guarding
(``replay_histories/``), in CI on every change, the replayer turns "broke production" into "failed CI". It must use
the same data converter as the worker, or it would fail to decode the histories it is checking instead of checking
them.

A gate proves something of the workers only if it replays as they run. A worker runs the workflow with
``wiring.workers_runner()`` (no sandbox: one import of each module, every ticket on the same module objects, one
after another), so the gate does too, and checks three things beyond Temporal's own comparison of each command with
the history:

- **Twice, in one process, in another order.** Every history is replayed, then every one again in a shuffled order,
  on one replayer: a ticket replayed after others meets whatever they left behind, as on a worker.
- **The same commands every time.** Each replay's commands, with their arguments (which Temporal does not compare:
  an activity's input, a timer's length, a search attribute's value), are recorded from the runner; a history must
  give the same ones each time it is replayed, in every condition (below).
- **Nothing left behind.** Before the first history and after each one, a fingerprint of everything the modules of
  workflow code hold (``agent_worker.workflow_code``): a run that changes it has left state the next ticket reads.

``agent-worker replay`` runs all that in two processes at once, under two conditions a worker may meet: another
hash seed (a set of strings iterates in another order), another time zone, and, where Debian's ``faketime`` is
installed, a clock years ahead (a value compared with the machine's clock, such as pydantic's ``FutureDatetime``,
validates otherwise). A history must replay, and give the same commands, in both.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.client import Client, WorkflowHistory
from temporalio.converter import DataConverter
from temporalio.worker import (
    Plugin,
    Replayer,
    WorkflowInstance,
    WorkflowInstanceDetails,
    WorkflowRunner,
)

from agent_worker import workflow_code
from agent_worker.config import DATA_CONVERTER
from agent_worker.wiring import workers_runner
from workflows.support_agent import SupportAgent

HISTORIES = Path("replay_histories")


@dataclass(frozen=True)
class ReplayResult:
    """One history's verdict: why it failed (the first reason), or None; and the commands its replays issued."""

    path: Path
    failure: str | None
    commands: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.failure is None

    def line(self) -> str:
        return f"ok    {self.path}" if self.ok else f"FAIL  {self.path}: {self.failure}"


def history_files(paths: Iterable[Path]) -> list[Path]:
    """The JSON files named, with each directory standing for the ``*.json`` files in it."""
    found: list[Path] = []
    for path in paths:
        found.extend(sorted(path.glob("*.json")) if path.is_dir() else [path])
    return found


def load_history(path: Path) -> WorkflowHistory:
    """A history as ``temporal workflow show --output json`` or ``agent-worker history export`` wrote it."""
    return WorkflowHistory.from_json(path.stem, path.read_text())


async def replay(  # noqa: PLR0913 - the gate's inputs, each with the workers' default
    paths: Sequence[Path],
    workflows: Sequence[type] = (SupportAgent,),
    runner: WorkflowRunner | None = None,
    data_converter: DataConverter = DATA_CONVERTER,
    plugins: Sequence[Plugin] = (),
    *,
    order_seed: int | None = None,
) -> list[ReplayResult]:
    """Replay each history file twice in this process, the second time in an order shuffled by ``order_seed``, on
    ``runner`` (the workers' by default), checking each replay against its history, the second's commands against
    the first's, and the state of workflow code after each; one result per file. A file that cannot be read counts
    as a failure, not a crash. ``plugins`` configure the replayer after ``data_converter`` (``agent-worker
    replay``'s is the client plugin, whose converter every client of the service shares)."""
    files = history_files(paths)
    loaded: dict[Path, WorkflowHistory] = {}
    failures: dict[Path, list[str]] = {path: [] for path in files}
    for path in files:
        try:
            loaded[path] = load_history(path)
        except (OSError, ValueError, KeyError) as error:
            failures[path].append(f"unreadable history: {error}")
    again = list(loaded)
    random.Random(order_seed).shuffle(again)  # noqa: S311 - an order to replay in, not a secret
    runs = [(path, 1) for path in loaded] + [(path, 2) for path in again]

    recorder = _Recorder(runner or workers_runner())
    replayer = Replayer(workflows=workflows, data_converter=data_converter, workflow_runner=recorder, plugins=plugins)
    commands: dict[tuple[Path, int], tuple[str, ...]] = {}
    watched = workflow_code.modules()
    state = workflow_code.State.of(watched)

    async def histories() -> AsyncIterator[WorkflowHistory]:
        for path, _ in runs:
            yield loaded[path]

    async with replayer.workflow_replay_iterator(histories()) as results:
        index = 0
        async for result in results:
            path, run = runs[index]
            index += 1
            commands[path, run] = recorder.take()
            after = workflow_code.State.of(watched)
            left, state = state.changes(after), after
            if result.replay_failure is not None:
                failures[path].append(_when(run, f"{type(result.replay_failure).__name__}: {result.replay_failure}"))
            if left:
                failures[path].append(_when(run, f"it left state behind for the next ticket: {'; '.join(left[:3])}"))
    for path in loaded:
        first, second = commands.get((path, 1), ()), commands.get((path, 2), ())
        if first != second:
            failures[path].append(
                f"replayed again after other tickets, it issued other commands: {_difference(first, second)}"
            )
    return [
        ReplayResult(path, " | ".join(dict.fromkeys(failures[path])) or None, commands.get((path, 1), ()))
        for path in files
    ]


def _when(run: int, failure: str, limit: int = 600) -> str:
    """A failure as one line a reader takes in (a failed task's own account runs to its whole stack)."""
    failure = " ".join(failure.split())
    failure = failure if len(failure) <= limit else f"{failure[: limit - 3]}..."
    return failure if run == 1 else f"replayed again after other tickets: {failure}"


def _difference(first: Sequence[str], second: Sequence[str]) -> str:
    """Where two lists of commands part: the first index at which they differ, and what each holds there."""
    for index, (one, other) in enumerate(zip(first, second, strict=False)):
        if one != other:
            return f"command {index + 1} was {one}, then {other}"
    return f"{len(first)} commands, then {len(second)}"


async def replay_history(
    history: WorkflowHistory,
    data_converter: DataConverter = DATA_CONVERTER,
    workflows: Sequence[type] = (SupportAgent,),
    runner: WorkflowRunner | None = None,
) -> str | None:
    """Replay one history held in memory (a capture checks its own before writing it); why it failed, or None."""
    replayer = Replayer(workflows=workflows, data_converter=data_converter, workflow_runner=runner or workers_runner())
    failure = (await replayer.replay_workflow(history, raise_on_replay_failure=False)).replay_failure
    return None if failure is None else f"{type(failure).__name__}: {failure}"


# --- the commands a replay issues ---------------------------------------------------------------------------------


class _Recorder(WorkflowRunner):
    """The workers' runner, and a record of every command each activation completes with: what a worker would send
    the server, arguments and all. The replayer runs one history at a time, so what is taken after a history's
    result is that history's."""

    def __init__(self, runner: WorkflowRunner) -> None:
        self.runner = runner
        self.commands: list[str] = []

    def prepare_workflow(self, defn: Any) -> None:
        self.runner.prepare_workflow(defn)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _Recorded(self.runner.create_instance(det), self.commands)

    def set_worker_level_failure_exception_types(self, types: Sequence[type[BaseException]]) -> None:
        self.runner.set_worker_level_failure_exception_types(types)

    def take(self) -> tuple[str, ...]:
        taken = tuple(self.commands)
        self.commands.clear()
        return taken


@dataclass
class _Recorded(WorkflowInstance):
    instance: WorkflowInstance
    commands: list[str] = field(default_factory=list)

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        completion = self.instance.activate(act)
        if completion.HasField("failed"):
            self.commands.append(f"task failed: {completion.failed.failure.message}")
        for command in completion.successful.commands:
            self.commands.append(_described(command))
        return completion

    def get_serialization_context(self, command_info: Any) -> Any:
        return self.instance.get_serialization_context(command_info)

    def get_external_store_context(self, command_info: Any) -> Any:
        return self.instance.get_external_store_context(command_info)

    def get_info(self) -> Any:
        return self.instance.get_info()

    def get_thread_id(self) -> int | None:
        return self.instance.get_thread_id()


def _described(command: Any) -> str:
    """A command as a line: its kind, the activity or timer it names, and a digest of all of it."""
    kind = command.WhichOneof("variant") or "unknown"
    body = getattr(command, kind, None)
    named = getattr(body, "activity_type", "") if body is not None else ""
    digest = hashlib.sha256(command.SerializeToString(deterministic=True)).hexdigest()[:16]
    return f"{kind}{f' {named}' if named else ''} ({digest})"


# --- the gate: two processes, two conditions ----------------------------------------------------------------------


@dataclass(frozen=True)
class Condition:
    """A process's surroundings a worker may meet, under which every history must replay alike."""

    hash_seed: str
    time_zone: str
    clock_ahead_days: int = 0
    """How far ``faketime`` moves the clock; 0 for the machine's clock."""
    faketime: str | None = None
    """The program that moves it, where it is installed."""

    @property
    def name(self) -> str:
        said = f"hash seed {self.hash_seed}, {self.time_zone}"
        if not self.clock_ahead_days:
            return said
        if self.faketime:
            return f"{said}, the clock {self.clock_ahead_days} days ahead"
        return f"{said} (faketime is not installed: the clock was not moved)"


CONDITIONS = (Condition("0", "UTC"), Condition("1", "Pacific/Chatham", clock_ahead_days=1000))


@dataclass(frozen=True)
class Verdict:
    """The gate's answer over every condition: one result per file, and the conditions as they ran."""

    results: list[ReplayResult]
    conditions: list[str]


async def gate(paths: Sequence[Path], order_seed: int) -> Verdict:
    """Replay ``paths`` in one process per condition, at once; a file fails if it fails under any, or if its commands
    differ between them. The processes read the settings from this one's environment, as ``agent-worker replay``
    does."""
    conditions = [dataclasses.replace(c, faketime=shutil.which("faketime")) for c in CONDITIONS]
    runs = await asyncio.gather(*(_in_process(c, paths, order_seed + i) for i, c in enumerate(conditions)))
    merged: list[ReplayResult] = []
    for mine in zip(*runs, strict=True):
        failures = [f"{c.name}: {r.failure}" for c, r in zip(conditions, mine, strict=True) if r.failure]
        first = mine[0]
        others = [(c, r) for c, r in zip(conditions[1:], mine[1:], strict=True) if r.commands != first.commands]
        if not failures and others:
            condition, other = others[0]
            failures.append(
                f"it issued other commands under {condition.name} than under {conditions[0].name}: "
                f"{_difference(first.commands, other.commands)}"
            )
        merged.append(ReplayResult(first.path, failures[0] if failures else None, first.commands))
    return Verdict(merged, [c.name for c in conditions])


async def _in_process(condition: Condition, paths: Sequence[Path], order_seed: int) -> list[ReplayResult]:
    env = {
        **os.environ,
        "PYTHONHASHSEED": condition.hash_seed,
        "TZ": condition.time_zone,
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }
    with tempfile.TemporaryDirectory() as folder:  # the results go to a file: the SDK's core logs to stdout
        out = Path(folder) / "results.json"
        command = [sys.executable, "-m", "agent_worker.cli.replay", str(out), str(order_seed), *map(str, paths)]
        if condition.clock_ahead_days and condition.faketime:
            command = [condition.faketime, "-f", f"+{condition.clock_ahead_days}d", *command]
        process = await asyncio.create_subprocess_exec(
            *command, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
        )
        _, err = await process.communicate()
        found = json.loads(out.read_text()) if process.returncode == 0 and out.exists() else None
    if found is None:  # the code did not even load: every history fails, with the error's last line
        why = (err.decode().strip().splitlines() or [f"exit {process.returncode}"])[-1]
        return [ReplayResult(path, f"could not be replayed: {why}") for path in history_files(paths)]
    return [ReplayResult(Path(r["path"]), r["failure"], tuple(r["commands"])) for r in found]


async def _replay_here(order_seed: int, paths: list[Path]) -> list[ReplayResult]:
    from agent_worker.config import Settings  # noqa: PLC0415 - the settings of the process that asked
    from agent_worker.wiring import AgentClientPlugin, data_converter  # noqa: PLC0415

    return await replay(paths, plugins=[AgentClientPlugin(data_converter(Settings()))], order_seed=order_seed)


# --- histories from a server --------------------------------------------------------------------------------------


async def fetch(client: Client, workflow_id: str, run_id: str | None = None) -> WorkflowHistory:
    """A run's history as the server stores it: every payload as it was written, encrypted or not."""
    from agent_worker import tickets  # noqa: PLC0415 - for capture alone

    return await tickets.handle(client, workflow_id, run_id=run_id).fetch_history()


async def export(client: Client, workflow_id: str, out: Path, run_id: str | None = None) -> int:
    """Write a run's history in the JSON shape of ``temporal workflow show --output json``; return events."""
    history = await fetch(client, workflow_id, run_id)
    await asyncio.to_thread(write_history, out, history)
    return len(history.events)


def write_history(out: Path, history: WorkflowHistory) -> None:
    """One event per few lines, so a re-recorded history reads as a diff in review."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(history_text(history))


def history_text(history: WorkflowHistory) -> str:
    return json.dumps(json.loads(history.to_json()), indent=1) + "\n"


if __name__ == "__main__":  # one condition's process: ``gate`` reads its results from the file it names
    found = asyncio.run(_replay_here(int(sys.argv[2]), [Path(p) for p in sys.argv[3:]]))
    results = [{"path": str(r.path), "failure": r.failure, "commands": r.commands} for r in found]
    Path(sys.argv[1]).write_text(json.dumps(results))
    os._exit(0)  # temporalio may abort at interpreter exit after all its work is done (ENVIRONMENT.md)
