"""What was paid back against an order: one view of every kind of payout together, and the one rule about it,
that it never passes what the order was charged.

Money goes back to a customer in more than one way: a refund through the payment provider, store credit from
the worker's own database, and whatever kind comes next. Each kind is booked in a table of its own. When each
guard summed the tables it knew of, the refund guard knew only refunds: store credit of a whole order and then a
refund of it paid twice the charge, and ``lookup_order`` said nothing had been paid back, so nobody was asked
either. Here every kind the tools declare (``activities.tools.TOOLS.payout_kinds()``: each paying tool's
``PayoutKind`` names the table it is booked in) is summed, and every guard and every report reads them through
``paid_back``: a paying tool declared is counted everywhere at once, and there is no second list of kinds to keep in
step with the tools.

**Checked where it is booked.** ``paid_back(db, order_id, lock=True)`` locks the order's row for the rest of the
transaction (``SELECT ... FOR UPDATE`` on PostgreSQL; on SQLite the writer's ``BEGIN IMMEDIATE`` already keeps
every other writer out), and every payout of an order is booked in a transaction that took that lock before it
read the sum. Two tickets paying one order at once, by any tool and in any worker, are served one after the
other, and the second sees the first's payout. A check read in any other transaction (a lookup before the
payment) is advice for the workflow's rules, never the guard.

**The provider's word.** A payment provider that keeps its own book (Stripe) knows what it charged and every
refund of the charge, including those the worker never booked (one made in its dashboard, one whose answer was
lost), and knows nothing of store credit. ``PaidBack.reported_by`` puts its word on the charge and on refunds in
place of the worker's book, beside the payouts only the worker's database holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from activities.business.refusals import OrderNotFoundError, RefundExceedsChargeError
from activities.business.schema import orders
from activities.contracts.fields import DEFAULT_CURRENCY, amount
from activities.contracts.world import Charge
from activities.tools import TOOLS, PayoutKind

KINDS: tuple[PayoutKind, ...] = TOOLS.payout_kinds()
"""The product's kinds of payout, as its tools declare them: what the business counts unless given others."""


@dataclass(frozen=True)
class PaidBack:
    """What an order was charged and what was paid back against it, per kind of payout, as one transaction read
    them."""

    order_id: str
    charged_cents: int
    currency: str | None
    by_kind: tuple[tuple[PayoutKind, int], ...]

    @property
    def total_cents(self) -> int:
        """Every kind together: what ``Charge.refunded_cents`` and ``lookup_order`` report."""
        return sum(cents for _kind, cents in self.by_kind)

    @property
    def besides_provider(self) -> int:
        """What was paid back otherwise than through the payment provider (store credit): what only the worker's
        database knows of, whichever provider refunds."""
        return sum(cents for kind, cents in self.by_kind if not kind.through_provider)

    def reported_by(self, charge: Charge) -> PaidBack:
        """This order as a provider with a book of its own reports it: its charge, and its refunded total in place
        of what the worker booked as paid through it (the provider's word is the truth about money); the rest as
        the worker has it."""
        return replace(
            self,
            charged_cents=charge.amount_cents,
            currency=charge.currency or self.currency,
            by_kind=tuple((kind, charge.refunded_cents if kind.through_provider else c) for kind, c in self.by_kind),
        )

    def allows(self, amount_cents: int) -> bool:
        return self.total_cents + amount_cents <= self.charged_cents

    def refuse_past_charge(self, amount_cents: int, verb: str) -> None:
        """Refuse (``RefundExceedsChargeError``) paying back ``amount_cents`` more, which ``verb`` names ("to
        refund"), if it would take what was paid back past the charge; the refusal says what was paid, of each
        kind, in the order's currency."""
        if self.allows(amount_cents):
            return
        said = [f"{kind.plural} {self._amount(cents)}" for kind, cents in self.by_kind if cents]
        raise RefundExceedsChargeError(
            f"Refusing {verb} {self._amount(amount_cents)} on {self.order_id}: {self._amount(self.total_cents)} of "
            f"{self._amount(self.charged_cents)} is already paid back" + (f" ({', '.join(said)})" if said else "")
        )

    def _amount(self, units: int) -> str:
        return amount(units, self.currency)


def paid_back(db: Connection, order_id: str, kinds: Sequence[PayoutKind] = KINDS, *, lock: bool = False) -> PaidBack:
    """What the order was charged and what was paid back against it, every kind of payout in ``kinds`` (each summed
    from the table it declares it is booked in), as the worker's database has them; with ``lock``, the order's row
    is held until the transaction ends, so that a payout booked in it is checked against a sum no other payout can
    change. No such order: ``OrderNotFoundError``."""
    query = sa.select(orders.c.amount_cents, orders.c.currency).where(orders.c.order_id == order_id)
    order = db.execute(query.with_for_update() if lock else query).first()
    if order is None:
        raise OrderNotFoundError(f"There is no order {order_id}")
    if not kinds:
        return PaidBack(order_id, order.amount_cents, order.currency, by_kind=())
    ledgers = [sa.table(kind.ledger, sa.column("order_id"), sa.column("amount_cents")) for kind in kinds]
    sums = sa.select(
        *(
            sa.select(sa.func.coalesce(sa.func.sum(ledger.c.amount_cents), 0))
            .where(ledger.c.order_id == order_id)
            .scalar_subquery()
            for ledger in ledgers
        )
    )
    paid = db.execute(sums).one()
    return PaidBack(
        order_id=order_id,
        charged_cents=order.amount_cents,
        currency=order.currency,
        by_kind=tuple((kind, int(cents)) for kind, cents in zip(kinds, paid, strict=True)),
    )


def said(db: Connection, units: int, order_id: str) -> str:
    """An amount of ``order_id`` as a person reads it, in the order's currency (the default where the shop's record
    names none, or has no such order): for refusals written where no lookup is at hand."""
    currency = db.execute(sa.select(orders.c.currency).where(orders.c.order_id == order_id)).scalar()
    return amount(units, currency or DEFAULT_CURRENCY)
