"""A refund counted against the limits across tickets keeps its order's currency, so the reason a person reads
names every amount in its own currency and decimals (``JPY 1,500 of JPY 1,000 with this one``), not as dollars.

The limits still add the smallest units of every currency together; the column only says which currency each
part was in. Rows counted before this revision take their order's currency where the refund or store credit they
became names the order; a reservation that became neither stays without one (it counts for a day at most) and
reads as a count of the smallest unit.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN: a batch would copy the table on SQLite and lose its unnamed CHECK constraint on the amount.
    op.add_column("unattended_refunds", sa.Column("currency", sa.Text))
    op.execute(
        "UPDATE unattended_refunds SET currency = (SELECT orders.currency FROM refunds JOIN orders"
        " ON orders.order_id = refunds.order_id WHERE refunds.id = unattended_refunds.refund_id)"
        " WHERE refund_id IS NOT NULL"
    )
    op.execute(
        "UPDATE unattended_refunds SET currency = (SELECT orders.currency FROM store_credits JOIN orders"
        " ON orders.order_id = store_credits.order_id WHERE store_credits.counted_id = unattended_refunds.id)"
        " WHERE currency IS NULL"
    )


def downgrade() -> None:
    op.drop_column("unattended_refunds", "currency")
