"""Fault injection: off unless named, loud when on, exact about what it breaks and how often."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client

from activities.business import Business
from agent_worker.config import Settings
from tests.support.crashlab import Lab, WorkerProcess
from tests.support.faults import Fault, Faults, FaultSettings, FaultSpecError, injector, parse
from tests.support.waits import poll


@pytest.fixture
async def lab(client: Client, store: Business) -> AsyncIterator[Lab]:
    async with Lab(client, store) as lab:
        yield lab


def test_no_setting_means_no_faults(tmp_path: Path) -> None:
    assert injector(Settings(db_path=tmp_path / "b.sqlite3")) is None


def test_a_fault_names_its_point_its_first_reach_how_many_times_and_what_it_does() -> None:
    assert parse("after:issue_refund=kill, before:think#3=hang*2, before:issue_refund#5=stall") == [
        Fault("after", "issue_refund", "kill"),
        Fault("before", "think", "hang", nth=3, times=2),
        Fault("before", "issue_refund", "stall", nth=5),
    ]


@pytest.mark.parametrize(
    "spec",
    [
        "after:issue_refund",
        "during:think=kill",
        "after:think=explode",
        "after:think#0=kill",
        "after:think=kill*0",
        "after:issue_refund=stall",
    ],
)
def test_a_fault_setting_that_says_nothing_exact_stops_the_worker(spec: str) -> None:
    with pytest.raises(ValueError, match=r"(?i)fault"):
        FaultSettings(faults=spec)


def test_reaches_are_counted_across_processes_so_a_fault_fires_a_bounded_number_of_times(tmp_path: Path) -> None:
    spec = parse("after:think#2=kill*2")
    first_worker, second_worker = Faults(spec, tmp_path / "markers"), Faults(spec, tmp_path / "markers")

    fired = [bool(w.due("after:think")) for w in (first_worker, second_worker, first_worker, second_worker)]

    assert fired == [False, True, True, False]
    assert first_worker.due("before:think") is None
    with pytest.raises(FaultSpecError, match="does not run: lookup"):
        Faults(parse("before:lookup=kill"), tmp_path).check({"lookup_order"})


async def test_fault_injection_is_off_unless_named_and_says_so_loudly_at_every_start(lab: Lab) -> None:
    plain = await lab.spawn()
    faulty = [await lab.spawn(AGENT_FAULTS="before:find_refund=kill") for _ in range(2)]
    typo = await lab.spawn(AGENT_FAULTS="after:isue_refund=kill")

    for worker in [plain, *faulty]:
        await poll(functools.partial(started, worker), what=f"worker {worker.pid} to start")
    assert not [line for line in plain.logs() if "FAULT" in line["event"]]
    for worker in faulty:
        warning = next(line for line in worker.logs() if line["event"].startswith("FAULT INJECTION IS ON"))
        assert warning["level"] == "warning"
        assert warning["faults"] == ["before:find_refund#1=kill*1"]
    assert await typo.exited() != 0
    assert "does not run: isue_refund" in typo.log_path.read_text()


async def started(worker: WorkerProcess) -> bool:
    return any(line["event"] == "worker started" for line in worker.logs())
