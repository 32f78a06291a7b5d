"""The audit trail's activities: not tools the model can call, but the workflow's record of what it decided,
written here because a write in workflow code would run again on every replay."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity

from activities.business.audit import AuditTrail
from activities.calls import call
from activities.contracts.world import AuditEntry, AuditQuery


class AuditActivities:
    """Writing the trail once per entry, and reading whether it holds one."""

    def __init__(self, trail: AuditTrail) -> None:
        self.trail = trail

    def all(self) -> list[Callable[..., Any]]:
        return [self.audit, self.audited, self.closing]

    @activity.defn(name="audit")
    async def audit(self, entry: AuditEntry) -> None:
        """Write an entry of the ticket's trail, once per its key however often the activity is retried."""
        await call(lambda: self.trail.write(entry))

    @activity.defn(name="closing")
    async def closing(self, entry: AuditEntry) -> str:
        """Write the run's closing line, as a local activity in the workflow task that closes the run: the last
        word under its key replaces any before it, so a closing task the server refused (a signal came meanwhile)
        and took again leaves the line the run closed with, last. Returns the line, which the history keeps (a
        local activity's marker holds its result, not its input)."""
        await call(lambda: self.trail.close(entry))
        return entry.entry

    @activity.defn(name="audited")
    async def audited(self, query: AuditQuery) -> bool:
        """Whether the audit trail holds an entry the ticket's runs wrote: what a run checks an approval the run
        before it handed over against, since carried state is only believed when the trail backs it."""
        return await call(lambda: self.trail.holds(query))
