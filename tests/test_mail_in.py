"""Customers' mail in (``agent-worker mail-in``): the real receiver on 127.0.0.1, fed by ``aiosmtplib`` (and
``smtplib`` over LMTP) as the desk's mail server would feed it, with a real Temporal server and worker behind it.

The adversaries: a mail server that delivers the same message again (it never heard the answer), a customer who
replies twice, someone else who replies to a customer's ticket, machines answering machines (auto-replies,
bounces), a message built to be too much to read, and a Temporal cluster that is down when the mail comes.
"""

from __future__ import annotations

import asyncio
import base64
import email
import os
import re
import signal
import smtplib
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from email.message import EmailMessage
from email.policy import SMTP as SMTP_POLICY
from pathlib import Path
from typing import Any

import aiohttp
import aiosmtplib
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DescribeWorkflowExecutionRequest
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from activities.business.reply_addresses import ReplyAddresses
from activities.contracts.limits import NOTES_KEPT, REFERENCES_KEPT
from activities.contracts.names import CUSTOMER_MESSAGE, MAIL_BOUNCED, MAIL_MEMO
from activities.contracts.ticket import CustomerMessage, Status, TicketInput, Turn
from agent_worker import tickets, wiring
from agent_worker.cli.devserver import free_port, start_dev_server
from agent_worker.client import connect
from agent_worker.config import Settings
from agent_worker.config.codec_settings import CodecSettings
from agent_worker.config.mail_in import MailInSettings
from agent_worker.config.mail_settings import SmtpSettings
from agent_worker.mail_in import MailOrigin, listening
from agent_worker.mail_in.reading import key_of, ticket_id_of
from agent_worker.mail_in.senders import TxtLookup, Unanswered, aligned_signatures
from tests.support import tickets as support_tickets
from tests.support.harness import Harness
from tests.support.held_proxy import HeldProxy
from tests.support.history import activity_attempts
from tests.support.models import PlaybackModel, calls, says
from tests.support.name_server import NameServer, can_own_resolver, own_resolver
from tests.support.processes import AGENT_WORKER, address, spawn_worker
from tests.support.signed_mail import Domains
from tests.support.smtp_server import MailServer, smtp_settings
from tests.support.waits import poll, waiting_for_customer

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
DESK = "support@desk.example"
QUESTION = "My parcel for order A-1001 never arrived. Can I have my money back?"


def mail(
    text: str = QUESTION, *, sender: str = "Ann <ann@example.com>", message_id: str | None = None, **headers: str
) -> EmailMessage:
    """A customer's message as their mail program writes it, with a Message-ID of its own unless told."""
    message = EmailMessage()
    message["From"] = sender
    message["To"] = DESK
    message["Subject"] = "My order"
    message["Message-ID"] = message_id or f"<{uuid.uuid4().hex}@example.com>"
    for name, value in headers.items():
        message[name.replace("_", "-")] = value
    message.set_content(text)
    return message


def workflow_of(message_id: str) -> str:
    return tickets.workflow_id_of(ticket_id_of(key_of(message_id)))


DOMAINS = (
    Domains()
    .add("example.com")
    .add("example.net")
    .add("evil.example")
    .add("mail.example.com", dmarc=None)
    .add("co.uk", dmarc=None)
    .add("github.io", dmarc=None)
    .add("strict.example", dmarc="v=DMARC1; p=reject; adkim=s")
)
"""The customers' mail providers: Ann's (example.com, and its mail.example.com), Mallory's (example.net), one that
signs anything, a domain that asks for strict alignment, and two public suffixes (whose keys a registry or a host of
pages could publish, and whose signatures speak for none of the domains under them)."""


def signed(message: EmailMessage, by: str | None = None) -> bytes:
    """The message as the provider of its From: domain (or ``by``) sends it: DKIM-signed."""
    data = message.as_bytes(policy=SMTP_POLICY)
    addresses = message["From"].addresses
    domain = by or (str(addresses[0].domain) if addresses else "example.com")
    return DOMAINS.sign(data, domain)


async def deliver(
    port: int, message: EmailMessage | bytes, mail_from: str = "ann@example.com", to: str = DESK
) -> tuple[int, str]:
    """The receiver's answer to the message's DATA, as the sending server reads it; a message is signed by its
    From: domain's provider, bytes go as they are."""
    data = signed(message) if isinstance(message, EmailMessage) else message
    smtp = aiosmtplib.SMTP(hostname=HOST, port=port, timeout=120)
    await smtp.connect()
    try:
        await smtp.ehlo()
        await smtp.mail(mail_from)
        await smtp.rcpt(to)
        answer = await smtp.data(data)
    except aiosmtplib.SMTPResponseException as refused:
        return refused.code, refused.message
    else:
        return answer.code, answer.message
    finally:
        smtp.close()


@asynccontextmanager
async def receiver(
    agent: Harness,
    client: Client | None = None,
    *,
    smtp: SmtpSettings | None = None,
    lookup: TxtLookup = DOMAINS.lookup,
    **mail_in: Any,
) -> AsyncIterator[int]:
    """The receiver for the harness's queue, speaking SMTP (unless told; ``mail_in``: its settings) on a free
    port, which it yields; ``smtp``: the desk's mail settings, whose reply key signs its reply addresses; ``lookup``:
    its DNS (the test's ``DOMAINS`` unless told)."""
    built = agent.settings(
        mail_in=MailInSettings(**{"protocol": "smtp", **mail_in}), **({"smtp": smtp} if smtp is not None else {})
    )
    async with listening(client or agent.client, built, port=0, lookup=lookup) as server:
        yield server.sockets[0].getsockname()[1]


async def turns(client: Client, workflow_id: str) -> list[Turn]:
    return await tickets.turns(client, workflow_id)


async def origin(client: Client, workflow_id: str) -> MailOrigin:
    found: MailOrigin = await (await tickets.describe(client, workflow_id)).memo_value(MAIL_MEMO, type_hint=MailOrigin)
    return found


async def exists(client: Client, workflow_id: str) -> bool:
    try:
        await tickets.describe(client, workflow_id)
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


# --- new mail -------------------------------------------------------------------------------------------------


async def test_a_message_starts_one_ticket_that_refunds_the_customers_order_once_and_never_reads_the_attachment(
    agent: Harness, client: Client
) -> None:
    message = mail()
    message.add_attachment(b"%PDF-1.4 the receipt", maintype="application", subtype="pdf", filename="receipt.pdf")
    async with agent.worker(), receiver(agent) as port:
        code, said = await deliver(port, message)
        workflow_id = workflow_of(message["Message-ID"])
        assert (code, said) == (250, f"2.0.0 Taken as {workflow_id}")
        handle = tickets.handle(client, workflow_id)
        await waiting_for_customer(handle, turns=1)
        (turn,) = await turns(client, workflow_id)
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    assert turn.message == QUESTION
    recorded = await origin(client, workflow_id)
    assert (recorded.sender, [(a.name, a.bytes) for a in recorded.attachments]) == (
        "ann@example.com",
        [("receipt.pdf", 20)],
    )
    await handle.cancel(reason="the test is over")


async def test_an_html_message_is_read_as_its_text_and_the_quoted_history_is_cut(
    agent: Harness, client: Client
) -> None:
    message = mail("")
    message.set_content(
        "<html><body><p>Where is my <b>refund</b> for A-1001?</p>"
        "<p>On Tue, 1 Dec 2026 at 10:00, Support &lt;support@desk.example&gt; wrote:</p>"
        "<blockquote>We are looking into it.</blockquote></body></html>",
        subtype="html",
    )
    async with receiver(agent) as port:  # no worker: the ticket's input is what is read here
        assert (await deliver(port, message))[0] == 250
    started = await tickets.ticket_input(client, workflow_of(message["Message-ID"]), "")
    assert started["question"] == "Where is my refund for A-1001?"
    await tickets.handle(client, workflow_of(message["Message-ID"])).terminate(reason="the test is over")


async def test_the_same_message_delivered_three_times_is_one_ticket_and_one_refund(
    agent: Harness, client: Client
) -> None:
    message = mail()
    workflow_id = workflow_of(message["Message-ID"])
    async with agent.worker(), receiver(agent) as port:
        answers = [await deliver(port, message) for _ in range(3)]
        await waiting_for_customer(tickets.handle(client, workflow_id), turns=1)
        answers.append(await deliver(port, message))  # after the ticket answered, too
        assert len(await turns(client, workflow_id)) == 1
    assert [code for code, _ in answers] == [250] * 4
    assert {said for _, said in answers} == {f"2.0.0 Taken as {workflow_id}"}
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    count = await tickets.count(client, f"WorkflowId = '{workflow_id}'")
    assert count == 1
    await tickets.handle(client, workflow_id).cancel(reason="the test is over")


