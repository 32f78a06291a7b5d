"""The audit trail: what the workflow decided and why, one entry per key.

The workflow writes it through the ``audit`` activity, because a write in workflow code would run again on
every replay; the entry's key makes a retried activity write it once. ``SqlAuditTrail`` keeps it in the
``audit_log`` table of the business database.
"""

from __future__ import annotations

from typing import Protocol

import sqlalchemy as sa

from activities.business.database import Database
from activities.business.schema import audit_log
from activities.contracts.world import AuditEntry, AuditQuery


class AuditTrail(Protocol):
    def write(self, entry: AuditEntry) -> None:
        """Write the entry once per key: a second write under its key changes nothing."""
        ...

    def holds(self, query: AuditQuery) -> bool:
        """Whether ``query.entry`` was written for its ticket under a key with one of its prefixes."""
        ...


class SqlAuditTrail:
    """The embedded audit trail (``AuditTrail``), which tests and operators read."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def write(self, entry: AuditEntry) -> None:
        with self.database.writer.begin() as db:
            db.execute(
                self.database.insert(audit_log)
                .values(ticket_id=entry.ticket_id, entry=entry.entry, idempotency_key=entry.idempotency_key,
                        created_at=self.database.clock())
                .on_conflict_do_nothing(index_elements=[audit_log.c.idempotency_key])
            )  # fmt: skip

    def holds(self, query: AuditQuery) -> bool:
        key = audit_log.c.idempotency_key
        by_run = sa.or_(*(key.startswith(prefix, autoescape=True) for prefix in query.key_prefixes))
        found = (
            sa.select(audit_log.c.id)
            .where(audit_log.c.ticket_id == query.ticket_id, audit_log.c.entry == query.entry, by_run)
            .limit(1)
        )
        with self.database.reader.connect() as db:
            return db.execute(found).first() is not None

    def entries(self, ticket_id: str | None = None) -> list[str]:
        """Every entry (of one ticket, if given), in the order written."""
        query = sa.select(audit_log.c.entry).order_by(audit_log.c.id)
        if ticket_id is not None:
            query = query.where(audit_log.c.ticket_id == ticket_id)
        with self.database.reader.connect() as db:
            return list(db.execute(query).scalars())
