"""The business side: orders, the payment provider's refunds, sent emails, the audit trail, and the model's
call log.

It is a real SQLite file that workers, tests and operators share, so a crash test can count what was paid
from outside the process that paid it. The payment side keeps Stripe's idempotency rules, because that is
the contract real providers offer and the one a retried activity relies on:

- the same key with the same request pays nothing and returns the first result (same refund number, so
  the model and the customer see the same text as without the crash);
- the same key with another request is refused;
- keys expire (24 hours by default), after which a repeat is a new request;
- a refund that would take an order's refunded total above what was charged is refused (a setting, on
  by default; the crash tests switch it off to show what orchestration alone does).

Each check-and-write runs in one ``BEGIN IMMEDIATE`` transaction, so two workers racing the same key
cannot both pay: the second waits for the first's lock and then finds its row.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from activities.contracts import AuditEntry, EmailReceipt, EmailRequest, Order, RefundReceipt, RefundRequest, money

SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (
    order_id TEXT PRIMARY KEY,
    amount_cents INTEGER NOT NULL CHECK (amount_cents >= 0),
    customer_email TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS refunds (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    order_id TEXT NOT NULL REFERENCES orders(order_id),
    amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
    idempotency_key TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS refunds_by_key ON refunds(idempotency_key, created_at);
CREATE TABLE IF NOT EXISTS emails (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    to_address TEXT NOT NULL,
    subject TEXT NOT NULL,
    body TEXT NOT NULL,
    idempotency_key TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS emails_by_key ON emails(idempotency_key, created_at);
CREATE TABLE IF NOT EXISTS model_calls (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ticket_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS model_calls_by_step ON model_calls(ticket_id, step);
CREATE TABLE IF NOT EXISTS audit_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ticket_id TEXT NOT NULL,
    entry TEXT NOT NULL,
    idempotency_key TEXT UNIQUE,
    created_at TEXT NOT NULL
);
"""

DEMO_ORDERS = (
    Order(order_id="A-1001", amount_cents=4900, customer_email="ann@example.com"),
    Order(order_id="A-1002", amount_cents=1500, customer_email="bob@example.com"),
    Order(order_id="A-1003", amount_cents=12_000, customer_email="cleo@example.com"),
    Order(order_id="A-1004", amount_cents=899, customer_email="dev@example.com"),
)


class OrderNotFoundError(LookupError):
    """No such order: asking again will not make one appear."""


class IdempotencyConflictError(ValueError):
    """A key was reused for a different request, which Stripe refuses rather than guess."""


class RefundExceedsChargeError(ValueError):
    """The refund would take the order's refunded total above what was charged."""


@dataclass(frozen=True)
class ModelCall:
    ticket_id: str
    step: int
    created_at: str


