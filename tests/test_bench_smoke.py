"""The benchmarks still run: ``bench.peers --quick`` on this project's worker alone, as a person runs it.

A smoke test, not a measurement: it asserts that the run ends and tabulates a ticket, never a time. The peers'
environments are left out, since building them is a download this suite should not depend on; a full run builds them
(``./dev run python -m bench.peers``).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.bench


async def test_the_peers_bench_runs_quick_on_our_worker() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.peers", "--quick", "--systems", "ours", cwd=ROOT,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 150)
    assert process.returncode == 0, err.decode()[-3000:]
    table = out.decode()
    rows = [line for line in table.splitlines() if line.startswith("| agent-worker (this project) |")]
    assert len(rows) == 5, table  # two settings one after another, two at once, and what its ticket does
    assert "**failed**" not in table
