"""Answers the approval inbox vouches for: the ``approve`` update, signed by the inbox for the person it
authenticated. The person is told at once whether the answer was taken, and what came of the refund; a reader
of the audit trail can tell a vouched answer from a claimed one. Forgers, double-clickers and late answers
try to break it; the store counts what was paid.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from activities import vouching
from activities.contracts.approvals import ApprovalDecision, ApprovalReceipt, VouchedApproval
from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.ticket import Status
from agent_worker.cli.devserver import binary
from agent_worker.config.web import WebSettings
from tests.support.harness import Harness
from tests.support.history import events
from tests.support.processes import address, run
from tests.support.tickets import Handle, answer, ticket
from tests.support.waits import awaiting


def why(error: WorkflowUpdateFailedError) -> str:
    """What the ticket said when it refused the update."""
    assert isinstance(error.cause, ApplicationError)
    return error.cause.message


KEY = "inbox-key-0123456789abcdef0123456789"
OTHER_KEY = "someone-else-0123456789abcdef01234567"


def vouched(
    handle: Handle, key: str = KEY, *, signed_for: dict[str, Any] | None = None, **changes: Any
) -> dict[str, Any]:
    """An answer as the inbox sends it, signed with ``key`` (for ``signed_for``'s fields, if given: a forgery)."""
    fields = answer(4900, **{"request_id": "R1", **changes})
    signed = VouchedApproval(**{**fields, **(signed_for or {}), "signature": "0" * 64})
    return {**fields, "signature": vouching.sign(key.encode(), handle.id, signed)}


async def test_an_answer_the_inbox_vouched_for_releases_the_refund_and_says_what_came_of_it(agent: Harness) -> None:
    async with agent.worker(web=WebSettings(approval_keys=[KEY])):
        handle = await agent.start(ticket())
        await awaiting(handle, 4900)
        receipt = await handle.execute_update(APPROVE_SIGNAL, vouched(handle), result_type=ApprovalReceipt)
        outcome = await handle.result()

    assert receipt == ApprovalReceipt(
        request_id="R1", decision=ApprovalDecision.APPROVED, result="Refunded USD 49.00 on order A-1001 (refund #1)."
    )
    assert outcome.status is Status.RESOLVED
    (record,) = outcome.approvals
    assert (record.channel, record.approver, record.decision) == ("web", "ann", ApprovalDecision.APPROVED)
    assert "request R1: refund of USD 49.00 approved by ann (signed in, approval inbox)" in agent.store.audit.entries(
        outcome.ticket_id
    )
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]


async def test_a_decline_is_answered_with_what_the_model_was_told(agent: Harness) -> None:
    async with agent.worker(web=WebSettings(approval_keys=[KEY])):
        handle = await agent.start(ticket())
        await awaiting(handle, 4900)
        receipt = await handle.execute_update(
            APPROVE_SIGNAL, vouched(handle, approved=False), result_type=ApprovalReceipt
        )
        outcome = await handle.result()

    assert receipt.result == "A person (ann) declined this refund, so it was not made."
    assert outcome.status is Status.DECLINED
    assert agent.store.payments.refunds() == []


async def test_a_second_click_and_a_wrong_amount_are_refused_at_once_and_leave_no_trace(agent: Harness) -> None:
    async with agent.worker(web=WebSettings(approval_keys=[KEY])):
        handle = await agent.start(ticket())
        await awaiting(handle, 4900)
        with pytest.raises(WorkflowUpdateFailedError) as wrong:
            await handle.execute_update(APPROVE_SIGNAL, vouched(handle, amount_cents=1000))
        await handle.execute_update(APPROVE_SIGNAL, vouched(handle), result_type=ApprovalReceipt)
        with pytest.raises(WorkflowUpdateFailedError) as again:
            await handle.execute_update(APPROVE_SIGNAL, vouched(handle, approver="ben", approved=False))
        outcome = await handle.result()

    assert why(wrong.value) == "rejected: the refund waiting (R1) is USD 49.00, not USD 10.00"
    assert why(again.value).startswith("rejected: request R1 was already answered: approved by ann at ")
    assert len(await events(handle, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)) == 1
    assert len(outcome.approvals) == 1
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]


