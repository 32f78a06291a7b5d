"""Conversation data and large payloads in an S3 bucket: a real S3 API (moto's server) on 127.0.0.1.

Nothing here mocks a boto3 call: the worker, its clients and the replayer talk HTTP to an S3 server, with
credentials from the environment as in production, and the tests read the bucket back the same way."""

from __future__ import annotations

import base64
import logging
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import pytest
import sqlalchemy as sa
from moto.server import ThreadedMotoServer
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from activities.business import Business
from activities.business.schema import blobs
from activities.content_store import ContentStore, content_key
from activities.contracts.ticket import Status
from agent_worker import wiring
from agent_worker.cli.replay import replay, write_history
from agent_worker.config import Settings
from agent_worker.config.codec_settings import CodecSettings
from agent_worker.config.storage import S3Settings
from tests.support.harness import Harness
from tests.support.long_tickets import EVENT_LOG_BYTES, LongTicketModel, long_ticket, seed_long_orders
from tests.support.processes import address
from tests.support.tickets import ticket

if TYPE_CHECKING:
    from types_boto3_s3.client import S3Client

pytestmark = pytest.mark.timeout(30)

REFERENCE_TYPE = b"temporal.api.sdk.v1.ExternalStorageReference"
PREFIX = "agent-worker/"
THRESHOLD = 16 * 1024
"""The payload size from which the payload tests send to the bucket: below the default (256 KB), since a ticket's
question is at most 20,000 characters."""
BIG = 18_000
"""A question's characters: above ``THRESHOLD``, within a question's bound: its payload goes to the bucket whole."""


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def aws_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Credentials the way production passes them (boto3's environment chain), and none of the developer's:
    no profile, no credentials file, no instance metadata."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test-key-id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@dataclass
class Bucket:
    client: S3Client
    name: str
    endpoint: str

    def settings(self, **s3: Any) -> dict[str, Any]:
        """A worker's settings that keep its content in this bucket; ``s3`` are further ``S3Settings`` fields."""
        fields = {"bucket": self.name, "endpoint_url": self.endpoint, "region": "us-east-1", "prefix": PREFIX, **s3}
        return {"s3": S3Settings(**fields)}

    def objects(self) -> dict[str, bytes]:
        listed = self.client.list_objects_v2(Bucket=self.name).get("Contents", [])
        return {o["Key"]: self.client.get_object(Bucket=self.name, Key=o["Key"])["Body"].read() for o in listed}


@pytest.fixture
def bucket(s3_endpoint: str, aws_credentials: None) -> Bucket:
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    name = f"agent-test-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=name)
    return Bucket(client, name, s3_endpoint)


async def harness_with(dev_server: WorkflowEnvironment, agent: Harness, **settings: Any) -> Harness:
    """A harness whose client (and so its worker) converts payloads as these settings say."""
    converter = wiring.data_converter(agent.settings(**settings))
    client = await Client.connect(address(dev_server.client), data_converter=converter)
    return Harness(client, agent.store, agent.task_queue)


@pytest.fixture
async def on_s3(dev_server: WorkflowEnvironment, agent: Harness, bucket: Bucket) -> Harness:
    return await harness_with(dev_server, agent, **bucket.settings())


def rows_in_blobs_table(store: Business) -> int:
    with store.database.writer.connect() as db:
        return int(db.execute(sa.select(sa.func.count()).select_from(blobs)).scalar_one())


async def test_a_long_tickets_tool_results_and_conversation_live_in_the_bucket_and_none_in_the_database(
    on_s3: Harness, bucket: Bucket
) -> None:
    """With a bucket set, the content store writes to it only, under ``<prefix>sha256:<hex>``, and still reads
    what the database held before."""
    seed_long_orders(on_s3.store, 6)
    async with on_s3.worker(LongTicketModel(6), **bucket.settings()):
        handle = await on_s3.start(long_ticket(6))
        outcome = await handle.result()
    assert (outcome.status, outcome.steps) == (Status.RESOLVED, 6), outcome.answer

    stored = bucket.objects()
    refs = [call.result_ref or "" for call in outcome.tool_calls]
    assert len(refs) == 5
    for ref in refs:
        assert len(stored[f"{PREFIX}{ref}"]) == EVENT_LOG_BYTES
    nodes = [key for key in stored if key.removeprefix(PREFIX) not in refs]
    assert len(nodes) == 6, "one conversation node per step"
    assert all(key.startswith(f"{PREFIX}sha256:") for key in stored)
    assert rows_in_blobs_table(on_s3.store) == 0

    fresh = ContentStore(wiring.blob_backend(on_s3.settings(**bucket.settings()), on_s3.store.blobs, None))
    assert fresh.get(refs[0]) == stored[f"{PREFIX}{refs[0]}"], "another worker reads the same bytes back"
    assert fresh.backend.get_blob("sha256:" + "0" * 64) is None
    before = b"stored in the database before the bucket was configured"
    on_s3.store.blobs.put_blob(content_key(before), before)
    assert fresh.get(content_key(before)) == before


async def test_a_payload_over_the_threshold_is_kept_in_the_bucket_and_the_history_holds_only_a_reference(
    dev_server: WorkflowEnvironment, agent: Harness, bucket: Bucket, tmp_path: Path
) -> None:
    """The SDK's ExternalStorage uploads the 18 KB ticket; the history's copy is a few hundred bytes and
    the replayer, given the same settings, follows it; without them it cannot read the history at all."""
    settings = bucket.settings(payload_threshold_bytes=THRESHOLD)
    on_s3 = await harness_with(dev_server, agent, **settings)
    question = "My parcel for order A-1001 never arrived. " + "Here is everything that happened. " * (BIG // 34)
    async with on_s3.worker(**settings):
        handle = await on_s3.start(ticket(question, approval_limit_cents=10_000))
        outcome = await handle.result()
    assert outcome.status == Status.RESOLVED, outcome.answer

    history = await handle.fetch_history()
    started = history.events[0]
    assert started.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
    (reference,) = started.workflow_execution_started_event_attributes.input.payloads
    assert reference.metadata["messageType"] == REFERENCE_TYPE
    assert reference.ByteSize() < 1024
    assert reference.external_payloads[0].size_bytes > BIG
    assert "everything that happened" not in history.to_json()

    payloads = {key: data for key, data in bucket.objects().items() if "/v0/" in key}
    assert payloads, "nothing went through Temporal's external storage"
    run_folder = f"{PREFIX}v0/ns/default/wt/SupportAgent/wi/{handle.id}/"
    assert any(key.startswith(run_folder) for key in payloads), sorted(payloads)
    assert all(len(data) > THRESHOLD for data in payloads.values())

    write_history(tmp_path / "on-s3.json", history)
    (with_bucket,) = await replay([tmp_path], data_converter=on_s3.client.data_converter)
    assert with_bucket.ok, with_bucket.failure
    (without_bucket,) = await replay([tmp_path])
    assert not without_bucket.ok
    assert "TMPRL1105" in (without_bucket.failure or ""), without_bucket.failure


async def test_an_encrypted_ticket_puts_only_ciphertext_in_the_bucket(
    dev_server: WorkflowEnvironment, agent: Harness, bucket: Bucket
) -> None:
    """The codec encrypts a payload before ExternalStorage uploads it, and the content store seals its
    blobs with the same keys, so neither kind of object holds the customer's words or address."""
    settings = {
        **bucket.settings(payload_threshold_bytes=THRESHOLD),
        "codec": CodecSettings(keys={"2026-11": base64.b64encode(os.urandom(32)).decode()}),
    }
    encrypted = await harness_with(dev_server, agent, **settings)
    question = "My parcel for order A-1001 never arrived, my name is Ann Lovelace. " + "Lovelace " * (BIG // 9)
    async with encrypted.worker(**settings):
        handle = await encrypted.start(ticket(question, email="ann@example.com", approval_limit_cents=10_000))
        outcome = await handle.result()
    assert outcome.status == Status.RESOLVED, outcome.answer
    assert [e.to for e in agent.store.mail.sent()] == ["ann@example.com"]

    stored = bucket.objects()
    assert any("/v0/" in key for key in stored), "the ticket went to the bucket through ExternalStorage"
    assert any(key.startswith(f"{PREFIX}sha256:") for key in stored), "the content store wrote to the bucket"
    for key, data in stored.items():
        for secret in (b"ann@example.com", b"Lovelace", b"never arrived", b"A-1001"):
            assert secret not in data, f"{secret!r} in plain text in {key}"
    assert rows_in_blobs_table(agent.store) == 0


def test_the_prefix_is_a_folder_and_an_empty_bucket_variable_means_no_bucket(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings(s3=S3Settings(prefix="/agent/")).s3.prefix == "agent/"
    assert Settings(s3=S3Settings(prefix="")).s3.prefix == ""
    monkeypatch.setenv("AGENT_S3_BUCKET", "")  # as compose passes a variable left unset
    assert Settings().s3.bucket is None
    assert wiring.data_converter(Settings()).external_storage is None
