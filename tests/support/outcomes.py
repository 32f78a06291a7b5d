"""A ticket's whole outcome, for a test to read: what the runs before a continue-as-new archived, put back."""

from __future__ import annotations

from activities.content_store import ContentStore, load_records
from activities.contracts.ticket import Outcome


def complete(store: ContentStore, outcome: Outcome) -> Outcome:
    """The outcome with the tool calls, per-call usage and turns of the whole ticket, not only those it carried.
    Its size then grows with the ticket's: it is for reading in a test, not for a payload."""
    if outcome.archive_ref is None:
        return outcome
    archived = load_records(store, outcome.archive_ref)
    return outcome.model_copy(
        update={
            "tool_calls": [*archived.tool_calls, *outcome.tool_calls],
            "usage": outcome.usage.model_copy(update={"steps": [*archived.usage, *outcome.usage.steps]}),
            "turns": [*archived.turns, *outcome.turns],
            "archive_ref": None,
        }
    )