@pytest.mark.parametrize(
    "forgery",
    [
        {"key": OTHER_KEY},  # signed by someone without the inbox's key
        {"signed_for": {"approver": "mallory"}},  # a signature of mallory's, the name changed to ann's
        {"signed_for": {"approved": False}},  # a decline's signature on an approval
        {"signed_for": {"request_id": "R2"}},  # a signature for another request
    ],
)
async def test_a_forged_or_moved_signature_releases_nothing_and_is_recorded(
    agent: Harness, forgery: dict[str, Any]
) -> None:
    async with agent.worker(web=WebSettings(approval_keys=[KEY])):
        handle = await agent.start(ticket(approval_timeout_seconds=5))
        await awaiting(handle, 4900)
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(APPROVE_SIGNAL, vouched(handle, **forgery))
        outcome = await handle.result()  # nobody else answers: the request times out

    assert "signature does not check" in why(refused.value)
    assert agent.store.payments.refunds() == []
    rejected, timed_out = outcome.approvals
    assert (rejected.decision, rejected.channel) == (ApprovalDecision.REJECTED, "web")
    assert timed_out.decision is ApprovalDecision.TIMED_OUT


async def test_a_signature_for_another_ticket_does_not_carry_over(agent: Harness) -> None:
    async with agent.worker(web=WebSettings(approval_keys=[KEY])):
        first, second = await agent.start(ticket()), await agent.start(ticket())
        await awaiting(first, 4900)
        await awaiting(second, 4900)
        await first.execute_update(APPROVE_SIGNAL, vouched(first), result_type=ApprovalReceipt)
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await second.execute_update(APPROVE_SIGNAL, vouched(first))
        await second.cancel()
        await first.result(), await second.result()

    assert "signature does not check" in why(refused.value)
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]


async def test_a_worker_without_the_inbox_key_takes_no_answer_as_vouched(agent: Harness) -> None:
    async with agent.worker():
        handle = await agent.start(ticket())
        await awaiting(handle, 4900)
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update(APPROVE_SIGNAL, vouched(handle))
        await handle.cancel()
        await handle.result()
    assert "signature does not check" in why(refused.value)
    assert agent.store.payments.refunds() == []


async def test_the_update_from_the_cli_without_a_signature_is_refused_saying_what_is_missing(
    agent: Harness, client: Client
) -> None:
    async with agent.worker(web=WebSettings(approval_keys=[KEY])):
        handle = await agent.start(ticket())
        await awaiting(handle, 4900)
        claim = answer(4900, request_id="R1")
        process = await _cli_update(client, handle, claim)
        assert process[0] != 0
        assert "signature" in process[1], process
        await handle.cancel()
        await handle.result()
    assert agent.store.payments.refunds() == []


async def _cli_update(client: Client, handle: Handle, payload: dict[str, Any]) -> tuple[int, str]:
    try:
        await run(
            binary("temporal"),
            "--address",
            address(client),
            "workflow",
            "update",
            "execute",
            "--workflow-id",
            handle.id,
            "--name",
            APPROVE_SIGNAL,
            "--input",
            json.dumps(payload),
        )
    except AssertionError as failed:  # ``run`` asserts a zero exit, and says what the command wrote
        return 1, str(failed)
    return 0, ""


FIELDS = st.fixed_dictionaries(
    {
        "amount_cents": st.integers(1, 2**31 - 1),
        "approved": st.booleans(),
        "approver": st.text(st.characters(codec="utf-8"), min_size=1, max_size=20).filter(str.strip),
        "request_id": st.from_regex(r"R[1-9][0-9]{0,3}", fullmatch=True),
    }
)


@given(FIELDS, FIELDS, st.text(min_size=1, max_size=30), st.text(min_size=1, max_size=30))
def test_a_signature_checks_only_for_the_answer_and_ticket_it_was_made_for(
    signed: dict[str, Any], presented: dict[str, Any], workflow_id: str, other_workflow: str
) -> None:
    """Pure: any change to any deciding field, or to the ticket, makes the signature fail; none leaves it valid."""
    signature = vouching.sign(KEY.encode(), workflow_id, VouchedApproval(**signed, signature="0" * 64))
    shown = VouchedApproval(**presented, signature=signature)
    same = VouchedApproval(**signed, signature="0" * 64).model_dump(exclude={"signature"}) == shown.model_dump(
        exclude={"signature"}
    )
    assert vouching.vouched([KEY.encode()], workflow_id, shown) is same
    assert not vouching.vouched([OTHER_KEY.encode()], workflow_id, shown)
    if other_workflow != workflow_id:
        assert not vouching.vouched([KEY.encode()], other_workflow, shown)
    assert vouching.vouched([OTHER_KEY.encode(), KEY.encode()], workflow_id, shown) is same  # rotation
