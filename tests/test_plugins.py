"""The service's two plugins, on a real server: the client's (the data converter every client and the replayer
share) composes with a converter the caller brings, keeping its codec, and refuses by name one whose payloads it
could not read the same way; the worker's adds what only a worker runs, and takes its client's converter."""

from __future__ import annotations

import base64
import dataclasses
import os
import zlib
from collections.abc import Sequence
from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverter,
    DefaultPayloadConverter,
    PayloadCodec,
)
from temporalio.worker import UnsandboxedWorkflowRunner, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.ticket import Status
from agent_worker.cli.replay import replay, write_history
from agent_worker.cli.worker import local_worker
from agent_worker.codec import EncryptionCodec
from agent_worker.config import DATA_CONVERTER, Settings
from agent_worker.config.codec_settings import CodecSettings
from agent_worker.model_choice import choose_model
from agent_worker.wiring import AgentClientPlugin, AgentWorkerPlugin, IncompatibleConverterError, data_converter
from tests.support.harness import Harness
from tests.support.history import events
from tests.support.processes import address
from tests.support.tickets import answer, ticket
from tests.support.waits import awaiting

SQUEEZED = b"binary/zlib"


class Squeeze(PayloadCodec):
    """A caller's own codec (compression), which marks each payload it wrote, so a history shows it was used."""

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [
            Payload(metadata={"encoding": SQUEEZED}, data=zlib.compress(payload.SerializeToString()))
            for payload in payloads
        ]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        decoded = []
        for payload in payloads:
            if payload.metadata.get("encoding") != SQUEEZED:
                decoded.append(payload)
                continue
            inner = Payload()
            inner.ParseFromString(zlib.decompress(payload.data))
            decoded.append(inner)
        return decoded


class ForeignPayloads(DefaultPayloadConverter):
    """A payload converter of some other framework: not pydantic's JSON, which every history here is."""


class ForeignFailures(DefaultFailureConverter):
    """A failure converter of some other framework."""


def keyed() -> Settings:
    return Settings(codec=CodecSettings(keys={"k1": base64.b64encode(os.urandom(32)).decode()}))


async def test_a_callers_codec_is_kept_through_a_whole_ticket_and_the_replayer(
    agent: Harness, client: Client, tmp_path: Path
) -> None:
    """The caller connects with its own codec and the client's plugin: payloads are pydantic's JSON under the
    caller's codec, a worker built on that client runs a ticket whose every payload in history is squeezed, and
    the replayer given the same converter replays it."""
    theirs = dataclasses.replace(DataConverter.default, payload_codec=Squeeze())
    settings = agent.settings()
    connected = await Client.connect(
        address(client), data_converter=theirs, plugins=[AgentClientPlugin(data_converter(settings))]
    )
    converter = connected.data_converter
    assert isinstance(converter.payload_codec, Squeeze)
    assert converter.payload_converter_class is PydanticPayloadConverter

    squeezed = Harness(connected, agent.store, agent.task_queue)
    async with local_worker(connected, settings, agent.store, choose_model(settings, agent.store.model_calls)):
        handle = await squeezed.start(ticket())
        await awaiting(handle, 4900)
        await handle.signal(APPROVE_SIGNAL, answer(4900))
        assert (await handle.result()).status is Status.RESOLVED
    assert len(agent.store.payments.refunds()) == 1

    history = await handle.fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes
    assert [p.metadata["encoding"] for p in started.input.payloads] == [SQUEEZED]
    completed = await events(handle, EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)
    assert completed
    assert {
        p.metadata["encoding"] for e in completed for p in e.activity_task_completed_event_attributes.result.payloads
    } == {SQUEEZED}

    write_history(tmp_path / "squeezed.json", history)
    (ok,) = await replay([tmp_path], data_converter=theirs, plugins=[AgentClientPlugin(data_converter(settings))])
    assert ok.ok, ok.failure
    (unreadable,) = await replay([tmp_path], plugins=[AgentClientPlugin(data_converter(settings))])
    assert not unreadable.ok, "without the caller's codec the replayer cannot read the squeezed history"


