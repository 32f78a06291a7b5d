"""The contract between releases, on what runs of earlier releases actually handed over: every continue-as-new input
stored in ``replay_histories/`` and ``tests/handed_over/`` loads into this release's ``TicketInput`` and
``ContinuedState``, round-trips, is written back so that a release which does not know this one's newer fields reads
it, and, taken over by a continued run on a real dev server, goes on to the same payouts, approvals and emails as
the run that continued it when it was recorded (``tests.support.handed_over`` says how, and
``docs/changing-workflow-code.md`` why).
"""

from __future__ import annotations

import re
import types
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from activities.contracts.fields import Snapshot
from activities.contracts.ticket import TicketInput
from agent_worker.cli.replay import HISTORIES, load_history
from tests.support.handed_over import (
    RECORDED_BY_RELEASE,
    differences,
    handing_over,
    label,
    read,
    release,
    release_of,
    stored_runs,
)
from tests.support.harness import Harness
from workflows.continuation import ContinuedState

STORED = handing_over()
RELEASES = re.findall(r"^## (\d+\.\d+\.\d+)", Path("CHANGELOG.md").read_text(), flags=re.MULTILINE)
EARLIER = [path for path in STORED if not path.is_relative_to(HISTORIES)]
"""Hand-overs an earlier release's code wrote (``tests/handed_over/``): what a ticket open when this release ships
may carry, the last release's included. This build's own, the replay gate's (``replay_histories/``), load and
round-trip above, and become the next release's fixtures."""


def _hands_over_again(path: Path) -> bool:
    """Whether the stored run that took the hand-over at ``path`` over handed the ticket over in its turn."""
    runs = stored_runs()
    first = next(run for run in runs if run.path == path)
    run_id = str(first.started.original_execution_run_id)
    return any(r.workflow_id == first.workflow_id and r.continued_from == run_id and r.hands_over for r in runs)


CHAINED = [path for path in EARLIER if _hands_over_again(path)]
"""Hand-overs whose stored continued run handed over again, on a recording server that suggested continuing at 60
events (the test's does not): the comparison needs a continued run that closed, so such a chain is compared from its
last hand-over, a fixture of its own, on the world every run before it left (``handed_over.runs_before``)."""
COMPARED = [path for path in EARLIER if path not in CHAINED]


