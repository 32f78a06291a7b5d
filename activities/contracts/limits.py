"""Every budget a ticket keeps within, in one place, each said in terms of the Temporal limit it protects.

Temporal refuses, and does not store, a payload above 2 MiB (``TMPRL1103 PayloadLimitViolation``, "Blob data
size exceeds limit"), a gRPC message above 4 MiB, and a workflow id above 1,000 bytes, and ends a run whose history
passes 51,200 events or 50 MiB. A refused payload is not an error a run can catch: the workflow task that made the
command fails, and so does every retry of it, so the ticket stays RUNNING and answers nobody. So no total that
enters a payload may be left to grow with what callers, customers, approvers, relays or the model send: each is
bounded here, by its encoded size and not only per item, and what goes past a bound is refused up front (the
reply's validator says why), kept out of band in the content store (the outcome carries the archive's key), or
counted instead of kept item by item. Every field a caller, an approver or a relay fills in has a bound here, and
one type in ``activities.contracts.fields`` that states it; a field is refused past it where it comes in, since
a run copies what it takes into what it records, queries answer and the next run carries.

The payloads a ticket makes are, at their largest: ``think``'s input (the replies a turn reads, at once), the
run's result and the ``turns`` query (the turns, tool calls and answers kept inline), and what a run hands the
run that continues it. That last is the largest, since it carries the ticket as it started besides everything
the run has kept (its tool calls and per-call usage go to the content store first). Its budgets add up to under
a megabyte, half the payload limit, which leaves room for encryption and what a later field adds, and keeps every
gRPC message far below 4 MiB:

    the ticket as it started          TICKET_INPUT_BYTES                136 KiB
    the turns kept inline             INLINE_TURNS_BYTES                384 KiB
    the message the turn answers      PENDING_REPLY_BYTES               128 KiB
    the replies no turn has read      PENDING_REPLY_BYTES               128 KiB
    the approvers, once more          APPROVERS_BYTES                     8 KiB
    the events kept for waits         EVENTS_KEPT x EVENT_BYTES         215 KiB
    the mail the next email answers   THREAD_BYTES                        3 KiB
                                                                      ---------
                                                                       1002 KiB of 1,024

The approvers are in it twice: the ticket's options, and the request that waits (never more of them than the
ticket or the policy names). The approval gate carries no copy of its own (since 1.1.0).
Outside the sum, because the workflow bounds them by count and not by bytes: the approval records the gate
carries (``REJECTED_ANSWERS_KEPT`` rejected answers, each reason at most ``RECORD_REASON_BYTES``, and one record
per decided request), and the step in progress (the model's calls and their results' previews, bounded by the
model's output and ``inline_result_max_bytes``). ``tests/test_bounds.py`` checks the sum, and that the largest
ticket the fields allow fits ``TICKET_INPUT_BYTES``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final

from pydantic_core import to_json

PAYLOAD_LIMIT_BYTES: Final = 2 * 1024 * 1024
"""Temporal's limit on one payload (an activity's input or result, a run's input or result, a query's answer)."""
HISTORY_EVENTS_LIMIT: Final = 51_200
"""Temporal ends a run whose history reaches this many events (and one of 50 MiB): terminated, not failed."""

TEXT_CHARS: Final = 20_000
"""The longest question or reply a customer may send, in characters (about 5,000 tokens): a long email. At up to
six bytes a character in JSON, 120 KB at worst."""

TICKET_ID_CHARS: Final = 200
"""A ticket's id, in characters. The ticket runs as the workflow ``ticket-<id>``, and Temporal takes a workflow id
of at most 1,000 bytes (``limit.maxIDLength``): 200 characters of up to four bytes each and the prefix are 807.
The id is also in every idempotency key the ticket makes (``refund:ticket:<id>/<order>/<part>``, which Stripe
takes up to 255 characters, longer ones going as their digest), in each audit entry, and in the outcome."""
REQUEST_ID_CHARS: Final = 40
"""An approval request's id as an answer names it (the workflow makes them: ``R1``, ``R2``, ...)."""
ORDER_ID_CHARS: Final = 32
"""An order id as a relay, the model or a customer's words give it: a letter, a dash and up to thirty digits."""
EMAIL_CHARS: Final = 254
"""An email address: the most an SMTP path carries (RFC 5321)."""
NAME_CHARS: Final = 200
"""A person's name as an approver: in a ticket's ``options.approvers``, an answer's ``approver``, a role's
``people`` and ``AGENT_APPROVERS``. Room for a full name or a sign-on's address."""
LABEL_CHARS: Final = 100
"""A short name for a kind of thing: a role's (``lead``), an order event's (``delivered``)."""
REASON_CHARS: Final = 500
"""Why a person answered as they did (a decline's reason): the audit trail and the model read it."""
DETAIL_CHARS: Final = 2_000
"""What a relay says of an order event besides its kind (``left at the front door``)."""
MESSAGE_ID_CHARS: Final = 250
"""A ``Message-ID`` the desk answers under (``<...@...>``, printable ASCII): real ones are under a hundred. It comes
from a stranger's mail, and goes into the headers of the desk's answer; a longer one is not answered under."""
REFERENCES_KEPT: Final = 10
"""The ``Message-ID`` s of a conversation a message or the desk's answer names (``References``): past it, the
first and the newest, as mail programs trim the header. With the message's own id, at most ``THREAD_BYTES``."""
THREAD_BYTES: Final = 3 * 1024
"""The mail the desk's next email answers, JSON-encoded (``MailThread``): its id and ``REFERENCES_KEPT`` of the
chain, each at most ``MESSAGE_ID_CHARS``, in printable ASCII (2,783 bytes at most). A run hands it to the next."""

