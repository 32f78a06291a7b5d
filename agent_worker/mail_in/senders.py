"""Whether a message is from its ``From:`` address, by the standards mail providers use, or not.

A message counts as from its ``From:`` when either holds:

- **the desk's own mail server says so**: the first ``Authentication-Results`` header (RFC 8601, parsed by
  ``authres``) under the ``authserv-id`` the operator configures (``AGENT_MAIL_IN_AUTHSERV_ID``) reports
  ``dmarc=pass`` for the ``From:`` domain. Any other server's header is anyone's word, and is not read; the desk's
  server must remove headers that arrive already claiming its id (RFC 8601 section 5), as Postfix with OpenDMARC
  does;
- **or a DKIM signature verifies** (``dkimpy``, its keys looked up in DNS by ``dnspython``'s asyncio resolver) **and
  is aligned with the ``From:`` domain** (DMARC, RFC 7489 section 3.1.1): its ``d=`` is the ``From:`` domain, or,
  unless the domain's DMARC record asks for strict alignment (``adkim=s``), a domain of the same organizational
  domain (section 3.2), which the Public Suffix List decides (``publicsuffixlist``, whose releases carry the list).
  So ``co.uk`` or ``github.io`` never speaks for a sender under it. A signature of another domain proves only that
  the other domain sent it.

Everything else (no signature, one that fails, one of another domain, a header of a server not configured) is
unverified, and a ticket started from it touches no order (``workflows.ownership``).

The sender of a message chooses its signatures, and so which names the desk asks DNS about, so what one message
may cost is bounded: at most ``MAX_SIGNATURES`` aligned signatures are tried; their keys and the DMARC record are
asked for all at once, under one deadline for the message; a lookup still out at the deadline is cancelled and
forgotten, whatever the resolver does, and the lookups hold no thread while they wait. Where DNS has not answered
what the verdict needed, the message is unverified (``Verdict.dns_unanswered``), never deferred: the ticket still
starts, gated, and a person can verify its sender.
"""

from __future__ import annotations

import asyncio
import email.parser
import email.policy
import re
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import Any, Final

import authres
import dkim
import dns.asyncresolver
import dns.exception
import dns.name
import dns.rdtypes.txtbase
import dns.resolver
from publicsuffixlist import PublicSuffixList

TxtLookup = Callable[[str], Coroutine[Any, Any, bytes | None]]
"""A TXT lookup: the absolute name (``mail._domainkey.example.com.``), and the record's text, or None where DNS says
there is none; ``Unanswered`` where DNS did not say (a timeout, every server failing)."""
MAX_SIGNATURES = 3
"""Aligned DKIM signatures tried for a message, those of the ``From:`` domain itself first. A sender signs once or
twice (its own domain, perhaps its provider's); a message with more is no more likely to be genuine, only costlier."""
DNS_SECONDS = 5.0
"""The deadline for all of a message's DNS lookups together (they are asked at once), unless the receiver's own
deadline for an answer calls for a shorter one (``dns_deadline``)."""

_SUFFIXES: Final = PublicSuffixList()
"""The Public Suffix List, ICANN's and the private section's (``github.io``) alike, as DMARC reads it."""


class Unanswered(Exception):  # noqa: N818 - what DNS did, as ``dns.resolver.NoAnswer`` names it
    """DNS did not answer a lookup: no server replied in time, or every one failed (``SERVFAIL``)."""


@dataclass(frozen=True)
class Verdict:
    verified: bool
    how: str
    """What verified it, or why nothing did: for the ticket's memo and the receiver's log."""
    dns_unanswered: bool = False
    """Unverified because DNS did not answer what the verdict needed (a key, the DMARC record) within the deadline:
    the message is taken, gated, and counted (``agent_mail_in_dns_unanswered``)."""


def dns_deadline(answer_within_seconds: float) -> float:
    """The deadline of a message's lookups: ``DNS_SECONDS``, or a quarter of the receiver's deadline for its answer
    if that is shorter, so that DNS never costs the message its answer."""
    return min(DNS_SECONDS, answer_within_seconds / 4)


