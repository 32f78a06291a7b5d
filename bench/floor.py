"""The floor under a ticket's worker CPU: ``./dev run python -m bench.floor [--tickets 30] [--quick]``.

What a worker spends per activity when the activity does nothing, on the same SDK, data converter and worker
settings as ours (``bench/floor_worker.py``, a process of its own, its CPU read from /proc): a workflow of as many
empty activities as a ticket runs (11), in the sandbox and outside it, beside this project's ticket
(``bench.peers.our_system``), one after another on the same server, at both poll limits. What ours spends above the
sandboxed floor is what this project's code can cut; the floor itself is the SDK's (polling, payload visiting and
conversion, the sandbox, completing each task) and no change here reaches it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter

from agent_worker.exits import exit_hard
from bench.peers import System, finish, our_system
from bench.stack import BURST_SECONDS, POLL_LIMITS, Process, dev_server, history_size, load, machine, median

ROOT = Path(__file__).resolve().parent.parent
ACTIVITIES = 11
"""As many activities as our ticket runs (``bench.peers``' table names them)."""
RESULTS = Path(__file__).parent / "results"


@asynccontextmanager
async def floor_system(address: str, workflow_type: str) -> AsyncIterator[System]:
    client = await Client.connect(address, data_converter=pydantic_data_converter)
    task_queue = f"floor-{uuid.uuid4()}"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "import asyncio, bench.floor_worker as w; asyncio.run(w.main())",
        cwd=ROOT,
        env={**os.environ, "TEMPORAL_ADDRESS": address, "FLOOR_TASK_QUEUE": task_queue},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    worker = Process(process)

    async def start() -> WorkflowHandle[Any, Any]:
        return await client.start_workflow(workflow_type, ACTIVITIES, id=f"floor-{uuid.uuid4()}", task_queue=task_queue)

    try:
        yield System(f"the floor ({workflow_type})", worker, start, client)
    finally:
        await worker.stop()


async def measure(system: System, tickets: int, warm_up: int) -> tuple[float, float, int]:
    """Worker CPU ms per activity and per workflow over ``tickets`` run one after another, and events per run."""
    warm_until = time.perf_counter() + BURST_SECONDS
    done = 0
    while done < warm_up or time.perf_counter() < warm_until:
        await finish(await system.start(), time.perf_counter())
        done += 1
    before = system.worker.cpu_seconds()
    handles = []
    for _ in range(tickets):
        handles.append(handle := await system.start())
        await finish(handle, time.perf_counter())
    per_run = (system.worker.cpu_seconds() - before) * 1000 / tickets
    sizes = [await history_size(h) for h in handles[-3:]]
    return per_run / median([s.activities for s in sizes]), per_run, int(median([s.events for s in sizes]))


async def main(tickets: int, warm_up: int) -> str:
    opening = machine()
    rows = []
    with tempfile.TemporaryDirectory(prefix="floor-") as directory:
        for n, (setting, server_args) in enumerate(POLL_LIMITS.items()):
            scratch = Path(directory) / f"server-{n}"
            async with dev_server(scratch, server_args) as (_, address):
                systems = {
                    "empty activities, sandboxed (the floor)": floor_system(address, "FloorSandboxed"),
                    "empty activities, no sandbox": floor_system(address, "FloorUnsandboxed"),
                    "agent-worker's ticket": our_system(address, scratch),
                }
                for name, running in systems.items():
                    async with running as system:
                        per_activity, per_run, events = await measure(system, tickets, warm_up)
                    busy = os.getloadavg()[0]
                    rows.append(f"| {name} | {setting} | {per_activity:.1f} | {per_run:.0f} | {events} | {busy:.1f} |")
    return "\n".join(
        [
            f"{opening}; load average at the end {load()}.",
            f"Medians over {tickets} runs one after another after a warm-up, {ACTIVITIES} activities each.",
            "",
            "| worker | server | worker CPU ms / activity | worker CPU ms / run | events / run | load |",
            "|---|---|---|---|---|---|",
            *rows,
        ]
    )


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--tickets", type=int, default=30, help="runs each worker does one after another")
    cli.add_argument("--quick", action="store_true", help="a smoke run: 2 runs, 1 warm-up; no results file")
    args = cli.parse_args()
    table = asyncio.run(main(2 if args.quick else args.tickets, 1 if args.quick else 3))
    print(table)
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "floor.md").write_text(table + "\n")
    exit_hard(0)
