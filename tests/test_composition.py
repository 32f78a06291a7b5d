"""``agent-worker worker`` is put together in one place (``agent_worker.cli.worker.serve``): each part is built once
per start, and every part that needs another is handed the one built, so a setting reaches what it configures and
goes no further (the codec that seals payloads also seals the content store's blobs; the deployment that versions
the worker also tags its metrics; the model runs on the one Anthropic client)."""

from __future__ import annotations

import asyncio
import base64
import inspect
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from temporalio.client import Client
from temporalio.worker import Worker

from agent_worker import model_choice, wiring
from agent_worker.cli import worker as worker_module
from agent_worker.cli.devserver import free_port
from agent_worker.cli.worker import serve
from agent_worker.codec import EncryptedBlobs
from agent_worker.config import Settings
from agent_worker.config.codec_settings import CodecSettings
from agent_worker.config.deployment import DeploymentSettings
from agent_worker.config.model_settings import ClaudeSettings
from tests.support.desk import LOOSE_FILE
from tests.support.fake_messages_api import FakeMessagesAPI
from tests.support.processes import address
from tests.support.waits import poll


@dataclass
class Call:
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    result: Any


@dataclass
class Builders:
    """Each builder a worker's start may call, watched: what it was given and what it built, each time."""

    monkeypatch: pytest.MonkeyPatch
    calls: dict[str, list[Call]] = field(default_factory=dict)

    def watch(self, module: Any, name: str) -> None:
        built: Callable[..., Any] = getattr(module, name)
        calls = self.calls.setdefault(name, [])

        def watched(*args: Any, **kwargs: Any) -> Any:
            result = built(*args, **kwargs)
            calls.append(Call(args, kwargs, result))
            return result

        async def awaited(*args: Any, **kwargs: Any) -> Any:
            result = await built(*args, **kwargs)
            calls.append(Call(args, kwargs, result))
            return result

        self.monkeypatch.setattr(module, name, awaited if inspect.iscoroutinefunction(built) else watched)

    def once(self, name: str) -> Call:
        calls = self.calls[name]
        assert len(calls) == 1, f"{name} was called {len(calls)} times in one worker start"
        return calls[0]


WIRING = (
    "policy_in_force",
    "money_policy",
    "business",
    "codec",
    "payload_storage",
    "blob_backend",
    "build_activities",
    "deployment_config",
    "metrics_runtime",
    "grace_period",
    "data_converter",
)


async def test_a_worker_start_builds_each_part_once_and_hands_the_same_one_to_every_part_that_uses_it(
    client: Client, fake_api: FakeMessagesAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builders = Builders(monkeypatch)
    for name in WIRING:
        builders.watch(wiring, name)
    builders.watch(model_choice, "anthropic_client")
    builders.watch(worker_module, "connect")
    builders.watch(worker_module, "build_worker")
    settings = Settings(
        task_queue=f"composition-{uuid.uuid4()}",
        data_dir=tmp_path,
        policy_file=LOOSE_FILE,
        metrics_bind=f"127.0.0.1:{free_port()}",
        claude=ClaudeSettings(backend="claude"),
        codec=CodecSettings(keys={"k1": SecretStr(base64.b64encode(os.urandom(32)).decode())}),
        versioning=DeploymentSettings(deployment=f"composition-{uuid.uuid4().hex[:8]}", build_id="b1"),
    )
    stop = asyncio.Event()
    running = asyncio.create_task(serve(settings, address(client), stop=stop))

    async def polling() -> bool:
        assert not running.done(), running.exception()
        return bool(builders.calls.get("build_worker"))

    await poll(polling, timeout=30, what="the worker to be built and run")
    stop.set()
    assert await asyncio.wait_for(running, 60) == "stop requested"

    assert builders.calls.get("data_converter", []) == [], "the worker's converter is made of the codec it built"
    codec = builders.once("codec").result
    blobs = builders.once("blob_backend")
    assert blobs.args[2] is codec
    assert isinstance(blobs.result, EncryptedBlobs)
    connected = builders.once("connect")
    worker_client: Client = connected.result
    assert worker_client.data_converter.payload_codec is codec, "payloads and blobs are sealed by one codec"

    deployment = builders.once("deployment_config").result
    runtime = builders.once("metrics_runtime")
    assert runtime.args[1] is deployment, "the metrics are tagged with the version the worker polls as"
    assert worker_client.service_client.config.runtime is runtime.result
    built = builders.once("build_worker")
    assert built.kwargs["deployment"] is deployment
    worker: Worker = built.result
    assert worker.config(active_config=True).get("deployment_config") is deployment
    assert worker.config(active_config=True).get("graceful_shutdown_timeout") == builders.once("grace_period").result

    activities = builders.once("build_activities")
    assert activities.kwargs["blobs"] is blobs.result
    assert activities.kwargs["policy"] is builders.once("policy_in_force").result
    builders.once("money_policy")  # the desk's file, read once
    assert activities.args[1] is builders.once("business").result
    model = activities.args[2]
    assert model.client is builders.once("anthropic_client").result, "one Anthropic client, the model's"
    builders.once("payload_storage")
