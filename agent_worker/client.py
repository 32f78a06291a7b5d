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

import structlog
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client, Plugin
from temporalio.converter import DataConverter
from temporalio.envconfig import ClientConfig
from temporalio.runtime import Runtime
from temporalio.service import RPCError, RPCStatusCode

from activities.contracts.names import SEARCH_ATTRIBUTES
from agent_worker.config import Settings
from agent_worker.exits import Refused

log = structlog.get_logger(__name__)

DEFAULT_ADDRESS = "localhost:7233"


async def connect(  # noqa: PLR0913 - where to, and what the client carries: each has its one default
    settings: Settings,
    address: str | None = None,
    namespace: str | None = None,
    runtime: Runtime | None = None,
    plugins: Sequence[Plugin] = (),
    *,
    converter: DataConverter | None = None,
) -> Client:
    """A client for the configured cluster, converting payloads with ``converter``, by default the one the settings
    name (``wiring.data_converter``), through ``AgentClientPlugin``: there is no other way to get one here, so no
    command can forget the codec. A worker hands in the converter it built, whose codec also seals its content
    store. ``address`` and ``namespace`` override the configuration, ``runtime`` serves metrics, ``plugins`` add to
    the client (tracing)."""
    from agent_worker import wiring  # noqa: PLC0415 - the wiring imports what workers need lazily

    config = ClientConfig.load_client_connect_config()
    if address:
        config["target_host"] = address
    if namespace:
        config["namespace"] = namespace
    config.setdefault("target_host", DEFAULT_ADDRESS)
    ours = wiring.AgentClientPlugin(converter or wiring.data_converter(settings))
    try:
        return await Client.connect(**config, runtime=runtime, plugins=[ours, *plugins])
    except RuntimeError as error:  # the bridge reports an unreachable server as a RuntimeError
        raise SystemExit(
            f"Cannot reach Temporal at {config['target_host']} (namespace {config.get('namespace', 'default')}): "
            f"{error}. Set TEMPORAL_ADDRESS or --address, or start one with `agent-worker dev`."
        ) from None


class SearchAttributeMissingError(Refused):
    """A search attribute the workflow sets is missing from the namespace, and this program may not, or will not,
    create it: the sentence says which, and what an operator runs (exit 2, as for any setting that is not there)."""


INDEXED_TYPES = {"Int": IndexedValueType.INDEXED_VALUE_TYPE_INT, "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD}


def _create_commands(namespace: str, missing: dict[str, str]) -> str:
    return "; ".join(
        f"temporal operator search-attribute create --namespace {namespace} --name {name} --type {kind}"
        for name, kind in missing.items()
    )


async def missing_search_attributes(client: Client) -> dict[str, str] | None:
    """The workflow's search attributes (``SEARCH_ATTRIBUTES``) the namespace lacks, by name and type; None where the
    server will not list them (the time-skipping test server cannot). Refused in words
    (``SearchAttributeMissingError``) where this client may not list them, rather than with the server's
    ``RPCError``."""
    try:
        existing = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=client.namespace)
        )
    except RPCError as error:
        if error.status == RPCStatusCode.UNIMPLEMENTED:
            return None
        raise SearchAttributeMissingError(
            f"cannot list the search attributes of namespace {client.namespace} ({error.status.name}: "
            f"{error.message}), so cannot tell whether {', '.join(SEARCH_ATTRIBUTES)} exist; an operator with the "
            f"rights to makes sure they do: {_create_commands(client.namespace, dict(SEARCH_ATTRIBUTES))}"
        ) from None
    return {name: kind for name, kind in SEARCH_ATTRIBUTES.items() if name not in existing.custom_attributes}


async def ensure_search_attributes(client: Client) -> list[str]:
    """Register the workflow's search attributes (``SEARCH_ATTRIBUTES``) that the namespace lacks, so a desk can list
    the tickets waiting for a person, a customer or an event: the migration step's job (``agent-worker migrate
    --search-attributes``), never a worker's. Returns those it created. Where this client has no operator rights
    (Temporal Cloud, a locked-down cluster), ``SearchAttributeMissingError`` says exactly what an operator has to run
    instead."""
    missing = await missing_search_attributes(client)
    if missing is None:  # cannot list: add them all, which a server that cannot list still does
        missing = dict(SEARCH_ATTRIBUTES)
    if not missing:
        return []
    try:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=client.namespace,
                search_attributes={name: INDEXED_TYPES[kind] for name, kind in missing.items()},
            )
        )
    except RPCError as error:
        raise SearchAttributeMissingError(
            f"The search attributes {', '.join(missing)} do not exist in namespace {client.namespace} "
            f"and could not be created ({error.message}). Create them with: "
            f"{_create_commands(client.namespace, missing)}"
        ) from None
    return list(missing)


async def check_search_attributes(client: Client) -> None:
    """What a worker checks before it polls: the search attributes every ticket sets exist, else it does not start
    (``SearchAttributeMissingError``), since every ticket's workflow task would fail on its first upsert. Where it
    cannot tell (no right to list them), it says so in a warning and starts: registering them is the migration
    step's job, and a worker is not the operator."""
    try:
        missing = await missing_search_attributes(client)
    except SearchAttributeMissingError as cannot:
        log.warning("search attributes not checked", reason=str(cannot))
        return
    if missing:
        raise SearchAttributeMissingError(
            f"agent-worker cannot start: the search attributes {', '.join(missing)} do not exist in namespace "
            f"{client.namespace}, and every ticket sets them. Register them as the release's migration step does: "
            f"`agent-worker migrate --search-attributes`, or {_create_commands(client.namespace, missing)}"
        )
