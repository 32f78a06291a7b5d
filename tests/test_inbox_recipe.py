"""docs/operations.md's recipe for the inbox beside a worker, run as printed: its commands, read from the page, in a
shell of a folder of their own, on the machine's PostgreSQL (the schema's owner migrating, a role that may only read
and write rows running the rest) and the tests' dev server, with a password piped in.
It ends with ann signed in, seeing the ticket that waits for her, and her approval taken by the worker the recipe
started: the keys, the people and the database the recipe makes are the ones both processes use."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import stat
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from temporalio.client import Client

from activities.business import Business
from activities.contracts.ticket import Outcome
from activities.contracts.world import Order
from agent_worker.cli.devserver import free_port
from agent_worker.config.web import WebSettings
from agent_worker.passwords import password_matches
from tests.support.harness import Harness
from tests.support.inbox import PASSWORDS, Person, page_of, shown, waiting_request
from tests.support.processes import AGENT_WORKER, address
from tests.support.stores import rows_only_role
from tests.support.tickets import ticket
from tests.support.waits import poll

pytestmark = pytest.mark.timeout(180)

OPERATIONS = Path(__file__).parents[1] / "docs" / "operations.md"
SITE = {"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "AGENT_DATABASE_URL", "SCHEMA_OWNER_URL", "ANTHROPIC_API_KEY"}
"""What the recipe's first block says is particular to a site: the test gives its own."""


def recipe() -> tuple[str, str]:
    """The section's two shell blocks, as printed: what a site sets, and the recipe."""
    page = OPERATIONS.read_text()
    section = page.split("### The inbox beside a worker, start to finish", 1)[1].split("\n### ", 1)[0]
    site, commands = re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)[:2]
    return site, commands


@contextlib.contextmanager
def session_of(process: subprocess.Popen[bytes]) -> Iterator[None]:
    """Stop what the recipe left running (the worker and the inbox it put in the background, in the session its
    shell led) with SIGTERM, as a deploy would, and wait until none of it is left."""
    try:
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


async def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def test_the_recipe_names_only_what_a_site_sets_before_it() -> None:
    site, commands = recipe()
    exported = {name for line in site.splitlines() for name in re.findall(r"\b([A-Z_]+)=", line)}
    assert exported == SITE
    assert "agent-worker web-user ann --new-keys" in commands
    assert "agent-worker migrate" in commands


async def test_the_recipe_as_printed_ends_with_ann_signed_in_approving_a_refund_the_worker_pays(
    client: Client, postgres_url: str, tmp_path: Path
) -> None:
    with rows_only_role(postgres_url) as rows_only:
        await recipe_run(client, postgres_url, rows_only, tmp_path)