async def test_a_message_without_a_message_id_delivered_twice_is_one_ticket_by_its_content(
    agent: Harness, client: Client
) -> None:
    message = mail()
    del message["Message-ID"]
    sent = signed(message)  # a sending server delivers again the bytes it kept: signed once, not at each try
    async with receiver(agent) as port:
        first = await deliver(port, sent)
        again = await deliver(port, sent)
    assert first == again
    assert first[0] == 250
    workflow_id = first[1].removeprefix("2.0.0 Taken as ")
    assert workflow_id.startswith("ticket-mail-")
    assert (await origin(client, workflow_id)).message_id.startswith("sha256:")
    await tickets.handle(client, workflow_id).terminate(reason="the test is over")


async def test_a_delivery_whose_answer_never_reached_the_sender_is_sent_again_and_is_still_one_ticket(
    agent: Harness, client: Client
) -> None:
    """The sending server's connection drops after the message's data went and before it read the answer (a
    receiver killed once the ticket started looks the same to it): it keeps the message and delivers it again."""
    message = mail()
    workflow_id = workflow_of(message["Message-ID"])
    async with agent.worker(), receiver(agent) as port:
        reader, writer = await asyncio.open_connection(HOST, port)
        for line in (b"EHLO mta.example", b"MAIL FROM:<ann@example.com>", f"RCPT TO:<{DESK}>".encode(), b"DATA"):
            writer.write(line + b"\r\n")
        writer.write(signed(message) + b"\r\n.\r\n")
        await writer.drain()
        await poll(lambda: exists(client, workflow_id), what="the ticket of the message whose answer is lost")
        writer.close()  # the answer never read
        assert await deliver(port, message) == (250, f"2.0.0 Taken as {workflow_id}")
        await waiting_for_customer(tickets.handle(client, workflow_id), turns=1)
        assert len(await turns(client, workflow_id)) == 1
    del reader
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    await tickets.handle(client, workflow_id).cancel(reason="the test is over")


async def test_the_desk_mail_server_delivers_over_lmtp(agent: Harness, client: Client) -> None:
    message = mail()
    async with receiver(agent, protocol="lmtp") as port:

        def over_lmtp() -> dict[str, tuple[int, bytes]]:
            with smtplib.LMTP(HOST, port) as lmtp:
                refused: dict[str, tuple[int, bytes]] = lmtp.send_message(message, "ann@example.com", [DESK])
                return refused

        assert await asyncio.to_thread(over_lmtp) == {}
    assert await exists(client, workflow_of(message["Message-ID"]))
    await tickets.handle(client, workflow_of(message["Message-ID"])).terminate(reason="the test is over")


async def test_a_message_for_two_recipients_is_taken_for_one_and_deferred_for_the_other(
    agent: Harness, client: Client
) -> None:
    """LMTP answers once per recipient; the receiver takes one a message, so each answer it gives is true."""
    message = mail()
    async with receiver(agent, protocol="lmtp") as port:

        def over_lmtp() -> dict[str, tuple[int, bytes]]:
            with smtplib.LMTP(HOST, port) as lmtp:
                refused: dict[str, tuple[int, bytes]] = lmtp.sendmail(
                    "ann@example.com", [DESK, "sales@desk.example"], signed(message)
                )
                return refused

        refused = await asyncio.to_thread(over_lmtp)
    assert {to: code for to, (code, _) in refused.items()} == {"sales@desk.example": 452}
    assert await exists(client, workflow_of(message["Message-ID"]))
    await tickets.handle(client, workflow_of(message["Message-ID"])).terminate(reason="the test is over")


# --- replies --------------------------------------------------------------------------------------------------


async def test_a_reply_continues_its_ticket_and_the_same_reply_twice_is_one_turn(
    agent: Harness, client: Client
) -> None:
    first = mail("Hello, I have a question about my orders.")
    workflow_id = workflow_of(first["Message-ID"])
    reply = mail("Thank you! Will the refund show on my card statement?", In_Reply_To=first["Message-ID"])
    async with agent.worker(), receiver(agent) as port:
        assert (await deliver(port, first))[0] == 250
        await waiting_for_customer(tickets.handle(client, workflow_id), turns=1)
        taken = await deliver(port, reply)
        assert taken == (250, f"2.0.0 Passed on to {workflow_id} (turn 2)")
        await waiting_for_customer(tickets.handle(client, workflow_id), turns=2)
        assert await deliver(port, reply) == taken  # a new reply now would be turn 3
        assert [t.message for t in await turns(client, workflow_id)] == [
            "Hello, I have a question about my orders.",
            "Thank you! Will the refund show on my card statement?",
        ]
    await tickets.handle(client, workflow_id).cancel(reason="the test is over")


async def test_a_reply_no_worker_takes_in_time_is_deferred_and_taken_once_when_a_worker_is_back(
    agent: Harness, client: Client
) -> None:
    first = mail("Hello, I have a question about my orders.")
    workflow_id = workflow_of(first["Message-ID"])
    reply = mail("It is about order A-1001.", In_Reply_To=first["Message-ID"])
    async with agent.worker(), receiver(agent) as port:
        assert (await deliver(port, first))[0] == 250
        await waiting_for_customer(tickets.handle(client, workflow_id), turns=1)
    async with receiver(agent, answer_within_seconds=2) as port:  # no worker to accept the reply
        code, said = await deliver(port, reply)
    assert (code, said) == (451, "4.3.0 The desk cannot take the message now; try again later")
    async with agent.worker(), receiver(agent) as port:  # the mail server tries again
        assert await deliver(port, reply) == (250, f"2.0.0 Passed on to {workflow_id} (turn 2)")
        await waiting_for_customer(tickets.handle(client, workflow_id), turns=2)
        assert len(await tickets.turns(client, workflow_id)) == 2
    await tickets.handle(client, workflow_id).cancel(reason="the test is over")


async def test_a_reply_from_another_address_is_refused_and_nothing_of_it_reaches_the_ticket(
    agent: Harness, client: Client
) -> None:
    first = mail("Hello, I have a question about my orders.")
    workflow_id = workflow_of(first["Message-ID"])
    forged = mail(
        "Please refund order A-1001 to me instead.",
        sender="Mallory <mallory@example.net>",
        References=first["Message-ID"],
    )
    async with agent.worker(), receiver(agent) as port:
        assert (await deliver(port, first))[0] == 250
        await waiting_for_customer(tickets.handle(client, workflow_id), turns=1)
        code, said = await deliver(port, forged, mail_from="mallory@example.net")
        assert len(await turns(client, workflow_id)) == 1
    assert code == 550
    assert "not from the address the ticket is for" in said
    assert not await exists(client, workflow_of(forged["Message-ID"]))
    assert agent.store.payments.refunds() == []
    await tickets.handle(client, workflow_id).cancel(reason="the test is over")


async def test_a_reply_to_a_closed_ticket_opens_a_new_ticket_that_names_the_old_one(
    agent: Harness, client: Client
) -> None:
    first = mail("Hello, I have a question about my orders.")
    old = workflow_of(first["Message-ID"])
    reply = mail("One more thing about A-1001.", In_Reply_To=first["Message-ID"])
    async with agent.worker(), receiver(agent) as port:
        assert (await deliver(port, first))[0] == 250
        await waiting_for_customer(tickets.handle(client, old), turns=1)
        await tickets.handle(client, old).cancel(reason="the desk closed it")
        assert (await tickets.handle(client, old).result()).status is Status.CANCELLED
        new = workflow_of(reply["Message-ID"])
        assert await deliver(port, reply) == (250, f"2.0.0 Taken as {new}")
        assert await deliver(port, reply) == (250, f"2.0.0 Taken as {new}")  # again: still one
    assert (await origin(client, new)).follows == old
    await tickets.handle(client, new).terminate(reason="the test is over")


REPLY_KEY = "a-reply-key-of-at-least-thirty-two-characters"


@pytest.fixture
def mailing(client: Client, mail_server: MailServer, tmp_path: Path) -> Harness:
    """A harness whose worker mails through ``mail_server``, each email's Reply-To signed with ``REPLY_KEY``."""
    settings = Settings(db_path=tmp_path / "business.sqlite3", smtp=desk_mail(mail_server))
    return Harness(client, wiring.business(settings).create(), task_queue=f"mail-in-{uuid.uuid4()}")


def desk_mail(server: MailServer) -> SmtpSettings:
    return smtp_settings(server, reply_key=REPLY_KEY)


async def test_the_desks_answer_carries_a_reply_address_signed_for_its_ticket_where_the_customers_reply_goes(
    mailing: Harness, client: Client, mail_server: MailServer
) -> None:
    first = mail()
    workflow_id = workflow_of(first["Message-ID"])
    async with mailing.worker(smtp=desk_mail(mail_server)), receiver(mailing, smtp=desk_mail(mail_server)) as port:
        assert (await deliver(port, first))[0] == 250
        await waiting_for_customer(tickets.handle(client, workflow_id), turns=1)
        [answer] = mail_server.messages()
        reply_to = str(answer.message["Reply-To"])
        assert reply_to.startswith(f"support+{ticket_id_of(key_of(first['Message-ID']))}.")
        assert reply_to.endswith("@example.com")
        assert answer.message["Auto-Submitted"] == "auto-replied"
        reply = mail("Thank you! Will the refund show on my card statement?")  # no threading headers at all
        assert await deliver(port, reply, to=reply_to) == (250, f"2.0.0 Passed on to {workflow_id} (turn 2)")
        await waiting_for_customer(tickets.handle(client, workflow_id), turns=2)

        local, _, domain = reply_to.partition("@")
        forged = f"{local[:-1]}{'a' if local[-1] != 'a' else 'b'}@{domain}"  # one character of the MAC changed
        stray = mail("Refund A-1001 again please.")
        code, said = await deliver(port, stray, to=forged)
        assert len(await tickets.turns(client, workflow_id)) == 2
    assert (code, said) == (250, f"2.0.0 Taken as {workflow_of(stray['Message-ID'])}")  # a ticket of its own
    assert [r.amount_cents for r in mailing.store.payments.refunds()] == [4900]
    await tickets.handle(client, workflow_id).cancel(reason="the test is over")
    await tickets.handle(client, workflow_of(stray["Message-ID"])).terminate(reason="the test is over")


