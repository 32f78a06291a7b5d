"""Recovery time, and the kill matrix behind it: rerun with ``./dev run python -m bench.recovery``.

One approval ticket (look up, refund above the limit, approval, refund, email, answer) per kill point,
with the worker SIGKILLed at that point and a new worker started as soon as it is gone. Each row is run
alone, so the recovery times are not inflated by the other rows. The timeouts are the product's own
(``workflows/timeouts.py``: a model call may take two minutes, every activity that does work heartbeats with
a 5 s heartbeat timeout; the worker's sticky queue timeout is 2 s), so the figure is what production gets.

Recovery is measured from the SIGKILL (the killed worker's last log line) to the ticket's next activity
starting on the new worker, as the server records it. It includes the new worker's start-up (about a
second here), as a restart by a process supervisor would. For the kill while waiting for approval there
is no step in flight; its figure is from the kill to the refund starting after the approval, which is
sent as soon as a new worker runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from agent_worker.cli.devserver import start_dev_server
from agent_worker.exits import exit_hard
from tests.support.kill_matrix import KILL_POINTS, NO_CRASH, recovery_summary, run_matrix, table

RESULTS = Path(__file__).parent / "results"


async def main(kill_points: list[str]) -> str:
    env = await start_dev_server(None)
    try:
        with tempfile.TemporaryDirectory(prefix="recovery-") as scratch:
            rows = await run_matrix(env.client, Path(scratch), kill_points, concurrency=1)
    finally:
        await env.shutdown()
    return (
        f"Kill matrix, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs\n\n"
        f"{table(rows)}\n\n{recovery_summary(rows)}\n"
    )


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("points", nargs="*", default=[NO_CRASH, *KILL_POINTS], help="kill points (default: all)")
    report = asyncio.run(main(cli.parse_args().points))
    print(report)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "recovery.md").write_text(report)
    exit_hard(0)
