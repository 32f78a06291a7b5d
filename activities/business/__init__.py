"""The business side: the outside systems the agent reads and acts on, each behind a port.

Each system is a small ``typing.Protocol``, what the activities ask of it and all they may assume, with an
embedded implementation behind it in one shared database (``database``, ``schema``), a SQLite file by
default, PostgreSQL when several workers share it:

- ``orders``: the shop's orders and their event logs (``Orders``, ``SqlOrders``);
- ``payments``: the payment provider's refunds under idempotency keys, with Stripe's rules, never past the
  charge, and settling an unknown outcome (``Payments``, ``SqlPayments``), and what was refunded
  without a person, counted against the limits across tickets whichever provider pays (``unattended``);
- ``paid_back``: what was paid back against an order, every kind of payout the tools declare together (refunds,
  store credit), read by every guard in the transaction that books a payout and by every report: never past the charge;
- ``credits``: store credit, vouchers issued on an order instead of a refund, once per key, counted against the
  limits across tickets like refunds (``StoreCredits``, ``SqlStoreCredits``), in this database whichever
  provider refunds;
- ``mail``: the outbox, one email per key (``Mail``, ``SqlOutbox``), delivered through a mail server
  (``smtp``) when given one;
- ``audit``: the workflow's audit trail (``AuditTrail``, ``SqlAuditTrail``);
- ``model_calls``: the model's call log (``ModelCalls``, ``SqlModelCalls``);
- ``blobs``: the content store's blobs (``activities.content_store.BlobBackend``, ``SqlBlobs``).

Payments and mail share one idempotency key ledger (``keys``); every port raises the same refusals
(``refusals``). ``Business`` puts the embedded implementations together over one database: the worker hands
each activity the ports it needs, and tests and operators read what was paid, mailed and written through it.
A real provider is another implementation of its port (``stripe_payments``, refunds through Stripe, keeping its
book and its closed keys in the same database), chosen where the worker's settings build the business
(``agent_worker.wiring``). Mail through SMTP keeps the outbox as its ledger
(SMTP has no idempotency keys), so it is the outbox with a relay (``mail_relay``), not a port of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

from activities.business.audit import SqlAuditTrail
from activities.business.blobs import SqlBlobs
from activities.business.credits import SqlStoreCredits
from activities.business.database import Database
from activities.business.keys import KeyLedger
from activities.business.mail import Relay, SqlOutbox
from activities.business.model_calls import SqlModelCalls
from activities.business.orders import SqlOrders
from activities.business.paid_back import KINDS
from activities.business.payments import SqlPayments
from activities.business.unattended import UnattendedLedger
from activities.tools import PayoutKind

if TYPE_CHECKING:
    from stripe import StripeClient

    from activities.business.stripe_payments import StripePayments

__all__ = ["Business", "Options"]


class Options(TypedDict, total=False):
    """What the business takes besides where its database is (``Business.at`` says what each does)."""

    key_ttl: timedelta
    kinds: Sequence[PayoutKind]
    clock: Callable[[], datetime]
    mail_relay: Relay | None
    stripe: StripeClient | None


@dataclass(frozen=True)
class Business:
    """The embedded outside systems over one database."""

    database: Database
    orders: SqlOrders
    payments: SqlPayments | StripePayments
    unattended: UnattendedLedger
    """What was refunded without a person, whichever provider paid it: counted by the payments, read by operators."""
    credits: SqlStoreCredits
    mail: SqlOutbox
    audit: SqlAuditTrail
    model_calls: SqlModelCalls
    blobs: SqlBlobs

    @classmethod
    def at(  # noqa: PLR0913 - keyword-only, one per rule or provider: grouped, they would be Settings again
        cls,
        url: str,
        *,
        key_ttl: timedelta = timedelta(hours=24),
        kinds: Sequence[PayoutKind] = KINDS,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        mail_relay: Relay | None = None,
        stripe: StripeClient | None = None,
    ) -> Business:
        """The business in the database at ``url``; idempotency keys live ``key_ttl``, every payout is checked
        against what was paid back of the order, each of the ``kinds`` of payout the tools declare (a test's
        registry may declare one more, booked in a table of its own), refunds go to Stripe through
        ``stripe`` if it is given, and the outbox delivers through ``mail_relay`` if one is given (else recording
        an email is sending it)."""
        database = Database(url, clock=clock)
        keys = KeyLedger(database, key_ttl)
        unattended = UnattendedLedger(database)
        orders = SqlOrders(database)
        payments: SqlPayments | StripePayments = SqlPayments(database, keys, unattended, kinds)
        store_credit = SqlStoreCredits(database, keys, unattended, kinds=kinds)
        if stripe is not None:
            from activities.business.stripe_payments import StripePayments  # noqa: PLC0415 - the SDK, when asked

            payments = StripePayments(stripe, database, keys, orders, unattended, kinds=kinds)
            store_credit = SqlStoreCredits(database, keys, unattended, payments.at_stripe, kinds)  # Stripe's word
        return cls(
            database=database,
            orders=orders,
            payments=payments,
            unattended=unattended,
            credits=store_credit,
            mail=SqlOutbox(database, keys, mail_relay),
            audit=SqlAuditTrail(database),
            model_calls=SqlModelCalls(database),
            blobs=SqlBlobs(database),
        )

    @classmethod
    def sqlite(cls, path: Path, **options: Unpack[Options]) -> Business:
        """The business in a SQLite file, created with its folder on ``create``."""
        return cls.at(f"sqlite:///{path}", **options)

    def create(self, *, seed_demo_orders: bool = True) -> Business:
        """Migrate the schema to the newest revision and seed the demo orders on first use; safe to call by several
        processes at once. For what owns the schema: ``agent-worker migrate``, the dev stack, tests; a worker opens
        the business with ``ready``."""
        self.database.migrate()
        if seed_demo_orders:
            self.orders.seed()
        return self

    def ready(self) -> Business:
        """The business as a worker or an operator's command starts on it: a SQLite file migrated, a database
        server's schema checked (``Database.ready``); never seeded."""
        self.database.ready()
        return self

    def close(self) -> None:
        self.database.close()

    def __str__(self) -> str:
        return str(self.database)
