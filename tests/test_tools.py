"""A tool is declared once (``activities.tools``), and what the product does with it follows: a worker built the
product's way offers it to the model and runs it under its rule, by the activity registered under its name. These
tests drive real workers and a real (fake-served) Messages API, so a declaration the worker does not register,
the model is not offered, or the workflow cannot run, fails them."""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.business import Business
from activities.content_store import ContentStore
from activities.contracts.names import NEEDS_APPROVAL, ORDER_EVENT_SIGNAL, WORKFLOW_NAME
from activities.contracts.policy import Limits
from activities.contracts.ticket import Outcome, Status
from activities.contracts.world import RefundRequest
from activities.reconciliation import Reconciliation
from activities.tool_activities import ToolActivities
from activities.tools import TOOLS
from agent_worker.config.model_settings import ClaudeSettings
from tests.support.fake_messages_api import FakeMessagesAPI, message, text, tool_use
from tests.support.harness import Harness
from tests.support.history import activity_attempts
from tests.support.models import PlaybackModel, calls, says
from tests.support.processes import AGENT_WORKER, run
from tests.support.tickets import ticket

SAMPLE_CALLS: dict[str, dict[str, Any]] = {
    "lookup_order": {"order_id": "A-1001"},
    "issue_refund": {"order_id": "A-1001", "amount_cents": 500},
    "issue_store_credit": {"order_id": "A-1005", "amount_cents": 500},
    "send_email": {"to": "ann@example.com", "subject": "Your order", "body": "It is on its way."},
    "order_events": {"order_id": "A-1001"},
    "wait_for_delivery_scan": {"order_id": "A-1001", "hours": 1},
    "shipping_status": {"order_id": "A-1001"},
}
"""A valid call of each tool on ann's orders, each on an order of its own where it pays, so that none needs a
person under the ticket's limit. A tool declared without one here fails the first test."""


async def test_every_declared_tool_is_offered_to_claude_and_runs_on_a_worker_built_the_products_way(
    agent: Harness, fake_api: FakeMessagesAPI
) -> None:
    assert set(SAMPLE_CALLS) == set(TOOLS), "a declared tool has no sample call here (or a sample names none)"
    fake_api.script(
        *(message(tool_use(name, **args), stop_reason="tool_use") for name, args in SAMPLE_CALLS.items()),
        message(text("All done.")),
    )
    # the worker chooses Claude from the environment itself
    async with agent.worker(claude=ClaudeSettings(backend="auto")):
        handle = await agent.client.start_workflow(
            WORKFLOW_NAME,
            ticket(approval_limit_cents=10_000),
            id=f"ticket-{uuid.uuid4()}",
            task_queue=agent.task_queue,
            result_type=Outcome,
            start_signal=ORDER_EVENT_SIGNAL,
            start_signal_args=[{"order_id": "A-1001", "event": "out_for_delivery"}],
        )
        outcome = await handle.result()

    offered = {t["name"]: t for t in fake_api.requests[0].body["tools"]}
    assert set(offered) == set(SAMPLE_CALLS)
    for name, tool in offered.items():
        assert tool["description"], name
        assert set(SAMPLE_CALLS[name]) <= set(tool["input_schema"]["properties"]), name
    results = {c.name: c for c in outcome.tool_calls}
    assert set(results) == set(SAMPLE_CALLS)
    assert not [c for c in results.values() if c.is_error], results
    for name in SAMPLE_CALLS:
        if TOOLS[name].returns is not None:  # its activity ran under the tool's name, each time at the first attempt
            attempts = await activity_attempts(handle, name)  # lookup_order also runs for an ownership check
            assert attempts, name
            assert set(attempts) == {1}, (name, attempts)
    assert (outcome.status, outcome.answer) == (Status.RESOLVED, "All done.")
    assert [(r.order_id, r.amount_cents) for r in agent.store.payments.refunds()] == [("A-1001", 500)]
    assert [(c.order_id, c.amount_cents) for c in agent.store.credits.credits()] == [("A-1005", 500)]
    assert [e.subject for e in agent.store.mail.sent()] == ["Your order"]


def test_a_worker_without_an_implementation_of_a_declared_tool_or_its_settlement_refuses_to_start(
    tmp_path: Path,
) -> None:
    store = Business.sqlite(tmp_path / "business.sqlite3").create()

    class Forgetful(ToolActivities):
        shipping_status = None  # type: ignore[assignment] # a release that lost the tool's implementation

    class Unsettled(Reconciliation):
        find_refund = None  # type: ignore[assignment]

    with pytest.raises(LookupError, match="implements no activity for the tool shipping_status"):
        Forgetful.over(store, ContentStore(store.blobs), in_force=None).all()
    with pytest.raises(LookupError, match="implements no activity for settling find_refund"):
        Unsettled.over(store).all()
    store.close()


