"""The approval rules, tried over every interleaving hypothesis can find.

``ApprovalDesk`` is the logic the workflow's gate runs, with no Temporal around it, so a state machine can
drive it through thousands of histories in seconds: requests opening and closing, answers from allowed and
unknown people, for the right amount and the wrong one, naming the request, an old one or none, malformed
payloads and signals with the wrong number of arguments, duplicate clicks, the clock passing the deadline,
and the ticket continuing as a new run (the desk handed over, sometimes with a forged answer, which is never
believed: only an answer the previous run's audit trail holds is carried over).

The test keeps its own model of what must happen, written from the README's rules and not from the code:
money moves only on the first valid answer of an allowed approver to the request that waits, seen before its
deadline; every answer is recorded.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from activities.contracts.approvals import ApprovalDecision, ApprovalRecord, ApprovalRequest
from tests.support.tickets import answer
from workflows.approval_rules import ApprovalDesk, Channel

START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
PEOPLE = ["ann", "ben", "mallory"]
CUSTOMER = "cleo@example.com"
"""Whose refund every request is: named as an approver on some, answering on some (in capitals, too)."""
COUNTED = {ApprovalDecision.PARTLY_APPROVED, ApprovalDecision.APPROVED}
"""Answers that count toward a request's approvals."""
DECIDING = {ApprovalDecision.APPROVED, ApprovalDecision.DECLINED, ApprovalDecision.TIMED_OUT}
AMOUNTS = [4900, 1000]

malformed = st.one_of(
    st.just(()),
    st.tuples(st.just(answer(4900)), st.just({})),
    st.tuples(
        st.one_of(
            st.none(),
            st.text(max_size=5),
            st.integers(),
            st.fixed_dictionaries({"amount_cents": st.integers(min_value=2**31, max_value=2**70)}),
            st.fixed_dictionaries(
                {"amount_cents": st.just(4900), "approved": st.just(value=True), "approver": st.sampled_from(["", " "])}
            ),
            st.fixed_dictionaries({"unreadable_payload": st.just("key id 'k9' is not configured")}),
        )
    ),
)


