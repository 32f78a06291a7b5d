"""A worker process that kills or hangs itself where ``AGENT_FAULTS`` says (``tests.support.faults``), and shows
what the ``DEMONSTRATION`` environment variable names (``tests.support.demonstrations``): the product's own worker,
built through its wiring, with those plugins added. ``Lab`` spawns it instead of ``agent-worker worker`` whenever
its settings name faults or it shows a demonstration.
"""

from __future__ import annotations

import asyncio
import sys
import traceback

from temporalio.plugin import SimplePlugin

from agent_worker import logs, wiring
from agent_worker.cli import metrics
from agent_worker.cli.worker import build_worker, run_worker
from agent_worker.client import connect
from agent_worker.config import Settings
from agent_worker.exits import exit_hard
from tests.support.demonstrations import Demonstration
from tests.support.faults import FaultPlugin, injector

WORKER_COMMAND = (sys.executable, "-m", "tests.support.faulty_worker")
"""What ``Lab`` runs for a worker process with faults (from the project's folder, as tests run)."""


async def serve() -> None:
    """``agent-worker worker`` with the faults the environment names: connected as the product connects (Temporal's
    environment configuration, the client's plugin, the metrics ``AGENT_METRICS_BIND`` asks for), and run until
    SIGTERM."""
    settings = Settings()
    logs.configure(settings.log_level, settings.log_format)
    faults = injector(settings)
    client = await connect(settings, runtime=metrics.runtime(settings.metrics_bind, wiring.deployment_config(settings)))
    plugins: list[SimplePlugin] = [FaultPlugin(faults)] if faults is not None else []
    business = None  # the product's own, from settings
    if (demonstration := Demonstration.from_env()) is not None:
        plugins.append(demonstration.plugin())
        business = demonstration.guard(wiring.business(settings))
    await run_worker(client, settings, worker=build_worker(client, settings, business, plugins=plugins))


if __name__ == "__main__":
    try:
        asyncio.run(serve())
    except BaseException:  # noqa: BLE001 - whatever ended it, a test reads the exit code and the log
        traceback.print_exc()
        exit_hard(1)
    exit_hard(0)
