"""What was refunded without a person is counted, per customer and for the desk, where refunds are booked.

The limits across tickets (``activities.contracts.policy.Limits``) hold a customer and the desk to so much a
day without a person. The count is a table of its own (``activities.business.unattended``): one row per refund
nobody approved, written in the transaction that books it, or reserved before a provider over the network is
asked and kept or released by its answer. Refunds made before this revision were not counted, and nothing here
counts them: a desk upgrading mid-day starts its first day's totals at zero.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "unattended_refunds",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("customer", sa.Text, nullable=False),
        sa.Column("amount_cents", sa.Integer, sa.CheckConstraint("amount_cents > 0"), nullable=False),
        sa.Column("counted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("idempotency_key", sa.Text),
        sa.Column("refund_id", sa.Integer, sa.ForeignKey("refunds.id")),
    )
    op.create_index("ix_unattended_refunds_counted_at", "unattended_refunds", ["counted_at"])
    op.create_index("ix_unattended_refunds_idempotency_key", "unattended_refunds", ["idempotency_key"])
    op.create_index("ix_unattended_refunds_customer_counted_at", "unattended_refunds", ["customer", "counted_at"])


def downgrade() -> None:
    op.drop_table("unattended_refunds")