class DnsTxt:
    """TXT records by DNS (``dnspython``'s asyncio resolver: a lookup holds a socket while it waits, no thread, and
    cancelling it closes the socket). The resolver is the system's (``/etc/resolv.conf``) unless one is given,
    read at the first lookup, so that a machine without one fails its lookups, not the receiver's start."""

    def __init__(self, resolver: dns.asyncresolver.Resolver | None = None) -> None:
        self._resolver = resolver

    async def __call__(self, name: str) -> bytes | None:
        try:
            absolute = dns.name.from_text(name)
        except (dns.exception.DNSException, UnicodeError, ValueError):
            return None  # a name no DNS holds (a label too long): the signature that named it names no key
        try:
            if self._resolver is None:
                self._resolver = dns.asyncresolver.Resolver()
            answer = await self._resolver.resolve(absolute, "TXT", lifetime=DNS_SECONDS, search=False)
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
            return None
        except (dns.exception.DNSException, OSError) as error:  # a timeout, every server failing, no resolver
            raise Unanswered(f"{name}: {type(error).__name__}") from error
        for record in answer:
            if isinstance(record, dns.rdtypes.txtbase.TXTBase):
                return b"".join(record.strings)
        return None


async def verdict(
    data: bytes, from_domain: str, *, authserv_id: str | None, lookup: TxtLookup, within: float = DNS_SECONDS
) -> Verdict:
    """Whether the message ``data`` is from ``from_domain``, and how we know (module docstring); its lookups done
    within ``within`` seconds all together. Reading the message and checking signatures is work for the processor
    alone, done in a thread so the event loop keeps answering other messages; no thread ever waits on DNS."""
    domain = normal(from_domain)
    if authserv_id is not None:
        trusted = await asyncio.to_thread(_trusted_results, data, authserv_id, domain)
        if trusted is not None:
            return trusted  # the desk's own server looked at this message with DNS at hand: its word decides
    candidates = await asyncio.to_thread(aligned_signatures, data, domain)
    if not candidates:
        return Verdict(verified=False, how="no DKIM signature aligned with the From: domain")
    names = [candidate.key_name for candidate in candidates]
    if any(candidate.signer != domain for candidate in candidates):  # only relaxed alignment asks for the record
        names += _dmarc_names(domain)
    records = await looked_up(names, lookup, within)
    return await asyncio.to_thread(_judged, data, domain, candidates, records)


def normal(domain: str) -> str:
    """A domain as DNS and the Public Suffix List compare it: lower case, no final dot, IDNA's ASCII form."""
    lowered = domain.strip().lower().rstrip(".")
    try:
        return lowered.encode("idna").decode("ascii")
    except UnicodeError:
        return lowered


def organizational_domain(domain: str) -> str | None:
    """DMARC's organizational domain of ``domain`` (RFC 7489 section 3.2): the public suffix and one label more; None
    for a public suffix itself (``co.uk``, ``github.io``), which is no organization's."""
    found: str | None = _SUFFIXES.privatesuffix(normal(domain))
    return found


@dataclass(frozen=True)
class Signature:
    """A DKIM signature worth trying: its index as dkimpy counts them, its signing domain, and where its key is."""

    index: int
    signer: str
    key_name: str


def aligned_signatures(data: bytes, domain: str) -> list[Signature]:
    """The message's DKIM signatures that would be aligned with ``domain`` under relaxed alignment (its
    organizational domain), the domain's own first, at most ``MAX_SIGNATURES``; none of a message dkimpy cannot
    parse."""
    try:
        headers = dkim.rfc822_parse(data)[0]
    except dkim.DKIMException:
        return []
    organization = organizational_domain(domain)
    found: list[Signature] = []
    signatures = (value for name, value in headers if name.lower() == b"dkim-signature")
    for index, value in enumerate(signatures):
        try:
            tags = dkim.util.parse_tag_value(value)
            key_name = (tags[b"s"] + b"._domainkey." + tags[b"d"] + b".").decode("ascii")  # as dkimpy asks for it
        except (dkim.util.InvalidTagValueList, KeyError, UnicodeError):
            continue
        signer = normal(tags[b"d"].decode("ascii"))
        if signer == domain or (organization is not None and organizational_domain(signer) == organization):
            found.append(Signature(index=index, signer=signer, key_name=key_name))
    found.sort(key=lambda signature: signature.signer != domain)  # stable: the domain's own, then in order
    return found[:MAX_SIGNATURES]


_UNANSWERED: Final = Unanswered("the deadline passed")
Records = dict[str, bytes | Unanswered | None]
"""What DNS said of each name: the record, None for none, or that it did not answer."""


