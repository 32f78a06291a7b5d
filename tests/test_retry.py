"""A ticket that failed because the model could not be reached is retried from where it failed, and nothing it
already paid or mailed happens again: ``agent-worker retry`` (a reset to the last model call), and the
``temporal`` CLI's own reset to the very first workflow task, which runs every step again.

The model here answers 401 at its last step until "the key is fixed", as a revoked API key would; the
store counts refunds and emails.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from activities.business import Business
from activities.contracts.conversation import Decision, ThinkRequest
from activities.contracts.ticket import Outcome, Status
from activities.scripted_model import ScriptedModel
from agent_worker.cli.devserver import binary
from tests.support.harness import Harness
from tests.support.processes import AGENT_WORKER, address, run
from tests.support.tickets import Handle, ticket
from tests.support.waits import poll

ANSWER_STEP = 4
"""The scripted ticket looks up (1), refunds (2), emails (3) and answers (4): the key breaks before 4."""


@dataclass
class KeyRevokedAtTheAnswer:
    """The scripted support model, behind an API key that is refused from the answer's step on until fixed."""

    store: Business
    revoked: bool = True
    name: str = "scripted-behind-a-key"
    refused: list[int] = field(default_factory=list)

    async def decide(self, request: ThinkRequest) -> Decision:
        if self.revoked and request.step >= ANSWER_STEP:
            self.refused.append(request.step)
            raise ApplicationError("invalid x-api-key", type="AuthenticationError", non_retryable=True)
        return await ScriptedModel(self.store.model_calls).decide(request)


async def failed_ticket(agent: Harness, **options: Any) -> Handle:
    handle = await agent.start(ticket(approval_limit_cents=10_000, **options))
    outcome = await handle.result()
    assert outcome.status is Status.FAILED, outcome
    assert "invalid x-api-key" in outcome.answer
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    assert len(agent.store.mail.sent()) == 1
    return handle


async def result_of_the_new_run(client: Client, handle: Handle) -> Outcome:
    """The result of the run the reset started, once it has closed."""

    async def closed_new_run() -> str | None:
        description = await handle.describe()
        closed = description.close_time is not None and description.run_id != handle.first_execution_run_id
        return description.run_id if closed else None

    run_id = await poll(closed_new_run, timeout=60, what="the reset's new run to close")
    fresh: Handle = client.get_workflow_handle(handle.id, run_id=run_id, result_type=Outcome)
    outcome: Outcome = await fresh.result()
    return outcome


async def test_a_failed_ticket_is_retried_from_its_last_model_call_and_pays_and_mails_nothing_twice(
    agent: Harness, client: Client
) -> None:
    model = KeyRevokedAtTheAnswer(agent.store)
    async with agent.worker(model):
        handle = await failed_ticket(agent)
        model.revoked = False  # the key is fixed
        said = await run(AGENT_WORKER, "retry", handle.id, "--by", "ann", "--address", address(client))
        assert "retried from its last model call by ann" in said
        outcome = await result_of_the_new_run(client, handle)

    assert outcome.status is Status.RESOLVED
    assert outcome.steps == ANSWER_STEP
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    assert len(agent.store.mail.sent()) == 1
    assert model.refused == [ANSWER_STEP]
    # Only the failed step asked the model again: the three before it were replayed from history.
    assert sorted(call.step for call in agent.store.model_calls.of(outcome.ticket_id)) == [1, 2, 3, ANSWER_STEP]
    audit = agent.store.audit.entries(outcome.ticket_id)
    assert audit[-1].startswith("closed as resolved"), audit
    assert any(entry.startswith("closed as failed") for entry in audit), audit  # what the failed run wrote stays


async def test_a_reset_to_the_first_workflow_task_runs_every_step_again_and_still_pays_and_mails_once(
    agent: Harness, client: Client
) -> None:
    """The strongest reset: every activity runs again, and the model, asked again, proposes another amount (the
    script changes its mind on a step asked twice). The rules and keys hold: the order, looked up again, reads as
    paid back in full, so the refund is refused with nobody asked; and the email the new run writes at the old
    one's place is refused by the mailbox as a key reused for another message."""
    model = KeyRevokedAtTheAnswer(agent.store)
    async with agent.worker(model):
        handle = await failed_ticket(agent, approval_timeout_seconds=2)
        model.revoked = False
        await run(
            binary("temporal"),
            "--address",
            address(client),
            "workflow",
            "reset",
            "--workflow-id",
            handle.id,
            "--type",
            "FirstWorkflowTask",
            "--reason",
            "start the ticket over",
        )
        outcome = await result_of_the_new_run(client, handle)

    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    assert [e.body for e in agent.store.mail.sent()] == ["We have refunded USD 49.00 for order A-1001 (refund #1)."]
    lookup, *calls = outcome.tool_calls
    assert '"refunded_cents":4900' in lookup.result
    refunds = [c for c in calls if c.name == "issue_refund"]
    assert refunds, "the new run asked the model again, and it asked for a refund"
    assert refunds[0].input["amount_cents"] == 3900
    for refund in refunds:
        assert refund.is_error
        assert refund.result.startswith(
            f"This refund of USD {refund.input['amount_cents'] // 100}.00 was not made, and"
        )
        assert "no person was asked" in refund.result
        assert "USD 49.00 of USD 49.00 was paid back already" in refund.result
    for email in (c for c in calls if c.name == "send_email"):
        assert email.is_error
        assert "was used for another email" in email.result, email
    assert outcome.approvals == []
    assert outcome.refunds == []


async def test_a_running_ticket_or_one_that_never_asked_the_model_is_not_retried(
    agent: Harness, client: Client
) -> None:
    async with agent.worker():
        waiting = await agent.start(ticket())  # waits for approval
        invalid = await agent.start({"ticket_id": "T-bad", "question": ""})  # fails before any model call

        async def closed() -> bool:
            return (await invalid.describe()).close_time is not None

        await poll(closed, timeout=30, what="the invalid ticket to close")
        for handle, why in ((waiting, "still running"), (invalid, "never asked the model")):
            process = await asyncio.create_subprocess_exec(
                AGENT_WORKER,
                "retry",
                handle.id,
                "--address",
                address(client),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            _, err = await asyncio.wait_for(process.communicate(), 60)
            assert process.returncode == 1
            assert why in err.decode(), err
        await waiting.cancel()
