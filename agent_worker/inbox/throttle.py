"""Wrong passwords, slowed down: the approval inbox checks only so many for a person, and from an address, at a time.

A password is worth guessing: it approves refunds. So the inbox counts wrong passwords per person (the name as
typed, known or not: a name nobody has is throttled exactly like a real one, so the answer never tells which
names exist) and per address (an IPv6 address by its /64, which one machine usually holds whole), and refuses
to check another once either has ``limit`` of them within the last ``window``: by default 5 for a person and
20 for an address in 15 minutes. A refused attempt is not checked at all, so its answer says nothing of the
password (the right one is refused too), and it costs no hashing. The person reads "Too many wrong passwords for
ann; try again in 4 min", with HTTP 429 and ``Retry-After``.

**The bound.** Whatever the sequence of attempts, from however many processes: in any span of ``window``, at
most ``limit`` wrong passwords are checked for an address, for a person between two of their sign-ins (a
sign-in clears the person's count: only someone with the password can do that), and for each known device of a
person between two sign-ins from it (below). An attempt is counted *before*
its password is checked, in the transaction that reads the count, so concurrent guesses cannot all slip under
it; a right password then takes its count back.

**What it keeps.** A name or an address is never stored: each is hashed into one of ``buckets`` (16,384) per kind,
and a bucket keeps the times of its wrong passwords within the window, ``limit`` at most. So the table
``inbox_sign_in_failures`` holds at most 3 x 16,384 rows (names, addresses, known devices) of at most 20 times each,
a few MiB, however many names and addresses are tried; rows whose last wrong password is older than the window are
deleted at every attempt. Two people sharing a bucket (about one pair in 16,384) share its count, which only ever
throttles sooner.

**Why hand-written, in the business database.** The inbox's sessions already live there, because several
inbox processes behind a load balancer must agree; so must their throttle, or each process would give an
attacker its own allowance. The ``limits`` package (the maintained choice) shares its counts only through
Redis, Memcached or MongoDB, a service every deployment would then have to run for this alone, and its memory
storage is per process and has no bound on its keys. What is left to write is a count of timestamps in a
window, read and written in one transaction: no cryptography.

**Known devices.** Counted per name alone, anyone could lock a person out by guessing wrong five times on their
name. So a browser where a person once signed in holds a device cookie the inbox signed for that name
(``agent_worker.inbox.auth``), and an attempt to sign in as that name from that browser is counted under the device
alone (``device:<bucket>`` of the name and the device's id), not under the name or the address: someone else's
guesses, on the name or from the same address, never fill its count. The device's count has the person's limit, and
only someone who knew the password once could have had the cookie made; a stolen cookie gives its thief that many
guesses a window, no more. An attempt without a valid cookie for the name (a new browser, a cookie made for someone
else, an edited one) is counted as before, so a guesser stays throttled. What it costs: a person on a new browser is
still throttled with the guesser until the window passes.

A person behind the same address as an attacker (an office's NAT) is throttled with them, from a browser the inbox
does not know; single sign-on (``AGENT_WEB_PROXY_HEADER``) puts password guessing in the identity provider's hands
instead.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from activities.business.database import Database
from activities.business.schema import inbox_sign_in_failures
from agent_worker.inbox.auth import Throttled

PERSON_LIMIT = 5
ADDRESS_LIMIT = 20
"""More than a person's: the people of one office may share an address."""
WINDOW = timedelta(minutes=15)
BUCKETS = 2**14
THROTTLE_LOCK = 0x696E_626F_786C_6F67  # "inboxlog"
"""The advisory lock every counting transaction takes on PostgreSQL (SQLite's ``BEGIN IMMEDIATE`` does the same)."""

Who = Literal["person", "address", "device"]


@dataclass(frozen=True)
class Attempt:
    """An attempt counted before its password is checked: ``succeeded`` takes it back if the password was right."""

    person: str
    """The count a sign-in clears: the name's, or, from a known device, the device's."""
    address: str | None
    """The address's count, which a sign-in takes this attempt back from; None from a known device (not counted)."""
    at: int
    """Unix milliseconds, as counted."""