async def recipe_run(client: Client, owner_url: str, rows_only: str, tmp_path: Path) -> None:
    """The recipe with the schema's owner at ``owner_url`` and the worker and inbox as ``rows_only``."""
    _, commands = recipe()
    task_queue, port = f"support-agent-{uuid.uuid4()}", free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "ANTHROPIC_", "TEMPORAL_"))},
        "PATH": f"{Path(AGENT_WORKER).parent}{os.pathsep}{os.environ['PATH']}",  # as `eval "$(./dev env)"` puts it
        "TEMPORAL_ADDRESS": address(client),
        "TEMPORAL_NAMESPACE": client.namespace,
        "AGENT_DATABASE_URL": rows_only,
        "SCHEMA_OWNER_URL": owner_url,
        "AGENT_MODEL_BACKEND": "scripted",  # the site's model: no Anthropic key here
        "AGENT_TASK_QUEUE": task_queue,  # the tests share one dev server
        "AGENT_WEB_PORT": str(port),  # and one machine
        "AGENT_GRACEFUL_SHUTDOWN_SECONDS": "5",
    }
    shell = subprocess.Popen(
        ["bash", "-e", "-c", commands],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its background jobs stay in its process group, for session_of to stop
    )
    store = None
    with session_of(shell):
        _, err = await asyncio.to_thread(shell.communicate, f"{PASSWORDS['ann']}\n".encode(), 120)
        assert shell.returncode == 0, err.decode()
        inbox_log = tmp_path / "inbox.log"

        async def inbox_url() -> str | None:
            said = re.search(r"approval inbox on (http://\S+/)", inbox_log.read_text() if inbox_log.exists() else "")
            return said.group(1) if said else None

        url = await poll(inbox_url, timeout=60, interval=0.2, what="the inbox to say where it listens")
        store = Business.at(owner_url)  # the schema the recipe's migrate made; the order a shop would add
        store.orders.add(Order(order_id="A-1001", amount_cents=4900, customer_email="ann@example.com"))
        handle = await Harness(client, store, task_queue).start(ticket())
        request = await waiting_request(client, handle.id, timeout=60)
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
            ann = Person(http, url)
            signed_in = await ann.sign_in("ann")
            listed = await ann.get("/")
            answered, _ = await ann.answer(handle.id, request)
            outcome: Outcome = await handle.result()
            _, page = await ann.get(page_of(handle.id))
    try:
        await poll(lambda: group_gone(shell.pid), timeout=60, interval=0.2, what="the worker and the inbox to stop")
        env_file = tmp_path / "inbox.env"
        assert stat.S_IMODE(env_file.stat().st_mode) == 0o600  # the key signs approvals: its owner's alone
        assert signed_in == 303
        assert listed[0] == 200
        assert shown(listed[1], "person") == "ann"
        assert handle.id in listed[1]
        assert answered == 303
        assert outcome.status == "resolved"
        assert [refund.amount_cents for refund in store.payments.refunds()] == [4900]
        assert "approved by ann (signed in, approval inbox)" in "\n".join(store.audit.entries())
        assert "made for this run" not in inbox_log.read_text()  # no one-time password: ann signs in with her own
        assert "approved" in page
    finally:
        if store is not None:
            store.close()


async def new_keys(name: str, password: str) -> tuple[int, bytes, str]:
    """``agent-worker web-user NAME --new-keys`` with ``password`` piped in: its code, output and error output."""
    made = await asyncio.create_subprocess_exec(
        AGENT_WORKER,
        "web-user",
        name,
        "--new-keys",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(made.communicate(f"{password}\n".encode()), 30)
    assert made.returncode is not None
    return made.returncode, out, err.decode()


@pytest.mark.parametrize("name", ["ann", 'o\'brien \\ "the lead" é'])
async def test_web_user_new_keys_makes_an_environment_file_a_shell_and_the_settings_read_alike(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same file for ``set -a; . FILE`` and for a ``.env`` the settings read, whatever the name holds (a quote
    or a backslash would read one way in a shell and another in python-dotenv, if written as they are)."""
    code, out, err = await new_keys(name, PASSWORDS["ann"])
    assert code == 0, err
    (tmp_path / ".env").write_bytes(out)
    read_by_shell = subprocess.run(
        ["bash", "-c", 'set -a; . ./.env; printf "%s\\n%s" "$AGENT_WEB_APPROVAL_KEYS" "$AGENT_WEB_USERS"'],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    keys, users = json.loads(read_by_shell[0]), json.loads(read_by_shell[1])
    for variable in [v for v in os.environ if v.startswith("AGENT_WEB_")]:
        monkeypatch.delenv(variable)
    monkeypatch.chdir(tmp_path)  # a .env file is read from the folder a command runs in
    read_by_settings = WebSettings()

    assert len(keys) == 1
    assert len(keys[0]) >= 32
    assert list(users) == [name]
    assert password_matches(users[name], PASSWORDS["ann"])
    assert [key.get_secret_value() for key in read_by_settings.approval_keys] == keys
    assert read_by_settings.user_hashes() == users
    assert "keep them secret" in err


async def test_web_user_new_keys_refuses_a_short_password_and_prints_nothing() -> None:
    code, out, err = await new_keys("ann", "too short")

    assert code != 0
    assert out == b""  # no file's worth of settings to redirect into inbox.env
    assert "at least 12 characters" in err
