"""Whose orders: a tool acts on an order only if it is the ticket's customer's, checked from the order as looked
up, never from what the model says; another customer's order reads as no order at all, so nothing of theirs
leaks. Every tool that names an order runs through here first, and the lookup it runs is the declared
``LOOKUP_ORDER`` tool's."""

from __future__ import annotations

from typing import Any, Protocol

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.contracts.fields import same_address
    from activities.contracts.world import OrderLookup
    from activities.tools import LOOKUP_ORDER, LookupOrderArgs, Tool
    from workflows import timeouts
    from workflows.approval_rules import spelled

from workflows.failures import ToolError


class AboutAnOrder(Protocol):
    """The arguments of every tool that names an order (``LookupOrderArgs``, ``IssueRefundArgs``, ...)."""

    @property
    def order_id(self) -> str: ...


UNVERIFIED_SENDER = (
    "The tool failed: The customer's address is not verified yet, so no order may be looked up, discussed or paid "
    "back on this ticket. Answer in general terms only; a colleague will verify the sender, or the customer can "
    "write again from their own mailbox."
)


class CustomerOrders:
    """The ticket's customer's orders, as this run looked them up (not carried: a new run looks them up again), and
    whether the customer is verified to be who the ticket says (carried, in the toolbox's snapshot)."""

    def __init__(self, customer_email: str, *, verified: bool = True) -> None:
        self._customer = customer_email
        self._orders: dict[str, OrderLookup] = {}
        self.verified = verified
        """False: the address is only what an unverified mail said, and no order is this ticket's to touch."""

    async def own(self, order_id: str, *, look_up: bool = False) -> OrderLookup:
        """The order, if it is this ticket's customer's (looked up unless this run has, or ``look_up``); a
        ``ToolError`` that reads exactly as a missing order otherwise, and one saying why for an unverified
        sender, before anything is looked up (the order's existence is itself something to reveal)."""
        if not self.verified:
            raise ToolError(UNVERIFIED_SENDER)
        order = self._orders.get(order_id)
        if order is None or look_up:
            order = await run(LOOKUP_ORDER, LookupOrderArgs(order_id=order_id))
        if not same_address(order.customer_email, self._customer):
            raise ToolError(f"The tool failed: There is no order {order_id}")  # as a missing one is worded
        self._orders[order_id] = order
        return order

    def paid_back(self, order_id: str, amount_cents: int) -> None:
        """This run paid ``amount_cents`` back on the order since looking it up: the order as the run knows it
        counts it, until a lookup reads the ledger again (which counts it there)."""
        order = self._orders.get(order_id)
        if order is not None:
            self._orders[order_id] = order.model_copy(update={"refunded_cents": order.refunded_cents + amount_cents})

    def get(self, order_id: str) -> OrderLookup | None:
        return self._orders.get(order_id)

    def currency(self, order_id: str) -> str | None:
        """The order's currency as this run looked it up (None: not looked up)."""
        order = self._orders.get(order_id)
        return order.currency if order is not None else None

    def money(self, units: int, order_id: str) -> str:
        """An amount of the order as the model and people read it, in its currency (``USD 49.00``). The policy's
        limits count the smallest unit of whatever currency the order is in, so they read in it too."""
        return spelled(units, self.currency(order_id))


async def run(tool: Tool, arg: object) -> Any:
    """Run the tool's declared activity, by its declared name, with its attempt: what it returns is the declared
    ``tool.returns``, which only the caller, knowing the tool, can name."""
    return await workflow.execute_activity(tool.name, arg, result_type=tool.returns, **timeouts.attempt(tool.name))
