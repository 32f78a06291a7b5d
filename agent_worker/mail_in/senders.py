"""Whether a message is from its ``From:`` address, by the standards mail providers use, or not.

A message counts as from its ``From:`` when either holds:

- **the desk's own mail server says so**: the first ``Authentication-Results`` header (RFC 8601, parsed by
  ``authres``) under the ``authserv-id`` the operator configures (``AGENT_MAIL_IN_AUTHSERV_ID``) reports
  ``dmarc=pass`` for the ``From:`` domain. Any other server's header is anyone's word, and is not read; the desk's
  server must remove headers that arrive already claiming its id (RFC 8601 section 5), as Postfix with OpenDMARC
  does;
- **or a DKIM signature verifies** (``dkimpy``, its keys looked up in DNS by ``dnspython``) **and is aligned with the
  ``From:`` domain** (DMARC, RFC 7489 section 3.1.1): its ``d=`` is the ``From:`` domain, or, unless the domain's
  DMARC record asks for strict alignment (``adkim=s``), a parent of it. A signature of another domain proves only
  that the other domain sent it.

Everything else (no signature, one that fails, one of another domain, a header of a server not configured) is
unverified, and a ticket started from it touches no order (``workflows.ownership``). Where DNS cannot be asked, the
message is unverified too, never deferred: the ticket still starts, and a person can verify its sender.
"""

from __future__ import annotations

import email
import email.policy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import authres
import dkim
import dns.exception
import dns.resolver

TxtLookup = Callable[[bytes], bytes | None]
"""A TXT lookup as dkimpy calls it (``dnsfunc``): the name, and the record's text, or None where there is none."""
DNS_SECONDS = 5.0


@dataclass(frozen=True)
class Verdict:
    verified: bool
    how: str
    """What verified it, or why nothing did: for the ticket's memo and the receiver's log."""


def txt_from_dns(name: bytes, timeout: float = DNS_SECONDS) -> bytes | None:
    """The TXT record at ``name`` from the system's resolver (``dnspython``), its strings joined; None if none."""
    try:
        answer = dns.resolver.resolve(name.decode().rstrip("."), "TXT", lifetime=timeout)
    except (dns.exception.DNSException, UnicodeError):
        return None
    for record in answer:
        return b"".join(record.strings)
    return None


def verdict(data: bytes, from_domain: str, *, authserv_id: str | None, lookup: TxtLookup = txt_from_dns) -> Verdict:
    """Whether the message ``data`` is from ``from_domain``, and how we know (module docstring)."""
    domain = from_domain.lower().rstrip(".")
    if authserv_id is not None:
        trusted = _trusted_results(data, authserv_id, domain)
        if trusted is not None:
            return trusted  # the desk's own server looked at this message with DNS at hand: its word decides
    unverified = Verdict(verified=False, how="no DKIM signature aligned with the From: domain verifies")
    return _by_dkim(data, domain, lookup) or unverified


def _trusted_results(data: bytes, authserv_id: str, domain: str) -> Verdict | None:
    """What the desk's server found (dmarc=pass for ``domain``, or not), or None if it said nothing."""
    message = email.message_from_bytes(data, policy=email.policy.compat32)
    for value in message.get_all("Authentication-Results", []):
        try:
            header = authres.AuthenticationResultsHeader.parse_value(str(value))
        except authres.AuthResError:
            continue
        if str(header.authserv_id).lower() != authserv_id.lower():
            continue
        dmarc = [result for result in header.results if result.method == "dmarc" and result.result == "pass"]
        if any(_header_from(result) in (None, domain) for result in dmarc):
            return Verdict(verified=True, how=f"dmarc=pass in Authentication-Results of {authserv_id}")
        return Verdict(verified=False, how=f"Authentication-Results of {authserv_id} reports no dmarc=pass")
    return None


def _header_from(result: Any) -> str | None:
    """The ``header.from`` a DMARC result names (the domain it judged), if it names one."""
    for prop in result.properties:
        if (prop.type, prop.name) == ("header", "from"):
            return str(prop.value).lower().rstrip(".")
    return None


def _by_dkim(data: bytes, domain: str, lookup: TxtLookup) -> Verdict | None:
    """A verified DKIM signature aligned with ``domain``, or None."""
    try:
        signatures = dkim_signatures(data)
        checker = dkim.DKIM(data, timeout=int(DNS_SECONDS))
    except dkim.DKIMException:  # a message dkimpy cannot even parse carries no signature it could verify
        return None
    if not signatures:
        return None
    strict = _dmarc_tags(domain, lookup).get("adkim") == "s"
    for index, signature in enumerate(signatures):
        signer = signature.get(b"d", b"").decode(errors="replace").lower().rstrip(".")
        aligned = signer == domain or (not strict and domain.endswith(f".{signer}") and "." in signer)
        if not aligned:
            continue
        try:
            good = checker.verify(idx=index, dnsfunc=lookup)
        except dkim.DKIMException:
            good = False
        if good:
            return Verdict(verified=True, how=f"DKIM signature of {signer} verifies, aligned with {domain}")
    return None


def dkim_signatures(data: bytes) -> list[dict[bytes, bytes]]:
    """The tags of each ``DKIM-Signature`` header, in the order dkimpy numbers them (``idx``)."""
    found: list[dict[bytes, bytes]] = []
    for name, value in dkim.rfc822_parse(data)[0]:
        if name.lower() == b"dkim-signature":
            try:
                found.append(dkim.util.parse_tag_value(value))
            except dkim.util.InvalidTagValueList:
                found.append({})
    return found


def _dmarc_tags(domain: str, lookup: TxtLookup) -> dict[str, str]:
    """The DMARC record of ``domain`` (or of its parent, an approximation of its organisational domain), as tags."""
    for name in dict.fromkeys([domain, ".".join(domain.split(".")[-2:])]):
        record = lookup(f"_dmarc.{name}.".encode())
        if record and record.lstrip().lower().startswith(b"v=dmarc1"):
            tags = (part.partition(b"=") for part in record.split(b";"))
            return {key.strip().decode().lower(): value.strip().decode().lower() for key, _, value in tags if key}
    return {}
