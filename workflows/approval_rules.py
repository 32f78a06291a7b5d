"""The approval rules as a pure model: who must approve a payout, which answer decides its request, and what
that releases.

No Temporal in here, so the rules can be read and tested alone. Two parts, each the one place its rule is
written:

**Who must approve** (``decide``). One function of the rules in force, the order as the run knows it (its charge
and what was paid back against it, every kind of payout together), what the ticket paid back already, and a limit
across tickets the ledger said was met. Every rule that can ask for a person is read here, whichever threshold is
the lower: a payout is made without a person only if every rule allows it. It also says when no person can make
it payable: more than is left of the order's charge, or fewer people allowed to approve than it needs. So a
person is asked only for an amount that can still be paid. ``tests/test_payout_decision.py`` tries it over every
policy and history hypothesis finds, thresholds in any order.

**Which answer decides** (``ApprovalDesk``). The gate (``workflows.approval_gate``) opens a request when a payout
needs a person, hands every ``approve`` signal to ``receive`` with the workflow time it is seen at, calls
``expire`` when the durable timer fires, and acts on what ``close`` says was decided.
``tests/test_approval_rules.py`` drives this same class through the interleavings hypothesis finds (answers,
duplicates, malformed payloads, deadlines, hand-overs to a new run) against a model of its own, and checks the
invariant: money moves only on the first valid answer of an allowed approver to the request that waits, seen
before its deadline, and every answer is recorded.

The rules of answers:

- One request waits at a time. It has an id (``R1``, ``R2``, ... across the ticket's runs), an amount, a
  deadline and the people who may answer it (none named: anyone).
- An answer is about the request it names (``request_id``); naming none, about the request waiting when it is
  received, never a later one.
- It is rejected, with the reason recorded, when it is malformed (not exactly one JSON object, or a payload
  that fails validation), about no waiting request, about another amount, from someone not allowed, seen at
  or after the deadline, or when the request was already answered.
- The first answer that passes decides the request, yes or no: a second click, or a second person, changes
  nothing. Silence until the deadline is a no.
- A request may need two different people's approvals (``approvals_needed``): the first is recorded as "1 of 2"
  and releases nothing, the same person approving again counts once (rejected), a decline by either ends it, and
  the deadline covers both. Such a request, and any under roles (``signed_in_only``), takes approvals only from
  the approval inbox, which authenticates the person; a signal's approver is a claim.
- People are compared by one identity rule: the name as a mailbox, ASCII case folded
  (``activities.contracts.fields.same_address``), so ``Ann@Example.COM`` is ``ann@example.com`` when counting two
  people, checking who may approve, and refusing a customer's own refund. Requests opened before that rule
  (``identity="exact"``) compare names exactly, as they were opened.
- Nobody answers a request for a refund to themselves (an approver named as the customer's address).
- Every answer received is recorded, in the order received.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from activities.contracts.approvals import Approval, ApprovalDecision, ApprovalRecord, ApprovalRequest, Identity
from activities.contracts.fields import amount, describe_errors, money, normalised_address, same_address
from activities.contracts.ticket import RefundRecord
from activities.contracts.world import OrderLookup

if TYPE_CHECKING:
    from workflows.rules import Rules

Channel = Literal["signal", "web"]

DECIDING = (ApprovalDecision.APPROVED, ApprovalDecision.DECLINED, ApprovalDecision.TIMED_OUT)


@dataclass(frozen=True)
class Unattended:
    """No person need approve the payout: it is made, held to the limits across tickets where it is booked."""


@dataclass(frozen=True)
class Ask:
    """``people`` different people among ``approvers`` (empty: anyone) must approve the payout before it is made;
    only through the approval inbox where ``signed_in_only``. ``why`` says each rule that asks."""

    people: int
    approvers: tuple[str, ...]
    signed_in_only: bool
    why: str


@dataclass(frozen=True)
class Refused:
    """No answer could make the payout payable, so nobody is asked: ``why``."""

    why: str


Verdict = Unattended | Ask | Refused
"""Who must approve a payout: three kinds, so that a refusal can never be read as "nobody need approve"."""


def decide(
    amount_cents: int, order: OrderLookup, rules: Rules, *, ticket_paid: Sequence[RefundRecord], limit_met: str = ""
) -> Verdict:
    """Who must approve paying ``amount_cents`` back on ``order`` (as the run knows it: its charge, and what was paid
    back against it by anyone, every kind of payout together), under ``rules``, after what this ticket paid back
    (``ticket_paid``, every kind), and with ``limit_met``, a limit across tickets the ledger said the payment would
    pass, if it did.

    Every rule that can ask for a person is read, and the strictest wins, whatever order the policy's thresholds
    are in: the ticket's total paid back with this payment above the approval limit asks for one person, above
    the two-people threshold for two, even where that threshold is the lower. A payout the charge cannot cover,
    or that needs more people than may approve it, is refused without asking anyone."""
    said = _in(order.currency)
    left = order.amount_cents - order.refunded_cents
    if amount_cents > left:
        return Refused(
            f"{said(amount_cents)} is more than is left of order {order.order_id}'s charge: "
            f"{said(order.refunded_cents)} of {said(order.amount_cents)} was paid back already"
        )
    people, asked = _asked(amount_cents, order, rules, ticket_paid, limit_met)
    if people == 0:
        return Unattended()
    why = "; ".join(asked)
    able = rules.approvers
    if rules.roles:
        able = tuple(person for person in able if (rules.reach(person) or 0) >= amount_cents)
    distinct = len({normalised_address(person) for person in able})
    if rules.approvers_withdrawn:
        refusal = "none of the approvers this ticket named may approve under the money policy now in force"
    elif rules.roles and distinct < people:
        refusal = f"no {_people(people)} whose role reaches {said(amount_cents)} may approve it"
    elif able and distinct < people:
        refusal = f"it needs {_people(people)}, and only {', '.join(able)} may approve"
    else:
        return Ask(people=people, approvers=able, signed_in_only=rules.roles or people > 1, why=why)
    return Refused(f"{refusal} (asked for by the rules: {why})")


def _asked(
    amount_cents: int, order: OrderLookup, rules: Rules, ticket_paid: Sequence[RefundRecord], limit_met: str
) -> tuple[int, list[str]]:
    """How many people the rules ask for (0, 1 or 2), and each rule that asks, in words."""
    said = _in(order.currency)
    already = sum(r.amount_cents for r in ticket_paid)
    total = already + amount_cents
    asked: list[str] = []
    if total > rules.limit_cents:
        limit = said(rules.limit_cents)
        if amount_cents > rules.limit_cents:
            asked.append(f"{said(amount_cents)} is above the approval limit of {limit}")
        else:
            asked.append(f"with {said(already)} already paid back, the ticket's total would pass {limit}")
    if any(r.order_id == order.order_id for r in ticket_paid):
        asked.append(f"order {order.order_id} was already paid back on this ticket: a further part needs a person")
    elif order.refunded_cents > 0:
        before = said(order.refunded_cents)
        asked.append(f"{before} of order {order.order_id} was paid back before: a further part needs a person")
    if limit_met:
        asked.append(limit_met)
    two_above = rules.policy.approval.two_people_above_cents
    if two_above is not None and total > two_above:
        two = f"the two-people threshold of {said(two_above)}"
        if amount_cents > two_above:
            asked.append(f"{said(amount_cents)} is above {two}")
        else:
            asked.append(f"with {said(already)} already paid back, the ticket's total would pass {two}")
        return 2, asked
    return (1 if asked else 0), asked


def spelled(units: int, currency: str | None) -> str:
    """An amount as the model and the audit trail read it: in its currency where the run knows one (the order was
    looked up), bare otherwise (requests opened before currencies were known: the trail is searched by their text,
    so it never changes)."""
    return amount(units, currency) if currency else money(units)


def _in(currency: str | None) -> Callable[[int], str]:
    return lambda units: spelled(units, currency)


def _people(count: int) -> str:
    return "one person" if count == 1 else "two different people"


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
        identity: Identity = "exact",
        payout: str = "refund",
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
            identity=identity,
            payout=payout,
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
            amount_cents=approval.amount_cents,
            decision=decision,
            approver=approval.approver,
            at=at,
            request_id=waiting.request_id,
            channel=channel,
            reason=reason,
        )
        if decision is not ApprovalDecision.PARTLY_APPROVED:
            self.decision = record
        self.records.append(record)
        return record

    def expire(self, at: datetime) -> None:
        """The deadline passed: a request nobody answered is declined by silence."""
        if self.waiting is not None and self.decision is None:
            self.decision = ApprovalRecord(
                amount_cents=self.waiting.amount_cents,
                decision=ApprovalDecision.TIMED_OUT,
                approver=None,
                at=at,
                reason=f"no answer by {self.waiting.deadline:%Y-%m-%d %H:%M:%S} UTC",
                request_id=self.waiting.request_id,
            )
            self.records.append(self.decision)

    def take_over(self, records: Sequence[ApprovalRecord], requests_made: int) -> None:
        """The records and the count of requests of the run continued (a wait is taken over by ``resume``)."""
        self.records, self.requests_made = list(records), requests_made

    def abandon(self) -> None:
        """The request waiting will never be paid (its payout was refused, or another payout is asked for in its
        place): it waits no more, and an answer to it decides nothing."""
        self.waiting = self.decision = None

    def forget_rejected(self) -> ApprovalRecord:
        """Drop the last record, a rejected answer, from the records (the gate keeps it as a note instead, once the
        records have reached their budget)."""
        if not self.records or self.records[-1].decision is not ApprovalDecision.REJECTED:
            raise RuntimeError("forget_rejected() drops a rejected answer, the last one recorded")
        return self.records.pop()

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
        self, approval: Approval, at: datetime, channel: Channel = "signal", *, for_people: bool = False
    ) -> str | None:
        """Why this answer cannot count toward the request waiting; None if it can. Changes nothing: the approval
        inbox's update asks it first, so that a person is told at once why an answer would release nothing.
        ``for_people``: the refusal goes to a person and into no history (the update's validator), so its amounts
        are written as people read them (``amount``) even where the request names no currency; a recorded reason
        keeps ``spelled``'s words, which the runs before wrote."""
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
            currency = waiting.currency
            said = (lambda units: amount(units, currency)) if for_people else _in(currency)
            return (
                f"the {waiting.payout} waiting ({waiting.request_id}) is {said(waiting.amount_cents)}, "
                f"not {said(approval.amount_cents)}"
            )
        if waiting.approvers and not waiting.among(approval.approver, waiting.approvers):
            return (
                f"{approval.approver} may not approve {waiting.payout}s on this ticket "
                f"(approvers: {', '.join(waiting.approvers)})"
            )
        if at >= waiting.deadline:
            return f"seen at {at:%Y-%m-%d %H:%M:%S}, after request {waiting.request_id}'s deadline"
        if waiting.customer_email and same_address(approval.approver, waiting.customer_email):
            return f"{approval.approver} may not answer a request for a {waiting.payout} to themselves"
        if approval.approved and waiting.signed_in_only and channel != "web":
            return (
                f"request {waiting.request_id} takes approvals signed in the approval inbox only: a signal's approver "
                "is a claim, and this refund needs roles or two people checked"
            )
        if approval.approved and waiting.among(approval.approver, waiting.approved_by):
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
