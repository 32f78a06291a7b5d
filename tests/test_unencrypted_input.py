"""Input that skipped the codec: a ticket or an approval sent in plain text to a worker that encrypts.

A ``temporal workflow start`` without ``--codec-endpoint`` puts the customer's address and words in history
as they are. The worker says so in its log; with ``AGENT_REQUIRE_ENCRYPTED_INPUT`` it refuses them the way it
refuses any bad input: the ticket fails at once, the approval is recorded as rejected, and no workflow task
fails. The README's ``temporal`` commands, given the codec flags, get through.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import pytest
import structlog
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from activities.contracts.approvals import ApprovalDecision
from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.ticket import Outcome, Status
from agent_worker.cli.devserver import binary, free_port
from agent_worker.codec import NOT_ENCRYPTED, EncryptionCodec, with_codec
from agent_worker.codec_server.app import serve
from agent_worker.config import DATA_CONVERTER
from tests.support.harness import Harness
from tests.support.history import events
from tests.support.processes import address, run
from tests.support.tickets import answer, ticket
from tests.support.waits import awaiting

KEYS = {"2026-11": os.urandom(32)}
QUESTION = "My parcel for order A-1001 never arrived, my name is Ann Lovelace"


async def sealed(agent: Harness, client: Client, *, require: bool) -> Harness:
    """The test's harness with a client, and so a worker, that encrypts; ``require`` refuses plain input."""
    codec = EncryptionCodec(KEYS, "2026-11", require_encrypted=require)
    sealed_client = await Client.connect(address(client), data_converter=with_codec(DATA_CONVERTER, codec))
    return Harness(sealed_client, agent.store, agent.task_queue)


def unencrypted_warnings(logs: Sequence[Mapping[str, Any]]) -> list[tuple[Any, Any, Any]]:
    return [
        (log["event"], log["workflow_id"], log["encoding"])
        for log in logs
        if str(log["event"]).startswith("a payload arrived unencrypted")
    ]


async def test_a_ticket_started_without_the_codec_runs_but_the_worker_warns_that_it_came_unencrypted(
    agent: Harness, client: Client
) -> None:
    encrypted = await sealed(agent, client, require=False)
    with structlog.testing.capture_logs() as logs:
        async with encrypted.worker():
            handle = await agent.start(ticket(QUESTION, approval_limit_cents=10_000))  # the plain client
            outcome = await encrypted.client.get_workflow_handle(handle.id, result_type=Outcome).result()

    assert outcome.status is Status.RESOLVED
    assert ("a payload arrived unencrypted", handle.id, "json/plain") in unencrypted_warnings(logs)
    assert all("Lovelace" not in json.dumps(log, default=str) for log in logs)  # never the payload itself


async def test_with_encrypted_input_required_a_plain_ticket_fails_at_once_saying_why(
    agent: Harness, client: Client
) -> None:
    encrypted = await sealed(agent, client, require=True)
    with structlog.testing.capture_logs() as logs:
        async with encrypted.worker():
            handle = await agent.start(ticket(QUESTION))
            with pytest.raises(WorkflowFailureError) as failed:
                async with asyncio.timeout(60):  # a bound on a wedged run, which never ends
                    await encrypted.client.get_workflow_handle(handle.id).result()

    assert isinstance(failed.value.cause, ApplicationError)
    assert (failed.value.cause.type, failed.value.cause.non_retryable) == ("InvalidTicketInput", True)
    assert failed.value.cause.message == f"Invalid ticket input: input: unreadable_payload: {NOT_ENCRYPTED}"
    assert await events(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED) == []
    assert ("a payload arrived unencrypted: refused", handle.id, "json/plain") in unencrypted_warnings(logs)
    assert encrypted.store.payments.refunds() == []


async def test_with_encrypted_input_required_a_plain_approval_is_rejected_and_an_encrypted_one_is_taken(
    agent: Harness, client: Client
) -> None:
    encrypted = await sealed(agent, client, require=True)
    async with encrypted.worker():
        handle = await encrypted.start(ticket())
        await awaiting(handle, 4900)
        await client.get_workflow_handle(handle.id).signal(APPROVE_SIGNAL, answer(4900, approver="mallory"))
        await handle.signal(APPROVE_SIGNAL, answer(4900))
        async with asyncio.timeout(60):
            outcome = await handle.result()

    assert [(a.decision, a.approver, a.reason) for a in outcome.approvals] == [
        (ApprovalDecision.REJECTED, None, f"unreadable approval: {NOT_ENCRYPTED}"),
        (ApprovalDecision.APPROVED, "ann", ""),
    ]
    assert [r.amount_cents for r in encrypted.store.payments.refunds()] == [4900]
    assert await events(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED) == []


@pytest.fixture
async def local_codec_server() -> AsyncIterator[str]:
    """``agent-worker codec-server`` with only the keys set: local mode, the CLI needs no ``--codec-auth``."""
    port = free_port()
    runner = await serve(EncryptionCodec(KEYS, "2026-11"), None, "http://localhost:8233", "127.0.0.1", port)
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_the_readmes_temporal_commands_with_the_codec_flags_reach_a_worker_that_requires_encryption(
    agent: Harness, client: Client, local_codec_server: str
) -> None:
    """Start, query, signal, result and show, each as the README's "encryption on" variant gives it."""
    encrypted = await sealed(agent, client, require=True)
    codec_flags = ["--codec-endpoint", local_codec_server]
    temporal = [binary("temporal"), "--address", address(client)]
    workflow_id = f"ticket-{uuid.uuid4()}"
    async with encrypted.worker():
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
            json.dumps(ticket(QUESTION)),
            *codec_flags,
        )
        await awaiting(encrypted.client.get_workflow_handle(workflow_id, result_type=Outcome), 4900)
        waiting = await run(
            *temporal,
            "workflow",
            "query",
            "--workflow-id",
            workflow_id,
            "--name",
            "awaiting_approval_of",
            "-o",
            "json",
            *codec_flags,
        )
        request_id = json.loads(waiting)["queryResult"][0]["request_id"]
        await run(
            *temporal,
            "workflow",
            "signal",
            "--workflow-id",
            workflow_id,
            "--name",
            "approve",
            "--input",
            json.dumps(answer(4900, request_id=request_id)),
            *codec_flags,
        )
        result = await run(*temporal, "workflow", "result", "--workflow-id", workflow_id, "-o", "json", *codec_flags)
    shown = await run(*temporal, "workflow", "show", "--workflow-id", workflow_id, *codec_flags)

    outcome = Outcome.model_validate(json.loads(result)["result"])
    assert outcome.status is Status.RESOLVED
    assert [(a.decision, a.approver) for a in outcome.approvals] == [(ApprovalDecision.APPROVED, "ann")]
    assert "ann@example.com" in shown  # the outcome at its end, decrypted by the codec server
    stored = (await client.get_workflow_handle(workflow_id).fetch_history()).to_json()
    assert "Lovelace" not in stored
    assert "ann@example.com" not in stored
