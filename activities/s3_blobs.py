"""The content store in an S3 bucket: large tool results and conversation nodes where every worker reads them.

The ``blobs`` table of the business store works for one machine (SQLite) or a cluster that shares a
PostgreSQL database, but a database is an expensive place to keep megabytes of conversation that is written
once and read a few times. An S3 bucket (or anything speaking its API: MinIO, localstack) is the usual home
for that, and the one Temporal's own external payload storage uses, so one bucket holds both.

Objects are named ``<prefix>sha256:<hex>``, the content store's own key under the configured prefix, so an
object's name says what is in it and a key in a history names one object. The prefix is therefore part of
the contract with stored histories: change it and older tickets' content is no longer found.

Blobs written before the bucket was configured stay in the business database; a key the bucket does not
hold is looked up there (``fallback``), so tickets in flight when S3 is switched on still find their
conversations. Nothing is written there any more.

The calls are synchronous: the content store is called from the activities' threads
(``asyncio.to_thread``), and a boto3 client is safe to share between threads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from activities.content_store import BlobBackend

if TYPE_CHECKING:  # the stubs are a development dependency; at run time the client is whatever boto3 made
    from types_boto3_s3.client import S3Client

MISSING = frozenset({"NoSuchKey", "404"})
"""What S3 answers for a key it does not hold (``404`` from a HEAD, ``NoSuchKey`` from a GET)."""


class S3BlobBackend:
    """``put_blob``/``get_blob`` over one bucket and prefix: a ``BlobBackend`` for the ``ContentStore``."""

    def __init__(self, client: S3Client, bucket: str, prefix: str = "", fallback: BlobBackend | None = None) -> None:
        self.client = client
        self.bucket = bucket
        self.prefix = prefix
        self.fallback = fallback

    def object_key(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def put_blob(self, key: str, data: bytes) -> None:
        """Write unconditionally: the content under a key never changes, so a second writer (a retry, another
        worker) rewrites the same bytes, and one PUT is cheaper than a HEAD to find out first."""
        self.client.put_object(Bucket=self.bucket, Key=self.object_key(key), Body=data)

    def get_blob(self, key: str) -> bytes | None:
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=self.object_key(key))
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in MISSING:
                return None if self.fallback is None else self.fallback.get_blob(key)
            raise
        return response["Body"].read()

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"
