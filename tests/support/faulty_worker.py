"""A worker process that kills or hangs itself where ``AGENT_FAULTS`` says (``tests.support.faults``): the product's
own worker, built through its wiring, with the fault plugin added, and allowing demonstrations when run with
``--demonstrations``. ``Lab`` spawns it instead of ``agent-worker worker`` whenever its settings name faults.
"""

from __future__ import annotations

import asyncio
import sys
import traceback

from temporalio.client import Client
from temporalio.envconfig import ClientConfig

from agent_worker import logs, wiring
from agent_worker.cli.worker import build_worker, run_worker
from agent_worker.client import DEFAULT_ADDRESS
from agent_worker.config import Settings
from agent_worker.exits import exit_hard
from tests.support.demonstrations import allowing_demonstrations
from tests.support.faults import FaultPlugin, injector

WORKER_COMMAND = (sys.executable, "-m", "tests.support.faulty_worker")
"""What ``Lab`` runs for a worker process with faults (from the project's folder, as tests run)."""


async def serve(*, demonstrations: bool) -> None:
    """``agent-worker worker`` with the faults the environment names: connected as the product connects (Temporal's
    environment configuration, the service's data converter), and run until SIGTERM."""
    settings = Settings()
    logs.configure(settings.log_level, settings.log_format)
    faults = injector(settings)
    config = ClientConfig.load_client_connect_config()
    config.setdefault("target_host", DEFAULT_ADDRESS)
    client = await Client.connect(**config, data_converter=wiring.data_converter(settings))
    policy = allowing_demonstrations(settings) if demonstrations else None  # None: the product's own, from settings
    plugins = [FaultPlugin(faults)] if faults is not None else []
    await run_worker(client, settings, worker=build_worker(client, settings, policy=policy, plugins=plugins))


if __name__ == "__main__":
    try:
        asyncio.run(serve(demonstrations="--demonstrations" in sys.argv[1:]))
    except BaseException:  # noqa: BLE001 - whatever ended it, a test reads the exit code and the log
        traceback.print_exc()
        exit_hard(1)
    exit_hard(0)
