"""Who is asking: the approval inbox's authentication, and its defences against requests made in someone's name.

The approver an answer carries is who this module says sent the request, never a form field: a form can be
edited, a header sent by anyone, a cookie copied from nowhere. Two ways of knowing, either or both configured:

- **Behind a single-sign-on proxy** (oauth2-proxy and the like). The proxy signs the person in with the
  company's identity provider and names them in a header (``AGENT_WEB_PROXY_HEADER``, e.g. ``X-Forwarded-Email``).
  The inbox believes that header only on connections from the proxy's own addresses
  (``AGENT_WEB_TRUSTED_PROXIES``): anyone else can send any header they like.
- **Standalone.** Each approver has a password, kept only as an argon2id hash (``AGENT_WEB_USERS``;
  ``agent-worker web-user NAME`` makes one with argon2-cffi, a maintained binding of the reference
  implementation, rather than hashing code of our own: ``agent_worker.passwords``). Any other kind of hash, a
  ``scrypt$...`` one included, stops the inbox at start, naming the person and the command that makes a new one.
  Signing in
  starts a session kept on the server (``agent_worker.inbox.sessions``), whose random token the cookie holds:
  HttpOnly (no script reads it), SameSite=Lax (no other site's form or script sends it), Secure wherever the
  page is served over https. Signing out ends it on the server; it ends by itself after its idle time and its
  maximum age, and when the person's password changes (it keeps a fingerprint of the hash signed in with).
  Wrong passwords are slowed down per person and per address (``agent_worker.inbox.throttle``), and a throttled
  attempt is refused before its password is checked. A browser where a person signed in keeps a device cookie,
  ``inbox_device``, signed for their name (a random id, when it was made, a MAC under the inbox's keys): their next
  sign-in from it is counted under that device alone, so nobody else's wrong guesses on their name lock them out.

Every form carries a CSRF token bound to the session (its token's hash; or to the proxy's person), and every POST
must come from the inbox's own origin (its ``Origin`` header, or else its ``Referer``): a page elsewhere cannot
make a signed-in person's browser answer a request.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import ipaddress
import math
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from agent_worker.passwords import hash_password, password_matches

if TYPE_CHECKING:
    from agent_worker.inbox.sessions import Sessions
    from agent_worker.inbox.throttle import Throttle

SESSION_COOKIE = "inbox_session"
LOGIN_COOKIE = "inbox_login"
"""A nonce set on the sign-in page, so the sign-in form has a CSRF token too (login CSRF: signing a person in as
someone else)."""

DEVICE_COOKIE = "inbox_device"
"""A browser where a person signed in: ``<id>.<made, unix seconds>.<MAC of the name, id and time>``."""
DEVICE_LIFETIME = timedelta(days=90)
"""How long a device stays known after its last sign-in there: each sign-in makes its cookie anew."""
CLOCK_SKEW = timedelta(minutes=5)

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Person:
    """Someone the inbox authenticated: the name every answer they give is signed for."""

    name: str
    how: Literal["proxy", "password"]
    binding: str
    """What their CSRF token is bound to: their session (its token's hash), or, behind the proxy, their name."""


@dataclass(frozen=True)
class SignedIn:
    token: str
    """The new session's token, for the cookie."""
    device: str = ""
    """The device cookie for the browser that signed in: its sign-ins as this person are counted apart."""


@dataclass(frozen=True)
class WrongPassword:
    pass


@dataclass(frozen=True)
class Throttled:
    """An attempt refused unchecked (``agent_worker.inbox.throttle``): whose count is full, and how long until it is
    not."""

    who: Literal["person", "address", "device"]
    retry_after: timedelta

    @property
    def seconds(self) -> int:
        """For ``Retry-After``: whole seconds, rounded up."""
        return max(math.ceil(self.retry_after.total_seconds()), 1)

    def wait(self) -> str:
        """The wait as a person reads it: "4 min", rounded up; "40 s" under a minute."""
        seconds = self.seconds
        return f"{math.ceil(seconds / 60)} min" if seconds >= 60 else f"{seconds} s"


SignInResult = SignedIn | WrongPassword | Throttled


class Keys:
    """The inbox's own keys for CSRF tokens, credential fingerprints and what it hands a browser to carry back
    (``encrypt``), derived from its signing keys (``AGENT_WEB_APPROVAL_KEYS``) under labels of their own, so none can
    ever pass for an approval's signature or the reverse. It signs and encrypts with the last key and accepts any,
    as the workers do, so rotating the signing key keeps people signed in."""

    def __init__(self, signing_keys: Sequence[bytes]) -> None:
        if not signing_keys:
            raise ValueError("the approval inbox needs at least one signing key")
        label = b"agent-worker approval inbox: sessions"
        self._keys = [hmac.new(key, label, hashlib.sha256).digest() for key in signing_keys]
        self._ciphers = [AESGCM(_derived(key, b"agent-worker approval inbox: sealed values")) for key in signing_keys]

    def encrypt(self, plain: bytes, *, about: bytes) -> str:
        """``plain`` encrypted and authenticated (AES-GCM) for an address: readable only with the inbox's keys, and
        only together with ``about`` (what it was made for, which the address does not carry)."""
        nonce = secrets.token_bytes(12)
        sealed = nonce + self._ciphers[-1].encrypt(nonce, plain, about)
        return base64.urlsafe_b64encode(sealed).decode().rstrip("=")

    def decrypt(self, value: str, *, about: bytes) -> bytes | None:
        """What ``encrypt`` sealed, if one of the inbox's keys sealed it for ``about``; None for anything else."""
        try:
            sealed = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        except ValueError:  # not base64 (binascii.Error is one)
            return None
        nonce, body = sealed[:12], sealed[12:]
        if len(nonce) < 12 or not body:  # AES-GCM's nonce, then at least its tag
            return None
        for cipher in reversed(self._ciphers):
            try:
                return cipher.decrypt(nonce, body, about)
            except InvalidTag:
                continue
        return None

    def mac(self, label: str, value: str, *, key: bytes | None = None) -> str:
        return hmac.new(key or self._keys[-1], f"{label}\x00{value}".encode(), hashlib.sha256).hexdigest()

    def valid(self, label: str, value: str, mac: str) -> bool:
        return any(hmac.compare_digest(self.mac(label, value, key=key), mac) for key in self._keys)

    def csrf(self, binding: str) -> str:
        return self.mac("csrf", binding)

    def csrf_ok(self, binding: str, token: str) -> bool:
        return self.valid("csrf", binding, token)

    def device(self, name: str, device_id: str, made: int) -> str:
        """The device cookie saying ``name`` signed in on the browser ``device_id`` at ``made`` (unix seconds)."""
        signed = f"{name}\x00{device_id}\x00{made}"
        return f"{device_id}.{made}.{self.mac('device', signed)}"

    def known_device(self, name: str, cookie: str | None, now: datetime) -> str | None:
        """The device's id if ``cookie`` is one this inbox made for ``name`` within ``DEVICE_LIFETIME`` of ``now``;
        None for any other (missing, made for someone else, edited, too old)."""
        parts = (cookie or "").split(".")
        if len(parts) != 3 or not all(parts) or not parts[1].isdigit() or len(parts[1]) > 12:
            return None
        device_id, made, mac = parts
        age = now - datetime.fromtimestamp(int(made), UTC)
        if not -CLOCK_SKEW <= age <= DEVICE_LIFETIME:  # another inbox process's clock may run a little ahead
            return None
        signed = f"{name}\x00{device_id}\x00{made}"  # as ``device`` signs it
        return device_id if self.valid("device", signed, mac) else None

    def fingerprint(self, credential: str, *, key: bytes | None = None) -> str:
        """What a session keeps of the password hash it was signed in with: enough to notice the hash changed,
        nothing to check a password against."""
        return self.mac("credential", credential, key=key)[:32]

    def fingerprint_ok(self, credential: str, fingerprint: str) -> bool:
        return any(hmac.compare_digest(self.fingerprint(credential, key=key), fingerprint) for key in self._keys)


def _derived(key: bytes, label: bytes) -> bytes:
    """A 256-bit key of its own for ``label``, from one of the inbox's signing keys (HKDF-SHA256)."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=label).derive(key)


@functools.cache
def _decoy() -> str:
    """A hash of a password nobody has, checked for a name nobody has, so an unknown name takes as long to refuse
    as a wrong password. Made once per process: a hash costs a quarter of a second."""
    return hash_password(secrets.token_urlsafe(16))


class Authenticator:
    """Says who sent a request (``person``), signs people in (``sign_in``) and out (``sign_out``): the proxy's
    header from the proxy, else a session the server keeps (``sessions``), with wrong passwords slowed down
    (``throttle``). Blocking (the database, the hashing): the inbox calls it in a thread."""

    def __init__(  # noqa: PLR0913 - what it is made of, each its own thing
        self,
        keys: Keys,
        users: Mapping[str, str],
        sessions: Sessions,
        throttle: Throttle,
        *,
        proxy_header: str | None = None,
        trusted_proxies: Sequence[Network] = (),
    ) -> None:
        self.keys, self.users, self.sessions, self.throttle = keys, dict(users), sessions, throttle
        self.proxy_header, self.trusted_proxies = proxy_header, list(trusted_proxies)

    @property
    def passwords(self) -> bool:
        return bool(self.users)

    @property
    def lifetime(self) -> timedelta:
        """The longest a session lasts: its cookie's ``Max-Age``."""
        return self.sessions.max_age

    def trusted(self, peer: str | None) -> bool:
        """Whether the connection comes from one of the single-sign-on proxy's addresses."""
        if peer is None:
            return False
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:
            return False
        return any(address in network for network in self.trusted_proxies)

    def person(
        self, peer: str | None, headers: Mapping[str, str], token: str | None, *, active: bool = True
    ) -> Person | None:
        """Who sent the request: the proxy's person, from the proxy only; else the live session's, while the
        person's password is still the one it was signed in with (else the session ends here); else nobody. Only
        an ``active`` request (the person's, not a page refreshing itself) keeps a session from idling out."""
        if self.proxy_header and self.trusted(peer):
            name = headers.get(self.proxy_header, "").strip()
            if name:
                return Person(name, "proxy", f"proxy:{name}")
        if not self.users:
            return None
        session = self.sessions.find(token, active=active)
        if session is None:
            return None
        stored = self.users.get(session.person)
        if stored is None or not self.keys.fingerprint_ok(stored, session.credential):
            self.sessions.end_hashed(session.token_hash)  # the password changed (or the one-time login was remade)
            return None
        return Person(session.person, "password", f"session:{session.token_hash}")

    def sign_in(
        self, name: str, password: str, *, address: str | None, user_agent: str | None, device: str | None = None
    ) -> SignInResult:
        """A new session if ``password`` is ``name``'s, and the browser's device cookie made anew. An attempt beyond
        the throttle's limits is refused before the password is checked: the right one too, so the answer tells
        nothing. From a browser whose ``device`` cookie is ``name``'s, the attempt is counted under that device
        alone (``agent_worker.inbox.throttle``): other people's guesses do not lock the person out there."""
        now = self.sessions.clock()
        known = self.keys.known_device(name, device, now)
        attempt = self.throttle.attempt(name, address, device=known)
        if isinstance(attempt, Throttled):
            return attempt
        stored = self.users.get(name)
        if not password_matches(stored or _decoy(), password) or stored is None:
            return WrongPassword()
        self.throttle.succeeded(attempt)
        credential = self.keys.fingerprint(stored)
        token = self.sessions.start(name, credential, address=address, user_agent=user_agent)
        made = self.keys.device(name, known or secrets.token_urlsafe(12), int(now.timestamp()))
        return SignedIn(token, made)

    def sign_out(self, token: str | None) -> None:
        """End the session ``token`` names, on the server: a copy of the cookie stops working too."""
        if token:
            self.sessions.end(token)


def origin_of(url: str) -> str | None:
    """``scheme://host[:port]`` of a URL, lower-cased as browsers send ``Origin``; None if it has none."""
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc:
        return None
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def same_origin(origin: str | None, referer: str | None, own: str) -> bool:
    """Whether a POST comes from the inbox's own pages: its ``Origin`` is ours, or, from a browser that sent none,
    its ``Referer`` is. A request with neither is refused: every browser this inbox serves sends one of them."""
    if origin is not None and origin != "null":
        return origin.lower() == own
    if referer:
        return origin_of(referer) == own
    return False
