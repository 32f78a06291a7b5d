"""What was refunded without a person, counted where refunds are booked, against the limits across tickets.

A ticket's approval rules see one ticket. A customer with six orders of 19.00 opens six tickets, each under the
approval limit and each about another order, and only a count across tickets notices. The count lives in the
business database beside the refunds (``unattended_refunds``), and a refund nobody approved is checked against
it and added to it in the transaction that books it: two tickets at the same moment cannot both pass under a cap.

**One at a time.** Every refund counted is in its customer's total and in the desk's, so any counted refund
changes a total that every other check reads: whatever the limits, counting takes one lock, the desk's, before
it reads. On PostgreSQL that is a transaction-scoped advisory lock (``DESK_LOCK``), released at commit; each
statement after it reads what the holder before committed (READ COMMITTED takes a fresh snapshot per statement),
so the totals are exact. On SQLite the writer's ``BEGIN IMMEDIATE`` already keeps every other writer out. Locks
per customer would add nothing, since the desk's total covers every customer; a refund a person approved is
neither checked nor counted, and takes no lock.

**Reserved, kept, released.** A row counts from the moment it is written, for 24 hours. It is written as a
*reservation* (no ``refund_id``): ``keep`` links it to the refund once booked, ``release`` deletes it when the
provider refused for good, and an unknown outcome leaves it counted until the refund is settled. The embedded
provider does all of it in the one transaction that pays. A provider whose answer comes over the network
(Stripe) cannot hold a transaction open across it, so it reserves in the transaction that claims the key,
before it asks, and keeps or releases in the one that books the answer. Money that may have been paid counts:
the safe side.

**Customers** are their addresses as ``normalised_address`` writes them, so ``Ann@Example.com`` and
``ann@example.com`` are one customer here as they are one mailbox to the rest of the agent.

**Currencies.** The policy has no exchange rates: a limit counts the smallest unit of whatever currency the order
is in, and a total adds the smallest units of every currency counted (JPY 1,000 and USD 10.00 are 2,000), which is
stricter than a count per currency. Each row keeps its order's currency (the shop's record of it), so a reason
names every amount in its own currency and decimals: ``JPY 1,500 of JPY 1,000 with this one``, and where the
total mixes currencies, each currency's part and the sum in smallest units that met the limit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from activities.business.database import Database
from activities.business.refusals import NeedsApprovalError, PolicyChangedError
from activities.business.schema import orders, unattended_refunds
from activities.contracts.fields import amount, normalised_address
from activities.contracts.policy import Limits
from activities.contracts.world import RefundRequest

WINDOW = timedelta(hours=24)
"""How long a refund without a person counts: a rolling day, not a calendar one."""
DESK_LOCK = 0x6361_7073_6465_736B  # "capsdesk"
"""The advisory lock every counting transaction takes on PostgreSQL. It is the database's, not a schema's: two
desks sharing one PostgreSQL database in two schemas wait for each other's counts, which costs only time."""
COUNTED = "refunds without a person in the last 24 hours"


@dataclass(frozen=True)
class Totals:
    """What was refunded without a person in the window: the amount (the smallest units of every currency added
    together, as the limits count them), and how many refunds; and the amount per currency, for the words a
    reason cites (None: rows counted before rows kept their currency)."""

    cents: int = 0
    refunds: int = 0
    by_currency: Mapping[str | None, int] = dataclasses.field(default_factory=dict, compare=False)

    def plus(self, amount_cents: int, currency: str | None) -> Totals:
        """These totals with one more refund counted, of ``amount_cents`` in ``currency``."""
        parts = {**self.by_currency, currency: self.by_currency.get(currency, 0) + amount_cents}
        return Totals(cents=self.cents + amount_cents, refunds=self.refunds + 1, by_currency=parts)


