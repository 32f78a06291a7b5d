"""The approval rules as a pure model: which answer decides a refund's approval request, and what it releases.

No Temporal in here, so the rules can be read and tested alone. The gate (``workflows.approval_gate``) opens a
request when a refund needs a person, hands every ``approve`` signal to ``receive`` with the workflow time it
is seen at, calls ``expire`` when the durable timer fires, and acts on what ``close`` says was decided.
``tests/test_approval_rules.py`` drives this same class through the interleavings hypothesis finds (answers,
duplicates, malformed payloads, deadlines, hand-overs to a new run) against a model of its own, and checks the
invariant: money moves only on the first valid answer of an allowed approver to the request that waits, seen
before its deadline, and every answer is recorded.

The rules:

- One request waits at a time. It has an id (``R1``, ``R2``, ... across the ticket's runs), an amount, a
  deadline and the people who may answer it (none named: anyone).
- An answer is about the request it names (``request_id``); naming none, about the request waiting when it is
  received, never a later one.
- It is rejected, with the reason recorded, when it is malformed (not exactly one JSON object, or a payload
  that fails validation), about no waiting request, about another amount, from someone not allowed, seen at
  or after the deadline, or when the request was already answered.
- The first answer that passes decides the request, yes or no: a second click, or a second person, changes
  nothing. Silence until the deadline is a no.
- A request may need two different people's approvals (``approvals_needed``, above the policy's threshold): the
  first is recorded as "1 of 2" and releases nothing, the same person approving again counts once (rejected), a
  decline by either ends it, and the deadline covers both. Such a request, and any under roles
  (``signed_in_only``), takes approvals only from the approval inbox, which authenticates the person; a
  signal's approver is a claim.
- Nobody answers a request for a refund to themselves (an approver named as the customer's address).
- Every answer received is recorded, in the order received.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import ValidationError

from activities.contracts.approvals import Approval, ApprovalDecision, ApprovalRecord, ApprovalRequest
from activities.contracts.fields import describe_errors, money, same_address

Channel = Literal["signal", "web"]

DECIDING = (ApprovalDecision.APPROVED, ApprovalDecision.DECLINED, ApprovalDecision.TIMED_OUT)


class ApprovalDesk:
    """The requests of one ticket, the answers to them, and the record of every answer."""

    def __init__(self) -> None:
        self.waiting: ApprovalRequest | None = None
        self.decision: ApprovalRecord | None = None
        """What decided the request waiting: the first valid answer, or its timing out."""
        self.records: list[ApprovalRecord] = []
        self.requests_made = 0

    def open(  # noqa: PLR0913 - the request's fields, by name
        self,
        amount_cents: int,
        order_id: str,
        deadline: datetime,
        approvers: Sequence[str],
        *,
        needed: int = 1,
        signed_in_only: bool = False,
        customer_email: str = "",
        why: str = "",
        opened_at: datetime | None = None,
        currency: str | None = None,
    ) -> ApprovalRequest:
        """A refund of ``amount_cents`` waits until ``deadline`` for ``needed`` different people among
        ``approvers`` (anyone, if none), only signed-in ones if ``signed_in_only``, never the customer."""
        if self.waiting is not None:
            raise RuntimeError(f"request {self.waiting.request_id} still waits: one request at a time")
        self.requests_made += 1
        self.waiting = ApprovalRequest(
            request_id=f"R{self.requests_made}",
            amount_cents=amount_cents,
            order_id=order_id,
            deadline=deadline,
            approvers=list(approvers),
            approvals_needed=needed,
            signed_in_only=signed_in_only or needed > 1,
            customer_email=customer_email,
            why=why,
            opened_at=opened_at,
            currency=currency,
        )
        self.decision = None
        return self.waiting

    def receive(self, args: Sequence[Any], at: datetime, channel: Channel = "signal") -> ApprovalRecord:
        """An ``approve`` signal's arguments, seen at workflow time ``at``: record it, and let it decide the
        request waiting if it is the first valid answer to it. ``channel`` says how it came: a ``web`` answer is
        one the approval inbox vouched for, checked before it gets here; the rules are the same."""
        if len(args) != 1:
            return self._reject(None, f"malformed approval: expected one JSON object, got {len(args)} arguments", at)
        if isinstance(args[0], dict) and set(args[0]) == {"unreadable_payload"}:  # what the codec makes of it
            return self._reject(None, f"unreadable approval: {args[0]['unreadable_payload']}", at)
        try:
            approval = Approval.model_validate(args[0])
        except ValidationError as error:
            return self._reject(None, f"malformed approval: {describe_errors(error)}", at)
        if reason := self.why_not(approval, at, channel):
            return self._reject(approval, reason, at, channel)
        waiting = self.waiting
        assert waiting is not None
        approved_by = [*waiting.approved_by, approval.approver] if approval.approved else waiting.approved_by
        if approval.approved and len(approved_by) < waiting.approvals_needed:
            self.waiting = waiting.model_copy(update={"approved_by": approved_by})
            decision, reason = ApprovalDecision.PARTLY_APPROVED, f"{len(approved_by)} of {waiting.approvals_needed}"
        else:
            decision = ApprovalDecision.APPROVED if approval.approved else ApprovalDecision.DECLINED
            reason = "" if approval.approved else approval.reason or ""
        record = ApprovalRecord(
            amount_cents=approval.amount_cents, decision=decision, approver=approval.approver, at=at,
            request_id=waiting.request_id, channel=channel, reason=reason,
        )  # fmt: skip
        if decision is not ApprovalDecision.PARTLY_APPROVED:
            self.decision = record
        self.records.append(record)
        return record

    def expire(self, at: datetime) -> None:
        """The deadline passed: a request nobody answered is declined by silence."""
        if self.waiting is not None and self.decision is None:
            self.decision = ApprovalRecord(
                amount_cents=self.waiting.amount_cents, decision=ApprovalDecision.TIMED_OUT, approver=None, at=at,
                reason=f"no answer by {self.waiting.deadline:%Y-%m-%d %H:%M:%S} UTC",
                request_id=self.waiting.request_id,
            )  # fmt: skip
            self.records.append(self.decision)

    def close(self) -> ApprovalRecord:
        """End the wait: what decided it (``expire`` first, if nothing did)."""
        if self.waiting is None or self.decision is None:
            raise RuntimeError("close() needs a request that was answered or has expired")
        decision, self.waiting, self.decision = self.decision, None, None
        return decision

    def resume(self, request: ApprovalRequest, decision: ApprovalRecord | None, at: datetime, *, audited: bool) -> None:
        """Take over a request that waited when the previous run continued as new, with the answer that
        decided it, if any. What a run hands over is input like any other: the answer is kept only if the
        previous run's audit trail holds it (``audited``: a caller can forge arguments, not the trail) and it
        still passes every rule, and is otherwise recorded as rejected."""
        self.waiting, self.decision = request, None
        if decision is None:
            return
        reason = None
        if decision.decision not in DECIDING or decision.request_id != request.request_id:
            reason = f"the previous run handed over an answer to another request ({decision.request_id})"
        elif decision not in self.records:
            reason = "the previous run handed over an answer it never recorded"
        elif not audited:
            reason = "the previous run handed over an answer its audit trail does not hold"
        elif decision.decision is not ApprovalDecision.TIMED_OUT:
            answer = Approval(
                amount_cents=decision.amount_cents or 0,
                approved=decision.decision is ApprovalDecision.APPROVED,
                approver=decision.approver or "?",
            )
            reason = self.why_not(answer, decision.at, decision.channel)
        if reason is None:
            self.decision = decision
        else:
            self._reject(None, reason, at)

    def answered(self, request_id: str) -> ApprovalRecord | None:
        """What decided an earlier request of this ticket."""
        return next((r for r in self.records if r.request_id == request_id and r.decision in DECIDING), None)

    def why_not(  # noqa: C901, PLR0911 - one return per rule
        self, approval: Approval, at: datetime, channel: Channel = "signal"
    ) -> str | None:
        """Why this answer cannot count toward the request waiting; None if it can. Changes nothing: the approval
        inbox's update asks it first, so that a person is told at once why an answer would release nothing."""
        waiting = self.waiting
        if approval.request_id is not None and (waiting is None or approval.request_id != waiting.request_id):
            if earlier := self.answered(approval.request_id):
                return f"request {approval.request_id} was already {_decided(earlier)}"
            now = f"; the request waiting is {waiting.request_id}" if waiting else ""
            return f"request {approval.request_id} is not waiting for an answer{now}"
        if waiting is None:
            return "no refund is waiting for approval"
        if self.decision is not None:
            return f"request {waiting.request_id} was already {_decided(self.decision)}"
        if approval.amount_cents != waiting.amount_cents:
            return (
                f"the refund waiting ({waiting.request_id}) is {money(waiting.amount_cents)}, "
                f"not {money(approval.amount_cents)}"
            )
        if waiting.approvers and approval.approver not in waiting.approvers:
            return (
                f"{approval.approver} may not approve refunds on this ticket "
                f"(approvers: {', '.join(waiting.approvers)})"
            )
        if at >= waiting.deadline:
            return f"seen at {at:%Y-%m-%d %H:%M:%S}, after request {waiting.request_id}'s deadline"
        if waiting.customer_email and same_address(approval.approver, waiting.customer_email):
            return f"{approval.approver} may not answer a request for a refund to themselves"
        if approval.approved and waiting.signed_in_only and channel != "web":
            return (
                f"request {waiting.request_id} takes approvals signed in the approval inbox only: a signal's approver "
                "is a claim, and this refund needs roles or two people checked"
            )
        if approval.approved and approval.approver in waiting.approved_by:
            return (
                f"{approval.approver} already approved request {waiting.request_id} "
                f"({len(waiting.approved_by)} of {waiting.approvals_needed}): the next must be another person's"
            )
        return None

    def reject(self, approval: Approval, reason: str, at: datetime, channel: Channel) -> ApprovalRecord:
        """Record an answer rejected for a reason these rules do not see (an answer the approval inbox sent, whose
        signature does not check)."""
        return self._reject(approval, reason, at, channel)

    def _reject(
        self, approval: Approval | None, reason: str, at: datetime, channel: Channel = "signal"
    ) -> ApprovalRecord:
        record = ApprovalRecord(
            channel=channel,
            amount_cents=approval.amount_cents if approval else None,
            decision=ApprovalDecision.REJECTED,
            approver=approval.approver if approval else None,
            at=at,
            reason=reason,
            request_id=(approval and approval.request_id) or (self.waiting and self.waiting.request_id),
        )
        self.records.append(record)
        return record


def _decided(record: ApprovalRecord) -> str:
    if record.decision is ApprovalDecision.TIMED_OUT:
        return f"closed: nobody answered by {record.at:%Y-%m-%d %H:%M:%S}"
    return f"answered: {record.decision.value} by {record.approver} at {record.at:%Y-%m-%d %H:%M:%S}"
