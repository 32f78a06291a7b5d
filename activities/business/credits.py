"""Store credit: a voucher the shop issues on one of the customer's orders instead of a refund, kept in the
worker's own business database whichever payment provider refunds (no provider has a word for it).

``StoreCredits`` is the port: what the ``issue_store_credit`` tool and its settlement ask of the ledger. It keeps
the rules the workflow's payment rule relies on, as the payment provider does for refunds:

- once per idempotency key: a repeat of the same request under its key issues nothing and returns the first
  voucher, ``replayed``; another request under the key is refused (``IdempotencyConflictError``), and so is a
  key closed by a settlement (``KeyClosedError``);
- never more than is left of the order's charge after every payout of it, refunds and credits together
  (``RefundExceedsChargeError``), read and checked with the order's row locked in the transaction that issues
  the voucher (``activities.business.paid_back``); with Stripe as the provider, the charge and its refunds are
  Stripe's word, asked in that transaction, so a refund made in Stripe's dashboard or one whose answer was lost
  counts too;
- a credit nobody approved (a request with ``limits``) is checked against what its customer and the desk were
  paid back without a person in the last 24 hours, refunds and credits alike, and counted in the same
  transaction (``activities.business.unattended``); one that would pass a limit issues nothing
  (``NeedsApprovalError``);
- an unknown outcome is settled under its key (``settle``): the voucher issued under it, or None, the key closed
  in the same transaction so that a late attempt issues nothing.

``SqlStoreCredits`` is the embedded ledger: the ``store_credits`` table, and the key ledger payments and mail share
(a credit's key is fingerprinted ``store_credit <order> <amount>``, so it never names a refund or an email). A
credit's count against the limits is written in the transaction that issues it and named by the voucher's
``counted_id``; it is never a reservation waiting for an answer, so nothing releases it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from activities.business.audit import record_payout
from activities.business.database import Database
from activities.business.keys import KeyLedger
from activities.business.paid_back import KINDS, paid_back, said
from activities.business.refusals import IdempotencyConflictError
from activities.business.schema import idempotency_keys, store_credits
from activities.business.unattended import UnattendedLedger
from activities.contracts.world import Charge, RefundReceipt, RefundRequest
from activities.tools import STORE_CREDIT, PayoutKind

PREFIX = "store_credit "
"""How a credit's request is fingerprinted in the key ledger (``store_credit A-1001 500``)."""


class StoreCredits(Protocol):
    """The store credit ledger, as the tools use it. Calls are synchronous (the activities run them in a thread)
    and raise the refusals of ``activities.business.refusals``."""

    def issue(self, request: RefundRequest, in_force: str | None = None) -> RefundReceipt:
        """Issue a voucher for ``request``, once per idempotency key (the receipt's ``refund_id`` is the
        voucher's number)."""
        ...

    def settle(self, key: str) -> RefundReceipt | None:
        """The voucher issued under ``key``, or None, the key closed at the same moment."""
        ...


def _fingerprint(request: RefundRequest) -> str:
    return f"{PREFIX}{request.order_id} {request.amount_cents}"


class SqlStoreCredits:
    """The embedded store credit ledger (``StoreCredits``)."""

    def __init__(
        self,
        database: Database,
        keys: KeyLedger,
        unattended: UnattendedLedger,
        charges: Callable[[str], Charge] | None = None,
        kinds: Sequence[PayoutKind] = KINDS,
    ) -> None:
        self.kinds = kinds
        """Every kind of payout, as the tools declare them: what a voucher is checked against with the charge."""
        self.database = database
        self.keys = keys
        self.unattended = unattended
        self.charges = charges
        """The payment provider's own word on an order's charge and its refunds, where it keeps a book of its own
        (Stripe's, which knows refunds the worker never booked); None: the worker's database is the whole book
        (the embedded provider)."""

    def issue(self, request: RefundRequest, in_force: str | None = None) -> RefundReceipt:
        asked = _fingerprint(request)
        with self.database.writer.begin() as db:
            first = self.keys.claim(db, request.idempotency_key, asked)
            if first is not None:
                return self._first_credit(db, request, first)
            # The order's row stays locked until the voucher is booked: refunds and store credit of one order are
            # booked one at a time, each checked against what the ones before paid back.
            book = paid_back(db, request.order_id, self.kinds, lock=True)
            if self.charges is not None:
                book = book.reported_by(self.charges(request.order_id))
            book.refuse_past_charge(request.amount_cents, "to credit")
            counted = self.unattended.count(db, request, in_force)  # refused before a voucher number is taken
            credit_id: int = db.execute(
                store_credits.insert().returning(store_credits.c.id),
                {
                    "order_id": request.order_id,
                    "amount_cents": request.amount_cents,
                    "idempotency_key": request.idempotency_key,
                    "created_at": self.database.clock(),
                    "counted_id": counted,
                },
            ).scalar_one()
            self.keys.record(db, request.idempotency_key, credit_id)
            record_payout(self.database, db, request, STORE_CREDIT, credit_id)
        return RefundReceipt(refund_id=credit_id, order_id=request.order_id, amount_cents=request.amount_cents)

    def _first_credit(self, db: Connection, request: RefundRequest, first: sa.Row[Any]) -> RefundReceipt:
        """The voucher of the key's first request, if this is the same request; refused if not."""
        if first.request != _fingerprint(request):
            raise IdempotencyConflictError(
                f"Idempotency key {request.idempotency_key} was used for another request, not store credit of "
                f"{said(db, request.amount_cents, request.order_id)} on {request.order_id}"
            )
        row = db.execute(store_credits.select().where(store_credits.c.id == first.result_id)).one()
        return _receipt(row, replayed=True)

    def settle(self, key: str) -> RefundReceipt | None:
        """The key is held first (a racing credit under it commits before this reads), and closed in the same
        transaction that finds nothing under it."""
        with self.database.writer.begin() as db:
            self.keys.hold(db, key)
            row = db.execute(
                sa.select(store_credits)
                .join(idempotency_keys, idempotency_keys.c.result_id == store_credits.c.id)
                .where(idempotency_keys.c.key == key, idempotency_keys.c.request.startswith(PREFIX))
            ).first()
            if row is None:
                self.keys.close(db, key)
                return None
        return _receipt(row, replayed=True)

    def credits(self, order_id: str | None = None) -> list[RefundReceipt]:
        """Every voucher issued (of one order, if given), oldest first: for tests and operators."""
        query = store_credits.select().order_by(store_credits.c.id)
        if order_id is not None:
            query = query.where(store_credits.c.order_id == order_id)
        with self.database.reader.connect() as db:
            return [_receipt(row) for row in db.execute(query)]


def _receipt(row: sa.Row[Any], *, replayed: bool = False) -> RefundReceipt:
    return RefundReceipt(refund_id=row.id, order_id=row.order_id, amount_cents=row.amount_cents, replayed=replayed)
