"""How a failure reads: to the model, to a person, and to the code that decides what to do about it.

A tool that cannot do what was asked answers the model with an error instead of failing the run
(``ToolError``); an activity's failure is either a definite answer or an unknown outcome (``is_refusal``),
and only an unknown outcome of a refund is worth asking the provider about. The loop, the tools and the
approval gate all need these; they live apart so that the tools and the gate do not import each other.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from activities.contracts.names import PAYMENTS_UNUSABLE


def invalid_input(problem: str) -> ApplicationError:
    """What a caller's bad input fails the run with, at once, naming the field: no retry can mend it."""
    return ApplicationError(f"Invalid ticket input: {problem}", type="InvalidTicketInput", non_retryable=True)


class ToolError(Exception):
    """A tool result the model must see as an error (``is_error``), not a reason to fail the run."""


class ProviderUnusableError(Exception):
    """An outside system refuses the worker itself (its credentials): no tool call can succeed until a person
    fixes the worker's settings, so the ticket ends as failed, for a person, instead of the model telling the
    customer about an error that is not theirs. The message is the ticket's answer."""

    def __init__(self, message: str, step: int) -> None:
        super().__init__(message)
        self.step = step


def is_refusal(error: ActivityError) -> bool:
    """Whether the activity failed with a definite answer (a non-retryable error: the provider refused, the
    order does not exist), as opposed to an unknown outcome (a timeout, retries used up)."""
    return isinstance(error.cause, ApplicationError) and error.cause.non_retryable


def cause(error: ActivityError) -> str:
    """The message a person can act on, from the innermost cause of an activity's failure."""
    inner: BaseException = error
    while inner.__cause__ is not None:
        inner = inner.__cause__
    if isinstance(inner, ApplicationError):
        return inner.message
    return str(inner) or type(inner).__name__


def raise_if_unusable(error: ActivityError, step: int) -> None:
    """A tool that failed at ``step`` because its provider refuses the worker (``PAYMENTS_UNUSABLE``) ends the
    ticket."""
    if isinstance(error.cause, ApplicationError) and error.cause.type == PAYMENTS_UNUSABLE:
        raise ProviderUnusableError(
            f"The agent could not use the payment provider ({cause(error)}). A person will take this ticket over.",
            step,
        )


def raise_if_cancelled(error: ActivityError) -> None:
    """A cancel of the ticket reaches an activity in flight, which fails with it: make it the cancel again,
    so that it ends the ticket instead of reading to the model as "the tool failed" or ending it as failed."""
    if isinstance(error.cause, CancelledError) and workflow.cancellation_reason() is not None:
        raise asyncio.CancelledError from error
