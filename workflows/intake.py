"""A run's intake: what it starts from, read and validated, and whether a new ticket is still the agent's to take.

The workflow takes its arguments loosely (``*args``, plain JSON) and validates them here, because a typed
argument that fails to decode, or a wrong number of arguments, would leave the run RUNNING with its first
workflow task failing forever instead of failing it clearly. Two kinds of bad input fail differently:

- a caller's (a malformed ticket, a stray second argument, a cron schedule or a retry policy) fails the run at
  once as ``InvalidTicketInput``, naming the field, since no retry can mend it;
- state handed over by the ticket's previous run that this worker cannot read fails only the workflow task
  (``UnreadableStateError``): only a run of this workflow writes that state, so it was written by a newer
  worker during a rolling deploy, and a worker of that version will pick the task up.

A ticket that has already waited longer than its SLA when its first run starts goes to a person at once
(``past_sla``). That is judged in workflow time, never the wall clock: a replay hours later must see the
moment the decision was first made, or it takes the other branch.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from activities.contracts.fields import describe_errors
    from activities.contracts.ticket import TicketInput

from workflows.continuation import ContinuedState
from workflows.failures import invalid_input


class UnreadableStateError(RuntimeError):
    """Not an ``ApplicationError``, so it fails the workflow task, which is retried, and not the run."""


@dataclass(frozen=True)
class Intake:
    """What a run starts from: the ticket, and the state a continued run carries; or only why it cannot start
    (``problem``), which the run raises first thing: a caller's bad input (``InvalidTicketInput``) fails the run,
    state only a newer worker can read (``UnreadableStateError``) fails the workflow task. Read where the workflow
    is made, so every piece is made knowing the ticket; raised there, either would fail the task and leave the
    run's coroutine unstarted, so it is kept until the run raises it."""

    ticket: TicketInput | None
    carried: ContinuedState | None = None
    problem: ApplicationError | UnreadableStateError | None = None

    @staticmethod
    def read(args: tuple[Any, ...]) -> Intake:
        try:
            ticket, carried = read_input(args)
        except (ApplicationError, UnreadableStateError) as problem:
            return Intake(None, problem=problem)
        return Intake(ticket, carried)


def read_input(args: tuple[Any, ...]) -> tuple[TicketInput, ContinuedState | None]:
    """The ticket, and the state a continued run carries. The first argument is the ticket; a second,
    ``ContinuedState``, is accepted only on a run that continues another one (the server says so), never from a
    caller starting a ticket."""
    if not 1 <= len(args) <= 2:
        raise invalid_input(f"input: expected the ticket as one JSON object, got {len(args)} arguments")
    try:
        ticket = TicketInput.model_validate(args[0])
    except ValidationError as error:
        raise invalid_input(describe_errors(error)) from None
    if relaunch := _relaunched_by_the_server():
        raise invalid_input(relaunch)
    if len(args) == 1:
        return ticket, None
    if workflow.info().continued_run_id is None:
        raise invalid_input("input: a second argument is state a run hands the run that continues it, not input")
    try:
        return ticket, ContinuedState.model_validate(args[1])
    except ValidationError as error:
        raise UnreadableStateError(
            f"This worker cannot read the state the ticket's previous run handed over, probably written by a "
            f"newer version of the worker; a worker running that version will take it ({describe_errors(error)})"
        ) from None


def _relaunched_by_the_server() -> str | None:
    """Why this run is one the server starts again with its caller's arguments, or None.

    Carried state is believed only from a continue-as-new this workflow made, and the server marks that run the
    same way (``continued_run_id``) as a cron run and a retry attempt, which take the original caller's
    arguments again: a second argument forged at the start would be carried into them. So a ticket is never
    run on a cron schedule or with a retry policy (its retries are its activities'), and what is left with a
    ``continued_run_id`` is a run this workflow continued."""
    info = workflow.info()
    if info.cron_schedule:
        return (
            f"cron_schedule: a ticket runs once; a cron schedule ({info.cron_schedule}) would start it again "
            "with its caller's arguments (terminate the workflow to stop the schedule)"
        )
    if info.retry_policy is not None or info.attempt > 1:
        return "retry_policy: a ticket runs once; its activities retry, a retry policy would start it again"
    return None


def past_sla(ticket: TicketInput) -> str | None:
    """Why the ticket is past its SLA, or None."""
    opened_at = ticket.opened_at or workflow.info().start_time
    age = workflow.now() - opened_at
    sla = timedelta(seconds=ticket.options.sla_seconds)
    return f"opened {age} ago, SLA {sla}" if age > sla else None
