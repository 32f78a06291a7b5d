"""The support agent's tools, each declared once: what the model is told, what the workflow does with a call,
which activity runs it, and how long it may take.

A tool is a ``Tool`` in ``TOOLS``: its arguments (a pydantic model whose docstring and JSON schema are what the
model is told, and which the workflow validates a call with before anything runs), its ``Effect`` (whether it
reads or acts, which idempotency rule and which approval rule it is under, and so which step of the workflow
runs it), the activity that does the work and its timeouts and retries. The model's tool list
(``claude_model.tool_definitions``), the workflow's dispatch (``workflows.tools.Toolbox``), the worker's
registration (``ToolActivities.all``) and the longest attempt a deploy waits for (``workflows.policies``) are
all read from here. Adding a read-only tool is a declaration below and its activity body above it.

Errors that cannot succeed on a retry (no such order, a reused key, a refund above the charge, a refund without a
person past a limit across tickets, a mail server's 5xx) are raised as non-retryable ``ApplicationError``s with a
message the model and a person can act on: retrying them would only spend the retry budget before telling the
model the same thing.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Annotated, Any, TypeVar

import structlog
from pydantic import Field
from temporalio import activity
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.workflow import ActivityConfig

from activities.business.audit import AuditTrail
from activities.business.mail import Mail
from activities.business.orders import Orders
from activities.business.payments import Payments
from activities.business.refusals import (
    IdempotencyConflictError,
    KeyClosedError,
    MailRefusedError,
    NeedsApprovalError,
    OrderNotFoundError,
    PaymentRefusedError,
    PaymentsUnusableError,
    RefundExceedsChargeError,
)
from activities.content_store import ContentStore, offload
from activities.contracts.fields import Cents, Contract, EmailAddress, NonEmpty, OrderId
from activities.contracts.names import NEEDS_APPROVAL, PAYMENTS_UNUSABLE
from activities.contracts.world import (
    AuditEntry,
    AuditQuery,
    EmailReceipt,
    EmailRequest,
    OrderLookup,
    RefundReceipt,
    RefundRequest,
    ToolOutput,
)
from activities.heartbeat import HEARTBEAT_TIMEOUT, heartbeating

T = TypeVar("T")
log = structlog.get_logger(__name__)

NON_RETRYABLE: dict[type[Exception], str] = {
    OrderNotFoundError: "OrderNotFound",
    IdempotencyConflictError: "IdempotencyConflict",
    RefundExceedsChargeError: "RefundExceedsCharge",
    KeyClosedError: "IdempotencyKeyClosed",
    MailRefusedError: "MailRefused",
    PaymentRefusedError: "PaymentRefused",
    PaymentsUnusableError: PAYMENTS_UNUSABLE,
    NeedsApprovalError: NEEDS_APPROVAL,
}


async def _call(fn: Callable[[], T]) -> T:
    """Run a store call off the event loop, heartbeating, with business refusals made non-retryable."""
    try:
        async with heartbeating():
            return await asyncio.to_thread(_logging_refusals, fn)
    except tuple(NON_RETRYABLE) as error:
        details = [list(error.met)] if isinstance(error, NeedsApprovalError) else []
        raise ApplicationError(str(error), *details, type=NON_RETRYABLE[type(error)], non_retryable=True) from error


def _logging_refusals(fn: Callable[[], T]) -> T:
    """A refusal is logged where it happens, in the thread: an attempt the server gave up on (its await long
    cancelled) still runs to the end, and its refusal is the only trace of what it tried."""
    try:
        return fn()
    except tuple(NON_RETRYABLE) as error:
        log.warning("refused", refusal=NON_RETRYABLE[type(error)], reason=str(error))
        raise


# --- what the model may send: each tool's arguments, whose docstring and schema are what the model is told ------


class LookupOrderArgs(Contract):
    """Look up an order: its amount and the customer's email address. Always do this before refunding."""

    order_id: OrderId = Field(description="The order id, such as A-1001.")


class IssueRefundArgs(Contract):
    """Refund part or all of an order to the customer's original payment method."""

    order_id: OrderId = Field(description="The order id, such as A-1001.")
    amount_cents: Cents = Field(description="The amount to refund, in cents.")


class SendEmailArgs(Contract):
    """Send an email to the customer about their ticket."""

    to: EmailAddress = Field(description="The customer's email address.")
    subject: NonEmpty = Field(max_length=200)
    body: NonEmpty = Field(max_length=20_000)