async def test_a_bounce_of_the_desks_mail_is_recorded_on_its_ticket_and_the_agent_writes_there_no_more(
    mailing: Harness, client: Client, mail_server: MailServer
) -> None:
    writes = PlaybackModel(
        [
            calls(("send_email", {"to": "ann@example.com", "subject": "Your order", "body": "We are on it."}), step=1),
            says("We have emailed you."),
            calls(("send_email", {"to": "ann@example.com", "subject": "Again", "body": "Still on it."}), step=3),
            says("We could not email you; a colleague will be in touch."),
        ]
    )
    first = mail("Hello, a question about my orders.")
    workflow_id = workflow_of(first["Message-ID"])
    async with (
        mailing.worker(writes, smtp=desk_mail(mail_server)),
        receiver(mailing, smtp=desk_mail(mail_server)) as port,
    ):
        assert (await deliver(port, first))[0] == 250
        await waiting_for_customer(tickets.handle(client, workflow_id), turns=1)
        [sent] = mail_server.messages()
        headers = "".join(f"{name}: {value}\n" for name, value in sent.message.items())
        code, said = await deliver(port, dsn(headers).as_bytes(), mail_from="")
        assert (code, said) == (250, f"2.0.0 Recorded on {workflow_id}: ann@example.com refused its mail (5.1.1)")
        reply = mail("Did you write to me?", In_Reply_To=first["Message-ID"])
        assert (await deliver(port, reply))[0] == 250
        await waiting_for_customer(tickets.handle(client, workflow_id), turns=2)
        await tickets.handle(client, workflow_id).cancel(reason="the test is over")
        outcome = await tickets.outcome(client, workflow_id)
    assert len(mail_server.messages()) == 1
    refused = [c for c in outcome.tool_calls if c.name == "send_email" and c.is_error]
    assert len(refused) == 1
    assert "refused the desk's last email for good (5.1.1 smtp; 550 5.1.1 No such user here)" in refused[0].result
    entries = mailing.store.audit.entries(outcome.ticket_id)
    assert any("ann@example.com bounced the desk's email: 5.1.1" in entry for entry in entries)


def writes_on_each_turn() -> PlaybackModel:
    """A model that emails the customer, then answers, on the first turn and on the second."""
    return PlaybackModel(
        [
            calls(("send_email", {"to": "ann@example.com", "subject": "Your order", "body": "We are on it."}), step=1),
            says("We have emailed you."),
            calls(("send_email", {"to": "ann@example.com", "subject": "Your order", "body": "Done."}), step=3),
            says("We have emailed you again."),
        ]
    )


async def test_the_desks_email_threads_under_the_customers_message_and_after_their_reply_under_the_reply(
    mailing: Harness, client: Client, mail_server: MailServer
) -> None:
    first = mail("Hello, a question about my orders.")
    workflow_id = workflow_of(first["Message-ID"])
    async with (
        mailing.worker(writes_on_each_turn(), smtp=desk_mail(mail_server)),
        receiver(mailing, smtp=desk_mail(mail_server)) as port,
    ):
        assert (await deliver(port, first))[0] == 250
        await waiting_for_customer(tickets.handle(client, workflow_id), turns=1)
        [answer] = mail_server.messages()
        assert answer.message["In-Reply-To"] == first["Message-ID"]
        assert answer.message["References"] == first["Message-ID"]

        # as the customer's mail program writes a reply to the desk's answer (RFC 5322, 3.6.4)
        reply = mail(
            "Thank you! And the other order?",
            In_Reply_To=answer.message["Message-ID"],
            References=f"{first['Message-ID']} {answer.message['Message-ID']}",
        )
        taken = await deliver(port, reply, to=str(answer.message["Reply-To"]))
        assert taken == (250, f"2.0.0 Passed on to {workflow_id} (turn 2)")
        await waiting_for_customer(tickets.handle(client, workflow_id), turns=2)
        _, again = mail_server.messages()
    assert again.message["In-Reply-To"] == reply["Message-ID"]
    assert str(again.message["References"]).split() == [
        first["Message-ID"],
        answer.message["Message-ID"],
        reply["Message-ID"],
    ]
    recorded = [entry.email.in_reply_to for entry in mailing.store.mail.outbox()]
    assert recorded == [first["Message-ID"], reply["Message-ID"]]  # kept with each email, for a delivery again
    await tickets.handle(client, workflow_id).cancel(reason="the test is over")


async def test_the_mail_the_desk_answers_is_handed_to_the_run_that_continues_the_ticket(
    agent: Harness, client: Client
) -> None:
    """A reply by mail taken by one run, and the email answering it sent by the next (a run continues as new
    after every model call here): the ``MailThread`` goes over with the rest of the toolbox."""
    started = {
        **support_tickets.ticket("Hello, a question.", reply_window_seconds=3600, continue_as_new_after_steps=1),
        "message_id": "<first@example.com>",
    }
    reply = {"text": "And the other order?", "message_id": "<reply@example.com>", "references": ["<answer@desk>"]}
    async with agent.worker(writes_on_each_turn()):
        handle = await agent.start(started)
        await waiting_for_customer(handle, turns=1)
        taken_by = (await handle.describe()).run_id
        await handle.execute_update(CUSTOMER_MESSAGE, reply)
        await waiting_for_customer(handle, turns=2)
        await handle.cancel(reason="the test is over")
        reply_run = client.get_workflow_handle(handle.id, run_id=taken_by)
        emailed_in_the_replys_run = await activity_attempts(reply_run, "send_email")
    assert emailed_in_the_replys_run == []  # the email answering it was sent by a run after it
    first, again = agent.store.mail.outbox()
    assert (first.email.in_reply_to, first.email.references) == ("<first@example.com>", ("<first@example.com>",))
    assert (again.email.in_reply_to, again.email.references) == (
        "<reply@example.com>",
        ("<first@example.com>", "<answer@desk>", "<reply@example.com>"),
    )


def raw_mail(message_id: str, text: str = "Hello, a question about my orders.", **headers: str) -> bytes:
    """A message written byte by byte, as no mail program would: its headers exactly as given, DKIM-signed by the
    customer's provider (the signature covers whatever the author wrote)."""
    lines = [
        "From: Ann <ann@example.com>",
        f"To: {DESK}",
        "Subject: My order",
        f"Message-ID: {message_id}",
        *(f"{name.replace('_', '-')}: {value}" for name, value in headers.items()),
        "Content-Type: text/plain; charset=utf-8",
        "",
        text,
        "",
    ]
    return DOMAINS.sign("\r\n".join(lines).encode(), "example.com")


LONG_ID = f"<{'a' * 300}@example.com>"
UNTRUSTED_IDS = {
    "a Message-ID of 314 characters": (LONG_ID, "(String should have at most 250 characters)"),
    "a control character in the Message-ID": ("<ab\x01cd@example.com>", "(a Message-ID must be printable ASCII)"),
    "an encoded word that decodes to a line break and a Bcc header": (
        "=?utf-8?q?<ab=0D=0ABcc:_mallory@example.net>?=",
        "its Message-ID header holds no <id> the desk can read",
    ),
}


