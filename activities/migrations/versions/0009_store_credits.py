"""Store credit: vouchers issued on an order instead of a refund, in a table of their own.

The ``issue_store_credit`` tool pays the customer back as a voucher the shop honours, kept by the embedded ledger
(``activities.business.credits``) whichever payment provider refunds. Its keys live in the shared key ledger; a
credit nobody approved is counted against the limits across tickets like a refund, and names that count
(``counted_id``).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "store_credits",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("order_id", sa.Text, sa.ForeignKey("orders.order_id"), nullable=False),
        sa.Column("amount_cents", sa.Integer, sa.CheckConstraint("amount_cents > 0"), nullable=False),
        sa.Column("idempotency_key", sa.Text),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("counted_id", sa.Integer, sa.ForeignKey("unattended_refunds.id")),
    )
    op.create_index("ix_store_credits_order_id", "store_credits", ["order_id"])
    op.create_index("ix_store_credits_idempotency_key", "store_credits", ["idempotency_key"])


def downgrade() -> None:
    op.drop_table("store_credits")
