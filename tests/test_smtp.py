"""Mail through a real SMTP server (``AGENT_MAIL=smtp``): ``aiosmtplib`` in the worker, ``aiosmtpd`` on 127.0.0.1.

What "once" means with SMTP, which has no idempotency keys: the outbox records the email under its key before
the server sees it, marks it delivered once the server accepted it, and never hands a delivered email over
again; an email it cannot know to be delivered (the worker died between the server's acceptance and the
record of it) is handed over again with the same Message-ID. The port's rules common to every mailbox are in
``test_mail_contract.py``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from temporalio.client import Client

from activities.business import Business
from activities.business.mail import MailDeferredError, message_id
from activities.business.refusals import MailRefusedError
from activities.business.schema import emails
from activities.business.smtp import SmtpRelay
from activities.contracts.ticket import Status
from activities.contracts.world import EmailReceipt, EmailRequest
from agent_worker import wiring
from agent_worker.config import Settings
from agent_worker.config.mail_settings import SmtpSettings
from tests.support.crashlab import Lab
from tests.support.harness import Harness
from tests.support.history import activity_attempts
from tests.support.smtp_server import HOST, SENDER, MailServer, Received, self_signed, smtp_env, smtp_settings
from tests.support.tickets import ticket

NO_APPROVAL_NEEDED = 10_000
REFUND_EMAIL = ("Your refund for A-1001", "We have refunded USD 49.00 for order A-1001 (refund #1).")


def through(server: MailServer, folder: Path, **overrides: Any) -> Business:
    """A business whose outbox delivers through ``server``, built from settings as a worker builds it."""
    settings = Settings(db_path=folder / "business.sqlite3", smtp=smtp_settings(server, **overrides))
    return wiring.business(settings).create()


def email(key: str = "email:ticket:T-1/3/0", subject: str = "Your refund for A-1001") -> EmailRequest:
    return EmailRequest(to="ann@example.com", subject=subject, body=REFUND_EMAIL[1], idempotency_key=key)


async def send(store: Business, request: EmailRequest) -> EmailReceipt:
    """As the ``send_email`` activity calls the port: in a thread."""
    return await asyncio.to_thread(store.mail.send_email, request)


# --- the outbox and the relay, without Temporal --------------------------------------------------------------


async def test_the_email_is_recorded_under_its_key_before_the_server_has_it_and_marked_delivered_after(
    mail_server: MailServer, tmp_path: Path
) -> None:
    store = through(mail_server, tmp_path)
    seen_by_the_server: list[Any] = []
    mail_server.on_message = lambda received: seen_by_the_server.append((received, store.mail.outbox()))

    await send(store, email())

    [(received, outbox_then)] = seen_by_the_server
    [entry_then] = outbox_then
    assert entry_then.delivered_at is None  # recorded, and not yet known to be delivered
    assert (
        received.message["Message-ID"]
        == entry_then.email.message_id
        == message_id(email().idempotency_key, "example.com")
    )
    [entry] = store.mail.outbox()
    assert entry.delivered_at is not None
    assert entry.smtp_reply is not None
    assert "queued as Q1" in entry.smtp_reply


async def test_a_deferred_email_stays_undelivered_and_the_next_attempt_delivers_the_same_message(
    mail_server: MailServer, tmp_path: Path
) -> None:
    store = through(mail_server, tmp_path)
    mail_server.deferrals.append("451 4.3.0 Mailbox busy, try again later")

    with pytest.raises(MailDeferredError, match=r"deferred the email: 451 4.3.0 Mailbox busy"):
        await send(store, email())
    [entry] = store.mail.outbox()
    assert entry.delivered_at is None
    assert entry.smtp_reply == "The mail server deferred the email: 451 4.3.0 Mailbox busy, try again later"
    assert mail_server.messages() == []

    receipt = await send(store, email())

    assert not receipt.replayed  # this call is the one that delivered it
    [received] = mail_server.messages()
    assert received.message["Message-ID"] == entry.email.message_id
    assert store.mail.sent() == [email()]


async def test_a_recipient_the_server_refuses_for_good_is_a_refusal_in_the_servers_words(
    mail_server: MailServer, tmp_path: Path
) -> None:
    store = through(mail_server, tmp_path)
    mail_server.refuse_recipients = "550 5.1.1 <ann@example.com>: Recipient address rejected: User unknown"

    with pytest.raises(MailRefusedError, match=r"refused the recipient: 550 5.1.1 .*User unknown"):
        await send(store, email())
    assert mail_server.messages() == []
    assert store.mail.sent() == []


async def test_an_answer_to_the_customers_mail_carries_the_same_in_reply_to_and_references_on_every_delivery(
    mail_server: MailServer, tmp_path: Path
) -> None:
    """The threading headers are recorded with the email, like its Message-ID: a delivery again after the worker
    lost the server's acceptance is the same bytes, and a repeat of the key naming other mail changes nothing."""
    store = through(mail_server, tmp_path)
    chain = ["<first@example.com>", f"<{'r' * 200}@example.com>", "<reply@example.com>"]
    answering = email().model_copy(update={"in_reply_to": chain[-1], "references": chain})
    await send(store, answering)
    with store.database.writer.begin() as db:  # the worker died before it recorded the acceptance
        db.execute(emails.update().values(delivered_at=None))

    later = answering.model_copy(update={"in_reply_to": "<later@example.com>", "references": ["<later@example.com>"]})
    receipt = await send(store, later)

    assert not receipt.replayed
    first, again = mail_server.messages()
    assert again.message.as_bytes() == first.message.as_bytes()
    assert again.message["In-Reply-To"] == "<reply@example.com>"
    assert str(again.message["References"]).split() == chain  # a long id stays one id, never an encoded word
    assert store.mail.sent() == [answering]


