"""How an activity calls an outside system: off the event loop, heartbeating, with refusals made non-retryable.

Errors that cannot succeed on a retry (no such order, a reused key, a refund above the charge, a payment without a
person past a limit across tickets, a mail server's 5xx) are raised as non-retryable ``ApplicationError``s with a
message the model and a person can act on: retrying them would only spend the retry budget before telling the
model the same thing. Shared by the tools' implementations, the payment reconciliation and the audit trail.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

import structlog
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from activities.business.refusals import (
    IdempotencyConflictError,
    KeyClosedError,
    MailRefusedError,
    NeedsApprovalError,
    OrderNotFoundError,
    PaymentRefusedError,
    PaymentsUnusableError,
    PolicyChangedError,
    RefundExceedsChargeError,
)
from activities.contracts.names import NEEDS_APPROVAL, PAYMENTS_UNUSABLE, POLICY_CHANGED
from activities.heartbeat import heartbeating

T = TypeVar("T")
log = structlog.get_logger(__name__)

NON_RETRYABLE: dict[type[Exception], str] = {
    OrderNotFoundError: "OrderNotFound",
    IdempotencyConflictError: "IdempotencyConflict",
    RefundExceedsChargeError: "RefundExceedsCharge",
    KeyClosedError: "IdempotencyKeyClosed",
    MailRefusedError: "MailRefused",
    PaymentRefusedError: "PaymentRefused",
    PaymentsUnusableError: PAYMENTS_UNUSABLE,
    NeedsApprovalError: NEEDS_APPROVAL,
    PolicyChangedError: POLICY_CHANGED,
}

ANSWERS = (OrderNotFoundError, RefundExceedsChargeError, NeedsApprovalError, PolicyChangedError)
"""Refusals that answer the customer's request (no such order, more than was charged, a limit met) or send it
back to be judged again (a policy changed), rather than tell of trouble: raised as benign, which the SDK logs at
DEBUG, not as a warning with its traceback. The ``refused`` line below still records each; the other refusals may
need a person, and keep their warning."""


async def call(fn: Callable[[], T]) -> T:
    """Run a store call off the event loop, heartbeating, with business refusals made non-retryable."""
    try:
        async with heartbeating():
            return await asyncio.to_thread(_logging_refusals, fn)
    except tuple(NON_RETRYABLE) as error:
        details = [list(error.met)] if isinstance(error, NeedsApprovalError) else []
        category = (
            ApplicationErrorCategory.BENIGN if isinstance(error, ANSWERS) else ApplicationErrorCategory.UNSPECIFIED
        )
        raise ApplicationError(
            str(error), *details, type=NON_RETRYABLE[type(error)], non_retryable=True, category=category
        ) from error


def _logging_refusals(fn: Callable[[], T]) -> T:
    """A refusal is logged where it happens, in the thread: an attempt the server gave up on (its await long
    cancelled) still runs to the end, and its refusal is the only trace of what it tried."""
    try:
        return fn()
    except tuple(NON_RETRYABLE) as error:
        log.warning("refused", refusal=NON_RETRYABLE[type(error)], reason=str(error))
        raise
