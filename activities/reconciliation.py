"""Settling a payment whose outcome is unknown: the activity each paying tool declares (``PayoutKind.settled_by``).

A payment that timed out, or ran out of retries without a refusal, may well have been paid. Before the model
hears anything, the workflow asks the ledger that keeps the money what it recorded under the payment's key; if
nothing, the key is closed in the same transaction, so an attempt still running somewhere cannot pay after the
model was told it was not made. Not a tool the model can call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Self

from activities.business.credits import StoreCredits
from activities.business.payments import Payments
from activities.calls import call
from activities.contracts.world import RefundReceipt
from activities.tool_activities import registered
from activities.tools import ISSUE_REFUND, ISSUE_STORE_CREDIT, TOOLS, settles

if TYPE_CHECKING:
    from activities.business import Business


class Reconciliation:
    """The settling activity of every tool that pays, over the ledgers they pay from."""

    def __init__(self, *, payments: Payments, store_credit: StoreCredits) -> None:
        self.payments = payments
        self.credits = store_credit

    @classmethod
    def over(cls, business: Business) -> Self:
        return cls(payments=business.payments, store_credit=business.credits)

    def all(self) -> list[Callable[..., Any]]:
        """The settling activity of every declared tool that pays."""
        names = [t.payout.settled_by for t in TOOLS.values() if t.payout is not None]
        return registered(self, names, "settling")

    @settles(ISSUE_REFUND)
    async def find_refund(self, idempotency_key: str) -> RefundReceipt | None:
        """Ask the provider what it recorded under a key (a timed-out refund may well have been paid), and close
        the key if nothing: the answer is final, and a late attempt cannot pay after it."""
        return await call(lambda: self.payments.settle_refund(idempotency_key))

    @settles(ISSUE_STORE_CREDIT)
    async def find_store_credit(self, idempotency_key: str) -> RefundReceipt | None:
        """The voucher issued under a key, or None with the key closed, in the store credit ledger."""
        return await call(lambda: self.credits.settle(idempotency_key))
