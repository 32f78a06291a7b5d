"""Orders can name their payment at Stripe, and a refund records what the payment provider called it.

With ``AGENT_PAYMENTS=stripe`` a refund is made on the order's Stripe payment (a PaymentIntent or a Charge,
``orders.stripe_payment``), and the refunds table becomes the worker's book of what Stripe refunded: the
refund's id at Stripe (``provider_refund_id``, one row per refund however often it is replayed) and the status
Stripe gave it. Refunds of the embedded provider have neither.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None
# SQLite drops a column by copying the table, which would lose its unnamed CHECK unless it is passed again.
ORDERS_CHECKS = (sa.CheckConstraint("amount_cents >= 0"),)
REFUNDS_CHECKS = (sa.CheckConstraint("amount_cents > 0"),)


def upgrade() -> None:
    with op.batch_alter_table("orders") as table:
        table.add_column(sa.Column("stripe_payment", sa.Text, nullable=True))
    with op.batch_alter_table("refunds") as table:
        table.add_column(sa.Column("provider_refund_id", sa.Text, nullable=True))
        table.add_column(sa.Column("status", sa.Text, nullable=True))
    # An index, not a constraint: SQLite adds it without copying the table (a copy would lose the refund guard).
    op.create_index("ix_refunds_provider_refund_id", "refunds", ["provider_refund_id"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_refunds_provider_refund_id", table_name="refunds")
    with op.batch_alter_table("refunds", table_args=REFUNDS_CHECKS) as table:
        table.drop_column("status")
        table.drop_column("provider_refund_id")
    with op.batch_alter_table("orders", table_args=ORDERS_CHECKS) as table:
        table.drop_column("stripe_payment")
