"""Every budget a ticket keeps within, in one place, each said in terms of the Temporal limit it protects.

Temporal refuses, and does not store, a payload above 2 MiB (``TMPRL1103 PayloadLimitViolation``, "Blob data
size exceeds limit"), a gRPC message above 4 MiB, and ends a run whose history passes 51,200 events or 50 MiB.
A refused payload is not an error a run can catch: the workflow task that made the command fails, and so does
every retry of it, so the ticket stays RUNNING and answers nobody. So no total that enters a payload may be left
to grow with what callers, customers, relays or the model send: each is bounded here, by its encoded size and
not only per item, and what goes past a bound is refused up front (the reply's validator says why), kept out of
band in the content store (the outcome carries the archive's key), or counted instead of kept item by item.

The payloads a ticket makes are, at their largest: ``think``'s input (the replies a turn reads, at once), the
run's result and the ``turns`` query (the turns, tool calls and answers kept inline), and what a run hands the
run that continues it (all of those at once). The budgets below add up, for the largest of them, to about a
megabyte: half the payload limit, which leaves room for encryption, JSON's escapes of control characters (six
bytes for one character) and what a later field adds, and keeps every gRPC message far below 4 MiB.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic_core import to_json

PAYLOAD_LIMIT_BYTES: Final = 2 * 1024 * 1024
"""Temporal's limit on one payload (an activity's input or result, a run's input or result, a query's answer)."""
HISTORY_EVENTS_LIMIT: Final = 51_200
"""Temporal ends a run whose history reaches this many events (and one of 50 MiB): terminated, not failed."""

TEXT_CHARS: Final = 20_000
"""The longest question or reply a customer may send, in characters (about 5,000 tokens): a long email. At up to
six bytes a character in JSON, 120 KB at worst."""

PENDING_REPLIES: Final = 100
"""Replies a turn may read together (taken while the agent worked, or waited for a person). Past it, the
``customer_message`` update is refused until the agent has answered: a chat-style customer's hundred short lines
fit, and a flood does not grow the history or ``think``'s input without bound."""
PENDING_REPLY_BYTES: Final = 128 * 1024
"""The replies a turn reads together, JSON-encoded: they reach ``think`` as one input, and are carried whole if the
run continues as new while they wait. Six replies of the longest kind, or a hundred of a thousand characters."""

ANSWER_BYTES: Final = 32 * 1024
"""An answer of the model's as the outcome and the ``turns`` query report it (each turn's, and the last): past
this, a head of it and its size. The whole answer stays in the conversation, in the content store. A real
answer is a few kilobytes; this only stops a model that writes a megabyte from wedging the ticket's close."""
TOOL_INPUT_BYTES: Final = 8 * 1024
"""A tool call's input as the outcome records it (the model writes it, and a call to no tool is recorded too):
past this, a head of it and its size."""
NOTE_BYTES: Final = 2_000
"""An entry about something a ticket could not take (a malformed reply or event), as the audit trail reads it: a
validation error about a payload with ten thousand unknown fields names each of them."""
RECORD_REASON_BYTES: Final = 4 * 1024
"""The reason an approval record gives (``fields.Note``), JSON-encoded: a rejection's may quote what its sender
sent, or list every approver. More than the longest decline's reason (``REASON_CHARS`` of six bytes, 3,002), which
is never cut: the next run looks the decision's audit entry up by its words."""

INLINE_TURNS_BYTES: Final = 384 * 1024
"""The turns the ``turns`` query answers and the outcome carries, JSON-encoded: past this, the oldest go to the
content store (``Outcome.archive_ref``) and only the newest are carried. At least the newest turn always fits (a
turn is at most ``PENDING_REPLY_BYTES`` of message and ``ANSWER_BYTES`` of answer)."""
INLINE_RECORDS_BYTES: Final = 384 * 1024
"""The tool calls and per-call usage a run carries, JSON-encoded: past this they go to the content store, as they
do when the run continues as new, and the outcome carries the archive's key."""
NOTES_KEPT: Final = 20
"""Things a ticket could not take (a malformed reply, event or approval), written to the audit trail one entry
each before the run goes on: past this, the rest are counted in one entry. Each entry is an activity, so a
flood of bad signals would otherwise cost three history events apiece, on top of the signal's own."""
REJECTED_ANSWERS_KEPT: Final = 50
"""Rejected answers to approval requests the outcome lists, across the ticket: past this, each still goes to the
audit trail, and the outcome counts it (``Outcome.unlisted_answers``). Answers that decide are always listed."""

WAIT_EVENTS_BEFORE_CONTINUING: Final = 10_240
"""A run waiting (for a person, a reply, an event) continues as new when the server suggests it, or at the latest
when its history holds this many events, a fifth of the limit: a server whose suggestion is set high or off
cannot leave a flooded wait to be terminated at 51,200."""
EVENTS_KEPT: Final = 100
"""Events about orders kept for waits to come: past this, the oldest go (each is at most 2 KB of detail)."""


def encoded_bytes(value: Any) -> int:
    """How many bytes ``value`` takes as a JSON payload (pydantic models, lists and strings alike)."""
    return len(to_json(value))


def cut(text: str, limit_bytes: int) -> str:
    """``text`` if it fits ``limit_bytes`` encoded, else a head of it that does, marked with the whole's size."""
    size = encoded_bytes(text)
    if size <= limit_bytes:
        return text
    head = text[: max(limit_bytes // 8, 1)]  # JSON spends at most six bytes on a character; keep a margin
    return f"{head}… [cut here: {size} bytes in all]"
