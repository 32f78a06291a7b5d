"""The archive of a ticket's records that outgrew what a run carries: what the workflow hands the content store
(``archive_records``), and what ``content_store.complete`` reads back to put a ticket's whole record together."""

from __future__ import annotations

from activities.contracts.conversation import StepUsage
from activities.contracts.fields import Contract
from activities.contracts.ticket import ToolCallRecord, Turn


class RecordsArchive(Contract):
    """One run's tool calls and per-call usage, as it hands them to the content store when the ticket
    continues as new, after those of the runs before it (``previous``): a chain, one node per run."""

    previous: str | None
    tool_calls: list[ToolCallRecord] = []
    usage: list[StepUsage] = []
    turns: list[Turn] = []
    """Turns that outgrew what the outcome and the ``turns`` query carry (``INLINE_TURNS_BYTES``)."""
