"""The outbox's relay to a real mail server, over SMTP with ``aiosmtplib`` (``AGENT_MAIL=smtp``).

``SmtpRelay.deliver`` hands one recorded email (``activities.business.mail.OutgoingEmail``) to the server and
returns its acceptance; the outbox around it keeps the rule SMTP does not know, once per idempotency key.

**Sync outside, async inside.** The ports are synchronous: the tool activities run them in a thread, beside
a heartbeat, and turn their refusals into non-retryable errors in one place (``activities.tools._call``).
The relay keeps that shape and runs each delivery with ``asyncio.run`` in that thread: a fresh event loop,
one connection, closed when the message is handed over. Nothing is shared with the worker's own loop, so a
slow server never stalls a workflow task, and a delivery is bounded as a whole by ``timeout_seconds``, below
the ``send_email`` activity's start-to-close timeout, so an attempt ends with an answer before Temporal gives
up on it. One connection per email costs a handshake each; a support desk sends a few emails a minute.

**Every failure is classified here, once**, by what the server said (RFC 5321): a 5xx reply (no such
mailbox, a sender it will not relay for, credentials it refuses, an extension it lacks) is a refusal for
good, ``MailRefusedError``, which reaches the model non-retryable with the server's own words; anything
else (a 4xx reply, a refused or dropped connection, no answer in time, a certificate it could not check)
is ``MailDeferredError``, retried by Temporal. ``aiosmtplib`` has no retries of its own to switch off:
each attempt is one try, and every retry is in the ticket's history.
"""

from __future__ import annotations

import asyncio
import email.utils
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path
from typing import Literal

import aiosmtplib
from pydantic import SecretStr

from activities.business.mail import MailDeferredError, OutgoingEmail
from activities.business.refusals import MailRefusedError

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

    def __init__(self, server: SmtpServer) -> None:
        self.server = server

    @property
    def domain(self) -> str:
        return self.server.address.rpartition("@")[2]

    def deliver(self, outgoing: OutgoingEmail) -> str:
        """Synchronous, for a thread with no event loop running (the activities' thread, or a script's)."""
        return asyncio.run(self._deliver(outgoing))

    async def _deliver(self, outgoing: OutgoingEmail) -> str:
        server = self.server
        try:
            mail = message(outgoing, server.sender)
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
        except Exception as error:
            raise classify(error) from error
        return reply

    def __str__(self) -> str:
        return str(self.server)


def message(outgoing: OutgoingEmail, sender: str) -> EmailMessage:
    """The email as the server receives it, the same on every delivery: its Message-ID and Date are the ones
    recorded with it. A header with a line break in it (a subject the model wrote over two lines) raises
    ``ValueError`` here instead of becoming a header of its own."""
    mail = EmailMessage()
    mail["From"] = sender
    mail["To"] = outgoing.to
    mail["Subject"] = outgoing.subject
    mail["Date"] = email.utils.format_datetime(outgoing.recorded_at)
    mail["Message-ID"] = outgoing.message_id
    mail.set_content(outgoing.body)
    return mail


def classify(error: Exception) -> MailRefusedError | MailDeferredError:
    """What a failed delivery means: refused for good (``MailRefusedError``) or worth retrying."""
    if isinstance(error, aiosmtplib.SMTPRecipientsRefused):
        permanent = all(_permanent(refused.code) for refused in error.recipients)
        what, words = "the recipient", "; ".join(f"{refused.code} {refused.message}" for refused in error.recipients)
    elif isinstance(error, aiosmtplib.SMTPResponseException):
        permanent, what, words = _permanent(error.code), "the email", f"{error.code} {error.message}"
    elif isinstance(error, aiosmtplib.SMTPNotSupported):
        return MailRefusedError(f"The mail server cannot take the email as configured: {error}")
    elif isinstance(error, ValueError):
        return MailRefusedError(f"The email cannot be sent as written: {error}")
    else:
        reason = "did not answer in time" if isinstance(error, TimeoutError) else "could not be reached"
        return MailDeferredError(f"The mail server {reason}: {error or type(error).__name__}")
    if permanent:
        return MailRefusedError(f"The mail server refused {what}: {words}")
    return MailDeferredError(f"The mail server deferred {what}: {words}")


def _permanent(code: int) -> bool:
    return 500 <= code < 600  # the reply classes of RFC 5321, 4.2.1: 4yz transient, 5yz permanent
