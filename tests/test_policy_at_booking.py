"""A payout that needs no person is judged by the policy as the ticket last read it, and booked only where that
policy is in force (``workflows.payouts``): the ticket does not read the policy again at every payout, and a
policy changed since is still the one that judges it.

The adversary is the operator's own deploy: a policy file tightened while tickets are open, and workers that
disagree about it while the new file rolls out. Real tickets on a real dev server; the booking is the real
activity over the real ledger, on a worker under the policy the test names.
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

from temporalio.api.enums.v1 import EventType

from activities.contracts.names import CUSTOMER_MESSAGE
from activities.contracts.ticket import Status
from activities.tools import ISSUE_REFUND
from tests.support.bookings import BookingsUnder
from tests.support.desk import LOOSE
from tests.support.harness import Harness
from tests.support.history import events
from tests.support.tickets import Handle, answer, ticket
from tests.support.waits import awaiting, waiting_for_customer

HISTORIES = Path(__file__).parent.parent / "replay_histories"
DAYS_3 = 3 * 86_400
TIGHTENED = LOOSE.model_copy(update={"approval": LOOSE.approval.model_copy(update={"limit_cents": 2000})})
"""The loose desk with its approval limit lowered to 20.00: the scripted refund of 49.00 now needs a person."""


async def local_activities(handle: Handle) -> int:
    """The local activities a run recorded, each a marker: the policy's reads, and the closing line."""
    markers = await events(handle, EventType.EVENT_TYPE_MARKER_RECORDED)
    return sum(1 for e in markers if e.marker_recorded_event_attributes.marker_name == "core_local_activity")


async def test_a_ticket_reads_the_policy_once_and_its_booking_confirms_it(agent: Harness) -> None:
    """The usual ticket: one read as it starts, one refund booked under it, and one entry for the policy."""
    async with agent.worker(policy=LOOSE):
        handle = await agent.start(ticket(approval_limit_cents=10_000))
        outcome = await asyncio.wait_for(handle.result(), 60)

    assert outcome.status is Status.RESOLVED
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    assert await local_activities(handle) == 2  # the policy as the ticket starts, and the closing line: no more
    trail = agent.store.audit.entries(outcome.ticket_id)
    assert [e for e in trail if e.startswith("money policy")] == [f"money policy {LOOSE.digest()} in force"]


async def test_a_policy_tightened_while_a_ticket_is_open_judges_its_next_refund(agent: Harness) -> None:
    """The ticket read the loose policy as it started; the operator lowers the limit and the workers restart; the
    customer's reply leads to a refund the old policy would pay unattended. The booking refuses it as judged by
    another policy, nothing is paid, the ticket reads the new one and asks a person, whose approval pays it once."""
    raw = ticket("My parcel never arrived", reply_window_seconds=DAYS_3, approval_limit_cents=10_000)
    async with agent.worker(policy=LOOSE):
        handle = await agent.start(raw)
        await waiting_for_customer(handle, turns=1)
    async with agent.worker(policy=TIGHTENED):
        await handle.execute_update(CUSTOMER_MESSAGE, {"text": "It is A-1001"})
        request = await awaiting(handle, 4900)
        assert request is not None
        assert "above the approval limit of USD 20.00" in request.why
        assert agent.store.payments.refunds() == []
        await handle.signal("approve", answer(4900, request_id=request.request_id))
        await waiting_for_customer(handle, turns=2)
        await handle.cancel()
        outcome = await asyncio.wait_for(handle.result(), 60)

    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    assert outcome.policy == TIGHTENED.digest()
    trail = agent.store.audit.entries(outcome.ticket_id)
    assert [e for e in trail if e.startswith("money policy")] == [
        f"money policy {LOOSE.digest()} in force",
        f"money policy {TIGHTENED.digest()} in force (was {LOOSE.digest()})",
    ]


async def test_workers_that_keep_disagreeing_about_the_policy_pay_nothing_without_a_person(agent: Harness) -> None:
    """Every booking finds another policy in force than the ticket's reads: after three reads the payout is given
    up, nothing is paid, and the model is told why. A booking that cannot say which policy is in force is the same."""
    for bookings in (TIGHTENED.digest(), "sha256:0000000000000000"):
        async with agent.worker(policy=LOOSE, plugins=[BookingsUnder(agent.store, bookings)]):
            handle = await agent.start(ticket(approval_limit_cents=10_000))
            outcome = await asyncio.wait_for(handle.result(), 60)

        assert agent.store.payments.refunds() == []
        refusals = [c for c in outcome.tool_calls if c.name == ISSUE_REFUND.name]
        assert refusals
        assert all("the desk's money policy changed while it was being made" in c.result for c in refusals)
        assert all("Nothing was paid" in c.result for c in refusals)
        assert await local_activities(handle) >= 1 + 3 + 1  # as it started, three for the first refund, the close


def test_the_recorded_ticket_reads_the_policy_once_and_a_refused_booking_once_more() -> None:
    """The shapes the replay gate holds the code to: the usual refunded ticket has two local activities (the read as
    it starts, the closing line), and a booking refused as judged by another policy is followed by one read and the
    same payout booked again, under the same key."""
    shapes = {
        "resolved_without_approval": ["local", "lookup_order", "issue_refund", "send_email", "local"],
        "judged_again_under_the_policy_in_force": [
            *("local", "lookup_order", "issue_refund", "failed", "local", "issue_refund", "send_email", "local"),
        ],
    }
    for name, shape in shapes.items():
        history = json.loads((HISTORIES / f"{name}.json").read_text())["events"]
        seen, keys = [], []
        for event in history:
            kind = event["eventType"]
            if kind == "EVENT_TYPE_MARKER_RECORDED":
                marker = event["markerRecordedEventAttributes"]["markerName"]
                seen.append({"core_patch": "patch", "core_local_activity": "local"}[marker])
            elif kind == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED":
                attributes = event["activityTaskScheduledEventAttributes"]
                if attributes["activityType"]["name"] != "think":
                    seen.append(attributes["activityType"]["name"])
                if attributes["activityType"]["name"] == ISSUE_REFUND.name:
                    request = json.loads(base64.b64decode(attributes["input"]["payloads"][0]["data"]))
                    keys.append(request["idempotency_key"])
            elif kind == "EVENT_TYPE_ACTIVITY_TASK_FAILED":
                seen.append("failed")
        assert seen == shape, name
        assert len(set(keys)) == 1, f"{name}: the payout judged again is the same payout, under its key"
    assert len(json.loads((HISTORIES / "resolved_without_approval.json").read_text())["events"]) == 49
