"""Who is asking: the approval inbox's authentication, and its defences against requests made in someone's name.

The approver an answer carries is who this module says sent the request, never a form field: a form can be
edited, a header sent by anyone, a cookie copied from nowhere. Two ways of knowing, either or both configured:

- **Behind a single-sign-on proxy** (oauth2-proxy and the like). The proxy signs the person in with the
  company's identity provider and names them in a header (``AGENT_WEB_PROXY_HEADER``, e.g. ``X-Forwarded-Email``).
  The inbox believes that header only on connections from the proxy's own addresses
  (``AGENT_WEB_TRUSTED_PROXIES``): anyone else can send any header they like.
- **Standalone.** Each approver has a password, kept only as a salted scrypt hash (``AGENT_WEB_USERS``;
  ``agent-worker web-user NAME`` makes one). Signing in sets a session cookie: HMAC-signed (a key derived from
  the inbox's signing key, so no other secret to manage), HttpOnly (no script reads it), SameSite=Lax (no other
  site's form or script sends it), Secure wherever the page is served over https, and bound to the password it
  was made with, so changing or removing a person's password ends their sessions.

Every form carries a CSRF token bound to the session (or to the proxy's person), and every POST must come from
the inbox's own origin (its ``Origin`` header, or else its ``Referer``): a page elsewhere cannot make a signed-in
person's browser answer a request.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import json
import os
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal
from urllib.parse import urlsplit

SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**15, 8, 1
"""scrypt's cost (32 MiB and about 0.1 s a hash on this project's machines): a stolen hash costs an attacker
that for every guess, a person signing in pays it once."""
SCRYPT_MAXMEM = 64 * 1024 * 1024
SALT_BYTES = 16
HASH_PREFIX = "scrypt"

SESSION_COOKIE = "inbox_session"
LOGIN_COOKIE = "inbox_login"
"""A nonce set on the sign-in page, so the sign-in form has a CSRF token too (login CSRF: signing a person in as
someone else)."""

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """``scrypt$N$r$p$<salt>$<hash>`` (base64): what ``AGENT_WEB_USERS`` keeps instead of a password."""
    salt = salt if salt is not None else os.urandom(SALT_BYTES)
    digest = _scrypt(password, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P)
    return "$".join([HASH_PREFIX, str(SCRYPT_N), str(SCRYPT_R), str(SCRYPT_P), _b64(salt), _b64(digest)])


def check_hash(stored: str) -> str:
    """``stored`` if it is a hash ``hash_password`` made, else ``ValueError`` saying so (a setting's typo must stop
    the inbox at start, not lock a person out at their first sign-in)."""
    _parse(stored)
    return stored


def password_matches(stored: str, password: str) -> bool:
    (n, r, p), salt, digest = _parse(stored)
    return hmac.compare_digest(_scrypt(password, salt, n, r, p), digest)


def _parse(stored: str) -> tuple[tuple[int, int, int], bytes, bytes]:
    parts = stored.split("$")
    if len(parts) != 6 or parts[0] != HASH_PREFIX:
        raise ValueError("not a password hash from `agent-worker web-user` (scrypt$N$r$p$salt$hash)")
    try:
        n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
        salt, digest = base64.b64decode(parts[4], validate=True), base64.b64decode(parts[5], validate=True)
    except ValueError:
        raise ValueError("not a password hash from `agent-worker web-user`: a number or base64 part is wrong") from None
    if n < 2**14 or n & (n - 1) or not 1 <= r <= 32 or not 1 <= p <= 16 or len(salt) < SALT_BYTES or not digest:
        raise ValueError("a password hash with too weak or impossible scrypt parameters")
    return (n, r, p), salt, digest


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, maxmem=SCRYPT_MAXMEM, dklen=32)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@dataclass(frozen=True)
class Person:
    """Someone the inbox authenticated: the name every answer they give is signed for."""

    name: str
    how: Literal["proxy", "password"]
    binding: str
    """What their CSRF token is bound to: their session's nonce, or, behind the proxy, their name."""


@dataclass(frozen=True)
class Session:
    user: str
    nonce: str
    expires: int
    """Unix seconds."""
    credential: str
    """A fingerprint of the password hash the person signed in with."""


