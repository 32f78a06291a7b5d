"""The support agent's tools, one activity type each, so the Temporal UI shows which tool ran.

Errors that cannot succeed on a retry (no such order, a reused key, a refund above the charge) are raised
as non-retryable ``ApplicationError``s with a message the model and a person can act on: retrying them
would only spend the retry budget before telling the model the same thing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

import structlog
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.business.audit import AuditTrail
from activities.business.mail import Mail
from activities.business.orders import Orders
from activities.business.payments import Payments
from activities.business.refusals import (
    IdempotencyConflictError,
    KeyClosedError,
    OrderNotFoundError,
    RefundExceedsChargeError,
)
from activities.content_store import ContentStore, offload
from activities.contracts import (
    AuditEntry,
    EmailReceipt,
    EmailRequest,
    LookupOrderArgs,
    OrderEventsArgs,
    OrderLookup,
    RefundReceipt,
    RefundRequest,
    ToolOutput,
)
from activities.heartbeat import heartbeating

T = TypeVar("T")
log = structlog.get_logger(__name__)

NON_RETRYABLE: dict[type[Exception], str] = {
    OrderNotFoundError: "OrderNotFound",
    IdempotencyConflictError: "IdempotencyConflict",
    RefundExceedsChargeError: "RefundExceedsCharge",
    KeyClosedError: "IdempotencyKeyClosed",
}


async def _call(fn: Callable[[], T]) -> T:
    """Run a store call off the event loop, heartbeating, with business refusals made non-retryable."""
    try:
        async with heartbeating():
            return await asyncio.to_thread(_logging_refusals, fn)
    except tuple(NON_RETRYABLE) as error:
        raise ApplicationError(str(error), type=NON_RETRYABLE[type(error)], non_retryable=True) from error


def _logging_refusals(fn: Callable[[], T]) -> T:
    """A refusal is logged where it happens, in the thread: an attempt the server gave up on (its await long
    cancelled) still runs to the end, and its refusal is the only trace of what it tried."""
    try:
        return fn()
    except tuple(NON_RETRYABLE) as error:
        log.warning("refused", refusal=NON_RETRYABLE[type(error)], reason=str(error))
        raise


INLINE_MAX_BYTES = 8192
"""Tool results above this go to the content store; the history carries a preview and the key."""


class ToolActivities:
    """The tools, each reaching only the outside systems it acts on: the shop's orders, the payment provider,
    the mail outbox, the audit trail, and the content store for results too large for the history."""

    def __init__(  # noqa: PLR0913 - one port per outside system, by name: grouped, they would be the store again
        self,
        *,
        orders: Orders,
        payments: Payments,
        mail: Mail,
        audit: AuditTrail,
        content: ContentStore,
        inline_max_bytes: int = INLINE_MAX_BYTES,
    ) -> None:
        self.orders = orders
        self.payments = payments
        self.mail = mail
        self.audit_trail = audit
        self.content = content
        self.inline_max_bytes = inline_max_bytes

    def all(self) -> list[Callable[..., Any]]:
        """Every activity of the business side, for a worker to register."""
        return [self.lookup_order, self.issue_refund, self.find_refund, self.audit, self.send_email, self.order_events]

    @activity.defn(name="lookup_order")
    async def lookup_order(self, args: LookupOrderArgs) -> OrderLookup:
        return await _call(lambda: self._look_up(args.order_id))

    def _look_up(self, order_id: str) -> OrderLookup:
        """The order as the shop has it, with what the payment provider has refunded of it so far, by any ticket.
        The shop is asked first, so an order that does not exist is refused before the provider is asked."""
        order = self.orders.order(order_id)
        return OrderLookup(**order.model_dump(), refunded_cents=self.payments.refunded_total(order_id))

    @activity.defn(name="order_events")
    async def order_events(self, args: OrderEventsArgs) -> ToolOutput:
        """The log can be long: above the inline limit it is stored before the activity completes, and only
        its key and a preview are recorded in the history."""
        events = await _call(lambda: self.orders.events(args.order_id))
        text = "\n".join(events) if events else f"No events are recorded for order {args.order_id}."
        return await _call(lambda: offload(self.content, text, self.inline_max_bytes))

    @activity.defn(name="issue_refund")
    async def issue_refund(self, request: RefundRequest) -> RefundReceipt:
        receipt = await _call(lambda: self.payments.refund(request))
        if not receipt.replayed:
            meter = activity.metric_meter()
            meter.create_counter("agent_refunds_paid", "Refunds the provider paid", "1").add(1)
            meter.create_counter("agent_refunded_cents", "Money refunded", "cents").add(receipt.amount_cents)
        log.info(
            "refund replayed" if receipt.replayed else "refund paid",
            refund_id=receipt.refund_id, order_id=receipt.order_id, amount_cents=receipt.amount_cents,
        )  # fmt: skip
        return receipt

    @activity.defn(name="find_refund")
    async def find_refund(self, idempotency_key: str) -> RefundReceipt | None:
        """Ask the provider what it recorded under a key (a timed-out refund may well have been paid), and close
        the key if nothing: the answer is final, and a late attempt cannot pay after it."""
        return await _call(lambda: self.payments.settle_refund(idempotency_key))

    @activity.defn(name="audit")
    async def audit(self, entry: AuditEntry) -> None:
        """Not a tool the model can call: the workflow's audit trail, written here because a write in
        workflow code would run again on every replay."""
        await _call(lambda: self.audit_trail.write(entry))

    @activity.defn(name="send_email")
    async def send_email(self, request: EmailRequest) -> EmailReceipt:
        receipt = await _call(lambda: self.mail.send_email(request))
        log.info("email replayed" if receipt.replayed else "email sent", email_id=receipt.email_id)
        return receipt
