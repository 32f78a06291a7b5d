"""Stand-ins for the business side where a test needs one it can reach into."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from urllib.parse import parse_qs, urlsplit

import sqlalchemy

from activities.business import Business

StoreFactory = Callable[..., Business]
"""What the ``make_store`` fixture gives: a business store on the backend under test, with the settings given."""

POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
"""The machine's PostgreSQL (trust auth): every machine of this project and CI have one."""


def postgres_available() -> bool:
    engine = sqlalchemy.create_engine(POSTGRES)
    try:
        with engine.connect():
            return True
    except sqlalchemy.exc.OperationalError:
        return False
    finally:
        engine.dispose()


@contextmanager
def postgres_schema(prefix: str = "t") -> Iterator[str]:
    """A fresh schema in the machine's PostgreSQL, dropped with all it holds afterwards: the URL of a business
    database that no other test, bench run or earlier run can see into (its ``search_path`` is that schema)."""
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    engine = sqlalchemy.create_engine(POSTGRES)
    with engine.begin() as db:
        db.exec_driver_sql(f"CREATE SCHEMA {schema}")
    try:
        yield f"{POSTGRES}?options=-csearch_path%3D{schema}"
    finally:
        with engine.begin() as db:
            db.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        engine.dispose()


@contextmanager
def rows_only_role(owner_url: str) -> Iterator[str]:
    """A new login role that may read and write the rows of every table in ``owner_url``'s schema, those there now
    and those its owner makes later (SELECT, INSERT, UPDATE, DELETE; USAGE on sequences), and nothing else: no
    CREATE on the schema, owner of nothing. What the workers and the inbox run as in production; the URL that signs
    in as it, into the same schema. Dropped afterwards with what was granted to it."""
    parts = urlsplit(owner_url)
    schema = parse_qs(parts.query)["options"][0].removeprefix("-csearch_path=")
    role = f"rows_only_{uuid.uuid4().hex[:12]}"
    owner = sqlalchemy.create_engine(owner_url)
    rights = {"TABLES": "SELECT, INSERT, UPDATE, DELETE", "SEQUENCES": "USAGE"}
    with owner.begin() as db:
        db.exec_driver_sql(f'CREATE ROLE "{role}" LOGIN')
        db.exec_driver_sql(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
        for kind, granted in rights.items():
            db.exec_driver_sql(f'GRANT {granted} ON ALL {kind} IN SCHEMA "{schema}" TO "{role}"')
            db.exec_driver_sql(f'ALTER DEFAULT PRIVILEGES IN SCHEMA "{schema}" GRANT {granted} ON {kind} TO "{role}"')
    try:
        yield parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port}").geturl()
    finally:
        with owner.begin() as db:
            db.exec_driver_sql(f'DROP OWNED BY "{role}"')
            db.exec_driver_sql(f'DROP ROLE "{role}"')
        owner.dispose()


class MemoryBlobs:
    """Blobs in a dict, which a test may overwrite as someone with write access to the bucket could."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}

    def put_blob(self, key: str, data: bytes) -> None:
        self.blobs.setdefault(key, data)

    def get_blob(self, key: str) -> bytes | None:
        return self.blobs.get(key)
