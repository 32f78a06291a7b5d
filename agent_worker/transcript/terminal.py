"""A transcript in the terminal: the demo narrates a ticket as it runs, ``show`` prints one, from the same entries
the approval inbox shows."""

from __future__ import annotations

import textwrap
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio.client import Client, WorkflowHandle

from agent_worker.transcript.entry import SAID, Entry, Kind
from agent_worker.transcript.reader import entries

INDENT = "      "
TAGGED: set[Kind] = {"step", "approval", "open", "waiting", "closed"}
"""Kinds the terminal prints as ``[kind]`` headings rather than indented details."""
SHORT = 200
"""The terminal shortens what the model says to this many characters; the inbox shows it whole."""


def lines(entry: Entry) -> list[str]:
    """How the terminal prints an entry (the demo, ``show``)."""
    if entry.kind == "customer":
        return ["", entry.text]
    if entry.kind in TAGGED:
        heading = f"  [{entry.kind}] {entry.text}"
        return ["", heading] if entry.kind in {"step", "closed"} else [heading]
    if entry.kind in SAID:
        return [f"{INDENT}{SAID[entry.kind]}{textwrap.shorten(str(entry.detail), SHORT)}"]
    return [f"{INDENT}{entry.text}"]


def say(*printed: str) -> None:
    for line in printed:
        print(line, flush=True)


async def narrate(
    client: Client,
    handle: WorkflowHandle[Any, Any],
    *,
    follow: bool,
    on_waiting: Callable[[], Awaitable[None]] | None = None,
    on_answered: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Print the run's entries; with ``follow``, as they happen until the run closes. ``on_waiting`` is called when
    a refund starts waiting for a person, ``on_answered`` when the ticket starts waiting for the customer."""
    async for entry in entries(client, handle, follow=follow):
        say(*lines(entry))
        if entry.kind == "approval" and on_waiting is not None:
            await on_waiting()
        elif entry.kind == "open" and on_answered is not None:
            await on_answered()