@pytest.mark.parametrize("kind", list(UNTRUSTED_IDS))
async def test_a_message_id_built_to_inject_a_header_or_too_long_is_not_answered_under_and_the_mail_is_a_ticket(
    mailing: Harness, client: Client, mail_server: MailServer, kind: str
) -> None:
    """The Message-ID and References are the sender's words, and the desk writes them into its answer's headers:
    one the desk would not write is dropped, the answer says why, and the message is taken as the docs say (its
    ticket keyed by the id it could read, or by its whole content). The answer then carries no In-Reply-To, and
    nothing of the sender's becomes a header or a recipient of the desk's email."""
    message_id, why = UNTRUSTED_IDS[kind]
    message = raw_mail(message_id, References="=?utf-8?q?<x@example.com>=0D=0ABcc:_mallory@example.net?=")
    async with (
        mailing.worker(writes_on_each_turn(), smtp=desk_mail(mail_server)),
        receiver(mailing, smtp=desk_mail(mail_server)) as port,
    ):
        code, said = await deliver(port, message)
        assert code == 250, said
        found = re.fullmatch(r"2\.0\.0 Taken as (ticket-mail-\w+); the desk's answer will not thread under (.*)", said)
        assert found is not None, said
        workflow_id = found.group(1)
        assert why in found.group(2)
        if message_id == LONG_ID:  # one the desk can read is its ticket's id still: a delivery again is one ticket
            assert workflow_id == workflow_of(LONG_ID)
        assert (await deliver(port, message))[1] == said
        handle = tickets.handle(client, workflow_id)
        await waiting_for_customer(handle, turns=1)
        started = await tickets.ticket_input(client, workflow_id, "")
        [answer] = mail_server.messages()

        injected = {"text": "Anything else?", "message_id": "<ok@example.com>\r\nBcc: mallory@example.net"}
        with pytest.raises(WorkflowUpdateFailedError) as refused:  # a JSON caller's reply is held to the same shape
            await handle.execute_update(CUSTOMER_MESSAGE, injected)
        assert "Invalid reply: message_id: String should match pattern" in str(refused.value.cause)
        await handle.cancel(reason="the test is over")
    assert "message_id" not in started
    assert started["references"] == ["<x@example.com>"]  # what the encoded word held besides the line break
    assert (answer.mail_from, answer.rcpt_tos) == ("support@example.com", ["ann@example.com"])
    assert answer.message["In-Reply-To"] is None
    assert answer.message["References"] is None
    assert answer.message["Bcc"] is None
    assert sorted(answer.message.keys()) == sorted(
        [
            "From",
            "To",
            "Subject",
            "Date",
            "Message-ID",
            "Auto-Submitted",
            "Reply-To",
            "Content-Type",
            "Content-Transfer-Encoding",
            "MIME-Version",
        ]
    )


def test_a_message_id_that_would_write_a_header_is_refused_by_the_ticket_and_the_reply_naming_the_field() -> None:
    """The contracts every caller goes through (``agent-worker start``, the ``temporal`` CLI, the receiver) hold
    a Message-ID to one ``<...>`` of printable ASCII within its bound, and References to their count."""
    for bad in ["<a@example.com>\r\nBcc: mallory@example.net", "<a@example.com>\n", "<a\x00@example.com>", LONG_ID]:
        with pytest.raises(ValidationError, match=r"message_id"):
            TicketInput(ticket_id="T-1", question="Hello", customer_email="ann@example.com", message_id=bad)
        with pytest.raises(ValidationError, match=r"references\.0"):
            CustomerMessage(text="Hello", message_id="<ok@example.com>", references=[bad])
    too_many = [f"<{n}@example.com>" for n in range(REFERENCES_KEPT + 1)]
    with pytest.raises(ValidationError, match=r"references"):
        CustomerMessage(text="Hello", references=too_many)


async def test_a_flood_of_bounces_costs_the_trail_a_bounded_number_of_entries_and_each_is_accounted_for(
    agent: Harness,
) -> None:
    """Anyone who may signal a ticket can send it bounces: garbage, someone else's address, or the same bounce
    again and again. Each is told to the audit trail, but within the notes' bound, never an entry (an activity)
    apiece."""
    sent = NOTES_KEPT * 3
    async with agent.worker():
        handle = await agent.start(support_tickets.ticket("Please email me", reply_window_seconds=3600))
        await waiting_for_customer(handle, turns=1)
        for n in range(sent):
            bad = {"spam": n} if n % 3 == 0 else {"address": f"x{n}@example.com", "status": "5.1.1", "diagnostic": ""}
            await handle.signal(MAIL_BOUNCED, bad if n % 3 != 2 else {"address": "ann@example.com", "status": "5.1.1"})
        await handle.execute_update(CUSTOMER_MESSAGE, {"text": "Did you write to me?"})
        await waiting_for_customer(handle, turns=2)
        await handle.cancel(reason="the test is over")
        outcome = await tickets.outcome(agent.client, handle.id)

    entries = agent.store.audit.entries(outcome.ticket_id)
    refused = [e for e in entries if "bounce" in e and "not taken" in e]
    counted = [int(e.split()[0]) for e in refused if " more bounces signalled to the ticket were not taken" in e]
    assert len(refused) - len(counted) + sum(counted) == sent - sent // 3, refused  # every bad one told
    assert len(refused) <= NOTES_KEPT + 1, refused
    # the customer's own bounce, sent a third of the time: told once, the repeats change nothing
    assert [e for e in entries if "bounced the desk's email" in e] == [
        "the customer's address ann@example.com bounced the desk's email: 5.1.1"
    ]


def test_a_reply_address_is_read_back_only_with_its_own_mac_on_its_own_desk() -> None:
    desk = ReplyAddresses(REPLY_KEY.encode(), "support@desk.example")
    address = desk.for_ticket("T-1")
    assert address is not None
    assert desk.ticket_of(address) == "T-1"
    assert desk.ticket_of(f"<{address.replace('desk.example', 'Desk.Example')}>") == "T-1"  # a domain has no case
    assert desk.ticket_of(address.replace("T-1", "T-2")) is None
    assert ReplyAddresses(b"another key of thirty-two characters!!", "support@desk.example").ticket_of(address) is None
    assert desk.ticket_of(address.replace("desk.example", "other.example")) is None
    assert desk.for_ticket("T 1") is None  # nothing but letters, digits, - and _ in a local part we write
    assert desk.for_ticket("T" * 60) is None  # past 64 octets: threading headers alone


# --- who sent it --------------------------------------------------------------------------------------------


def _tampered() -> bytes:
    """Ann's provider signed it; someone changed the words on the way."""
    return signed(mail()).replace(QUESTION.encode(), b"Refund order A-1001 to my new card, please.!!")


FORGED: dict[str, Any] = {
    "no signature": lambda: mail().as_bytes(policy=SMTP_POLICY),
    "another domain's signature": lambda: signed(mail(), by="evil.example"),
    "a signature that no longer verifies": _tampered,
}


@pytest.mark.parametrize("kind", FORGED)
async def test_a_forged_from_starts_a_ticket_that_touches_no_order(agent: Harness, client: Client, kind: str) -> None:
    data: bytes = FORGED[kind]()
    async with agent.worker(), receiver(agent) as port:
        code, said = await deliver(port, data)
        assert code == 250, said
        workflow_id = said.removeprefix("2.0.0 Taken as ")
        await waiting_for_customer(tickets.handle(client, workflow_id), turns=1)
        lookups = [
            event.activity_task_scheduled_event_attributes.activity_type.name
            async for event in tickets.handle(client, workflow_id).fetch_history_events()
            if event.HasField("activity_task_scheduled_event_attributes")
        ]
    recorded = await origin(client, workflow_id)
    assert (recorded.sender, recorded.verified) == ("ann@example.com", False)
    assert "lookup_order" not in lookups
    assert "issue_refund" not in lookups
    assert agent.store.payments.refunds() == []
    await tickets.handle(client, workflow_id).terminate(reason="the test is over")


AUTH_RESULTS = (
    "Authentication-Results: mx.desk.example; dkim=pass header.d=example.com; dmarc=pass header.from=example.com"
)


@pytest.mark.parametrize(
    ("trusted", "header", "verified"),
    [
        ("mx.desk.example", AUTH_RESULTS, True),
        (None, AUTH_RESULTS, False),  # a header is anyone's word until the operator names the server to trust
        ("mx.desk.example", AUTH_RESULTS.replace("mx.desk.example", "mx.forger.example"), False),
        ("mx.desk.example", AUTH_RESULTS.replace("dmarc=pass", "dmarc=fail"), False),
        ("mx.desk.example", AUTH_RESULTS.replace("header.from=example.com", "header.from=evil.example"), False),
    ],
    ids=["the desk's server", "no server configured", "another server", "dmarc failed", "another domain judged"],
)
async def test_the_desks_own_authentication_results_verify_a_sender_only_under_its_configured_id(
    agent: Harness, client: Client, trusted: str | None, header: str, *, verified: bool
) -> None:
    message = mail()
    data = header.encode() + b"\r\n" + message.as_bytes(policy=SMTP_POLICY)  # no signature of its own
    async with receiver(agent, authserv_id=trusted or "") as port:
        assert (await deliver(port, data))[0] == 250
    workflow_id = workflow_of(message["Message-ID"])
    assert (await origin(client, workflow_id)).verified is verified
    started = await tickets.ticket_input(client, workflow_id, "")
    assert started["sender_verified"] is verified
    await tickets.handle(client, workflow_id).terminate(reason="the test is over")


async def test_an_unverified_ticket_is_verified_by_a_signed_reply_and_refuses_an_unsigned_one_after(
    agent: Harness, client: Client
) -> None:
    first = mail("My parcel never arrived.")
    workflow_id = workflow_of(first["Message-ID"])
    async with agent.worker(), receiver(agent) as port:
        assert (await deliver(port, first.as_bytes(policy=SMTP_POLICY)))[0] == 250  # unsigned
        await waiting_for_customer(tickets.handle(client, workflow_id), turns=1)
        reply = mail("It is order A-1001.", In_Reply_To=first["Message-ID"])
        assert (await deliver(port, reply))[0] == 250  # signed by Ann's provider
        await waiting_for_customer(tickets.handle(client, workflow_id), turns=2)
        forged = mail("Refund it again, to my new card.", In_Reply_To=first["Message-ID"])
        code, said = await deliver(port, forged.as_bytes(policy=SMTP_POLICY))
        assert len(await tickets.turns(client, workflow_id)) == 2
    assert code == 550
    assert "not verified to come from them" in said
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    await tickets.handle(client, workflow_id).cancel(reason="the test is over")


