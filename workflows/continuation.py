"""What a run of a ticket hands the run that continues it: ``ContinuedState``, composed of the snapshots each piece
takes of its own state, so that what one run hands the next does not grow with the ticket.

Only a run of this workflow writes that state, and only the next run of the same ticket reads it, as its second
argument (``workflows.intake`` refuses one from anyone else). It imports every piece, for their snapshots; the pieces
hand a run over through ``workflows.handing_over``, a leaf that imports none of them, so imports point one way.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic import NonNegativeInt, model_validator

    from activities.contracts.conversation import Message
    from activities.contracts.fields import Snapshot

from workflows.approval_gate import GateSnapshot
from workflows.audit_log import AuditSnapshot
from workflows.thinking import ModelSnapshot
from workflows.toolbox import ToolboxSnapshot
from workflows.waits import EventsSnapshot, RepliesSnapshot


class ContinuedState(Snapshot):
    """Everything a run hands to the run that continues it."""

    steps_taken: NonNegativeInt
    pending: list[Message] = []
    """Turns not yet sent to the model (the results of the last step's tool calls)."""
    archive_ref: str | None = None
    """The tool calls, per-call usage and turns of the runs before, in the content store: what a run carries does
    not grow with the ticket."""
    audit: AuditSnapshot = AuditSnapshot()
    model: ModelSnapshot = ModelSnapshot()
    gate: GateSnapshot = GateSnapshot()
    toolbox: ToolboxSnapshot = ToolboxSnapshot()
    replies: RepliesSnapshot = RepliesSnapshot()
    events: EventsSnapshot = EventsSnapshot()
    moving: bool = False
    """The run before was told that its deployment routes the ticket to another build, and handed over mid-turn, so
    this run stayed on its build to finish the turn: it moves at its next wait (``Continuation.retargeted``). The
    server tells a run only of a target that changed after the run began, so without this mark the ticket would
    stay on the old build."""

    newer = frozenset({"moving"})  # 2.0.0

    @model_validator(mode="before")
    @classmethod
    def _turn_marks_where_they_belong(cls, carried: Any) -> Any:
        """Runs before 1.4.0 handed the marks of the turn in progress over with the replies (``refunds_before``,
        ``approvals_before``); the payouts and the gate, which own what they count, take them over here."""
        if not isinstance(carried, dict) or not isinstance(replies := carried.get("replies"), dict):
            return carried
        if "refunds_before" not in replies and "approvals_before" not in replies:
            return carried
        replies = dict(replies)
        paid, answered = replies.pop("refunds_before", 0), replies.pop("approvals_before", 0)
        toolbox, gate = dict(carried.get("toolbox") or {}), dict(carried.get("gate") or {})
        toolbox["payouts"] = {**(toolbox.get("payouts") or {}), "paid_before_turn": paid}
        gate["records_before_turn"] = answered
        return {**carried, "replies": replies, "toolbox": toolbox, "gate": gate}
