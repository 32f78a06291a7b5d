"""The payment provider: refunds under idempotency keys, the refund-total guard, and settling a refund whose
outcome is unknown.

``Payments`` is the port: what the tool activities ask of a provider, and all they may assume. Every
implementation keeps Stripe's idempotency rules, because that is the contract real providers offer and the
one a retried activity relies on:

- the same key with the same request pays nothing and returns the first result (same refund number, so
  the model and the customer see the same text as without the crash);
- the same key with another request is refused;
- keys expire (24 hours by default), after which a repeat is a new request;
- a refund that would take what was paid back against an order (refunds, store credit and every other kind of
  payout the tools declare, together, ``activities.business.paid_back``) above what was charged is refused, checked
  in the transaction that books it. Always: a provider that pays past the charge, as the crash tests show what
  orchestration alone does, is built by the tests (``tests/support/demonstrations.py``), never switched on here.

And the limits across tickets, which no provider has a word for: a refund nobody approved (a request with
``limits``) is checked against what its customer and the desk were refunded without a person in the last 24
hours, and counted, in the worker's own database (``activities.business.unattended``) and in the transaction
that claims its key, so two tickets at once cannot both pass under a cap; one that would pass a limit pays
nothing (``NeedsApprovalError``). A repeat under its key is the first request's: it returns the first receipt,
is not counted again, and is not judged by limits again.

And one rule Stripe has no word for, which the workflow's reconciliation needs: a key settled as never paid
is closed, and refuses every later request (``settle_refund``). ``tests/test_payments_contract.py`` holds
the rules any implementation must pass, through the port alone.

``SqlPayments`` is the embedded provider, in the business database: its charges are the orders' amounts
(it shares the shop's database), its refunds the ``refunds`` table, its keys the shared key ledger.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from activities.business.audit import record_payout
from activities.business.database import Database
from activities.business.keys import KeyLedger
from activities.business.paid_back import KINDS, paid_back, said
from activities.business.refusals import IdempotencyConflictError
from activities.business.schema import idempotency_keys, refunds
from activities.business.unattended import UnattendedLedger
from activities.contracts.world import Charge, RefundReceipt, RefundRequest
from activities.tools import REFUND, PayoutKind


class Payments(Protocol):
    """The payment provider, as the tools use it. Calls are synchronous (the activities run them in a thread)
    and raise the refusals of ``activities.business.refusals``."""

    def refund(self, request: RefundRequest, in_force: str | None = None) -> RefundReceipt:
        """Pay ``request`` back, once per idempotency key: a repeat of the same request under its key pays
        nothing and returns the first receipt, ``replayed``. Refused: another request under the key
        (``IdempotencyConflictError``), a closed key (``KeyClosedError``), more than is left of the charge after
        every payout of the order, refunds and store credit alike (``RefundExceedsChargeError``), no such order
        (``OrderNotFoundError``), a refund without a person judged by another money policy than ``in_force``, the
        booking worker's (``PolicyChangedError``: nothing paid, judge it again), or that would pass one of its
        ``limits`` (``NeedsApprovalError``: nothing paid, a person may approve it)."""
        ...

    def settle_refund(self, key: str) -> RefundReceipt | None:
        """How a refund whose outcome is unknown is made final: the refund paid under ``key``, or None, in
        which case the key is closed at the same moment, so that an attempt still running somewhere (a
        thread that cannot be cancelled, a request in flight) is refused when it gets here. Either the
        refund came first and is returned, or the key closed first and the refund never pays."""
        ...

    def charge(self, order_id: str) -> Charge:
        """What was charged for the order and how much of it has been paid back so far, by anyone and by every
        kind of payout (refunds and store credit together): the provider's word on the charge and its refunds,
        which is the truth about money whatever the shop's records say, beside what only the worker's database
        pays back. Refused: no such order or no payment of it (``OrderNotFoundError``)."""
        ...


@dataclass(frozen=True)
class RefundFingerprint:
    """What a key's first refund asked for, kept in the key ledger so the key is refused for any other refund.

    It is stored as text in ``idempotency_keys.request`` (``refund A-1001 4900``), beside the fingerprints of
    emails and of settlements, which are not refunds'. The text is part of the contract with databases
    already written (a key taken before an upgrade must still hold), so it is written, read and matched here
    only."""

    order_id: str
    amount_cents: int

    PREFIX: ClassVar[str] = "refund "

    @classmethod
    def of(cls, request: RefundRequest) -> RefundFingerprint:
        return cls(order_id=request.order_id, amount_cents=request.amount_cents)

    def to_text(self) -> str:
        return f"{self.PREFIX}{self.order_id} {self.amount_cents}"

    @classmethod
    def from_text(cls, text: str) -> RefundFingerprint | None:
        """The fingerprint ``to_text`` wrote; None for what another kind of request wrote."""
        if not text.startswith(cls.PREFIX):
            return None
        order_id, _, amount = text.removeprefix(cls.PREFIX).rpartition(" ")
        return cls(order_id=order_id, amount_cents=int(amount))

    @classmethod
    def stored_in(cls, column: sa.ColumnElement[str]) -> sa.ColumnElement[bool]:
        """The SQL condition that a stored request is a refund's: a key an email or a settlement took names
        no refund, even if its ``result_id`` happens to equal one's."""
        return column.startswith(cls.PREFIX)


