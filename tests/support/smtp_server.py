"""A real SMTP server on 127.0.0.1 for the mail tests: ``aiosmtpd``, which the worker's ``aiosmtplib`` talks to
over a real socket, as it would to a company's mail relay.

It runs in a thread with its own event loop, on a port the system picks, so it answers while the test's
event loop waits on a worker (or a worker process). It keeps every message it accepted, and answers as the
test scripts it: defer the next messages (a 4xx to DATA), refuse every recipient (a 5xx to RCPT), run a
callback once it holds a message and before it says so (a test kills the worker there), speak TLS from
the first byte or offer STARTTLS, and ask for a login. ``self_signed`` makes the certificate for that:
nothing here needs the network or a certificate authority.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import email
import email.policy
import ipaddress
import ssl
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from agent_worker.config.mail_settings import SmtpSettings

HOST = "127.0.0.1"
START_TIMEOUT = 10.0


@dataclass(frozen=True)
class Received:
    """A message the server accepted: its envelope and the message as it arrived."""

    mail_from: str
    rcpt_tos: list[str]
    message: EmailMessage

    @property
    def body(self) -> str:
        part = self.message.get_body(("plain",))
        assert part is not None
        content: str = part.get_content()
        return content


@dataclass
class MailServer:
    """The server and its script. ``tls``: TLS from the first byte with this context; ``starttls``: offer (and
    require) STARTTLS with it; ``logins``: the user names and passwords it takes, and then demands one before
    it takes a recipient (and offers AUTH only over TLS)."""

    tls: ssl.SSLContext | None = None
    starttls: ssl.SSLContext | None = None
    logins: dict[str, str] = field(default_factory=dict)
    deferrals: deque[str] = field(default_factory=deque)
    """Answers to the next DATA commands instead of accepting, e.g. ``451 4.3.0 Try again later``."""
    refuse_recipients: str | None = None
    """An answer to every RCPT, e.g. ``550 5.1.1 No such mailbox``."""
    on_message: Callable[[Received], None] | None = None
    """Called in the server's thread with each message accepted, before the client is told it was."""
    received: list[Received] = field(default_factory=list)
    port: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def messages(self) -> list[Received]:
        with self._lock:
            return list(self.received)

    # --- aiosmtpd's handler hooks ---

    async def handle_RCPT(  # noqa: N802 - the name aiosmtpd calls
        self, _server: SMTP, session: Session, envelope: Envelope, address: str, _options: list[str]
    ) -> str:
        if self.logins and not session.authenticated:
            return "530 5.7.0 Authentication required"
        if self.refuse_recipients is not None:
            return self.refuse_recipients
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 OK"

    async def handle_DATA(self, _server: SMTP, _session: Session, envelope: Envelope) -> str:  # noqa: N802
        with self._lock:
            if self.deferrals:
                return self.deferrals.popleft()
        assert isinstance(envelope.content, bytes)
        assert envelope.mail_from is not None
        # Stored with Unix line ends, as a mailbox on disk keeps it: the wire's CRLF is the protocol's, not the text's.
        message = email.message_from_bytes(envelope.content.replace(b"\r\n", b"\n"), policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        received = Received(envelope.mail_from, list(envelope.rcpt_tos), message)
        with self._lock:
            self.received.append(received)
            number = len(self.received)
        if self.on_message is not None:
            self.on_message(received)
        return f"250 2.0.0 Ok: queued as Q{number}"

    def _authenticate(
        self, _server: SMTP, _session: Session, _envelope: Envelope, _mechanism: str, data: Any
    ) -> AuthResult:
        ok = isinstance(data, LoginPassword) and self.logins.get(data.login.decode()) == data.password.decode()
        return AuthResult(success=ok, handled=False)  # handled=False: aiosmtpd answers 235 or 535 itself

    # --- running it ---

    def _protocol(self) -> SMTP:
        assert self._loop is not None
        return SMTP(
            self,
            hostname="mail.test",  # not the machine's name: looking that up can take seconds
            tls_context=self.starttls,
            require_starttls=self.starttls is not None,
            authenticator=self._authenticate if self.logins else None,
            # aiosmtpd counts only STARTTLS as encryption: over TLS from the first byte it would not offer AUTH.
            # Without a login, RCPT is refused (above) instead.
            auth_require_tls=self.tls is None,
            loop=self._loop,
        )

    @contextmanager
    def running(self) -> Iterator[MailServer]:
        ready = threading.Event()
        stop: list[asyncio.Event] = []

        def serve() -> None:
            self._loop = loop = asyncio.new_event_loop()

            async def main() -> None:
                server = await loop.create_server(self._protocol, HOST, 0, ssl=self.tls)
                self.port = server.sockets[0].getsockname()[1]
                stop.append(asyncio.Event())
                ready.set()
                async with server:
                    await stop[0].wait()

            try:
                loop.run_until_complete(main())
            finally:
                loop.close()

        thread = threading.Thread(target=serve, name="smtp-server", daemon=True)
        thread.start()
        assert ready.wait(START_TIMEOUT), "the SMTP server did not start"
        try:
            yield self
        finally:
            assert self._loop is not None
            self._loop.call_soon_threadsafe(stop[0].set)
            thread.join(START_TIMEOUT)


@dataclass(frozen=True)
class Certificate:
    """A self-signed certificate for 127.0.0.1 and localhost: the server's, and the CA a client trusts."""

    cert: Path
    key: Path

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert, self.key)
        return context


def self_signed(folder: Path) -> Certificate:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mail.test")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address(HOST))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    paths = Certificate(folder / "mail.pem", folder / "mail.key")
    paths.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths.key.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


SENDER = "Support <support@example.com>"


def smtp_settings(server: MailServer, **overrides: Any) -> SmtpSettings:
    """The worker's mail settings (``Settings.smtp``, ``overrides`` its fields) for mail through ``server``: plain
    SMTP unless overridden."""
    return SmtpSettings(**_smtp_fields(server, **overrides))


def _smtp_fields(server: MailServer, **overrides: Any) -> dict[str, Any]:
    return {"mail": "smtp", "host": HOST, "port": server.port, "security": "none", "mail_from": SENDER, **overrides}


def smtp_env(server: MailServer, **overrides: Any) -> dict[str, str]:
    """The same settings as a worker process reads them from its environment."""
    return {variable(name): str(value) for name, value in _smtp_fields(server, **overrides).items()}


def variable(field: str) -> str:
    """The environment variable of one of ``SmtpSettings``' fields, as the settings read it."""
    alias = SmtpSettings.model_fields[field].validation_alias
    return alias if isinstance(alias, str) else f"AGENT_SMTP_{field.upper()}"
