"""The database the embedded implementations share: its engines, its clock, and its schema's migrations.

It is a real database that workers, tests and operators share, so a crash test can count what was paid
from outside the process that paid it: a SQLite file by default, PostgreSQL when several workers on
several machines share it. One SQLAlchemy Core schema (``activities.business.schema``) serves both, and
each embedded implementation of an outside system is handed the same ``Database``.

Write transactions serialise where it matters: on SQLite a writer takes the lock at ``BEGIN IMMEDIATE``, so
two checks-then-writes cannot interleave; on PostgreSQL the implementations take row locks and rely on
primary keys (the key ledger, ``activities.business.keys``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine

from activities import migrations


def engine_for(url: str, *, writer: bool = True) -> Engine:
    """An engine whose write transactions serialise: ``BEGIN IMMEDIATE`` on SQLite, row locks on PostgreSQL.

    SQLite connections are pooled (SQLAlchemy's default for a file) rather than opened per transaction: opening one
    costs a file open and the WAL pragma, and closing the last one checkpoints the WAL into the file, so a
    connection per transaction paid a checkpoint for every write. Every transaction still commits as before."""
    if not url.startswith("sqlite"):
        return sa.create_engine(url, pool_pre_ping=True)
    engine = sa.create_engine(url, connect_args={"timeout": 30})

    @sa.event.listens_for(engine, "connect")
    def _autocommit_driver(dbapi: Any, _record: Any) -> None:
        dbapi.isolation_level = None  # let SQLAlchemy, not the driver, say when a transaction begins
        dbapi.execute("PRAGMA journal_mode = WAL")  # readers never wait for the writer; kept in the file

    @sa.event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        # A writer takes the lock at once, so two checks-then-writes cannot interleave.
        connection.exec_driver_sql("BEGIN IMMEDIATE" if writer else "BEGIN")

    return engine


class Database:
    """The business database at ``url``: anything SQLAlchemy can reach, ``sqlite:///<path>`` for a file."""

    def __init__(self, url: str, *, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.url = url
        self.clock = clock
        """What every row's ``created_at`` and every key's age is read from; a test may turn it."""
        self.writer = engine_for(url)
        self.reader = engine_for(url, writer=False) if url.startswith("sqlite") else self.writer
        """Reads need no write lock: on SQLite a plain ``BEGIN``, so they never wait for a writer (WAL)."""
        self.insert = postgresql.insert if self.writer.dialect.name == "postgresql" else sqlite.insert
        """The dialect's INSERT, which has ``on_conflict_do_nothing`` and ``on_conflict_do_update``."""

    @property
    def path(self) -> Path:
        """The SQLite file, for what sits beside it (a worker process told ``AGENT_DB_PATH``, its log, the fault
        markers); a database on a server has no file, and asking for one is a mistake."""
        file = self.writer.url.database
        if self.writer.dialect.name != "sqlite" or not file:
            raise ValueError(f"{self} is not a SQLite file")
        return Path(file)

    def migrate(self) -> str | None:
        """Upgrade the schema to the newest revision (creating it on a new database); return that revision.
        Safe on every start, by several workers at once (``activities.migrations`` says how)."""
        if self.writer.dialect.name == "sqlite":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.writer.begin() as db:
            return migrations.upgrade(db)

    def ready(self) -> str | None:
        """What a worker, the inbox and the operator's commands do at start: on a SQLite file, ``migrate`` (one
        machine's file, whoever opens it owns it); on a database server, check that the schema is at a revision
        this code runs on, and raise ``migrations.SchemaNotCurrentError`` naming ``agent-worker migrate`` if not.
        Such a start needs no right to change a table; ``agent-worker migrate`` is the one step that does."""
        if self.writer.dialect.name == "sqlite":
            return self.migrate()
        with self.reader.connect() as db:
            return migrations.check(db)

    def close(self) -> None:
        """Close pooled connections (PostgreSQL keeps some open between calls)."""
        self.writer.dispose()
        self.reader.dispose()

    def __str__(self) -> str:
        """Where the database is, with any password hidden: safe to log."""
        return self.writer.url.render_as_string(hide_password=True)
