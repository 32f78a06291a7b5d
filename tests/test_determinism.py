"""Every module of ``workflows/`` is held to what a replay can repeat, not only the one the sandbox sees.

Temporal's sandbox restricts the modules it imports itself, and that is ``workflows/support_agent.py`` alone: the
pieces it imports passed through, where every money decision is made, run outside it, and there a read of the
clock, of randomness or of the environment returns a value unnoticed (``tests/test_replay.py`` shows both sides).
What stands guard over all of them is ruff's banned-api list, ``workflows/ruff.toml`` (which
``activities/contracts/ruff.toml`` extends to the wire's helpers the pieces call), run by ``./dev check`` in CI;
and, for the builtins ruff cannot ban by name, the check at the end of this file.

Each kind of call is planted, in both spellings (``import m; m.f()`` and ``from m import f``), in a piece and in
``support_agent.py``, and ruff checks the planted module with the project's own configuration (the source on
stdin, named as the module it stands for): each is refused, with a message that says what to use instead. The
same plant outside ``workflows/`` is not refused, so the refusals are the list's, and activities may still read
the world."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from temporalio.worker import UnsandboxedWorkflowRunner

from agent_worker.cli.worker import local_worker
from agent_worker.model_choice import choose_model
from tests.support.harness import Harness

ROOT = Path(__file__).resolve().parent.parent
RUFF = str(Path(sys.executable).parent / "ruff")
GUARDED = ("workflows", "activities/contracts")
"""The folders whose code runs inside a workflow: the pieces, and the wire's helpers they call."""


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
    return [str(path.relative_to(ROOT)) for folder in GUARDED for path in sorted((ROOT / folder).rglob("*.py"))]


@pytest.mark.parametrize("module", [A_PIECE, THE_SANDBOXED_MODULE], ids=["a piece", "the sandboxed module"])
@pytest.mark.parametrize("plant", PLANTS.values(), ids=PLANTS.keys())
def test_a_call_a_replay_would_make_differently_fails_the_lint_in_a_piece_as_in_the_sandboxed_module(
    module: str, plant: Plant
) -> None:
    messages = refused(module, plant)
    assert any(m.startswith(f"`{plant.banned}` is banned: ") and plant.instead in m for m in messages), messages


@pytest.mark.parametrize("module", guarded_modules())
def test_a_read_of_the_clock_fails_the_lint_in_every_module_workflow_code_runs(module: str) -> None:
    assert refused(module, PLANTS["clock: datetime.now"]), module


def test_a_module_in_a_folder_workflows_does_not_have_yet_is_guarded_too() -> None:
    """Ruff takes the closest configuration up from a file, so a new folder under ``workflows/`` needs none."""
    clock = PLANTS["clock: datetime.now"]
    source, _ = planted(A_PIECE, clock.imports, clock.call)
    assert refusals("workflows/refunds/partial.py", source)


@pytest.mark.parametrize("plant", PLANTS.values(), ids=PLANTS.keys())
def test_outside_the_workflows_the_same_calls_are_not_the_lists_business(plant: Plant) -> None:
    """An activity reads the world: that is what it is for."""
    assert refused("activities/tool_activities.py", plant) == []


def test_the_workflow_code_of_today_makes_no_banned_call() -> None:
    checked = ruff("--select", "TID251", "--output-format", "concise", *GUARDED)
    assert checked.returncode == 0, checked.stdout


BANNED_BUILTINS = {
    "open": "a file is the world: read it in an activity",
    "input": "reads the worker's stdin",
    "print": "writes again on every replay: use workflow.logger",
    "hash": "a str's hash differs from one worker process to the next (PYTHONHASHSEED)",
    "id": "an object's id differs from one worker process to the next",
    "__import__": "an import the lint cannot see",
    "breakpoint": "stops the worker",
}
"""Builtins a replay would call differently, which ruff's banned-api cannot name (it bans ``builtins.open`` written
out, not ``open``): found here by their calls instead."""


def builtin_calls(source: str) -> list[tuple[int, str]]:
    """Each call of a banned builtin by its bare name, with its line (a method called ``open`` is not one)."""
    return [
        (node.lineno, node.func.id)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in BANNED_BUILTINS
    ]


