"""The outbox's relay to a real mail server, over SMTP with ``aiosmtplib`` (``AGENT_MAIL=smtp``).

``SmtpRelay.deliver`` hands one recorded email (``activities.business.mail.OutgoingEmail``) to the server and
returns its acceptance; the outbox around it keeps the rule SMTP does not know, once per idempotency key.

**Sync outside, async inside.** The ports are synchronous: the tool activities run them in a thread, beside
a heartbeat, and turn their refusals into non-retryable errors in one place (``activities.tools._call``).
The relay keeps that shape: ``deliver`` hands the delivery to the relays' own event loop and waits for it in
the calling thread. That loop runs in a thread of its own for the life of the process, shared by every
relay, never the worker's loop, so a slow server never stalls a workflow task. It is not a loop per call
(``asyncio.run``) because a TLS connection's goodbye outlives the delivery: the server's close is still
on its way when the email is accepted, and a loop closed under it leaves the socket open (the tests saw it).
Each delivery is one connection, bounded as a whole by ``timeout_seconds``, below the ``send_email``
activity's start-to-close timeout, so an attempt ends with an answer before Temporal gives up on it; a
handshake per email is nothing at a support desk's few emails a minute.

**Every failure is classified here, once**, by what it says about a retry (RFC 5321's reply classes): a 5xx
reply (no such mailbox, a sender it will not relay for, credentials it refuses), a server without what the
settings need of it (STARTTLS, a login), a certificate that does not check, or a header that cannot be
written is a refusal for good, ``MailRefusedError``, which reaches the model non-retryable with the server's
own words; anything else (a 4xx reply, a refused or dropped connection, no answer in time) is
``MailDeferredError``, retried by Temporal. ``aiosmtplib`` has no retries of its own to switch off: each
attempt is one try, and every retry is in the ticket's history.
"""

from __future__ import annotations

import asyncio
import email.utils
import re
import ssl
import threading
from dataclasses import dataclass
from email.message import EmailMessage
from email.policy import Policy
from pathlib import Path
from typing import Literal

import aiosmtplib
from pydantic import SecretStr

from activities.business.mail import MailDeferredError, OutgoingEmail
from activities.business.refusals import MailRefusedError
from activities.business.reply_addresses import ReplyAddresses
from activities.contracts.limits import MESSAGE_ID_CHARS

Security = Literal["none", "starttls", "tls"]
DEFAULT_PORTS: dict[Security, int] = {"none": 25, "starttls": 587, "tls": 465}
"""Plain SMTP, submission with STARTTLS (RFC 6409), submission over TLS from the first byte (RFC 8314)."""


@dataclass(frozen=True)
class SmtpServer:
    """Where and as whom the relay hands emails over. ``sender`` is the From header, a name and address
    (``Support <support@example.com>``) or an address; its address is also the envelope sender."""

    host: str
    sender: str
    port: int | None = None
    security: Security = "starttls"
    username: str | None = None
    password: SecretStr | None = None
    ca_file: Path | None = None
    """A certificate authority to trust for the server's certificate, beside the system's (a private CA)."""
    timeout_seconds: float = 20.0

    @property
    def address(self) -> str:
        return email.utils.parseaddr(self.sender)[1]

    def __str__(self) -> str:
        """Where mail goes, with no secret in it: safe to log."""
        user = f"{self.username}@" if self.username else ""
        port = self.port or DEFAULT_PORTS[self.security]
        return f"smtp://{user}{self.host}:{port} ({self.security}), from {self.address}"


class SmtpRelay:
    """Delivers the outbox's emails through ``server`` (``activities.business.mail.Relay``)."""

    def __init__(self, server: SmtpServer, replies: ReplyAddresses | None = None) -> None:
        self.server = server
        self.replies = replies
        """Signs each email's ``Reply-To`` for its ticket, so the customer's answer finds it; None: no Reply-To."""

    @property
    def domain(self) -> str:
        return self.server.address.rpartition("@")[2]

    def deliver(self, outgoing: OutgoingEmail) -> str:
        """Synchronous: runs on the relays' loop, and waits for it here (the activity's thread)."""
        delivery = asyncio.run_coroutine_threadsafe(self._deliver(outgoing), _relay_loop())
        try:
            return delivery.result(self.server.timeout_seconds + LOOP_GRACE_SECONDS)
        except TimeoutError as error:  # the loop itself is stuck: the delivery's own timeout did not end it
            delivery.cancel()
            raise MailDeferredError(f"The mail relay did not finish in time: {error}") from error

    async def _deliver(self, outgoing: OutgoingEmail) -> str:
        server = self.server
        try:
            mail = message(outgoing, server.sender, self.replies)
            async with asyncio.timeout(server.timeout_seconds):
                _refused, reply = await aiosmtplib.send(
                    mail,
                    sender=server.address,
                    recipients=[outgoing.to],
                    hostname=server.host,
                    port=server.port or DEFAULT_PORTS[server.security],
                    username=server.username,
                    password=server.password.get_secret_value() if server.password else None,
                    use_tls=server.security == "tls",
                    start_tls=server.security == "starttls",  # required when asked for; never tried when not
                    cert_bundle=str(server.ca_file) if server.ca_file else None,
                    timeout=server.timeout_seconds,
                )
        except (aiosmtplib.SMTPException, OSError, ValueError) as error:  # OSError: refused, timed out, TLS
            raise classify(error) from None  # the words are in it; a cause would be what the model reads instead
        return reply

    def __str__(self) -> str:
        return str(self.server)


