"""The search attributes every ticket sets are the release's migration step's to register (``agent-worker migrate
--search-attributes``, or the compose file's namespace step), not every worker's at every start: a worker on a
namespace without them does not start, and says in words which are missing and what to run."""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from activities.business import Business
from activities.contracts.names import SEARCH_ATTRIBUTES
from agent_worker.cli.devserver import binary, free_port
from agent_worker.config import DATA_CONVERTER
from tests.support.harness import Harness
from tests.support.processes import AGENT_WORKER, address, exited, spawn_worker, worker_env
from tests.support.tickets import ticket
from tests.support.waits import awaiting


@pytest.fixture
async def bare_server() -> AsyncIterator[WorkflowEnvironment]:
    """A dev server whose namespace has none of the workflow's search attributes, as a new cluster's has none."""
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=binary("temporal"),
        port=free_port(),
        data_converter=DATA_CONVERTER,
        dev_server_extra_args=["--http-port", str(free_port()), "--metrics-port", str(free_port())],
    )
    yield env
    await env.shutdown()


async def registered(env: WorkflowEnvironment) -> set[str]:
    listed = await env.client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=env.client.namespace)
    )
    return set(listed.custom_attributes) & set(SEARCH_ATTRIBUTES)


async def test_a_worker_on_a_namespace_without_the_search_attributes_refuses_in_words_until_migrate_registers_them(
    bare_server: WorkflowEnvironment, tmp_path: Path
) -> None:
    server = address(bare_server.client)
    store = Business.sqlite(tmp_path / "business.sqlite3").create()
    settings = worker_env(server, "support-agent-bare", store.database.path)

    code, _, err = await exited(AGENT_WORKER, "worker", env=settings, timeout=30)

    assert code == 2, err
    assert "cannot start: the search attributes AwaitingApprovalCents, TicketState do not exist" in err
    assert "agent-worker migrate --search-attributes" in err
    assert "temporal operator search-attribute create --namespace default --name TicketState --type Keyword" in err
    assert "Traceback" not in err
    assert await registered(bare_server) == set(), "a worker is not the operator: it created nothing"

    migrate = (AGENT_WORKER, "migrate", "--search-attributes")
    code, out, err = await exited(*migrate, env=settings)
    assert code == 0, err
    assert "search attributes in namespace default: registered AwaitingApprovalCents, TicketState" in out
    assert await registered(bare_server) == set(SEARCH_ATTRIBUTES)
    code, out, err = await exited(*migrate, env=settings)
    assert (code, out.splitlines()[-1]) == (0, "search attributes in namespace default: all there"), err

    worker = await spawn_worker(settings)
    try:
        handle = await Harness(bare_server.client, store, "support-agent-bare").start(ticket())
        await awaiting(handle, 4900, timeout=60)  # the ticket set its search attribute, and waits
    finally:
        worker.send_signal(signal.SIGTERM)
        await asyncio.wait_for(worker.wait(), 60)


async def test_migrate_that_cannot_list_a_namespaces_search_attributes_says_so_in_words_not_with_an_rpc_error(
    client: Client, tmp_path: Path
) -> None:
    """What an operator sees where the server refuses the listing (a namespace it does not know here; a key without
    the right on Temporal Cloud): which attributes, and the commands that create them, never a traceback."""
    namespace = f"missing-{uuid.uuid4().hex[:8]}"
    settings = {"TEMPORAL_ADDRESS": address(client), "AGENT_DB_PATH": str(tmp_path / "business.sqlite3")}

    code, _, err = await exited(AGENT_WORKER, "migrate", "--search-attributes", "--namespace", namespace, env=settings)

    assert code == 2, err
    assert f"cannot list the search attributes of namespace {namespace} (" in err
    assert f"temporal operator search-attribute create --namespace {namespace} --name AwaitingApprovalCents" in err
    assert "Traceback" not in err
    assert "RPCError" not in err
