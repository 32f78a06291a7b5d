"""A person's answer to a refund waiting for approval, as a signal or as the inbox's signed update, the request
it answers, and the record of every answer. Read by the workflow's approval rules, the operator commands and
the inbox."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import (
    StringConstraints,
)

from activities.contracts.fields import (
    Cents,
    Contract,
    Currency,
    Note,
    PersonName,
    Reason,
    RequestId,
    amount,
    same_address,
)

Identity = Literal["exact", "mailbox"]
"""How a request compares the people who answer it with its approvers, with each other and with the customer:
``mailbox``, the one identity rule (``fields.same_address``: ASCII case folded, nothing else), which every request
the workflow opens has; ``exact``, names as typed, which a request handed over by a release before 1.1.0 holds."""


class Approval(Contract):
    """The ``approve`` signal: a person's answer about the request they were shown. Every field is the sender's
    to fill, so each is bounded: past a bound, the answer is recorded as a malformed one, naming the field."""

    amount_cents: Cents
    approved: bool
    approver: PersonName
    """Who answered, as the sender claims it: a signal carries no identity the worker could check."""
    request_id: RequestId | None = None
    """The request answered, as ``awaiting_approval_of`` shows it. Without it, the answer is about the request
    waiting when it arrives, and never about a later one."""
    reason: Reason | None = None
    """Why, for a decline: it goes to the audit trail and to the model, so the customer can be told."""


class VouchedApproval(Approval):
    """The ``approve`` update, as the approval inbox sends it: an answer about a named request, signed by the
    inbox for the person it authenticated (``activities.vouching``)."""

    request_id: RequestId
    signature: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


class VouchRequest(Contract):
    """What the ``vouched`` activity checks: an answer, for the workflow it was sent to."""

    workflow_id: str
    answer: VouchedApproval


class ApprovalRequest(Contract):
    """A refund waiting for a person: what ``awaiting_approval_of`` returns, and what a run that continues as
    new hands the next one."""

    request_id: str
    """``R1``, ``R2``, ...: the ticket's requests in order, across its runs."""
    amount_cents: Cents
    order_id: str = ""
    deadline: datetime
    """Workflow time after which silence means no, and an answer releases nothing."""
    approvers: list[str] = []
    """Who may answer; empty when neither the ticket nor the worker names anyone. Under roles, only those whose
    role reaches the amount."""
    approvals_needed: int = 1
    """Different people who must approve before the refund is made (two above the policy's threshold)."""
    approved_by: list[str] = []
    """Who has approved so far, in order: "1 of 2, by ann"."""
    signed_in_only: bool = False
    """Only answers the approval inbox vouched for approve (roles, or two people): a signal's approver is a
    claim. A decline by signal still ends the request."""
    customer_email: str = ""
    """Whose refund it is: nobody approves a refund to themselves."""
    why: str = ""
    """The rule that made it wait: "49.00 is above the approval limit of 20.00"."""
    opened_at: datetime | None = None
    """Workflow time the request opened (None: requests before the money policy): how long it has waited."""
    currency: Currency | None = None
    """The order's currency, as looked up (None: not known when the request opened), for people to read the
    amount in; ``amount_cents`` counts its smallest unit."""
    identity: Identity = "exact"
    """How people are compared on this request: as mailboxes, or (requests opened before 1.1.0) exactly."""
    payout: str = "refund"
    """What the payout waiting is called, as its tool declares it (``activities.tools.PayoutKind.noun``: ``refund``,
    ``store credit``): how the audit trail, the inbox and the model name it."""

    def among(self, person: str, people: Sequence[str]) -> bool:
        """Whether ``person`` is one of ``people`` by this request's identity rule: the one comparison of approvers
        the workflow's rules and the inbox's page both make."""
        if self.identity == "mailbox":
            return any(same_address(person, other) for other in people)
        return person in people


class ApprovalDecision(StrEnum):
    APPROVED = "approved"
    DECLINED = "declined"
    TIMED_OUT = "timed_out"
    PARTLY_APPROVED = "partly_approved"
    """One of the approvals a request needs: recorded ("1 of 2"), it releases nothing."""
    REJECTED = "rejected"
    """The answer released nothing: malformed, too late, already answered, from someone not allowed, or about
    an amount or a request nobody is waiting for."""


