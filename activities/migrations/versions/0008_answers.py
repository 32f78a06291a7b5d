"""Every answer to an approval request is kept as a row beside the audit entry that tells it, for auditors.

The audit trail says in words who answered what; the export for auditors needs the same as columns over a date
range (``agent_worker.answers``), and Temporal's histories, which hold the outcome, are deleted after the
namespace's retention. The workflow writes the row through its ``audit`` activity, in the transaction that writes
the entry and under the entry's key (``activities.business.audit``). Answers given before this revision are in the
audit trail's words only: nothing here reads them back into rows.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "answers",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("idempotency_key", sa.Text, nullable=False, unique=True),
        sa.Column("ticket_id", sa.Text, nullable=False),
        sa.Column("workflow_id", sa.Text, nullable=False),
        sa.Column("request_id", sa.Text, nullable=False),
        sa.Column("decision", sa.Text, nullable=False),
        sa.Column("approver", sa.Text),
        sa.Column("channel", sa.Text),
        sa.Column("answered_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("amount_cents", sa.BigInteger),
        sa.Column("currency", sa.Text),
        sa.Column("order_id", sa.Text, nullable=False),
        sa.Column("customer_email", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("policy_digest", sa.Text),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_answers_answered_at", "answers", ["answered_at"])
    op.create_index("ix_answers_approver_answered_at", "answers", ["approver", "answered_at"])


def downgrade() -> None:
    op.drop_table("answers")
