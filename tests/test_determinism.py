"""Every module a workflow task can run is held to what a replay can repeat: the static half of the net.

Workers run the workflow unsandboxed, so nothing at run time refuses a read of the clock in a piece. What does is
ruff's banned-api list, ``workflows/ruff.toml``, and the checks of ``agent_worker.workflow_lint`` (run by
``./dev check`` in CI), over the modules ``agent_worker.workflow_code.modules()`` derives from the workflow's imports,
wherever they live. The dynamic half, the replay gate run as the workers run, is ``tests/test_gate_as_workers_run.py``.

Each kind of call is planted, in both spellings (``import m; m.f()`` and ``from m import f``), in a piece and in
``support_agent.py``, and ruff checks the planted module with the project's own configuration (the source on
stdin, named as the module it stands for): each is refused, with a message that says what to use instead. The
same plant outside ``workflows/`` is not refused, so the refusals are the list's, and activities may still read
the world."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from temporalio.worker import UnsandboxedWorkflowRunner

from agent_worker import workflow_code, workflow_lint
from agent_worker.cli.worker import local_worker
from agent_worker.model_choice import choose_model
from agent_worker.wiring import workers_runner
from agent_worker.workflow_lint import builtin_calls, module_state_changes
from tests.support.harness import Harness

ROOT = Path(__file__).resolve().parent.parent
RUFF = str(Path(sys.executable).parent / "ruff")
GUARDED = ("workflows", "activities/contracts")
"""The folders ruff's own configuration (``workflows/ruff.toml``) reaches; ``workflow_lint`` reaches the rest."""


@dataclass(frozen=True)
class Plant:
    """A call a careless change might add: what it imports, the statement, the name ruff must refuse, and what
    the refusal must tell the reader to use instead."""

    imports: str
    call: str
    banned: str
    instead: str


PLANTS = {
    "clock: datetime.now": Plant(
        "from datetime import UTC, datetime", "datetime.now(UTC)", "datetime.datetime.now", "use workflow.now()"
    ),
    "clock: date.today": Plant(
        "import datetime", "datetime.date.today()", "datetime.date.today", "use workflow.now().date()"
    ),
    "clock: time.time": Plant("import time", "time.time()", "time.time", "use workflow.time()"),
    "clock: from time import time": Plant("from time import time", "time()", "time.time", "use workflow.time()"),
    "clock: time.monotonic": Plant("import time", "time.monotonic()", "time.monotonic", "use workflow.time()"),
    "randomness: random.random": Plant("import random", "random.random()", "random", "use workflow.random()"),
    "randomness: from random import choice": Plant(
        "from random import choice", "choice('ab')", "random", "use workflow.random()"
    ),
    "randomness: secrets": Plant("import secrets", "secrets.token_hex()", "secrets", "workflow.random()"),
    "uuid: uuid.uuid4": Plant("import uuid", "uuid.uuid4()", "uuid.uuid4", "use workflow.uuid4()"),
    "uuid: from uuid import uuid4": Plant("from uuid import uuid4", "uuid4()", "uuid.uuid4", "use workflow.uuid4()"),
    "environment: os.environ": Plant(
        "import os", "os.environ['AGENT_APPROVAL_LIMIT']", "os.environ", "as input or through an activity"
    ),
    "environment: from os import getenv": Plant(
        "from os import getenv", "getenv('AGENT_APPROVAL_LIMIT')", "os.getenv", "as input or through an activity"
    ),
    "file: pathlib": Plant(
        "from pathlib import Path", "Path('policy.toml').read_text()", "pathlib", "read it in an activity"
    ),
    "file: builtins.open": Plant(
        "import builtins", "builtins.open('policy.toml').read()", "builtins.open", "read it in an activity"
    ),
    "thread: threading": Plant(
        "import threading", "threading.Thread(target=list).start()", "threading", "do the work in an activity"
    ),
    "thread: asyncio.to_thread": Plant(
        "import asyncio", "await asyncio.to_thread(list)", "asyncio.to_thread", "do the work in an activity"
    ),
    "sleep: from time import sleep": Plant("from time import sleep", "sleep(1)", "time.sleep", "use workflow.sleep()"),
    "sleep: asyncio.sleep": Plant("import asyncio", "await asyncio.sleep(1)", "asyncio.sleep", "use workflow.sleep()"),
    "process: subprocess": Plant(
        "import subprocess", "subprocess.run(['true'], check=True)", "subprocess", "run it in an activity"
    ),
    "network: httpx": Plant("import httpx", "httpx.get('https://example.com')", "httpx", "call it in an activity"),
    "patch asked past the chain: workflow.patched": Plant(
        "from temporalio import workflow", "workflow.patched('1.9.9/x')", "temporalio.workflow.patched", "taken("
    ),
    "a set of tasks: asyncio.wait": Plant(
        "import asyncio", "await asyncio.wait({asyncio.ensure_future(list())})", "asyncio.wait", "workflow.wait()"
    ),
    "a set of tasks: from asyncio import as_completed": Plant(
        "from asyncio import as_completed", "as_completed([])", "asyncio.as_completed", "workflow.as_completed()"
    ),
    "a cache: functools.cache": Plant("import functools", "functools.cache(list)", "functools.cache", "in the run"),
    "a cache: from functools import lru_cache": Plant(
        "from functools import lru_cache", "lru_cache(list)", "functools.lru_cache", "in the run"
    ),
    "time zone: datetime.fromtimestamp": Plant(
        "from datetime import datetime", "datetime.fromtimestamp(0)", "datetime.datetime.fromtimestamp", "time zone"
    ),
    "time zone: zoneinfo": Plant(
        "from zoneinfo import ZoneInfo", "ZoneInfo('Europe/Paris')", "zoneinfo", "time-zone database"
    ),
    "clock in a type: pydantic.FutureDatetime": Plant(
        "from pydantic import FutureDatetime, TypeAdapter",
        "TypeAdapter(FutureDatetime)",
        "pydantic.FutureDatetime",
        "machine's clock",
    ),
    "clock in a type: pydantic.types.PastDate": Plant(
        "import pydantic.types", "pydantic.types.PastDate", "pydantic.types.PastDate", "machine's clock"
    ),
}

