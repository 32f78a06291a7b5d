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
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from activities.business.database import Database
from activities.business.refusals import NeedsApprovalError
from activities.business.schema import unattended_refunds
from activities.contracts.fields import money, normalised_address
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
    """What was refunded without a person in the window: the amount, and how many refunds."""

    cents: int = 0
    refunds: int = 0


class UnattendedLedger:
    """The count of refunds without a person, per customer and for the desk, in the business database."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def count(self, db: Connection, request: RefundRequest) -> int | None:
        """Check ``request`` against its limits and count it, in the caller's transaction: the row written, a
        reservation until ``keep`` names its refund, or None for a refund a person approved (no limits), which
        is neither checked nor counted. Refused, counting nothing: a refund that would pass a limit
        (``NeedsApprovalError``); the caller's transaction must then end without paying."""
        limits = request.limits
        if limits is None:
            return None
        assert request.customer_email is not None  # RefundRequest refuses limits without a customer
        customer = normalised_address(request.customer_email)
        if db.dialect.name == "postgresql":
            db.execute(sa.select(sa.func.pg_advisory_xact_lock(DESK_LOCK)))
        now = self.database.clock()
        theirs, desk = _totals(db, now, customer), _totals(db, now)
        met = breaches(limits, customer, theirs, desk, request.amount_cents)
        if met:
            raise NeedsApprovalError([reason for _field, reason in met], [field for field, _reason in met])
        row: int = db.execute(
            unattended_refunds.insert().returning(unattended_refunds.c.id),
            {"customer": customer, "amount_cents": request.amount_cents, "counted_at": now,
             "idempotency_key": request.idempotency_key},
        ).scalar_one()  # fmt: skip
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


def breaches(limits: Limits, customer: str, theirs: Totals, desk: Totals, amount_cents: int) -> list[tuple[str, str]]:
    """The limits a refund of ``amount_cents`` without a person would pass, given what counts already: each as
    the ``Limits`` field and the words an approval request cites, the customer's before the desk's."""
    whose = f"{customer}'s {COUNTED}"
    met = []
    most = limits.customer_refunds_per_day
    if most is not None and theirs.refunds + 1 > most:
        refunds = "refund" if most == 1 else "refunds"
        met.append(("customer_refunds_per_day", f"{whose}: {theirs.refunds} of {most} {refunds} already"))
    for field, cap, before, who in (
        ("customer_cents_per_day", limits.customer_cents_per_day, theirs.cents, whose),
        ("desk_cents_per_day", limits.desk_cents_per_day, desk.cents, f"the desk's {COUNTED}"),
    ):
        if cap is not None and before + amount_cents > cap:
            met.append((field, f"{who}: {money(before + amount_cents)} of {money(cap)} with this one"))
    return met


def _totals(db: Connection, now: datetime, customer: str | None = None) -> Totals:
    """What counts at ``now``: rows written in the last 24 hours (of ``customer``, if given), kept or reserved."""
    amount = sa.func.coalesce(sa.func.sum(unattended_refunds.c.amount_cents), 0)
    query = sa.select(amount, sa.func.count()).where(unattended_refunds.c.counted_at > now - WINDOW)
    if customer is not None:
        query = query.where(unattended_refunds.c.customer == customer)
    cents, refunds = db.execute(query).one()
    return Totals(cents=int(cents), refunds=int(refunds))


def _open(reserved: int | None, key: str | None) -> sa.ColumnElement[bool]:
    """Reservations not yet kept: the one written as ``reserved``, and those under ``key``."""
    which = [unattended_refunds.c.id == reserved] if reserved is not None else []
    if key is not None:
        which.append(unattended_refunds.c.idempotency_key == key)
    return sa.and_(unattended_refunds.c.refund_id.is_(None), sa.or_(sa.false(), *which))
