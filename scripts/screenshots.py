"""Take the approval inbox's pictures that the README and the docs show, anew, as a person meets the inbox.

    ./dev run python scripts/screenshots.py              # into docs/screenshots/
    ./dev run python scripts/screenshots.py --out DIR    # anywhere else (tests/test_docs.py takes them into scratch)

``agent-worker dev`` (the dev server, a worker on the scripted model, the inbox) under the default money policy (no
``AGENT_POLICY_FILE``, no option on a ticket), tickets started with ``agent-worker start``, and Debian's Chromium,
driven by Playwright, signed in as ann. Before it writes a picture it checks the page says what the defaults say:
the request's reason names the default approval limit, and the transcript the default policy's digest, so that no
picture shows one policy under a request that names another. Each picture is stamped with what it shows
(``tests.support.screenshots``); ``tests/test_docs.py`` refuses pictures whose stamp is not the checkout's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from playwright.async_api import Page, async_playwright, expect

from activities.contracts.fields import amount
from activities.contracts.policy import MoneyPolicy
from agent_worker.cli.devserver import free_port
from tests.support import screenshots
from tests.support.browser import BROWSER_WINDOW, CHROMIUM

AGENT_WORKER = str(Path(sys.executable).parent / "agent-worker")
PERSON, PASSWORD = "ann", "screenshots-correct-horse"
LIVE = 30_000
"""Milliseconds a page may take to show what a ticket did."""
SOONER = {"approval_timeout_seconds": 3600}
"""The second ticket's option: a person has an hour to answer it, so the list shows it first."""
LARGE = ("A-8001", 125_000, "dora@example.com", "EUR")
"""An order whose refund the inbox asks to confirm (above ``AGENT_WEB_CONFIRM_ABOVE_CENTS``'s default)."""


async def agent_worker(*args: str, env: dict[str, str], given: str = "") -> str:
    process = await asyncio.create_subprocess_exec(
        AGENT_WORKER,
        *args,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(given.encode()), 60)
    if process.returncode != 0:
        raise SystemExit(f"agent-worker {' '.join(args)} exited {process.returncode}: {err.decode()}")
    return out.decode()


