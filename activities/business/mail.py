"""Mail to customers: an outbox, where each email is sent once per idempotency key.

``Mail`` is the port. An email's key is its tool call's (``workflows/toolbox.py``), so a retried or replayed
``send_email`` never mails twice: the same key with the same email returns the first receipt, and the same
key with another email is refused. ``SqlOutbox`` keeps that rule in the ``emails`` table, which tests and
operators read, and is both implementations:

- **embedded** (no relay, the default): an email is sent when its row is recorded; nothing leaves the machine.
- **through a mail server** (a ``Relay``, ``activities.business.smtp``): SMTP knows nothing of idempotency
  keys, so the outbox is its ledger. The email is recorded under its key, with a ``Message-ID`` derived from
  the key, and committed *before* it is handed to the server; once the server has accepted it, the row is
  marked delivered (``delivered_at``). A repeat of the key finds the row: delivered, it returns the first
  receipt and sends nothing; not delivered, it hands the same message over again. The customer's mail it
  answers (``In-Reply-To``, ``References``) is recorded with it too, so every delivery threads the same way.

"Not delivered" covers two cases the outbox cannot tell apart: the server never took the message (it was
down, it deferred it, the worker died first), and the server took it but the worker died before recording
that. Handing it over again is the standard at-least-once answer: the second case delivers a second copy
with the same Message-ID, which the receiving side can recognise as the same message (some mail stores and
clients drop such a duplicate). The alternative, never handing over a row found undelivered, would lose the email in the
first case, which is the common one. Two attempts running at once (one the server gave up on, still in its
thread, and its retry) can likewise both hand it over; both copies carry the one Message-ID.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import sqlalchemy as sa

from activities.business.audit import record_email
from activities.business.database import Database
from activities.business.keys import KeyLedger, ticket_of_key
from activities.business.refusals import IdempotencyConflictError
from activities.business.schema import emails
from activities.contracts.world import EmailReceipt, EmailRequest

EMBEDDED_DOMAIN = "outbox.invalid"
"""The domain of the embedded outbox's Message-IDs: ``.invalid`` is reserved for names that reach nowhere."""


class Mail(Protocol):
    def send_email(self, request: EmailRequest) -> EmailReceipt:
        """Send once per key: a repeat returns the first receipt, ``replayed``; another email under the key
        raises ``IdempotencyConflictError``. A mail server's refusal for good raises ``MailRefusedError``;
        anything else that keeps the email from its server (``MailDeferredError``) is worth retrying."""
        ...


class MailDeferredError(ConnectionError):
    """The mail server could not take the email now (a 4xx reply, no connection, no answer in time): the
    same email, handed over again later, may well go through. Not a refusal: Temporal retries it."""


@dataclass(frozen=True)
class OutgoingEmail:
    """An email as the outbox recorded it: what a relay hands over, the same on every delivery of it."""

    email_id: int
    to: str
    subject: str
    body: str
    message_id: str
    recorded_at: datetime
    ticket_id: str | None = None
    """The ticket that wrote it, read from its key (``ticket_of_key``): what its reply address is signed for."""
    in_reply_to: str | None = None
    """The customer's mail it answers, as recorded with it (revision 0011); None: it answers none."""
    references: tuple[str, ...] = ()
    """The conversation up to that mail, oldest first, as recorded with it."""


class Relay(Protocol):
    """What carries the outbox's emails to their mailboxes: a mail server."""

    @property
    def domain(self) -> str:
        """The sender's domain, which the outbox's Message-IDs are under."""
        ...

    def deliver(self, email: OutgoingEmail) -> str:
        """Hand the email to the server, and return its acceptance as it worded it. Raises
        ``MailRefusedError`` for a refusal for good, ``MailDeferredError`` for anything worth retrying."""
        ...


def message_id(key: str, domain: str) -> str:
    """The email's Message-ID: a digest of its idempotency key, the same for every delivery under the key, and
    saying nothing of the ticket the key names."""
    return f"<{hashlib.sha256(key.encode()).hexdigest()[:32]}@{domain}>"


