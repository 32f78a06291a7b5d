"""The content store's blobs in the business database: its default backend, and the S3 backend's fallback.

The port is ``activities.content_store.BlobBackend`` (``put_blob``, ``get_blob``), which the S3 bucket and
the codec's sealing implement too. Here every worker that shares the database shares the blobs, and a key
(``sha256:<hex>`` of the data) is written once: storing the same content again changes nothing.
"""

from __future__ import annotations

import sqlalchemy as sa

from activities.business.database import Database
from activities.business.schema import blobs


class SqlBlobs:
    """The ``blobs`` table as a ``BlobBackend``."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def put_blob(self, key: str, data: bytes) -> None:
        """Keep ``data`` under its content key; storing the same content again changes nothing."""
        with self.database.writer.begin() as db:
            db.execute(
                self.database.insert(blobs)
                .values(key=key, data=data, created_at=self.database.clock())
                .on_conflict_do_nothing(index_elements=[blobs.c.key])
            )

    def get_blob(self, key: str) -> bytes | None:
        with self.database.reader.connect() as db:
            data: bytes | None = db.execute(sa.select(blobs.c.data).where(blobs.c.key == key)).scalar()
        return data

    def __str__(self) -> str:
        """Where the blobs are, safe to log: the database, without its password."""
        return str(self.database)
