"""An order says its currency, so people read its amounts as money (``USD 2,147,483.64``), not a bare number.

Every amount is a count of the smallest unit of the order's currency, as Stripe's are. Orders held before this
revision were in dollars, as everything here assumed, so they become ``USD``.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN (SQLite takes one with a default): a batch would copy the table and lose its unnamed
    # CHECK constraint on the amount.
    op.add_column("orders", sa.Column("currency", sa.Text, nullable=False, server_default="USD"))


def downgrade() -> None:
    op.drop_column("orders", "currency")
