"""Where ``send_email`` sends: the embedded outbox, or a mail server (``AGENT_MAIL``, ``AGENT_MAIL_FROM``,
``AGENT_SMTP_*``)."""

from __future__ import annotations

from email.utils import parseaddr
from pathlib import Path
from typing import Literal, Self

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import SettingsConfigDict

from agent_worker.config.concern import Concern, loopback


class SmtpSettings(Concern):
    model_config = SettingsConfigDict(env_prefix="AGENT_SMTP_")

    mail: Literal["embedded", "smtp"] = Field(default="embedded", validation_alias="AGENT_MAIL")
    """``embedded``: into the outbox table, and nowhere else. ``smtp``: to the mail server below, the outbox recording
    each email under its key first (``activities.business.mail``)."""
    mail_from: str | None = Field(default=None, validation_alias="AGENT_MAIL_FROM")
    """The From of every email, ``Support <support@example.com>`` or an address; its address is also the
    envelope sender, and its domain that of the Message-IDs."""
    reply_key: SecretStr | None = Field(default=None, min_length=32, validation_alias="AGENT_MAIL_REPLY_KEY")
    """A secret of at least 32 characters, shared by the workers and the mail receiver (``agent-worker mail-in``):
    each email's ``Reply-To`` is ``AGENT_MAIL_FROM``'s address with ``+<ticket>.<mac>`` signed by it
    (``activities.business.reply_addresses``), so a customer's reply finds its ticket. Unset: no ``Reply-To``, and
    replies are routed by their threading headers alone."""
    host: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    """Default by ``security``: 25 for ``none``, 587 for ``starttls``, 465 for ``tls``."""
    security: Literal["none", "starttls", "tls"] = "starttls"
    """``starttls``: plain connection upgraded to TLS, required; ``tls``: TLS from the first byte; ``none``: no
    encryption (a relay on the same machine). The server's certificate is always checked."""
    username: str | None = None
    password: SecretStr | None = None
    """A secret: never logged, never shown; with ``none`` only to a server on a loopback address."""
    ca_file: Path | None = None
    """A certificate authority to trust for the server's certificate besides the system's (a private CA)."""
    timeout_seconds: float = Field(default=20.0, gt=0)
    """One delivery, connecting to quitting. The worker refuses to start unless it is below the ``send_email``
    activity's attempt (``agent_worker.wiring.check_client_timeouts``), so a slow server ends an attempt with a
    retryable answer rather than an attempt Temporal gave up on."""

    @model_validator(mode="after")
    def _come_together(self) -> Self:
        """A worker that would send mail to nowhere, or a password in clear over a network, does not start; nor
        does anything given a reply key with no address to sign reply addresses under."""
        if self.reply_key is not None and self.mail_from is None:
            raise ValueError(
                "AGENT_MAIL_REPLY_KEY needs AGENT_MAIL_FROM: a reply address is its address with a token signed by "
                "the key, e.g. support+<ticket>.<mac>@example.com"
            )
        if self.mail != "smtp":
            return self
        needed = {"AGENT_SMTP_HOST": self.host, "AGENT_MAIL_FROM": self.mail_from}
        missing = [name for name, value in needed.items() if value is None]
        if missing:
            raise ValueError(
                f"AGENT_MAIL=smtp needs {' and '.join(missing)}: the mail server to hand emails to, and the address "
                "they come from"
            )
        assert self.mail_from is not None
        if "@" not in parseaddr(self.mail_from)[1]:
            raise ValueError(
                f"AGENT_MAIL_FROM must name an address, e.g. Support <support@example.com>, not {self.mail_from!r}"
            )
        if (self.username is None) != (self.password is None):
            raise ValueError("AGENT_SMTP_USERNAME and AGENT_SMTP_PASSWORD go together: set both, or neither")
        if self.password is not None and self.security == "none" and not loopback(self.host or ""):
            raise ValueError(
                "AGENT_SMTP_SECURITY=none would send AGENT_SMTP_PASSWORD in clear to a server on the network: "
                "use starttls or tls"
            )
        return self
