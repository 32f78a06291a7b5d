"""The product as its users drive it: the ``temporal`` CLI, the worker process, and the demo."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from activities.contracts.ticket import Outcome, Status
from agent_worker.cli.devserver import binary
from tests.support.harness import Harness
from tests.support.processes import AGENT_WORKER, address, run, spawn_worker
from tests.support.tickets import answer, ticket
from tests.support.waits import poll


async def test_a_temporal_cli_user_starts_queries_lists_approves_and_reads_a_ticket(
    agent: Harness, client: Client
) -> None:
    temporal = [binary("temporal"), "--address", address(client)]
    workflow_id = f"ticket-{uuid.uuid4()}"
    async with agent.worker():
        await run(
            *temporal,
            "workflow",
            "start",
            "--type",
            "SupportAgent",
            "--task-queue",
            agent.task_queue,
            "--workflow-id",
            workflow_id,
            "--input",
            json.dumps(ticket(approval_limit_cents=2000)),
        )
        query = [*temporal, "workflow", "query", "--workflow-id", workflow_id, "--name", "awaiting_approval_of"]

        async def request_shown() -> list[Any] | None:
            # None comes back as a ``binary/null`` payload the CLI shows as it is, until the request waits.
            answered: list[Any] = json.loads(await run(*query, "-o", "json"))["queryResult"]
            return answered if "request_id" in answered[0] else None

        answered = await poll(request_shown, timeout=20, interval=0.2, what="the query to show the request")
        (request,) = answered
        assert (request["request_id"], request["amount_cents"], request["order_id"]) == ("R1", 4900, "A-1001"), answered

        async def listed_waiting() -> str | None:  # visibility is eventually consistent
            listed = await run(
                *temporal,
                "workflow",
                "list",
                "--query",
                f"AwaitingApprovalCents > 0 AND TaskQueue = '{agent.task_queue}'",
                "-o",
                "json",
            )
            return listed if workflow_id in listed else None

        listed = await poll(listed_waiting, timeout=20, what="the ticket to be listed as waiting")
        assert [w["execution"]["workflowId"] for w in json.loads(listed)] == [workflow_id]

        await run(
            *temporal,
            "workflow",
            "signal",
            "--workflow-id",
            workflow_id,
            "--name",
            "approve",
            "--input",
            json.dumps(answer(4900)),
        )
        result = await run(*temporal, "workflow", "result", "--workflow-id", workflow_id, "-o", "json")

    outcome = Outcome.model_validate(json.loads(result)["result"])
    assert outcome.status is Status.RESOLVED
    assert [(r.amount_cents, r.order_id) for r in outcome.refunds] == [(4900, "A-1001")]
    assert outcome.approvals[0].approver == "ann"
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]


async def test_the_worker_process_logs_json_with_the_run_and_stops_politely_on_sigterm(
    agent: Harness, client: Client
) -> None:
    worker = await spawn_worker(agent.worker_env(), stderr=asyncio.subprocess.PIPE)
    try:
        handle = await agent.start(ticket(approval_limit_cents=10_000))
        outcome = await asyncio.wait_for(handle.result(), 60)
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(worker.communicate(), 60)

    assert outcome.status is Status.RESOLVED
    assert worker.returncode == 0
    lines: list[dict[str, Any]] = [json.loads(line) for line in err.decode().splitlines() if line.startswith("{")]
    refund = next(line for line in lines if line.get("activity") == "issue_refund")
    assert refund["workflow_id"] == handle.id
    assert refund["run_id"] == handle.result_run_id
    assert refund["attempt"] == 1
    assert refund["event"] == "refund paid"
    assert any(line.get("workflow_id") == handle.id and line["event"] == "ticket closed" for line in lines)
    assert lines[-1]["event"] == "worker stopped"
    assert lines[-1]["reason"] == "received SIGTERM"
    assert [line for line in err.decode().splitlines() if "setup plugin" in line] == [], "alembic's start-up chatter"


@pytest.mark.parametrize(("flag", "status", "refunded"), [("--approve", "resolved", 1), ("--decline", "declined", 0)])
async def test_the_demo_runs_a_ticket_through_approval_to_its_answer(
    tmp_path: Path, flag: str, status: str, refunded: int
) -> None:
    out = await run(AGENT_WORKER, "demo", flag, env={"AGENT_DATA_DIR": str(tmp_path)}, timeout=120)

    assert "the model asks for lookup_order(order_id='A-2001')" in out
    assert "Tokens: none counted" in out
    assert "[approval] a refund of USD 49.00 waits for a person" in out
    assert "money policy sha256:" in out  # a local activity since 1.1.0: told from its marker
    assert f"Outcome: {status} after 2 turns, 5 steps and 5 model calls." in out
    assert "replies: Thank you! Will the refund show on my card statement?" in out
    assert "the customer did not reply in time: the ticket closes as answered" in out
    assert "temporal workflow signal --workflow-id ticket-T-1 --name approve" in out
    from activities.business import Business  # noqa: PLC0415

    assert len(Business.sqlite(tmp_path / "business.sqlite3").payments.refunds()) == refunded
    assert (tmp_path / "temporal.sqlite3").exists()


async def test_the_demo_refuses_to_wait_for_an_answer_nobody_can_type(tmp_path: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        AGENT_WORKER,
        "demo",
        stdin=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "AGENT_DATA_DIR": str(tmp_path)},
    )
    _, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode != 0
    assert "pass --approve or --decline" in err.decode()


async def test_a_command_that_cannot_reach_temporal_says_so_and_exits_1_not_with_a_teardown_crash() -> None:
    """A refusal in words (no server at the address) leaves through ``exit_hard`` like any other ending: before,
    the interpreter's teardown crashed about 4 runs in 6 (sdk-python #300) and the exit code was 134."""
    for _ in range(3):
        process = await asyncio.create_subprocess_exec(
            AGENT_WORKER,
            "tickets",
            "--address",
            "127.0.0.1:1",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 1, err
        assert err.decode().startswith("Cannot reach Temporal at 127.0.0.1:1"), err
