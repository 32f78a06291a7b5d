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
from agent_worker.cli.worker import build_worker, run_worker
from agent_worker.client import check_search_attributes, connect
from agent_worker.config import Settings
from agent_worker.exits import exit_hard
from agent_worker.model_choice import choose_model
from tests.support.demonstrations import Demonstration
from tests.support.faults import FaultPlugin, injector

WORKER_COMMAND = (sys.executable, "-m", "tests.support.faulty_worker")
"""What ``Lab`` runs for a worker process with faults (from the project's folder, as tests run)."""


async def serve() -> None:
    """``agent-worker worker`` with the faults the environment names: built as the product's composition root builds
    it (``agent_worker.cli.worker.serve``), from its builders, with those plugins added, and run until SIGTERM."""
    settings = Settings()
    logs.configure(settings.log_level, settings.log_format)
    faults = injector(settings)
    plugins: list[SimplePlugin] = [FaultPlugin(faults)] if faults is not None else []
    business = wiring.business_ready(settings)
    if (demonstration := Demonstration.from_env()) is not None:
        plugins.append(demonstration.plugin())
        business = demonstration.guard(business)
    model = choose_model(settings, business.model_calls)
    deployment = wiring.deployment_config(settings)
    codec = wiring.codec(settings)
    converter = wiring.converter(codec, wiring.payload_storage(settings))
    client = await connect(
        settings, runtime=wiring.metrics_runtime(settings.metrics_bind, deployment), converter=converter
    )
    blobs = wiring.blob_backend(settings, business.blobs, codec)
    activities = wiring.build_activities(
        settings, business, model, blobs=blobs, policy=wiring.policy_in_force(settings)
    )
    await check_search_attributes(client)
    await run_worker(build_worker(client, settings, activities, deployment=deployment, plugins=plugins))


if __name__ == "__main__":
    try:
        asyncio.run(serve())
    except BaseException:  # noqa: BLE001 - whatever ended it, a test reads the exit code and the log
        traceback.print_exc()
        exit_hard(1)
    exit_hard(0)
