"""The business store as it was: one object over the ports of ``activities.business``, while callers move.

Everything here delegates to ``Business``; it goes once nothing imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from activities.business import Business
from activities.business.model_calls import ModelCall
from activities.business.orders import DEMO_ORDERS
from activities.business.refusals import (
    IdempotencyConflictError,
    KeyClosedError,
    OrderNotFoundError,
    RefundExceedsChargeError,
)
from activities.business.schema import blobs, metadata
from activities.contracts import (
    AuditEntry,
    EmailReceipt,
    EmailRequest,
    Order,
    OrderLookup,
    RefundReceipt,
    RefundRequest,
)

__all__ = [
    "DEMO_ORDERS",
    "BusinessStore",
    "IdempotencyConflictError",
    "KeyClosedError",
    "ModelCall",
    "OrderNotFoundError",
    "RefundExceedsChargeError",
    "blobs",
    "metadata",
]


class BusinessStore:
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
        self.business = Business.at(url or f"sqlite:///{path}", key_ttl=key_ttl, refund_guard=refund_guard, clock=clock)
        self.path = path if path is not None else Path(url or "")
        self._engine = self.business.database.writer

    def close(self) -> None:
        self.business.close()

    def __str__(self) -> str:
        return str(self.business)

    def create(self, *, seed_demo_orders: bool = True) -> BusinessStore:
        self.business.create(seed_demo_orders=seed_demo_orders)
        return self

    def migrate(self) -> str | None:
        return self.business.database.migrate()

    def add_order(self, order: Order) -> None:
        self.business.orders.add(order)

    def orders(self) -> list[Order]:
        return self.business.orders.all()

    def add_order_event(self, order_id: str, event: str) -> None:
        self.business.orders.add_event(order_id, event)

    def order_events(self, order_id: str) -> list[str]:
        return self.business.orders.events(order_id)

    def order(self, order_id: str) -> Order:
        return self.business.orders.order(order_id)

    def look_up(self, order_id: str) -> OrderLookup:
        order = self.business.orders.order(order_id)
        return OrderLookup(**order.model_dump(), refunded_cents=self.business.payments.refunded_total(order_id))

    def refund(self, request: RefundRequest) -> RefundReceipt:
        return self.business.payments.refund(request)

    def refund_by_key(self, key: str) -> RefundReceipt | None:
        return self.business.payments.refund_by_key(key)

    def settle_refund(self, key: str) -> RefundReceipt | None:
        return self.business.payments.settle_refund(key)

    def send_email(self, request: EmailRequest) -> EmailReceipt:
        return self.business.mail.send_email(request)

    def put_blob(self, key: str, data: bytes) -> None:
        self.business.blobs.put_blob(key, data)

    def get_blob(self, key: str) -> bytes | None:
        return self.business.blobs.get_blob(key)

    def audit(self, entry: AuditEntry) -> None:
        self.business.audit.write(entry)

    def audit_log(self, ticket_id: str | None = None) -> list[str]:
        return self.business.audit.entries(ticket_id)

    def record_model_call(self, ticket_id: str, step: int) -> None:
        self.business.model_calls.record(ticket_id, step)

    def model_calls(self, ticket_id: str) -> list[ModelCall]:
        return self.business.model_calls.of(ticket_id)

    def refunds(self, order_id: str | None = None) -> list[RefundReceipt]:
        return self.business.payments.refunds(order_id)

    def emails(self, to: str | None = None) -> list[EmailRequest]:
        return self.business.mail.sent(to)
