"""When a run of a ticket hands it to a new run, and what it does first.

A workflow's history grows with every step, and the server ends a run whose history outgrows its limits. A
ticket that runs long (many steps, or a refund that waits a day for a person) therefore continues as a new run
of the same workflow id, with a fresh history. What must hold across that seam: steps are numbered across the
ticket's runs (idempotency keys name the step), a run that has made no model call never continues (or a ticket
could continue in a loop), and what one run hands the next does not grow with the ticket. What it hands over
is ``ContinuedState``, built by the workflow from the parts each of its pieces keeps.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import NoReturn

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.content_store import ContentActivities
    from activities.contracts.continued import RecordsArchive
    from activities.contracts.conversation import Message, UsageReport
    from activities.contracts.limits import WAIT_EVENTS_BEFORE_CONTINUING
    from activities.contracts.ticket import ToolCallRecord, Turn
    from workflows import timeouts


HandOver = Callable[[int, list[Message]], Awaitable[NoReturn]]
"""Hand everything to a new run: the steps taken and the turns not yet sent (and whatever waits, which the
pieces that keep it hand over themselves)."""


class Continuation:
    """This run's progress towards continuing as new, and the archive of records
    the runs before it left behind. The hand-over itself is the workflow's: only it knows all that is carried."""

    def __init__(self, hand_over: HandOver) -> None:
        self._hand_over = hand_over
        self.linear = False
        """Whether this run keeps the conversation in the content store, and so may continue as new."""
        self.step = 0
        """The step in progress (numbered across the ticket's runs)."""
        self.run_steps = 0
        """Model calls this run made: the budget before it continues as a new run."""
        self.archive_ref: str | None = None
        """The tool calls and per-call usage of the ticket's earlier runs, in the content store."""

    def should_continue(self, after_steps: int) -> bool:
        """Whether this run has made its share of model calls, or the server suggests a new run. A run that
        has made none goes on whatever the server says, so a ticket never continues in a loop."""
        if not self.linear or self.run_steps == 0:
            return False
        return self.run_steps >= after_steps or workflow.info().is_continue_as_new_suggested()

    async def continue_waiting(self) -> NoReturn:
        """Continue in the middle of the step in progress, with a refund waiting for a person: the next run
        waits on for the same request, until the same deadline."""
        await self._hand_over(self.step, [])

    def due(self) -> bool:
        """Whether a run that waits should continue as new now: the server suggests it, or its history has grown
        to ``WAIT_EVENTS_BEFORE_CONTINUING`` events."""
        info = workflow.info()
        return info.is_continue_as_new_suggested() or info.get_current_history_length() >= WAIT_EVENTS_BEFORE_CONTINUING

    async def archive(self, tool_calls: list[ToolCallRecord], usage: UsageReport, turns: Sequence[Turn] = ()) -> bool:
        """Hand tool calls, per-call usage and turns to the content store, chained to
        the archive of the records handed there before; whether it did, and the run need no longer carry them.
        The run continuing as new hands its own; a run whose records outgrow their budget hands the oldest."""
        if not (tool_calls or usage.steps or turns):
            return False
        self.archive_ref = await workflow.execute_activity_method(
            ContentActivities.archive_records,
            RecordsArchive(previous=self.archive_ref, tool_calls=tool_calls, usage=usage.steps, turns=list(turns)),
            **timeouts.attempt("archive_records"),
        )
        return True
