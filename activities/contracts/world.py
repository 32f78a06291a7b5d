"""What the tool activities ask of the outside systems and what those answer: an order as looked up, a refund
and its receipt, an email and its receipt, an audit entry, a tool's result for the model."""

from __future__ import annotations

from typing import Any

from pydantic import (
    NonNegativeInt,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from activities.contracts.approvals import AnsweredRequest
from activities.contracts.fields import DEFAULT_CURRENCY, Cents, Contract, Currency, PolicyDigest
from activities.contracts.policy import Limits


class AuditEntry(Contract):
    ticket_id: str
    entry: str
    idempotency_key: str
    answer: AnsweredRequest | None = None
    """The answer the entry tells of, as a row for auditors (the ANSWER_ROWS patch); None for every other entry."""

    @model_serializer(mode="wrap")
    def _without_no_answer(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """An entry without an answer is sent as before, so a worker of the release before takes it."""
        fields: dict[str, Any] = handler(self)
        if fields.get("answer") is None:
            fields.pop("answer", None)
        return fields


class AuditQuery(Contract):
    """Whether the audit trail holds ``entry`` for the ticket, written under a key that starts with one of
    ``key_prefixes`` (by the runs they name)."""

    ticket_id: str
    entry: str
    key_prefixes: list[str]


class Order(Contract):
    order_id: str
    amount_cents: int
    """In the smallest unit of ``currency`` (cents, or yen): every amount is, as Stripe's are."""
    customer_email: str
    currency: Currency = DEFAULT_CURRENCY


class OrderLookup(Order):
    """An order as ``lookup_order`` reports it: what was charged, and how much of it has been paid back so far, by
    any ticket. A further payment back of an order paid back before needs a person."""

    currency: Currency
    """The currency the provider charged the order in, always stated: a look-up that names none is refused, never
    read as dollars."""
    refunded_cents: NonNegativeInt = 0
    """Everything paid back against the order so far, every kind of payout together: refunds (the payment
    provider's word) and store credit (the worker's database), and any kind declared later (every ``PayoutKind``
    of ``activities.tools.TOOLS``). The name is older than store credit and stays: it is part of the wire contract
    that stored histories and the model read."""


class RefundRequest(Contract):
    """A refund as the ``issue_refund`` activity hands it to the payment provider.

    ``limits`` says whether a person approved it: present, nobody did, and the provider checks the refund
    against these limits across tickets and counts it under ``customer_email`` and the desk, in the transaction
    that books it (refusing it with ``NeedsApprovalError`` if it would pass one); None, a person approved it
    (or the caller predates limits), and it is neither checked nor counted. Both default to None, so a request
    recorded in an older history still reads as it did."""

    order_id: str
    amount_cents: Cents
    idempotency_key: str
    customer_email: str | None = None
    """Whose refund it is: the ticket's customer, whose order it is. Counted ASCII-case-insensitively, as
    ``same_address`` compares addresses."""
    limits: Limits | None = None
    """The limits this refund without a person is held to; None: a person approved it."""
    ticket_id: str | None = None
    """The ticket the payout is for, whose audit trail the booking writes its entry to in the transaction that books
    it (``activities.business.audit.record_payout``); None from a caller outside a ticket, or a run before 1.2.0."""
    policy: PolicyDigest | None = None
    """The digest of the money policy that judged this payout to need no person (``MoneyPolicy.digest``): booked
    only where that policy is in force, else refused with nothing paid (``PolicyChangedError``). None: a person
    approved it, or a run before 1.4.0's ``policy-at-booking`` read the policy again just before."""

    @model_validator(mode="after")
    def _limits_need_a_customer(self) -> RefundRequest:
        if self.limits is not None and not (self.customer_email or "").strip():
            raise ValueError("a refund held to limits must say whose it is (customer_email)")
        if self.policy is not None and self.limits is None:
            raise ValueError("only a payout without a person is judged by a policy where it is booked (needs limits)")
        return self


class RefundReceipt(Contract):
    refund_id: int
    order_id: str
    amount_cents: int
    replayed: bool = False
    """True when the provider recognised the key and paid nothing this time."""
    provider_refund_id: str | None = None
    """The refund's id at the payment provider (Stripe's ``re_...``); None for the embedded provider."""
    status: str | None = None
    """What the provider said of the refund (Stripe: ``succeeded``, ``pending``); None for the embedded one."""


class Charge(Contract):
    """What the payment provider charged for an order, and how much of it has been paid back so far, by anyone."""

    amount_cents: NonNegativeInt
    refunded_cents: NonNegativeInt
    """Paid back against the charge, every kind of payout together (refunds and store credit): what
    ``OrderLookup.refunded_cents`` reports. Only ``StripePayments.at_stripe`` gives Stripe's refunds alone."""
    currency: Currency | None = None
    """The charge's currency as the provider reports it; None: the provider keeps none of its own (the embedded
    one shares the shop's records)."""


class ToolOutput(Contract):
    """A tool's result as text; one above the worker's inline limit is kept in the content store and only a
    preview and its reference travel through the history."""

    content: str
    content_ref: str | None = None
    size: NonNegativeInt = 0
    """Bytes of the whole result (UTF-8)."""


class EmailRequest(Contract):
    to: str
    subject: str
    body: str
    idempotency_key: str
    in_reply_to: str | None = None
    """The customer's mail it answers, for their mail program to thread it under (``MailThread``)."""
    references: list[str] = []
    """The conversation up to that mail, oldest first, ending with ``in_reply_to``."""

    @model_serializer(mode="wrap")
    def _without_thread(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """An email that answers no mail is sent as before the fields, so a worker of the release before takes
        it during a rolling deploy, and a ticket started without mail schedules the very same input."""
        fields: dict[str, Any] = handler(self)
        if fields.get("in_reply_to") is None:
            fields.pop("in_reply_to", None)
        if not fields.get("references"):
            fields.pop("references", None)
        return fields


class EmailReceipt(Contract):
    email_id: int
    to: str
    replayed: bool = False
