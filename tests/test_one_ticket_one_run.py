"""A ticket is one workflow, ``ticket-<ticket id>``, and what it does to the world is keyed by the ticket.

A webhook retried, or a caller that starts the same ticket under another workflow id, used to refund once
(the per-order key) but mail the customer twice and answer twice. ``agent-worker start`` makes a duplicate
start a no-op, or a clear error once the ticket has ended; and a duplicate under another id, which no start
command can stop, sends nothing twice, because refunds and emails are keyed by the ticket's id.
"""

from __future__ import annotations

import json
import shlex
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from activities.contracts.conversation import Decision, ThinkRequest, ToolUseBlock
from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.ticket import Outcome
from agent_worker.cli.devserver import binary
from tests.support.desk import LOOSE_FILE
from tests.support.harness import Harness
from tests.support.models import says
from tests.support.processes import AGENT_WORKER, address, exited, run
from tests.support.tickets import answer, ticket
from tests.support.waits import awaiting

README = Path(__file__).resolve().parent.parent / "README.md"


class NamesCallsAnew:
    """The support script (look up, refund, email, answer), with every tool call given a fresh id, as Claude
    gives them: a duplicate run of the ticket names the same calls differently."""

    name = "names-calls-anew"

    async def decide(self, request: ThinkRequest) -> Decision:
        steps: list[tuple[str, dict[str, Any]]] = [
            ("lookup_order", {"order_id": "A-1001"}),
            ("issue_refund", {"order_id": "A-1001", "amount_cents": 4900}),
            ("send_email", {"to": "ann@example.com", "subject": "Your refund", "body": "We refunded 49.00."}),
        ]
        if request.step > len(steps):
            return says("Refunded and emailed.")
        name, tool_input = steps[request.step - 1]
        return Decision(
            content=[ToolUseBlock(id=f"toolu_{uuid.uuid4().hex}", name=name, input=tool_input)], stop_reason="tool_use"
        )


async def test_starting_a_ticket_twice_is_one_run_and_starting_it_after_it_ended_is_refused(
    agent: Harness, client: Client, tmp_path: Path
) -> None:
    raw = ticket(approval_limit_cents=10_000)
    source = tmp_path / "ticket.json"
    source.write_text(json.dumps(raw))
    where = ["--address", address(client)]
    env_queue = {"AGENT_TASK_QUEUE": agent.task_queue, "AGENT_POLICY_FILE": str(LOOSE_FILE)}  # the workers' policy
    workflow_id = f"ticket-{raw['ticket_id']}"

    first = await run(AGENT_WORKER, "start", str(source), *where, env=env_queue)
    assert first.startswith(f"started {workflow_id} (run ")
    again = await run(AGENT_WORKER, "start", str(source), *where, env=env_queue)
    assert again.startswith(f"{workflow_id} is already running (run ")
    assert again.strip().endswith("nothing was started")

    async with agent.worker():
        outcome: Outcome = await client.get_workflow_handle(workflow_id, result_type=Outcome).result()
    code, _, refused = await exited(AGENT_WORKER, "start", str(source), *where, env=env_queue)
    assert code == 1
    assert refused.strip() == f"{workflow_id} was already handled (completed); a ticket is one run, nothing was started"
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    assert len(agent.store.mail.sent()) == 1
    assert outcome.status.value == "resolved"
    runs = [w async for w in client.list_workflows(f"WorkflowId = '{workflow_id}'")]
    assert len(runs) == 1


async def test_a_malformed_ticket_is_not_started(client: Client, tmp_path: Path) -> None:
    source = tmp_path / "ticket.json"
    source.write_text(json.dumps({**ticket(), "options": {"approvers": []}}))
    code, _, refused = await exited(AGENT_WORKER, "start", str(source), "--address", address(client))
    assert code == 2
    assert refused.startswith("not started: options.approvers: List should have at least 1 item")


