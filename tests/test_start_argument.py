"""``agent-worker start`` says what it takes, a file holding the ticket as JSON (or ``-``), and refuses anything else
with a sentence: the JSON itself pasted as the argument, a path too long for the system, a directory, a missing
file. Never a traceback (a long argument ended in ``OSError: File name too long``), and nothing is started."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from temporalio.client import Client

from tests.support.desk import LOOSE_FILE
from tests.support.harness import Harness
from tests.support.processes import AGENT_WORKER, address, exited, run
from tests.support.tickets import ticket


async def test_start_says_in_its_help_that_it_takes_a_file_not_the_json_itself() -> None:
    helped = await run(AGENT_WORKER, "start", "--help")

    assert "FILE" in helped
    assert "a file holding the ticket as JSON" in helped
    assert "Not the JSON itself" in helped
    assert "agent-worker start -" in helped


INLINE = json.dumps(ticket())


@pytest.mark.parametrize(
    ("argument", "said"),
    [
        (INLINE, "is not a file: start takes a file holding the ticket as JSON, not the JSON itself"),
        ("T" * 5_000, "(File name too long): start takes a file holding the ticket as JSON, or - for standard input"),
        ("/", "(Is a directory): start takes a file holding the ticket as JSON"),
        ("no-such-ticket.json", "(No such file or directory): start takes a file holding the ticket as JSON"),
    ],
    ids=["inline-json", "very-long", "a-directory", "missing"],
)
async def test_start_refuses_an_argument_that_is_not_a_readable_file_with_a_sentence(
    client: Client, tmp_path: Path, argument: str, said: str
) -> None:
    code, out, err = await exited(
        AGENT_WORKER, "start", argument, "--address", address(client), env={"AGENT_POLICY_FILE": str(LOOSE_FILE)}
    )

    assert code == 2
    assert out == ""
    assert "Traceback" not in err
    (sentence,) = [line for line in err.splitlines() if line.startswith("agent-worker start: error: argument FILE: ")]
    assert said in sentence
    assert len(sentence) < 400, "a long argument is quoted by its head, not whole"


async def test_start_reads_the_ticket_from_standard_input_given_a_dash(agent: Harness, client: Client) -> None:
    """The way to pass the JSON itself, as the refusals say: piped in, with ``-``."""
    raw = ticket(approval_limit_cents=10_000)
    process = await asyncio.create_subprocess_exec(
        AGENT_WORKER,
        "start",
        "-",
        "--address",
        address(client),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "AGENT_TASK_QUEUE": agent.task_queue, "AGENT_POLICY_FILE": str(LOOSE_FILE)},
    )
    out, err = await asyncio.wait_for(process.communicate(json.dumps(raw).encode()), 60)

    assert process.returncode == 0, err.decode()
    assert out.decode().startswith(f"started ticket-{raw['ticket_id']} (run ")
    await client.get_workflow_handle(f"ticket-{raw['ticket_id']}").terminate("test over")
