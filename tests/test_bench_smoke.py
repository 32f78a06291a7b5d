"""The benchmarks still run: ``bench.peers --quick`` on this project's worker alone and ``bench.scale --quick``, as a
person runs them.

Smoke tests, not measurements: they assert that a run ends and tabulates every ticket, never a time. The peers'
environments are left out, since building them is a download this suite should not depend on; a full run builds them
(``./dev run python -m bench.peers``).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from tests.support.stores import postgres_available

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.bench


async def bench(*arguments: str) -> str:
    """What ``python -m bench.NAME ARGUMENTS`` prints, once it has exited 0."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        *arguments,
        cwd=ROOT,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 150)
    assert process.returncode == 0, err.decode()[-3000:]
    return out.decode()


async def test_the_peers_bench_runs_quick_on_our_worker() -> None:
    table = await bench("bench.peers", "--quick", "--systems", "ours")
    rows = [line for line in table.splitlines() if line.startswith("| agent-worker (this project) |")]
    assert len(rows) == 3, table  # one after another, at once, and what its ticket does
    assert "**Ours over each peer" not in table  # no peer ran: nothing to compare with
    assert "**failed**" not in table


async def test_the_scale_bench_runs_quick_and_closes_every_ticket_at_each_worker_count() -> None:
    if not postgres_available():
        pytest.skip("no PostgreSQL on 127.0.0.1:5432 (CI and every machine of this project have one)")
    table = await bench("bench.scale", "--quick", "--workers", "1,2")
    rows = [[cell.strip() for cell in line.split("|")[1:-1]] for line in table.splitlines() if line.startswith("| ")]
    header, *measured = rows
    found = {(row[0], row[1]): dict(zip(header, row, strict=True)) for row in measured}
    assert set(found) == {("PostgreSQL", "1"), ("PostgreSQL", "2"), ("embedded (SQLite)", "1")}, table
    for row in found.values():
        assert row["closed"] == row["tickets"] == "10", table
        assert len(row["workers' CPU s (each)"].split(";")[1].split(",")) == int(row["workers"]), table