@pytest.mark.parametrize(
    ("theirs", "settings", "named"),
    [
        (DataConverter(payload_converter_class=ForeignPayloads), Settings(), "ForeignPayloads for payloads"),
        (
            DataConverter(payload_converter_class=PydanticPayloadConverter, failure_converter_class=ForeignFailures),
            Settings(),
            "ForeignFailures for failures",
        ),
        (dataclasses.replace(DataConverter.default, payload_codec=Squeeze()), keyed(), "AGENT_CODEC_KEYS"),
    ],
    ids=["another payload converter", "another failure converter", "a codec where the settings encrypt"],
)
async def test_a_converter_the_service_cannot_read_the_same_way_is_refused_naming_why(
    client: Client, theirs: DataConverter, settings: Settings, named: str
) -> None:
    """An operator's program that brings such a converter fails at connect, before it starts a ticket whose
    payloads no worker could read, rather than have the plugin silently drop the caller's choice."""
    with pytest.raises(IncompatibleConverterError, match=named):
        await Client.connect(
            address(client), data_converter=theirs, plugins=[AgentClientPlugin(data_converter(settings))]
        )


async def test_the_settings_codec_applies_where_the_caller_brings_none_and_pydantic_is_kept(client: Client) -> None:
    for theirs in (DataConverter.default, DATA_CONVERTER):
        connected = await Client.connect(
            address(client), data_converter=theirs, plugins=[AgentClientPlugin(data_converter(keyed()))]
        )
        assert isinstance(connected.data_converter.payload_codec, EncryptionCodec)
        assert connected.data_converter.payload_converter_class is PydanticPayloadConverter


async def test_the_clients_plugin_runs_nothing_on_a_worker_and_the_workers_plugin_converts_nothing(
    agent: Harness, client: Client
) -> None:
    """Separate as Pydantic AI's are: a client made for a command registers no workflow on a worker built from it
    (so a command never loads the workflow or opens the business database), and the worker's plugin leaves the
    client's converter as it is."""
    settings = agent.settings()
    connected = await Client.connect(address(client), plugins=[AgentClientPlugin(data_converter(settings))])
    client_plugin, worker_plugin = AgentClientPlugin(data_converter(settings)), AgentWorkerPlugin(agent.activities())
    assert client_plugin.workflows is None
    assert client_plugin.activities is None
    assert worker_plugin.data_converter is None
    worker = local_worker(connected, settings, agent.store, choose_model(settings, agent.store.model_calls))
    configured = worker.config(active_config=True)
    assert [w.__name__ for w in configured.get("workflows", [])] == ["SupportAgent"]
    assert configured["client"].data_converter is connected.data_converter


async def test_the_workers_plugin_keeps_the_callers_runner_and_runs_a_ticket_in_the_sandbox_a_caller_chooses(
    agent: Harness,
) -> None:
    """A team embedding the plugin chooses its runner, as Temporal's own plugins let it: a sandboxed one is kept, with
    the contracts and pydantic added to what it passes through, and a ticket runs in it to the refund; the product's
    worker asks for the workers' runner (``tests/test_determinism.py``). Nothing forces either."""
    plugin = AgentWorkerPlugin(agent.activities())
    sandboxed = Worker(
        agent.client, task_queue=agent.task_queue, plugins=[plugin], workflow_runner=SandboxedWorkflowRunner()
    )
    runner = sandboxed.config(active_config=True)["workflow_runner"]
    assert isinstance(runner, SandboxedWorkflowRunner)
    assert {"activities", "pydantic"} <= runner.restrictions.passthrough_modules
    async with sandboxed:
        handle = await agent.start(ticket(approval_limit_cents=10_000))
        assert (await handle.result()).status is Status.RESOLVED
    assert len(agent.store.payments.refunds()) == 1
    assert await events(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED) == []

    unsandboxed = Worker(
        agent.client, task_queue=agent.task_queue, plugins=[plugin], workflow_runner=UnsandboxedWorkflowRunner()
    )
    assert isinstance(unsandboxed.config(active_config=True)["workflow_runner"], UnsandboxedWorkflowRunner)