async def test_the_read_only_tools_answer_on_a_real_worker_and_only_about_the_customers_orders(
    agent: Harness,
) -> None:
    """The order's log is what an operator added (``agent-worker orders event``), read by the tools."""
    for said in ("shipped from the warehouse", "scanned at the Leeds depot"):
        added = await run(AGENT_WORKER, "orders", "event", "A-1001", said, env=desk_env(agent))
    assert added.splitlines() == ["shipped from the warehouse", "scanned at the Leeds depot"]
    reads = [(name, {"order_id": "A-1001"}) for name, tool in TOOLS.items() if tool.rule.reads_only]
    model = PlaybackModel(
        [
            calls(*reads, step=1),
            calls(("shipping_status", {"order_id": "A-1004"}), step=2),  # dev's order, not ann's
            says("done"),
        ]
    )
    outcome = await agent.run(ticket(), model)

    results = {c.name: c for c in outcome.tool_calls if c.step == 1}
    assert set(results) == {name for name, _ in reads} == {"lookup_order", "order_events", "shipping_status"}
    assert not any(c.is_error for c in results.values()), results
    assert results["shipping_status"].result == "Latest for order A-1001: scanned at the Leeds depot (2 events in all)."
    (other,) = (c for c in outcome.tool_calls if c.step == 2)
    assert (other.is_error, other.result) == (True, "The tool failed: There is no order A-1004")


async def test_a_refund_without_a_person_past_a_limit_fails_issue_refund_at_once_as_needs_approval_naming_it(
    tmp_path: Path,
) -> None:
    """The workflow tells this failure from every other by its type, and cites its message to the person asked."""
    store = Business.sqlite(tmp_path / "business.sqlite3").create()
    tools = ToolActivities.over(store, ContentStore(store.blobs), in_force=None)
    request = RefundRequest(
        order_id="A-1001",
        amount_cents=4900,
        idempotency_key="refund:ticket:T-1/A-1001/1",
        customer_email="ann@example.com",
        limits=Limits(customer_cents_per_day=1000),
    )

    with pytest.raises(ApplicationError) as refused:
        await ActivityEnvironment().run(tools.issue_refund, request)

    assert (refused.value.type, refused.value.non_retryable) == (NEEDS_APPROVAL, True)
    assert refused.value.message == (
        "ann@example.com's refunds without a person in the last 24 hours: USD 49.00 of USD 10.00 with this one"
    )
    assert refused.value.details == (["customer_cents_per_day"],)
    assert store.payments.refunds() == []
    store.close()


def desk_env(agent: Harness) -> dict[str, str]:
    return {"AGENT_DB_PATH": str(agent.store.database.path)}


async def test_an_event_for_an_order_that_does_not_exist_or_of_more_than_one_line_is_refused_adding_nothing(
    agent: Harness,
) -> None:
    said = []
    for args in (["A-9999", "scanned"], ["A-1001", "scanned\nand lost"], ["A-1001", "   "]):
        process = await asyncio.create_subprocess_exec(
            AGENT_WORKER,
            "orders",
            "event",
            *args,
            env={**os.environ, **desk_env(agent)},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await process.communicate()
        assert process.returncode == 1, args
        said.append(err.decode().strip())
    assert said == [
        "not added: There is no order A-9999",
        "not added: an event is one line of text",
        "not added: an event is one line of text",
    ]
    assert agent.store.orders.events("A-1001") == []


async def test_a_refusal_that_answers_the_customer_is_not_logged_as_a_warning_with_a_traceback(
    agent: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """No such order is the model's answer, not trouble: the worker's log (and the eval runner's stderr) keeps
    the one ``refused`` line for it, not the SDK's warning with a whole traceback. A refusal that needs a person
    (the provider refusing the worker's key) would keep it."""
    model = PlaybackModel([calls(("lookup_order", {"order_id": "A-9999"}), step=1), says("There is no such order.")])
    with caplog.at_level(logging.WARNING):
        outcome = await agent.run(ticket("Where is my order A-9999?"), model)
    (refused,) = outcome.tool_calls
    assert (refused.is_error, refused.result) == (True, "The tool failed: There is no order A-9999")
    assert [(r.name, r.getMessage()) for r in caplog.records if r.exc_info] == []
