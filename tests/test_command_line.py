"""The command line as a newcomer meets it: every flag and every subcommand says what it is for, a reader that
stops early (``| head``) ends it quietly, and a worker starts without lines that read like trouble."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from collections.abc import Iterator
from pathlib import Path

from agent_worker.cli import main as cli
from tests.support.processes import AGENT_WORKER, run


def parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """``parser`` and every subcommand's parser under it."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from parsers(sub)


def test_every_subcommand_and_every_option_of_every_command_has_help_text() -> None:
    """``agent-worker COMMAND --help`` is where operations.md sends people for the flags, so none may be blank."""
    silent = []
    for parser in [*parsers(cli.parser()), *parsers(cli.capture_parser())]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):  # a subcommand added without help has no entry
                helped = {entry.dest for entry in action._choices_actions if entry.help}
                silent += [f"{parser.prog} {name}" for name in action.choices if name not in helped]
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                silent.append(f"{parser.prog} {'/'.join(action.option_strings) or action.dest}")
    assert silent == []


async def test_a_reader_that_stops_early_ends_orders_list_without_a_traceback(tmp_path: Path) -> None:
    """``agent-worker orders list | head -1``: the pipe's reader is gone before the command writes, as when ``head``
    has its line. The command ends quietly with the code a tool killed by SIGPIPE has, not a BrokenPipeError."""
    env = {**os.environ, "AGENT_DATA_DIR": str(tmp_path)}
    await run(AGENT_WORKER, "orders", "seed-demo", env=env)
    read, write = os.pipe()
    os.close(read)
    try:
        listing = await asyncio.create_subprocess_exec(
            AGENT_WORKER, "orders", "list", stdout=write, stderr=asyncio.subprocess.PIPE, env=env
        )
    finally:
        os.close(write)
    _, err = await asyncio.wait_for(listing.communicate(), 60)
    assert err.decode() == ""
    assert listing.returncode == 128 + signal.SIGPIPE
