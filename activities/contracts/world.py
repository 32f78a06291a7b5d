"""What the tool activities ask of the outside systems and what those answer: an order as looked up, a refund
and its receipt, an email and its receipt, an audit entry, a tool's result for the model."""

from __future__ import annotations

from pydantic import (
    NonNegativeInt,
)

from activities.contracts.fields import Cents, Contract


class AuditEntry(Contract):
    ticket_id: str
    entry: str
    idempotency_key: str


class AuditQuery(Contract):
    """Whether the audit trail holds ``entry`` for the ticket, written under a key that starts with one of
    ``key_prefixes`` (by the runs they name)."""

    ticket_id: str
    entry: str
    key_prefixes: list[str]


class Order(Contract):
    order_id: str
    amount_cents: int
    customer_email: str


class OrderLookup(Order):
    """An order as ``lookup_order`` reports it: what was charged, and how much of it the payment provider has
    refunded so far, by any ticket. A further refund of an order refunded before needs a person."""

    refunded_cents: NonNegativeInt = 0


class RefundRequest(Contract):
    order_id: str
    amount_cents: Cents
    idempotency_key: str | None


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
    """What the payment provider charged for an order, and how much of it it has refunded so far, by anyone."""

    amount_cents: NonNegativeInt
    refunded_cents: NonNegativeInt


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


class EmailReceipt(Contract):
    email_id: int
    to: str
    replayed: bool = False
