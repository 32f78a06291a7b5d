"""What the tools do: one implementation for each declaration of ``activities.tools`` that runs an activity.

Each is decorated ``@implements(TOOL)``, which registers it under the tool's declared name; ``ToolActivities.all``
hands the worker one for every such declaration, and refuses to start a worker without one. What the workflow
checks around a call (whose order, keys, approval, reconciliation) is the tool's rule, in ``workflows.toolbox``
and ``workflows.payouts``; what may be retried is decided by ``activities.calls``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Self

import structlog
from temporalio import activity

from activities.business.credits import StoreCredits
from activities.business.mail import Mail
from activities.business.orders import Orders
from activities.business.payments import Payments
from activities.calls import call
from activities.content_store import ContentStore, offload
from activities.contracts.world import (
    EmailReceipt,
    EmailRequest,
    OrderLookup,
    RefundReceipt,
    RefundRequest,
    ToolOutput,
)
from activities.tools import (
    ISSUE_REFUND,
    ISSUE_STORE_CREDIT,
    LOOKUP_ORDER,
    ORDER_EVENTS,
    SEND_EMAIL,
    SHIPPING_STATUS,
    TOOLS,
    LookupOrderArgs,
    OrderEventsArgs,
    ShippingStatusArgs,
    activity_name,
    implements,
)

if TYPE_CHECKING:
    from activities.business import Business

log = structlog.get_logger(__name__)

INLINE_MAX_BYTES = 8192
"""Tool results above this go to the content store; the history carries a preview and the key."""


def registered(implementations: object, names: list[str], what: str) -> list[Callable[..., Any]]:
    """The bound activities of ``implementations`` registered under ``names``, in that order; a name none of them
    is registered under stops the worker at start (``LookupError``), rather than fail a ticket's first call."""
    found: dict[str, Callable[..., Any]] = {}
    for attribute in dir(type(implementations)):
        if attribute.startswith("__"):
            continue
        method = getattr(implementations, attribute)
        name = activity_name(method) if callable(method) else None
        if name is not None:
            found[name] = method
    missing = [name for name in names if name not in found]
    if missing:
        raise LookupError(f"{type(implementations).__name__} implements no activity for {what} {', '.join(missing)}")
    return [found[name] for name in names]


class ToolActivities:
    """The tools' implementations, each reaching only the outside systems it acts on: the shop's orders, the
    payment provider, the store credit ledger, the mail outbox, and the content store for results too large for
    the history. Given the digest of the worker's money policy, ``in_force``: a payout without a person is booked
    only if that policy judged it (``RefundRequest.policy``)."""

    def __init__(  # noqa: PLR0913 - one port per outside system, by name: grouped, they would be the store again
        self,
        *,
        orders: Orders,
        payments: Payments,
        store_credit: StoreCredits,
        mail: Mail,
        content: ContentStore,
        in_force: str | None,
        inline_max_bytes: int = INLINE_MAX_BYTES,
    ) -> None:
        self.orders = orders
        self.in_force = in_force
        self.payments = payments
        self.credits = store_credit
        self.mail = mail
        self.content = content
        self.inline_max_bytes = inline_max_bytes

    @classmethod
    def over(
        cls,
        business: Business,
        content: ContentStore,
        *,
        in_force: str | None,
        inline_max_bytes: int = INLINE_MAX_BYTES,
    ) -> Self:
        """The implementations over the business's ports, under the worker's policy: what a worker registers
        (``all``)."""
        return cls(
            orders=business.orders,
            payments=business.payments,
            store_credit=business.credits,
            mail=business.mail,
            content=content,
            in_force=in_force,
            inline_max_bytes=inline_max_bytes,
        )

    def all(self) -> list[Callable[..., Any]]:
        """The implementation of every declared tool that runs an activity, in the order they are declared."""
        return registered(self, [t.name for t in TOOLS.values() if t.returns is not None], "the tool")

    @implements(LOOKUP_ORDER)
    async def lookup_order(self, args: LookupOrderArgs) -> OrderLookup:
        return await call(lambda: self._look_up(args.order_id))

    def _look_up(self, order_id: str) -> OrderLookup:
        """The order as the shop has it, with what the payment provider charged for it and what was paid back of
        it so far, by any ticket and by every kind of payout, refunds and store credit together (the provider's
        word on money, not the shop's). The shop is asked first, so an order that does not exist is refused before
        the provider is asked."""
        order = self.orders.order(order_id)
        charge = self.payments.charge(order_id)
        return OrderLookup(
            order_id=order.order_id,
            amount_cents=charge.amount_cents,
            customer_email=order.customer_email,
            refunded_cents=charge.refunded_cents,
            currency=charge.currency or order.currency,
        )

    @implements(ORDER_EVENTS)
    async def order_events(self, args: OrderEventsArgs) -> ToolOutput:
        """The log can be long: above the inline limit it is stored before the activity completes, and only
        its key and a preview are recorded in the history."""
        events = await call(lambda: self.orders.events(args.order_id))
        text = "\n".join(events) if events else f"No events are recorded for order {args.order_id}."
        return await call(lambda: offload(self.content, text, self.inline_max_bytes))

    @implements(SHIPPING_STATUS)
    async def shipping_status(self, args: ShippingStatusArgs) -> ToolOutput:
        events = await call(lambda: self.orders.events(args.order_id))
        if not events:
            return ToolOutput(content=f"No events are recorded for order {args.order_id}.")
        return ToolOutput(content=f"Latest for order {args.order_id}: {events[-1]} ({len(events)} events in all).")

    @implements(ISSUE_REFUND)
    async def issue_refund(self, request: RefundRequest) -> RefundReceipt:
        """Pay the refund through the provider, once per key. A refund without a person (``request.limits``)
        that would pass a limit across tickets pays nothing and fails, non-retryable, with the type
        ``NeedsApproval`` (``activities.contracts.names.NEEDS_APPROVAL``): its message says which limit it met,
        with figures, and its one detail lists the ``Limits`` fields met, so the workflow can ask a person
        instead, citing the reason."""
        receipt = await call(lambda: self.payments.refund(request, self.in_force))
        if not receipt.replayed:
            meter = activity.metric_meter()
            meter.create_counter("agent_refunds_paid", "Refunds the provider paid", "1").add(1)
            meter.create_counter("agent_refunded_cents", "Money refunded", "cents").add(receipt.amount_cents)
        log.info(
            "refund replayed" if receipt.replayed else "refund paid",
            refund_id=receipt.refund_id,
            order_id=receipt.order_id,
            amount_cents=receipt.amount_cents,
        )
        return receipt

    @implements(ISSUE_STORE_CREDIT)
    async def issue_store_credit(self, request: RefundRequest) -> RefundReceipt:
        """Issue a voucher for the amount on the order, once per key, in the store credit ledger. Past a limit
        across tickets without a person, it issues nothing and fails as ``NeedsApproval``, as a refund does."""
        receipt = await call(lambda: self.credits.issue(request, self.in_force))
        log.info(
            "store credit replayed" if receipt.replayed else "store credit issued",
            credit_id=receipt.refund_id,
            order_id=receipt.order_id,
            amount_cents=receipt.amount_cents,
        )
        return receipt

    @implements(SEND_EMAIL)
    async def send_email(self, request: EmailRequest) -> EmailReceipt:
        receipt = await call(lambda: self.mail.send_email(request))
        log.info("email replayed" if receipt.replayed else "email sent", email_id=receipt.email_id)
        return receipt
