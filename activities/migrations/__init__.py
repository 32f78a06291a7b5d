"""Schema migrations of the business store, run by ``agent-worker migrate`` (and, on a SQLite file, at every start).

Without them a column or table added to ``activities.business.schema.metadata`` would reach new databases only:
``create_all`` creates missing tables and never alters one, so a store that already exists would lack the
column, and the first activity to use it would fail on every retry. Alembic keeps the revisions in
``versions/`` and the revision a database is at in its ``alembic_version`` table.

Several workers start at once against one PostgreSQL when a deploy rolls out; two running the same
``CREATE TABLE`` race, and one of them fails to start. The upgrade therefore runs in one transaction that
first takes a transaction-scoped advisory lock: the second worker waits for the first to commit and finds
nothing left to do. On SQLite the writer's ``BEGIN IMMEDIATE`` serialises them the same way.

On a database server the workers and the inbox run as a role that reads and writes rows and may change no table,
so they do not migrate: ``agent-worker migrate``, run as the role that owns the schema, is the one step that does,
and a start only checks the database is at a revision this code runs on (``check``), refusing otherwise with the
command to run. A SQLite file is one machine's (the dev stack, the demo, a desk on one box): whoever opens it owns
it, so its starts still migrate.

A store made before migrations existed (tables, no ``alembic_version``) needs no special path: the first
revision creates only the tables it lacks, as ``create_all`` did at every start, and keeps the rest with
their rows; the database then carries revision ``0001`` like any other.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

SCRIPTS = Path(__file__).parent
# Where Alembic looks for revisions; a test adds a folder to prove a later revision reaches a live store.
VERSIONS: tuple[Path, ...] = (SCRIPTS / "versions",)
BASELINE = "0001"
# The key every worker locks on, old and new alike: changing it would let two versions migrate at once.
ADVISORY_LOCK = 0x6167_656E_7473  # "agents"


def config(connection: sa.Connection | None = None, versions: tuple[Path, ...] | None = None) -> Config:
    """Alembic's configuration, in code: an installed worker has no alembic.ini beside it."""
    alembic = Config()
    alembic.set_main_option("script_location", str(SCRIPTS))
    alembic.set_main_option("path_separator", "os")
    alembic.set_main_option("version_locations", os.pathsep.join(str(path) for path in versions or VERSIONS))
    alembic.attributes["connection"] = connection
    return alembic


def upgrade(connection: sa.Connection, revision: str = "head") -> str | None:
    """Bring the database to ``revision`` inside the caller's transaction; return the revision it is at.

    On PostgreSQL the advisory lock is held until that transaction ends. A database already at the newest
    revision, what nearly every start finds, costs one read of ``alembic_version``: Alembic's own upgrade
    would load every revision file again to learn there is nothing to do, a few milliseconds a start.
    Alembic's ``op`` and ``context`` are module globals: one migration at a time per process."""
    _lock(connection)
    at = MigrationContext.configure(connection).get_current_heads()
    if revision == "head" and set(at) == set(_heads(VERSIONS)):
        return at[0]
    command.upgrade(config(connection), revision)
    return current(connection)


class SchemaNotCurrentError(RuntimeError):
    """The database is not at a revision this code runs on: the message says where it is and what to run."""


def check(connection: sa.Connection) -> str:
    """The revision the database is at, if this code can run on it: its own newest, or one newer that it does not
    know (a later release migrated first, and a migration keeps the last release working: an old build drains on the
    new schema). ``SchemaNotCurrentError`` for a database with no schema or one behind this code's newest. Reads
    ``alembic_version`` only: no lock, no DDL, so a role that may change no table runs it."""
    at = set(MigrationContext.configure(connection).get_current_heads())
    newest = set(_heads(VERSIONS))
    if at == newest or (at and not at & _known(VERSIONS)):
        return min(at)
    where = f"at revision {', '.join(sorted(at))}" if at else "without the business schema"
    raise SchemaNotCurrentError(
        f"the business database is {where}, and this version needs revision {', '.join(sorted(newest))}: run "
        f"`agent-worker migrate` with AGENT_DATABASE_URL naming the role that owns the schema, then start again "
        f"(the workers and the inbox do not migrate a database server themselves)"
    )


def downgrade(connection: sa.Connection, revision: str) -> str | None:
    """Take the database back to ``revision`` under the same lock: for tests, and a rollback by hand."""
    _lock(connection)
    command.downgrade(config(connection), revision)
    return current(connection)


def head() -> str:
    """The newest revision this code brings: what ``upgrade`` takes a database to."""
    (newest,) = _heads(VERSIONS)
    return newest


def current(connection: sa.Connection) -> str | None:
    """The revision the database is at; None before the first migration."""
    return MigrationContext.configure(connection).get_current_revision()


@functools.cache
def _heads(versions: tuple[Path, ...]) -> tuple[str, ...]:
    """The newest revisions in ``versions``: read from the files once per process, they do not change under it."""
    return tuple(ScriptDirectory.from_config(config(versions=versions)).get_heads())


@functools.cache
def _known(versions: tuple[Path, ...]) -> frozenset[str]:
    """Every revision in ``versions``, whatever its place: a database at one this code does not know is newer."""
    return frozenset(
        script.revision for script in ScriptDirectory.from_config(config(versions=versions)).walk_revisions()
    )


def _lock(connection: sa.Connection) -> None:
    """Wait for any other migration of this database; PostgreSQL releases the lock when the transaction ends."""
    if connection.dialect.name == "postgresql":
        connection.execute(sa.select(sa.func.pg_advisory_xact_lock(ADVISORY_LOCK)))
