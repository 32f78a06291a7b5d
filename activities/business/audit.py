"""The audit trail: what the workflow decided and why, one entry per key.

The workflow writes it through the ``audit`` activity, because a write in workflow code would run again on
every replay; the entry's key makes a retried activity write it once. ``SqlAuditTrail`` keeps it in the
``audit_log`` table of the business database, and an entry that tells of an answer to an approval request
carries the answer as a row too (``answers``), written in the same transaction under the same key: what the
export for auditors reads over a date range (``answered``).

A payment back to the customer and an email to them are entries the workflow does not write: the activity that
books the payment, or records the email, writes it, in the same transaction (``record_payout``,
``record_email``), so the ledger or the outbox and the trail cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from activities.business.database import Database
from activities.business.keys import ticket_of_key
from activities.business.paid_back import said
from activities.business.schema import answers, audit_log
from activities.contracts.approvals import AnsweredRequest
from activities.contracts.limits import cut
from activities.contracts.world import AuditEntry, AuditQuery, EmailRequest, RefundRequest
from activities.tools import PayoutKind

SUBJECT_BYTES = 200
"""What an email's entry keeps of its subject: the email itself is in the outbox."""

READ_AT_ONCE = 500
"""Rows an export fetches from the database at a time, so a long one streams in bounded memory."""


class AuditTrail(Protocol):
    def write(self, entry: AuditEntry) -> None:
        """Write the entry once per key: a second write under its key changes nothing."""
        ...

    def close(self, entry: AuditEntry) -> None:
        """Write the run's closing line: it replaces any line under its key, and comes after every entry."""
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
            write_entry(self.database, db, entry)

    def close(self, entry: AuditEntry) -> None:
        with self.database.writer.begin() as db:
            db.execute(audit_log.delete().where(audit_log.c.idempotency_key == entry.idempotency_key))
            write_entry(self.database, db, entry)

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

    def answered(
        self,
        start: datetime,
        end: datetime,
        *,
        approver: str | None = None,
        limit: int | None = None,
        latest_first: bool = False,
    ) -> Iterator[tuple[str, AnsweredRequest]]:
        """Each answer given from ``start`` up to ``end`` (of one approver, if given), as its ticket's id and the
        answer, in the order given (or the latest first); fetched ``READ_AT_ONCE`` at a time, so a long export
        streams."""
        order = (
            (answers.c.answered_at.desc(), answers.c.id.desc())
            if latest_first
            else (answers.c.answered_at, answers.c.id)
        )
        query = sa.select(answers).where(answers.c.answered_at >= start, answers.c.answered_at < end).order_by(*order)
        if approver is not None:
            query = query.where(answers.c.approver == approver)
        if limit is not None:
            query = query.limit(limit)
        with self.database.reader.connect() as db:
            for row in db.execution_options(yield_per=READ_AT_ONCE).execute(query).mappings():
                fields = {name: row[name] for name in AnsweredRequest.model_fields if name != "at"}
                at = row["answered_at"]  # SQLite keeps no offset: every time written is UTC
                at = at if at.tzinfo else at.replace(tzinfo=UTC)
                yield row["ticket_id"], AnsweredRequest.model_validate({**fields, "at": at})

    def count_answered(self, start: datetime, end: datetime) -> int:
        """How many answers were given from ``start`` up to ``end``."""
        query = sa.select(sa.func.count()).where(answers.c.answered_at >= start, answers.c.answered_at < end)
        with self.database.reader.connect() as db:
            return int(db.execute(query).scalar_one())


def write_entry(database: Database, db: Connection, entry: AuditEntry) -> None:
    """Write ``entry``, and the answer it tells of as a row, in ``db``'s transaction, once per key."""
    db.execute(
        database.insert(audit_log)
        .values(
            ticket_id=entry.ticket_id,
            entry=entry.entry,
            idempotency_key=entry.idempotency_key,
            created_at=database.clock(),
        )
        .on_conflict_do_nothing(index_elements=[audit_log.c.idempotency_key])
    )
    if entry.answer is not None:
        row = entry.answer.model_dump(exclude={"at"}) | {"answered_at": entry.answer.at}
        db.execute(
            database.insert(answers)
            .values(
                **row,
                ticket_id=entry.ticket_id,
                idempotency_key=entry.idempotency_key,
                created_at=database.clock(),
            )
            .on_conflict_do_nothing(index_elements=[answers.c.idempotency_key])
        )


def record_payout(database: Database, db: Connection, request: RefundRequest, kind: PayoutKind, number: int) -> None:
    """The ticket's audit entry for a payout booked in ``db``'s transaction (``refund #3 of USD 49.00 on order
    A-1001 made under key ...``), keyed by the payout's own key, so a retried booking writes it once; nothing for
    a request that names no ticket (a caller outside a ticket, or a run from before 1.2.0)."""
    if request.ticket_id is None:
        return
    made = f"{kind.noun} #{number} of {said(db, request.amount_cents, request.order_id)} on order {request.order_id}"
    entry = f"{made} made under key {request.idempotency_key}"
    key = f"audit:{request.idempotency_key}"
    write_entry(database, db, AuditEntry(ticket_id=request.ticket_id, entry=entry, idempotency_key=key))


def record_email(database: Database, db: Connection, request: EmailRequest, email_id: int, *, sent: bool) -> None:
    """The ticket's audit entry for an email recorded in ``db``'s transaction (``email #7 to ann@example.com,
    "Your refund", sent under key ...``), keyed by the email's own key, so a retried send writes it once; nothing
    for an email no ticket wrote. ``sent``: recorded is sent (the embedded outbox), else queued for the server."""
    ticket_id = ticket_of_key(request.idempotency_key)
    if ticket_id is None:
        return
    how = "sent" if sent else "queued for the mail server"
    subject = cut(request.subject, SUBJECT_BYTES)
    entry = f'email #{email_id} to {request.to}, "{subject}", {how} under key {request.idempotency_key}'
    key = f"audit:{request.idempotency_key}"
    write_entry(database, db, AuditEntry(ticket_id=ticket_id, entry=entry, idempotency_key=key))
