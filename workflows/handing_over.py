"""How a run of a ticket hands it to a new run: the small service every piece that waits or steps calls.

A workflow's history grows with every step, and the server ends a run whose history outgrows its limits. A ticket
that runs long (many steps, or a refund that waits a day for a person) therefore continues as a new run of the same
workflow id, with a fresh history. What must hold across that seam: steps are numbered across the ticket's runs
(idempotency keys name the step), a run that has made no model call never continues (or a ticket could continue in
a loop), and every wait hands over by one rule (``Continuation.wait``).

The seam is also where a ticket moves to a new release. Under Worker Deployment Versioning a run is pinned to the
build that started it, so no build replays a history another wrote; a run that hears its deployment has a new target
version for it (``retargeted``) hands over while it waits, when nothing is in flight, and the next run starts on the
target (``HandOver.at_rest``). What passes between releases is the snapshot, never the history.

This module is a leaf: it knows no piece. What a run hands over, composed of every piece's snapshot, is
``workflows.continuation.ContinuedState``, which imports the pieces; the pieces import this, so imports point one way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import NoReturn

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.content_store import ContentActivities
    from activities.contracts.archive import RecordsArchive
    from activities.contracts.conversation import Message, StepUsage
    from activities.contracts.limits import WAIT_EVENTS_BEFORE_CONTINUING
    from activities.contracts.ticket import ToolCallRecord, Turn
    from workflows import timeouts


class HandOver(Exception):  # noqa: N818 - what happens, not an error
    """This run has done its share: the ticket goes on in a new run from ``steps_taken``, with ``pending`` not yet
    sent to the model. Raised by whichever part decides it (the loop at its budget of model calls, a wait the
    server asks to end) and caught by the workflow, which alone gathers what every piece carries over."""

    def __init__(self, steps_taken: int, pending: list[Message], *, at_rest: bool = False) -> None:
        super().__init__(f"continuing as new after step {steps_taken}")
        self.steps_taken = steps_taken
        self.pending = pending
        self.at_rest = at_rest
        """Handed over while it waits (for a person, a reply, an event), with nothing in flight: the next run may
        start on another build. A run handed over mid-turn (its budget of model calls) stays on its own build, so a
        turn is finished by the code that began it."""


class Continuation:
    """This run's progress towards continuing as new, and the archive of records the runs before it left behind."""

    def __init__(self) -> None:
        self.step = 0
        """The step in progress (numbered across the ticket's runs)."""
        self._run_steps = 0
        """Model calls this run made: the budget before it continues as a new run."""
        self.archive_ref: str | None = None
        """The tool calls and per-call usage of the ticket's earlier runs, in the content store."""
        self._moving = False
        """The run before was told to move, and handed over mid-turn: this one moves at its next wait."""

    def resume(self, step: int, archive_ref: str | None, *, moving: bool = False) -> None:
        """Take over where the run continued left off: the step it was in, the archive of earlier records, and
        whether it was told to move and stayed to finish its turn (``retargeted``)."""
        self.step, self.archive_ref, self._moving = step, archive_ref, moving

    def stepped(self, step: int) -> None:
        """A model call was made at ``step``: it is the step in progress, and counts against this run's share."""
        self.step = step
        self._run_steps += 1

    def should_continue(self, after_steps: int) -> bool:
        """Whether this run has made its share of model calls, or the server suggests a new run. A run that
        has made none goes on whatever the server says, so a ticket never continues in a loop."""
        if self._run_steps == 0:
            return False
        return self._run_steps >= after_steps or workflow.info().is_continue_as_new_suggested()

    def continue_waiting(self) -> NoReturn:
        """Continue in the middle of the step in progress, with something waited for (a person's answer, a reply,
        an event): the next run waits on for the same thing, until the same moment, on the deployment's target
        build for the ticket if that has changed."""
        raise HandOver(self.step, [], at_rest=True)

    def due(self) -> bool:
        """Whether a run that waits should continue as new now: the server suggests it, its history has grown to
        ``WAIT_EVENTS_BEFORE_CONTINUING`` events, or the ticket is ``retargeted``, whichever comes first. The one
        rule of every wait (``wait``)."""
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() >= WAIT_EVENTS_BEFORE_CONTINUING
            or self.retargeted()
        )

    def retargeted(self) -> bool:
        """Whether the ticket's Worker Deployment now routes it to another build than the one it is pinned to (a
        release made current or ramped; recorded in the history, so a replay hears the same), or the run before
        heard so and handed over mid-turn, staying to finish the turn (the server does not tell a run again of a
        target its hand-over declined). Always False on an unversioned worker. A sleeping run hears it when
        something wakes it: ``agent-worker rollout move`` sends the waiting tickets of a build the ``wake`` signal."""
        return self._moving or workflow.info().is_target_worker_deployment_version_changed()

    async def wait(
        self,
        done: Callable[[], bool],
        until: datetime,
        *,
        leaving: Callable[[], None] = lambda: None,
    ) -> bool:
        """Wait until ``done()`` or ``until`` (workflow time): True if done, False once ``until`` has come. A wait
        that is ``due`` to continue as new meanwhile (a long wait flooded with signals) calls ``leaving`` and hands
        the ticket to a new run (``HandOver``), which waits on for the same thing until the same moment.

        Every wait of the ticket (for a person's answer, a reply, an event) waits here, so the rule of when a
        waiting run continues is written once and a new wait cannot leave it out: a flooded wait that listened
        to the server alone grows until Temporal ends the run."""
        remaining = until - workflow.now()
        if remaining > timedelta(0):
            try:
                await workflow.wait_condition(lambda: done() or self.due(), timeout=remaining)
            except TimeoutError:
                return False  # the moment came: whatever arrived with it is the caller's to read
        if done():
            return True
        if self.due() and workflow.now() < until:
            leaving()
            self.continue_waiting()
        return False

    async def archive(
        self, tool_calls: Sequence[ToolCallRecord], usage: Sequence[StepUsage], turns: Sequence[Turn] = ()
    ) -> None:
        """Hand tool calls, per-call usage and turns to the content store, chained to the archive of the records
        handed there before (nothing to hand, nothing done). The run continuing as new hands its own; a run whose
        records outgrow their budget hands the oldest."""
        if not (tool_calls or usage or turns):
            return
        archive = RecordsArchive(
            previous=self.archive_ref, tool_calls=list(tool_calls), usage=list(usage), turns=list(turns)
        )
        self.archive_ref = await workflow.execute_activity_method(
            ContentActivities.archive_records, archive, **timeouts.attempt("archive_records")
        )
