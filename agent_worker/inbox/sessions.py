"""The approval inbox's sessions, kept on the server: in the business database, so every inbox process agrees.

A session is a row in ``inbox_sessions``; the person's browser holds only its token, 32 random bytes, in the
``inbox_session`` cookie. The row keeps the token's SHA-256 hash, never the token, so a copy of the database
signs nobody in. Because the server holds the session, it can end it: signing out deletes the row, and a copy
of the cookie taken before stops working at once; an operator ends all of a person's sessions with
``agent-worker web-sessions end NAME``; several inbox processes behind a load balancer read the same rows.

A session ends at the first of:

- its **maximum age** (``AGENT_WEB_SESSION_HOURS``) since signing in, however busy;
- its **idle time** (``AGENT_WEB_SESSION_IDLE_MINUTES``) since the person's last request. The last request is
  written at most once a minute (``TOUCH_EVERY``, or a quarter of the idle time if that is shorter), not on every
  page, so the idle time is counted to within that. What a page fetches by itself (the list's refresh every few
  seconds, a ticket's live part every two) is not the person, and does not count: a tab left open on
  an unattended desk is signed out all the same, and reloads itself onto the sign-in page;
- a change of the person's password (the row keeps a fingerprint of the hash signed in with; the authenticator
  compares it with the current one and ends the session if they differ);
- signing out, or an operator ending it.

**Bounded.** An expired row is deleted when it is next read and, with every other expired row, at every sign-in
and every operator listing; a person keeps at most ``MAX_PER_PERSON`` sessions (signing in once more ends their
least recently used). The table holds at most that many rows per person who can sign in, plus what expired since
the last sign-in.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from activities.business.database import Database
from activities.business.schema import inbox_sessions
from agent_worker.config import Settings

TOKEN_BYTES = 32
TOUCH_EVERY = timedelta(minutes=1)
"""How often a session's last request is written, at most: reads are cheap, a write on every page is not."""
MAX_PER_PERSON = 20
"""The sessions one person may hold at once (a browser each): one more ends their least recently used."""
USER_AGENT_MAX = 200


@dataclass(frozen=True)
class Session:
    """One signed-in browser, as the server keeps it."""

    token_hash: str
    person: str
    credential: str
    """A fingerprint of the password hash the person signed in with."""
    created_at: datetime
    last_seen_at: datetime
    address: str | None
    user_agent: str | None

    @property
    def id(self) -> str:
        """A short name for the session, for the operator's list and the log: the start of its token's hash."""
        return self.token_hash[:12]


def configured(settings: Settings, database: Database) -> Sessions:
    """The sessions in ``database`` as the settings say they last: the inbox's, and the operator's command's."""
    idle = timedelta(minutes=settings.web.session_idle_minutes)
    return Sessions(database, max_age=timedelta(hours=settings.web.session_hours), idle=idle)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Sessions:
    """The inbox's sessions in ``database``: each lasts at most ``max_age``, and ends after ``idle`` without a
    request. Blocking (the database): the inbox calls it in a thread."""

    def __init__(self, database: Database, *, max_age: timedelta, idle: timedelta) -> None:
        self.database, self.max_age, self.idle = database, max_age, idle
        self.touch_every = min(TOUCH_EVERY, idle / 4)

    @property
    def clock(self) -> Callable[[], datetime]:
        return self.database.clock

    def start(self, person: str, credential: str, *, address: str | None, user_agent: str | None) -> str:
        """A new session for ``person``, signed in with the password hash whose fingerprint is ``credential``: the
        token for their cookie. Deletes every expired session, and the person's least recently used beyond
        ``MAX_PER_PERSON``."""
        token = secrets.token_urlsafe(TOKEN_BYTES)
        now = self.clock()
        row = {
            "token_hash": token_hash(token),
            "person": person,
            "credential": credential,
            "created_at": now,
            "last_seen_at": now,
            "address": address,
            "user_agent": (user_agent or "")[:USER_AGENT_MAX] or None,
        }
        with self.database.writer.begin() as db:
            db.execute(sa.delete(inbox_sessions).where(self._expired(now)))
            db.execute(sa.insert(inbox_sessions).values(**row))
            beyond = (
                sa.select(inbox_sessions.c.token_hash)
                .where(inbox_sessions.c.person == person)
                .order_by(inbox_sessions.c.last_seen_at.desc(), inbox_sessions.c.created_at.desc())
                .offset(MAX_PER_PERSON)
            )
            stale = db.execute(beyond).scalars().all()
            if stale:
                db.execute(sa.delete(inbox_sessions).where(inbox_sessions.c.token_hash.in_(stale)))
        return token

    def find(self, token: str | None, *, active: bool = True) -> Session | None:
        """The live session ``token`` names, its last request noted (at most every ``touch_every``) if the person
        made it (``active``; a page refreshing itself is not the person, and keeps no one signed in); None if there
        is none, or it expired (and then it is deleted)."""
        if not token:
            return None
        hashed = token_hash(token)
        with self.database.reader.connect() as db:
            row = db.execute(sa.select(inbox_sessions).where(inbox_sessions.c.token_hash == hashed)).one_or_none()
        if row is None:
            return None
        session = Session(*row)
        now = self.clock()
        if self.expired(session, now):
            self.end(token)
            return None
        if active and now - aware(session.last_seen_at) >= self.touch_every:
            with self.database.writer.begin() as db:
                db.execute(
                    sa.update(inbox_sessions).where(inbox_sessions.c.token_hash == hashed).values(last_seen_at=now)
                )
        return session

    def expired(self, session: Session, now: datetime) -> bool:
        return aware(session.created_at) <= now - self.max_age or aware(session.last_seen_at) <= now - self.idle

    def end(self, token: str) -> bool:
        """End the session ``token`` names (signing out); whether there was one."""
        return self.end_hashed(token_hash(token))

    def end_hashed(self, hashed: str) -> bool:
        with self.database.writer.begin() as db:
            ended = db.execute(sa.delete(inbox_sessions).where(inbox_sessions.c.token_hash == hashed)).rowcount
        return bool(ended)

    def end_all(self, person: str) -> int:
        """End every session of ``person``: how many there were."""
        with self.database.writer.begin() as db:
            ended: int = db.execute(sa.delete(inbox_sessions).where(inbox_sessions.c.person == person)).rowcount
        return ended

    def live(self, person: str | None = None) -> list[Session]:
        """Every live session (of ``person``, if named), most recently used first, once the expired are deleted."""
        self.purge()
        query = sa.select(inbox_sessions).order_by(inbox_sessions.c.person, inbox_sessions.c.last_seen_at.desc())
        if person is not None:
            query = query.where(inbox_sessions.c.person == person)
        with self.database.reader.connect() as db:
            return [Session(*row) for row in db.execute(query)]

    def purge(self) -> int:
        """Delete every expired session: how many."""
        with self.database.writer.begin() as db:
            purged: int = db.execute(sa.delete(inbox_sessions).where(self._expired(self.clock()))).rowcount
        return purged

    def count(self) -> int:
        """How many rows the table holds, expired ones included: what the bound is about."""
        with self.database.reader.connect() as db:
            return int(db.execute(sa.select(sa.func.count()).select_from(inbox_sessions)).scalar_one())

    def _expired(self, now: datetime) -> sa.ColumnElement[bool]:
        too_old = inbox_sessions.c.created_at <= now - self.max_age
        return sa.or_(too_old, inbox_sessions.c.last_seen_at <= now - self.idle)


def aware(moment: datetime) -> datetime:
    """SQLite hands back the naive UTC time it was given; PostgreSQL an aware one."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