A_PIECE, THE_SANDBOXED_MODULE = "workflows/toolbox.py", "workflows/support_agent.py"


def planted(module: str, imports: str, call: str) -> tuple[str, int]:
    """``module``'s source with ``imports`` and a function making ``call`` added at its end, and the first line
    added (the call is the last)."""
    source = (ROOT / module).read_text()
    return f"{source}\n{imports}\n\n\nasync def _planted() -> None:\n    {call}\n", len(source.splitlines()) + 1


def ruff(*args: str, source: str | None = None) -> subprocess.CompletedProcess[str]:
    """``ruff check`` in the project's root, as ``./dev check`` runs it: each file under its closest configuration."""
    checked = subprocess.run(
        [RUFF, "check", *args], input=source, capture_output=True, text=True, cwd=ROOT, check=False, timeout=30
    )
    assert checked.returncode in {0, 1}, checked.stderr
    return checked


def refusals(module: str, source: str) -> list[dict[str, Any]]:
    """Ruff's banned-api findings on ``source`` read as the file ``module``: configured as that path would be."""
    checked = ruff("--output-format", "json", "--stdin-filename", module, "-", source=source)
    return [finding for finding in json.loads(checked.stdout) if finding["code"] == "TID251"]


def refused(module: str, plant: Plant) -> list[str]:
    """The messages with which ruff refuses ``plant`` in ``module`` (none from the module's own lines)."""
    source, first = planted(module, plant.imports, plant.call)
    found = refusals(module, source)
    assert all(finding["location"]["row"] >= first for finding in found), found
    return [finding["message"] for finding in found]


def guarded_modules() -> list[str]:
    """Every module a workflow task can run, derived from the workflow's imports (not a list kept by hand)."""
    return [str(path) for path in workflow_lint.files()]


@pytest.mark.parametrize("module", [A_PIECE, THE_SANDBOXED_MODULE], ids=["a piece", "the sandboxed module"])
@pytest.mark.parametrize("plant", PLANTS.values(), ids=PLANTS.keys())
def test_a_call_a_replay_would_make_differently_fails_the_lint_in_a_piece_as_in_the_sandboxed_module(
    module: str, plant: Plant
) -> None:
    messages = refused(module, plant)
    assert any(m.startswith(f"`{plant.banned}` is banned: ") and plant.instead in m for m in messages), messages


@pytest.mark.parametrize("module", guarded_modules())
def test_a_read_of_the_clock_fails_the_net_in_every_module_workflow_code_runs(module: str) -> None:
    clock = PLANTS["clock: datetime.now"]
    source, first = planted(module, clock.imports, clock.call)
    found = workflow_lint.banned_calls([Path(module)], {Path(module): source})
    assert [f for f in found if int(f.split(":")[1].split()[0]) >= first], module


