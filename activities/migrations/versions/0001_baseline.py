"""The schema as it stood when migrations began: the eight tables ``metadata.create_all`` made at start-up.

It is a frozen copy, not an import of ``activities.business.schema.metadata``: that one will change, and this revision
must build the same database tomorrow as today. It is applied with ``create_all(checkfirst=True)``, the very
call start-up made before migrations existed, so on a store made back then it creates only what is missing
(``blobs`` and ``order_events`` came later than the rest) and keeps every existing table and row.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

baseline = sa.MetaData()
sa.Table(
    "orders",
    baseline,
    sa.Column("order_id", sa.Text, primary_key=True),
    sa.Column("amount_cents", sa.Integer, sa.CheckConstraint("amount_cents >= 0"), nullable=False),
    sa.Column("customer_email", sa.Text, nullable=False),
)
sa.Table(
    "refunds",
    baseline,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("order_id", sa.Text, sa.ForeignKey("orders.order_id"), nullable=False, index=True),
    sa.Column("amount_cents", sa.Integer, sa.CheckConstraint("amount_cents > 0"), nullable=False),
    sa.Column("idempotency_key", sa.Text, index=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
sa.Table(
    "emails",
    baseline,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("to_address", sa.Text, nullable=False),
    sa.Column("subject", sa.Text, nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("idempotency_key", sa.Text, index=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
sa.Table(
    "idempotency_keys",
    baseline,
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("request", sa.Text, nullable=False),
    sa.Column("result_id", sa.Integer),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
sa.Table(
    "model_calls",
    baseline,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("ticket_id", sa.Text, nullable=False, index=True),
    sa.Column("step", sa.Integer, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
sa.Table(
    "audit_log",
    baseline,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("ticket_id", sa.Text, nullable=False, index=True),
    sa.Column("entry", sa.Text, nullable=False),
    sa.Column("idempotency_key", sa.Text, unique=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
sa.Table(
    "blobs",
    baseline,
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("data", sa.LargeBinary, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
sa.Table(
    "order_events",
    baseline,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("order_id", sa.Text, sa.ForeignKey("orders.order_id"), nullable=False, index=True),
    sa.Column("event", sa.Text, nullable=False),
)


def upgrade() -> None:
    baseline.create_all(op.get_bind(), checkfirst=True)


def downgrade() -> None:
    baseline.drop_all(op.get_bind())
