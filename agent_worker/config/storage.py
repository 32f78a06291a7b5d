"""An S3 bucket for what is too big for history (``AGENT_S3_*``)."""

from __future__ import annotations

from pydantic import NonNegativeInt, field_validator
from pydantic_settings import SettingsConfigDict

from agent_worker.config.concern import Concern


class S3Settings(Concern):
    model_config = SettingsConfigDict(env_prefix="AGENT_S3_")

    bucket: str | None = None
    """An existing S3 bucket for the content store's blobs, and every Temporal payload of at least
    ``payload_threshold_bytes`` (temporalio's experimental ``ExternalStorage``). Unset (the default): blobs in the
    business database, every payload in history. Credentials come from boto3's standard chain
    (``AWS_ACCESS_KEY_ID``, ``AWS_PROFILE``, a role), never from here. Worker, clients and replayer must all be
    given the same bucket, prefix and codec keys."""
    prefix: str = ""
    """Put every object under this folder of the bucket, e.g. ``agent-worker`` (a ``/`` is added)."""
    endpoint_url: str | None = None
    """Another S3 API than AWS's (MinIO, localstack, a test server), e.g. ``http://minio:9000``."""
    region: str | None = None
    """Default: boto3's own (``AWS_REGION``, ``AWS_DEFAULT_REGION``, the profile)."""
    payload_threshold_bytes: NonNegativeInt = 256 * 1024
    """Temporal payloads this size or larger (after encryption) go to the bucket and history keeps a
    reference; the server refuses a payload above 2 MB and warns from 512 KB. 0 sends every payload."""

    @field_validator("prefix")
    @classmethod
    def _prefix_is_a_folder(cls, value: str) -> str:
        value = value.strip("/")
        return f"{value}/" if value else ""
