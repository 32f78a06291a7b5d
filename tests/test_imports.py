"""Imports point one way: product code knows nothing of tests, benchmarks or scripts; tests, benchmarks and
scripts share helpers through ``tests/support/`` only, never by reaching into a test module.

Read from the source with ``ast``, so a helper moved back into a test module, or a benchmark importing one, fails
here by file and line instead of surfacing as an import-order surprise in pytest.

The code a workflow runs imports from an allow-list too: workers run it unsandboxed, so what it imports is what it
can reach (``tests/test_determinism.py`` holds the calls)."""

from __future__ import annotations

import argparse
import ast
import inspect
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("activities", "workflows", "agent_worker")


def imports(source: str) -> Iterator[tuple[int, str]]:
    """Every name a source imports, anywhere in it (a function's body too), with its line. ``from m import n``
    gives ``m.n``: a submodule or an attribute of ``m``, either way something that loads ``m``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield from ((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)


def under(name: str, package: str) -> bool:
    return name == package or name.startswith(f"{package}.")


def is_test_module(name: str) -> bool:
    """``tests.test_*`` or ``tests.conftest``, or anything in one."""
    parts = name.split(".")
    return parts[0] == "tests" and len(parts) > 1 and (parts[1].startswith("test_") or parts[1] == "conftest")


def offending(folders: tuple[str, ...], forbidden: Callable[[str], bool]) -> list[str]:
    """``file:line name`` for every import, in the Python files under ``folders``, of a name ``forbidden``."""
    return [
        f"{path.relative_to(ROOT)}:{line} {name}"
        for folder in folders
        for path in sorted((ROOT / folder).rglob("*.py"))
        for line, name in imports(path.read_text())
        if forbidden(name)
    ]


def test_no_test_module_or_conftest_is_imported_by_a_test_a_helper_a_benchmark_or_a_script() -> None:
    assert offending(("tests", "bench", "scripts"), is_test_module) == []


def test_tests_import_nothing_from_bench_or_scripts_and_those_take_only_tests_support() -> None:
    assert offending(("tests",), lambda name: under(name, "bench") or under(name, "scripts")) == []
    assert offending(("bench", "scripts"), lambda name: under(name, "tests") and not under(name, "tests.support")) == []


def test_product_code_imports_nothing_from_tests_bench_scripts_or_the_baseline() -> None:
    outside = ("tests", "bench", "scripts", "baseline")
    assert offending(PRODUCT, lambda name: any(under(name, folder) for folder in outside)) == []


def test_the_layers_import_downwards_only() -> None:
    """``agent_worker`` (the process) may import ``workflows`` and ``activities``; ``workflows`` imports activity
    declarations and contracts, never the process; ``activities`` import neither, so a worker's activities can be
    read, tested and replaced without the workflow or the command line."""
    assert offending(("activities",), lambda name: under(name, "workflows") or under(name, "agent_worker")) == []
    assert offending(("workflows",), lambda name: under(name, "agent_worker")) == []


def test_the_check_sees_every_way_of_importing_a_test_module() -> None:
    """A negative control: each spelling is found, so an empty list above means there were none."""
    spellings = [
        "from tests.test_processes import run",
        "import tests.test_processes",
        "from tests import test_processes",
        "def f():\n    from tests.conftest import StoreFactory",
    ]
    for source in spellings:
        assert any(is_test_module(name) for _, name in imports(source)), source
    assert not any(is_test_module(name) for _, name in imports("from tests.support.waits import poll"))


def module_level_imports(path: Path) -> set[str]:
    """What a module imports when it is imported: its top-level import statements, not those inside functions."""
    top = [node for node in ast.parse(path.read_text()).body if isinstance(node, ast.Import | ast.ImportFrom)]
    return {name for node in top for _, name in imports(ast.unparse(node))}


def test_the_command_line_and_the_commands_do_not_import_each_other_when_imported() -> None:
    """``cli`` parses and names each command's function; the commands never reach back into ``cli``. Neither
    imports the other at import time, so ``--help`` loads no command and there is no cycle to break."""
    implementing = ("agent_worker.cli.commands", "agent_worker.cli.operations", "agent_worker.cli.store_commands")
    cli = module_level_imports(ROOT / "agent_worker" / "cli" / "main.py")
    assert [name for name in cli if any(under(name, module) for module in implementing)] == []
    for module in implementing:
        path = ROOT / Path(*module.split(".")).with_suffix(".py")
        assert [name for name in module_level_imports(path) if under(name, "agent_worker.cli.main")] == [], module


def test_every_command_names_a_function_that_implements_it() -> None:
    from agent_worker.cli import main as cli  # noqa: PLC0415 - the parser itself, which imports no command

    def commands(parser: argparse.ArgumentParser, runs: object = None) -> Iterator[tuple[str, object]]:
        """Each command's prog and what it runs: its own default, else the one its parent command set."""
        runs = parser.get_default("func") or runs
        subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subcommands:
            yield parser.prog, runs
        for action in subcommands:
            for sub in action.choices.values():
                yield from commands(sub, runs)

    found = [*commands(cli.parser()), *commands(cli.capture_parser())]
    for prog, runs in found:
        assert isinstance(runs, cli.Runs), prog
        assert callable(runs.implementation()), prog
    assert len(found) > 20


