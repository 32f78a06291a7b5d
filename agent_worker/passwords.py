"""Approvers' passwords, kept only as hashes: the format ``AGENT_WEB_USERS`` holds, made, checked and verified.

Its own module, apart from the inbox's authentication (``agent_worker.inbox.auth``), because the settings check the
hashes they are given (a typo must stop the inbox at start, not lock a person out at their first sign-in), and the
settings must not load the inbox to do so. argon2-cffi, a maintained binding of the reference implementation, makes
and checks the hashes. Only argon2id is taken: a ``scrypt$...`` hash from a version that never shipped is refused
with the command that makes its replacement, rather than kept verifiable by hashing code of our own.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from argon2 import PasswordHasher

SCRYPT_PREFIX = "scrypt$"
"""How a hash of the scrypt format an unreleased version made begins: refused, by name, with what to do instead."""
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
    """``stored`` if it is an argon2id hash from ``agent-worker web-user`` the inbox can check, else ``ValueError``
    saying so (a setting's typo must stop the inbox at start, not lock a person out at their first sign-in)."""
    return _check_argon2(stored)


def password_matches(stored: str, password: str) -> bool:
    """Whether ``password`` is the one ``stored`` was made from, in constant time. Blocking: run it in a thread."""
    from argon2.exceptions import VerificationError  # noqa: PLC0415 - see _argon2

    try:
        return _argon2().verify(_check_argon2(stored), password)
    except VerificationError:
        return False


def _check_argon2(stored: str) -> str:
    from argon2 import Type, extract_parameters  # noqa: PLC0415 - see _argon2
    from argon2.exceptions import InvalidHashError  # noqa: PLC0415

    if stored.startswith(SCRYPT_PREFIX):
        raise ValueError(
            "a scrypt password hash, which the inbox no longer takes (argon2id only): make this person a new one with "
            "`agent-worker web-user NAME` and put it in AGENT_WEB_USERS in place of the old"
        )
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
