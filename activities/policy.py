"""Operator policy the workflow needs but must not read itself: settings live outside workflow code.

Workflow code may not read the environment (a replay on another worker could see other settings and take
another path), so the default approvers are asked for through an activity, whose answer is recorded in
the history and replayed from there.
"""

from __future__ import annotations

from temporalio import activity


class PolicyActivities:
    def __init__(self, approvers: list[str]) -> None:
        self.approvers = approvers

    @activity.defn(name="default_approvers")
    async def default_approvers(self) -> list[str]:
        """Who may approve refunds on tickets that name nobody; empty means anyone."""
        return self.approvers