class SqlOutbox:
    """The outbox (``Mail``): each email a row, its key in the key ledger it shares with payments; delivered
    through ``relay`` if one is given, else sent by being recorded."""

    def __init__(self, database: Database, keys: KeyLedger, relay: Relay | None = None) -> None:
        self.database = database
        self.keys = keys
        self.relay = relay

    def send_email(self, request: EmailRequest) -> EmailReceipt:
        email, new, delivered = self._record(request)
        if delivered:
            return EmailReceipt(email_id=email.email_id, to=request.to, replayed=not new)
        reply = None
        if self.relay is not None:
            try:
                reply = self.relay.deliver(email)
            except Exception as error:
                self._note(email.email_id, str(error))
                raise
        self._mark_delivered(email.email_id, reply)
        return EmailReceipt(email_id=email.email_id, to=request.to)

    def _record(self, request: EmailRequest) -> tuple[OutgoingEmail, bool, bool]:
        """Record the email under its key, committed before anything is handed over; return it, whether this
        request recorded it (the key's first), and whether it counts as delivered already (the embedded outbox
        delivers by recording; through a relay, a server accepted it).

        The mail it answers is not part of what a repeat must match: the first recorded stands, so a repeat
        (a reset ticket, a duplicate run that heard the customer's reply at another moment) hands over the email
        recorded, threaded as it was, rather than refuse an email whose words are the same."""
        fingerprint = f"email {request.to}\n{request.subject}\n{request.body}"
        with self.database.writer.begin() as db:
            first = self.keys.claim(db, request.idempotency_key, fingerprint)
            if first is not None:
                if first.request != fingerprint:
                    raise IdempotencyConflictError(
                        f"Idempotency key {request.idempotency_key} was used for another email"
                    )
                row = db.execute(emails.select().where(emails.c.id == first.result_id)).one()
                return _outgoing(row), False, row.delivered_at is not None
            now = self.database.clock()
            domain = EMBEDDED_DOMAIN if self.relay is None else self.relay.domain
            row = db.execute(
                emails.insert().returning(*emails.c),
                {
                    "to_address": request.to,
                    "subject": request.subject,
                    "body": request.body,
                    "idempotency_key": request.idempotency_key,
                    "created_at": now,
                    "message_id": message_id(request.idempotency_key, domain),
                    "delivered_at": now if self.relay is None else None,
                    "in_reply_to": request.in_reply_to,
                    "reference_ids": " ".join(request.references) or None,
                },
            ).one()
            self.keys.record(db, request.idempotency_key, row.id)
            sent = row.delivered_at is not None
            record_email(self.database, db, request, row.id, sent=sent)
        return _outgoing(row), True, sent

    def _mark_delivered(self, email_id: int, reply: str | None) -> None:
        """Record the server's acceptance; of two attempts that both delivered, the first to record it stays."""
        with self.database.writer.begin() as db:
            db.execute(
                emails.update()
                .where(emails.c.id == email_id, emails.c.delivered_at.is_(None))
                .values(delivered_at=self.database.clock(), smtp_reply=reply)
            )

    def _note(self, email_id: int, reply: str) -> None:
        """Why the email is not delivered yet, for an operator reading the outbox (never over a delivery)."""
        with self.database.writer.begin() as db:
            db.execute(
                emails.update().where(emails.c.id == email_id, emails.c.delivered_at.is_(None)).values(smtp_reply=reply)
            )

    def sent(self, to: str | None = None) -> list[EmailRequest]:
        """Every email sent (to one address, if given), oldest first: for tests and operators. Through a relay,
        sent is delivered: an email the server has not accepted is not in this list."""
        return [
            EmailRequest(
                to=row.to_address,
                subject=row.subject,
                body=row.body,
                idempotency_key=row.idempotency_key,
                in_reply_to=row.in_reply_to,
                references=_ids(row.reference_ids),
            )
            for row in self._rows(to, emails.c.delivered_at.is_not(None))
        ]

    def outbox(self, to: str | None = None) -> list[OutboxEntry]:
        """Every email recorded, delivered or not, with what its delivery came to, oldest first."""
        return [
            OutboxEntry(
                email=_outgoing(row),
                idempotency_key=row.idempotency_key,
                delivered_at=_utc(row.delivered_at) if row.delivered_at is not None else None,
                smtp_reply=row.smtp_reply,
            )
            for row in self._rows(to)
        ]

    def _rows(self, to: str | None, *where: sa.ColumnElement[bool]) -> list[sa.Row[Any]]:
        query = emails.select().where(*where).order_by(emails.c.id)
        if to is not None:
            query = query.where(emails.c.to_address == to)
        with self.database.reader.connect() as db:
            return list(db.execute(query))

    def __str__(self) -> str:
        return "the embedded outbox (nothing leaves the machine)" if self.relay is None else str(self.relay)


@dataclass(frozen=True)
class OutboxEntry:
    """One email of the outbox and what became of it."""

    email: OutgoingEmail
    idempotency_key: str | None
    delivered_at: datetime | None
    smtp_reply: str | None
    """The server's acceptance once delivered; before that, why the last attempt did not deliver it."""


def _outgoing(row: sa.Row[Any]) -> OutgoingEmail:
    """A row recorded before Message-IDs were (revision 0003) gets the one its key derives, as the embedded
    outbox would have given it."""
    return OutgoingEmail(
        email_id=row.id,
        to=row.to_address,
        subject=row.subject,
        body=row.body,
        message_id=row.message_id or message_id(row.idempotency_key or str(row.id), EMBEDDED_DOMAIN),
        recorded_at=_utc(row.created_at),
        ticket_id=ticket_of_key(row.idempotency_key),
        in_reply_to=row.in_reply_to,
        references=tuple(_ids(row.reference_ids)),
    )


def _ids(column: str | None) -> list[str]:
    """The Message-IDs a row's ``reference_ids`` holds (a Message-ID has no space in it)."""
    return column.split() if column else []


def _utc(moment: datetime) -> datetime:
    """SQLite hands back the naive UTC time it was given; PostgreSQL an aware one."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
