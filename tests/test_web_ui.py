"""Temporal's own Web UI shows an encrypted ticket decrypted, through ``agent-worker codec-server``.

As a developer runs it: the dev server with its Web UI pointed at the codec server (``--ui-codec-endpoint``),
the codec server in local mode (only ``AGENT_CODEC_KEYS`` set, so the UI needs no token), a worker that
encrypts and takes nothing unencrypted, a ticket started with the ``temporal`` CLI through the codec server,
and the ticket's page opened in headless Chromium.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.async_api import Browser, Request, expect
from temporalio.testing import WorkflowEnvironment

from activities.business import Business
from activities.contracts.ticket import Outcome, Status
from agent_worker.cli.devserver import binary, free_port, start_dev_server
from agent_worker.codec import EncryptionCodec, with_codec
from agent_worker.config import DATA_CONVERTER
from tests.support.harness import Harness
from tests.support.processes import address, listening, run
from tests.support.tickets import ticket

pytestmark = [pytest.mark.browser, pytest.mark.timeout(150)]

KEYS = {"2026-11": os.urandom(32)}
QUESTION = "My parcel for order A-1001 never arrived, my name is Ann Lovelace"


@dataclass
class WebUI:
    url: str
    codec_endpoint: str
    server: WorkflowEnvironment


@pytest.fixture
async def web_ui(tmp_path: Path) -> AsyncIterator[WebUI]:
    """A dev server whose Web UI decodes through ``agent-worker codec-server``, started as a user would."""
    ui_port, codec_port = free_port(), free_port()
    ui = f"http://127.0.0.1:{ui_port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_CODEC")}
    env |= {
        "AGENT_CODEC_KEYS": json.dumps({k: base64.b64encode(v).decode() for k, v in KEYS.items()}),
        "AGENT_CODEC_SERVER_ORIGIN": ui,
    }
    codec_server = await asyncio.create_subprocess_exec(
        binary("agent-worker"),
        "codec-server",
        "--port",
        str(codec_port),
        cwd=tmp_path,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{codec_port}"
    codec = EncryptionCodec(KEYS, "2026-11", require_encrypted=True)
    server = await start_dev_server(
        None,
        ui_port=ui_port,
        data_converter=with_codec(DATA_CONVERTER, codec),
        extra_args=["--ui-codec-endpoint", endpoint],
    )
    try:
        await listening("127.0.0.1", codec_port)
        yield WebUI(ui, endpoint, server)
    finally:
        await server.shutdown()
        codec_server.terminate()
        await codec_server.wait()


async def test_the_web_ui_shows_an_encrypted_tickets_question_and_outcome_decrypted(
    web_ui: WebUI, browser: Browser, store: Business, tmp_path: Path
) -> None:
    agent = Harness(web_ui.server.client, store, task_queue=f"support-agent-{uuid.uuid4()}")
    workflow_id = f"ticket-{uuid.uuid4()}"
    async with agent.worker():  # it refuses unencrypted input: the CLI's ticket must come through the codec
        await run(
            binary("temporal"),
            "--address",
            address(agent.client),
            "workflow",
            "start",
            "--type",
            "SupportAgent",
            "--task-queue",
            agent.task_queue,
            "--workflow-id",
            workflow_id,
            "--input",
            json.dumps(ticket(QUESTION, approval_limit_cents=10_000)),
            "--codec-endpoint",
            web_ui.codec_endpoint,
        )
        handle = agent.client.get_workflow_handle(workflow_id, result_type=Outcome)
        outcome = await handle.result()
        run_id = (await handle.describe()).run_id
    assert outcome.status is Status.RESOLVED
    stored = (await web_ui.server.client.get_workflow_handle(workflow_id).fetch_history()).to_json()
    assert "Lovelace" not in stored

    page = await browser.new_page()
    decode_requests: list[Request] = []
    page.on("request", lambda r: decode_requests.append(r) if "/decode" in r.url and r.method == "POST" else None)
    try:
        await page.goto(f"{web_ui.url}/namespaces/default/workflows/{workflow_id}/{run_id}/history")
        await expect(page.get_by_text("Ann Lovelace").first).to_be_visible(timeout=30_000)
        await expect(page.get_by_text(outcome.answer[:60]).first).to_be_visible(timeout=30_000)
        await page.screenshot(path=str(tmp_path / "web-ui-ticket.png"), full_page=True)
        text = await page.inner_text("body")
        sent = [await request.all_headers() for request in decode_requests]
    finally:
        await page.close()

    assert "Codec Server could not connect" not in text
    assert "binary/encrypted" not in text
    assert sent
    assert {headers.get("x-namespace") for headers in sent} == {"default"}
    assert all("authorization" not in headers for headers in sent)  # local mode: the UI has no token to send
