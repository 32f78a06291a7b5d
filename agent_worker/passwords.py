"""Approvers' passwords, kept only as hashes: the format ``AGENT_WEB_USERS`` holds, made, checked and verified.

Its own module, apart from the inbox's authentication (``agent_worker.inbox.auth``), because the settings check the
hashes they are given (a typo must stop the inbox at start, not lock a person out at their first sign-in), and the
settings must not load the inbox to do so. argon2-cffi, a maintained binding of the reference implementation, makes
and checks the hashes; a legacy ``scrypt$...`` hash an earlier version made still verifies, and none is made.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from argon2 import PasswordHasher

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
