"""The idempotency key ledger of the embedded payment provider and outbox: one row per key.

A key's row holds what its first request asked (a fingerprint: ``RefundFingerprint`` for a refund, an
email's address, subject and body), what that request produced once committed (the refund or the email),
when, and, for a refund settled as never paid, when it was closed. The provider and the outbox each take a
key inside the transaction that pays or sends, so the row and what it produced commit together or not at all.

Two workers racing one key must not both pay. Each key is a row in ``idempotency_keys`` under a primary
key: the first insert wins, the loser's insert does nothing (on PostgreSQL it waits for the winner to
commit), and the loser reads the winner's result back. No check-then-insert race is left to chance.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from activities.business.database import Database
from activities.business.refusals import KeyClosedError
from activities.business.schema import idempotency_keys

TICKET_KEY = re.compile(r"email:ticket:(?P<ticket>.+)/\d+/\d+")
"""The key a ticket's email is sent under (``workflows.toolbox``): ``email:ticket:<ticket id>/<step>/<call>``."""


def ticket_of_key(key: str | None) -> str | None:
    """The ticket an email's key names, or None for an email no ticket's tool call sent."""
    found = TICKET_KEY.fullmatch(key or "")
    return found.group("ticket") if found else None


NOTHING_ASKED = ""
"""The request of a key that a settlement took before any request came under it: it matches no request, and
the settlement closes the key in the same transaction."""


class KeyLedger:
    """Keys live for ``ttl`` (Stripe's 24 hours by default), after which a repeat is a new request; a closed
    key never expires."""

    def __init__(self, database: Database, ttl: timedelta) -> None:
        self.database = database
        self.ttl = ttl

    def claim(self, db: Connection, key: str, request: str) -> sa.Row[Any] | None:
        """Take the key for this request, or return the live row of whoever took it first.

        The insert does nothing on a conflict (on PostgreSQL it first waits for a racing transaction to
        commit). An expired key is taken over in one conditional update, so two late repeats cannot both
        count as new. A closed key is refused (``KeyClosedError``)."""
        now = self.database.clock()
        if self._take(db, key, request, now):
            return None
        expired = db.execute(
            idempotency_keys.update()
            .where(idempotency_keys.c.key == key, idempotency_keys.c.created_at <= now - self.ttl)
            .where(idempotency_keys.c.closed_at.is_(None))
            .values(request=request, result_id=None, created_at=now)
            .returning(idempotency_keys.c.key)
        ).first()
        if expired is not None:
            return None
        row = db.execute(idempotency_keys.select().where(idempotency_keys.c.key == key)).one()
        _refuse_closed(row)
        return row

    def lock(self, db: Connection, key: str, *, open_only: bool = False) -> sa.Row[Any] | None:
        """The key's row, held until the transaction ends: a second holder waits (on SQLite the writer's lock
        already keeps everyone else out). ``open_only`` refuses a closed key (``KeyClosedError``). For a
        provider whose answer comes over the network, outside this transaction (``StripePayments``)."""
        row = db.execute(idempotency_keys.select().where(idempotency_keys.c.key == key).with_for_update()).first()
        if open_only and row is not None:
            _refuse_closed(row)
        return row

    def record(self, db: Connection, key: str, result_id: int) -> None:
        """What the request that claimed ``key`` produced, in the same transaction."""
        db.execute(idempotency_keys.update().where(idempotency_keys.c.key == key).values(result_id=result_id))

    def hold(self, db: Connection, key: str) -> None:
        """Make sure ``key`` has a row before reading what it produced: a racing claim's insert is waited for
        until it commits (on SQLite the writer's lock already keeps it out); a new row asks for nothing."""
        self._take(db, key, NOTHING_ASKED, self.database.clock())

    def close(self, db: Connection, key: str) -> None:
        """Refuse every later request under ``key``, for ever (once: the first closing time stays)."""
        db.execute(
            idempotency_keys.update()
            .where(idempotency_keys.c.key == key, idempotency_keys.c.closed_at.is_(None))
            .values(closed_at=self.database.clock())
        )

    def _take(self, db: Connection, key: str, request: str, now: datetime) -> bool:
        """Take a new key; False if it exists (on PostgreSQL, after waiting for a racing insert to commit)."""
        claimed = db.execute(
            self.database.insert(idempotency_keys)
            .values(key=key, request=request, created_at=now)
            .on_conflict_do_nothing(index_elements=[idempotency_keys.c.key])
            .returning(idempotency_keys.c.key)  # rowcount is not reliable across drivers; a returned row is
        ).first()
        return claimed is not None


def _refuse_closed(row: sa.Row[Any]) -> None:
    if row.closed_at is not None:
        raise KeyClosedError(
            f"Idempotency key {row.key} was settled as not paid at {row.closed_at:%Y-%m-%d %H:%M:%S}: "
            "nothing is paid under it any more"
        )