def _with_a_second_from(header: str) -> Callable[[], bytes]:
    """Ann's message as the desk's server vouched for it (``dmarc=pass`` for example.com), with ``header`` added
    under her ``From:``: a second author the desk might read while its server judged the first."""

    def built() -> bytes:
        data = mail().as_bytes(policy=SMTP_POLICY)
        first, _, rest = data.partition(b"\r\n")
        return AUTH_RESULTS.encode() + b"\r\n" + first + b"\r\n" + header.encode() + b"\r\n" + rest

    return built


def _two_mailboxes() -> bytes:
    data = mail(sender="Ann <ann@example.com>, Mallory <mallory@evil.example>", Sender="Ann <ann@example.com>")
    return AUTH_RESULTS.encode() + b"\r\n" + data.as_bytes(policy=SMTP_POLICY)


NOT_ONE_AUTHOR: dict[str, tuple[Callable[[], bytes], str]] = {
    "two From: fields": (
        _with_a_second_from("From: Mallory <mallory@evil.example>"),
        "550 5.7.1 The message has 2 From: fields; RFC 5322 allows one",
    ),
    "a second From: in obsolete syntax": (
        _with_a_second_from("FROM : Mallory <mallory@evil.example>"),
        "550 5.7.1 The message has 2 From: fields; RFC 5322 allows one",
    ),
    "a From: of two mailboxes, with a Sender:": (
        _two_mailboxes,
        "550 5.7.1 The From: field names 2 mailboxes; the desk answers one person",
    ),
}


@pytest.mark.parametrize("kind", NOT_ONE_AUTHOR)
async def test_a_message_of_more_than_one_author_is_refused_saying_why_though_the_desks_server_vouched_for_one(
    agent: Harness, client: Client, kind: str
) -> None:
    """The desk's server judged one ``From:`` (``dmarc=pass``); a second would have the desk act for whoever it
    names: refused for good, with the reason, before any ticket starts."""
    build, expected = NOT_ONE_AUTHOR[kind]
    data = build()
    found = re.search(rb"^Message-ID: (<[^>]+>)", data, re.MULTILINE)
    assert found is not None
    message_id = found.group(1).decode()
    async with receiver(agent, authserv_id="mx.desk.example") as port:
        code, said = await deliver(port, data)
    assert f"{code} {said}".startswith(expected), (code, said)
    assert not await exists(client, workflow_of(message_id))


ALIGNMENT: dict[str, tuple[str, str, bool]] = {
    "a sender's own domain": ("ann@example.com", "example.com", True),
    "the organizational domain, for a sender under it": ("ann@support.example.com", "example.com", True),
    "another domain of the same organization": ("ann@support.example.com", "mail.example.com", True),
    "a public suffix (co.uk), for a sender under it": ("ann@shop.example.co.uk", "co.uk", False),
    "a public suffix of the private section (github.io)": ("ann@ann.github.io", "github.io", False),
    "a parent, where the domain's DMARC record asks for strict alignment": (
        "ann@mail.strict.example",
        "strict.example",
        False,
    ),
}


@pytest.mark.parametrize("kind", ALIGNMENT)
async def test_a_signature_verifies_a_sender_only_within_its_organizational_domain_as_the_public_suffix_list_draws_it(
    agent: Harness, client: Client, kind: str
) -> None:
    sender, signer, verified = ALIGNMENT[kind]
    message = mail(sender=f"Ann <{sender}>")
    async with receiver(agent) as port:
        assert (await deliver(port, signed(message, by=signer)))[0] == 250
    recorded = await origin(client, workflow_of(message["Message-ID"]))
    assert recorded.verified is verified, recorded.verified_how
    await tickets.handle(client, workflow_of(message["Message-ID"])).terminate(reason="the test is over")


PUBLIC_SUFFIXES = ["com", "co.uk", "com.au", "github.io", "blogspot.com", "example"]
"""Suffixes of the list's ICANN section, of its private one, and a top-level domain it does not know (``*``)."""
LABEL = st.from_regex(r"shop[0-9]{1,6}", fullmatch=True)
"""A label no rule of the list names, so that only the suffix chosen decides."""


def signed_by(signer: str, sender: str) -> bytes:
    return f"DKIM-Signature: v=1; a=rsa-sha256; d={signer}; s=mail; h=from; bh=AA==; b=AA==\r\n".encode() + mail(
        sender=f"Ann <ann@{sender}>"
    ).as_bytes(policy=SMTP_POLICY)


@given(st.sampled_from(PUBLIC_SUFFIXES), LABEL, LABEL, LABEL)
def test_a_signature_is_tried_for_a_sender_only_within_one_organization_and_a_public_suffix_is_no_organization(
    suffix: str, organization: str, host: str, other: str
) -> None:
    """Whatever the suffix (``co.uk``, ``github.io``, one the list does not know): a signature of the suffix itself
    is no one's under it; one of an organization under it is tried for the organization and any host of it, and
    never for another organization beside it."""
    owner = f"{organization}.{suffix}"
    assert aligned_signatures(signed_by(suffix, f"{host}.{suffix}"), f"{host}.{suffix}") == []
    assert aligned_signatures(signed_by(suffix, owner), owner) == []
    for sender in (owner, f"{host}.{owner}", f"{other}.{host}.{owner}"):
        assert [s.signer for s in aligned_signatures(signed_by(owner, sender), sender)] == [owner]
        assert [s.signer for s in aligned_signatures(signed_by(f"{host}.{owner}", sender), sender)] == [
            f"{host}.{owner}"
        ]
    if other != organization:
        assert aligned_signatures(signed_by(f"{other}.{suffix}", owner), owner) == []


async def test_a_signature_of_the_organization_verifies_no_one_when_dns_does_not_give_the_dmarc_record_and_is_taken(
    agent: Harness, client: Client
) -> None:
    """Relaxed alignment is the DMARC record's to allow (``adkim=s`` forbids it): with no answer for the record, a
    signature of the organizational domain leaves the sender unverified, and the message is taken; a signature of
    the sender's own domain needs no record."""

    async def without_dmarc(name: str) -> bytes | None:
        if name.startswith("_dmarc."):
            raise Unanswered(name)
        return await DOMAINS.lookup(name)

    under, own = mail(sender="Ann <ann@support.example.com>"), mail()
    async with receiver(agent, lookup=without_dmarc) as port:
        assert (await deliver(port, signed(under, by="example.com")))[0] == 250
        assert (await deliver(port, own))[0] == 250
    recorded = await origin(client, workflow_of(under["Message-ID"]))
    assert (recorded.verified, recorded.verified_how) == (
        False,
        "DNS did not answer in time for the DMARC record of support.example.com",
    )
    assert (await origin(client, workflow_of(own["Message-ID"]))).verified
    for message in (under, own):
        await tickets.handle(client, workflow_of(message["Message-ID"])).terminate(reason="the test is over")


async def test_a_lookup_that_never_ends_even_when_cancelled_costs_a_message_its_deadline_and_no_more(
    agent: Harness, client: Client
) -> None:
    """However the resolver behaves (here: it ignores the cancellation), the message's lookups end at their
    deadline and it is taken, unverified, its ticket gated; nothing of the check is left holding anything the next
    message needs."""
    finished = asyncio.Event()
    asked: list[str] = []

    async def stubborn(name: str) -> bytes | None:
        asked.append(name)
        while not finished.is_set():
            try:
                await finished.wait()
            except asyncio.CancelledError:
                continue  # a resolver that will not stop
        return None

    first, second = mail(), mail()
    try:
        async with receiver(agent, lookup=stubborn, answer_within_seconds=4) as port:
            answers = [await deliver(port, signed(first)), await deliver(port, signed(second))]
    finally:
        finished.set()
    assert [code for code, _ in answers] == [250, 250], answers
    for message in (first, second):
        recorded = await origin(client, workflow_of(message["Message-ID"]))
        assert (recorded.verified, recorded.verified_how) == (
            False,
            "DNS did not answer in time for the key of example.com",
        )
        await tickets.handle(client, workflow_of(message["Message-ID"])).terminate(reason="the test is over")
    assert asked == ["mail._domainkey.example.com."] * 2


# --- no loops, no backscatter ---------------------------------------------------------------------------------