LOOP_GRACE_SECONDS = 5.0
_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def _relay_loop() -> asyncio.AbstractEventLoop:
    """The event loop every relay of this process delivers on, started with its thread at the first delivery."""
    global _loop  # noqa: PLW0603 - one loop per process, made on first use so a worker without SMTP has none
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="smtp-relay", daemon=True).start()
        return _loop


def message(outgoing: OutgoingEmail, sender: str, replies: ReplyAddresses | None = None) -> EmailMessage:
    """The email as the server receives it, the same on every delivery: its Message-ID and Date are the ones
    recorded with it. A header with a line break in it (a subject the model wrote over two lines) raises
    ``ValueError`` here instead of becoming a header of its own. It is ``Auto-Submitted: auto-replied`` (RFC 3834):
    an agent wrote it, so no auto-responder answers it and no loop starts; and with ``replies``, its ``Reply-To``
    is the address signed for its ticket. An email that answers a customer's mail says which (``In-Reply-To``, and
    the conversation up to it, ``References``, as recorded with it), so their mail program threads it there."""
    mail = EmailMessage()
    mail["From"] = sender
    mail["To"] = outgoing.to
    mail["Subject"] = outgoing.subject
    mail["Date"] = email.utils.format_datetime(outgoing.recorded_at)
    mail["Message-ID"] = outgoing.message_id
    mail["Auto-Submitted"] = "auto-replied"
    reply_to = replies.for_ticket(outgoing.ticket_id) if replies and outgoing.ticket_id else None
    if reply_to is not None:
        mail["Reply-To"] = reply_to
    if outgoing.in_reply_to is not None:
        mail["In-Reply-To"] = MessageIds("In-Reply-To", (_message_id(outgoing.in_reply_to),))
        chain = outgoing.references or (outgoing.in_reply_to,)
        mail["References"] = MessageIds("References", tuple(map(_message_id, chain)))
    mail.set_content(outgoing.body)
    return mail


@dataclass(frozen=True)
class MessageIds:
    """A header of Message-IDs (``In-Reply-To``, ``References``) as it goes on the wire: one id a line, never
    encoded. The standard library folds a header at 78 characters and, where one word is longer (a Message-ID of
    a hundred characters), writes it as RFC 2047 encoded words, which no mail program reads back as a Message-ID,
    and which glue the ids of ``References`` together: the answer would thread nowhere. A line of one id is
    within RFC 5322's 998 (``MESSAGE_ID_CHARS``). The message stores an object with a ``name`` as it is, and
    asks it to ``fold`` itself when written."""

    name: str
    ids: tuple[str, ...]

    def fold(self, *, policy: Policy) -> str:
        return f"{self.name}: " + f"{policy.linesep} ".join(self.ids) + policy.linesep

    def __str__(self) -> str:
        return " ".join(self.ids)


def _message_id(candidate: str) -> str:
    """A Message-ID of the customer's as it goes into a header: one ``<...>`` of printable ASCII, or ``ValueError``
    (a refusal of the email). The contracts it came through checked it already; this is the last door before
    the wire, so nothing a stranger wrote can add a header to the desk's email however it got this far."""
    if not _MESSAGE_ID.fullmatch(candidate):
        raise ValueError(f"the Message-ID it answers is not one the desk writes: {candidate[:80]!r}")
    return candidate


_MESSAGE_ID = re.compile(rf"<[!-;=?-~]{{1,{MESSAGE_ID_CHARS - 2}}}>")
"""Printable ASCII between angle brackets, no space, no ``<`` or ``>`` inside: what ``MessageId`` takes."""


def classify(error: Exception) -> MailRefusedError | MailDeferredError:
    """What a failed delivery means: refused for good (``MailRefusedError``) or worth retrying."""
    if _caused_by(error, ssl.SSLCertVerificationError):  # aiosmtplib wraps it when it comes while connecting
        return MailRefusedError(f"The mail server is not the one configured: {error}")
    if isinstance(error, aiosmtplib.SMTPRecipientsRefused):
        permanent = all(_permanent(refused.code) for refused in error.recipients)
        what, words = "the recipient", "; ".join(f"{refused.code} {refused.message}" for refused in error.recipients)
    elif isinstance(error, aiosmtplib.SMTPResponseException):
        permanent, what, words = _permanent(error.code), "the email", f"{error.code} {error.message}"
    elif isinstance(error, aiosmtplib.SMTPException) and not isinstance(error, _CONNECTION_ERRORS):
        # What the server lacks that this worker is configured to need: STARTTLS, AUTH, SMTPUTF8.
        return MailRefusedError(f"The mail server cannot take the email as configured: {error}")
    elif isinstance(error, ValueError):
        return MailRefusedError(f"The email cannot be sent as written: {error}")
    else:
        reason = "did not answer in time" if isinstance(error, TimeoutError) else "could not be reached or hung up"
        return MailDeferredError(f"The mail server {reason}: {error or type(error).__name__}")
    if permanent:
        return MailRefusedError(f"The mail server refused {what}: {words}")
    return MailDeferredError(f"The mail server deferred {what}: {words}")


_CONNECTION_ERRORS = (aiosmtplib.SMTPServerDisconnected, aiosmtplib.SMTPConnectError, aiosmtplib.SMTPTimeoutError)


def _caused_by(error: BaseException | None, kind: type[BaseException]) -> bool:
    while error is not None and not isinstance(error, kind):
        error = error.__cause__
    return error is not None


def _permanent(code: int) -> bool:
    return 500 <= code < 600  # the reply classes of RFC 5321, 4.2.1: 4yz transient, 5yz permanent