class UnattendedLedger:
    """The count of refunds without a person, per customer and for the desk, in the business database."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def count(self, db: Connection, request: RefundRequest, in_force: str | None = None) -> int | None:
        """Check ``request`` against its limits and count it, in the caller's transaction: the row written, a
        reservation until ``keep`` names its refund, or None for a refund a person approved (no limits), which
        is neither checked nor counted. Refused, counting nothing: a refund judged by another money policy than
        ``in_force``, the booking worker's (``PolicyChangedError``), and one that would pass a limit
        (``NeedsApprovalError``); the caller's transaction must then end without paying."""
        limits = request.limits
        if limits is None:
            return None
        if request.policy is not None and request.policy != in_force:  # a booking that cannot tell pays nothing
            raise PolicyChangedError(request.policy, in_force or "no policy")
        assert request.customer_email is not None  # RefundRequest refuses limits without a customer
        customer = normalised_address(request.customer_email)
        if db.dialect.name == "postgresql":
            db.execute(sa.select(sa.func.pg_advisory_xact_lock(DESK_LOCK)))
        now = self.database.clock()
        currency = db.execute(sa.select(orders.c.currency).where(orders.c.order_id == request.order_id)).scalar()
        theirs, desk = _totals(db, now, customer), _totals(db, now)
        met = breaches(limits, theirs, desk, request.amount_cents)
        if met:
            after = {"customer": theirs, "desk": desk}
            with_this = {whose: totals.plus(request.amount_cents, currency) for whose, totals in after.items()}
            said = [reason(field, limits, customer, with_this[field.partition("_")[0]], currency) for field in met]
            raise NeedsApprovalError(said, met)
        row: int = db.execute(
            unattended_refunds.insert().returning(unattended_refunds.c.id),
            {
                "customer": customer,
                "amount_cents": request.amount_cents,
                "currency": currency,
                "counted_at": now,
                "idempotency_key": request.idempotency_key,
            },
        ).scalar_one()
        return row

    def keep(self, db: Connection, refund_id: int, *, reserved: int | None = None, key: str | None = None) -> None:
        """The reservation ``reserved``, and any still open under ``key``, became the refund ``refund_id``."""
        db.execute(unattended_refunds.update().where(_open(reserved, key)).values(refund_id=refund_id))

    def release(self, db: Connection, *, reserved: int | None = None, key: str | None = None) -> None:
        """The provider refused for good: the reservation ``reserved``, and any still open under ``key``, no
        longer count. A reservation already kept stays."""
        db.execute(unattended_refunds.delete().where(_open(reserved, key)))

    def totals(self, customer: str | None = None) -> Totals:
        """What counts now: ``customer``'s (any spelling of their address), or the desk's; for operators and tests."""
        with self.database.reader.connect() as db:
            return _totals(db, self.database.clock(), None if customer is None else normalised_address(customer))


def breaches(limits: Limits, theirs: Totals, desk: Totals, amount_cents: int) -> list[str]:
    """The limits a refund of ``amount_cents`` without a person would pass, given what counts already: the
    ``Limits`` fields, the customer's before the desk's."""
    met = []
    most = limits.customer_refunds_per_day
    if most is not None and theirs.refunds + 1 > most:
        met.append("customer_refunds_per_day")
    for field, cap, before in (
        ("customer_cents_per_day", limits.customer_cents_per_day, theirs.cents),
        ("desk_cents_per_day", limits.desk_cents_per_day, desk.cents),
    ):
        if cap is not None and before + amount_cents > cap:
            met.append(field)
    return met


def reason(field: str, limits: Limits, customer: str, with_this: Totals, currency: str | None) -> str:
    """The words an approval request cites for the limit ``field`` met by a refund in ``currency``, with figures:
    ``with_this`` is what would count with it, the customer's or the desk's as ``field`` says. Every amount in its
    own currency; where the total mixes currencies, each one's part, then the sum of smallest units that met the
    limit, which has no currency of its own."""
    who = f"{customer}'s {COUNTED}" if field.startswith("customer_") else f"the desk's {COUNTED}"
    if field == "customer_refunds_per_day":
        most = limits.customer_refunds_per_day
        return f"{who}: {with_this.refunds - 1} of {most} {'refund' if most == 1 else 'refunds'} already"
    cap: int = getattr(limits, field)
    parts = with_this.by_currency
    if len(parts) == 1:
        return f"{who}: {amount(with_this.cents, currency)} of {amount(cap, currency)} with this one"
    first = sorted(parts, key=lambda code: (code != currency, code is None, code or ""))
    each = ", ".join(amount(parts[code], code) for code in first[:-1]) + f" and {amount(parts[first[-1]], first[-1])}"
    in_this = f" ({amount(cap, currency)} in this refund's currency)" if currency else ""
    return (
        f"{who}: {each} with this one; the limit adds the smallest units of every currency: "
        f"{with_this.cents:,} of {cap:,}{in_this}"
    )


def _totals(db: Connection, now: datetime, customer: str | None = None) -> Totals:
    """What counts at ``now``: rows written in the last 24 hours (of ``customer``, if given), kept or reserved."""
    query = (
        sa.select(unattended_refunds.c.currency, sa.func.sum(unattended_refunds.c.amount_cents), sa.func.count())
        .where(unattended_refunds.c.counted_at > now - WINDOW)
        .group_by(unattended_refunds.c.currency)
    )
    if customer is not None:
        query = query.where(unattended_refunds.c.customer == customer)
    rows = db.execute(query).all()
    by_currency = {currency: int(cents) for currency, cents, _refunds in rows}
    return Totals(cents=sum(by_currency.values()), refunds=sum(int(n) for *_, n in rows), by_currency=by_currency)


def _open(reserved: int | None, key: str | None) -> sa.ColumnElement[bool]:
    """Reservations not yet kept: the one written as ``reserved``, and those under ``key``."""
    which = [unattended_refunds.c.id == reserved] if reserved is not None else []
    if key is not None:
        which.append(unattended_refunds.c.idempotency_key == key)
    return sa.and_(unattended_refunds.c.refund_id.is_(None), sa.or_(sa.false(), *which))