class BusinessStore:
    """Every method opens its own connection: the store is shared by processes, not by threads."""

    def __init__(
        self,
        path: Path,
        *,
        key_ttl: timedelta = timedelta(hours=24),
        refund_guard: bool = True,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.path = path
        self.key_ttl = key_ttl
        self.refund_guard = refund_guard
        self._clock = clock

    def create(self, *, seed_demo_orders: bool = True) -> BusinessStore:
        """Create the schema if missing and seed the demo orders on first use; safe to call every start."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.execute("PRAGMA journal_mode = WAL")  # readers never wait for a writer; persists in the file
            db.executescript(SCHEMA)
        if seed_demo_orders:
            with self._transaction() as db:
                db.executemany(
                    "INSERT OR IGNORE INTO orders VALUES (?, ?, ?)",
                    [(o.order_id, o.amount_cents, o.customer_email) for o in DEMO_ORDERS],
                )
        return self

    # --- orders ---

    def add_order(self, order: Order) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT INTO orders VALUES (?, ?, ?) ON CONFLICT(order_id) DO UPDATE SET "
                "amount_cents = excluded.amount_cents, customer_email = excluded.customer_email",
                (order.order_id, order.amount_cents, order.customer_email),
            )

    def orders(self) -> list[Order]:
        with self._connect() as db:
            rows = db.execute("SELECT * FROM orders ORDER BY order_id").fetchall()
        return [
            Order(order_id=r["order_id"], amount_cents=r["amount_cents"], customer_email=r["customer_email"])
            for r in rows
        ]

    def order(self, order_id: str) -> Order:
        with self._connect() as db:
            row = db.execute("SELECT * FROM orders WHERE order_id = ?", (order_id,)).fetchone()
        if row is None:
            raise OrderNotFoundError(f"There is no order {order_id}")
        return Order(order_id=row["order_id"], amount_cents=row["amount_cents"], customer_email=row["customer_email"])

    # --- the payment provider ---

    def refund(self, request: RefundRequest) -> RefundReceipt:
        with self._transaction() as db:
            if request.idempotency_key is not None:
                first = self._live_row(db, "refunds", request.idempotency_key)
                if first is not None:
                    if (first["order_id"], first["amount_cents"]) != (request.order_id, request.amount_cents):
                        raise IdempotencyConflictError(
                            f"Idempotency key {request.idempotency_key} was used for a refund of "
                            f"{money(first['amount_cents'])} on {first['order_id']}, not "
                            f"{money(request.amount_cents)} on {request.order_id}"
                        )
                    return RefundReceipt(
                        refund_id=first["id"],
                        order_id=first["order_id"],
                        amount_cents=first["amount_cents"],
                        replayed=True,
                    )
            order = db.execute("SELECT amount_cents FROM orders WHERE order_id = ?", (request.order_id,)).fetchone()
            if order is None:
                raise OrderNotFoundError(f"There is no order {request.order_id}")
            if self.refund_guard:
                (refunded,) = db.execute(
                    "SELECT COALESCE(SUM(amount_cents), 0) FROM refunds WHERE order_id = ?",
                    (request.order_id,),
                ).fetchone()
                if refunded + request.amount_cents > order["amount_cents"]:
                    raise RefundExceedsChargeError(
                        f"Refusing to refund {money(request.amount_cents)} on {request.order_id}: "
                        f"{money(refunded)} of {money(order['amount_cents'])} is already refunded"
                    )
            cursor = db.execute(
                "INSERT INTO refunds (order_id, amount_cents, idempotency_key, created_at) VALUES (?, ?, ?, ?)",
                (request.order_id, request.amount_cents, request.idempotency_key, self._now()),
            )
            assert cursor.lastrowid is not None
            return RefundReceipt(
                refund_id=cursor.lastrowid, order_id=request.order_id, amount_cents=request.amount_cents
            )

    def refund_by_key(self, key: str) -> RefundReceipt | None:
        """What the provider recorded under a key: how a timed-out refund's outcome is found out."""
        with self._connect() as db:
            row = self._live_row(db, "refunds", key)
        if row is None:
            return None
        return RefundReceipt(
            refund_id=row["id"], order_id=row["order_id"], amount_cents=row["amount_cents"], replayed=True
        )

    # --- mail ---

    def send_email(self, request: EmailRequest) -> EmailReceipt:
        with self._transaction() as db:
            first = self._live_row(db, "emails", request.idempotency_key)
            if first is not None:
                if (first["to_address"], first["subject"], first["body"]) != (
                    request.to,
                    request.subject,
                    request.body,
                ):
                    raise IdempotencyConflictError(
                        f"Idempotency key {request.idempotency_key} was used for another email"
                    )
                return EmailReceipt(email_id=first["id"], to=first["to_address"], replayed=True)
            cursor = db.execute(
                "INSERT INTO emails (to_address, subject, body, idempotency_key, created_at) VALUES (?, ?, ?, ?, ?)",
                (request.to, request.subject, request.body, request.idempotency_key, self._now()),
            )
            assert cursor.lastrowid is not None
            return EmailReceipt(email_id=cursor.lastrowid, to=request.to)

    # --- the model's call log, so tests and operators can count calls ---

    def record_model_call(self, ticket_id: str, step: int) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT INTO model_calls (ticket_id, step, created_at) VALUES (?, ?, ?)",
                (ticket_id, step, self._now()),
            )

    def model_calls(self, ticket_id: str) -> list[ModelCall]:
        with self._connect() as db:
            rows = db.execute(
                "SELECT ticket_id, step, created_at FROM model_calls WHERE ticket_id = ? ORDER BY id",
                (ticket_id,),
            ).fetchall()
        return [ModelCall(row["ticket_id"], row["step"], row["created_at"]) for row in rows]

    # --- the audit trail ---

    def audit(self, entry: AuditEntry) -> None:
        """Write an audit entry once per key: a retried activity does not write it twice."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO audit_log (ticket_id, entry, idempotency_key, created_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(idempotency_key) DO NOTHING",
                (entry.ticket_id, entry.entry, entry.idempotency_key, self._now()),
            )

    def audit_log(self, ticket_id: str | None = None) -> list[str]:
        with self._connect() as db:
            rows = db.execute(
                "SELECT entry FROM audit_log WHERE ? IS NULL OR ticket_id = ? ORDER BY id", (ticket_id, ticket_id)
            ).fetchall()
        return [row["entry"] for row in rows]

    # --- reading, for tests and operators ---

    def refunds(self, order_id: str | None = None) -> list[RefundReceipt]:
        with self._connect() as db:
            rows = db.execute(
                "SELECT id, order_id, amount_cents FROM refunds WHERE ? IS NULL OR order_id = ? ORDER BY id",
                (order_id, order_id),
            ).fetchall()
        return [RefundReceipt(refund_id=r["id"], order_id=r["order_id"], amount_cents=r["amount_cents"]) for r in rows]

    def emails(self, to: str | None = None) -> list[EmailRequest]:
        with self._connect() as db:
            rows = db.execute("SELECT * FROM emails WHERE ? IS NULL OR to_address = ? ORDER BY id", (to, to)).fetchall()
        return [
            EmailRequest(to=r["to_address"], subject=r["subject"], body=r["body"], idempotency_key=r["idempotency_key"])
            for r in rows
        ]

    # --- plumbing ---

    def _now(self) -> str:
        return self._clock().astimezone(UTC).isoformat(timespec="microseconds")

    def _live_row(self, db: sqlite3.Connection, table: str, key: str) -> sqlite3.Row | None:
        cutoff = (self._clock() - self.key_ttl).astimezone(UTC).isoformat(timespec="microseconds")
        row: sqlite3.Row | None = db.execute(
            f"SELECT * FROM {table} WHERE idempotency_key = ? AND created_at > ? ORDER BY id LIMIT 1",  # noqa: S608 - table is one of two literals
            (key, cutoff),
        ).fetchone()
        return row

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.row_factory = sqlite3.Row
        try:
            db.execute("PRAGMA busy_timeout = 30000")
            yield db
        finally:
            db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