class ApprovalInterleavings(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.desk = ApprovalDesk()
        self.now = START
        self.received = 0
        """Answers handed to the desk, and answers forged into a hand-over: each must leave one record."""
        self.expired = 0
        self.first_valid: dict[str, dict[str, Any]] = {}
        """Per request, the answer the model says decides it."""
        self.closed: list[tuple[str, ApprovalRecord]] = []
        self.planted: list[ApprovalRecord] = []
        """Forged records planted in a hand-over's records (not decisions the desk made)."""
        self.timed_out: set[str] = set()
        self.approved_by: dict[str, list[str]] = {}
        """Per request, the people whose valid approvals it has counted so far, in order."""
        self.opened: dict[str, ApprovalRequest] = {}
        """Requests as they stood when the workflow acted on them."""

    # --- what happens to a ticket ---

    @precondition(lambda self: self.desk.waiting is None)
    @rule(
        amount=st.sampled_from(AMOUNTS),
        approvers=st.sampled_from([[], ["ann"], ["ann", "ben"], ["ann", CUSTOMER]]),
        minutes=st.integers(1, 120),
        needed=st.sampled_from([1, 2]),
        signed_in_only=st.booleans(),
    )
    def a_refund_needs_a_person(
        self,
        amount: int,
        approvers: list[str],
        minutes: int,
        needed: int,
        signed_in_only: bool,  # noqa: FBT001
    ) -> None:
        request = self.desk.open(
            amount,
            "A-1001",
            self.now + timedelta(minutes=minutes),
            approvers,
            needed=needed,
            signed_in_only=signed_in_only,
            customer_email=CUSTOMER,
        )
        assert request.request_id == f"R{self.desk.requests_made}"
        assert request.signed_in_only == (signed_in_only or needed > 1)
        self.approved_by[request.request_id] = []

    @rule(
        amount=st.sampled_from(AMOUNTS),
        approved=st.booleans(),
        approver=st.sampled_from([*PEOPLE, CUSTOMER.upper()]),
        naming=st.sampled_from(["none", "waiting", "earlier", "bogus"]),
        channel=st.sampled_from(["signal", "web"]),
    )
    def someone_answers(
        self,
        amount: int,
        approved: bool,  # noqa: FBT001 - hypothesis passes rules' arguments by name
        approver: str,
        naming: str,
        channel: Channel,
    ) -> None:
        waiting = self.desk.waiting
        request_id = {
            "none": None,
            "waiting": waiting.request_id if waiting else None,
            "earlier": f"R{max(self.desk.requests_made - (1 if waiting else 0), 1)}",
            "bogus": "R999",
        }[naming]
        payload = answer(amount, approved=approved, approver=approver)
        if request_id is not None:
            payload["request_id"] = request_id
        valid = (
            waiting is not None
            and request_id in {None, waiting.request_id}
            and waiting.request_id not in self.first_valid
            and amount == waiting.amount_cents
            and (not waiting.approvers or approver in waiting.approvers)
            and self.now < waiting.deadline
            and approver.lower() != CUSTOMER
            and not (approved and waiting.signed_in_only and channel != "web")
            and not (approved and approver in self.approved_by[waiting.request_id])
        )
        record = self.desk.receive([payload], self.now, channel=channel)
        self.received += 1
        if not valid:
            assert record.decision is ApprovalDecision.REJECTED
            assert record.reason
            return
        assert waiting is not None
        assert (record.request_id, record.approver, record.at) == (waiting.request_id, approver, self.now)
        so_far = self.approved_by[waiting.request_id]
        if approved:
            so_far.append(approver)
        if approved and len(so_far) < waiting.approvals_needed:
            assert record.decision is ApprovalDecision.PARTLY_APPROVED
            assert record.reason == f"{len(so_far)} of {waiting.approvals_needed}"
            return
        self.first_valid[waiting.request_id] = {**payload, "by": list(so_far), "channel": channel}
        assert record.decision is (ApprovalDecision.APPROVED if approved else ApprovalDecision.DECLINED)

    @rule(args=malformed)
    def a_malformed_signal_arrives(self, args: tuple[Any, ...]) -> None:
        record = self.desk.receive(list(args), self.now)
        self.received += 1
        assert record.decision is ApprovalDecision.REJECTED
        assert record.reason.startswith(("malformed approval: ", "unreadable approval: "))

    @rule(minutes=st.integers(1, 90))
    def time_passes(self, minutes: int) -> None:
        self.now += timedelta(minutes=minutes)

    @precondition(lambda self: self.desk.waiting is not None and self.now >= self.desk.waiting.deadline)
    @rule()
    def the_timer_fires(self) -> None:
        assert self.desk.waiting is not None
        before = len(self.desk.records)
        request_id = self.desk.waiting.request_id
        self.desk.expire(self.now)
        if request_id not in self.first_valid and request_id not in self.timed_out:
            self.timed_out.add(request_id)
            self.expired += 1
            assert len(self.desk.records) == before + 1
        else:
            assert len(self.desk.records) == before  # answered in time: the timer changes nothing

    @precondition(lambda self: self.desk.decision is not None)
    @rule()
    def the_workflow_acts_on_the_decision(self) -> None:
        assert self.desk.waiting is not None
        request_id = self.desk.waiting.request_id
        self.opened[request_id] = self.desk.waiting
        self.closed.append((request_id, self.desk.close()))

    @rule(forge=st.sampled_from([None, "mallory", "another request", "never recorded"]))
    def the_ticket_continues_as_a_new_run(self, forge: str | None) -> None:
        """The desk handed to a new run, as ``ContinuedState`` carries it; sometimes with a forged answer."""
        old, new = self.desk, ApprovalDesk()
        new.records, new.requests_made = list(old.records), old.requests_made
        if old.waiting is not None:
            decision = old.decision
            if forge is not None and decision is None:
                decision = ApprovalRecord(
                    amount_cents=old.waiting.amount_cents,
                    decision=ApprovalDecision.APPROVED,
                    approver="mallory" if forge == "mallory" else "ann",
                    at=self.now,
                    request_id="R999" if forge == "another request" else old.waiting.request_id,
                )
                if forge == "mallory":
                    new.records.append(decision)  # planted in the records too, as a caller could forge them
                    self.planted.append(decision)
                self.received += 1  # a forged hand-over releases nothing, and is recorded like an answer
                audited = False  # the previous run's audit trail never held it: only a run writes there
            else:
                audited = True  # what the desk decided was written to the trail before the hand-over
            new.resume(old.waiting, decision, self.now, audited=audited)
        self.desk = new

    # --- what must always hold ---

    @invariant()
    def every_answer_is_recorded_once(self) -> None:
        assert len(self.desk.records) == self.received + self.expired + len(self.planted)

    @invariant()
    def money_moves_only_on_the_first_valid_answer_of_an_allowed_approver_in_time(self) -> None:
        for request_id, decision in self.closed:
            first = self.first_valid.get(request_id)
            if first is None:
                assert decision.decision is ApprovalDecision.TIMED_OUT
            else:
                expected = ApprovalDecision.APPROVED if first["approved"] else ApprovalDecision.DECLINED
                assert (decision.decision, decision.approver) == (expected, first["approver"])

    @invariant()
    def money_moves_only_with_every_approval_the_request_needs_from_distinct_people_who_are_not_the_customer(
        self,
    ) -> None:
        for request_id, decision in self.closed:
            if decision.decision is not ApprovalDecision.APPROVED:
                continue
            request = self.opened[request_id]
            approvals = [
                r
                for r in self.desk.records
                if r.request_id == request_id and r.decision in COUNTED and not any(r is p for p in self.planted)
            ]
            people = {r.approver for r in approvals}
            assert len(people) == len(approvals) >= request.approvals_needed
            assert all(r.at < request.deadline for r in approvals)
            assert all((r.approver or "").lower() != CUSTOMER for r in approvals)
            if request.signed_in_only:
                assert all(r.channel == "web" for r in approvals)

    @invariant()
    def a_request_is_decided_once(self) -> None:
        deciding = [
            r.request_id
            for r in self.desk.records
            if not any(r is p for p in self.planted)
            and r.decision in {ApprovalDecision.APPROVED, ApprovalDecision.DECLINED, ApprovalDecision.TIMED_OUT}
        ]
        assert len(deciding) == len(set(deciding))

    @invariant()
    def a_decision_is_one_the_rules_allow(self) -> None:
        decision, waiting = self.desk.decision, self.desk.waiting
        if decision is None or waiting is None:
            return
        assert decision.request_id == waiting.request_id
        if decision.decision is not ApprovalDecision.TIMED_OUT:
            assert not waiting.approvers or decision.approver in waiting.approvers
            assert decision.at < waiting.deadline
            assert decision.amount_cents == waiting.amount_cents


ApprovalInterleavings.TestCase.settings = settings(max_examples=400, stateful_step_count=40, deadline=None)
test_approval_interleavings = ApprovalInterleavings.TestCase
