"""The mail receiver (``agent-worker mail-in``): where it listens, which protocol the desk's mail server speaks to
it, the limits a message must keep within, and how long a ticket it starts stays open for the customer's reply
(``AGENT_MAIL_IN_*``)."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, PositiveInt, model_validator
from pydantic_settings import SettingsConfigDict

from activities.contracts.fields import DAY
from agent_worker.config.concern import Concern, loopback


class MailInSettings(Concern):
    model_config = SettingsConfigDict(env_prefix="AGENT_MAIL_IN_")

    protocol: Literal["lmtp", "smtp"] = "lmtp"
    """``lmtp``: the desk's mail server delivers to the receiver as its last hop (Postfix's ``lmtp:`` transport);
    ``smtp``: it relays to it as to another mail server."""
    host: str = "127.0.0.1"
    """Where the receiver listens. It takes mail from whoever connects, so a non-loopback address needs
    ``allow_network`` as well: the desk's own mail server in front of it is what filters the world's."""
    port: int = Field(default=8024, ge=0, le=65535)
    allow_network: bool = False
    """Listen on a non-loopback ``host``: set only where the network lets the desk's mail server alone reach it."""
    max_message_bytes: PositiveInt = 10 * 1024 * 1024
    """A message past this is refused (``552``) while it arrives, and advertised as the server's ``SIZE``."""
    max_parts: PositiveInt = 50
    """MIME parts, the message itself counted: past it, refused (``552``). A part is parsed to find the text, so a
    message of ten thousand empty parts must not be."""
    max_header_chars: PositiveInt = 8_192
    """The longest header value, unfolded; a longer one is refused (``552``)."""
    authserv_id: str | None = None
    """The ``authserv-id`` of the desk's own mail server (``mx.desk.example``): its ``Authentication-Results`` header
    is trusted to say whether a message passed DMARC (``agent_worker.mail_in.senders``), and the server must strip
    such headers arriving from outside. Unset: no such header is read, and the receiver checks DKIM itself."""
    answer_within_seconds: float = Field(default=120.0, gt=0, le=540)
    """How long a message may wait for Temporal (a reply waits for a worker to accept it) before the answer is
    ``451`` and the mail server tries again later: below the minutes a mail server waits for the answer to ``DATA``
    (Postfix's ``lmtp_data_done_timeout``, 600 s), so the deferral is ours, said, not its timeout."""
    reply_window_seconds: int = Field(default=14 * DAY, ge=0, le=90 * DAY)
    """How long a ticket started by mail stays open for the customer's reply after each answer: a customer answers
    mail over days, and a reply after the window opens a new ticket that names the old one."""

    @model_validator(mode="after")
    def _on_loopback_unless_told(self) -> Self:
        """A receiver open to the network would start tickets for anyone who can connect to it."""
        if not self.allow_network and not loopback(self.host):
            raise ValueError(
                f"AGENT_MAIL_IN_HOST={self.host} is not a loopback address: the receiver takes mail from whoever "
                "connects, so set AGENT_MAIL_IN_ALLOW_NETWORK=true only where the desk's mail server alone can "
                "reach it"
            )
        return self
