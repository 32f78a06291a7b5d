"""The business side: orders, the payment provider's refunds, sent emails, the audit trail, and the model's
call log.

It is a real database that workers, tests and operators share, so a crash test can count what was paid
from outside the process that paid it: a SQLite file by default, PostgreSQL when several workers on
several machines share it. One SQLAlchemy Core schema serves both. The payment side keeps Stripe's
idempotency rules, because that is the contract real providers offer and the one a retried activity
relies on:

- the same key with the same request pays nothing and returns the first result (same refund number, so
  the model and the customer see the same text as without the crash);
- the same key with another request is refused;
- keys expire (24 hours by default), after which a repeat is a new request;
- a refund that would take an order's refunded total above what was charged is refused (a setting, on
  by default; the crash tests switch it off to show what orchestration alone does).

Two workers racing one key must not both pay. Each key is a row in ``idempotency_keys`` under a primary
key: the first insert wins, the loser's insert does nothing (on PostgreSQL it waits for the winner to
commit), and the loser reads the winner's result back. No check-then-insert race is left to chance.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine

from activities import migrations
from activities.contracts import (
    AuditEntry,
    EmailReceipt,
    EmailRequest,
    Order,
    OrderLookup,
    RefundReceipt,
    RefundRequest,
    money,
)

metadata = sa.MetaData()
orders = sa.Table(
    "orders", metadata,
    sa.Column("order_id", sa.Text, primary_key=True),
    sa.Column("amount_cents", sa.Integer, sa.CheckConstraint("amount_cents >= 0"), nullable=False),
    sa.Column("customer_email", sa.Text, nullable=False),
)  # fmt: skip
refunds = sa.Table(
    "refunds", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("order_id", sa.Text, sa.ForeignKey("orders.order_id"), nullable=False, index=True),
    sa.Column("amount_cents", sa.Integer, sa.CheckConstraint("amount_cents > 0"), nullable=False),
    sa.Column("idempotency_key", sa.Text, index=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)  # fmt: skip
emails = sa.Table(
    "emails", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("to_address", sa.Text, nullable=False),
    sa.Column("subject", sa.Text, nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("idempotency_key", sa.Text, index=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)  # fmt: skip
idempotency_keys = sa.Table(
    "idempotency_keys", metadata,
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("request", sa.Text, nullable=False),  # what was asked the first time, to refuse another request
    sa.Column("result_id", sa.Integer),  # the refund or email it produced, once committed
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("closed_at", sa.DateTime(timezone=True)),  # settled as never paid: refused for ever, never expires
)  # fmt: skip
model_calls = sa.Table(
    "model_calls", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("ticket_id", sa.Text, nullable=False, index=True),
    sa.Column("step", sa.Integer, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)  # fmt: skip
audit_log = sa.Table(
    "audit_log", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("ticket_id", sa.Text, nullable=False, index=True),
    sa.Column("entry", sa.Text, nullable=False),
    sa.Column("idempotency_key", sa.Text, unique=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)  # fmt: skip
blobs = sa.Table(
    "blobs", metadata,
    sa.Column("key", sa.Text, primary_key=True),  # sha256:<hex> of the data: a key names one content forever
    sa.Column("data", sa.LargeBinary, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)  # fmt: skip
order_events = sa.Table(
    "order_events", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("order_id", sa.Text, sa.ForeignKey("orders.order_id"), nullable=False, index=True),
    sa.Column("event", sa.Text, nullable=False),
)  # fmt: skip

DEMO_ORDERS = (
    Order(order_id="A-1001", amount_cents=4900, customer_email="ann@example.com"),
    Order(order_id="A-1002", amount_cents=1500, customer_email="bob@example.com"),
    Order(order_id="A-1003", amount_cents=12_000, customer_email="cleo@example.com"),
    Order(order_id="A-1004", amount_cents=899, customer_email="dev@example.com"),
    Order(order_id="A-1005", amount_cents=2500, customer_email="ann@example.com"),
)


class OrderNotFoundError(LookupError):
    """No such order: asking again will not make one appear."""


class IdempotencyConflictError(ValueError):
    """A key was reused for a different request, which Stripe refuses rather than guess."""


class RefundExceedsChargeError(ValueError):
    """The refund would take the order's refunded total above what was charged."""


class KeyClosedError(ValueError):
    """Reconciliation settled this key as never paid: a late attempt under it must not pay."""


@dataclass(frozen=True)
class ModelCall:
    ticket_id: str
    step: int
    created_at: datetime


