"""The address a customer's reply goes to: ``support+<ticket>.<mac>@desk``, signed for the ticket it names.

The desk's outgoing mail carries it as its ``Reply-To`` (``activities.business.smtp``), and the mail receiver
routes a reply by it (``agent_worker.mail_in``), before any threading header: a customer's mail program may drop
``In-Reply-To`` and ``References``, but it answers to the ``Reply-To``. The MAC (HMAC-SHA256 under the key the
workers and the receiver share, ``AGENT_MAIL_REPLY_KEY``) is what makes the address the desk's word: without it,
anyone could write to ``support+<any ticket>@desk`` and be routed into a stranger's ticket (the receiver still
checks that a reply comes from the ticket's customer; the MAC keeps a guessed ticket id from getting that far).

An address's local part is at most 64 octets (RFC 5321), so only a ticket whose id fits, in letters, digits, ``-``
and ``_``, gets one; others are routed by the threading headers alone.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from dataclasses import dataclass

MAC_CHARS = 16
"""80 bits of the MAC, in lower-case base32: far past guessing through a mail server's rate limits."""
LOCAL_PART_OCTETS = 64
TICKET_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


@dataclass(frozen=True)
class ReplyAddresses:
    """Signs and reads the reply addresses of one desk: ``base`` is its own address (``support@desk.example``)."""

    key: bytes
    base: str

    def for_ticket(self, ticket_id: str) -> str | None:
        """The address replies to ``ticket_id`` go to, or None where one cannot be written (see the module)."""
        local, _, domain = self.base.rpartition("@")
        name = local.partition("+")[0]
        candidate = f"{name}+{ticket_id}.{self._mac(ticket_id)}"
        if not TICKET_ID.fullmatch(ticket_id) or len(candidate.encode()) > LOCAL_PART_OCTETS:
            return None
        return f"{candidate}@{domain}"

    def ticket_of(self, address: str) -> str | None:
        """The ticket ``address`` was signed for, or None: not one of this desk's reply addresses, or a MAC that
        does not check (compared in constant time)."""
        local, _, domain = address.strip().strip("<>").rpartition("@")
        own_local, _, own_domain = self.base.rpartition("@")
        name, plus, token = local.partition("+")
        if not plus or domain.lower() != own_domain.lower() or name != own_local.partition("+")[0]:
            return None
        ticket_id, _, mac = token.rpartition(".")
        if not TICKET_ID.fullmatch(ticket_id) or not hmac.compare_digest(mac.lower(), self._mac(ticket_id)):
            return None
        return ticket_id

    def _mac(self, ticket_id: str) -> str:
        digest = hmac.new(self.key, f"reply-to:{ticket_id}".encode(), hashlib.sha256).digest()
        return base64.b32encode(digest).decode().lower()[:MAC_CHARS]
