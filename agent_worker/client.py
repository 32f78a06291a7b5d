"""Connecting to Temporal the way the ``temporal`` CLI does, with the data converter every side must share.

The connection comes from ``temporalio.envconfig``: ``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``,
``TEMPORAL_API_KEY``, ``TEMPORAL_TLS*``, ``TEMPORAL_PROFILE`` and the CLI's TOML config file. The data
converter is part of the contract with stored histories: the worker, the starter, the replayer and the tests must
all use the same one, so there is one route to it, ``wiring.data_converter(settings)``, which every client made
here gets through ``AgentClientPlugin``; a command that needs the converter itself takes the connected client's
(``client.data_converter``) rather than building another.
"""

from __future__ import annotations

from collections.abc import Sequence

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client, Plugin
from temporalio.envconfig import ClientConfig
from temporalio.runtime import Runtime
from temporalio.service import RPCError, RPCStatusCode

from activities.contracts.names import SEARCH_ATTRIBUTES
from agent_worker.config import Settings

DEFAULT_ADDRESS = "localhost:7233"


async def connect(
    settings: Settings,
    address: str | None = None,
    namespace: str | None = None,
    runtime: Runtime | None = None,
    plugins: Sequence[Plugin] = (),
) -> Client:
    """A client for the configured cluster, converting payloads as the settings say (``AgentClientPlugin``: there is
    no other way to get one here, so no command can forget the codec); ``address`` and ``namespace`` override the
    configuration, ``plugins`` add to it (tracing)."""
    from agent_worker.wiring import AgentClientPlugin  # noqa: PLC0415 - the wiring imports what workers need lazily

    config = ClientConfig.load_client_connect_config()
    if address:
        config["target_host"] = address
    if namespace:
        config["namespace"] = namespace
    config.setdefault("target_host", DEFAULT_ADDRESS)
    try:
        return await Client.connect(**config, runtime=runtime, plugins=[AgentClientPlugin(settings), *plugins])
    except RuntimeError as error:  # the bridge reports an unreachable server as a RuntimeError
        raise SystemExit(
            f"Cannot reach Temporal at {config['target_host']} (namespace {config.get('namespace', 'default')}): "
            f"{error}. Set TEMPORAL_ADDRESS or --address, or start one with `agent-worker dev`."
        ) from None


class SearchAttributeMissingError(RuntimeError):
    pass


INDEXED_TYPES = {"Int": IndexedValueType.INDEXED_VALUE_TYPE_INT, "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD}


async def ensure_search_attributes(client: Client) -> None:
    """Make sure the workflow's search attributes exist (``SEARCH_ATTRIBUTES``), so a desk can list the tickets
    waiting for a person, a customer or an event.

    Registering them needs operator rights; where the worker has none (Temporal Cloud, a locked-down
    cluster), say exactly what an operator has to run instead of failing every upsert later.
    """
    request = ListSearchAttributesRequest(namespace=client.namespace)
    missing = dict(SEARCH_ATTRIBUTES)
    try:
        existing = await client.operator_service.list_search_attributes(request)
        missing = {name: kind for name, kind in missing.items() if name not in existing.custom_attributes}
    except RPCError as error:
        if error.status != RPCStatusCode.UNIMPLEMENTED:  # the time-skipping test server can add, not list
            raise
    if not missing:
        return
    try:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=client.namespace,
                search_attributes={name: INDEXED_TYPES[kind] for name, kind in missing.items()},
            )
        )
    except RPCError as error:
        commands = "; ".join(
            f"temporal operator search-attribute create --namespace {client.namespace} --name {name} --type {kind}"
            for name, kind in missing.items()
        )
        raise SearchAttributeMissingError(
            f"The search attributes {', '.join(missing)} do not exist in namespace {client.namespace} "
            f"and could not be created ({error.message}). Create them with: {commands}"
        ) from error
