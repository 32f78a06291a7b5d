"""Unversioned workers stay safe: this build refuses every run a 1.x release wrote.

A pool without Worker Deployment Versioning that is upgraded while 1.x tickets are open hands their next workflow task
to this build's workers, which replay the run's history on this build's code. A clean replay would carry a 1.x run on
in code that is not its own, so every stored 1.x history (the 1.x gate's, ``tests/handed_over/gate-1.x/``, and each
release's own hand-overs, ``tests/handed_over/<release>/``) must fail to replay here, as ``agent-worker replay``
replays (the workers' runner): with a nondeterminism error, at the history's first command that this build does not
issue. The task then fails, and is retried, visibly, until a worker of the run's own build takes it; nothing is paid
or sent meanwhile. Every 1.x run recorded a command this build never issues: from 1.3.0 on, the patch chain's marker,
first in the run; before, the patches each path met, or 1.0.0's ``money_policy`` activity where this build reads the
policy by a local activity.
"""

from __future__ import annotations

import json
from pathlib import Path

from agent_worker.cli.replay import ReplayResult, history_files, replay
from tests.support.handed_over import RECORDED_BY_RELEASE, this_release

EARLIER = history_files(
    sorted(path for path in RECORDED_BY_RELEASE.iterdir() if path.is_dir() and path.name != this_release())
)
"""Every stored history another release's code recorded (this release's own hand-overs, recorded for the release
after it, are this build's)."""

NO_COMMAND = {"gate-1.x/malformed_ticket_failed"}
"""Runs that issued no command at all: a ticket whose input could not be read fails its first workflow task, in
every release alike. Nothing of it can be replayed otherwise, and nothing is left to carry on: the run is closed."""

COMMANDS = (
    "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED",
    "EVENT_TYPE_MARKER_RECORDED",
    "EVENT_TYPE_TIMER_STARTED",
    "EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES",
    "EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED",
    "EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW",
    "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED",
)


def name(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def commands(path: Path) -> list[dict[str, object]]:
    """The events of ``path`` that a command of the workflow's wrote."""
    return [event for event in json.loads(path.read_text())["events"] if event["eventType"] in COMMANDS]


_REPLAYED: dict[str, ReplayResult] = {}


async def replayed() -> dict[str, ReplayResult]:
    """Every earlier release's history replayed on this build's code, once for the module."""
    if not _REPLAYED:
        _REPLAYED.update({name(result.path): result for result in await replay(EARLIER)})
    return _REPLAYED


def test_there_are_histories_of_every_1x_release_to_refuse() -> None:
    folders = {path.parent.name for path in EARLIER}
    assert {"gate-1.x", "1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0", "1.5.0"} <= folders
    assert len(EARLIER) > 100


async def test_every_run_a_1x_release_wrote_fails_to_replay_on_this_builds_code_as_nondeterministic() -> None:
    replayed_cleanly, refused_otherwise = [], []
    for label, result in (await replayed()).items():
        if label in NO_COMMAND:
            continue
        if result.ok:
            replayed_cleanly.append(label)
        elif "Nondeterminism" not in str(result.failure):
            refused_otherwise.append(f"{label}: {result.failure}")
    assert replayed_cleanly == [], "replayed on this build's code: a 1.x run an unversioned pool would carry on here"
    assert refused_otherwise == []


async def test_the_run_is_refused_at_the_first_command_this_build_does_not_issue() -> None:
    """The patch the run asked Temporal for (each 1.x run from 1.1.0 on asked one, and from 1.3.0 on as its first
    command) or, in 1.0.0's runs, the first command of the run: the ``money_policy`` activity."""
    for label, result in (await replayed()).items():
        if label in NO_COMMAND:
            continue
        failure = str(result.failure)
        first = commands(result.path)[0]
        patch = "Non-deprecated patch marker encountered for change 1." in failure
        at_first = f"HistoryEvent(id: {first['eventId']}, " in failure
        assert patch or at_first, f"{label}: {failure}"


async def test_a_run_that_issued_no_command_replays_anywhere_and_is_closed() -> None:
    """What a clean replay of another release's history may be: a run with no command, closed as failed at its first
    workflow task (unreadable input), the same in every release. Not a run this build could carry on."""
    results = await replayed()
    for label in NO_COMMAND:
        path = next(path for path in EARLIER if name(path) == label)
        events = json.loads(path.read_text())["events"]
        assert commands(path) == [], label
        assert events[-1]["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_FAILED", label
        assert results[label].ok, f"{label} is refused now: it belongs with the others ({results[label].failure})"