def _forget(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return forgetting_newer(annotation)
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return Annotated[(_forget(args[0]), *annotation.__metadata__)]
    if origin in (Union, types.UnionType):
        return Union[tuple(_forget(arg) for arg in args)]  # noqa: UP007 - built from a tuple of types
    if origin in (list, dict, tuple, set, frozenset) and args:
        return origin[tuple(_forget(arg) for arg in args)] if origin is not list else list[_forget(args[0])]  # type: ignore[misc]
    return annotation


@cache
def forgetting_newer(kind: type[BaseModel]) -> type[BaseModel]:
    """``kind`` as a release reads it that knows none of the fields a snapshot calls ``newer``, at any depth, and
    refuses any field it does not know (as every contract does)."""
    newer: frozenset[str] = kind.newer if issubclass(kind, Snapshot) else frozenset()
    fields: dict[str, Any] = {
        name: (_forget(info.annotation), info) for name, info in kind.model_fields.items() if name not in newer
    }
    return create_model(f"{kind.__name__}Before", __config__=ConfigDict(extra="forbid"), **fields)


def test_the_stored_histories_hold_hand_overs_and_name_a_release_of_the_changelog_for_each() -> None:
    assert STORED, "no stored history ends in continue-as-new: the contract has no fixtures"
    for path in STORED:
        written_by = release_of(path)
        assert written_by in RELEASES, f"{label(path)}: {written_by} is not a release of CHANGELOG.md"
        marked = release(load_history(path))
        assert _number(marked) <= _number(written_by), f"{label(path)} took a patch of {marked}, after {written_by}"


def _number(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split("."))


async def test_every_stored_hand_over_has_the_run_that_continued_it_stored_beside_it() -> None:
    """Without it, what a release does with the hand-over has nothing to be compared with."""
    for path in STORED:
        handed = await read(path)
        assert handed.continued is not None, f"{path.name}: the run it continued into is not stored"
        assert handed.continued.continued_from == handed.run_id


@pytest.mark.parametrize("path", STORED, ids=[label(p) for p in STORED])
async def test_a_hand_over_of_an_earlier_release_loads_into_this_one(path: Path) -> None:
    handed = await read(path)

    ticket = TicketInput.model_validate(handed.ticket)
    state = ContinuedState.model_validate(handed.state)

    assert ticket.ticket_id == handed.ticket["ticket_id"]
    assert state.steps_taken == handed.state["steps_taken"]
    assert handed.release in RELEASES


@pytest.mark.parametrize("path", STORED, ids=[label(p) for p in STORED])
async def test_this_releases_snapshot_of_a_handed_over_state_round_trips_and_reads_without_its_newer_fields(
    path: Path,
) -> None:
    """What this release writes of a ticket an earlier release handed it, at its own next hand-over, reads back the
    same; and, its newer fields holding their defaults there, a release that knows none of them reads it too."""
    handed = await read(path)
    state = ContinuedState.model_validate(handed.state)
    written = state.model_dump(mode="json")

    assert ContinuedState.model_validate(written) == state
    assert ContinuedState.model_validate_json(state.model_dump_json()) == state
    forgetting_newer(ContinuedState).model_validate(written)


def test_a_release_that_knows_no_newer_field_refuses_one_that_holds_something() -> None:
    """The check above can fail: a newer field written (it holds something) is refused by a release without it,
    which is why ``newer`` fields are written only then."""
    state = ContinuedState.model_validate({"steps_taken": 3, "gate": {"records_before_turn": 1}})
    written = state.model_dump(mode="json")

    assert written["gate"]["records_before_turn"] == 1
    with pytest.raises(ValidationError, match="records_before_turn"):
        forgetting_newer(ContinuedState).model_validate(written)


def test_only_a_chain_recorded_on_a_server_that_suggests_continuing_early_is_compared_from_its_last_hand_over() -> None:
    assert [label(path) for path in CHAINED] == ["gate-1.x/one_wait_rule_approval_across_runs_first_run"]
    assert any(label(path) == "gate-1.x/one_wait_rule_approval_across_runs_run_2" for path in COMPARED)


@pytest.mark.slow
@pytest.mark.parametrize("path", COMPARED, ids=[label(p) for p in COMPARED])
async def test_a_hand_over_of_an_earlier_release_goes_on_to_the_same_money_approvals_and_mail(
    agent: Harness, path: Path
) -> None:
    """Taken over by this release's continued run on a real dev server, with the world the handing run left, the
    model answering as it answered and the answers the stored continued run got, the ticket tells the model the
    same, makes the same payouts and emails under the same keys, and closes with the same verdict, refunds,
    answers and policy (``tests.support.handed_over.differences`` says how)."""
    assert await differences(agent, await read(path)) == []


@pytest.mark.slow
async def test_a_hand_over_taken_over_without_the_parts_it_paid_is_told_from_the_stored_run(agent: Harness) -> None:
    """The comparison can fail, on what matters most: a release that lost the parts a run paid before it handed
    over keys the next part as the first, which the ledger refuses (the key names another refund), and the
    ticket's run goes otherwise than the stored one."""
    handed = await read(RECORDED_BY_RELEASE / "1.4.0" / "paid_then_handed_over_mid_turn_first_run.json")
    forgot = {**handed.state, "toolbox": {**handed.state["toolbox"], "payouts": {"paid": [], "parts": {}}}}

    found = await differences(agent, handed, forgot)

    assert found
    assert any("A-1001/1 was used for a refund of USD 10.00" in line for line in found), found
