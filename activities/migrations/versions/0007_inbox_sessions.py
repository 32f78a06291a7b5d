"""The approval inbox keeps its sessions, and the wrong passwords it slows down, in the business database.

A session was a signed cookie, valid until it expired: signing out cleared the browser's copy, and a copied cookie
went on working. Now the cookie holds a random token and ``inbox_sessions`` a row per session (only the token's
hash), so signing out, idling and an operator's ``agent-worker web-sessions end`` end it on the server, and every
inbox process behind a load balancer agrees. ``inbox_sign_in_failures`` counts recent wrong passwords per person
and per address, so the inbox can refuse to check more of them for a while. Both start empty: people signed in
with the old cookies sign in again once.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "inbox_sessions",
        sa.Column("token_hash", sa.Text, primary_key=True),
        sa.Column("person", sa.Text, nullable=False),
        sa.Column("credential", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("address", sa.Text),
        sa.Column("user_agent", sa.Text),
    )
    op.create_index("ix_inbox_sessions_person", "inbox_sessions", ["person"])
    op.create_index("ix_inbox_sessions_created_at", "inbox_sessions", ["created_at"])
    op.create_index("ix_inbox_sessions_last_seen_at", "inbox_sessions", ["last_seen_at"])
    op.create_table(
        "inbox_sign_in_failures",
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("failures", sa.Text, nullable=False),
        sa.Column("last_failed_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_inbox_sign_in_failures_last_failed_at", "inbox_sign_in_failures", ["last_failed_at"])


def downgrade() -> None:
    op.drop_table("inbox_sign_in_failures")
    op.drop_table("inbox_sessions")
