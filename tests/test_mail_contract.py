"""What every way of sending mail behind the ``Mail`` port must do, tried through the port alone.

The port is called as the tool activities call it, in a thread (an SMTP delivery runs its own event loop
there). A mailbox comes with one thing besides the port: what reached the customer's mailbox (the embedded outbox's
table, where recording is sending; the SMTP server's accepted messages, for mail through a real server). The
tests use nothing else, so another implementation passes or fails the same module by adding itself to
``mailbox``'s parameters. What only the SMTP relay does (deferrals, refusals, TLS, the order of recording and
delivering, crashes) is in ``test_smtp.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pytest

from activities.business import Business
from activities.business.mail import Mail
from activities.business.refusals import IdempotencyConflictError
from activities.contracts.world import EmailReceipt, EmailRequest
from agent_worker import wiring
from agent_worker.config import Settings
from tests.support.smtp_server import MailServer, smtp_settings

Delivered = tuple[str, str, str]
"""To, subject and body of a message as it reached the mailbox."""


class Mailbox(Protocol):
    @property
    def mail(self) -> Mail: ...

    def delivered(self) -> list[Delivered]: ...


def trail(mailbox: Mailbox, ticket_id: str = "T-1") -> list[str]:
    """The ticket's audit trail, as the outbox wrote it beside its emails."""
    store: Business = mailbox.store  # type: ignore[attr-defined]
    return store.audit.entries(ticket_id)


@dataclass
class Embedded:
    """The embedded outbox: an email is delivered when it is recorded."""

    store: Business

    @property
    def mail(self) -> Mail:
        return self.store.mail

    def delivered(self) -> list[Delivered]:
        return [(e.to, e.subject, e.body) for e in self.store.mail.sent()]


@dataclass
class ThroughSmtp:
    """The outbox delivering through a real SMTP server: delivered is what the server accepted."""

    store: Business
    server: MailServer

    @property
    def mail(self) -> Mail:
        return self.store.mail

    def delivered(self) -> list[Delivered]:
        # A text part ends with a line break (``EmailMessage.set_content`` adds one): not part of what was written.
        return [(m.rcpt_tos[0], str(m.message["Subject"]), m.body.removesuffix("\n")) for m in self.server.messages()]


@pytest.fixture(params=["embedded-sqlite", "embedded-postgresql", "smtp-sqlite", "smtp-postgresql"])
def mailbox(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Mailbox]:
    kind, backend = request.param.split("-")
    database = {"database_url": request.getfixturevalue("postgres_url")} if backend == "postgresql" else {}
    if kind == "embedded":
        store = wiring.business(Settings(db_path=tmp_path / "business.sqlite3", **database))
        store.create(seed_demo_orders=False)
        yield Embedded(store)
    else:
        server = request.getfixturevalue("mail_server")
        settings = Settings(db_path=tmp_path / "business.sqlite3", **database, smtp=smtp_settings(server))
        store = wiring.business(settings).create(seed_demo_orders=False)
        yield ThroughSmtp(store, server)
    store.close()


async def send(mailbox: Mailbox, request: EmailRequest) -> EmailReceipt:
    return await asyncio.to_thread(mailbox.mail.send_email, request)


def email(key: str = "email:ticket:T-1/3/0", body: str = "We have refunded 49.00 € (refund #1).") -> EmailRequest:
    return EmailRequest(
        to="ann@example.com", subject="Your refund for A-1001, Grüße aus Köln", body=body, idempotency_key=key
    )


async def test_an_email_reaches_the_mailbox_as_written(mailbox: Mailbox) -> None:
    receipt = await send(mailbox, email())

    assert not receipt.replayed
    assert receipt.to == "ann@example.com"
    assert mailbox.delivered() == [("ann@example.com", email().subject, email().body)]


async def test_a_repeat_under_its_key_delivers_nothing_and_returns_the_first_receipt(mailbox: Mailbox) -> None:
    first = await send(mailbox, email())
    again = await send(mailbox, email())

    assert again == first.model_copy(update={"replayed": True})
    assert len(mailbox.delivered()) == 1


async def test_another_email_under_a_used_key_is_refused_and_delivers_nothing(mailbox: Mailbox) -> None:
    await send(mailbox, email())

    with pytest.raises(IdempotencyConflictError, match="was used for another email"):
        await send(mailbox, email(body="We have refunded 59.00."))
    assert [body for _to, _subject, body in mailbox.delivered()] == [email().body]


async def test_the_same_words_under_two_keys_are_two_emails(mailbox: Mailbox) -> None:
    first = await send(mailbox, email("email:ticket:T-1/3/0"))
    second = await send(mailbox, email("email:ticket:T-1/5/0"))

    assert first.email_id != second.email_id
    assert not second.replayed
    assert len(mailbox.delivered()) == 2


async def test_a_tickets_email_has_its_audit_entry_once_however_often_it_is_sent(mailbox: Mailbox) -> None:
    receipt = await send(mailbox, email())
    await send(mailbox, email())
    with pytest.raises(IdempotencyConflictError):
        await send(mailbox, email(body="We have refunded 59.00."))

    how = "sent" if isinstance(mailbox, Embedded) else "queued for the mail server"
    assert trail(mailbox) == [
        f'email #{receipt.email_id} to ann@example.com, "{email().subject}", {how} under key email:ticket:T-1/3/0'
    ]


async def test_an_email_no_ticket_wrote_has_no_audit_entry_and_a_long_subject_is_cut(mailbox: Mailbox) -> None:
    await send(mailbox, email("email:operator/1"))
    long = email("email:ticket:T-2/3/0").model_copy(update={"subject": "x" * 5000})
    await send(mailbox, long)

    store: Business = mailbox.store  # type: ignore[attr-defined]
    assert [e for e in store.audit.entries() if "operator" in e] == []
    (entry,) = trail(mailbox, "T-2")
    assert "… [cut here: " in entry
    assert len(entry.encode()) < 400
