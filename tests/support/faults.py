"""Fault injection for crash tests: kill or hang the worker, or fail an attempt, at an activity boundary. Off unless
named.

Crash safety is proven with real crashes at precise moments: after the payment provider committed a
refund and before ``issue_refund`` reports back, after the model answered and before ``think`` returns.
An exception would not do: the SDK would report it and Temporal would retry a failure it knows about. A
SIGKILL of the whole worker process leaves the server knowing nothing, which is what a crash is.

The faults live in an activity interceptor, added to the product's own worker by a plugin (``FaultPlugin``), so
neither the activities nor the product carry test code: a test's worker process is ``python -m
tests.support.faulty_worker``, and an in-process one ``Harness.worker(faults=...)``. A worker with faults logs a
warning saying so on every start.

``AGENT_FAULTS`` is a comma-separated list of ``WHEN:ACTIVITY[#NTH]=ACTION[*TIMES]``:

- ``after:issue_refund=kill``: SIGKILL the worker the first time a refund returns;
- ``after:think#2=kill``: the second time ``think`` returns (the step that proposes the refund);
- ``after:issue_refund=hang*5``: the first five times, stop heartbeating and sit past the attempt's
  timeout, then fail the attempt (the server has long given up on it by then); a hang ``before`` an
  activity never runs it;
- ``before:issue_refund#5=stall``: the fifth time, sit past the attempt's timeout without heartbeating, then
  do the work all the same, as a thread nobody can cancel does: the attempt the server gave up on pays late;
- ``before:audit=block*2``: the first two times, never return, heartbeating all along, as an attempt whose thread
  waits on a locked store does: the server ends it at its start-to-close timeout, and nothing fails in the worker;
- ``before:audit=freeze*2``: the same without heartbeats, as a worker whose event loop is stuck: the server ends
  it at its heartbeat timeout (or its start-to-close timeout, for an activity without one);
- ``before:archive_records=fail*1000``: fail the attempt at once with a retryable error the SDK reports, without
  running it, a thousand times: a content store that refuses the records a run hands over, so an activity retried
  until it succeeds keeps the ticket where it is (``agent-worker tickets --stuck``).

Every time a named point is reached, it claims the next number for that point by creating a marker file
with ``O_EXCL`` in a directory beside the business database, atomically across processes. So the n-th
time counts reaches across worker restarts, and a fault fires a bounded number of times however many
workers a test starts with the same setting: ``after:issue_refund=kill`` kills one worker, not every
worker that retries the refund.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import structlog
from pydantic import field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from temporalio import activity
from temporalio.plugin import SimplePlugin
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor, WorkerConfig

from agent_worker.config import Settings

log = structlog.get_logger(__name__)

Action = Literal["kill", "hang", "stall", "fail", "block", "freeze"]
_FAULT = re.compile(
    r"^(?P<when>before|after):(?P<activity>\w+)(?:#(?P<nth>\d+))?=(?P<action>\w+)(?:\*(?P<times>\d+))?$"
)
_ACTIONS: tuple[Action, ...] = ("kill", "hang", "stall", "fail", "block", "freeze")
HANG_MARGIN = timedelta(seconds=1)
HANG_WITHOUT_TIMEOUT = timedelta(minutes=5)


class FaultSpecError(ValueError):
    """``AGENT_FAULTS`` does not say exactly what to break: a worker must not guess."""


@dataclass(frozen=True)
class Fault:
    when: Literal["before", "after"]
    activity: str
    action: Action
    nth: int = 1
    """Fire from the nth time the point is reached (counted across processes) ..."""
    times: int = 1
    """... for this many reaches."""

    @property
    def point(self) -> str:
        return f"{self.when}:{self.activity}"

    def fires_at(self, reach: int) -> bool:
        return self.nth <= reach < self.nth + self.times

    def __str__(self) -> str:
        return f"{self.point}#{self.nth}={self.action}*{self.times}"


def parse(spec: str) -> list[Fault]:
    """The faults ``AGENT_FAULTS`` names; an empty setting names none."""
    faults = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        match = _FAULT.match(part)
        if match is None:
            raise FaultSpecError(f"Cannot read fault {part!r}: write WHEN:ACTIVITY[#NTH]=ACTION[*TIMES]")
        action = match["action"]
        if action not in _ACTIONS:
            raise FaultSpecError(f"Unknown fault action {action!r} in {part!r}: use one of {', '.join(_ACTIONS)}")
        if action == "stall" and match["when"] == "after":
            raise FaultSpecError(f"Fault {part!r}: a stall delays the work, so it comes before an activity")
        nth, times = int(match["nth"] or 1), int(match["times"] or 1)
        if nth < 1 or times < 1:
            raise FaultSpecError(f"Fault {part!r}: #NTH and *TIMES count from 1")
        faults.append(Fault(match["when"], match["activity"], action, nth, times))  # type: ignore[arg-type]  # the regex admits only before|after
    return faults


class Faults:
    """The faults for one worker, and the directory that counts reaches across all of its processes."""

    def __init__(self, faults: list[Fault], markers: Path) -> None:
        self.faults = faults
        self.markers = markers
        self.points = {f.point for f in faults}

    def check(self, activities: set[str]) -> None:
        unknown = {f.activity for f in self.faults} - activities
        if unknown:
            raise FaultSpecError(
                f"AGENT_FAULTS names activities this worker does not run: {', '.join(sorted(unknown))} "
                f"(it runs {', '.join(sorted(activities))})"
            )

    def due(self, point: str) -> Fault | None:
        """Count one reach of ``point``; the fault to fire now, if any."""
        if point not in self.points:
            return None
        reach = self._claim(point)
        return next((f for f in self.faults if f.point == point and f.fires_at(reach)), None)

    def _claim(self, point: str) -> int:
        self.markers.mkdir(parents=True, exist_ok=True)
        reach = 1
        while True:
            try:
                os.close(os.open(self.markers / f"{point.replace(':', '-')}.{reach}", os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                reach += 1
            else:
                return reach


def kill_this_process(fault: Fault, **context: Any) -> None:
    """SIGKILL the whole worker: no cleanup, no report to the server, exactly like a crash."""
    log.warning("fault injected: killing this process with SIGKILL", fault=str(fault), pid=os.getpid(), **context)
    for handler in logging.getLogger().handlers:
        handler.flush()
    os.kill(os.getpid(), signal.SIGKILL)


class InjectedFailureError(Exception):
    """An attempt a ``fail`` fault failed: an error the SDK reports, so the server retries the activity at once."""


class HungError(Exception):
    """The end of a hang: by now the server has timed the attempt out, so nobody hears this."""


async def hang(fault: Fault) -> None:
    """Stop heartbeating and sit past the attempt's timeout; then fail the attempt without doing its work, or,
    for a stall, return and let it do its work late."""
    info = activity.info()
    timeout = info.start_to_close_timeout or HANG_WITHOUT_TIMEOUT
    log.warning("fault injected: hanging past the attempt's timeout", fault=str(fault), seconds=timeout.total_seconds())
    await asyncio.sleep((timeout + HANG_MARGIN).total_seconds())
    if fault.action == "hang":
        raise HungError(f"fault {fault} hung this attempt past its timeout")
    log.warning("fault injected: the stalled attempt does its work now", fault=str(fault))


async def held(fault: Fault) -> None:
    """Never come back: the server times the attempt out (a ``block`` heartbeats meanwhile, so at its start-to-close
    timeout; a ``freeze`` does not, so at its heartbeat timeout where it has one), and the worker is told only by
    the cancel a heartbeat brings back, if any. Nothing is raised in the worker but that cancel."""
    log.warning("fault injected: holding the attempt until the server gives up on it", fault=str(fault))
    if fault.action == "freeze":
        await asyncio.Event().wait()
    while True:
        await asyncio.sleep(1)
        activity.heartbeat()


class _Inbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, faults: Faults) -> None:  # noqa: A002 - the SDK's name
        super().__init__(next)
        self.faults = faults
        self._stalled: set[asyncio.Task[Any]] = set()

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:  # noqa: A002 - the SDK's name
        name = activity.info().activity_type
        if (stall := await self._at(f"before:{name}")) is not None:
            # The attempt goes on in a task of its own, which the attempt's cancellation does not reach, as a
            # thread in the middle of a call would not be reached: it does its work after the server gave up.
            late = asyncio.create_task(self._late(stall, input))
            self._stalled.add(late)
            late.add_done_callback(self._stalled.discard)
            return await asyncio.shield(late)
        result = await self.next.execute_activity(input)
        await self._at(f"after:{name}")
        return result

    async def _late(self, fault: Fault, input: ExecuteActivityInput) -> Any:  # noqa: A002 - the SDK's name
        await hang(fault)
        try:
            return await self.next.execute_activity(input)
        except Exception as error:
            log.warning("fault injected: the stalled attempt failed", fault=str(fault), error=str(error))
            raise

    async def _at(self, point: str) -> Fault | None:
        """Fire the fault due at ``point``; a stall is returned for the caller to carry out."""
        fault = await asyncio.to_thread(self.faults.due, point)
        if fault is None:
            return None
        if fault.action == "stall":
            return fault
        if fault.action == "kill":
            kill_this_process(fault, attempt=activity.info().attempt)
        if fault.action == "fail":
            raise InjectedFailureError(f"fault {fault} failed this attempt")
        if fault.action in ("block", "freeze"):
            await held(fault)
        await hang(fault)
        return None


class FaultInterceptor(Interceptor):
    """Fires the configured faults at ``before:<activity>`` and ``after:<activity>`` (after a success)."""

    def __init__(self, faults: Faults) -> None:
        self.faults = faults

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:  # noqa: A002
        return _Inbound(next, self.faults)


class FaultSettings(BaseSettings):
    """``AGENT_FAULTS`` and ``AGENT_FAULTS_DIR``, read as the product reads its settings."""

    model_config = SettingsConfigDict(env_prefix="AGENT_", env_file=".env", extra="ignore")

    faults: str = ""
    """Kill or hang this worker at activity boundaries. Empty, the default, injects nothing."""
    faults_dir: Path | None = None
    """Where faults count how often each point was reached, across worker processes; default beside the
    business database (``<db>.faults``)."""

    @field_validator("faults")
    @classmethod
    def _faults_must_parse(cls, value: str) -> str:
        parse(value)  # a typo must stop the worker, not leave a crash test silently crash-free
        return value


def injector(settings: Settings, faults: FaultSettings | None = None) -> Faults | None:
    """The faults ``faults`` (by default the environment's) name, for a worker on ``settings``' business database;
    None when they name none."""
    faults = FaultSettings() if faults is None else faults
    named = parse(faults.faults)
    if not named:
        return None
    business_db = settings.business_db
    return Faults(named, faults.faults_dir or business_db.with_name(business_db.name + ".faults"))


def plugins(settings: Settings, spec: str) -> list[FaultPlugin]:
    """The fault plugin for a worker on ``settings`` that ``spec`` names faults for; none if it names none."""
    faults = injector(settings, FaultSettings(faults=spec))
    return [] if faults is None else [FaultPlugin(faults)]


class FaultPlugin(SimplePlugin):
    """The product's worker, with the fault interceptor added last: checked against the activities the worker
    registers (a fault at an activity it does not run is a typo), and loud about it at every start."""

    def __init__(self, faults: Faults) -> None:
        super().__init__("agent-worker-faults")
        self.faults = faults

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        config = super().configure_worker(config)
        self.faults.check({fn.__name__ for fn in config.get("activities", [])})  # registered under their names
        log.warning(
            "FAULT INJECTION IS ON: this worker will kill or hang itself on purpose. It is for crash tests; "
            "unset AGENT_FAULTS anywhere else.",
            faults=[str(f) for f in self.faults.faults],
            markers=str(self.faults.markers),
        )
        config["interceptors"] = [*config.get("interceptors", []), FaultInterceptor(self.faults)]
        return config
