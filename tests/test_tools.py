"""A tool is declared once (``activities.tools.TOOLS``), and everything else is read from the declaration: what
the model is offered, how the workflow dispatches a call, what the worker registers. ``shipping_status`` was
added by its declaration and its activity body alone; here it answers on a real worker."""

from __future__ import annotations

import inspect

from activities.claude_model import tool_definitions
from activities.tools import TOOLS, Effect
from tests.support.harness import Harness
from tests.support.models import PlaybackModel, calls, says
from tests.support.tickets import ticket
from workflows import policies
from workflows.patches import Patch
from workflows.tools import Toolbox


def test_every_declared_tool_is_offered_to_the_model_as_declared() -> None:
    offered = tool_definitions()
    assert [t["name"] for t in offered] == list(TOOLS)
    for definition, tool in zip(offered, TOOLS.values(), strict=True):
        assert definition["description"] == inspect.cleandoc(tool.args.__doc__ or "")
        assert definition["input_schema"] == tool.args.model_json_schema()


def test_the_workflow_has_a_step_for_every_effect_and_each_tool_arrived_under_a_patch_it_names() -> None:
    assert set(Toolbox.STEPS) == set(Effect)
    for tool in TOOLS.values():
        assert tool.since is None or tool.since in {p.value for p in Patch}, tool.name


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


def test_a_mail_servers_delivery_must_fit_in_one_attempt_of_send_email() -> None:
    """The settings bound the SMTP timeout without importing the tools (cold start); this holds the bound to them."""
    from annotated_types import Lt  # noqa: PLC0415

    from activities.tools import MAIL_ATTEMPT  # noqa: PLC0415
    from agent_worker.config import Settings  # noqa: PLC0415

    (bound,) = [m.lt for m in Settings.model_fields["smtp_timeout_seconds"].metadata if isinstance(m, Lt)]
    assert bound == MAIL_ATTEMPT.total_seconds()