async def test_an_answer_naming_mail_whose_id_would_write_a_header_is_refused_before_the_server_sees_it(
    mail_server: MailServer, tmp_path: Path
) -> None:
    """The contracts refuse such an id where it comes in; the relay is the last door before the wire."""
    store = through(mail_server, tmp_path)
    injected = email().model_copy(update={"in_reply_to": "<a@example.com>\r\nBcc: mallory@example.net"})

    with pytest.raises(MailRefusedError, match=r"cannot be sent as written: the Message-ID it answers is not one"):
        await send(store, injected)
    assert mail_server.messages() == []


async def test_a_server_that_does_not_answer_the_door_is_worth_retrying(tmp_path: Path) -> None:
    with socket.socket() as taken:  # bound and not listening: a connection to it is refused, and no one else gets it
        taken.bind((HOST, 0))
        settings = Settings(
            db_path=tmp_path / "business.sqlite3",
            smtp=SmtpSettings(mail="smtp", host=HOST, port=taken.getsockname()[1], security="none", mail_from=SENDER),
        )
        store = wiring.business(settings).create()

        with pytest.raises(MailDeferredError, match="could not be reached"):
            await send(store, email())
    assert store.mail.sent() == []


async def test_a_subject_over_two_lines_is_refused_rather_than_turned_into_a_header_of_its_own(
    mail_server: MailServer, tmp_path: Path
) -> None:
    store = through(mail_server, tmp_path)

    with pytest.raises(MailRefusedError, match="cannot be sent as written"):
        await send(store, email(subject="Your refund\r\nBcc: everyone@example.com"))
    assert mail_server.messages() == []


@pytest.fixture
def tls_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[MailServer, dict[str, Any]]]:
    """A server with a self-signed certificate, TLS from the first byte or STARTTLS as the test is parametrized,
    that demands a login; and the settings that reach it."""
    certificate = self_signed(tmp_path)
    security = request.param
    server = MailServer(logins={"agent": "s3cret-smtp-password"})
    if security == "tls":
        server.tls = certificate.server_context()
    else:
        server.starttls = certificate.server_context()
    with server.running():
        yield (
            server,
            {
                "security": security,
                "username": "agent",
                "password": "s3cret-smtp-password",
                "ca_file": certificate.cert,
            },
        )


@pytest.mark.parametrize("tls_server", ["starttls", "tls"], indirect=True)
async def test_tls_and_starttls_deliver_with_a_login_to_a_server_whose_certificate_the_worker_trusts(
    tls_server: tuple[MailServer, dict[str, Any]], tmp_path: Path
) -> None:
    server, settings = tls_server
    store = through(server, tmp_path, **settings)

    await send(store, email())

    assert [m.rcpt_tos for m in server.messages()] == [["ann@example.com"]]


@pytest.mark.parametrize("tls_server", ["starttls", "tls"], indirect=True)
async def test_a_certificate_nobody_vouched_for_gets_no_email_and_no_password(
    tls_server: tuple[MailServer, dict[str, Any]], tmp_path: Path
) -> None:
    server, settings = tls_server
    store = through(server, tmp_path, **{**settings, "ca_file": None})

    with pytest.raises(MailRefusedError, match=r"not the one configured: .*CERTIFICATE_VERIFY_FAILED"):
        await send(store, email())
    assert server.messages() == []