PURE = (
    *("__future__", "asyncio", "collections.abc", "contextlib", "dataclasses", "datetime", "enum", "functools"),
    *("hashlib", "inspect", "json", "re", "types", "typing", "pydantic", "pydantic_core"),
    *("temporalio.workflow", "temporalio.common", "temporalio.exceptions", "temporalio.activity"),
    *("activities.contracts", "activities.tools", "workflows"),
)
"""What that code may import, and all it imports today: the standard library's pure modules (asyncio is the
workflow's own event loop; its calls that leave it are banned by ``workflows/ruff.toml``), the SDK's workflow side
(the only way to the time, randomness and the world) and the marks on the tools' activities, pydantic, and itself."""

NAMED_ONLY = {
    "activities.audit_trail.AuditActivities": "its methods name the audit activities",
    "activities.content_store.ContentActivities": "its methods name the archive activity",
    "activities.language_model.ModelActivities": "its methods name the model's activities",
    "activities.policy_activities.PolicyActivities": "its methods name the policy's activities",
}
"""What workflow code takes from the activity side beyond that, and why: activity classes whose methods name the
activities a workflow runs (never run in the workflow itself: see below), and one constant. A helper imported from
``activities/`` would run its clock, randomness or I/O in the workflow, passed through and unseen: add one here
only for a reason of this kind."""


def run_by_workflows() -> list[Path]:
    """The code a workflow runs, as the determinism net derives it from the workflow's imports: its pieces, the
    wire's helpers and the tools' declarations they call."""
    from agent_worker.workflow_lint import files  # noqa: PLC0415 - the net's own list, not one kept here

    return [ROOT / path for path in files()]


def test_workflow_code_imports_only_pure_modules_and_names_activities_it_never_runs() -> None:
    """The lint bans the standard library's ways to the world by name; this holds the rest: a passed-through
    piece importing a helper from ``activities/`` (which may read the clock: it is an activity's) fails here."""
    outside = [
        f"{path.relative_to(ROOT)}:{line} {name}"
        for path in run_by_workflows()
        for line, name in imports(path.read_text())
        if not any(under(name, module) for module in PURE) and name not in NAMED_ONLY
    ]
    assert outside == []


RUNS_AN_ACTIVITY = {
    "execute_activity_method",
    "execute_local_activity_method",
    "start_activity_method",
    "start_local_activity_method",
}
ACTIVITY_CLASSES = {name.rsplit(".", 1)[1] for name in NAMED_ONLY if name.endswith("Activities")}


def activity_classes_used(source: str) -> list[tuple[int, str]]:
    """Each use of an activity class but naming one of its methods as the activity a ``workflow.*`` call runs."""
    tree = ast.parse(source)
    naming = {
        id(call.args[0].value)
        for call in ast.walk(tree)
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr in RUNS_AN_ACTIVITY
        and call.args
        and isinstance(call.args[0], ast.Attribute)
    }
    return [
        (node.lineno, node.id)
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and node.id in ACTIVITY_CLASSES and id(node) not in naming
    ]


def test_workflow_code_names_activity_classes_only_to_run_their_methods_as_activities() -> None:
    """An activity class built or called in a workflow would do its I/O there, on every replay."""
    used = [
        f"{path.relative_to(ROOT)}:{line} {name}"
        for path in run_by_workflows()
        for line, name in activity_classes_used(path.read_text())
    ]
    assert used == []


def test_the_checks_of_workflow_code_see_a_helper_imported_from_an_activity_and_an_activity_run_in_place() -> None:
    """A negative control: each of these, planted in a piece, is found."""
    helper = "with workflow.unsafe.imports_passed_through():\n    from activities.content_store import digest"
    assert [name for _, name in imports(helper) if name not in NAMED_ONLY] == ["activities.content_store.digest"]
    assert not any(under("activities.content_store.digest", module) for module in PURE)
    run_in_place = [
        "await AuditActivities(store).audit(entry)",
        "await AuditActivities.audit(self, entry)",
        "audit = AuditActivities.audit",
    ]
    for source in run_in_place:
        assert activity_classes_used(source) == [(1, "AuditActivities")], source
    named = "await workflow.execute_activity_method(AuditActivities.audit, entry, **timeouts.attempt('audit'))"
    assert activity_classes_used(named) == []