class OrderEventsArgs(Contract):
    """Read an order's event log: every carrier scan, status change and note about it, oldest first. Long:
    use it when the customer's question is about what happened to the parcel."""

    order_id: OrderId = Field(description="The order id, such as A-1001.")


class ShippingStatusArgs(Contract):
    """Where the order's parcel is now: the latest entry of its event log, in one line. Short: use it first
    when the customer asks where the parcel is, and order_events only if the whole story matters."""

    order_id: OrderId = Field(description="The order id, such as A-1001.")


class WaitForDeliveryScanArgs(Contract):
    """Wait until the carrier reports a scan of the order's parcel (or another event about the order), or until
    the hours run out, and say which. The ticket waits without costing anything; use it when the parcel may
    still be on its way and the customer can be answered once the carrier says where it is."""

    order_id: OrderId = Field(description="The order id, such as A-1001.")
    hours: Annotated[int, Field(ge=1, le=30 * 24)] = Field(description="How many hours to wait at most.")


# --- the activities --------------------------------------------------------------------------------------------

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
        """Every activity of the business side, for a worker to register: each declared tool's, then the two the
        workflow runs itself (settling a refund's unknown outcome, and the audit trail)."""
        declared = [getattr(self, tool.activity.__name__) for tool in TOOLS.values() if tool.activity is not None]
        return [*declared, self.find_refund, self.audit, self.audited]

    @activity.defn(name="lookup_order")
    async def lookup_order(self, args: LookupOrderArgs) -> OrderLookup:
        return await _call(lambda: self._look_up(args.order_id))

    def _look_up(self, order_id: str) -> OrderLookup:
        """The order as the shop has it, with what the payment provider charged for it and has refunded of it so
        far, by any ticket (the provider's word on money, not the shop's). The shop is asked first, so an order
        that does not exist is refused before the provider is asked."""
        order = self.orders.order(order_id)
        charge = self.payments.charge(order_id)
        return OrderLookup(
            order_id=order.order_id, amount_cents=charge.amount_cents, customer_email=order.customer_email,
            refunded_cents=charge.refunded_cents, currency=charge.currency or order.currency,
        )  # fmt: skip

    @activity.defn(name="order_events")
    async def order_events(self, args: OrderEventsArgs) -> ToolOutput:
        """The log can be long: above the inline limit it is stored before the activity completes, and only
        its key and a preview are recorded in the history."""
        events = await _call(lambda: self.orders.events(args.order_id))
        text = "\n".join(events) if events else f"No events are recorded for order {args.order_id}."
        return await _call(lambda: offload(self.content, text, self.inline_max_bytes))

    @activity.defn(name="shipping_status")
    async def shipping_status(self, args: ShippingStatusArgs) -> ToolOutput:
        events = await _call(lambda: self.orders.events(args.order_id))
        if not events:
            return ToolOutput(content=f"No events are recorded for order {args.order_id}.")
        return ToolOutput(content=f"Latest for order {args.order_id}: {events[-1]} ({len(events)} events in all).")

    @activity.defn(name="issue_refund")
    async def issue_refund(self, request: RefundRequest) -> RefundReceipt:
        """Pay the refund through the provider, once per key. A refund without a person (``request.limits``)
        that would pass a limit across tickets pays nothing and fails, non-retryable, with the type
        ``NeedsApproval`` (``activities.contracts.names.NEEDS_APPROVAL``): its message says which limit it met,
        with figures, and its one detail lists the ``Limits`` fields met, so the workflow can ask a person
        instead, citing the reason."""
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

    @activity.defn(name="audited")
    async def audited(self, query: AuditQuery) -> bool:
        """Whether the audit trail holds an entry the ticket's runs wrote: what a run checks an approval the run
        before it handed over against, since carried state is only believed when the trail backs it."""
        return await _call(lambda: self.audit_trail.holds(query))

    @activity.defn(name="send_email")
    async def send_email(self, request: EmailRequest) -> EmailReceipt:
        receipt = await _call(lambda: self.mail.send_email(request))
        log.info("email replayed" if receipt.replayed else "email sent", email_id=receipt.email_id)
        return receipt


# --- the declarations ------------------------------------------------------------------------------------------


