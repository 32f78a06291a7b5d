"""From 1.x to 2.0 with tickets open (issue #48; docs/rollouts.md, "From 1.x to 2.0"): pinned to 1.5.0 they finish
there; and a pool without versioning, upgraded while a 1.x ticket waits, loses nothing.

2.0 holds one path: it does not replay the histories 1.x wrote, and 1.x does not replay 2.0's. Versioned workers
never meet another release's history (tickets are pinned, and move by continuing as new). An unversioned pool does:
any worker takes any task. What must hold there is that a worker refuses a history another release wrote, visibly,
rather than replaying it on the wrong code: its workflow task fails as nondeterministic, the ticket is listed as
stuck with the builds that wrote it and what to do, nothing is paid, and a worker of the ticket's release, back on
the task queue, carries it on to its one refund.

The 1.x release is the real one: its code, from its release commit, in a scratch copy run by this project's
interpreter (``tests/handed_over/README.md`` records from such copies too).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from activities.business import Business
from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.ticket import Status
from agent_worker.cli.devserver import start_dev_server
from agent_worker.stuck import STUCK_AFTER_FAILURES, StuckTicket, build_of, examine
from tests.support.crashlab import Lab, WorkerProcess
from tests.support.deployments import deployment, registered, routed_to, temporal
from tests.support.history import events
from tests.support.processes import AGENT_WORKER, address, run
from tests.support.tickets import Handle, answer, ticket
from tests.support.waits import poll, waiting_amount

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
LAST_1X = "dd7c3652add5a68778c5f4089a6621ea2eb81377"
"""1.5.0's release commit: the last 1.x."""
NO_COMMAND = {"malformed_ticket_failed"}
"""A ticket whose input cannot be read fails its first workflow task with no command, in every release alike: there
is nothing to replay differently, and the run is closed (``tests/test_refused_by_another_release.py`` says the
same of the 1.x history)."""


@pytest.fixture(scope="module")
def last_1x(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1.5.0's code, as released."""
    folder = tmp_path_factory.mktemp("release-1.5.0")
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", LAST_1X], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return folder


@pytest.fixture(scope="module")
async def server() -> AsyncIterator[WorkflowEnvironment]:
    env = await start_dev_server(None)
    yield env
    await env.shutdown()


async def spawn_1x(lab: Lab, code: Path, **settings: str) -> WorkerProcess:
    """A 1.5.0 worker on the lab's task queue and database: the same settings, that release's code."""
    log = lab.store.database.path.with_name(f"worker-1x-{len(lab.workers) + 1}.log")
    env = {**lab.env(**settings), "PYTHONPATH": str(code)}
    # -P: the current directory (this checkout) is not put before PYTHONPATH, so that release's code is what runs.
    worker = await WorkerProcess.start(env, log, (sys.executable, "-P", "-m", "agent_worker", "worker"))
    lab.workers.append(worker)
    return worker


async def test_a_2_0_worker_refuses_a_waiting_1x_ticket_visibly_and_its_own_release_pays_it_once(
    server: WorkflowEnvironment, store: Business, last_1x: Path
) -> None:
    client = server.client
    async with Lab(client, store) as lab:
        old = await spawn_1x(lab, last_1x)
        waiting = await lab.start(ticket())  # 49.00, above the 20.00 limit: it waits for a person
        assert await poll(lambda: waiting_amount(waiting), timeout=60, what="1.5.0 to ask a person") == 4900
        await old.stop()

        new = await lab.spawn()  # the pool upgraded: only 2.0 polls now
        await waiting.signal(APPROVE_SIGNAL, answer(4900))

        async def stuck() -> StuckTicket | None:
            return await examine(
                client, waiting.id, waiting.first_execution_run_id or "", at_least=STUCK_AFTER_FAILURES
            )

        found = await poll(stuck, timeout=90, interval=1, what="2.0 to refuse the 1.x history")
        assert "Nondeterminism" in found.failure or "nondetermin" in found.failure.lower(), found.failure
        assert "written by agent-worker-" in found.failure, found.failure
        assert "written by agent-worker-2." not in found.failure, "the builds named are the ones that wrote it"
        assert "docs/rollouts.md#from-1x-to-20" in found.failure
        assert store.payments.refunds("A-1001") == [], "refused, not replayed: nothing paid on the wrong code"

        async def listed() -> str | None:  # as the operator reads it, once the streak is long enough to list
            out = await run(AGENT_WORKER, "tickets", "--stuck", "--address", address(client))
            return out if waiting.id in out else None

        out = await poll(listed, timeout=90, interval=2, what="tickets --stuck to list the refused ticket")
        assert "keep a worker of agent-worker-" in out, out

        await new.stop()
        await spawn_1x(lab, last_1x)  # its own release back on the task queue: it takes the ticket on
        outcome = await asyncio.wait_for(waiting.result(), 120)
        assert outcome.status is Status.RESOLVED
        assert [refund.amount_cents for refund in store.payments.refunds("A-1001")] == [4900]


async def test_a_1x_worker_refuses_every_history_2_0_wrote(last_1x: Path, tmp_path: Path) -> None:
    """The other way round, for the same pool mid-upgrade: 1.5.0's code, replaying each of 2.0's stored histories
    as 1.5.0's gate replays (its workers' runner), fails every one."""
    out = tmp_path / "results.json"
    histories = sorted((ROOT / "replay_histories").glob("*.json"))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agent_worker.cli.replay",
        str(out),
        "0",
        *map(str, histories),
        env={**os.environ, "PYTHONPATH": str(last_1x)},
        cwd=last_1x,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), 300)
    assert process.returncode == 0, err.decode()[-3000:]
    results = json.loads(out.read_text())
    assert {Path(r["path"]).name for r in results} == {path.name for path in histories}
    replayed = sorted({Path(r["path"]).stem for r in results if r["failure"] is None})
    assert replayed == sorted(NO_COMMAND), f"1.5.0 replays histories 2.0 wrote, on the wrong code: {replayed}"


