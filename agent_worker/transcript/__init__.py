"""A ticket's transcript, read from its Temporal history: the one reading that the demo narrates, ``show`` prints
and the approval inbox shows.

Events become ``Entry`` values (``entry``): what happened, in words, with the event it came from and, where a page
has more to show than a line, the thing itself (the order as looked up, the tool call and the model's words around
it, the outcome). ``reader`` reads them from the history as the server recorded it, so it works with no worker
running; ``terminal`` prints them as lines (the demo, ``show``); ``sentences`` tells them in words for people (a
ticket's page, ``approve``). The inbox renders the same entries as the terminal prints, so the two cannot tell a
ticket differently. The package exports the reading and the sentences; what prints for a terminal is imported
from ``terminal`` by the commands that print, so the inbox never loads it.
"""

from agent_worker.transcript.entry import CLOSED, SAID, Entry, Kind
from agent_worker.transcript.reader import (
    Reader,
    currency_of,
    entries,
    first,
    last_waiting,
    orders_of,
    payout_waited,
)
from agent_worker.transcript.sentences import asked_plainly, decided_plainly, plainly, unanswered_plainly

__all__ = [
    "CLOSED",
    "SAID",
    "Entry",
    "Kind",
    "Reader",
    "asked_plainly",
    "currency_of",
    "decided_plainly",
    "entries",
    "first",
    "last_waiting",
    "orders_of",
    "payout_waited",
    "plainly",
    "unanswered_plainly",
]
