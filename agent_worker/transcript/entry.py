"""A transcript's unit: an ``Entry``, one thing that happened to a ticket as a person reads it, of one ``Kind``.

The reader makes them from a run's history (``reader``); the terminal prints them (``terminal``), the approval
inbox renders them as HTML and in sentences (``sentences``): all from these same values, so no two of them can tell
a ticket differently.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from activities.tools import PayoutKind

CLOSED = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED: "completed",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED: "failed",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED: "terminated",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT: "timed out",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED: "canceled",
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW: "continued as new",
}
"""The events that end a run, and how each ending is told."""

Kind = Literal[
    "customer",  # the customer's question, or a reply
    "step",  # the workflow asks the model
    "reasoning",  # what the model said beside the tools it asked for: why it asks
    "asks",  # a tool the model asked for
    "answers",  # the model's answer to the customer
    "result",  # what an activity returned
    "failed",  # an activity attempt failed or timed out
    "approval",  # a payout waits for a person
    "open",  # the ticket waits for the customer's reply
    "waiting",  # the ticket waits for news about an order
    "signal",  # a signal the run took
    "answer",  # an answer the approval inbox vouched for (the ``approve`` update)
    "update",  # another update the run took
    "timer",  # a wait ran out
    "audit",  # a line of the audit trail
    "approvers",  # who may approve
    "closed",  # the run ended
]
SAID = {"reasoning": "the model says: ", "answers": "the model answers: "}
"""What each kind of the model's words is prefixed with, in the terminal and on a ticket's page."""


@dataclass(frozen=True)
class Entry:
    """One thing that happened to a ticket, as a person reads it."""

    kind: Kind
    text: str
    event_id: int
    at: datetime
    name: str = ""
    """The activity, signal or update it is about, if any."""
    detail: Any = None
    """The thing itself, decoded: the activity's result, the tool call (``{"name", "input", "call", "why"}``), the
    model's words, the ticket's input, the run's result."""
    payout: PayoutKind | None = None
    """The kind of payout it is about, as the reader's tools declare it: a paying tool asked for or its result, a
    payout waiting for a person, an answer or a silence about it. None: no payout, or one no tool here declares."""


def entry(event: HistoryEvent, kind: Kind, text: str, name: str = "", detail: Any = None) -> Entry:
    """The entry ``event`` gives: its id and time, with what it is told as."""
    return Entry(kind, text, event.event_id, event.event_time.ToDatetime(tzinfo=UTC), name, detail)
