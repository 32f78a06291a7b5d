"""Refund keys can be closed: a refund whose outcome was unknown and that reconciliation found unpaid.

Once the workflow has told the model "not made", a hung attempt must not pay later under the same key, so
reconciliation closes the key in the same transaction that finds nothing under it (``closed_at``), and a
request under a closed key is refused for ever.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("idempotency_keys") as table:
        table.add_column(sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("idempotency_keys") as table:
        table.drop_column("closed_at")
