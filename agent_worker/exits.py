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
