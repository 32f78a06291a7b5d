"""What a run hands the run that continues its ticket, across a rolling deploy.

A worker of the release before may take the next run, and it refuses fields it does not know; a worker of this
release takes a run the release before handed over. Checked on the contract itself: a field a release adds is
written only when it holds something (``Snapshot.newer``), and the marks of the turn in progress, which 1.3.0 kept
with the replies, reach the pieces that own what they count.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from activities.contracts.fields import Snapshot
from activities.contracts.ticket import RefundRecord
from workflows.approval_gate import GateSnapshot
from workflows.continuation import ContinuedState
from workflows.payouts import PayoutsSnapshot
from workflows.toolbox import ToolboxSnapshot

PAID = {"refund_id": 1, "order_id": "A-1001", "amount_cents": 4900, "currency": "USD", "tool": "issue_refund"}


def handed_over_by_1_3_0(refunds_before: int, approvals_before: int) -> dict[str, Any]:
    """A continued run's state as a 1.3.0 worker wrote it: the turn's marks in the replies."""
    return {
        "steps_taken": 7,
        "toolbox": {"payouts": {"paid": [PAID], "parts": {"A-1001": 1}}},
        "gate": {"approvers": [], "records": [], "requests_made": 1, "unlisted": 0},
        "replies": {
            "turns": [],
            "message": "Refund order A-1005 too please",
            "first_step": 4,
            "refunds_before": refunds_before,
            "approvals_before": approvals_before,
            "pending": [],
        },
    }


@given(refunds=st.integers(0, 50), answers=st.integers(0, 50))
def test_a_run_handed_over_by_1_3_0_gives_its_turn_marks_to_their_pieces(refunds: int, answers: int) -> None:
    state = ContinuedState.model_validate(handed_over_by_1_3_0(refunds, answers))

    assert state.toolbox.payouts.paid_before_turn == refunds
    assert state.gate.records_before_turn == answers
    assert state.toolbox.payouts.paid == [RefundRecord.model_validate(PAID)]  # the rest as it was
    assert state.replies.first_step == 4
    written = state.model_dump(mode="json")
    assert "refunds_before" not in written["replies"]
    assert "approvals_before" not in written["replies"]


def test_marks_of_1_3_0_that_are_not_counts_are_refused_as_any_bad_state_is() -> None:
    with pytest.raises(ValidationError, match="paid_before_turn"):
        ContinuedState.model_validate(handed_over_by_1_3_0(-1, 0))
    with pytest.raises(ValidationError, match="records_before_turn"):
        ContinuedState.model_validate(handed_over_by_1_3_0(0, "two"))  # type: ignore[arg-type]


def test_a_snapshot_of_this_release_names_no_new_field_while_it_holds_nothing() -> None:
    """A ticket in its first turn, and one no mail started, hands over what 1.3.0 reads."""
    written = ContinuedState(steps_taken=3).model_dump(mode="json")

    assert "paid_before_turn" not in written["toolbox"]["payouts"]
    assert "records_before_turn" not in written["gate"]
    assert "thread" not in written["toolbox"]


def test_a_mark_that_holds_something_is_written_and_read_back() -> None:
    state = ContinuedState(
        steps_taken=3,
        toolbox=ToolboxSnapshot(payouts=PayoutsSnapshot(paid_before_turn=2)),
        gate=GateSnapshot(records_before_turn=1),
    )
    written = state.model_dump(mode="json")

    assert written["toolbox"]["payouts"]["paid_before_turn"] == 2
    assert written["gate"]["records_before_turn"] == 1
    assert ContinuedState.model_validate(written) == state


def test_every_field_a_snapshot_calls_newer_is_one_it_has_with_a_default() -> None:
    """A name misspelt in ``newer`` would be written always, and a release before would refuse every run."""
    for kind in (ToolboxSnapshot, PayoutsSnapshot, GateSnapshot):
        assert issubclass(kind, Snapshot)
        for name in kind.newer:
            assert name in kind.model_fields
            assert not kind.model_fields[name].is_required()


def test_a_refund_record_always_names_its_currency() -> None:
    """Every release since 1.0.0 wrote it; a record without one is not a run of a release that shipped."""
    with pytest.raises(ValidationError, match="currency"):
        RefundRecord.model_validate({k: v for k, v in PAID.items() if k != "currency"})