def test_the_modules_workflow_code_runs_are_derived_from_the_workflows_imports() -> None:
    """``activities/tools.py`` runs in the workflow (the toolbox validates every call's arguments with its models),
    so the net reaches it though it is outside ``workflows/``; an activity class named only so its methods can be
    scheduled (``AuditActivities``) brings no module of the activity side in."""
    modules = workflow_code.modules()
    assert modules[0] == "workflows.support_agent"
    assert {"activities.tools", "workflows.payouts", "activities.contracts.fields"} <= set(modules)
    assert not [
        m
        for m in modules
        if m.startswith("activities.") and not m.startswith(("activities.contracts", "activities.tools"))
    ]
    assert "activities/tools.py" in guarded_modules()


def test_a_module_workflow_code_starts_to_import_is_under_the_net_wherever_it_lives(tmp_path: Path) -> None:
    """A helper a piece imports from a folder no configuration names is found from the import, and refused there."""
    copy_of_the_project(tmp_path)
    (tmp_path / "activities" / "closing_days.py").write_text(
        "from datetime import UTC, datetime\n\n\ndef closing() -> bool:\n    return datetime.now(UTC).day == 1\n"
    )
    toolbox = tmp_path / "workflows" / "toolbox.py"
    toolbox.write_text(
        toolbox.read_text().replace("import asyncio\n", "import asyncio\n\nfrom activities import closing_days\n", 1)
    )
    found = run_the_net(tmp_path)
    assert "activities/closing_days.py:5 `datetime.datetime.now` is banned" in found.stdout, found.stdout
    assert found.returncode == 1


