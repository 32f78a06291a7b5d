"""A ticket's numbers are numbers: ``approval_limit_cents`` given as ``"1999"``, ``1999.0`` or ``true`` is a wrong type,
which the docs say fails the run at once with ``InvalidTicketInput`` naming the field, whether the ticket is started
with ``temporal workflow start`` or with ``agent-worker start``. Pydantic's lax mode read them as 1999, 1999 and 1:
a limit of one cent nobody asked for."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin

import pytest
from pydantic import ValidationError
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from activities.contracts.fields import describe_errors
from activities.contracts.names import WORKFLOW_NAME
from activities.contracts.ticket import Outcome, TicketInput, TicketOptions
from agent_worker.cli.devserver import binary
from tests.support.desk import LOOSE_FILE
from tests.support.harness import Harness
from tests.support.processes import AGENT_WORKER, address, exited, run
from tests.support.tickets import ticket

NOT_NUMBERS = ["1999", 1999.0, True]
"""What a caller may mean as 1999 (or 1), sent as another JSON type."""


def with_limit(limit: Any) -> dict[str, Any]:
    raw = ticket()
    raw["options"]["approval_limit_cents"] = limit
    return raw


@pytest.mark.parametrize("limit", NOT_NUMBERS, ids=["string", "float", "boolean"])
async def test_a_limit_that_is_not_an_integer_fails_a_run_started_with_the_temporal_cli_naming_the_field(
    agent: Harness, client: Client, limit: Any
) -> None:
    workflow_id = f"ticket-{uuid.uuid4()}"
    async with agent.worker():
        await run(
            binary("temporal"),
            "--address",
            address(client),
            "workflow",
            "start",
            "--type",
            WORKFLOW_NAME,
            "--task-queue",
            agent.task_queue,
            "--workflow-id",
            workflow_id,
            "--input",
            json.dumps(with_limit(limit)),
        )
        with pytest.raises(WorkflowFailureError) as failure:
            await asyncio.wait_for(client.get_workflow_handle(workflow_id, result_type=Outcome).result(), 30)

    error = failure.value.cause
    assert isinstance(error, ApplicationError)
    assert (error.type, error.non_retryable) == ("InvalidTicketInput", True)
    assert error.message.startswith(
        "Invalid ticket input: options.approval_limit_cents: Input should be a valid integer"
    )
    assert agent.store.payments.refunds() == []


@pytest.mark.parametrize("limit", NOT_NUMBERS, ids=["string", "float", "boolean"])
async def test_agent_worker_start_refuses_a_limit_that_is_not_an_integer_naming_the_field_and_starts_nothing(
    client: Client, tmp_path: Path, limit: Any
) -> None:
    raw = with_limit(limit)
    source = tmp_path / "ticket.json"
    source.write_text(json.dumps(raw))
    code, _, err = await exited(
        AGENT_WORKER, "start", str(source), "--address", address(client), env={"AGENT_POLICY_FILE": str(LOOSE_FILE)}
    )

    assert code == 2
    assert err.strip().startswith("not started: options.approval_limit_cents: Input should be a valid integer"), err
    with pytest.raises(RPCError, match="not found"):
        await client.get_workflow_handle(f"ticket-{raw['ticket_id']}").describe()


async def test_a_sender_verified_given_as_a_string_fails_the_run_naming_the_field(agent: Harness) -> None:
    """``"false"`` is not false: read laxly it would be, and ``"true"`` would vouch for a sender nobody verified."""
    async with agent.worker():
        handle = await agent.start({**ticket(), "sender_verified": "true"})
        with pytest.raises(WorkflowFailureError) as failure:
            await asyncio.wait_for(handle.result(), 30)

    error = failure.value.cause
    assert isinstance(error, ApplicationError)
    assert error.type == "InvalidTicketInput"
    assert error.message.startswith("Invalid ticket input: sender_verified: Input should be a valid boolean")


def integer_options() -> list[str]:
    """Every option of a ticket that holds an integer, as the model declares it: a new one is checked here too."""

    def holds_int(annotation: Any) -> bool:
        if get_origin(annotation) is Annotated:
            return holds_int(get_args(annotation)[0])
        return annotation is int or any(holds_int(arg) for arg in get_args(annotation))

    return [name for name, field in TicketOptions.model_fields.items() if holds_int(field.annotation)]


@pytest.mark.parametrize("option", integer_options())
@pytest.mark.parametrize("given", ["5", 5.0, True], ids=["string", "float", "boolean"])
def test_every_integer_option_of_a_ticket_refuses_another_json_type_naming_it(option: str, given: Any) -> None:
    with pytest.raises(ValidationError) as refused:
        TicketInput.model_validate_json(json.dumps({**ticket(), "options": {option: given}}))
    assert describe_errors(refused.value).startswith(f"options.{option}: Input should be a valid integer")
