"""Operator commands against a real dev server: list waiting tickets, show one, approve it."""

from __future__ import annotations

import asyncio
import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowFailureError

from activities.contracts.names import WORKFLOW_NAME
from activities.contracts.ticket import Status
from agent_worker import policy_file
from tests.support.harness import Harness
from tests.support.processes import AGENT_WORKER, address, exited, run
from tests.support.tickets import ticket
from tests.support.waits import awaiting, poll
from workflows.patches import Patch

EXAMPLE_POLICY = Path(__file__).resolve().parent.parent / "deploy" / "policy.example.toml"


async def test_an_operator_lists_a_waiting_ticket_with_no_worker_running_then_shows_and_approves_it(
    agent: Harness, client: Client
) -> None:
    cli = ["--address", address(client)]
    async with agent.worker():
        handle = await agent.start(ticket())
        await awaiting(handle, 4900)

    async def listing_it() -> str | None:  # visibility is eventually consistent; no worker runs now
        listed = await run(AGENT_WORKER, "tickets", "--waiting", *cli)
        return listed if handle.id in listed else None

    listed = await poll(listing_it, timeout=20, what="tickets --waiting to list the ticket")
    line = next(line for line in listed.splitlines() if handle.id in line)
    assert "running" in line
    assert "waiting for approval of USD 49.00 (request R1 on A-1001, answer by " in line

    shown = await run(AGENT_WORKER, "show", handle.id, *cli)
    assert "the model asks for lookup_order(order_id='A-1001')" in shown
    assert "[approval] a refund of USD 49.00 waits for a person" in shown
    assert "no worker answered the query" in shown

    # Still no worker: the request's id comes from visibility, and an answer about another amount is not sent.
    wrong = await asyncio.create_subprocess_exec(
        AGENT_WORKER,
        "approve",
        handle.id,
        "--amount-cents",
        "5900",
        "--approver",
        "ann",
        *cli,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, refused = await wrong.communicate()
    assert wrong.returncode == 1
    assert refused.decode().startswith(f"{handle.id} waits for USD 49.00 (request R1 on A-1001, answer by ")
    assert refused.decode().strip().endswith("not USD 59.00; nothing was sent")
    # Sent, but with no worker nobody has judged it yet: the command says so, with a code of its own.
    code, approved, _ = await exited(
        AGENT_WORKER, "approve", handle.id, "--amount-cents", "4900", "--approver", "ann", *cli
    )
    assert code == 5
    assert approved.strip().startswith(f"approved USD 49.00 (R1) on {handle.id} as ann: sent, not judged yet")

    async with agent.worker():
        outcome = await handle.result()
        shown = await run(AGENT_WORKER, "show", handle.id, *cli)

    assert [(a.request_id, a.decision.value, a.approver) for a in outcome.approvals] == [("R1", "approved", "ann")]

    assert "status resolved, 4 steps, 4 model calls" in shown
    assert "refund #1: USD 49.00 on A-1001" in shown
    assert "approval approved USD 49.00 by ann" in shown

    async def not_listed() -> bool:
        return handle.id not in await run(AGENT_WORKER, "tickets", "--waiting", *cli)

    await poll(not_listed, timeout=20, interval=0.2, what="tickets --waiting to stop listing the ticket")


async def test_show_tells_every_run_of_a_ticket_that_continued_as_new(agent: Harness, client: Client) -> None:
    async with agent.worker():
        handle = await agent.start(ticket(approval_limit_cents=10_000, continue_as_new_after_steps=2))
        await handle.result()
    shown = await run(AGENT_WORKER, "show", handle.id, "--address", address(client))
    first_run, last_run = shown.split("[closed] the run continued as new")
    assert "the model asks for lookup_order(order_id='A-1001')" in first_run
    assert "send_email" in last_run
    assert "status resolved, 4 steps, 4 model calls" in last_run


async def test_patches_names_each_with_its_release_and_the_oldest_open_ticket_from_visibility(
    agent: Harness, client: Client
) -> None:
    """What an operator reads before retiring a patch: the patches in force, each with the release that added it
    (none in force: it says so), and the oldest open ticket, from visibility with no worker running; ours is open, so
    the oldest started no later than it."""
    cli = ["--address", address(client)]
    async with agent.worker():
        handle = await agent.start(ticket())
        await awaiting(handle, 4900)
    started = (await handle.describe()).start_time

    async def reported() -> str | None:
        said = await run(AGENT_WORKER, "patches", *cli)
        return said if "oldest open ticket" in said else None

    said = await poll(reported, timeout=20, what="patches to name the oldest open ticket")
    for patch in Patch:
        assert f"{patch.value}  (added in {patch.release})" in said
    assert ("no patch in force" in said) == (not list(Patch)), said
    oldest = re.search(r"oldest open ticket: (\S+), started (.+) UTC \((\d+) open\)", said)
    assert oldest is not None, said
    assert datetime.strptime(oldest[2], "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC) <= started
    assert int(oldest[3]) >= 1
    await handle.terminate("test over")


async def test_approve_under_roles_refuses_a_signal_that_cannot_count_and_sends_nothing(
    agent: Harness, client: Client
) -> None:
    """The example policy has roles, so only the approval inbox's signed answers approve: ``approve`` says the
    signal cannot count and exits 4, nothing is sent or paid, and the request still waits. A decline by signal does
    count there, and the command says the ticket took it."""
    cli = ["--address", address(client)]
    async with agent.worker(policy=policy_file.read(EXAMPLE_POLICY)):
        handle = await agent.start(ticket())
        await awaiting(handle, 4900)
        code, out, err = await exited(
            AGENT_WORKER, "approve", handle.id, "--amount-cents", "4900", "--approver", "ann", *cli
        )
        assert (code, out) == (4, "")
        assert err.strip() == (
            f"not sent: {handle.id} would not count it: request R1 takes approvals signed in the approval inbox "
            "only: a signal's approver is a claim, and this refund needs roles or two people checked"
        )
        assert await awaiting(handle, 4900) is not None
        signals = [
            e async for e in handle.fetch_history_events() if e.HasField("workflow_execution_signaled_event_attributes")
        ]
        assert signals == []

        code, out, err = await exited(
            AGENT_WORKER, "approve", handle.id, "--amount-cents", "4900", "--approver", "ann", "--decline", *cli
        )
        assert (code, err) == (0, "")
        assert (
            out.strip() == f"declined USD 49.00 (R1) on {handle.id} as ann: the ticket took it; the refund is not made"
        )
        outcome = await handle.result()
    assert outcome.status is Status.DECLINED
    assert agent.store.payments.refunds() == []


async def test_approve_says_the_ticket_took_the_answer_once_a_worker_has_judged_it(
    agent: Harness, client: Client
) -> None:
    cli = ["--address", address(client)]
    async with agent.worker():
        handle = await agent.start(ticket())
        await awaiting(handle, 4900)
        code, out, _ = await exited(
            AGENT_WORKER, "approve", handle.id, "--amount-cents", "4900", "--approver", "ann", *cli
        )
        assert code == 0
        assert out.strip() == (
            f"approved USD 49.00 (R1) on {handle.id} as ann: the ticket took it; refund #1 of USD 49.00 on A-1001 paid"
        )
        await handle.result()
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]


async def test_show_says_why_a_ticket_failed_was_terminated_or_timed_out(agent: Harness, client: Client) -> None:
    """A run that ended without an outcome: ``show`` gives the failure's type and message (naming the field of a
    ticket refused at once), who terminated it and why, or that it timed out; not only "the run failed"."""
    cli = ["--address", address(client)]
    async with agent.worker(policy=policy_file.read(EXAMPLE_POLICY)):
        refused = await agent.start(ticket(approval_limit_cents=999_999))
        with pytest.raises(WorkflowFailureError):
            await refused.result()
        terminated = await agent.start(ticket())
        await awaiting(terminated, 4900)
        await terminated.terminate(reason="a duplicate of T-9")
    timed_out = await client.start_workflow(
        WORKFLOW_NAME,
        ticket(),
        id=f"ticket-{uuid.uuid4()}",
        task_queue=agent.task_queue,
        execution_timeout=timedelta(seconds=1),
    )
    with pytest.raises(WorkflowFailureError):
        await timed_out.result()

    shown = await run(AGENT_WORKER, "show", refused.id, *cli)
    assert shown.startswith(f"{refused.id}: failed\n")
    assert (
        "[closed] the run failed: InvalidTicketInput: Invalid ticket input: options.approval_limit_cents: 999,999 "
        "(9,999.99 in a two-decimal currency) is above the desk's approval limit of 2,000"
    ) in shown
    shown = await run(AGENT_WORKER, "show", terminated.id, *cli)
    assert shown.startswith(f"{terminated.id}: terminated\n")
    assert re.search(r"\[closed\] the run was terminated by \S+: a duplicate of T-9\n", shown), shown
    shown = await run(AGENT_WORKER, "show", timed_out.id, *cli)
    assert "[closed] the run timed out: it outlived the timeout it was started with" in shown