async def looked_up(names: Iterable[str], lookup: TxtLookup, within: float) -> Records:
    """Each name's TXT record, all asked at once and given ``within`` seconds together. A lookup still out then is
    cancelled and not waited for (a resolver that ignored the cancellation would otherwise keep the message), and
    reads as unanswered."""
    tasks: dict[str, asyncio.Task[bytes | None]] = {
        name: asyncio.create_task(lookup(name)) for name in dict.fromkeys(names)
    }
    await asyncio.wait(tasks.values(), timeout=within)
    records: Records = {}
    for name, task in tasks.items():
        if not task.done():
            task.cancel()
            task.add_done_callback(_forgotten)
            records[name] = _UNANSWERED
        elif task.cancelled():
            records[name] = _UNANSWERED
        elif (error := task.exception()) is not None:  # DNS's failure or the lookup's own: either way, no answer
            records[name] = error if isinstance(error, Unanswered) else Unanswered(f"{name}: {error!r}")
        else:
            records[name] = task.result()
    return records


def _forgotten(task: asyncio.Task[bytes | None]) -> None:
    """Whatever a cancelled lookup ended with, read, so that asyncio does not report it as never retrieved."""
    if not task.cancelled():
        task.exception()


def _judged(data: bytes, domain: str, candidates: list[Signature], records: Records) -> Verdict:
    """The verdict on ``candidates`` with DNS's answers in ``records``: the first signature that verifies and is
    aligned decides. Unanswered lookups make the message unverified only if nothing else verified it."""
    try:
        checker = dkim.DKIM(data)
    except dkim.DKIMException:
        return Verdict(verified=False, how="the message cannot be read for its DKIM signatures")
    unanswered: list[str] = []
    for candidate in candidates:
        key = records.get(candidate.key_name)
        if isinstance(key, Unanswered):
            unanswered.append(f"the key of {candidate.signer}")
            continue
        if key is None or not _verifies(checker, candidate, key):
            continue
        if candidate.signer == domain:
            return Verdict(verified=True, how=f"DKIM signature of {candidate.signer} verifies, aligned with {domain}")
        alignment = _alignment(domain, records)
        if isinstance(alignment, Unanswered):
            unanswered.append(f"the DMARC record of {domain}")
        elif alignment == "r":
            return Verdict(
                verified=True,
                how=f"DKIM signature of {candidate.signer} verifies, aligned with {domain} by their organizational "
                f"domain {organizational_domain(domain)}",
            )
    if unanswered:
        return Verdict(
            verified=False,
            how=f"DNS did not answer in time for {', '.join(dict.fromkeys(unanswered))}",
            dns_unanswered=True,
        )
    return Verdict(verified=False, how="no DKIM signature aligned with the From: domain verifies")


def _verifies(checker: dkim.DKIM, candidate: Signature, key: bytes) -> bool:
    def keys(name: bytes, timeout: float = 0) -> bytes | None:
        del timeout
        return key if name.decode("ascii", errors="replace") == candidate.key_name else None

    try:
        return bool(checker.verify(idx=candidate.index, dnsfunc=keys))
    except dkim.DKIMException:
        return False


def _dmarc_names(domain: str) -> list[str]:
    """Where ``domain``'s DMARC record may be: its own name, then its organizational domain's (RFC 7489, 6.6.3)."""
    organization = organizational_domain(domain)
    return [f"_dmarc.{name}." for name in dict.fromkeys([domain, organization or domain])]


def _alignment(domain: str, records: Records) -> str | Unanswered:
    """The DKIM alignment ``domain``'s DMARC record asks for: ``s`` (strict) or ``r`` (relaxed, the default, also
    where there is no record), or ``Unanswered`` where DNS did not say."""
    for name in _dmarc_names(domain):
        record = records.get(name)
        if isinstance(record, Unanswered):
            return record
        tags = _dmarc_tags(record)
        if tags is not None:
            return "s" if tags.get("adkim") == "s" else "r"
    return "r"


def _dmarc_tags(record: bytes | None) -> dict[str, str] | None:
    """A DMARC record's tags, or None if ``record`` is not one."""
    if not record or not re.match(rb"\s*v\s*=\s*dmarc1\s*(;|$)", record, re.IGNORECASE):
        return None
    text = record.decode(errors="replace").lower()
    tags = (part.partition("=") for part in text.split(";"))
    return {key.strip(): value.strip() for key, _, value in tags if key.strip()}


def _trusted_results(data: bytes, authserv_id: str, domain: str) -> Verdict | None:
    """What the desk's server found (dmarc=pass for ``domain``, or not), or None if it said nothing."""
    headers = email.parser.BytesHeaderParser(policy=email.policy.compat32).parsebytes(data)  # the body is not read
    for value in headers.get_all("Authentication-Results", []):
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
            return normal(str(prop.value))
    return None