def test_the_module_the_sandbox_runs_again_for_every_run_evaluates_its_annotations_once() -> None:
    """Where a team embedding the plugin keeps the SDK's sandbox (the product's workers do not), it executes the
    workflow's own module anew for each run it starts or replays; with its annotations
    kept as strings (``from __future__ import annotations``), the SDK parses each handler's on every run."""
    from workflows.support_agent import SupportAgent  # noqa: PLC0415

    tree = ast.parse(Path(inspect.getfile(SupportAgent)).read_text())
    futures = [node for node in tree.body if isinstance(node, ast.ImportFrom) and node.module == "__future__"]
    assert futures == [], "workflows/support_agent.py: leave annotations evaluated (see its comment)"


def reached(start: str) -> set[str]:
    """Every module of the product ``start`` can import, at import time or in a function, followed through the
    product's own modules."""
    seen: set[str] = set()
    pending = [start]
    while pending:
        module = pending.pop()
        if module in seen:
            continue
        path = ROOT / Path(*module.split("."))
        source = path.with_suffix(".py") if path.with_suffix(".py").exists() else path / "__init__.py"
        if not source.exists():
            continue
        seen.add(module)
        for _, name in imports(source.read_text()):
            if any(under(name, package) for package in PRODUCT):
                pending.extend([name, name.rpartition(".")[0]])  # a module, or an attribute of one
    return seen


def test_the_worker_process_imports_nothing_of_the_operators_side() -> None:
    """A worker polls and works: the gauges read from visibility are ``agent-worker metrics``'s and the tickets'
    operator commands are the CLI's, so ``agent_worker.cli.worker`` reaches neither, even in a function."""
    operator = ("agent_worker.cli.metrics", "agent_worker.tickets", "agent_worker.stuck", "agent_worker.cli.operations")
    worker = reached("agent_worker.cli.worker")
    assert "agent_worker.wiring" in worker, "a negative control: the walk follows the worker's imports"
    assert sorted(set(operator) & worker) == []


def workflow_imports() -> dict[str, set[str]]:
    """Each module of ``workflows/`` and the modules of ``workflows/`` it imports, anywhere in it (under
    ``TYPE_CHECKING`` too: a cycle hidden from the interpreter is still one for the reader)."""
    graph: dict[str, set[str]] = {}
    for path in sorted((ROOT / "workflows").glob("*.py")):
        module = f"workflows.{path.stem}"
        graph[module] = set()
        for _, name in imports(path.read_text()):
            for candidate in (name, name.rsplit(".", 1)[0]):
                if not under(candidate, "workflows") or candidate == module:
                    continue
                if (ROOT / Path(*candidate.split("."))).with_suffix(".py").exists():
                    graph[module].add(candidate)
                    break
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle of imports, each once, as the modules along it."""
    found: list[list[str]] = []

    def walk(module: str, path: list[str]) -> None:
        for imported in sorted(graph.get(module, ())):
            if imported in path:
                cycle = path[path.index(imported) :]
                if min(cycle) == cycle[0] and cycle not in found:
                    found.append(cycle)
            else:
                walk(imported, [*path, imported])

    for module in graph:
        walk(module, [module])
    return found


def test_the_workflows_modules_import_one_way() -> None:
    """The pieces hand a run over through ``workflows.handing_over``, a leaf; ``workflows.continuation`` composes
    their snapshots and imports them. An import only for a type (under ``TYPE_CHECKING``) counts: it may name a
    type, never hide a cycle."""
    graph = workflow_imports()
    assert cycles(graph) == []
    assert "workflows.handing_over" in graph["workflows.approval_gate"]
    assert "workflows.handing_over" in graph["workflows.waits"]
    assert not graph["workflows.handing_over"] - {"workflows.timeouts", "workflows.patches"}


def test_the_cycle_check_finds_a_cycle_through_a_type_checking_import() -> None:
    """A negative control: the circle 1.4.0 had (the gate and the waits importing the continuation for its type,
    which imports them for their snapshots) is found."""
    graph = {
        "workflows.approval_gate": {"workflows.continuation"},
        "workflows.waits": {"workflows.continuation"},
        "workflows.continuation": {"workflows.approval_gate", "workflows.waits"},
    }
    assert sorted(map(sorted, cycles(graph))) == [
        ["workflows.approval_gate", "workflows.continuation"],
        ["workflows.continuation", "workflows.waits"],
    ]
