"""The contract between releases, on what runs of earlier releases actually handed over: every continue-as-new
input stored in ``replay_histories/`` loads into this release's ``TicketInput`` and ``ContinuedState``, round-trips,
is written back so that a release which does not know this one's newer fields reads it, and, taken over by a
continued run on a real dev server, goes on to the same payouts, approvals and emails as the run that continued
it when it was recorded (``tests.support.handed_over`` says how, and ``docs/changing-workflow-code.md`` why).
"""

from __future__ import annotations

import re
import types
import uuid
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from activities.contracts.fields import Snapshot
from activities.contracts.ticket import TicketInput
from agent_worker.cli.replay import load_history
from tests.support.handed_over import (
    HANDS_OVER,
    HistoryModel,
    Seeding,
    completed,
    drive,
    effects,
    fetch,
    handing_over,
    label,
    missing_content,
    read,
    release,
    release_of,
    sent_to,
    shifted,
    told,
    wait_closed,
)
from tests.support.harness import Harness
from workflows.continuation import ContinuedState

STORED = handing_over()
RELEASES = re.findall(r"^## (\d+\.\d+\.\d+)", Path("CHANGELOG.md").read_text(), flags=re.MULTILINE)


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


@pytest.mark.slow
@pytest.mark.parametrize("path", STORED, ids=[label(p) for p in STORED])
async def test_a_hand_over_of_an_earlier_release_goes_on_to_the_same_money_approvals_and_mail(
    agent: Harness, path: Path
) -> None:
    """The stored arguments are handed to ``SupportAgent`` by a run that continues as new into it at once
    (``HandsOverAsStored``), so the run that takes them is a continued run as the server knows one; the business is
    what the handing run left (its audit entries, payouts, emails, stored conversation and archive, written again by
    the product's activities from the inputs its history holds), every instant of the hand-over is moved by as long
    as has passed since it was made (deadlines as far ahead as they were), the model answers each step as the
    stored runs heard it, and each answer the stored continued run was sent is sent once the run waits as that one
    did. Then this release's run must make the same payouts and emails, with the same idempotency keys, and close
    with the same verdict, refunds and answers (their moment aside) as the stored run."""
    handed = await read(path)
    assert handed.continued is not None
    model = await HistoryModel.of([handed.first, handed.continued])
    moved = datetime.now(UTC) - handed.handed_at
    arguments = [shifted(handed.ticket, moved), shifted(handed.state, moved)]
    workflow_id = f"handed-over-{uuid.uuid4()}"

    handing = await agent.client.start_workflow(
        "HandsOverAsStored", arguments, id=workflow_id, task_queue=agent.task_queue
    )
    handing_run = handing.result_run_id
    assert handing_run is not None
    names = {handed.first.workflow_id: workflow_id, handed.run_id: handing_run}
    assert await Seeding(agent, model, names).rebuild(handed.first) == []
    assert missing_content(agent, handed.state) == []
    model.asked.clear()
    answers = await sent_to(handed.continued)

    async with agent.worker(model, plugins=[HANDS_OVER]):
        await drive(agent.client, workflow_id, answers)
        continued_run = await wait_closed(agent.client, workflow_id, handing_run)

    ours = await fetch(agent.client, workflow_id, continued_run)
    assert ours.continued_from == handing_run
    assert await told(ours) == await told(handed.continued)
    theirs_did, ours_did = await effects(handed.continued), await effects(ours)
    assert ours_did == theirs_did
    steps = sorted(step for step in model.decisions if step > handed.state["steps_taken"])
    assert model.asked == steps
    before = [
        (request["order_id"], request["amount_cents"])
        for (request,), _ in await completed(handed.first, "issue_refund")
    ]
    paid = [(refund.order_id, refund.amount_cents) for refund in agent.store.payments.refunds()]
    assert paid == before + [
        (p["order_id"], p["amount_cents"]) for p in ours_did.payouts if p["tool"] == "issue_refund"
    ]
