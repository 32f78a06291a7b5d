"""Workers that let a ticket switch a safeguard off, for the crash table and the benchmarks that show what goes
wrong without it: ``refund_key`` other than per part, ``reconcile_refunds: false``, ``linear_history: false``.

A worker the product builds never allows that (``agent_worker.wiring.policy_in_force``): the ``money_policy``
activity answers ``demonstrations: false``. These workers are the product's own, built through its wiring with one
thing handed in, a policy in force that says yes: in the test's process (``allowing_demonstrations``, which
``Harness.worker(demonstrations=True)`` hands to ``build_worker``), or as a process of its own
(``python -m tests.support.demonstrations``, which ``Lab(demonstrations=True)`` spawns instead of
``agent-worker worker``, with the same settings in its environment).
"""

from __future__ import annotations

import asyncio
import sys
import traceback

from temporalio.client import Client
from temporalio.envconfig import ClientConfig

from activities.contracts.policy import PolicyInForce
from agent_worker import logs, wiring
from agent_worker.cli.worker import build_worker, run_worker
from agent_worker.client import DEFAULT_ADDRESS
from agent_worker.config import Settings
from agent_worker.exits import exit_hard

WORKER_COMMAND = (sys.executable, "-m", "tests.support.demonstrations")
"""What ``Lab`` runs for a worker process that allows demonstrations (from the project's folder, as tests run)."""


def allowing_demonstrations(settings: Settings) -> PolicyInForce:
    """The policy in force a worker with ``settings`` would answer, but allowing demonstrations."""
    return wiring.policy_in_force(settings).model_copy(update={"demonstrations": True})


async def serve() -> None:
    """``agent-worker worker``, but allowing demonstrations: connected as the product connects (Temporal's
    environment configuration, the service's data converter), and run until SIGTERM."""
    settings = Settings()
    logs.configure(settings.log_level, settings.log_format)
    config = ClientConfig.load_client_connect_config()
    config.setdefault("target_host", DEFAULT_ADDRESS)
    client = await Client.connect(**config, data_converter=wiring.data_converter(settings))
    await run_worker(client, settings, worker=build_worker(client, settings, policy=allowing_demonstrations(settings)))


if __name__ == "__main__":
    try:
        asyncio.run(serve())
    except BaseException:  # noqa: BLE001 - whatever ended it, a test reads the exit code and the log
        traceback.print_exc()
        exit_hard(1)
    exit_hard(0)
