"""The static half of the determinism net, over every module a workflow task can run (``workflow_code.modules()``).

Workers run the workflow unsandboxed, so nothing at run time stops a piece from reading the clock: what refuses it is
this check, which ``./dev check`` runs (``python -m agent_worker.workflow_lint``), and the replay gate, which replays
as the workers run (``agent_worker/cli/replay.py``). Four checks, each over the derived list of modules, wherever they
live (``activities/tools.py`` runs in the workflow too: the toolbox validates every call's arguments there):

- **The ban list**, ``workflows/ruff.toml`` (ruff's banned-api: the clock, randomness, the environment, files,
  threads, sleeps, the network, sets of tasks, caches, the machine's time zone, pydantic's clock-reading types),
  with every suppression ignored and every per-file exemption cleared. The one call allowed past it is the SDK's
  patch check in ``workflows/patches.py``, which must ask Temporal: ``ALLOWED``.
- **Builtins and methods ruff cannot name**: ``open()``, ``hash()``, ``id()``, ``globals()`` ... by their bare name;
  ``.astimezone()`` with no zone and ``.fromtimestamp()`` on any object (both read the machine's time zone).
- **Module state changed in a function**: a ``global``, an item or attribute of a module-level or imported name
  assigned or deleted, or changed in place (``append``, ``sort`` ...). The gate's fingerprint catches the same
  however it is spelled; this names the line before a history has to take it.
- **Mutable class attributes**: a list, dict or set on a class is one object for every ticket the worker runs.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from agent_worker import workflow_code

ROOT = Path(__file__).resolve().parent.parent
RUFF_CONFIG = ROOT / "workflows" / "ruff.toml"


@dataclass(frozen=True)
class Allowed:
    """A finding of the ban list that is the rule's point, not a breach: where it is, and the name it calls."""

    module: str
    banned: str
    why: str


ALLOWED = (
    Allowed(
        "workflows/patches.py",
        "temporalio.workflow.patched",
        "a patch asks Temporal in this one module (workflows/patches.py)",
    ),
)

BANNED_BUILTINS = {
    "open": "a file is the world: read it in an activity",
    "input": "reads the worker's stdin",
    "print": "writes again on every replay: use workflow.logger",
    "hash": "a str's hash differs from one worker process to the next (PYTHONHASHSEED)",
    "id": "an object's id differs from one worker process to the next",
    "__import__": "an import the lint cannot see",
    "breakpoint": "stops the worker",
    "globals": "a module's names, changed from a function, outlive the run",
    "exec": "code the lint cannot see",
    "eval": "code the lint cannot see",
    "compile": "code the lint cannot see",
}
"""Builtins a replay would call differently, or that reach past the lint, which ruff's banned-api cannot name (it bans
``builtins.open`` written out, not ``open``): found by their calls instead."""

TIME_ZONE_METHODS = {
    "astimezone": "with no zone it converts to the machine's time zone: name one (datetime.UTC)",
    "fromtimestamp": "reads the machine's time zone: keep the workflow's datetimes (workflow.now())",
    "utcfromtimestamp": "reads the machine's time zone: keep the workflow's datetimes (workflow.now())",
}

MUTATORS = frozenset(
    {"append", "extend", "insert", "remove", "pop", "clear", "update", "setdefault", "add", "discard", "popitem"}
    | {"sort", "reverse", "difference_update", "intersection_update", "symmetric_difference_update", "appendleft"}
    | {"extendleft", "popleft", "rotate"}
)
"""Methods that change a list, a dict, a set or a deque in place."""

_MUTABLE = (list, dict, set, bytearray, deque)


def files(modules: tuple[str, ...] | None = None) -> list[Path]:
    """The source files of the modules a workflow task can run, relative to the project's root."""
    return [workflow_code.source_path(name).relative_to(ROOT) for name in modules or workflow_code.modules()]


def banned_calls(paths: list[Path], sources: dict[Path, str] | None = None) -> list[str]:
    """The ban list's findings on ``paths`` (``sources`` read in place of a file's text), none suppressed, none
    exempted, but ``ALLOWED``: ``file:line message``."""
    if sources:
        return [found for path in paths for found in _ruff([path], sources.get(path))]
    return _ruff(paths, None)


def _ruff(paths: list[Path], source: str | None) -> list[str]:
    checked = subprocess.run(  # noqa: S603 - the project's own ruff, on the project's own files
        [
            str(Path(sys.executable).parent / "ruff"),
            *("check", "--config", str(RUFF_CONFIG), "--config", "lint.per-file-ignores = {}"),
            *("--config", "lint.extend-per-file-ignores = {}", "--select", "TID251", "--ignore-noqa"),
            *("--output-format", "json", "--no-cache"),
            *(["--stdin-filename", str(paths[0]), "-"] if source is not None else map(str, paths)),
        ],
        input=source,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        timeout=60,
    )
    if checked.returncode not in {0, 1}:
        raise RuntimeError(f"ruff failed on {', '.join(map(str, paths))}: {checked.stderr}")
    found = []
    for finding in json.loads(checked.stdout):
        path = Path(finding["filename"]).resolve().relative_to(ROOT)
        if not any(_allows(allowed, path, finding["message"]) for allowed in ALLOWED):
            found.append(f"{path}:{finding['location']['row']} {finding['message']}")
    return found