def dsn(original_headers: str, recipient: str = "ann@example.com") -> EmailMessage:
    """A delivery status notification as a mail server sends one back (RFC 3464): the failed recipient, and the
    headers of the email it could not deliver."""
    raw = (
        "From: MAILER-DAEMON@example.com\nTo: support@example.com\n"
        "Subject: Undelivered Mail Returned to Sender\n"
        f"Message-ID: <dsn-{uuid.uuid4().hex}@mx.example.com>\nMIME-Version: 1.0\n"
        'Content-Type: multipart/report; report-type=delivery-status; boundary="B"\n\n'
        "--B\nContent-Type: text/plain\n\nThe mail system could not deliver your message.\n"
        "--B\nContent-Type: message/delivery-status\n\nReporting-MTA: dns; mx.example.com\n\n"
        f"Final-Recipient: rfc822; {recipient}\nAction: failed\nStatus: 5.1.1\n"
        "Diagnostic-Code: smtp; 550 5.1.1 No such user here\n\n"
        f"--B\nContent-Type: text/rfc822-headers\n\n{original_headers}\n--B--\n"
    )
    parsed: EmailMessage = email.message_from_string(raw, _class=EmailMessage, policy=SMTP_POLICY)
    return parsed


def _second_auto_submitted() -> EmailMessage:
    message = mail("Your order has shipped.", Auto_Submitted="no")
    message["Auto-Submitted"] = "auto-generated"
    return message


AUTOMATIC: dict[str, tuple[EmailMessage, str]] = {
    "an auto-reply": (mail("I am out of the office.", Auto_Submitted="auto-replied"), "ann@example.com"),
    "Auto-Submitted: auto-generated": (
        mail("Your order shipped.", Auto_Submitted="auto-generated"),
        "shop@example.com",
    ),
    "Auto-Submitted of an extension": (mail("Notified.", Auto_Submitted="auto-notified; owner=x"), "ann@example.com"),
    "a second Auto-Submitted, not no": (_second_auto_submitted(), "shop@example.com"),
    "Precedence: bulk": (mail("Our newsletter.", Precedence="bulk"), "news@example.com"),
    "Precedence: list": (mail("Our list.", Precedence="List"), "news@example.com"),
    "Precedence: junk": (mail("Offers.", Precedence="junk (offers)"), "news@example.com"),
    "a list's copy (List-Id)": (mail("Hello list.", List_Id="Shoppers <shoppers.example.com>"), "ann@example.com"),
    "a list's copy (List-Unsubscribe)": (
        mail("Our newsletter.", List_Unsubscribe="<mailto:leave@news.example.com>"),
        "news@example.com",
    ),
    "a null return path": (mail("Notification."), ""),
    "a bounce": (dsn("From: someone@example.com\nSubject: Hello\n"), "mailer-daemon@example.com"),
}


@pytest.mark.parametrize("kind", AUTOMATIC)
async def test_mail_no_person_wrote_is_taken_and_recorded_and_starts_no_ticket(
    agent: Harness, client: Client, kind: str
) -> None:
    message, mail_from = AUTOMATIC[kind]
    async with receiver(agent) as port:
        code, said = await deliver(port, message, mail_from=mail_from)
    assert code == 250
    assert "no ticket" in said
    assert not await exists(client, workflow_of(message["Message-ID"]))


@pytest.mark.parametrize("value", ["no", "No (a person wrote this)", "(written by hand) no"])
async def test_mail_a_person_wrote_says_auto_submitted_no_in_any_spelling_rfc_3834_allows_and_starts_a_ticket(
    agent: Harness, client: Client, value: str
) -> None:
    message = mail(Auto_Submitted=value)
    async with receiver(agent) as port:
        code, said = await deliver(port, message)
    assert (code, said) == (250, f"2.0.0 Taken as {workflow_of(message['Message-ID'])}")
    await tickets.handle(client, workflow_of(message["Message-ID"])).terminate(reason="the test is over")


# --- limits ---------------------------------------------------------------------------------------------------


def _many_parts() -> EmailMessage:
    message = mail()
    for n in range(6):
        message.add_attachment(b"x", maintype="application", subtype="octet-stream", filename=f"{n}.bin")
    return message


LIMITED: dict[str, tuple[EmailMessage, str]] = {
    "past the size": (mail("A" * 3000), "552"),
    "too many parts": (_many_parts(), "552 5.3.4 The message has 8 MIME parts; the desk takes at most 5"),
    "a header too long": (mail(Keywords="k" * 1200), "552 5.3.4 The Keywords header is"),
    "no text": (mail(" "), "550 5.6.0 The message has no text of its own"),
    "text past a ticket's": (mail("word " * 5000), "552 5.3.4 The message's text is 24999 characters"),
    "no sender": (mail(sender="undisclosed-recipients:;"), "550 5.1.7 The message must come from exactly one"),
}


@pytest.mark.parametrize("kind", LIMITED)
async def test_a_message_past_the_desks_limits_is_refused_for_good_with_the_reason(
    agent: Harness, client: Client, kind: str
) -> None:
    message, expected = LIMITED[kind]
    limits: dict[str, Any] = {"max_parts": 5, "max_header_chars": 1000}
    if kind == "past the size":
        limits["max_message_bytes"] = 2048
    elif kind == "text past a ticket's":
        limits["max_message_bytes"] = 1024 * 1024
    async with receiver(agent, **limits) as port:
        code, said = await deliver(port, message)
    assert f"{code} {said}".startswith(expected), (code, said)
    assert 500 <= code < 600
    assert not await exists(client, workflow_of(message["Message-ID"]))


# --- Temporal down ----------------------------------------------------------------------------------------------


async def test_with_temporal_unreachable_the_answer_is_4xx_and_the_message_is_taken_once_it_is_back(
    agent: Harness, client: Client
) -> None:
    gone = await start_dev_server(None)
    await gone.shutdown()  # its client stays, talking to a port nothing listens on
    message = mail()
    async with receiver(agent, gone.client) as port:
        code, said = await deliver(port, message)
    assert code == 451, said
    assert not await exists(client, workflow_of(message["Message-ID"]))
    async with receiver(agent) as port:  # the sending server tries again, and Temporal is there
        assert (await deliver(port, message))[0] == 250
    assert await exists(client, workflow_of(message["Message-ID"]))
    await tickets.handle(client, workflow_of(message["Message-ID"])).terminate(reason="the test is over")


def test_the_receiver_listens_on_loopback_unless_the_network_is_allowed() -> None:
    with pytest.raises(ValidationError, match="AGENT_MAIL_IN_ALLOW_NETWORK"):
        MailInSettings(host="0.0.0.0")
    assert MailInSettings(host="0.0.0.0", allow_network=True).host == "0.0.0.0"
    assert MailInSettings().host == "127.0.0.1"


async def test_with_encryption_on_the_customers_words_address_and_attachments_reach_temporal_encrypted(
    agent: Harness, client: Client
) -> None:
    settings = agent.settings(
        codec=CodecSettings(keys={"2026-12": base64.b64encode(os.urandom(32)).decode()}),
        mail_in=MailInSettings(protocol="smtp"),
    )
    encrypted = await connect(settings, address(client))
    message = mail("My parcel for order A-1001 never arrived; my card ends in 4242.")
    message.add_attachment(b"receipt", maintype="application", subtype="pdf", filename="receipt-4242.pdf")
    workflow_id = workflow_of(message["Message-ID"])
    async with listening(encrypted, settings, port=0, lookup=DOMAINS.lookup) as server:
        assert (await deliver(server.sockets[0].getsockname()[1], message))[0] == 250
    stored = (await client.get_workflow_handle(workflow_id).fetch_history()).to_json()
    described = str(
        await client.workflow_service.describe_workflow_execution(
            DescribeWorkflowExecutionRequest(
                namespace=client.namespace, execution=WorkflowExecution(workflow_id=workflow_id)
            )
        )
    )
    for clear in ("4242", "ann@example.com", "receipt"):
        assert clear not in stored
        assert clear not in described
    assert "4242" in (await tickets.ticket_input(encrypted, workflow_id, ""))["question"]
    await tickets.handle(client, workflow_id).terminate(reason="the test is over")


# --- the command, as compose runs it ----------------------------------------------------------------------------


async def test_agent_worker_mail_in_counts_what_it_answered_by_outcome_and_whether_the_sender_was_verified(
    agent: Harness, client: Client
) -> None:
    port, bind = free_port(), f"127.0.0.1:{free_port()}"
    env = agent.worker_env(
        AGENT_MAIL_IN_PORT=str(port),
        AGENT_MAIL_IN_PROTOCOL="smtp",
        AGENT_MAIL_IN_AUTHSERV_ID="mx.desk.example",
        AGENT_METRICS_BIND=bind,
    )
    receiving = await spawn_worker(env, command=(AGENT_WORKER, "mail-in"))
    try:
        await poll(lambda: listens(port), what="the receiver to listen")
        vouched, plain = mail(), mail()
        vouched_data = AUTH_RESULTS.encode() + b"\r\n" + vouched.as_bytes(policy=SMTP_POLICY)
        assert (await deliver(port, vouched_data))[0] == 250
        assert (await deliver(port, plain.as_bytes(policy=SMTP_POLICY)))[0] == 250
        assert (await deliver(port, mail("Away.", Auto_Submitted="auto-replied")))[0] == 250
        async with aiohttp.ClientSession() as http, http.get(f"http://{bind}/metrics") as response:
            lines = [
                line for line in (await response.text()).splitlines() if line.startswith("agent_mail_in_messages{")
            ]
    finally:
        receiving.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(receiving.wait(), 60) == 0
    counted = {
        (label("outcome", line), label("kind", line), label("verified", line)): line.rsplit(" ", 1)[1] for line in lines
    }
    assert counted == {
        ("accepted", "new", "yes"): "1",
        ("accepted", "new", "no"): "1",
        ("ignored", "automatic", "unknown"): "1",
    }
    for message in (vouched, plain):
        await tickets.handle(client, workflow_of(message["Message-ID"])).terminate(reason="the test is over")