@pytest.mark.parametrize("tls_server", ["starttls"], indirect=True)
async def test_a_wrong_password_is_a_refusal_for_good(
    tls_server: tuple[MailServer, dict[str, Any]], tmp_path: Path
) -> None:
    server, settings = tls_server
    store = through(server, tmp_path, **{**settings, "password": "not-the-password"})

    with pytest.raises(MailRefusedError, match="refused the email: 535"):
        await send(store, email())
    assert server.messages() == []


# --- the settings ------------------------------------------------------------------------------------------------


def test_smtp_without_a_server_or_a_sender_does_not_start_and_says_what_is_missing() -> None:
    with pytest.raises(ValidationError, match="AGENT_MAIL=smtp needs AGENT_SMTP_HOST and AGENT_MAIL_FROM"):
        SmtpSettings(mail="smtp")
    with pytest.raises(ValidationError, match="AGENT_MAIL=smtp needs AGENT_MAIL_FROM"):
        SmtpSettings(mail="smtp", host="mail.example.com")
    with pytest.raises(ValidationError, match="AGENT_MAIL_FROM must name an address"):
        SmtpSettings(mail="smtp", host="mail.example.com", mail_from="Support")


def test_a_password_is_never_sent_in_clear_to_another_machine_and_never_shown() -> None:
    login: dict[str, Any] = {"username": "agent", "password": "s3cret-smtp-password", "mail_from": SENDER}
    with pytest.raises(ValidationError, match="would send AGENT_SMTP_PASSWORD in clear"):
        SmtpSettings(mail="smtp", host="mail.example.com", security="none", **login)
    with pytest.raises(ValidationError, match="go together"):
        SmtpSettings(mail="smtp", host="mail.example.com", username="agent", mail_from=SENDER)

    settings = Settings(smtp=SmtpSettings(mail="smtp", host="mail.example.com", **login))

    relay = wiring.mail_relay(settings)
    assert isinstance(relay, SmtpRelay)
    assert str(relay) == "smtp://agent@mail.example.com:587 (starttls), from support@example.com"
    for shown in (str(settings), repr(settings), str(relay), repr(relay.server)):
        assert "s3cret" not in shown


def test_a_worker_told_to_send_by_smtp_without_a_server_refuses_to_start_saying_why(tmp_path: Path) -> None:
    env = {**os.environ, "AGENT_MAIL": "smtp", "AGENT_MAIL_FROM": SENDER, "AGENT_DB_PATH": str(tmp_path / "b.sqlite3")}
    agent_worker = str(Path(sys.executable).with_name("agent-worker"))
    done = subprocess.run([agent_worker, "worker"], env=env, capture_output=True, text=True, timeout=60, check=False)

    assert done.returncode != 0
    assert "AGENT_MAIL=smtp needs AGENT_SMTP_HOST" in done.stderr


def test_mail_settings_left_empty_by_compose_are_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SMTP_HOST", "SMTP_PORT", "SMTP_USERNAME", "SMTP_PASSWORD", "SMTP_CA_FILE", "MAIL_FROM"):
        monkeypatch.setenv(f"AGENT_{name}", "")  # what ${AGENT_SMTP_PORT:-} gives a variable nobody set

    settings = Settings()

    unset = (settings.smtp.host, settings.smtp.port, settings.smtp.username, settings.smtp.password)
    assert (*unset, settings.smtp.ca_file, settings.smtp.mail_from) == (None,) * 6
    assert wiring.mail_relay(settings) is None


# --- whole tickets, on a real Temporal server ---------------------------------------------------------------


@pytest.fixture
def mailing(client: Client, mail_server: MailServer, tmp_path: Path) -> Harness:
    """A harness whose worker mails through ``mail_server``."""
    return Harness(client, through(mail_server, tmp_path), task_queue=f"smtp-{uuid.uuid4()}")


def assert_the_refund_email(received: Received, store: Business, ticket_id: str) -> None:
    [entry] = store.mail.outbox()
    assert entry.idempotency_key is not None
    assert entry.idempotency_key.startswith(f"email:ticket:{ticket_id}/")
    assert (received.mail_from, received.rcpt_tos) == ("support@example.com", ["ann@example.com"])
    assert received.message["From"] == SENDER
    assert received.message["To"] == "ann@example.com"
    assert received.message["Subject"] == REFUND_EMAIL[0]
    assert received.message["Message-ID"] == message_id(entry.idempotency_key, "example.com")
    assert received.body == REFUND_EMAIL[1] + "\n"
    assert entry.delivered_at is not None
    assert received.message["In-Reply-To"] is None  # a ticket started without mail answers none
    assert received.message["References"] is None