def _allows(allowed: Allowed, path: Path, message: str) -> bool:
    return str(path) == allowed.module and message.startswith(f"`{allowed.banned}` is banned")


def builtin_calls(source: str) -> list[tuple[int, str]]:
    """Each call of a banned builtin by its bare name, or of a method that reads the machine's time zone, with its
    line (a method called ``open`` is not the builtin)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Name) and node.func.id in BANNED_BUILTINS:
            found.append((node.lineno, f"{node.func.id}(): {BANNED_BUILTINS[node.func.id]}"))
        elif isinstance(node.func, ast.Attribute) and node.func.attr in TIME_ZONE_METHODS:
            zoned = node.func.attr == "astimezone" and (node.args or node.keywords)
            if not zoned:
                found.append((node.lineno, f".{node.func.attr}(): {TIME_ZONE_METHODS[node.func.attr]}"))
    return found


def module_state_changes(source: str) -> list[tuple[int, str]]:
    """Each place a function changes what its module holds, with its line: a ``global`` rebinding, an item or
    attribute of a module-level name (assigned, imported, or a class) assigned or deleted, or one of ``MUTATORS``
    called on it. In a worker without the sandbox a module's state outlives the run that changed it."""
    tree = ast.parse(source)
    module_names = {node.name for node in tree.body if isinstance(node, ast.ClassDef | ast.FunctionDef)}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            module_names |= {target.id for target in targets if isinstance(target, ast.Name)}
    modules: set[str] = set()  # imported names: another module's table, changed through its name
    for imported in ast.walk(tree):
        if isinstance(imported, ast.Import):
            modules |= {(alias.asname or alias.name).split(".", 1)[0] for alias in imported.names}
        elif isinstance(imported, ast.ImportFrom):
            names = {alias.asname or alias.name: f"{imported.module}.{alias.name}" for alias in imported.names}
            module_names |= names.keys()
            modules |= {name for name, full in names.items() if workflow_code.is_module(full)}
    module_names |= modules

    def root(node: ast.expr) -> str | None:
        while isinstance(node, ast.Subscript | ast.Attribute | ast.Call):
            node = node.func if isinstance(node, ast.Call) else node.value
        return node.id if isinstance(node, ast.Name) and node.id in module_names else None

    found: list[tuple[int, str]] = []
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            found += _changes_in(function, root, modules)
    return sorted(set(found))


def _changes_in(
    function: ast.AST, root: Callable[[ast.expr], str | None], modules: set[str]
) -> Iterator[tuple[int, str]]:
    """``module_state_changes`` in one function; a module's own functions (``workflow.update()``) change nothing."""
    for node in ast.walk(function):
        if isinstance(node, ast.Global):
            yield from ((node.lineno, f"global {name}") for name in node.names)
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.Delete):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for target in targets:
            if isinstance(target, ast.Subscript | ast.Attribute) and (name := root(target)) is not None:
                yield target.lineno, name
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in MUTATORS
            and not (isinstance(node.func.value, ast.Name) and node.func.value.id in modules)
            and (name := root(node.func.value)) is not None
        ):
            yield node.lineno, f"{name}.{node.func.attr}()"


def mutable_class_attributes(module: str) -> list[str]:
    """Each list, dict, set or deque held on a class a module defines: one object shared by every run."""
    found = []
    for name, cls in vars(importlib.import_module(module)).items():
        if inspect.isclass(cls) and cls.__module__ == module:
            found += [
                f"{module}.{name}.{key}: a {type(value).__name__} on the class is one for every ticket the worker "
                "runs: make it an instance's, or a tuple or frozenset"
                for key, value in vars(cls).items()
                if isinstance(value, _MUTABLE) and not _reserved(key)
            ]
    return found


def _reserved(name: str) -> bool:
    """A name the language, enum or pydantic keep on a class for themselves (``__dict__``, ``_member_map_``,
    ``model_config``): their bookkeeping of the class, written once as it is made."""
    return name.startswith("__") or (name.startswith("_") and name.endswith("_")) or name == "model_config"


def problems() -> list[str]:
    """Everything the four checks find in today's workflow code: empty, or what to mend, by file and line."""
    modules = workflow_code.modules()
    paths = files(modules)
    found = banned_calls(paths)
    for path in paths:
        source = (ROOT / path).read_text()
        found += [f"{path}:{line} {what}" for line, what in builtin_calls(source)]
        found += [f"{path}:{line} changes module state: {what}" for line, what in module_state_changes(source)]
    for module in modules:
        found += mutable_class_attributes(module)
    return found


if __name__ == "__main__":  # ``./dev check``
    found = problems()
    for line in found:
        print(line)
    print(f"workflow code: {len(files())} modules checked, {len(found)} problems")
    sys.exit(1 if found else 0)
