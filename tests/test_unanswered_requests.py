"""A refund nobody answered is not a refund somebody declined. A desk counts its approvers' declines; a request whose
deadline passed in silence must read as what it was, in the outcome, on the inbox's pages, in the refusal of an
answer that comes too late, and in the audit trail's closing line, through a real server and worker, with a
deadline of two seconds. A person who does decline still closes the ticket as declined, and a run recorded before
the change still reads truthfully."""

from __future__ import annotations

import json
import re
from base64 import b64decode
from pathlib import Path

from activities.contracts.approvals import ApprovalDecision
from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.ticket import Outcome, Status
from agent_worker.transcript import unanswered_plainly
from tests.support.harness import Harness
from tests.support.inbox import inbox_for, notice_kind, notice_of, page_of, person, start_with_cli, waiting_request
from tests.support.tickets import answer, ticket
from tests.support.waits import awaiting

EARLIER = Path(__file__).resolve().parents[1] / "tests" / "handed_over" / "gate-1.x"
"""Histories the 1.x releases recorded: a 1.x ticket's outcome is still read by the inbox and ``show``."""
NOBODY = re.compile(
    r"^request R1: nobody answered by \d{4}-\d\d-\d\d \d\d:\d\d UTC; the refund of USD 49\.00 was not made$"
)


def outcome_section(page: str) -> str:
    found = re.search(r'<section class="outcome" data-testid="outcome">(.*?)</section>', page, re.DOTALL)
    assert found, page
    return found.group(1)


async def test_a_request_nobody_answered_closes_unanswered_in_the_outcome_the_pages_a_late_answer_and_the_audit(
    agent: Harness,
) -> None:
    async with inbox_for(agent) as inbox, person(inbox) as ann:
        workflow_id = await start_with_cli(agent, approval_timeout_seconds=2)
        request = await waiting_request(agent.client, workflow_id)
        outcome = await agent.client.get_workflow_handle(workflow_id, result_type=Outcome).result()
        await ann.sign_in("ann")
        _, page = await ann.get(page_of(workflow_id))
        late = await ann.answer(workflow_id, request)

    audit = agent.store.audit.entries(outcome.ticket_id)
    assert outcome.status is Status.UNANSWERED
    assert outcome.unanswered is not None
    assert NOBODY.match(outcome.unanswered), outcome.unanswered
    assert [a.decision for a in outcome.approvals] == [ApprovalDecision.TIMED_OUT]
    assert audit[-1] == f"closed as unanswered after {outcome.steps} steps: {outcome.unanswered}"
    assert not [entry for entry in audit if "declined" in entry], audit
    shown = outcome_section(page)
    assert "Outcome: unanswered" in shown
    assert outcome.unanswered in shown
    assert "declined" not in shown
    assert (late[0], notice_kind(late[1])) == (303, "rejected")
    said = notice_of(late[1])
    assert re.match(r"^not taken: this ticket has closed at [^:]+:\d\d UTC: request R1: nobody answered by ", said)
    assert said.endswith("; the refund of USD 49.00 was not made")
    assert "declined" not in said
    assert agent.store.payments.refunds() == []


async def test_a_person_who_declines_before_the_deadline_still_closes_the_ticket_as_declined(agent: Harness) -> None:
    """The adversary's mirror: a decline must not pass for silence, nor a timeout after one for no answer."""
    async with agent.worker():
        handle = await agent.start(ticket(approval_timeout_seconds=5))
        request = await awaiting(handle, 4900)
        assert request is not None
        await handle.signal(APPROVE_SIGNAL, answer(4900, approved=False, request_id=request.request_id))
        outcome = await handle.result()

    audit = agent.store.audit.entries(outcome.ticket_id)
    assert outcome.status is Status.DECLINED
    assert outcome.unanswered is None
    assert audit[-1].startswith(f"closed as declined after {outcome.steps} steps; refunded ")
    assert unanswered_plainly(outcome) is None


def test_a_ticket_closed_as_declined_by_silence_before_the_change_reads_as_unanswered() -> None:
    """A run of a release before 1.2.0 (``declined_by_timeout``) closed as ``declined`` with no decline among its
    answers: the inbox tells it from those, the words it would have had."""
    history = json.loads((EARLIER / "declined_by_timeout.json").read_text())
    completed = history["events"][-1]["workflowExecutionCompletedEventAttributes"]
    outcome = Outcome.model_validate_json(b64decode(completed["result"]["payloads"][0]["data"]))

    assert outcome.status is Status.DECLINED
    assert outcome.unanswered is None  # a field that run never wrote: its default
    told = unanswered_plainly(outcome, "USD")
    assert told is not None
    assert NOBODY.match(told), told