async def test_a_ticket_delivers_exactly_one_message_to_the_customer_with_its_headers_and_body(
    mailing: Harness, mail_server: MailServer
) -> None:
    outcome = await mailing.run(ticket(approval_limit_cents=NO_APPROVAL_NEEDED))

    assert outcome.status is Status.RESOLVED
    [received] = mail_server.messages()
    assert_the_refund_email(received, mailing.store, outcome.ticket_id)
    email_call = next(c for c in outcome.tool_calls if c.name == "send_email")
    assert email_call.result == f"Email #{mailing.store.mail.outbox()[0].email.email_id} sent to ann@example.com."


async def test_a_4xx_then_success_is_retried_by_temporal_and_delivers_once(
    mailing: Harness, mail_server: MailServer
) -> None:
    mail_server.deferrals.append("451 4.7.1 Greylisted, come back later")
    async with mailing.worker():
        handle = await mailing.start(ticket(approval_limit_cents=NO_APPROVAL_NEEDED))
        outcome = await handle.result()

    assert outcome.status is Status.RESOLVED
    assert await activity_attempts(handle, "send_email") == [2]
    [received] = mail_server.messages()
    assert_the_refund_email(received, mailing.store, outcome.ticket_id)


async def test_a_5xx_is_handed_to_the_model_as_a_tool_error_at_once_and_the_ticket_still_answers(
    mailing: Harness, mail_server: MailServer
) -> None:
    mail_server.refuse_recipients = "550 5.1.1 <ann@example.com>: Recipient address rejected: User unknown"
    async with mailing.worker():
        handle = await mailing.start(ticket(approval_limit_cents=NO_APPROVAL_NEEDED))
        outcome = await handle.result()

    assert await activity_attempts(handle, "send_email") == [1]  # non-retryable: no retry spent on it
    email_call = next(c for c in outcome.tool_calls if c.name == "send_email")
    assert email_call.is_error
    assert "550 5.1.1 <ann@example.com>: Recipient address rejected: User unknown" in email_call.result
    assert outcome.status is Status.RESOLVED
    assert "I could not email you" in outcome.answer
    assert mail_server.messages() == []
    assert [r.amount_cents for r in mailing.store.payments.refunds()] == [4900]


# --- real worker processes, killed ------------------------------------------------------------------------------


@pytest.fixture
async def lab(client: Client, store: Business, mail_server: MailServer) -> AsyncIterator[Lab]:
    """Worker processes that mail through ``mail_server``; ``store`` reads the outbox they share."""
    async with Lab(client, store, settings=smtp_env(mail_server)) as lab:
        yield lab


@pytest.mark.slow
async def test_a_worker_killed_after_the_server_accepted_the_email_delivers_it_once(
    lab: Lab, mail_server: MailServer
) -> None:
    """The acceptance was recorded before the kill: the retry finds the email delivered and sends nothing."""
    lab.settings["AGENT_FAULTS"] = "after:send_email=kill"
    handle = await lab.start(ticket(approval_limit_cents=NO_APPROVAL_NEEDED))
    outcome = await lab.supervise(handle)

    assert len(lab.killed()) == 1
    assert await activity_attempts(handle, "send_email") == [2]
    [received] = mail_server.messages()
    assert_the_refund_email(received, lab.store, outcome.ticket_id)
    assert outcome.status is Status.RESOLVED


@pytest.mark.slow
async def test_a_worker_killed_before_it_recorded_the_servers_acceptance_sends_the_same_message_again(
    lab: Lab, mail_server: MailServer
) -> None:
    """The one window SMTP leaves open: the server holds the email, the outbox does not know. The retry hands it
    over again, with the same Message-ID, so the two copies are recognisably one message (at least once)."""

    def kill_the_sender(_received: Received) -> None:
        if len(mail_server.messages()) == 1:  # the first copy: the server has it, the worker has not heard so
            os.kill(lab.workers[-1].pid, signal.SIGKILL)

    mail_server.on_message = kill_the_sender
    handle = await lab.start(ticket(approval_limit_cents=NO_APPROVAL_NEEDED))
    outcome = await lab.supervise(handle)

    assert len(lab.killed()) == 1
    assert await activity_attempts(handle, "send_email") == [2]
    first, again = mail_server.messages()
    assert again.message["Message-ID"] == first.message["Message-ID"]
    assert again.message.as_bytes() == first.message.as_bytes()  # the same message, Date and all
    assert_the_refund_email(again, lab.store, outcome.ticket_id)
    assert outcome.status is Status.RESOLVED
    assert [r.amount_cents for r in lab.store.payments.refunds()] == [4900]