class Keys:
    """The inbox's own keys for sessions and CSRF tokens, derived from its signing keys (``AGENT_WEB_APPROVAL_KEYS``)
    under labels of their own, so a session cookie can never pass for an approval's signature or the reverse. It
    signs with the last key and accepts any, as the workers do, so rotating the signing key keeps people signed in."""

    def __init__(self, signing_keys: Sequence[bytes]) -> None:
        if not signing_keys:
            raise ValueError("the approval inbox needs at least one signing key")
        label = b"agent-worker approval inbox: sessions"
        self._keys = [hmac.new(key, label, hashlib.sha256).digest() for key in signing_keys]

    def mac(self, label: str, value: str, *, key: bytes | None = None) -> str:
        return hmac.new(key or self._keys[-1], f"{label}\x00{value}".encode(), hashlib.sha256).hexdigest()

    def valid(self, label: str, value: str, mac: str) -> bool:
        return any(hmac.compare_digest(self.mac(label, value, key=key), mac) for key in self._keys)

    def csrf(self, binding: str) -> str:
        return self.mac("csrf", binding)

    def csrf_ok(self, binding: str, token: str) -> bool:
        return self.valid("csrf", binding, token)

    def fingerprint(self, credential: str, *, key: bytes | None = None) -> str:
        return self.mac("credential", credential, key=key)[:32]

    def fingerprint_ok(self, credential: str, fingerprint: str) -> bool:
        return any(hmac.compare_digest(self.fingerprint(credential, key=key), fingerprint) for key in self._keys)

    def issue(self, user: str, credential: str, now: datetime, lifetime: timedelta) -> str:
        """A session cookie's value: the session, then its MAC."""
        session = {
            "u": user, "n": secrets.token_urlsafe(16), "e": int((now + lifetime).timestamp()),
            "c": self.fingerprint(credential),
        }  # fmt: skip
        body = base64.urlsafe_b64encode(json.dumps(session, separators=(",", ":")).encode()).decode()
        return f"{body}.{self.mac('session', body)}"

    def read(self, cookie: str | None, now: datetime) -> Session | None:
        """The session a cookie carries if this inbox made it and it has not expired; None otherwise."""
        body, _, mac = (cookie or "").partition(".")
        if not body or not self.valid("session", body, mac):
            return None
        try:
            fields = json.loads(base64.urlsafe_b64decode(body))
            session = Session(str(fields["u"]), str(fields["n"]), int(fields["e"]), str(fields["c"]))
        except (ValueError, KeyError, TypeError):
            return None
        return session if session.expires > now.timestamp() else None


class Authenticator:
    """Says who sent a request (``person``) and signs people in (``sign_in``)."""

    def __init__(
        self,
        keys: Keys,
        users: Mapping[str, str],
        *,
        proxy_header: str | None = None,
        trusted_proxies: Sequence[Network] = (),
        lifetime: timedelta = timedelta(hours=12),
    ) -> None:
        self.keys, self.users, self.lifetime = keys, dict(users), lifetime
        self.proxy_header, self.trusted_proxies = proxy_header, list(trusted_proxies)
        self._decoy = hash_password(secrets.token_urlsafe(16))
        """Checked for a name nobody has, so an unknown name takes as long to refuse as a wrong password."""

    @property
    def passwords(self) -> bool:
        return bool(self.users)

    def trusted(self, peer: str | None) -> bool:
        """Whether the connection comes from one of the single-sign-on proxy's addresses."""
        if peer is None:
            return False
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:
            return False
        return any(address in network for network in self.trusted_proxies)

    def person(self, peer: str | None, headers: Mapping[str, str], cookie: str | None, now: datetime) -> Person | None:
        """Who sent the request: the proxy's person, from the proxy only; else the session's, while its password
        is still the one it was made with; else nobody."""
        if self.proxy_header and self.trusted(peer):
            name = headers.get(self.proxy_header, "").strip()
            if name:
                return Person(name, "proxy", f"proxy:{name}")
        session = self.keys.read(cookie, now)
        if session is None or session.user not in self.users:
            return None
        if not self.keys.fingerprint_ok(self.users[session.user], session.credential):
            return None  # the password changed (or the one-time login was made again) since
        return Person(session.user, "password", f"session:{session.nonce}")

    def sign_in(self, name: str, password: str, now: datetime) -> str | None:
        """A session cookie's value if ``password`` is ``name``'s; None otherwise. Blocking (scrypt): run it in a
        thread."""
        stored = self.users.get(name)
        if stored is None:
            password_matches(self._decoy, password)
            return None
        if not password_matches(stored, password):
            return None
        return self.keys.issue(name, stored, now, self.lifetime)


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