def copy_of_the_project(into: Path) -> Path:
    """The three packages and the ruff configuration, copied into ``into`` to plant something in."""
    for package in ("agent_worker", "workflows", "activities"):
        shutil.copytree(ROOT / package, into / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", into / "pyproject.toml")
    return into


def run_the_net(tree: Path) -> subprocess.CompletedProcess[str]:
    """``python -m agent_worker.workflow_lint``, as ``./dev check`` runs it, on the copy ``tree``."""
    return subprocess.run(
        [sys.executable, "-m", "agent_worker.workflow_lint"],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_a_module_in_a_folder_workflows_does_not_have_yet_is_guarded_too() -> None:
    """Ruff takes the closest configuration up from a file, so a new folder under ``workflows/`` needs none."""
    clock = PLANTS["clock: datetime.now"]
    source, _ = planted(A_PIECE, clock.imports, clock.call)
    assert refusals("workflows/refunds/partial.py", source)


@pytest.mark.parametrize("plant", PLANTS.values(), ids=PLANTS.keys())
def test_outside_the_workflows_the_same_calls_are_not_the_lists_business(plant: Plant) -> None:
    """An activity reads the world: that is what it is for."""
    assert refused("activities/tool_activities.py", plant) == []


def test_the_workflow_code_of_today_passes_the_whole_net() -> None:
    checked = ruff("--select", "TID251", "--output-format", "concise", *GUARDED)
    assert checked.returncode == 0, checked.stdout
    assert workflow_lint.problems() == []


def test_a_suppression_is_refused_everywhere_but_where_a_patch_asks_temporal() -> None:
    """``# noqa: TID251`` silences ruff on any line; the net ignores every suppression, and allows one call past
    the ban list: the SDK's patch check, in ``workflows/patches.py``."""
    plant = '\n\ndef _label() -> str:\n    return f"{datetime.now(UTC):%H:%M}"  # noqa: TID251 - only a label\n'
    waits = Path("workflows/waits.py")
    source = (ROOT / waits).read_text() + "\nfrom datetime import UTC, datetime" + plant
    assert refusals(str(waits), source) == []  # ruff as `ruff check .` runs it lets the suppression through
    found = workflow_lint.banned_calls([waits], {waits: source})
    assert any("`datetime.datetime.now` is banned" in f for f in found), found
    patches = Path("workflows/patches.py")
    assert workflow_lint.banned_calls([patches]) == []
    asked_elsewhere = (
        ROOT / waits
    ).read_text() + "\n\ndef _p() -> bool:\n    return workflow.patched('x')  # noqa: TID251\n"
    found = workflow_lint.banned_calls([waits], {waits: asked_elsewhere})
    assert any("`temporalio.workflow.patched` is banned" in f for f in found), found
    per_file = workflow_lint.banned_calls(
        [waits], {waits: "# ruff: noqa\nfrom datetime import UTC, datetime\n\nX = datetime.now(UTC)\n"}
    )
    assert per_file, "a whole-file suppression is ignored too"


def test_the_builtins_check_finds_each_builtin_planted_in_a_piece_and_no_method_of_the_same_name() -> None:
    for name in workflow_lint.BANNED_BUILTINS:
        source, first = planted(A_PIECE, "", f"{name}('policy.toml')")
        last = len(source.splitlines())
        assert [line for line, what in builtin_calls(source) if line >= first and what.startswith(f"{name}()")] == [
            last
        ], name
    assert builtin_calls("self._replies.open('hello', 1)\nreplies.print()") == []


@pytest.mark.parametrize(
    "call",
    [
        "workflow.now().astimezone()",
        "self._opened.astimezone()",
        "workflow.now().fromtimestamp(0)",
        "d.utcfromtimestamp(0)",
    ],
)
def test_a_method_that_reads_the_machines_time_zone_is_found_on_any_object(call: str) -> None:
    source, first = planted("workflows/audit_log.py", "", f"x = {call}")
    assert [what for line, what in builtin_calls(source) if line >= first], call
    assert builtin_calls("workflow.now().astimezone(UTC)\nx.astimezone(tz=UTC)") == []


def test_no_workflow_code_changes_what_its_module_holds() -> None:
    """A worker imports each module once and runs every ticket on it: a module's constants stay constants."""
    found = [
        f"{module}:{line} {what}"
        for module in guarded_modules()
        for line, what in module_state_changes((ROOT / module).read_text())
    ]
    assert found == []


def test_a_mutable_attribute_on_a_class_of_workflow_code_is_found(tmp_path: Path) -> None:
    """A list on a class is one list for every ticket the worker runs, reached through ``self``."""
    tree = copy_of_the_project(tmp_path)
    events = tmp_path / "workflows" / "waits.py"
    source = events.read_text()
    assert "\nclass Events:" in source
    events.write_text(source.replace("\nclass Events:", "\nclass Events:\n    seen: list[str] = []  # noqa: RUF012", 1))
    found = run_the_net(tree)
    assert "workflows.waits.Events.seen: a list on the class is one for every ticket" in found.stdout, found.stdout


def test_the_module_state_check_finds_each_kind_of_change_planted_in_a_piece() -> None:
    plants = {
        "global CHAIN": "global CHAIN",
        "STOPPED": "STOPPED['why'] = 'because'",
        "STOPPED.update()": "STOPPED.update({})",
        "ATTEMPTS": "del ATTEMPTS['think']",
        "Handler": "Handler.__doc__ = 'changed'",
        "Toolbox": "Toolbox.calls = 0",
        "STOPPED.sort()": "STOPPED.sort()",
        "ATTEMPTS.reverse()": "ATTEMPTS.reverse()",
        "timeouts": "timeouts.ATTEMPTS['think'] = {}",
        "TOOLS.clear()": "TOOLS['refund'].description.clear()",
    }
    source = (
        (ROOT / A_PIECE).read_text()
        + "\nfrom workflows import timeouts\nfrom activities.tools import TOOLS\n"
        + "\nSTOPPED: dict[str, str] = {}\nATTEMPTS: dict[str, int] = {}\n"
    )
    for what, statement in plants.items():
        changed, first = planted_in(source, statement)
        assert [w for line, w in module_state_changes(changed) if line >= first] == [what], what
    assert (
        module_state_changes("X = []\n\n\ndef f() -> None:\n    y = []\n    y.append(1)\n    self.x.append(1)\n") == []
    )
    assert module_state_changes("from temporalio import workflow\n\n\ndef f() -> None:\n    workflow.update()\n") == []


def planted_in(source: str, statement: str) -> tuple[str, int]:
    return f"{source}\n\ndef _planted() -> None:\n    {statement}\n", len(source.splitlines()) + 1


async def test_workers_run_the_workflow_outside_the_sandbox_and_the_gate_replays_with_the_same_runner(
    agent: Harness,
) -> None:
    """The net above and the replay gate guard every module in a worker (docs/evals-and-replay.md); the gate replays
    with the runner the workers run (``wiring.workers_runner``), so what it proves is about them."""
    settings = agent.settings()
    worker = local_worker(agent.client, settings, agent.store, choose_model(settings, agent.store.model_calls))

    assert isinstance(worker.config(active_config=True)["workflow_runner"], UnsandboxedWorkflowRunner)
    assert isinstance(workers_runner(), UnsandboxedWorkflowRunner)
