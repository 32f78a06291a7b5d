"""Large refunds need two different people, each allowed for the amount by their role, signed in; nobody approves
their own refund; a decline says why. Real tickets on a worker under a policy that says so, answered as the
approval inbox answers (the signed ``approve`` update) and as the ``temporal`` CLI does (the signal)."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from activities import vouching
from activities.contracts.approvals import ApprovalDecision, ApprovalReceipt, VouchedApproval
from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.policy import ApprovalPolicy, MoneyPolicy, Role
from activities.contracts.ticket import Status
from agent_worker.config.web import WebSettings
from tests.support.desk import LOOSE
from tests.support.harness import Harness
from tests.support.tickets import Handle, answer, ticket
from tests.support.waits import awaiting

KEY = "inbox-key-0123456789abcdef0123456789"
CLEO = {"question": "My parcel for order A-1003 never arrived.", "email": "cleo@example.com"}
"""A-1003 was charged 120.00."""


def desk(**approval: Any) -> MoneyPolicy:
    """The tests' loose desk with these approval rules: a limit of 20.00, two people above 100.00."""
    rules = {"limit_cents": 2000, "two_people_above_cents": 10_000, **approval}
    return LOOSE.model_copy(update={"approval": ApprovalPolicy(**rules)})


def signed(handle: Handle, approver: str, amount: int = 12_000, **changes: Any) -> dict[str, Any]:
    fields = answer(amount, approver=approver, request_id="R1", **changes)
    unsigned = VouchedApproval(**fields, signature="0" * 64)
    return {**fields, "signature": vouching.sign(KEY.encode(), handle.id, unsigned)}


def refused(error: pytest.ExceptionInfo[WorkflowUpdateFailedError]) -> str:
    assert isinstance(error.value.cause, ApplicationError)
    return error.value.cause.message


async def test_a_large_refund_is_paid_only_after_two_different_people_approve_it(agent: Harness) -> None:
    """ann's approval is "1 of 2" and pays nothing; ann again is refused; ben's second approval pays, once."""
    async with agent.worker(policy=desk(), web=WebSettings(approval_keys=[KEY])):
        handle = await agent.start(ticket(CLEO["question"], email=CLEO["email"], approval_limit_cents=2000))
        request = await awaiting(handle, 12_000)
        assert request is not None
        assert (request.approvals_needed, request.signed_in_only) == (2, True)
        first = await handle.execute_update(APPROVE_SIGNAL, signed(handle, "ann"), result_type=ApprovalReceipt)
        assert first.decision is ApprovalDecision.PARTLY_APPROVED
        assert agent.store.payments.refunds() == []
        after_one = await awaiting(handle, 12_000)
        assert after_one is not None
        assert after_one.approved_by == ["ann"]
        with pytest.raises(WorkflowUpdateFailedError) as twice:
            await handle.execute_update(APPROVE_SIGNAL, signed(handle, "ann"))
        assert "ann already approved request R1 (1 of 2): the next must be another person's" in refused(twice)
        second = await handle.execute_update(APPROVE_SIGNAL, signed(handle, "ben"), result_type=ApprovalReceipt)
        outcome = await handle.result()

    assert second.decision is ApprovalDecision.APPROVED
    assert second.result == "Refunded USD 120.00 on order A-1003 (refund #1)."
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [12_000]
    assert [(a.approver, a.decision, a.reason) for a in outcome.approvals] == [
        ("ann", ApprovalDecision.PARTLY_APPROVED, "1 of 2"),
        ("ben", ApprovalDecision.APPROVED, ""),
    ]
    trail = agent.store.audit.entries(outcome.ticket_id)
    first_of_two = (
        "request R1: refund of USD 120.00 approved by ann (signed in, approval inbox): 1 of 2, nothing paid yet"
    )
    assert first_of_two in trail


async def test_a_signal_never_counts_toward_two_people_whatever_approver_it_claims(agent: Harness) -> None:
    """Two signals "from" ann and ben: claims, both rejected; the request times out and nothing is paid."""
    async with agent.worker(policy=desk(timeout_seconds=3)):
        handle = await agent.start(ticket(CLEO["question"], email=CLEO["email"]))
        await awaiting(handle, 12_000)
        await handle.signal(APPROVE_SIGNAL, answer(12_000, approver="ann"))
        await handle.signal(APPROVE_SIGNAL, answer(12_000, approver="ben"))
        outcome = await handle.result()
    assert [a.decision for a in outcome.approvals] == [
        ApprovalDecision.REJECTED,
        ApprovalDecision.REJECTED,
        ApprovalDecision.TIMED_OUT,
    ]
    assert "takes approvals signed in the approval inbox only" in outcome.approvals[0].reason
    assert outcome.status is Status.UNANSWERED  # two claims, rejected, are no decline
    assert agent.store.payments.refunds() == []