class Effect(StrEnum):
    """What a tool does to the world, and so which rules it is under and which step of the workflow runs it."""

    LOOKS_UP_ORDER = "looks_up_order"
    """Reads the order whose owner every other tool is checked against. Runs at once with other reads."""
    READS_ORDER = "reads_order"
    """Reads about one of the customer's orders (its arguments have an ``order_id``, checked to be the ticket's
    customer's first): no key, no person, runs at once with other reads, and its result goes to the model."""
    PAYS = "pays"
    """A refund: keyed by the ticket's ``refund_key`` rule (per order, a part's key), waits for a person under
    the approval rules (above the limit, the ticket's total, an order refunded before), an unknown outcome is
    settled with the provider. Runs alone."""
    MAILS = "mails"
    """An email: keyed per tool call, sent to the ticket's customer address only. Runs alone."""
    WAITS_FOR_EVENT = "waits_for_event"
    """Changes nothing, but parks the ticket (no activity) until an event about the order arrives. Runs alone."""

    @property
    def reads_only(self) -> bool:
        """Changes nothing and waits for nothing, so several calls may run at once."""
        return self in {Effect.LOOKS_UP_ORDER, Effect.READS_ORDER}


@dataclass(frozen=True)
class Tool:
    """One tool, declared once."""

    name: str
    args: type[Contract]
    effect: Effect
    activity: Callable[..., Awaitable[Any]] | None
    """The ``ToolActivities`` method that does the work (None: the workflow does it, waiting)."""
    config: ActivityConfig | None = None
    """Its timeouts and retries (Temporal owns every retry: clients inside run with theirs off)."""

    def __post_init__(self) -> None:
        if self.effect is not Effect.MAILS and "order_id" not in self.args.model_fields:
            raise TypeError(f"{self.name}: a tool that {self.effect.value} must take the order_id it is about")
        if (self.activity is None) != (self.effect is Effect.WAITS_FOR_EVENT):
            raise TypeError(f"{self.name}: only a tool that waits for an event runs without an activity")

    @property
    def description(self) -> str:
        return inspect.cleandoc(self.args.__doc__ or "")

    def input_schema(self) -> dict[str, Any]:
        return self.args.model_json_schema()


READ: ActivityConfig = {
    "heartbeat_timeout": HEARTBEAT_TIMEOUT,
    "start_to_close_timeout": timedelta(seconds=10),
    "retry_policy": RetryPolicy(
        initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10), maximum_attempts=5
    ),
}
"""A read of the shop's database; a long result is stored by the activity, so it takes no longer to record."""

PAY: ActivityConfig = {
    "start_to_close_timeout": timedelta(seconds=30),
    "schedule_to_close_timeout": timedelta(hours=1),
    "heartbeat_timeout": HEARTBEAT_TIMEOUT,
    "retry_policy": RetryPolicy(
        initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30), maximum_attempts=5
    ),
}
"""The schedule-to-close timeout is far below the provider's 24-hour key lifetime: a retry that arrived after
the key expired would be a new payment. Attempts are bounded, so a refund that keeps failing is settled and
handed to the model instead of retried forever."""

MAIL_ATTEMPT = timedelta(seconds=30)
"""How long one attempt at an email may take: a mail server's delivery must fit in it."""

MAIL: ActivityConfig = {
    "heartbeat_timeout": HEARTBEAT_TIMEOUT,
    "start_to_close_timeout": MAIL_ATTEMPT,
    "retry_policy": RetryPolicy(
        initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30), maximum_attempts=5
    ),
}
"""Through a mail server, each attempt is one delivery bounded by ``AGENT_SMTP_TIMEOUT_SECONDS`` (below the
start-to-close timeout, which the setting is checked against), so a slow server ends an attempt with a
retryable answer; a 4xx reply, a refused connection or a timeout is retried here, a 5xx is not."""

TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool("lookup_order", LookupOrderArgs, Effect.LOOKS_UP_ORDER, ToolActivities.lookup_order, READ),
        Tool("issue_refund", IssueRefundArgs, Effect.PAYS, ToolActivities.issue_refund, PAY),
        Tool("send_email", SendEmailArgs, Effect.MAILS, ToolActivities.send_email, MAIL),
        Tool("order_events", OrderEventsArgs, Effect.READS_ORDER, ToolActivities.order_events, READ),
        Tool("wait_for_delivery_scan", WaitForDeliveryScanArgs, Effect.WAITS_FOR_EVENT, None),
        Tool("shipping_status", ShippingStatusArgs, Effect.READS_ORDER, ToolActivities.shipping_status, READ),
    )
}
"""Every tool, in the order the model is told of them."""