APPROVERS_LISTED: Final = 100
"""The people one ticket's ``options.approvers`` may name."""
PEOPLE_PER_ROLE: Final = 1_000
"""The people one role of the money policy may name."""
ROLES: Final = 100
"""The roles the money policy may name."""
APPROVERS_BYTES: Final = 8 * 1024
"""Any list of approvers, JSON-encoded: a ticket's ``options.approvers``, the people the policy's roles name
together, ``AGENT_APPROVERS``. The request that waits carries them (as its memo, the ``awaiting_approval_of``
answer, and in what a run hands the next), and the approval gate keeps a copy: at most 8 KiB each, about 500
names of a dozen characters, or 40 of the longest. Past it the ticket is refused, and a worker whose policy or
settings name more does not start."""
EVENT_BYTES: Final = 2_200
"""One order event as a relay sends it, JSON-encoded: the longest kind, detail and order id in plain characters
(2,170 bytes), where a detail of control characters, six bytes each in JSON, would be 12 KB. ``EVENTS_KEPT`` of
them wait for a wait to take them, and a run hands them all to the next."""
TICKET_INPUT_BYTES: Final = 136 * 1024
"""The largest ticket a caller can start, JSON-encoded, with every field at its bound (a question of control
characters is 120 KB of it): it is the run's input, and the first argument of every run that continues it."""

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

WAIT_EVENTS_BEFORE_CONTINUING: Final = 8_000
"""A run waiting (for a person, a reply, an event) continues as new when the server suggests it, or at the latest
when its history holds this many events: a server whose suggestion is set high or off cannot leave a flooded wait to
be terminated at 51,200 events, nor to meet the server's cap of 10,000 signals a run (its default,
``history.maximumSignalsPerExecution``), past which every signal is refused, an approval's included. Each signal is
at least one event, so a run hands over before that many have come."""
SETTLEMENTS_SHOWN: Final = 10
"""The settlements of approved requests a ticket's memo keeps (``SETTLED_MEMO``), the newest: one request waits at a
time, so these are the latest a person answered, and the memo stays small however long the ticket runs."""
SETTLEMENT_REASON_CHARS: Final = 500
"""A settlement's reason (the booking's words for a refusal), cut to this many characters in the memo."""
EVENTS_KEPT: Final = 100
"""Events about orders kept for waits to come: past this, the oldest go (each is at most ``EVENT_BYTES``)."""


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


HEARTBEAT_TIMEOUT = timedelta(seconds=5)
"""The heartbeat timeout of every activity that heartbeats: how long a killed worker's attempt goes unnoticed. The
workflow sets it on the activities it schedules (``workflows/timeouts.py``), and the activities beat a third of it
apart (``activities/heartbeat.py``)."""
