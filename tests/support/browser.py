"""A real browser for the tests: Debian's Chromium, headless, driven by Playwright, and what the inbox's browser
tests share with it: one person's browser (``BROWSER_WINDOW``), the bound on a page's live updates (``LIVE``), and
signing in through the inbox's form.

Playwright's own browser download cannot reach its host from these machines, so Playwright drives the
``chromium`` Debian package instead, which ``./dev chromium`` installs (``./dev test`` and ``.ci/run`` call
it). Tests that use it are marked ``browser``; they run in CI like the rest.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, ViewportSize, async_playwright, expect

from agent_worker.inbox.server import RunningInbox
from tests.support.inbox import PASSWORDS

CHROMIUM = Path("/usr/bin/chromium")
"""Where Debian's package puts the browser, and where ``./dev chromium`` checks for it."""
BROWSER_WINDOW = ViewportSize(width=960, height=720)
"""The viewport of a person's browser (the ``context`` fixture's): a laptop's window, as the screenshots show it."""
LIVE = 30_000
"""Milliseconds a page may take to show what the ticket did: a bounded wait, not a measure."""


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    """Headless Chromium for the length of the block. As root Playwright turns Chromium's sandbox off itself
    (``chromium_sandbox`` is False by default), which a browser pointed only at 127.0.0.1 can do without."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `./dev chromium` installs it (./dev test and .ci/run do too)")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(CHROMIUM))
        try:
            yield browser
        finally:
            await browser.close()


async def send_sign_in(page: Page, inbox: RunningInbox, name: str) -> None:
    """The inbox's sign-in form filled in with ``name``'s password and sent, as the person would."""
    await page.goto(inbox.url)
    await page.get_by_label("Name").fill(name)
    await page.get_by_label("Password").fill(PASSWORDS[name])
    await page.get_by_role("button", name="Sign in").click()


async def sign_in(page: Page, inbox: RunningInbox, name: str) -> None:
    """``send_sign_in``, then the page naming the person signed in."""
    await send_sign_in(page, inbox, name)
    await expect(page.get_by_test_id("person")).to_have_text(name)