def engine_for(url: str, *, writer: bool = True) -> Engine:
    """An engine whose write transactions serialise: ``BEGIN IMMEDIATE`` on SQLite, row locks on PostgreSQL."""
    if not url.startswith("sqlite"):
        return sa.create_engine(url, pool_pre_ping=True)
    engine = sa.create_engine(url, connect_args={"timeout": 30}, poolclass=sa.pool.NullPool)

    @sa.event.listens_for(engine, "connect")
    def _autocommit_driver(dbapi: Any, _record: Any) -> None:
        dbapi.isolation_level = None  # let SQLAlchemy, not the driver, say when a transaction begins
        dbapi.execute("PRAGMA journal_mode = WAL")  # readers never wait for the writer; kept in the file

    @sa.event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        # A writer takes the lock at once, so two checks-then-writes cannot interleave.
        connection.exec_driver_sql("BEGIN IMMEDIATE" if writer else "BEGIN")

    return engine


class BusinessStore:
    """The business database; ``path`` for the SQLite default, ``url`` for anything SQLAlchemy can reach."""

    def __init__(
        self,
        path: Path | None = None,
        *,
        url: str | None = None,
        key_ttl: timedelta = timedelta(hours=24),
        refund_guard: bool = True,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if (path is None) == (url is None):
            raise ValueError("give the store a SQLite path or a database URL")
        self.path = path if path is not None else Path(url or "")
        self.url = url or f"sqlite:///{path}"
        self.key_ttl = key_ttl
        self.refund_guard = refund_guard
        self._clock = clock
        self._engine = engine_for(self.url)
        self._reader = engine_for(self.url, writer=False) if self.url.startswith("sqlite") else self._engine
        self._insert = postgresql.insert if self._engine.dialect.name == "postgresql" else sqlite.insert

    def close(self) -> None:
        """Close pooled connections (PostgreSQL keeps some open between calls)."""
        self._engine.dispose()
        self._reader.dispose()

    def __str__(self) -> str:
        """Where the store is, with any password hidden: safe to log."""
        return self._engine.url.render_as_string(hide_password=True)

    def create(self, *, seed_demo_orders: bool = True) -> BusinessStore:
        """Migrate the schema to the newest revision and seed the demo orders on first use; safe to call on every
        start, by several workers at once."""
        self.migrate(seed_demo_orders=seed_demo_orders)
        return self

    def migrate(self, *, seed_demo_orders: bool = False) -> str | None:
        """Upgrade the schema to the newest revision (creating it on a new database); return that revision."""
        if self._engine.dialect.name == "sqlite":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._engine.begin() as db:
            revision = migrations.upgrade(db)
            if seed_demo_orders:
                db.execute(self._insert(orders).on_conflict_do_nothing(), [o.model_dump() for o in DEMO_ORDERS])
        return revision

    # --- orders ---

    def add_order(self, order: Order) -> None:
        statement = self._insert(orders).values(**order.model_dump())
        with self._engine.begin() as db:
            db.execute(
                statement.on_conflict_do_update(
                    index_elements=[orders.c.order_id],
                    set_={
                        "amount_cents": statement.excluded.amount_cents,
                        "customer_email": statement.excluded.customer_email,
                    },
                )
            )

    def orders(self) -> list[Order]:
        with self._reader.connect() as db:
            return [_order(row) for row in db.execute(orders.select().order_by(orders.c.order_id))]

    def add_order_event(self, order_id: str, event: str) -> None:
        with self._engine.begin() as db:
            db.execute(order_events.insert().values(order_id=order_id, event=event))

    def order_events(self, order_id: str) -> list[str]:
        """The order's event log, oldest first; an order nobody wrote about has none."""
        self.order(order_id)  # no such order is an error, not an empty log
        with self._reader.connect() as db:
            query = sa.select(order_events.c.event).where(order_events.c.order_id == order_id)
            return list(db.execute(query.order_by(order_events.c.id)).scalars())

    def order(self, order_id: str) -> Order:
        with self._reader.connect() as db:
            row = db.execute(orders.select().where(orders.c.order_id == order_id)).first()
        if row is None:
            raise OrderNotFoundError(f"There is no order {order_id}")
        return _order(row)

    def look_up(self, order_id: str) -> OrderLookup:
        """The order and what has been refunded of it so far, read in one transaction."""
        refunded = sa.select(sa.func.coalesce(sa.func.sum(refunds.c.amount_cents), 0)).where(
            refunds.c.order_id == order_id
        )
        with self._reader.begin() as db:
            row = db.execute(orders.select().where(orders.c.order_id == order_id)).first()
            if row is None:
                raise OrderNotFoundError(f"There is no order {order_id}")
            return OrderLookup(**_order(row).model_dump(), refunded_cents=db.execute(refunded).scalar_one())

    # --- the payment provider ---

    def refund(self, request: RefundRequest) -> RefundReceipt:
        fingerprint = f"refund {request.order_id} {request.amount_cents}"
        with self._engine.begin() as db:
            if request.idempotency_key is not None:
                first = self._claim(db, request.idempotency_key, fingerprint)
                if first is not None:
                    return self._first_refund(db, request, first)
            order = db.execute(
                sa.select(orders.c.amount_cents).where(orders.c.order_id == request.order_id).with_for_update()
            ).first()  # the row lock serialises refunds of one order, so the guard's sum stays true
            if order is None:
                raise OrderNotFoundError(f"There is no order {request.order_id}")
            if self.refund_guard:
                refunded = db.execute(
                    sa.select(sa.func.coalesce(sa.func.sum(refunds.c.amount_cents), 0)).where(
                        refunds.c.order_id == request.order_id
                    )
                ).scalar_one()
                if refunded + request.amount_cents > order.amount_cents:
                    raise RefundExceedsChargeError(
                        f"Refusing to refund {money(request.amount_cents)} on {request.order_id}: "
                        f"{money(refunded)} of {money(order.amount_cents)} is already refunded"
                    )
            refund_id = db.execute(
                refunds.insert().returning(refunds.c.id),
                {"order_id": request.order_id, "amount_cents": request.amount_cents,
                 "idempotency_key": request.idempotency_key, "created_at": self._clock()},
            ).scalar_one()  # fmt: skip
            self._settle(db, request.idempotency_key, refund_id)
        return RefundReceipt(refund_id=refund_id, order_id=request.order_id, amount_cents=request.amount_cents)

    def _first_refund(self, db: Connection, request: RefundRequest, first: sa.Row[Any]) -> RefundReceipt:
        if first.request != f"refund {request.order_id} {request.amount_cents}":
            order_id, amount = first.request.split()[1:]
            raise IdempotencyConflictError(
                f"Idempotency key {request.idempotency_key} was used for a refund of {money(int(amount))} on "
                f"{order_id}, not {money(request.amount_cents)} on {request.order_id}"
            )
        row = db.execute(refunds.select().where(refunds.c.id == first.result_id)).one()
        return RefundReceipt(refund_id=row.id, order_id=row.order_id, amount_cents=row.amount_cents, replayed=True)

    def refund_by_key(self, key: str) -> RefundReceipt | None:
        """What the provider recorded under a key, if anything (expired or not: it is the truth either way)."""
        with self._reader.connect() as db:
            return self._refund_under(db, key)

    def settle_refund(self, key: str) -> RefundReceipt | None:
        """How a refund whose outcome is unknown is made final: the refund paid under ``key``, or None, in
        which case the key is closed in the same transaction, so that an attempt still running somewhere
        (a thread that cannot be cancelled, a request in flight) is refused when it gets here. Either the
        refund committed first and is returned, or the key closed first and the refund never pays."""
        with self._engine.begin() as db:
            self._insert_key(db, key, "", self._clock())  # waits for a racing claim of the key to commit
            found = self._refund_under(db, key)
            if found is None:
                db.execute(
                    idempotency_keys.update()
                    .where(idempotency_keys.c.key == key, idempotency_keys.c.closed_at.is_(None))
                    .values(closed_at=self._clock())
                )
        return found

    def _refund_under(self, db: Connection, key: str) -> RefundReceipt | None:
        row = db.execute(
            sa.select(refunds)
            .join(idempotency_keys, idempotency_keys.c.result_id == refunds.c.id)
            .where(idempotency_keys.c.key == key)
            .where(idempotency_keys.c.request.startswith("refund "))
        ).first()
        if row is None:
            return None
        return RefundReceipt(refund_id=row.id, order_id=row.order_id, amount_cents=row.amount_cents, replayed=True)

    # --- mail ---

    def send_email(self, request: EmailRequest) -> EmailReceipt:
        fingerprint = f"email {request.to}\n{request.subject}\n{request.body}"
        with self._engine.begin() as db:
            first = self._claim(db, request.idempotency_key, fingerprint)
            if first is not None:
                if first.request != fingerprint:
                    raise IdempotencyConflictError(
                        f"Idempotency key {request.idempotency_key} was used for another email"
                    )
                return EmailReceipt(email_id=first.result_id, to=request.to, replayed=True)
            email_id = db.execute(
                emails.insert().returning(emails.c.id),
                {"to_address": request.to, "subject": request.subject, "body": request.body,
                 "idempotency_key": request.idempotency_key, "created_at": self._clock()},
            ).scalar_one()  # fmt: skip
            self._settle(db, request.idempotency_key, email_id)
        return EmailReceipt(email_id=email_id, to=request.to)

    # --- idempotency keys ---

    def _claim(self, db: Connection, key: str, fingerprint: str) -> sa.Row[Any] | None:
        """Take the key for this request, or return the live row of whoever took it first.

        The insert does nothing on a conflict (on PostgreSQL it first waits for a racing transaction to
        commit). An expired key is taken over in one conditional update, so two late repeats cannot both
        count as new."""
        now = self._clock()
        if self._insert_key(db, key, fingerprint, now):
            return None
        expired = db.execute(
            idempotency_keys.update()
            .where(idempotency_keys.c.key == key, idempotency_keys.c.created_at <= self._cutoff())
            .where(idempotency_keys.c.closed_at.is_(None))
            .values(request=fingerprint, result_id=None, created_at=now)
            .returning(idempotency_keys.c.key)
        ).first()
        if expired is not None:
            return None
        row = db.execute(idempotency_keys.select().where(idempotency_keys.c.key == key)).one()
        if row.closed_at is not None:
            raise KeyClosedError(
                f"Idempotency key {key} was settled as not paid at {row.closed_at:%Y-%m-%d %H:%M:%S}: "
                "nothing is paid under it any more"
            )
        return row

    def _insert_key(self, db: Connection, key: str, fingerprint: str, now: datetime) -> bool:
        """Take a new key; False if it exists (on PostgreSQL, after waiting for a racing insert to commit)."""
        claimed = db.execute(
            self._insert(idempotency_keys)
            .values(key=key, request=fingerprint, created_at=now)
            .on_conflict_do_nothing(index_elements=[idempotency_keys.c.key])
            .returning(idempotency_keys.c.key)  # rowcount is not reliable across drivers; a returned row is
        ).first()
        return claimed is not None

    def _settle(self, db: Connection, key: str | None, result_id: int) -> None:
        if key is not None:
            db.execute(idempotency_keys.update().where(idempotency_keys.c.key == key).values(result_id=result_id))

    # --- content-addressed blobs (large tool results, conversation snapshots) ---

    def put_blob(self, key: str, data: bytes) -> None:
        """Keep ``data`` under its content key; storing the same content again changes nothing."""
        with self._engine.begin() as db:
            db.execute(
                self._insert(blobs)
                .values(key=key, data=data, created_at=self._clock())
                .on_conflict_do_nothing(index_elements=[blobs.c.key])
            )

    def get_blob(self, key: str) -> bytes | None:
        with self._reader.connect() as db:
            data: bytes | None = db.execute(sa.select(blobs.c.data).where(blobs.c.key == key)).scalar()
        return data

    # --- the audit trail ---

    def audit(self, entry: AuditEntry) -> None:
        """Write an audit entry once per key: a retried activity does not write it twice."""
        with self._engine.begin() as db:
            db.execute(
                self._insert(audit_log)
                .values(ticket_id=entry.ticket_id, entry=entry.entry, idempotency_key=entry.idempotency_key,
                        created_at=self._clock())
                .on_conflict_do_nothing(index_elements=[audit_log.c.idempotency_key])
            )  # fmt: skip

    def audit_log(self, ticket_id: str | None = None) -> list[str]:
        query = sa.select(audit_log.c.entry).order_by(audit_log.c.id)
        if ticket_id is not None:
            query = query.where(audit_log.c.ticket_id == ticket_id)
        with self._reader.connect() as db:
            return list(db.execute(query).scalars())

    # --- the model's call log, so tests and operators can count calls ---

    def record_model_call(self, ticket_id: str, step: int) -> None:
        with self._engine.begin() as db:
            db.execute(model_calls.insert().values(ticket_id=ticket_id, step=step, created_at=self._clock()))

    def model_calls(self, ticket_id: str) -> list[ModelCall]:
        with self._reader.connect() as db:
            rows = db.execute(
                model_calls.select().where(model_calls.c.ticket_id == ticket_id).order_by(model_calls.c.id)
            )
            return [ModelCall(row.ticket_id, row.step, row.created_at) for row in rows]

    # --- reading, for tests and operators ---

    def refunds(self, order_id: str | None = None) -> list[RefundReceipt]:
        query = refunds.select().order_by(refunds.c.id)
        if order_id is not None:
            query = query.where(refunds.c.order_id == order_id)
        with self._reader.connect() as db:
            return [
                RefundReceipt(refund_id=row.id, order_id=row.order_id, amount_cents=row.amount_cents)
                for row in db.execute(query)
            ]

    def emails(self, to: str | None = None) -> list[EmailRequest]:
        query = emails.select().order_by(emails.c.id)
        if to is not None:
            query = query.where(emails.c.to_address == to)
        with self._reader.connect() as db:
            return [
                EmailRequest(to=row.to_address, subject=row.subject, body=row.body, idempotency_key=row.idempotency_key)
                for row in db.execute(query)
            ]

    def _cutoff(self) -> datetime:
        return self._clock() - self.key_ttl


def _order(row: sa.Row[Any]) -> Order:
    return Order(order_id=row.order_id, amount_cents=row.amount_cents, customer_email=row.customer_email)
