"""Rolling a change out with Worker Deployment Versioning (``docs/rollouts.md``), on a real dev server with two
``agent-worker worker`` processes of one deployment and two builds, driven by the same ``temporal worker deployment``
commands the page documents; and the settings that opt a worker in, refused at start when they are wrong.

Which build ran a ticket is read from its history: every completed workflow task records the deployment version of
the worker that completed it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from pydantic import ValidationError
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.common import VersioningBehavior
from temporalio.testing import WorkflowEnvironment

from activities.business import Business
from activities.contracts.names import APPROVE_SIGNAL, TURNS_QUERY
from activities.contracts.ticket import Outcome, Status, Turn
from agent_worker import wiring
from agent_worker.cli.devserver import free_port, start_dev_server
from agent_worker.cli.rollout import Routing
from agent_worker.config import Settings
from agent_worker.config.deployment import DeploymentSettings
from tests.support.crashlab import Lab
from tests.support.deployments import (
    DRAINAGE_CHECKED_EVERY_SECOND,
    count,
    deployment,
    drainage,
    registered,
    routed_to,
    temporal,
)
from tests.support.fake_messages_api import FakeMessagesAPI, message, text, tool_use
from tests.support.history import events
from tests.support.processes import AGENT_WORKER, address, exited, run, spawn_worker, worker_env
from tests.support.tickets import Handle, answer, ticket
from tests.support.waits import poll, waiting_amount
from workflows.support_agent import SupportAgent

NO_APPROVAL_NEEDED = 10_000


@pytest.fixture(scope="module")
async def server() -> AsyncIterator[WorkflowEnvironment]:
    env = await start_dev_server(None, extra_args=DRAINAGE_CHECKED_EVERY_SECOND)
    yield env
    await env.shutdown()


async def builds(handle: Handle) -> list[str]:
    """The build of the worker that completed each of the run's workflow tasks, in order."""
    completed = await events(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
    return [e.workflow_task_completed_event_attributes.deployment_version.build_id for e in completed]


def quick() -> dict[str, Any]:
    """A ticket that names no order, so the script asks which one and the ticket ends there, touching no order the
    ticket waiting for a person is about, on whichever build the server routes it to."""
    return ticket("Hello, can you help me with something?")


async def finished_on(handle: Handle) -> list[str]:
    """The builds that ran the ticket, once it has resolved."""
    outcome = await asyncio.wait_for(handle.result(), 60)
    assert outcome.status is Status.RESOLVED
    return await builds(handle)


@pytest.mark.slow
async def test_a_rollout_ramps_new_tickets_to_v2_keeps_tickets_in_flight_on_v1_and_moves_the_waiting_one_when_woken(
    server: WorkflowEnvironment, store: Business
) -> None:
    client = server.client
    name = f"support-agent-{uuid.uuid4().hex[:8]}"
    version = ("--deployment-name", name)
    bind = f"127.0.0.1:{free_port()}"
    async with Lab(client, store) as lab:
        v1 = await lab.spawn(AGENT_DEPLOYMENT=name, AGENT_BUILD_ID="v1", AGENT_METRICS_BIND=bind)
        await registered(client, name, "v1")
        await deployment(client, "set-current-version", *version, "--build-id", "v1", "--yes")

        waiting = await lab.start(ticket())  # a refund of 49.00 above the 20.00 limit: it waits for a person
        assert await poll(lambda: waiting_amount(waiting), what="the refund to wait for a person") == 4900
        assert set(await builds(waiting)) == {"v1"}
        in_flight = await lab.start(ticket("My parcel for order A-1003 never arrived", "cleo@example.com"))
        assert await poll(lambda: waiting_amount(in_flight), what="a second refund to wait for a person") == 12000
        await metrics_name_the_version(bind, name, "v1")

        await lab.spawn(AGENT_DEPLOYMENT=name, AGENT_BUILD_ID="v2")
        await registered(client, name, "v2")
        assert set(await finished_on(await lab.start(quick()))) == {"v1"}, "v2 runs nothing before it is ramped"

        await ramped_and_withdrawn(client, name, "v2")
        assert set(await finished_on(await lab.start(quick()))) == {"v1"}

        # A ramp sends a new ticket to v2 or not by a hash of its workflow id: at 100 %, every one. A ticket in
        # flight is pinned: answered, it pays and finishes on the build that began its turn.
        await deployment(client, "set-ramping-version", *version, "--build-id", "v2", "--percentage", "100", "--yes")
        assert set(await finished_on(await lab.start(quick()))) == {"v2"}
        await in_flight.signal(APPROVE_SIGNAL, answer(12000))
        assert set(await finished_on(in_flight)) == {"v1"}
        assert [refund.amount_cents for refund in store.payments.refunds("A-1003")] == [12000]

        await deployment(client, "set-current-version", *version, "--build-id", "v2", "--yes")
        routes = await routing(client, name)
        assert routes["currentVersionBuildID"] == "v2"
        assert not routes.get("rampingVersionBuildID")
        assert set(await finished_on(await lab.start(quick()))) == {"v2"}

        # The ticket waiting for a person is pinned to v1, which drains only once it moves: woken, it moves.
        last_on_v1 = f"TemporalWorkerDeploymentVersion='{name}:v1' AND ExecutionStatus='Running'"
        assert await count(client, last_on_v1) == 1, "the ticket waiting for a person"
        assert (await drainage(client, name, "v1")).status == "draining"
        move = (AGENT_WORKER, "rollout", "move", "--from", "v1", "--deployment", name, *where(client))
        moved = await run(*move, env={"AGENT_TASK_QUEUE": lab.task_queue}, timeout=120)
        assert f"woke 1 tickets on {name}.v1" in moved, moved
        latest = client.get_workflow_handle(waiting.id, result_type=Outcome)
        await poll(lambda: on_build(latest, "v2"), what="the waiting ticket to continue on v2")
        assert await poll(lambda: waiting_amount(latest), what="the same refund to wait on v2") == 4900
        await poll(lambda: drained(client, name, "v1"), timeout=30, interval=0.5, what="v1 to be drained")
        await poll(lambda: none_on(client, last_on_v1), what="visibility to list nothing on v1")
        await v1.stop()
        assert await v1.exited() == 0

        await latest.signal(APPROVE_SIGNAL, answer(4900))
        assert set(await finished_on(latest)) == {"v2"}, "the run that continued it, on v2 from its first task"
        first_run = client.get_workflow_handle(waiting.id, run_id=waiting.first_execution_run_id)
        assert set(await builds(first_run)) == {"v1"}, "the run that waited on v1 ended there, handing over"
        assert [refund.amount_cents for refund in store.payments.refunds("A-1001")] == [4900]
        _, out = await temporal(client, "workflow", "describe", "--workflow-id", waiting.id, "-o", "json")
        info = json.loads(out)["workflowExecutionInfo"]["versioningInfo"]
        assert (info["behavior"], info["deploymentVersion"]["buildId"]) == ("VERSIONING_BEHAVIOR_PINNED", "v2")


async def ramped_and_withdrawn(client: Client, name: str, build: str) -> None:
    """Ramp 10 % of tickets to ``build``, and withdraw the ramp, as the page's step 5 backs out."""
    version = ("--deployment-name", name, "--build-id", build)
    await deployment(client, "set-ramping-version", *version, "--percentage", "10", "--yes")
    routes = await routing(client, name)
    assert (routes["currentVersionBuildID"], routes["rampingVersionBuildID"]) == ("v1", build)
    assert routes["rampingVersionPercentage"] == 10
    await deployment(client, "set-ramping-version", *version, "--delete", "--yes")
    routes = await routing(client, name)
    # --delete, on this CLI and server, leaves the build named as the ramping version at 0 %: it gets no ticket.
    assert (routes["currentVersionBuildID"], routes.get("rampingVersionPercentage", 0)) == ("v1", 0)


def where(client: Client) -> tuple[str, ...]:
    """The ``--address`` and ``--namespace`` an operator command needs to reach ``client``'s server."""
    return ("--address", address(client), "--namespace", client.namespace)


async def on_build(handle: Handle, build: str) -> bool:
    """Whether the ticket's latest run is on ``build``."""
    described = await handle.describe()
    return bool(described.raw_description.workflow_execution_info.versioning_info.deployment_version.build_id == build)


async def none_on(client: Client, query: str) -> bool:
    return await count(client, query) == 0


async def routing(client: Client, name: str) -> dict[str, Any]:
    """Where the deployment sends tickets: ``describe``'s current and ramping versions and the ramp's percentage."""
    described: dict[str, Any] = (await deployment(client, "describe", "--name", name))["routingConfig"]
    return described


async def metrics_name_the_version(bind: str, name: str, build: str) -> None:
    """The worker's Prometheus endpoint at ``bind`` tags Temporal's metrics and the product's with its version."""
    async with aiohttp.ClientSession() as http, http.get(f"http://{bind}/metrics") as response:
        scraped = (await response.text()).splitlines()
    tags = (f'worker_deployment_name="{name}"', f'worker_build_id="{build}"')
    for metric in ("temporal_workflow_task_execution_latency_count{", "agent_model_calls{"):
        assert any(line.startswith(metric) and all(tag in line for tag in tags) for line in scraped), metric


async def drained(client: Client, name: str, build: str) -> bool:
    """Whether ``describe-version`` reports the version drained."""
    return (await drainage(client, name, build)).status == "drained"


# --- the settings that opt a worker in ------------------------------------------------------------------------------


def test_a_worker_is_unversioned_unless_a_deployment_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    assert wiring.deployment_config(Settings()) is None
    assert wiring.deployment_tags(None) == {}
    monkeypatch.setenv("AGENT_DEPLOYMENT", "")  # "" is unset, as compose passes an unset variable
    assert Settings().versioning.deployment is None


def test_a_named_deployment_makes_the_worker_a_version_whose_tickets_are_pinned() -> None:
    config = wiring.deployment_config(
        Settings(versioning=DeploymentSettings(deployment="support-agent", build_id="v2"))
    )
    assert config is not None
    assert (config.version.deployment_name, config.version.build_id) == ("support-agent", "v2")
    assert config.use_worker_versioning
    assert config.default_versioning_behavior is VersioningBehavior.PINNED
    assert wiring.deployment_tags(config) == {"worker_deployment_name": "support-agent", "worker_build_id": "v2"}

    by_digest = wiring.deployment_config(Settings(versioning=DeploymentSettings(deployment="support-agent")))
    assert by_digest is not None
    assert by_digest.version.build_id == wiring.build_id()


def test_the_ticket_leaves_its_behaviour_to_the_worker_so_an_unversioned_one_can_run_it() -> None:
    """Declared on ``@workflow.defn``, the behaviour goes with every task an unversioned worker completes too, and
    server 1.32.0 refuses those completions: every ticket on such a worker would hang."""
    declared = getattr(SupportAgent, "__temporal_workflow_definition").versioning_behavior
    assert declared is VersioningBehavior.UNSPECIFIED


@pytest.mark.parametrize(
    ("settings", "refusal"),
    [
        ({"build_id": "v2"}, "AGENT_BUILD_ID names a version of a Worker Deployment, but AGENT_DEPLOYMENT is not set"),
        ({"deployment": "", "build_id": "v2"}, "AGENT_DEPLOYMENT is not set"),
        ({"deployment": "   "}, r"AGENT_DEPLOYMENT is blank \('   '\)"),
        ({"deployment": "support-agent", "build_id": "\t"}, r"AGENT_BUILD_ID is blank"),
        ({"deployment": " support-agent"}, "AGENT_DEPLOYMENT must not start or end with a space"),
        ({"deployment": "support-agent", "build_id": "v2 "}, "AGENT_BUILD_ID must not start or end with a space"),
        ({"deployment": "support.agent"}, "AGENT_DEPLOYMENT must not contain a dot"),
        ({"deployment": "support-agent", "build_id": "__unversioned__"}, "AGENT_BUILD_ID must not be __unversioned__"),
    ],
)
def test_a_version_that_is_not_one_is_refused_naming_the_setting(
    settings: dict[str, Any], refusal: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given as an operator gives them, in the environment, where ``""`` is a variable left unset."""
    for name, value in settings.items():
        monkeypatch.setenv(f"AGENT_{name.upper()}", value)
    with pytest.raises(ValidationError, match=refusal):
        DeploymentSettings()


async def test_a_worker_with_a_build_but_no_deployment_does_not_start_and_says_which_setting() -> None:
    nowhere = "127.0.0.1:1"  # refused before it connects anywhere
    settings = worker_env(nowhere, f"support-agent-{uuid.uuid4()}", None, AGENT_BUILD_ID="v2")
    process = await spawn_worker(settings, stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 2
    assert "cannot start with these settings" in err.decode()
    assert "AGENT_BUILD_ID names a version of a Worker Deployment, but AGENT_DEPLOYMENT is not set" in err.decode()


# --- rollout move: what it refuses --------------------------------------------------------------------------------


def test_a_ramp_at_zero_is_no_ramp_and_a_build_is_kept_only_where_every_ticket_goes() -> None:
    assert Routing.of("v1", "v2", 0) == Routing("v1")  # what set-ramping-version --delete leaves
    assert Routing.of("v1", "", 0) == Routing("v1")
    assert Routing.of("", "", 0) == Routing(None)
    assert Routing("v1").keeps("v1")
    assert not Routing("v1", "v2", 10).keeps("v1"), "a ramp moves a share of v1's tickets: waking them moves those"
    assert not Routing("v2").keeps("v1")
    assert str(Routing("v1", "v2", 12.5)) == "v1, 12.5% to v2"
    assert str(Routing(None)) == "unversioned workers"


async def test_rollout_move_names_no_deployment_and_is_refused_before_it_connects() -> None:
    nowhere = "127.0.0.1:1"
    code, _, err = await exited(AGENT_WORKER, "rollout", "move", "--from", "v1", "--address", nowhere)
    assert code == 2
    assert "rollout move needs the deployment: --deployment NAME, or AGENT_DEPLOYMENT" in err
    for name, build in (("support-agent", "v1' OR WorkflowType='x"), ("it's", "v1"), ("support-agent", " ")):
        move = ("rollout", "move", "--from", build, "--deployment", name, "--address", nowhere)
        code, _, err = await exited(AGENT_WORKER, *move)
        assert code == 2, err
        assert "not a deployment or build id" in err


async def test_rollout_move_refuses_to_wake_the_build_every_ticket_still_goes_to(server: WorkflowEnvironment) -> None:
    client = server.client
    name, queue = f"support-agent-{uuid.uuid4().hex[:8]}", f"rollout-{uuid.uuid4().hex[:8]}"
    worker = await spawn_worker(worker_env(address(client), queue, None, AGENT_DEPLOYMENT=name, AGENT_BUILD_ID="v1"))
    try:
        await registered(client, name, "v1")
        await deployment(client, "set-current-version", "--deployment-name", name, "--build-id", "v1", "--yes")
        move = (AGENT_WORKER, "rollout", "move", "--from", "v1", "--deployment", name, *where(client))
        code, out, err = await exited(*move, env={"AGENT_TASK_QUEUE": queue})
        assert (code, out) == (1, "")
        assert f"{name}.v1 is still where {name} routes every ticket: make another build current first" in err
    finally:
        worker.terminate()
        await worker.wait()


# --- a turn ends on the build that began it ------------------------------------------------------------------------


@pytest.mark.slow
async def test_a_ticket_handed_over_mid_turn_stays_on_its_build_and_moves_at_its_next_wait(
    server: WorkflowEnvironment, store: Business
) -> None:
    """The deployment's target moves while the ticket's first model call is in flight. Its run, at its budget of one
    model call, hands over mid-turn: the run that goes on is still on v1, and finishes the turn there. Then it waits
    for the customer's reply, nothing in flight, and moves to v2 at once, woken by nothing."""
    client = server.client
    name = f"support-agent-{uuid.uuid4().hex[:8]}"
    version = ("--deployment-name", name)
    with FakeMessagesAPI().running() as api:
        claude = {"AGENT_MODEL_BACKEND": "claude", "ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": api.url}
        async with Lab(client, store, settings=claude) as lab:
            await lab.spawn(AGENT_DEPLOYMENT=name, AGENT_BUILD_ID="v1")
            await registered(client, name, "v1")
            await deployment(client, "set-current-version", *version, "--build-id", "v1", "--yes")
            await lab.spawn(AGENT_DEPLOYMENT=name, AGENT_BUILD_ID="v2")
            await registered(client, name, "v2")

            looked_up = message(tool_use("lookup_order", order_id="A-1001"), stop_reason="tool_use")
            api.script(dataclasses.replace(looked_up, delay=8), message(text("It left the depot today.")))
            handle = await lab.start(
                ticket("Where is order A-1001?", continue_as_new_after_steps=1, reply_window_seconds=3600)
            )
            await poll(lambda: asyncio.sleep(0, bool(api.requests)), what="the first model call to be in flight")
            await deployment(client, "set-current-version", *version, "--build-id", "v2", "--yes")
            await routed_to(client, lab.task_queue, "v2")

            latest = client.get_workflow_handle(handle.id, result_type=Outcome)
            await poll(lambda: on_build(latest, "v2"), timeout=60, what="the ticket to move when it waits")
            runs = [run async for run in client.list_workflows(f"WorkflowId = '{handle.id}'")]
            chain = sorted(runs, key=lambda run: run.start_time)
            built = [set(await builds(client.get_workflow_handle(run.id, run_id=run.run_id))) for run in chain]
            assert built == [{"v1"}, {"v1"}, {"v2"}], "the turn's two runs on v1, the waiting one on v2"
            assert len(api.requests) == 2, "each model call made once, across the three runs"
            turns = await latest.query(TURNS_QUERY, result_type=list[Turn])
            assert [turn.answer for turn in turns] == ["It left the depot today."]
            await latest.terminate("shown: moved while it waits")


def test_the_gate_holds_a_ticket_that_moved_to_a_new_build_while_it_waited() -> None:
    """The replay gate's history of a move (``scripts/record_histories.py``): the waiting run was told its target
    changed, and continued as new asking to move; the run that took it over ran on v2 from its first task."""
    stored = Path(__file__).resolve().parent.parent / "replay_histories"
    first = json.loads((stored / "moved_to_a_new_build_while_it_waits_first_run.json").read_text())["events"]
    started_tasks = [e.get("workflowTaskStartedEventAttributes", {}) for e in first]
    assert any(task.get("targetWorkerDeploymentVersionChanged") for task in started_tasks), "told its target moved"
    assert first[-1]["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW"
    moved = json.loads((stored / "moved_to_a_new_build_while_it_waits.json").read_text())["events"]
    started = moved[0]["workflowExecutionStartedEventAttributes"]["inheritedAutoUpgradeInfo"]
    assert started["continueAsNewInitialVersioningBehavior"] == "CONTINUE_AS_NEW_VERSIONING_BEHAVIOR_AUTO_UPGRADE"
    assert started["sourceDeploymentVersion"]["buildId"] == "v1"
    completed = [e for e in moved if e["eventType"] == "EVENT_TYPE_WORKFLOW_TASK_COMPLETED"]
    assert {e["workflowTaskCompletedEventAttributes"]["deploymentVersion"]["buildId"] for e in completed} == {"v2"}
