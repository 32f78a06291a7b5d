"""The shop's orders: what was charged, to whom, and each order's event log (its tracking).

``Orders`` is the port, what the tools read: an order, and its events. ``SqlOrders`` is the embedded shop in
the business database, which operators and tests also write to (``agent-worker orders add``, the demo
orders seeded on first use). What has been refunded of an order is not the shop's to say but the payment
provider's, and so is what was charged (``Payments.charge``): ``lookup_order`` asks both.
"""

from __future__ import annotations

from typing import Any, Protocol

import sqlalchemy as sa

from activities.business.database import Database
from activities.business.refusals import OrderNotFoundError
from activities.business.schema import order_events, orders
from activities.contracts.world import Order

DEMO_ORDERS = (
    Order(order_id="A-1001", amount_cents=4900, customer_email="ann@example.com"),
    Order(order_id="A-1002", amount_cents=1500, customer_email="bob@example.com"),
    Order(order_id="A-1003", amount_cents=12_000, customer_email="cleo@example.com"),
    Order(order_id="A-1004", amount_cents=899, customer_email="dev@example.com"),
    Order(order_id="A-1005", amount_cents=2500, customer_email="ann@example.com"),
)


class Orders(Protocol):
    """The shop's orders, as the tools read them; an order that does not exist raises ``OrderNotFoundError``."""

    def order(self, order_id: str) -> Order: ...

    def events(self, order_id: str) -> list[str]:
        """The order's event log, oldest first; an order nobody wrote about has none."""
        ...


class SqlOrders:
    """The embedded shop (``Orders``), with what operators and tests write."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def order(self, order_id: str) -> Order:
        with self.database.reader.connect() as db:
            row = db.execute(orders.select().where(orders.c.order_id == order_id)).first()
        if row is None:
            raise OrderNotFoundError(f"There is no order {order_id}")
        return _order(row)

    def events(self, order_id: str) -> list[str]:
        self.order(order_id)  # no such order is an error, not an empty log
        with self.database.reader.connect() as db:
            query = sa.select(order_events.c.event).where(order_events.c.order_id == order_id)
            return list(db.execute(query.order_by(order_events.c.id)).scalars())

    def stripe_payment(self, order_id: str) -> str | None:
        """The order's payment at Stripe, if it names one (``add``)."""
        with self.database.reader.connect() as db:
            row = db.execute(sa.select(orders.c.stripe_payment).where(orders.c.order_id == order_id)).first()
        if row is None:
            raise OrderNotFoundError(f"There is no order {order_id}")
        payment: str | None = row.stripe_payment
        return payment

    def add(self, order: Order, *, stripe_payment: str | None = None) -> None:
        """Add the order, or change its amount and customer if it exists; ``stripe_payment`` names its payment at
        Stripe (a PaymentIntent ``pi_...`` or a Charge ``ch_...``), kept as it was if not given."""
        row = order.model_dump() | ({"stripe_payment": stripe_payment} if stripe_payment is not None else {})
        statement = self.database.insert(orders).values(**row)
        changed = {name: statement.excluded[name] for name in row if name != "order_id"}
        with self.database.writer.begin() as db:
            db.execute(statement.on_conflict_do_update(index_elements=[orders.c.order_id], set_=changed))

    def seed(self, seeded: tuple[Order, ...] = DEMO_ORDERS) -> None:
        """Add the orders that are not there yet, leaving those that are as they are: safe on every start."""
        with self.database.writer.begin() as db:
            db.execute(self.database.insert(orders).on_conflict_do_nothing(), [o.model_dump() for o in seeded])

    def all(self) -> list[Order]:
        return [order for order, _payment in self.all_with_payments()]

    def all_with_payments(self) -> list[tuple[Order, str | None]]:
        """Every order, with its payment at Stripe if it names one: for operators."""
        with self.database.reader.connect() as db:
            rows = db.execute(orders.select().order_by(orders.c.order_id))
            return [(_order(row), row.stripe_payment) for row in rows]

    def add_event(self, order_id: str, event: str) -> None:
        with self.database.writer.begin() as db:
            db.execute(order_events.insert().values(order_id=order_id, event=event))


def _order(row: sa.Row[Any]) -> Order:
    return Order(
        order_id=row.order_id, amount_cents=row.amount_cents, customer_email=row.customer_email, currency=row.currency
    )
