"""Replaying stored histories against the current workflow code: the gate that stops a breaking change.

Temporal rebuilds a run on a new worker by replaying its code against the recorded history, so a change
that makes the code take another path (another activity first, a branch on the wall clock) breaks every
run in flight, and possibly without an error on a live worker. The replayer is stricter than a live
worker; run over real histories of every path worth guarding (``replay_histories/``), in CI on every
change, it turns "broke production" into "failed CI". It must use the same data converter as the worker,
or it would fail to decode the histories it is checking instead of checking them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client, WorkflowHistory
from temporalio.converter import DataConverter
from temporalio.worker import Plugin, Replayer, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from agent_worker.config import DATA_CONVERTER
from workflows.support_agent import SupportAgent

HISTORIES = Path("replay_histories")


@dataclass(frozen=True)
class ReplayResult:
    path: Path
    failure: str | None

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


async def replay(
    paths: Sequence[Path],
    workflows: Sequence[type] = (SupportAgent,),
    runner: WorkflowRunner | None = None,
    data_converter: DataConverter = DATA_CONVERTER,
    plugins: Sequence[Plugin] = (),
) -> list[ReplayResult]:
    """Replay each history file; a file that cannot even be read counts as a failure, not a crash. ``plugins``
    configure the replayer after ``data_converter`` (``agent-worker replay``'s is the client plugin, whose
    converter every client of the service shares)."""
    replayer = _replayer(workflows, runner, data_converter, plugins)
    results = []
    for path in history_files(paths):
        try:
            failure = await _replay_one(replayer, load_history(path))
        except (OSError, ValueError, KeyError) as error:
            results.append(ReplayResult(path, f"unreadable history: {error}"))
            continue
        results.append(ReplayResult(path, failure))
    return results


async def replay_history(
    history: WorkflowHistory,
    data_converter: DataConverter = DATA_CONVERTER,
    workflows: Sequence[type] = (SupportAgent,),
    runner: WorkflowRunner | None = None,
) -> str | None:
    """Replay one history held in memory (a capture checks its own before writing it); why it failed, or None."""
    return await _replay_one(_replayer(workflows, runner, data_converter), history)


def _replayer(
    workflows: Sequence[type],
    runner: WorkflowRunner | None,
    data_converter: DataConverter,
    plugins: Sequence[Plugin] = (),
) -> Replayer:
    return Replayer(
        workflows=workflows,
        data_converter=data_converter,
        workflow_runner=runner or SandboxedWorkflowRunner(),
        plugins=plugins,
    )


async def _replay_one(replayer: Replayer, history: WorkflowHistory) -> str | None:
    failure = (await replayer.replay_workflow(history, raise_on_replay_failure=False)).replay_failure
    return None if failure is None else f"{type(failure).__name__}: {failure}"


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
