"""A real browser for the tests: Debian's Chromium, headless, driven by Playwright.

Playwright's own browser download cannot reach its host from these machines, so Playwright drives the
``chromium`` Debian package instead, which ``./dev chromium`` installs (``./dev test`` and ``.ci/run`` call
it). Tests that use it are marked ``browser``; they run in CI like the rest.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from playwright.async_api import Browser, async_playwright

CHROMIUM = Path("/usr/bin/chromium")
"""Where Debian's package puts the browser, and where ``./dev chromium`` checks for it."""


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