async def test_a_ticket_with_an_option_looser_than_the_money_policy_is_refused_and_nothing_starts(
    client: Client, tmp_path: Path
) -> None:
    """The workflow would fail it at once with ``InvalidTicketInput``; ``start`` judges it by the same rule
    (``rules_for``) under the policy its settings name, exits 2 naming the field, and starts nothing."""
    raw = ticket(approval_limit_cents=999_999)
    source = tmp_path / "ticket.json"
    source.write_text(json.dumps(raw))
    example = Path(__file__).resolve().parent.parent / "deploy" / "policy.example.toml"
    code, out, refused = await exited(
        AGENT_WORKER, "start", str(source), "--address", address(client), env={"AGENT_POLICY_FILE": str(example)}
    )
    assert (code, out) == (2, "")
    assert refused.startswith("not started: options.approval_limit_cents: 999,999 (9,999.99 in a two-decimal currency)")
    assert "a ticket may only lower it (the money policy sha256:" in refused
    assert f"AGENT_POLICY_FILE={example})" in refused
    with pytest.raises(RPCError) as missing:
        await client.get_workflow_handle(f"ticket-{raw['ticket_id']}").describe()
    assert missing.value.status is RPCStatusCode.NOT_FOUND


async def test_the_same_ticket_under_another_workflow_id_pays_once_and_mails_once(
    agent: Harness, client: Client
) -> None:
    """The duplicate is started with the ``temporal`` CLI under an id of its own, as a second integration
    would. Both runs wait for approval, both are approved, both refund and email: the provider and the mailbox
    see one refund and one email, since both runs key them by the ticket."""
    raw = ticket()
    temporal = [binary("temporal"), "--address", address(client)]
    ids = [f"ticket-{raw['ticket_id']}", f"webhook-retry-{raw['ticket_id']}"]
    async with agent.worker(NamesCallsAnew()):
        for workflow_id in ids:
            await run(
                *temporal,
                "workflow",
                "start",
                "--type",
                "SupportAgent",
                "--task-queue",
                agent.task_queue,
                "--workflow-id",
                workflow_id,
                "--input",
                json.dumps(raw),
            )
        handles = [client.get_workflow_handle(w, result_type=Outcome) for w in ids]
        for handle in handles:
            await awaiting(handle, 4900)
            await handle.signal(APPROVE_SIGNAL, answer(4900))
        outcomes = [await h.result() for h in handles]

    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    assert len(agent.store.mail.sent()) == 1
    assert [[r.refund_id for r in o.refunds] for o in outcomes] == [[1], [1]]


def readme_commands(section: str) -> list[list[str]]:
    """The ``temporal`` commands of the README's ``section``'s first shell block, each split as a shell would."""
    text = README.read_text()
    start = text.index("```sh", text.index(section)) + len("```sh")
    words = shlex.split(text[start : text.index("```", start)].replace("\\\n", " "), comments=True)
    commands: list[list[str]] = []
    for word in words:
        if word == "temporal":
            commands.append([])
        commands[-1].append(word)
    return commands


async def test_the_readmes_temporal_workflow_start_fails_visibly_for_a_ticket_that_has_finished(
    agent: Harness, client: Client
) -> None:
    """README (b) as printed, on a ticket id and task queue of the test's own: the first start starts the ticket;
    once it has finished, the same command exits 1 saying so, and starts nothing."""
    start = readme_commands("### (b)")[0]
    assert start[:3] == ["temporal", "workflow", "start"]
    ticket_id = f"T-{uuid.uuid4().hex[:8]}"
    given = json.loads(start[start.index("--input") + 1])
    changes = {
        "--task-queue": agent.task_queue,
        "--workflow-id": f"ticket-{ticket_id}",
        "--input": json.dumps({**given, "ticket_id": ticket_id}),
    }
    command = [binary("temporal"), "--address", address(client), *start[1:]]
    for flag, value in changes.items():
        command[command.index(flag) + 1] = value

    code, started, _ = await exited(*command)
    assert code == 0
    assert "Running execution:" in started
    await client.get_workflow_handle(f"ticket-{ticket_id}").terminate(reason="finished, for the test")
    code, again, refused = await exited(*command)

    assert (code, again) == (1, "")
    assert "Workflow execution already finished" in refused
    runs = [w async for w in client.list_workflows(f"WorkflowId = 'ticket-{ticket_id}'")]
    assert len(runs) == 1
