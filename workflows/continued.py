"""What one run of a ticket hands the run that continues it: each piece's snapshot of its own state.

Only a run of this workflow writes it, and only the next run of the same ticket reads it, as its second argument
(``workflows.intake`` refuses one from anyone else). Each piece takes its snapshot and restores from it; the
workflow composes them and adds what is the loop's own: the step it got to and what the model has not been sent.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic import NonNegativeInt

    from activities.contracts.conversation import Message
    from activities.contracts.fields import Contract

from workflows.approval_gate import GateSnapshot
from workflows.audit_log import AuditSnapshot
from workflows.thinking import ModelSnapshot
from workflows.toolbox import ToolboxSnapshot
from workflows.waits import EventsSnapshot, RepliesSnapshot


class ContinuedState(Contract):
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