class Throttle:
    """Counts wrong passwords per person and per address in ``database``, and refuses attempts beyond the limits.
    Blocking (the database): the inbox calls it in a thread."""

    def __init__(
        self,
        database: Database,
        *,
        person_limit: int = PERSON_LIMIT,
        address_limit: int = ADDRESS_LIMIT,
        window: timedelta = WINDOW,
        buckets: int = BUCKETS,
    ) -> None:
        self.database, self.window, self.buckets = database, window, buckets
        self.limits: dict[Who, int] = {"person": person_limit, "address": address_limit, "device": person_limit}

    @property
    def clock(self) -> Callable[[], datetime]:
        return self.database.clock

    def attempt(self, name: str, address: str | None, *, device: str | None = None) -> Attempt | Throttled:
        """Count an attempt to sign in as ``name`` from ``address``, unless either's count is full: then what to
        tell the person, and nothing is counted. From a ``device`` known for ``name`` (its id, from a cookie the
        authenticator checked), the device's own count instead of both. Call ``succeeded`` if the password turns out
        right."""
        now = self.clock()
        at = millis(now)
        keys: dict[Who, str] = (
            {"device": self.key("device", f"{name}\x00{device}")}
            if device is not None
            else {"person": self.key("person", name), "address": self.key("address", network(address))}
        )
        with self.database.writer.begin() as db:
            self._lock(db)
            forgotten = inbox_sign_in_failures.c.last_failed_at <= now - self.window
            db.execute(sa.delete(inbox_sign_in_failures).where(forgotten))
            recent = {who: self._recent(db, key, at) for who, key in keys.items()}
            refusals = [
                Throttled(who, timedelta(milliseconds=times[-self.limits[who]] + self._window_ms - at))
                for who, times in recent.items()
                if len(times) >= self.limits[who]
            ]
            if refusals:
                return max(refusals, key=lambda refusal: refusal.retry_after)
            for who, key in keys.items():
                self._write(db, key, [*recent[who], at], now)
        return Attempt(keys.get("person") or keys["device"], keys.get("address"), at)

    def succeeded(self, attempt: Attempt) -> None:
        """The password was right: the person's count starts afresh, and the address's forgets this attempt."""
        with self.database.writer.begin() as db:
            self._lock(db)
            db.execute(sa.delete(inbox_sign_in_failures).where(inbox_sign_in_failures.c.key == attempt.person))
            if attempt.address is None:
                return
            times = self._recent(db, attempt.address, attempt.at)
            if attempt.at in times:
                times.remove(attempt.at)
            if times:
                self._write(db, attempt.address, times, self.clock())
            else:
                db.execute(sa.delete(inbox_sign_in_failures).where(inbox_sign_in_failures.c.key == attempt.address))

    def key(self, who: Who, value: str) -> str:
        """``person:<bucket>``, ``address:<bucket>`` or ``device:<bucket>``: what a name, an address or a name on a
        known device is counted under."""
        digest = hashlib.sha256(f"{who}\x00{value}".encode()).digest()
        return f"{who}:{int.from_bytes(digest[:8], 'big') % self.buckets}"

    def rows(self) -> int:
        """How many rows the table holds: what the bound is about."""
        with self.database.reader.connect() as db:
            return int(db.execute(sa.select(sa.func.count()).select_from(inbox_sign_in_failures)).scalar_one())

    @property
    def _window_ms(self) -> int:
        return int(self.window.total_seconds() * 1000)

    def _lock(self, db: Connection) -> None:
        if db.dialect.name == "postgresql":
            db.execute(sa.select(sa.func.pg_advisory_xact_lock(THROTTLE_LOCK)))

    def _recent(self, db: Connection, key: str, at: int) -> list[int]:
        """The times of ``key``'s wrong passwords within the window before ``at``, oldest first."""
        failures = db.execute(
            sa.select(inbox_sign_in_failures.c.failures).where(inbox_sign_in_failures.c.key == key)
        ).scalar_one_or_none()
        return sorted(t for t in map(int, (failures or "").split()) if t > at - self._window_ms)

    def _write(self, db: Connection, key: str, times: list[int], now: datetime) -> None:
        values = {"failures": " ".join(map(str, times)), "last_failed_at": now}
        insert = self.database.insert(inbox_sign_in_failures).values(key=key, **values)
        db.execute(insert.on_conflict_do_update(index_elements=["key"], set_=values))


def network(address: str | None) -> str:
    """What an address is counted as: an IPv4 address itself, an IPv6 address its /64 (an IPv4-mapped one the IPv4
    address), anything unreadable as one ``unknown``."""
    try:
        parsed = ipaddress.ip_address(address or "")
    except ValueError:
        return "unknown"
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.ip_network(f"{parsed}/64", strict=False))
    return str(parsed)


def millis(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)