async def test_a_decline_by_either_person_ends_the_request_and_its_reason_reaches_the_customer(agent: Harness) -> None:
    async with agent.worker(policy=desk(), web=WebSettings(approval_keys=[KEY])):
        handle = await agent.start(ticket(CLEO["question"], email=CLEO["email"]))
        await awaiting(handle, 12_000)
        await handle.execute_update(APPROVE_SIGNAL, signed(handle, "ann"))
        no = signed(handle, "ben", approved=False, reason="The carrier shows it delivered to the front desk.")
        receipt = await handle.execute_update(APPROVE_SIGNAL, no, result_type=ApprovalReceipt)
        outcome = await handle.result()
    assert receipt.result == (
        "A person (ben) declined this refund, so it was not made. "
        "Their reason: The carrier shows it delivered to the front desk."
    )
    assert outcome.status is Status.DECLINED
    assert agent.store.payments.refunds() == []
    declined = "request R1: refund of USD 120.00 declined by ben (signed in, approval inbox): The carrier shows it"
    assert f"{declined} delivered to the front desk." in agent.store.audit.entries(outcome.ticket_id)


async def test_a_role_too_small_for_the_amount_cannot_approve_it(agent: Harness) -> None:
    roles = [
        Role(name="agents", people=["ann"], max_cents=5000),
        Role(name="leads", people=["cleo-lead"], max_cents=50_000),
    ]
    async with agent.worker(
        policy=desk(roles=roles, two_people_above_cents=None), web=WebSettings(approval_keys=[KEY])
    ):
        handle = await agent.start(ticket(CLEO["question"], email=CLEO["email"]))
        request = await awaiting(handle, 12_000)
        assert request is not None
        assert request.approvers == ["cleo-lead"]
        with pytest.raises(WorkflowUpdateFailedError) as small:
            await handle.execute_update(APPROVE_SIGNAL, signed(handle, "ann"))
        assert "ann may not approve refunds on this ticket (approvers: cleo-lead)" in refused(small)
        await handle.execute_update(APPROVE_SIGNAL, signed(handle, "cleo-lead"))
        await handle.result()
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [12_000]


async def test_a_refund_no_role_reaches_is_refused_at_once_without_waiting(agent: Harness) -> None:
    roles = [Role(name="agents", people=["ann"], max_cents=5000)]
    async with agent.worker(policy=desk(roles=roles), web=WebSettings(approval_keys=[KEY])):
        outcome = await (await agent.start(ticket(CLEO["question"], email=CLEO["email"]))).result()
    assert outcome.approvals == []
    refused = (
        "This refund of USD 120.00 was not made, and no person was asked: no two different people whose role "
        "reaches USD 120.00 may approve it"
    )
    assert any(refused in c.result for c in outcome.tool_calls)
    assert agent.store.payments.refunds() == []


async def test_nobody_approves_a_refund_to_themselves(agent: Harness) -> None:
    """Behind single sign-on approvers are addresses: the customer's own, in any case, is refused."""
    async with agent.worker(policy=desk(two_people_above_cents=None), web=WebSettings(approval_keys=[KEY])):
        handle = await agent.start(ticket(CLEO["question"], email=CLEO["email"]))
        await awaiting(handle, 12_000)
        with pytest.raises(WorkflowUpdateFailedError) as own:
            await handle.execute_update(APPROVE_SIGNAL, signed(handle, "Cleo@Example.com"))
        assert "Cleo@Example.com may not answer a request for a refund to themselves" in refused(own)
        await handle.signal(APPROVE_SIGNAL, answer(12_000, approver="cleo@example.com"))
        await handle.execute_update(APPROVE_SIGNAL, signed(handle, "ann"))
        outcome = await handle.result()
    assert [a.decision for a in outcome.approvals] == [ApprovalDecision.REJECTED, ApprovalDecision.APPROVED]
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [12_000]


async def test_a_signal_still_approves_where_the_policy_needs_one_person_and_names_no_roles(agent: Harness) -> None:
    """The ``temporal`` CLI's way, kept: 49.00 above a 20.00 limit, one approval."""
    async with agent.worker(policy=MoneyPolicy()):
        handle = await agent.start(ticket())
        await awaiting(handle, 4900)
        await handle.signal(APPROVE_SIGNAL, answer(4900))
        outcome = await handle.result()
    assert outcome.approvals[0].decision is ApprovalDecision.APPROVED
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
