"""Mail to customers: an outbox, where each email is sent once per idempotency key.

``Mail`` is the port. An email's key is its tool call's (``workflows/tools.py``), so a retried or replayed
``send_email`` never mails twice: the same key with the same email returns the first receipt, and the same
key with another email is refused. ``SqlOutbox`` is the embedded outbox: an email is sent when its row is
in the ``emails`` table, which tests and operators read; nothing leaves the machine. An adapter that
delivers (SMTP) must keep the same rule, which SMTP itself does not know: it needs a ledger of its keys.
"""

from __future__ import annotations

from typing import Protocol

from activities.business.database import Database
from activities.business.keys import KeyLedger
from activities.business.refusals import IdempotencyConflictError
from activities.business.schema import emails
from activities.contracts.world import EmailReceipt, EmailRequest


class Mail(Protocol):
    def send_email(self, request: EmailRequest) -> EmailReceipt:
        """Send once per key: a repeat returns the first receipt, ``replayed``; another email under the key
        raises ``IdempotencyConflictError``."""
        ...


class SqlOutbox:
    """The embedded outbox (``Mail``): each email a row, its key in the key ledger it shares with payments."""

    def __init__(self, database: Database, keys: KeyLedger) -> None:
        self.database = database
        self.keys = keys

    def send_email(self, request: EmailRequest) -> EmailReceipt:
        fingerprint = f"email {request.to}\n{request.subject}\n{request.body}"
        with self.database.writer.begin() as db:
            first = self.keys.claim(db, request.idempotency_key, fingerprint)
            if first is not None:
                if first.request != fingerprint:
                    raise IdempotencyConflictError(
                        f"Idempotency key {request.idempotency_key} was used for another email"
                    )
                return EmailReceipt(email_id=first.result_id, to=request.to, replayed=True)
            email_id = db.execute(
                emails.insert().returning(emails.c.id),
                {"to_address": request.to, "subject": request.subject, "body": request.body,
                 "idempotency_key": request.idempotency_key, "created_at": self.database.clock()},
            ).scalar_one()  # fmt: skip
            self.keys.record(db, request.idempotency_key, email_id)
        return EmailReceipt(email_id=email_id, to=request.to)

    def sent(self, to: str | None = None) -> list[EmailRequest]:
        """Every email sent (to one address, if given), oldest first: for tests and operators."""
        query = emails.select().order_by(emails.c.id)
        if to is not None:
            query = query.where(emails.c.to_address == to)
        with self.database.reader.connect() as db:
            return [
                EmailRequest(to=row.to_address, subject=row.subject, body=row.body, idempotency_key=row.idempotency_key)
                for row in db.execute(query)
            ]