class ApprovalRecord(Contract):
    amount_cents: int | None
    decision: ApprovalDecision
    approver: str | None
    at: datetime
    """Workflow time, so it is the same on every replay."""
    reason: Note = ""
    """Why it was rejected (what was wrong with it, quoting what was sent), a decline's reason, or how far a
    request has come ("1 of 2"): at most ``RECORD_REASON_BYTES``, since the gate carries up to
    ``REJECTED_ANSWERS_KEPT`` rejected records into every run that continues the ticket."""
    request_id: str | None = None
    """The request the answer decided or was rejected for (None: no request was waiting, or runs before ids)."""
    channel: Literal["signal", "web"] = "signal"
    """How the answer came: ``web``, vouched for by the approval inbox for the person it authenticated; ``signal``,
    the approver as the sender claims it. A ``timed_out`` record is no answer: nobody sent it, its ``approver`` is
    None and its ``channel`` means nothing (the default, as recorded), so nothing shown to people names either."""


class Settlement(Contract):
    """What the money did for an approved request: what the payment, not the answer, came to. ``paid``: booked, under
    ``payout_id`` (the refund's or the credit's id); ``refused``: the booking (or the provider) refused it, for
    ``reason``, and nothing was paid; ``open``: its outcome is not known yet (an attempt is being retried, or the
    ledger could not be asked). Written by the ticket where it knows it, so a person is told the payment's word,
    never the approval's."""

    request_id: str
    outcome: Literal["paid", "refused", "open"]
    payout: str = "refund"
    """What the request paid, as its tool calls it (``refund``, ``store credit``)."""
    amount_cents: int
    currency: str | None = None
    order_id: str = ""
    payout_id: int | None = None
    """The refund's or the credit's number, as the ledger booked it (``RefundRecord.refund_id``)."""
    reason: str = ""
    """Why it was not paid, in the booking's words (at most ``SETTLEMENT_REASON_CHARS``)."""

    def said(self) -> str:
        """The settlement in a sentence: "refund #12 of USD 49.00 on A-1001 paid", "refund of USD 49.00 on A-1001
        refused by the booking: USD 49.00 of USD 49.00 is already paid back"."""
        shown = amount(self.amount_cents, self.currency)
        on = f" on {self.order_id}" if self.order_id else ""
        if self.outcome == "paid":
            return f"{self.payout} #{self.payout_id} of {shown}{on} paid"
        if self.outcome == "refused":
            return f"{self.payout} of {shown}{on} refused by the booking, nothing paid: {self.reason}"
        return f"{self.payout} of {shown}{on} still open: {self.reason or 'its outcome is not known yet'}"


class ApprovalReceipt(Contract):
    """What the ``approve`` update answers once the request is decided and its refund made or refused."""

    request_id: str
    decision: ApprovalDecision
    result: str
    """What came of the refund, in the words the model was given ("Refunded 49.00 on order A-1001 (refund
    #12).", "A person (ann) declined this refund, so it was not made."). What the money did, as a ``Settlement``, is
    in the ticket's memo (``SETTLED_MEMO``): a field here would be refused by an inbox of the release before, which
    reads receipts strictly, during a rolling deploy."""


class AnsweredRequest(Contract):
    """How a request was answered, as the audit trail keeps it beside the entry that tells it (the ``answers``
    table): what auditors export, with no Temporal history needed, since histories go after the namespace's
    retention. One per answer that counted: approved, declined, timed out, or one approval of several."""

    workflow_id: str
    request_id: str
    decision: Literal[
        ApprovalDecision.APPROVED,
        ApprovalDecision.DECLINED,
        ApprovalDecision.TIMED_OUT,
        ApprovalDecision.PARTLY_APPROVED,
    ]
    approver: str | None
    """None when nobody answered (timed out)."""
    channel: Literal["signal", "web"] | None
    """``web``, signed by the approval inbox for who signed in; ``signal``, the approver as claimed; None: timed out."""
    at: datetime
    """Workflow time of the answer (of the deadline, for a timeout)."""
    amount_cents: int | None
    currency: Currency | None = None
    order_id: str = ""
    customer_email: str = ""
    reason: str = ""
    """A decline's reason as the person typed it; for one approval of several, how far they have come ("1 of 2")."""
    policy_digest: str | None = None
    """The money policy in force when the request was answered (``sha256:...``); None for runs before the policy."""
