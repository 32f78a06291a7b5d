"""The emails table becomes an outbox that a mail server is fed from: each email's Message-ID, when a server
accepted it, and what the server last said about it.

With SMTP (``AGENT_MAIL=smtp``) an email is recorded before it is handed to the server and marked delivered
once the server has accepted it, so a retried ``send_email`` can tell an email still to deliver from one
delivered already. The Message-ID is kept as recorded, so a delivery retried after a change of
``AGENT_MAIL_FROM`` still carries the first one. Every email written before this revision was sent by the
embedded outbox, for which recording is sending: it counts as delivered when it was recorded.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("emails") as table:
        table.add_column(sa.Column("message_id", sa.Text, nullable=True))
        table.add_column(sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True))
        table.add_column(sa.Column("smtp_reply", sa.Text, nullable=True))
    emails = sa.table("emails", sa.column("created_at"), sa.column("delivered_at"))
    op.execute(emails.update().values(delivered_at=emails.c.created_at))


def downgrade() -> None:
    with op.batch_alter_table("emails") as table:
        table.drop_column("smtp_reply")
        table.drop_column("delivered_at")
        table.drop_column("message_id")
