"""Imports point one way: product code knows nothing of tests, benchmarks or scripts; tests, benchmarks and
scripts share helpers through ``tests/support/`` only, never by reaching into a test module.

Read from the source with ``ast``, so a helper moved back into a test module, or a benchmark importing one, fails
here by file and line instead of surfacing as an import-order surprise in pytest."""

from __future__ import annotations

import argparse
import ast
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
    implementing = ("agent_worker.commands", "agent_worker.operations", "agent_worker.store_commands")
    cli = module_level_imports(ROOT / "agent_worker" / "cli.py")
    assert [name for name in cli if any(under(name, module) for module in implementing)] == []
    for module in implementing:
        path = ROOT / Path(*module.split(".")).with_suffix(".py")
        assert [name for name in module_level_imports(path) if under(name, "agent_worker.cli")] == [], module


def test_every_command_names_a_function_that_implements_it() -> None:
    from agent_worker import cli  # noqa: PLC0415 - the parser itself, which imports no command

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