@contextlib.asynccontextmanager
async def dev_stack(data: Path) -> AsyncIterator[tuple[str, dict[str, str]]]:
    """``agent-worker dev`` on free ports, with ann's password: the inbox's address, and the environment that
    reaches it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "ANTHROPIC_", "TEMPORAL_"))}
    env["AGENT_DATA_DIR"] = str(data)
    env["AGENT_WEB_USERS"] = (await agent_worker("web-user", PERSON, env=env, given=PASSWORD + "\n")).strip()
    port, ui_port, inbox_port = free_port(), free_port(), free_port()
    env |= {"AGENT_WEB_PORT": str(inbox_port), "TEMPORAL_ADDRESS": f"127.0.0.1:{port}"}
    dev = await asyncio.create_subprocess_exec(
        AGENT_WORKER,
        "dev",
        "--port",
        str(port),
        "--ui-port",
        str(ui_port),
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert dev.stderr is not None
    said: list[str] = []
    drain: asyncio.Task[bytes] | None = None
    try:
        async with asyncio.timeout(90):
            while not said or not said[-1].startswith("Temporal dev server on"):
                line = await dev.stderr.readline()
                if not line:
                    raise SystemExit(f"agent-worker dev stopped: {''.join(said)[-3000:]}")
                said.append(line.decode())
        drain = asyncio.create_task(dev.stderr.read())  # all of it, so a full pipe never stalls the process
        yield f"http://127.0.0.1:{inbox_port}/", env
    finally:
        dev.send_signal(signal.SIGINT)
        await asyncio.wait_for(dev.wait(), 60)
        if drain is not None:
            await drain


async def start(env: dict[str, str], ticket_id: str, question: str, email: str, **options: int) -> str:
    ticket = {"ticket_id": ticket_id, "question": question, "customer_email": email, "options": options}
    await agent_worker("start", "-", env=env, given=json.dumps(ticket))
    return f"ticket-{ticket_id}"


async def sign_in(page: Page, inbox: str) -> None:
    await page.goto(inbox)
    await page.get_by_label("Name").fill(PERSON)
    await page.get_by_label("Password").fill(PASSWORD)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_test_id("person")).to_have_text(PERSON)


async def shows_the_default_policy(page: Page, limit: str | None = None) -> None:
    """The transcript's policy is the default, and the request's reason names the default approval limit where it is
    the reason: else no picture."""
    policy = MoneyPolicy()
    if limit is not None:
        await expect(page.get_by_test_id("why")).to_contain_text(f"above the approval limit of {limit}")
    transcript = await page.get_by_test_id("transcript").inner_text()
    named = {word.rstrip(":") for word in transcript.split() if word.startswith("sha256:")}
    if named != {policy.digest()}:
        raise SystemExit(f"the transcript names the policies {sorted(named)}, not only the default {policy.digest()}")


async def take() -> dict[str, bytes]:
    """Each picture by its name, stamped with what it shows."""
    if not CHROMIUM.exists():
        raise SystemExit(f"{CHROMIUM} is missing: `./dev chromium` installs it")
    limit = amount(MoneyPolicy().approval.limit_cents, "USD")
    pictures: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory(prefix="screenshots-") as data:
        async with dev_stack(Path(data)) as (inbox, env), async_playwright() as playwright:
            order_id, cents, customer, currency = LARGE
            await agent_worker("orders", "add", order_id, str(cents), customer, "--currency", currency, env=env)
            browser = await playwright.chromium.launch(executable_path=str(CHROMIUM))
            page = await (await browser.new_context(viewport=BROWSER_WINDOW)).new_page()
            await sign_in(page, inbox)
            first = await start(
                env, "T-1", "My parcel for order A-1001 never arrived. Can I have my money back?", "ann@example.com"
            )
            sooner = await start(
                env, "T-2", "Order A-1003 never came.", "cleo@example.com", approval_timeout_seconds=3600
            )
            listed = page.locator("[data-workflow-id]")
            await expect(listed).to_have_count(2, timeout=LIVE)  # no reload: the list refreshes itself
            await expect(listed.first).to_have_attribute("data-workflow-id", sooner, timeout=LIVE)
            await page.set_viewport_size({"width": 960, "height": 400})
            pictures["inbox.png"] = await page.screenshot()
            await page.set_viewport_size(BROWSER_WINDOW)

            await page.locator(f"[data-workflow-id='{first}']").click()
            await expect(page.get_by_test_id("amount")).to_have_text("USD 49.00")
            raw = page.get_by_test_id("transcript").locator("details", has_text="the model asks for issue_refund").first
            await raw.locator("summary").click()  # the raw call, one click away
            await shows_the_default_policy(page, limit)
            pictures["ticket.png"] = await page.screenshot(full_page=True)

            large = await start(env, "T-3", f"My parcel for order {order_id} never arrived.", customer)
            await page.goto(inbox)
            await page.locator(f"[data-workflow-id='{large}']").click(timeout=LIVE)
            shown = amount(cents, currency)
            await expect(page.get_by_test_id("amount")).to_have_text(shown, timeout=LIVE)
            await shows_the_default_policy(page)
            await page.get_by_role("button", name=f"Approve {shown}").click()
            await expect(page.get_by_test_id("confirm-amount")).to_have_text(shown)
            pictures["confirm.png"] = await page.screenshot()
            await browser.close()
    assert set(pictures) == set(screenshots.SHOTS)
    return {name: screenshots.stamped(png, screenshots.stamp()) for name, png in pictures.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=screenshots.FOLDER, help="where to write them (docs/screenshots)")
    out: Path = parser.parse_args().out
    pictures = asyncio.run(take())
    out.mkdir(parents=True, exist_ok=True)
    for name, png in pictures.items():
        (out / name).write_bytes(png)
        print(out / name)
    sys.stdout.flush()
    os._exit(0)  # temporalio may crash at interpreter exit (sdk-python #300); the work is done


if __name__ == "__main__":
    main()
