"""The outbox keeps the customer's mail each email answers, so a mail program threads the desk's answer under the
message the customer sent: its ``In-Reply-To`` and its ``References``, recorded with the email, like its
Message-ID, so every delivery of it carries the same headers.

Emails recorded before this revision answer no mail: the columns stay empty, and their deliveries carry neither
header, as they did.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMNs of nullable columns: no batch, so SQLite does not copy the table.
    op.add_column("emails", sa.Column("in_reply_to", sa.Text, nullable=True))
    op.add_column("emails", sa.Column("reference_ids", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("emails") as table:
        table.drop_column("reference_ids")
        table.drop_column("in_reply_to")
