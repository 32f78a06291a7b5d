"""Who is asking: the approval inbox's authentication, and its defences against requests made in someone's name.

The approver an answer carries is who this module says sent the request, never a form field: a form can be
edited, a header sent by anyone, a cookie copied from nowhere. Two ways of knowing, either or both configured:

- **Behind a single-sign-on proxy** (oauth2-proxy and the like). The proxy signs the person in with the
  company's identity provider and names them in a header (``AGENT_WEB_PROXY_HEADER``, e.g. ``X-Forwarded-Email``).
  The inbox believes that header only on connections from the proxy's own addresses
  (``AGENT_WEB_TRUSTED_PROXIES``): anyone else can send any header they like.
- **Standalone.** Each approver has a password, kept only as an argon2id hash (``AGENT_WEB_USERS``;
  ``agent-worker web-user NAME`` makes one with argon2-cffi, a maintained binding of the reference
  implementation, rather than hashing code of our own). A legacy ``scrypt$...`` hash an earlier version made
  still verifies, and the inbox warns at start that it is worth making anew; none is made any more. Signing in
  starts a session kept on the server (``agent_worker.inbox.sessions``), whose random token the cookie holds:
  HttpOnly (no script reads it), SameSite=Lax (no other site's form or script sends it), Secure wherever the
  page is served over https. Signing out ends it on the server; it ends by itself after its idle time and its
  maximum age, and when the person's password changes (it keeps a fingerprint of the hash signed in with).
  Wrong passwords are slowed down per person and per address (``agent_worker.inbox.throttle``), and a throttled
  attempt is refused before its password is checked.

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
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from argon2 import PasswordHasher

    from agent_worker.inbox.sessions import Sessions
    from agent_worker.inbox.throttle import Throttle

SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**15, 8, 1
"""The legacy scrypt hashes' cost (32 MiB and about 0.1 s a hash): such a hash still verifies, none is made."""
SCRYPT_MAXMEM = 64 * 1024 * 1024
SALT_BYTES = 16
SCRYPT_PREFIX = "scrypt"
ARGON2_PREFIX = "$argon2id$"
ARGON2_SHAPE = re.compile(r"\$argon2id\$v=19\$m=\d+,t=\d+,p=\d+\$[A-Za-z0-9+/]{22,}\$[A-Za-z0-9+/]{22,}")
"""A PHC string of argon2id, version 1.3, a salt of 16 bytes or more and a digest of 16 or more (base64, unpadded)."""
ARGON2_MIN_MEMORY_KIB, ARGON2_MIN_PASSES = 19 * 1024, 2
"""The weakest argon2id hash the inbox takes: OWASP's smallest recommended setting (19 MiB, 2 passes). The hashes
``hash_password`` makes use RFC 9106's low-memory profile (64 MiB, 3 passes, 4 lanes)."""

SESSION_COOKIE = "inbox_session"
LOGIN_COOKIE = "inbox_login"
"""A nonce set on the sign-in page, so the sign-in form has a CSRF token too (login CSRF: signing a person in as
someone else)."""

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@functools.cache
def _argon2() -> PasswordHasher:
    """argon2-cffi's hasher with RFC 9106's low-memory profile, made once: imported here, not at the top, because the
    settings import this module to check the hashes they are given, and most commands never hash."""
    from argon2 import PasswordHasher, profiles  # noqa: PLC0415

    return PasswordHasher.from_parameters(profiles.RFC_9106_LOW_MEMORY)


def hash_password(password: str) -> str:
    """An argon2id hash (``$argon2id$v=19$m=65536,t=3,p=4$<salt>$<hash>``): what ``AGENT_WEB_USERS`` keeps instead
    of a password. Blocking (about a quarter of a second and 64 MiB, on purpose): run it in a thread."""
    return _argon2().hash(password)


def check_hash(stored: str) -> str:
    """``stored`` if it is a hash the inbox can check, else ``ValueError`` saying so (a setting's typo must stop the
    inbox at start, not lock a person out at their first sign-in): argon2id from ``agent-worker web-user``, or a
    legacy scrypt hash an earlier version made."""
    if stored.startswith(SCRYPT_PREFIX + "$"):
        _parse_scrypt(stored)
    else:
        _check_argon2(stored)
    return stored


