"""A tool is declared once (``activities.tools.TOOLS``), and everything else is read from the declaration: what
the model is offered, how the workflow dispatches a call, what the worker registers. ``shipping_status`` was
added by its declaration and its activity body alone; here it answers on a real worker."""

from __future__ import annotations

import inspect
import re
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.business import Business
from activities.claude_model import tool_definitions
from activities.content_store import ContentStore
from activities.contracts.names import NEEDS_APPROVAL
from activities.contracts.policy import Limits
from activities.contracts.world import RefundRequest
from activities.tools import TOOLS, Effect, ToolActivities
from agent_worker.config import Settings
from agent_worker.worker import ClientTimeoutError, attempts, build_worker, check_client_timeouts
from tests.support.harness import Harness
from tests.support.models import PlaybackModel, calls, says
from tests.support.tickets import ticket
from workflows import policies
from workflows.tools import Toolbox


def test_every_declared_tool_is_offered_to_the_model_as_declared() -> None:
    offered = tool_definitions()
    assert [t["name"] for t in offered] == list(TOOLS)
    for definition, tool in zip(offered, TOOLS.values(), strict=True):
        assert definition["description"] == inspect.cleandoc(tool.args.__doc__ or "")
        assert definition["input_schema"] == tool.args.model_json_schema()


def test_the_workflow_has_a_step_for_every_effect() -> None:
    assert set(Toolbox.STEPS) == set(Effect)


def test_every_tool_activity_is_a_temporal_activity_and_counts_towards_the_longest_attempt() -> None:
    for tool in TOOLS.values():
        if tool.activity is None:
            continue
        assert hasattr(tool.activity, "__temporal_activity_definition"), tool.name
        assert tool.config is not None, tool.name
        assert tool.config in policies.ALL, tool.name


async def test_the_read_only_tools_answer_on_a_real_worker_and_only_about_the_customers_orders(
    agent: Harness,
) -> None:
    agent.store.orders.add_event("A-1001", "shipped from the warehouse")
    agent.store.orders.add_event("A-1001", "scanned at the Leeds depot")
    reads = [(name, {"order_id": "A-1001"}) for name, tool in TOOLS.items() if tool.effect.reads_only]
    model = PlaybackModel([
        calls(*reads, step=1),
        calls(("shipping_status", {"order_id": "A-1004"}), step=2),  # dev's order, not ann's
        says("done"),
    ])  # fmt: skip
    outcome = await agent.run(ticket(), model)

    results = {c.name: c for c in outcome.tool_calls if c.step == 1}
    assert set(results) == {name for name, _ in reads} == {"lookup_order", "order_events", "shipping_status"}
    assert not any(c.is_error for c in results.values()), results
    assert results["shipping_status"].result == "Latest for order A-1001: scanned at the Leeds depot (2 events in all)."
    (other,) = (c for c in outcome.tool_calls if c.step == 2)
    assert (other.is_error, other.result) == (True, "The tool failed: There is no order A-1004")


@pytest.mark.parametrize(
    ("setting", "activity"),
    [
        ("anthropic_timeout_seconds", "think"),
        ("stripe_timeout_seconds", "issue_refund"),
        ("smtp_timeout_seconds", "send_email"),
    ],
)
def test_a_client_timeout_that_would_outlive_its_activitys_attempt_stops_the_worker_naming_both(
    setting: str, activity: str
) -> None:
    """Every provider's client gives up before the attempt it runs in, checked in one place against the activities'
    own timeouts, whether the provider is in use or not."""
    attempt = attempts()[activity].total_seconds()
    said = f"AGENT_{setting.upper()}={attempt:g} is not below the {activity} activity's attempt (start_to_close_timeout"
    with pytest.raises(ClientTimeoutError, match=re.escape(f"{said} {attempt:g} s)")):
        check_client_timeouts(Settings(**{setting: attempt}))
    check_client_timeouts(Settings(**{setting: attempt - 0.5}))


async def test_the_worker_is_not_built_with_an_anthropic_timeout_as_long_as_a_think_attempt(client: Client) -> None:
    """The SDK's request timeout at the ``think`` activity's two minutes: a slow call would outlive its attempt."""
    assert attempts()["think"] == policies.THINK["start_to_close_timeout"] == timedelta(minutes=2)
    check_client_timeouts(Settings())  # the defaults fit
    with pytest.raises(ClientTimeoutError, match=r"AGENT_ANTHROPIC_TIMEOUT_SECONDS=120 is not below the think"):
        build_worker(client, Settings(anthropic_timeout_seconds=120))


async def test_a_refund_without_a_person_past_a_limit_fails_issue_refund_at_once_as_needs_approval_naming_it(
    tmp_path: Path,
) -> None:
    """The workflow tells this failure from every other by its type, and cites its message to the person asked."""
    store = Business.sqlite(tmp_path / "business.sqlite3").create()
    tools = ToolActivities(
        orders=store.orders, payments=store.payments, mail=store.mail, audit=store.audit,
        content=ContentStore(store.blobs),
    )  # fmt: skip
    request = RefundRequest(
        order_id="A-1001", amount_cents=4900, idempotency_key="refund:ticket:T-1/A-1001/1",
        customer_email="ann@example.com", limits=Limits(customer_cents_per_day=1000),
    )  # fmt: skip

    with pytest.raises(ApplicationError) as refused:
        await ActivityEnvironment().run(tools.issue_refund, request)

    assert (refused.value.type, refused.value.non_retryable) == (NEEDS_APPROVAL, True)
    assert refused.value.message == (
        "ann@example.com's refunds without a person in the last 24 hours: 49.00 of 10.00 with this one"
    )
    assert refused.value.details == (["customer_cents_per_day"],)
    assert store.payments.refunds() == []
    store.close()
