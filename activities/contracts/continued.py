"""What one run of a ticket hands the run that continues it (``ContinuedState``), and the archive of earlier
runs' records. Read only by the workflow, across a continue-as-new (and the archive by ``content_store.complete``)."""

from __future__ import annotations

from datetime import datetime

from pydantic import NonNegativeInt

from activities.contracts.approvals import ApprovalRecord, ApprovalRequest
from activities.contracts.conversation import Message, StepUsage, ToolResultBlock, ToolUseBlock, UsageReport
from activities.contracts.fields import Contract
from activities.contracts.ticket import OrderEvent, RefundRecord, ToolCallRecord, Turn


class EventWait(Contract):
    """A wait for news about an order, as a run hands it on: about which order, until when (workflow time)."""

    order_id: str
    until: datetime


class ContinuedState(Contract):
    """Everything a run hands to the run that continues it: the conversation by reference, the step it got
    to, a step cut short by the continuation (the tool calls still to run and the results of those that ran),
    an approval being waited for, and everything the outcome reports."""

    steps_taken: NonNegativeInt
    conversation_ref: str | None
    pending: list[Message] = []
    """Turns not yet sent to the model (the results of the last step's tool calls)."""
    calls: list[ToolUseBlock] = []
    """The tool calls of the step cut short, all of them, in order."""
    results: list[ToolResultBlock] = []
    """Results of the first of ``calls``, those that ran before the continuation."""
    approvers: list[str] = []
    request: ApprovalRequest | None = None
    """The request waiting when the run continued; it waits on in the next run, until the same deadline."""
    decided: ApprovalRecord | None = None
    """The answer that decided ``request`` before the run could act on it: checked again by the next run."""
    requests_made: NonNegativeInt = 0
    refund_parts: dict[str, NonNegativeInt] = {}
    """Per order, the refund parts whose outcome is known: the next part's key counts on from here."""
    model_calls: NonNegativeInt = 0
    usage: UsageReport = UsageReport()
    tool_calls: list[ToolCallRecord] = []
    refunds: list[RefundRecord] = []
    approvals: list[ApprovalRecord] = []
    audits: NonNegativeInt = 0
    turns: list[Turn] = []
    turn_message: str = ""
    """What the customer wrote that the turn in progress answers."""
    turn_first_step: NonNegativeInt = 0
    """The first step of the turn in progress: its steps are counted against ``max_steps`` from there."""
    turn_refunds_before: NonNegativeInt = 0
    turn_approvals_before: NonNegativeInt = 0
    """Refunds and approval records before the turn in progress: whether it ends declined is judged by its own."""
    replies: list[str] = []
    """Replies taken that no turn has read yet."""
    reply_until: datetime | None = None
    """Set when the run continued while the ticket waited for a reply: the next run waits on until then."""
    events: list[OrderEvent] = []
    """Events received that no wait has taken yet."""
    event_wait: EventWait | None = None
    """Set when the run continued while a tool call waited for an event: the next run waits on until then."""
    turns_archived: NonNegativeInt = 0
    """Turns that went to the content store (``archive_ref``), before ``turns``."""
    unlisted_answers: NonNegativeInt = 0
    """Rejected answers to approval requests audited but not listed in ``approvals`` (past their budget)."""
    archive_ref: str | None = None
    """The tool calls and per-call usage of the runs before, in the content store: a run hands its own there
    as it continues, so what a run carries does not grow with the ticket."""


class RecordsArchive(Contract):
    """One run's tool calls and per-call usage, as it hands them to the content store when the ticket
    continues as new, after those of the runs before it (``previous``): a chain, one node per run."""

    previous: str | None
    tool_calls: list[ToolCallRecord] = []
    usage: list[StepUsage] = []
    turns: list[Turn] = []
    """Turns that outgrew what the outcome and the ``turns`` query carry (``INLINE_TURNS_BYTES``)."""
