"""Mail signed the way a customer's provider signs it: DKIM by dkimpy with an RSA key made here, and its public key
(and a DMARC record) served by a resolver the test holds, so verification runs for real with no network.

``Domains`` is that resolver: ``lookup`` is what the receiver is handed as its TXT lookup
(``agent_worker.mail_in.senders.TxtLookup``), and ``sign`` signs a message for a domain it has a key of."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

import dkim
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

SELECTOR = "mail"


@dataclass
class Domains:
    """The DNS of a few mail domains: each one's DKIM key under ``mail._domainkey``, and any DMARC records."""

    records: dict[bytes, bytes] = field(default_factory=dict)
    _keys: dict[str, bytes] = field(default_factory=dict)

    def add(self, domain: str, *, dmarc: str | None = "v=DMARC1; p=reject") -> Domains:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._keys[domain] = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        )
        public = key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        self.records[f"{SELECTOR}._domainkey.{domain}.".encode()] = b"v=DKIM1; k=rsa; p=" + base64.b64encode(public)
        if dmarc is not None:
            self.records[f"_dmarc.{domain}.".encode()] = dmarc.encode()
        return self

    async def lookup(self, name: str) -> bytes | None:
        """The receiver's TXT lookup (``senders.TxtLookup``), answered from these domains' records."""
        return self.records.get((name if name.endswith(".") else f"{name}.").encode())

    def sign(self, data: bytes, domain: str) -> bytes:
        """``data`` with a DKIM-Signature of ``domain`` on top, as its provider would send it."""
        headers = [b"from", b"to", b"subject", b"message-id", b"date", b"in-reply-to", b"references"]
        signature: bytes = dkim.sign(
            data, SELECTOR.encode(), domain.encode(), self._keys[domain], include_headers=headers
        )
        return signature + data