def is_legacy(stored: str) -> bool:
    """Whether a hash is one of the scrypt hashes earlier versions made: still checked, worth making anew."""
    return stored.startswith(SCRYPT_PREFIX + "$")


def password_matches(stored: str, password: str) -> bool:
    """Whether ``password`` is the one ``stored`` was made from, in constant time. Blocking: run it in a thread."""
    if is_legacy(stored):
        (n, r, p), salt, digest = _parse_scrypt(stored)
        return hmac.compare_digest(_scrypt(password, salt, n, r, p), digest)
    from argon2.exceptions import VerificationError  # noqa: PLC0415 - see _argon2

    try:
        return _argon2().verify(_check_argon2(stored), password)
    except VerificationError:
        return False


def _check_argon2(stored: str) -> str:
    from argon2 import Type, extract_parameters  # noqa: PLC0415 - see _argon2
    from argon2.exceptions import InvalidHashError  # noqa: PLC0415

    if not stored.startswith(ARGON2_PREFIX):
        raise ValueError("not a password hash from `agent-worker web-user` ($argon2id$v=19$m=...,t=...,p=...$...)")
    malformed = ValueError("not a password hash from `agent-worker web-user`: its argon2id parts are malformed")
    if not ARGON2_SHAPE.fullmatch(stored):
        raise malformed
    try:
        parameters = extract_parameters(stored)
    except InvalidHashError:
        raise malformed from None
    if parameters.type is not Type.ID or parameters.memory_cost < ARGON2_MIN_MEMORY_KIB:
        raise ValueError("a password hash with too weak argon2id parameters (19 MiB and 2 passes at least)")
    if parameters.time_cost < ARGON2_MIN_PASSES or not 1 <= parameters.parallelism <= 64:
        raise ValueError("a password hash with too weak or impossible argon2id parameters (19 MiB and 2 passes)")
    return stored


def _parse_scrypt(stored: str) -> tuple[tuple[int, int, int], bytes, bytes]:
    parts = stored.split("$")
    if len(parts) != 6 or parts[0] != SCRYPT_PREFIX:
        raise ValueError("not a password hash from `agent-worker web-user` (a legacy one is scrypt$N$r$p$salt$hash)")
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


@dataclass(frozen=True)
class WrongPassword:
    pass


@dataclass(frozen=True)
class Throttled:
    """An attempt refused unchecked (``agent_worker.inbox.throttle``): whose count is full, and how long until it is
    not."""

    who: Literal["person", "address"]
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
    """The inbox's own keys for CSRF tokens and credential fingerprints, derived from its signing keys
    (``AGENT_WEB_APPROVAL_KEYS``) under labels of their own, so neither can ever pass for an approval's signature or
    the reverse. It signs with the last key and accepts any, as the workers do, so rotating the signing key keeps
    people signed in."""

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
        """What a session keeps of the password hash it was signed in with: enough to notice the hash changed,
        nothing to check a password against."""
        return self.mac("credential", credential, key=key)[:32]

    def fingerprint_ok(self, credential: str, fingerprint: str) -> bool:
        return any(hmac.compare_digest(self.fingerprint(credential, key=key), fingerprint) for key in self._keys)


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

    def sign_in(self, name: str, password: str, *, address: str | None, user_agent: str | None) -> SignInResult:
        """A new session if ``password`` is ``name``'s. An attempt beyond the throttle's limits is refused before
        the password is checked: the right one too, so the answer tells nothing."""
        attempt = self.throttle.attempt(name, address)
        if isinstance(attempt, Throttled):
            return attempt
        stored = self.users.get(name)
        if not password_matches(stored or _decoy(), password) or stored is None:
            return WrongPassword()
        self.throttle.succeeded(attempt)
        credential = self.keys.fingerprint(stored)
        return SignedIn(self.sessions.start(name, credential, address=address, user_agent=user_agent))

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
