"""Alembic's entry point: run the business store's migrations on the connection it is handed.

At start-up (``Business.create``) and in ``agent-worker migrate`` the caller has already opened the
transaction, and on PostgreSQL taken the advisory lock, so this only binds Alembic to that connection.

Alembic's own command line (configured in pyproject.toml) is for writing a revision; it opens the database
named by ``-x url`` or ``AGENT_DATABASE_URL``, best a scratch one brought to the newest revision first::

    ./dev run alembic -x url=sqlite:///scratch.sqlite3 upgrade head
    ./dev run alembic -x url=sqlite:///scratch.sqlite3 revision --autogenerate -m "why the schema changes"
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import context

from activities.business.schema import metadata

config = context.config


def run(connection: sa.Connection) -> None:
    # Batch mode lets a later revision alter a SQLite table (SQLite has almost no ALTER TABLE) by copying it.
    # The copy loses the unnamed CHECKs of orders and refunds (the refund guard) unless the revision passes
    # them in table_args; tests/test_migrations.py shows how, and fails on a revision that forgets.
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("the business store migrates online only: run it against a database (-x url=...)")
handed: sa.Connection | None = config.attributes.get("connection")
if handed is not None:
    run(handed)
else:
    url = context.get_x_argument(as_dictionary=True).get("url") or os.environ.get("AGENT_DATABASE_URL")
    if not url:
        raise SystemExit("name the database: alembic -x url=sqlite:///scratch.sqlite3 ... (or AGENT_DATABASE_URL)")
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    with engine.begin() as connection:
        run(connection)
    engine.dispose()