async def builds(handle: Handle) -> set[str]:
    """The builds that completed the run's workflow tasks: a versioned worker's build id, or an unversioned one's."""
    completed = await events(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
    return {build_of(event) for event in completed}


async def test_tickets_of_1x_pinned_to_1_5_0_finish_there_while_2_0_takes_every_new_ticket(
    server: WorkflowEnvironment, store: Business, last_1x: Path
) -> None:
    """The page's steps: 1.5.0 made a version (its unversioned ticket follows it), every open ticket pinned to it,
    2.0.0 made current. A 1.x ticket never reaches 2.0.0: answered, it pays on 1.5.0, once."""
    client = server.client
    name = f"support-agent-{uuid.uuid4().hex[:8]}"
    async with Lab(client, store) as lab:
        unversioned = await spawn_1x(lab, last_1x)
        waiting = await lab.start(ticket())
        assert await poll(lambda: waiting_amount(waiting), timeout=60, what="1.5.0 to ask a person") == 4900

        await spawn_1x(lab, last_1x, AGENT_DEPLOYMENT=name, AGENT_BUILD_ID="1.5.0")
        await registered(client, name, "1.5.0")
        await deployment(client, "set-current-version", "--deployment-name", name, "--build-id", "1.5.0", "--yes")
        await unversioned.stop()
        code, out = await temporal(
            client,
            "workflow",
            "update-options",
            "--yes",
            "--query",
            f"WorkflowType='SupportAgent' AND ExecutionStatus='Running' AND TaskQueue='{lab.task_queue}'",
            "--versioning-override-behavior",
            "pinned",
            "--versioning-override-deployment-name",
            name,
            "--versioning-override-build-id",
            "1.5.0",
        )
        assert code == 0, out
        await poll(lambda: pinned_to(waiting, "1.5.0"), timeout=60, what="the batch to pin the 1.x ticket")

        await lab.spawn(AGENT_DEPLOYMENT=name, AGENT_BUILD_ID="2.0.0")
        await registered(client, name, "2.0.0")
        await deployment(client, "set-current-version", "--deployment-name", name, "--build-id", "2.0.0", "--yes")
        await routed_to(client, lab.task_queue, "2.0.0")
        fresh = await lab.start(ticket("My parcel for order A-1003 never arrived", "cleo@example.com"))
        assert await poll(lambda: waiting_amount(fresh), timeout=60, what="2.0.0 to ask a person") == 12000
        assert await builds(fresh) == {"2.0.0"}

        await waiting.signal(APPROVE_SIGNAL, answer(4900))
        outcome = await asyncio.wait_for(waiting.result(), 120)
        assert outcome.status is Status.RESOLVED
        written = await builds(waiting)
        assert "2.0.0" not in written, written
        assert "1.5.0" in written, "the answer was taken by 1.5.0 as a version"
        assert [refund.amount_cents for refund in store.payments.refunds("A-1001")] == [4900]
        await fresh.terminate("shown: a new ticket runs on 2.0.0")


async def pinned_to(handle: Handle, build: str) -> bool:
    """Whether the run carries an override pinning it to ``build``."""
    described = await handle.describe()
    override = described.raw_description.workflow_execution_info.versioning_info.versioning_override
    return bool(override.pinned.version.build_id == build)
