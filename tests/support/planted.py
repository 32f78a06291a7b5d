"""A copy of the project with a fault planted in it, and the checks run on the copy as CI runs them on the project.

The checks must be shown to fail on the fault they are for, in the shape production would meet it: so the fault goes
into a copy of the real modules (never into the checkout), and the check runs in a process of its own that imports
the copy (``PYTHONPATH``), as ``./dev check`` and ``agent-worker replay`` run."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
PACKAGES = ("agent_worker", "workflows", "activities")


@dataclass(frozen=True)
class Plant:
    """Text to put into a module of the copy: ``new`` in place of ``old``, which must be there exactly once."""

    module: str
    old: str
    new: str


def copy_of_the_project(into: Path, *plants: Plant) -> Path:
    """The three packages and the configuration the checks read, copied into ``into``, with ``plants`` in them."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, into / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", into / "pyproject.toml")
    for plant in plants:
        path = into / plant.module
        source = path.read_text()
        assert source.count(plant.old) == 1, f"{plant.module}: {plant.old!r} is not there exactly once"
        path.write_text(source.replace(plant.old, plant.new))
    return into


@dataclass(frozen=True)
class Ran:
    code: int
    out: str


async def run_in(tree: Path, *args: str, timeout: float = 240) -> Ran:
    """``python -m ARGS`` importing the project from ``tree``, with the machine's environment but for that."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        *args,
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), timeout)
    assert process.returncode is not None
    return Ran(process.returncode, out.decode())


async def gate(tree: Path, *histories: str) -> Ran:
    """``agent-worker replay`` on ``histories`` (names in ``replay_histories/``), the code read from ``tree``."""
    paths = [str(ROOT / "replay_histories" / f"{name}.json") for name in histories]
    return await run_in(tree, "agent_worker", "replay", "--order", "7", *paths)