def test_no_workflow_code_calls_a_builtin_that_reads_the_world_or_the_process() -> None:
    declarations = "activities/tools.py"  # run by the toolbox, outside the lint's folders
    found = [
        f"{module}:{line} {name}(): {BANNED_BUILTINS[name]}"
        for module in [*guarded_modules(), declarations]
        for line, name in builtin_calls((ROOT / module).read_text())
    ]
    assert found == []


def test_the_builtins_check_finds_each_builtin_planted_in_a_piece_and_no_method_of_the_same_name() -> None:
    for name in BANNED_BUILTINS:
        source, first = planted(A_PIECE, "", f"{name}('policy.toml')")
        last = len(source.splitlines())
        assert [call for call in builtin_calls(source) if call[0] >= first] == [(last, name)], name
    assert builtin_calls("self._replies.open('hello', 1)\nreplies.print()") == []


MUTATORS = frozenset(
    {"append", "extend", "insert", "remove", "pop", "clear", "update", "setdefault", "add", "discard", "popitem"}
)
"""Methods that change a list, a dict or a set in place."""


def module_state_changes(source: str) -> list[tuple[int, str]]:
    """Each place a function changes what its module holds, with its line: a ``global`` rebinding, an item or
    attribute of a module-level name assigned or deleted, or one of ``MUTATORS`` called on it. In a worker without
    the sandbox a module's state outlives the run that changed it, and the next run on that worker would read it."""
    tree = ast.parse(source)
    module_names = {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    } | {node.name for node in tree.body if isinstance(node, ast.ClassDef)}  # a class's attributes are its module's

    def root(node: ast.expr) -> str | None:
        while isinstance(node, ast.Subscript | ast.Attribute):
            node = node.value
        return node.id if isinstance(node, ast.Name) and node.id in module_names else None

    found: list[tuple[int, str]] = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Global):
                found += [(node.lineno, f"global {name}") for name in node.names]
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign | ast.Delete):
                targets = node.targets
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            found += [
                (target.lineno, name)
                for target in targets
                if isinstance(target, ast.Subscript | ast.Attribute) and (name := root(target)) is not None
            ]
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in MUTATORS
                and (name := root(node.func.value)) is not None
            ):
                found.append((node.lineno, f"{name}.{node.func.attr}()"))
    return sorted(found)


def test_no_workflow_code_changes_what_its_module_holds() -> None:
    """What the sandbox gave beyond the lint was a fresh copy of the workflow's module for each run; every piece,
    passed through, never had one. A module's constants stay constants in every module workflow code runs."""
    found = [
        f"{module}:{line} {what}"
        for module in guarded_modules()
        for line, what in module_state_changes((ROOT / module).read_text())
    ]
    assert found == []


def test_the_module_state_check_finds_each_kind_of_change_planted_in_a_piece() -> None:
    plants = {
        "global CHAIN": "global CHAIN",
        "STOPPED": "STOPPED['why'] = 'because'",
        "STOPPED.update()": "STOPPED.update({})",
        "ATTEMPTS": "del ATTEMPTS['think']",
        "Handler": "Handler.__doc__ = 'changed'",
        "Toolbox": "Toolbox.calls = 0",
    }
    source = (ROOT / A_PIECE).read_text() + "\nSTOPPED: dict[str, str] = {}\nATTEMPTS: dict[str, int] = {}\n"
    for what, statement in plants.items():
        changed, first = planted_in(source, statement)
        assert [w for line, w in module_state_changes(changed) if line >= first] == [what], what
    assert (
        module_state_changes("X = []\n\n\ndef f() -> None:\n    y = []\n    y.append(1)\n    self.x.append(1)\n") == []
    )


def planted_in(source: str, statement: str) -> tuple[str, int]:
    return f"{source}\n\ndef _planted() -> None:\n    {statement}\n", len(source.splitlines()) + 1


async def test_workers_run_the_workflow_outside_the_sandbox(agent: Harness) -> None:
    """The lint above is what guards every module in a worker (docs/evals-and-replay.md); the replay gate keeps the
    sandbox, where it costs no ticket anything (``tests/test_replay.py`` shows it refusing a read of the clock)."""
    settings = agent.settings()
    worker = local_worker(agent.client, settings, agent.store, choose_model(settings, agent.store.model_calls))

    assert isinstance(worker.config(active_config=True)["workflow_runner"], UnsandboxedWorkflowRunner)
