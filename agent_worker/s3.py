"""One S3 bucket for everything too big for Temporal's history: Temporal's payloads and our content store.

Two things write to it, each keeping only a reference in history:

- temporalio's own external storage (``ExternalStorage`` with its ``S3StorageDriver``, experimental in
  temporalio 1.35), on the data converter: any payload (a workflow input, an activity's input or result, a
  signal) at or above the threshold is uploaded whole, after the payload codec has encrypted it, and the
  history keeps a small ``ExternalStorageReference`` (bucket, key, sha256) that the SDK follows on the way
  back. The driver names objects ``v0/ns/<namespace>/wt/<workflow type>/wi/<workflow id>/ri/<run id>/d/sha256/
  <hex>`` (or ``at/.../ai/...`` for an activity's own payloads): content-addressed within one run.
- the content store (``activities.content_store``) through ``S3BlobBackend``: big tool results and the
  conversation's nodes, as ``sha256:<hex>``.

Both go under the same configured prefix. The driver has no prefix of its own, so ``Boto3DriverClient``
adds it to every key it is given; the references in history hold the key without it. Changing the prefix
(or the bucket) therefore orphans what older histories point to, as changing the codec keys would.

The driver's client is a small adapter over the same synchronous boto3 client the content store uses,
called in threads, instead of temporalio's aioboto3 adapter: that one needs an ``async with`` around the
life of every client, worker and replayer (an aiohttp session that warns if left open), where a boto3
client needs nothing closed and is safe to share between threads. boto3 is the library the aioboto3 adapter
wraps, so there is one S3 library here, not two.

Credentials come from boto3's standard chain (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``,
``AWS_PROFILE``, the shared credentials file, an instance or task role), never from our settings.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError
from temporalio.contrib.aws.s3driver import S3StorageDriver, S3StorageDriverClient
from temporalio.converter import ExternalStorage

from activities.s3_blobs import MISSING

if TYPE_CHECKING:  # the stubs are a development dependency
    from types_boto3_s3.client import S3Client

CONNECT_TIMEOUT_SECONDS = 5
READ_TIMEOUT_SECONDS = 30
"""Below every activity's start-to-close timeout, so a stuck request fails as a retryable error in time."""


def s3_client(endpoint_url: str | None, region: str | None, *, retries: bool) -> S3Client:
    """A client from boto3's standard credential chain. ``retries=False`` for the content store, which runs
    inside activities: Temporal's retry policy is the only one there. The converter's client keeps botocore's
    standard retries, because no retry policy stands behind a payload that fails to upload while a workflow
    task completes, only the task's own timeout. A custom endpoint (MinIO, localstack) is addressed by
    path, which they all understand, rather than by a bucket-named host they may not resolve."""
    config = Config(
        connect_timeout=CONNECT_TIMEOUT_SECONDS,
        read_timeout=READ_TIMEOUT_SECONDS,
        retries={"mode": "standard"} if retries else {"total_max_attempts": 1},
        s3={"addressing_style": "path"} if endpoint_url else None,
    )
    return boto3.session.Session().client("s3", endpoint_url=endpoint_url, region_name=region, config=config)


class Boto3DriverClient(S3StorageDriverClient):
    """temporalio's ``S3StorageDriverClient`` over a boto3 client, run in threads, with our prefix."""

    def __init__(self, client: S3Client, prefix: str = "") -> None:
        self.client = client
        self.prefix = prefix

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        await asyncio.to_thread(self.client.put_object, Bucket=bucket, Key=self.prefix + key, Body=data)

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        try:
            await asyncio.to_thread(self.client.head_object, Bucket=bucket, Key=self.prefix + key)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in MISSING:
                return False
            raise
        return True

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        def read() -> bytes:
            return self.client.get_object(Bucket=bucket, Key=self.prefix + key)["Body"].read()

        return await asyncio.to_thread(read)

    def describe(self) -> dict[str, str]:
        """Shown in the driver's error messages: a wrong region or endpoint is the usual cause of a 403."""
        return {"region": self.client.meta.region_name or "-", "endpoint": self.client.meta.endpoint_url}


def external_storage(client: S3Client, bucket: str, prefix: str, threshold_bytes: int) -> ExternalStorage:
    driver = S3StorageDriver(client=Boto3DriverClient(client, prefix), bucket=bucket)
    return ExternalStorage(drivers=[driver], payload_size_threshold=threshold_bytes)