async def test_a_receiver_killed_after_the_ticket_started_and_before_it_answered_loses_nothing_and_doubles_nothing(
    agent: Harness, client: Client
) -> None:
    """The receiver process is killed (SIGKILL) while Temporal has started the ticket and its answer is still on
    its way back: the mail server, never told ``250``, delivers again to a receiver that is up, and there is one
    ticket, one refund."""
    message = mail()
    data = AUTH_RESULTS.encode() + b"\r\n" + message.as_bytes(policy=SMTP_POLICY)  # verified: the desk's server
    workflow_id = workflow_of(message["Message-ID"])
    host, _, temporal_port = address(client).rpartition(":")
    async with HeldProxy(host, int(temporal_port)) as proxy:
        port = free_port()
        env = agent.worker_env(
            TEMPORAL_ADDRESS=f"127.0.0.1:{proxy.port}",
            AGENT_MAIL_IN_PORT=str(port),
            AGENT_MAIL_IN_PROTOCOL="smtp",
            AGENT_MAIL_IN_AUTHSERV_ID="mx.desk.example",
        )
        receiving = await spawn_worker(env, command=(AGENT_WORKER, "mail-in"))
        try:
            await poll(lambda: listens(port), what="the receiver to listen")
            proxy.hold()
            sending = asyncio.create_task(deliver(port, data))
            await poll(lambda: exists(client, workflow_id), what="Temporal to start the ticket")
            receiving.kill()
            await receiving.wait()
            with pytest.raises((aiosmtplib.SMTPException, OSError)):  # the connection dropped, no answer
                await sending
        finally:
            if receiving.returncode is None:
                receiving.kill()
                await receiving.wait()
    async with agent.worker(), receiver(agent, authserv_id="mx.desk.example") as again:
        assert await deliver(again, data) == (250, f"2.0.0 Taken as {workflow_id}")
        await waiting_for_customer(tickets.handle(client, workflow_id), turns=1)
    assert await tickets.count(client, f"WorkflowId = '{workflow_id}'") == 1
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    await tickets.handle(client, workflow_id).cancel(reason="the test is over")


async def test_a_receiver_stopped_by_a_deploy_answers_the_message_in_flight_before_it_exits_and_defers_later_ones(
    agent: Harness, client: Client
) -> None:
    """SIGTERM (a deploy, a drained node) while Temporal has started the ticket and its answer is still on its way
    back: the receiver stops listening, a message sent afterwards on a connection already open is deferred
    (``451``), and the message in flight is answered ``250`` when Temporal's answer comes, before the process
    exits; the mail server has nothing to send again."""
    message = mail()
    data = AUTH_RESULTS.encode() + b"\r\n" + message.as_bytes(policy=SMTP_POLICY)
    workflow_id = workflow_of(message["Message-ID"])
    host, _, temporal_port = address(client).rpartition(":")
    async with HeldProxy(host, int(temporal_port)) as proxy:
        port = free_port()
        env = agent.worker_env(
            TEMPORAL_ADDRESS=f"127.0.0.1:{proxy.port}",
            AGENT_MAIL_IN_PORT=str(port),
            AGENT_MAIL_IN_PROTOCOL="smtp",
            AGENT_MAIL_IN_AUTHSERV_ID="mx.desk.example",
        )
        receiving = await spawn_worker(env, command=(AGENT_WORKER, "mail-in"))
        later = aiosmtplib.SMTP(hostname=HOST, port=port, timeout=60)
        try:
            await poll(lambda: listens(port), what="the receiver to listen")
            await later.connect()
            await later.ehlo()
            proxy.hold()
            sending = asyncio.create_task(deliver(port, data))
            await poll(lambda: exists(client, workflow_id), what="Temporal to start the ticket")
            receiving.send_signal(signal.SIGTERM)

            async def stopped_listening() -> bool:
                return not await listens(port)

            await poll(stopped_listening, what="the receiver to stop listening")
            await later.mail("ann@example.com")
            await later.rcpt(DESK)
            with pytest.raises(aiosmtplib.SMTPDataError) as deferred:
                await later.data(signed(mail()))
            assert not sending.done()
            proxy.release()
            assert await sending == (250, f"2.0.0 Taken as {workflow_id}")
            assert await asyncio.wait_for(receiving.wait(), 60) == 0
        finally:
            later.close()
            if receiving.returncode is None:
                receiving.kill()
                await receiving.wait()
    assert (deferred.value.code, deferred.value.message) == (451, "4.3.2 The receiver is stopping; try again later")
    await tickets.handle(client, workflow_id).terminate(reason="the test is over")


def over_lmtp(
    port: int, data: bytes, recipients: Sequence[str] = (DESK,), mail_from: str = "ann@example.com"
) -> tuple[dict[str, tuple[int, str]], tuple[int, str]]:
    """Each recipient's answer and the answer to ``DATA``, over LMTP as the desk's mail server delivers (blocking:
    run it in a thread)."""
    with smtplib.LMTP(HOST, port, timeout=120) as lmtp:
        lmtp.ehlo()
        lmtp.mail(mail_from)
        answered = {to: lmtp.rcpt(to) for to in recipients}
        code, said = lmtp.data(data)
    return {to: (code, said.decode()) for to, (code, said) in answered.items()}, (code, said.decode())


@asynccontextmanager
async def receiver_process(
    agent: Harness, logs: Path, *, resolv_conf: Path | None = None, **settings: str
) -> AsyncIterator[tuple[int, asyncio.subprocess.Process]]:
    """``agent-worker mail-in`` as the desk runs it (LMTP unless ``settings`` say otherwise), on a free port, its
    output in ``logs``; with ``resolv_conf``, its DNS is that file's and the machine's is left alone. Yields the
    port and the process, which is stopped (SIGTERM) on the way out if it still runs, and must exit 0."""
    port = free_port()
    command: tuple[str, ...] = (AGENT_WORKER, "mail-in")
    if resolv_conf is not None:
        command = own_resolver(resolv_conf, command)
    with logs.open("wb") as output:
        receiving = await spawn_worker(
            agent.worker_env(AGENT_MAIL_IN_PORT=str(port), **settings), command=command, stdout=output, stderr=output
        )
        try:

            async def listening_or_gone() -> bool:
                assert receiving.returncode is None, f"the receiver exited {receiving.returncode}: {logs.read_text()}"
                return await listens(port)

            await poll(listening_or_gone, what="the receiver to listen")
            yield port, receiving
            if receiving.returncode is None:
                receiving.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(receiving.wait(), 60) == 0, logs.read_text()
        finally:
            if receiving.returncode is None:
                receiving.kill()
                await receiving.wait()


async def test_over_lmtp_the_receiver_takes_a_message_for_its_first_recipient_and_defers_the_second_with_452(
    agent: Harness, client: Client, tmp_path: Path
) -> None:
    """The real receiver, as Postfix's ``lmtp:`` transport delivers without a recipient limit: one answer per
    recipient, each true: taken for the first, ``452`` for the second, which the server sends again."""
    message = mail()
    async with receiver_process(agent, tmp_path / "mail-in.log") as (port, _):
        answered, data = await asyncio.to_thread(
            over_lmtp, port, message.as_bytes(policy=SMTP_POLICY), [DESK, "sales@desk.example"]
        )
    workflow_id = workflow_of(message["Message-ID"])
    assert answered == {
        DESK: (250, "2.1.5 OK"),
        "sales@desk.example": (452, "4.5.3 One recipient per message: send it again for this one"),
    }
    assert data == (250, f"2.0.0 Taken as {workflow_id}")
    assert await exists(client, workflow_id)
    await tickets.handle(client, workflow_id).terminate(reason="the test is over")


