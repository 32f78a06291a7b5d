"""One way out of a process whose exit code someone reads: flush, then ``os._exit``.

temporalio can crash while the interpreter tears down, after all its work is done (sdk-python issue 300: a
segfault or an abort in about 2 of 12 short runs here). A command that returned normally would then report the
teardown's crash instead of its own result, and CI, a test or a supervisor would act on the wrong code. Every
entry point that ends with a code that matters (the CLI, the baseline loop, the benchmarks, the history
recorder, the test session) ends through ``exit_hard``.
"""

from __future__ import annotations

import contextlib
import os
import sys
from enum import IntEnum
from typing import NoReturn


def exit_hard(code: int = 0) -> NoReturn:
    """Flush stdout and stderr and leave with ``code`` at once, skipping the interpreter's teardown: no atexit
    handler or finalizer runs after it, so call it only when all the work is done. What a reader that has gone
    (``| head``) did not take is dropped: the code stays the command's."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BrokenPipeError):
            stream.flush()
    os._exit(code)


class Refused(SystemExit):
    """A program that will not start, and why: a ``SystemExit`` whose code is the sentence, so any entry point stops
    with it, and whose ``exit_code`` the CLI leaves with (``agent_worker.cli.commands.run``): 2 for a bad setting, as
    for any that pydantic refuses."""

    def __init__(self, why: str, exit_code: int = 2) -> None:
        super().__init__(why)
        self.exit_code = exit_code


class ApproveExit(IntEnum):
    """``agent-worker approve``'s exit codes: what the ticket made of the answer, and, for an approval, what the money
    did. A script reads 0 as "done": for an approval, only a payout booked is done."""

    DONE = 0
    """The answer decided the request: approved and the payout booked, or declined."""
    NOTHING_WAITS = 1
    """Nothing of that amount waits, or the server refused (no such ticket)."""
    BAD_INPUT = 2
    PARTLY_APPROVED = 3
    """One approval of several the request needs is recorded; nothing is paid yet."""
    NOT_COUNTED = 4
    """The ticket does not count the answer, and says why."""
    NOT_JUDGED = 5
    """Sent, but no worker took it in time: ``show`` tells later what came of it."""
    PAYMENT_REFUSED = 6
    """Approved, but the booking refused the payment: nothing was paid, and the reason is printed."""
    PAYMENT_OPEN = 7
    """Approved, and the payment's outcome is not known yet (an attempt is retried, or the ticket has not said):
    ``show`` tells later what came of it."""
