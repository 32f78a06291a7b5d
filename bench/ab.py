"""A cut's worker CPU against another revision's, in the same conditions: ``./dev run python -m bench.ab REV ...``
(``--tickets 30 --rounds 3``).

On a machine shared with other work, two runs of a benchmark minutes apart differ by more than most cuts move the
worker's CPU. So this exports each revision (a git revision, or a directory holding the project) into a scratch
directory and runs, on one ``temporal server start-dev`` at the raised poll limit, a worker of each in turn, round
after round: each runs a warm-up and then N tickets one after another, and its CPU is read from /proc. The worker
imports the revision's code (``PYTHONPATH``) in this environment, so revisions that change the lock file are not
comparable here. Prints each round and then each revision's median, per ticket: two revisions' tickets may run
different numbers of activities (1.1.0's local-activity policy read), so a figure per activity would compare
different things.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowHandle

from activities.business import Business
from activities.contracts.names import WORKFLOW_NAME
from activities.contracts.ticket import Outcome
from agent_worker.client import connect, ensure_search_attributes
from agent_worker.config import Settings
from agent_worker.exits import exit_hard
from bench.peers import finish
from bench.stack import POLL_LIMITS, dev_server, load, machine, median
from bench.throughput import fresh_orders, ticket, worker_process

ROOT = Path(__file__).resolve().parent.parent
WARM_UP = 6


def export(revision: str, into: Path) -> Path:
    """The project at ``revision``: a directory as it is, or a git revision exported with ``git archive``."""
    if Path(revision).is_dir():
        return Path(revision).resolve()
    tree = into / revision.replace("/", "_")
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


async def main(revisions: list[str], tickets: int, rounds: int) -> None:
    print(machine())
    figures: dict[str, list[float]] = {revision: [] for revision in revisions}
    with tempfile.TemporaryDirectory(prefix="ab-") as directory:
        scratch = Path(directory)
        trees = {revision: export(revision, scratch) for revision in revisions}
        async with dev_server(scratch / "server", POLL_LIMITS["poll limit 1000"]) as (_, address):
            store = Business.sqlite(scratch / "business.sqlite3").create()
            client = await connect(Settings(), address)
            await ensure_search_attributes(client)
            for n in range(rounds):
                for revision, tree in trees.items():
                    task_queue = f"ab-{uuid.uuid4()}"

                    async def start(task_queue: str = task_queue) -> WorkflowHandle[Any, Outcome]:
                        (order_id,) = fresh_orders(store, 1)
                        return await client.start_workflow(
                            WORKFLOW_NAME,
                            ticket(order_id, approval_limit_cents=100_000),
                            id=f"ab-{uuid.uuid4()}",
                            task_queue=task_queue,
                            result_type=Outcome,
                        )

                    async with worker_process(address, store, task_queue, {"PYTHONPATH": str(tree)}) as worker:
                        for _ in range(WARM_UP):
                            await finish(await start(), time.perf_counter())
                        before = worker.cpu_seconds()
                        for _ in range(tickets):
                            await finish(await start(), time.perf_counter())
                        per_ticket = (worker.cpu_seconds() - before) * 1000 / tickets
                    figures[revision].append(per_ticket)
                    print(
                        f"round {n + 1}, {revision}: worker CPU {per_ticket:.1f} ms a ticket, "
                        f"load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
    for revision, values in figures.items():
        print(f"{revision}: median {median(values):.1f} ms a ticket, rounds {', '.join(f'{v:.0f}' for v in values)}")
    print(f"load average at the end {load()}")


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("revisions", nargs="+", help="git revisions or directories holding the project")
    cli.add_argument("--tickets", type=int, default=30, help="tickets each worker runs one after another a round")
    cli.add_argument("--rounds", type=int, default=3, help="rounds, each running every revision's worker once")
    args = cli.parse_args()
    asyncio.run(main(args.revisions, args.tickets, args.rounds))
    exit_hard(0)