async def test_over_lmtp_a_receiver_stopped_by_sigterm_answers_the_message_in_flight_and_defers_the_next_with_451(
    agent: Harness, client: Client, tmp_path: Path
) -> None:
    """The real receiver over LMTP, SIGTERM while Temporal has started a ticket and its answer is held back: it
    stops listening, a message sent then on a connection already open is deferred (``451 4.3.2``), and the message
    in flight is answered ``250`` once Temporal's answer comes, before the process exits 0."""
    message = mail()
    data = AUTH_RESULTS.encode() + b"\r\n" + message.as_bytes(policy=SMTP_POLICY)
    workflow_id = workflow_of(message["Message-ID"])
    host, _, temporal_port = address(client).rpartition(":")
    async with (
        HeldProxy(host, int(temporal_port)) as proxy,
        receiver_process(
            agent,
            tmp_path / "mail-in.log",
            TEMPORAL_ADDRESS=f"127.0.0.1:{proxy.port}",
            AGENT_MAIL_IN_AUTHSERV_ID="mx.desk.example",
        ) as (port, receiving),
    ):
        later = await asyncio.to_thread(smtplib.LMTP, HOST, port, timeout=60)
        try:
            await asyncio.to_thread(later.ehlo)
            proxy.hold()
            sending = asyncio.ensure_future(asyncio.to_thread(over_lmtp, port, data))
            await poll(lambda: exists(client, workflow_id), what="Temporal to start the ticket")
            receiving.send_signal(signal.SIGTERM)

            async def stopped_listening() -> bool:
                return not await listens(port)

            await poll(stopped_listening, what="the receiver to stop listening")
            await asyncio.to_thread(later.mail, "ann@example.com")
            await asyncio.to_thread(later.rcpt, DESK)
            deferred = await asyncio.to_thread(later.data, mail().as_bytes(policy=SMTP_POLICY))
            assert not sending.done()
            proxy.release()
            _, answer = await sending
            assert await asyncio.wait_for(receiving.wait(), 60) == 0
        finally:
            later.close()
    assert deferred == (451, b"4.3.2 The receiver is stopping; try again later")
    assert answer == (250, f"2.0.0 Taken as {workflow_id}")
    await tickets.handle(client, workflow_id).terminate(reason="the test is over")


@pytest.mark.skipif(not can_own_resolver(), reason="needs root and unshare, to give the receiver its own DNS")
async def test_the_receiver_asks_its_systems_dns_for_keys_and_verifies_a_signed_sender_and_no_one_else(
    agent: Harness, client: Client, tmp_path: Path
) -> None:
    """The real receiver, its ``/etc/resolv.conf`` naming a name server that serves the providers' keys and DMARC
    records: Ann's signed message is verified by the key it fetched; a signature of a public suffix, or of a key DNS
    says does not exist, verifies no one, and neither is a DNS failure."""
    ann = mail()
    under_suffix = mail(sender="Ann <ann@shop.example.co.uk>")
    no_key = mail(sender="Bob <bob@example.org>")
    cases = [
        (signed(ann), ann),
        (signed(under_suffix, by="co.uk"), under_suffix),
        (signed(no_key, by="example.com").replace(b"d=example.com", b"d=example.org"), no_key),
    ]
    async with (
        NameServer(DOMAINS.records) as dns_server,
        receiver_process(agent, tmp_path / "mail-in.log", resolv_conf=dns_server.resolv_conf(tmp_path)) as (port, _),
    ):
        answers = [(await asyncio.to_thread(over_lmtp, port, data))[1] for data, _ in cases]
    assert [code for code, _ in answers] == [250, 250, 250], answers
    recorded = [await origin(client, workflow_of(message["Message-ID"])) for _, message in cases]
    assert [(r.verified, r.verified_how) for r in recorded] == [
        (True, "DKIM signature of example.com verifies, aligned with example.com"),
        (False, "no DKIM signature aligned with the From: domain"),
        (False, "no DKIM signature aligned with the From: domain verifies"),
    ]
    assert dns_server.asked["mail._domainkey.example.com."] >= 1
    assert dns_server.asked["mail._domainkey.example.org."] >= 1
    assert not any(name.endswith("co.uk.") for name in dns_server.asked)  # never even asked
    for _, message in cases:
        await tickets.handle(client, workflow_of(message["Message-ID"])).terminate(reason="the test is over")


def silently_signed(sender: str, signatures: int = 20) -> bytes:
    """A message from ``sender`` under DKIM signatures of its domain, each naming another key (``s0`` ...), none of
    which its domain's DNS will ever give: a stranger's way to make the desk ask DNS many times."""
    domain = sender.rpartition("@")[2]
    headers = b"".join(
        f"DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d={domain}; s=s{n}; h=from:to:subject; "
        f"bh=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=; b=c2lsZW5jZQ==\r\n".encode()
        for n in range(signatures)
    )
    return headers + mail("Refund my order, please.", sender=f"Sam <{sender}>").as_bytes(policy=SMTP_POLICY)


@pytest.mark.skipif(not can_own_resolver(), reason="needs root and unshare, to give the receiver its own DNS")
async def test_a_flood_of_mail_whose_dns_never_answers_is_taken_unverified_and_delays_no_other_message(
    agent: Harness, client: Client, tmp_path: Path
) -> None:
    """The real receiver, its DNS a name server that never answers: six messages at once, each with 20 signatures
    of its own silent domain, and, while they wait, a customer's message the desk's server vouched for. Each of the
    six is taken, unverified (its ticket gated), after asking for no more than a few keys; the customer's is taken
    verified, as if nothing else were arriving; and the metrics count the six."""
    bind = f"127.0.0.1:{free_port()}"
    senders = [f"sam@m{n}.silent.example" for n in range(6)]
    vouched = mail()
    vouched_data = AUTH_RESULTS.encode() + b"\r\n" + vouched.as_bytes(policy=SMTP_POLICY)
    async with (
        NameServer() as silent,
        receiver_process(
            agent,
            tmp_path / "mail-in.log",
            resolv_conf=silent.resolv_conf(tmp_path),
            AGENT_MAIL_IN_AUTHSERV_ID="mx.desk.example",
            AGENT_MAIL_IN_ANSWER_WITHIN_SECONDS="20",
            AGENT_METRICS_BIND=bind,
        ) as (port, _),
    ):
        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(max_workers=len(senders) + 1) as threads:
            flood = [
                loop.run_in_executor(threads, over_lmtp, port, silently_signed(sender), (DESK,), sender)
                for sender in senders
            ]

            async def every_one_asking() -> bool:
                return all(any(name.endswith(f"{domain}.") for name in silent.asked) for domain in domains)

            domains = [sender.rpartition("@")[2] for sender in senders]
            await poll(every_one_asking, what="each message of the flood to be asking DNS")
            _, vouched_answer = await loop.run_in_executor(threads, over_lmtp, port, vouched_data)
            assert vouched_answer == (250, f"2.0.0 Taken as {workflow_of(vouched['Message-ID'])}")
            flood_answers = [answer for _, answer in await asyncio.gather(*flood)]
            assert [code for code, _ in flood_answers] == [250] * len(senders), flood_answers
        async with aiohttp.ClientSession() as http, http.get(f"http://{bind}/metrics") as response:
            metrics = await response.text()
    assert (await origin(client, workflow_of(vouched["Message-ID"]))).verified
    for (_, said), domain in zip(flood_answers, domains, strict=True):
        workflow_id = said.removeprefix("2.0.0 Taken as ")
        recorded = await origin(client, workflow_id)
        assert (recorded.verified, recorded.verified_how) == (
            False,
            f"DNS did not answer in time for the key of {domain}",
        )
        started = await tickets.ticket_input(client, workflow_id, "")
        assert started["sender_verified"] is False
        keys = {name for name in silent.asked if name.endswith(f"._domainkey.{domain}.")}
        assert 1 <= len(keys) <= 3, keys  # the signatures a message may have tried, as docs/mail-in.md states
        await tickets.handle(client, workflow_id).terminate(reason="the test is over")
    await tickets.handle(client, workflow_of(vouched["Message-ID"])).terminate(reason="the test is over")
    counted = [line for line in metrics.splitlines() if line.startswith("agent_mail_in_dns_unanswered")]
    assert [line.rsplit(" ", 1)[1] for line in counted] == [str(len(senders))], counted


def label(name: str, line: str) -> str:
    found = re.search(rf'{name}="([^"]*)"', line)
    assert found, line
    return found.group(1)


async def listens(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection(HOST, port)
    except OSError:
        return False
    writer.close()
    return True


def test_the_compose_receiver_takes_the_settings_compose_gives_it_and_is_published_on_loopback_only() -> None:
    service = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["mail-in"]
    given = {
        name.removeprefix("AGENT_MAIL_IN_").lower(): value
        for name, value in service["environment"].items()
        if name.startswith("AGENT_MAIL_IN_") and not str(value).startswith("${")
    }
    settings = MailInSettings(**given)
    assert service["command"] == ["agent-worker", "mail-in"]
    assert service["ports"] == [f"127.0.0.1:{settings.port}:{settings.port}"]
    assert service["environment"]["AGENT_MAIL_IN_PROTOCOL"] == "${AGENT_MAIL_IN_PROTOCOL:-lmtp}"
    # Docker's SIGKILL comes after the messages in flight are answered (10 s, compose's default, would cut them).
    assert int(service["stop_grace_period"].removesuffix("s")) > settings.answer_within_seconds


def test_a_reply_key_too_short_or_without_an_address_to_sign_under_stops_the_settings_saying_why() -> None:
    with pytest.raises(ValidationError, match="at least 32"):
        SmtpSettings(reply_key="short", mail_from="support@example.com")
    with pytest.raises(ValidationError, match="AGENT_MAIL_REPLY_KEY needs AGENT_MAIL_FROM"):
        SmtpSettings(reply_key=REPLY_KEY)
    replies = wiring.reply_addresses(
        Settings(smtp=SmtpSettings(reply_key=REPLY_KEY, mail_from="Support <help@example.com>"))
    )
    assert replies is not None
    assert replies.base == "help@example.com"
