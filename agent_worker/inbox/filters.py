"""What a person narrows an inbox tab to: one customer, one order, and "mine".

The filters are applied by the desk to what it read from visibility, never written into a visibility query: what a
person types cannot change what is asked of the server. They are checked before anything is read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from activities.contracts.fields import ORDER_ID_PATTERN, normalised_address
from agent_worker.inbox.standing import standing

if TYPE_CHECKING:
    from agent_worker.inbox.desk import Listed

CUSTOMER_MAX = 254
"""The longest customer filter: an email address's longest."""
ORDER_FILTER = re.compile(rf"^{ORDER_ID_PATTERN}$")


class FilterError(ValueError):
    """A filter the inbox does not take: the message says what it takes."""


@dataclass(frozen=True)
class Filters:
    """What a person narrows a tab to: one customer (their address, or part of it, in any case), one order, and
    "mine", the requests the person signed in may answer. Checked before anything is read."""

    customer: str = ""
    order: str = ""
    mine: bool = False

    @classmethod
    def of(cls, params: Mapping[str, str]) -> Filters:
        """The filters a page's query asks for; ``FilterError`` for a value outside what they take."""
        customer = params.get("customer", "").strip()
        order = params.get("order", "").strip().upper()
        if len(customer) > CUSTOMER_MAX or any(c.isspace() or not c.isprintable() for c in customer):
            raise FilterError(
                f"a customer is an email address, or part of one: up to {CUSTOMER_MAX} characters, no spaces"
            )
        if order and not ORDER_FILTER.match(order):
            raise FilterError("an order is an order id, a capital letter, a dash and four digits or more (A-1001)")
        return cls(customer, order, params.get("mine", "") in {"1", "on", "yes"})

    def __bool__(self) -> bool:
        return bool(self.customer or self.order or self.mine)

    def query(self) -> dict[str, str]:
        """The page's query parameters that keep these filters (for the tabs' links and the live part)."""
        kept = {"customer": self.customer, "order": self.order, "mine": "1" if self.mine else ""}
        return {key: value for key, value in kept.items() if value}

    def keeps(self, ticket: Listed, person: str) -> bool:
        """Whether ``ticket`` is one of those the filters keep for ``person``. "Mine" keeps the requests that
        would take ``person``'s answer (``standing``): a ticket that waits for no request is nobody's."""
        if self.order and ticket.order != self.order:
            return False
        if self.customer and normalised_address(self.customer) not in normalised_address(ticket.customer):
            return False
        return not self.mine or (ticket.request is not None and standing(ticket.request, person).answer is None)
