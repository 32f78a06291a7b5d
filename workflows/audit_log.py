"""The ticket's audit trail, as the workflow writes it: every entry exactly once, in order, across the ticket's runs.

Each entry is an activity (``audit``) that Temporal may retry, and a run may be replayed or continued as new,
so an entry carries an idempotency key and the store writes a key once. The key numbers the entry across the
ticket's runs (the count is handed to the run that continues the ticket) and names the run that writes it: a run
a reset started numbers its entries from the reset point again, and they must be new entries, not taken for the
failed run's.

Two entries have no activity of their own: the money policy's is written by
the read that finds it (``RulesInForce``), and the closing line by a local activity in the workflow task that
closes the run (``close``). A local activity does its work before its workflow task is committed, and a task the
server refuses is taken again, so each of the two is written so that a second attempt cannot leave a wrong word:
the policy's key names the policy found, and the closing line replaces the one before it under its key.

What arrived and could not be taken (a malformed reply or event signal) is noted by the piece that refused it
and written here before the run goes on: one entry each up to ``NOTES_KEPT``, and the rest counted in one, so a
flood of bad signals costs the history one audit activity, not one per signal.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic import NonNegativeInt

    from activities.audit_trail import AuditActivities
    from activities.contracts.approvals import AnsweredRequest
    from activities.contracts.fields import Contract
    from activities.contracts.limits import NOTE_BYTES, NOTES_KEPT, cut
    from activities.contracts.world import AuditEntry, AuditQuery
    from workflows import timeouts


class Audit(Protocol):
    """Write an entry to the ticket's audit trail, with the answer it tells of as a row for auditors, if any."""

    def __call__(self, entry: str, answer: AnsweredRequest | None = None, /) -> Awaitable[None]: ...


Audited = Callable[[str], Awaitable[bool]]
"""Whether the ticket's audit trail holds an entry the run this one continues wrote."""


class Notes:
    """What a piece was sent and could not take, and why, until the audit trail writes it: the first
    ``NOTES_KEPT`` since the last writing one by one, the rest counted, with the last of them. Each note is cut
    to ``NOTE_BYTES``."""

    def __init__(self, what: str) -> None:
        self._what = what
        """What the notes are about, plural ("order events"), for the entry that counts the rest."""
        self._kept: list[str] = []
        self._more = 0
        self._last = ""

    def add(self, note: str) -> None:
        if len(self._kept) >= NOTES_KEPT:
            self._more, self._last = self._more + 1, cut(note, NOTE_BYTES)
            return
        self._kept.append(cut(note, NOTE_BYTES))

    def take(self) -> str | None:
        """The next entry to write, oldest first, and then the count of the rest; None when there is none."""
        if self._kept:
            return self._kept.pop(0)
        if self._more:
            entry = f"{self._more} more {self._what} were not taken; the last: {self._last}"
            self._more, self._last = 0, ""
            return entry
        return None

    def __len__(self) -> int:
        return len(self._kept) + self._more

    def take_note(self) -> str | None:
        """``take``, as a piece that keeps notes (``Noted``) gives them: a signal handler with nothing else to keep
        hands its ``Notes`` to the audit log itself."""
        return self.take()


class Noted(Protocol):
    """A piece that keeps notes for the audit trail: what it was sent and could not take, and why."""

    def take_note(self) -> str | None:
        """The next note to write, oldest first; None when there is none."""
        ...


class AuditSnapshot(Contract):
    """What a run hands the next of the audit trail: how many entries the ticket's runs have written."""

    written: NonNegativeInt = 0


class AuditLog:
    """Writes the ticket's audit entries, numbered across its runs, and the notes the pieces given to it keep."""

    def __init__(self, ticket_id: str, notes_from: Sequence[Noted]) -> None:
        self._ticket_id = ticket_id
        self._sources = notes_from
        self._written = 0
        """Entries written by the ticket's runs so far: the number of the last one."""

    @property
    def ticket_id(self) -> str:
        return self._ticket_id

    def key(self, name: str) -> str:
        """The idempotency key of this run's entry ``name``: ``audit:<workflow id>/<run id>/<name>``."""
        info = workflow.info()
        return f"audit:{info.workflow_id}/{info.run_id}/{name}"

    def snapshot(self) -> AuditSnapshot:
        return AuditSnapshot(written=self._written)

    def restore(self, snapshot: AuditSnapshot) -> None:
        self._written = snapshot.written

    async def write(self, entry: str, answer: AnsweredRequest | None = None, /) -> None:
        """Write an entry once, however often its activity is retried, and the answer it tells of with it."""
        self._written += 1
        key = self.key(str(self._written))
        await workflow.execute_activity_method(
            AuditActivities.audit,
            AuditEntry(ticket_id=self._ticket_id, entry=entry, idempotency_key=key, answer=answer),
            **timeouts.attempt("audit"),
        )

    async def close(self, entry: str) -> None:
        """Write the run's closing line: by a local activity in the task that closes the run, replacing any line
        an earlier attempt at that task wrote."""
        closing = AuditEntry(ticket_id=self._ticket_id, entry=entry, idempotency_key=self.key("closing"))
        await workflow.execute_local_activity_method(AuditActivities.closing, closing, **timeouts.LOCAL_UNTIL_DONE)

    async def holds(self, entry: str) -> bool:
        """Whether the run this one continues (or the ticket's first run) wrote ``entry``: the trail is what a run
        checks what it was handed against, since only a run of this workflow can write it."""
        info = workflow.info()
        runs = sorted({run for run in (info.continued_run_id, info.first_execution_run_id) if run})
        query = AuditQuery(
            ticket_id=self._ticket_id, entry=entry, key_prefixes=[f"audit:{info.workflow_id}/{run}/" for run in runs]
        )
        return await workflow.execute_activity_method(AuditActivities.audited, query, **timeouts.attempt("audited"))

    async def write_notes(self) -> None:
        """Tell the audit trail what arrived and could not be taken (a malformed reply or event signal)."""
        for source in self._sources:
            while (note := source.take_note()) is not None:  # more may come meanwhile: all are written
                await self.write(note)