class SqlPayments:
    """The embedded payment provider (``Payments``). A refund is checked against what was paid back of the order,
    every kind of payout in ``kinds`` (the tools' declarations); a refund without a person is counted
    (``unattended``) in the transaction that pays it."""

    def __init__(
        self,
        database: Database,
        keys: KeyLedger,
        unattended: UnattendedLedger,
        kinds: Sequence[PayoutKind] = KINDS,
    ) -> None:
        self.database = database
        self.keys = keys
        self.unattended = unattended
        self.kinds = kinds

    def __str__(self) -> str:
        return "embedded"

    def refund(self, request: RefundRequest, in_force: str | None = None) -> RefundReceipt:
        asked = RefundFingerprint.of(request)
        with self.database.writer.begin() as db:
            first = self.keys.claim(db, request.idempotency_key, asked.to_text())
            if first is not None:
                return self._first_refund(db, request.idempotency_key, asked, first)
            # The order's row stays locked until the refund is booked: refunds and store credit of one order are
            # booked one at a time, each checked against what the ones before paid back.
            book = paid_back(db, request.order_id, self.kinds, lock=True)
            book.refuse_past_charge(request.amount_cents, "to refund")
            counted = self.unattended.count(db, request, in_force)  # refused before a refund number is taken
            refund_id = db.execute(
                refunds.insert().returning(refunds.c.id),
                {
                    "order_id": request.order_id,
                    "amount_cents": request.amount_cents,
                    "idempotency_key": request.idempotency_key,
                    "created_at": self.database.clock(),
                },
            ).scalar_one()
            self.keys.record(db, request.idempotency_key, refund_id)
            if counted is not None:
                self.unattended.keep(db, refund_id, reserved=counted)
            record_payout(self.database, db, request, REFUND, refund_id)
        return RefundReceipt(refund_id=refund_id, order_id=request.order_id, amount_cents=request.amount_cents)

    def _first_refund(self, db: Connection, key: str, asked: RefundFingerprint, first: sa.Row[Any]) -> RefundReceipt:
        """The receipt of the key's first request, if this is the same request; refused if not."""
        taken = RefundFingerprint.from_text(first.request)
        if taken != asked:
            used_for = (
                "another request"
                if taken is None
                else f"a refund of {said(db, taken.amount_cents, taken.order_id)} on {taken.order_id}"
            )
            raise IdempotencyConflictError(
                f"Idempotency key {key} was used for {used_for}, not {said(db, asked.amount_cents, asked.order_id)} on "
                f"{asked.order_id}"
            )
        row = db.execute(refunds.select().where(refunds.c.id == first.result_id)).one()
        return receipt(row, replayed=True)

    def settle_refund(self, key: str) -> RefundReceipt | None:
        """The key is held first (a racing refund under it commits before this reads), and closed in the same
        transaction that finds nothing under it."""
        with self.database.writer.begin() as db:
            self.keys.hold(db, key)
            found = _refund_under(db, key)
            if found is None:
                self.keys.close(db, key)
        return found

    def charge(self, order_id: str) -> Charge:
        """The embedded provider's charge of an order is the order's amount: it shares the shop's database; what
        was paid back is every kind of payout booked against it (``activities.business.paid_back``)."""
        with self.database.reader.connect() as db:
            book = paid_back(db, order_id, self.kinds)
        return Charge(amount_cents=book.charged_cents, refunded_cents=book.total_cents)

    def refunds(self, order_id: str | None = None) -> list[RefundReceipt]:
        """Every refund paid (of one order, if given), oldest first: for tests and operators."""
        return booked(self.database, order_id)


def _refund_under(db: Connection, key: str) -> RefundReceipt | None:
    row = db.execute(
        sa.select(refunds)
        .join(idempotency_keys, idempotency_keys.c.result_id == refunds.c.id)
        .where(idempotency_keys.c.key == key)
        .where(RefundFingerprint.stored_in(idempotency_keys.c.request))
    ).first()
    return None if row is None else receipt(row, replayed=True)


def booked(database: Database, order_id: str | None = None) -> list[RefundReceipt]:
    """Every row of ``refunds`` (of one order, if given), oldest first, whichever provider paid it."""
    query = refunds.select().order_by(refunds.c.id)
    if order_id is not None:
        query = query.where(refunds.c.order_id == order_id)
    with database.reader.connect() as db:
        return [receipt(row) for row in db.execute(query)]


def receipt(row: sa.Row[Any], *, replayed: bool = False) -> RefundReceipt:
    """The receipt of a row of ``refunds``, whichever provider paid it."""
    return RefundReceipt(
        refund_id=row.id,
        order_id=row.order_id,
        amount_cents=row.amount_cents,
        replayed=replayed,
        provider_refund_id=row.provider_refund_id,
        status=row.status,
    )
