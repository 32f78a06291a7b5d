"""Bad input, fuzzed against a real worker: tickets, approval signals and model outputs from hypothesis.

For every input: a clear error or a clear tool result, no run left with a failing workflow task, and no
refund that should not be. Each test counts the inputs it tried and checks the count, so the figure in
the README is what ran.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from activities.contracts import (
    APPROVE_SIGNAL,
    ApprovalDecision,
    ContentBlock,
    Decision,
    Order,
    TextBlock,
    ThinkRequest,
    ToolUseBlock,
)
from activities.scripted_model import ScriptedModel
from activities.store import BusinessStore
from tests.harness import Handle, Harness, awaiting, events, says, ticket

TRIED: Counter[str] = Counter()
FUZZ = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=3),
    max_leaves=6,
)
huge = st.integers(min_value=2**31, max_value=2**70) | st.integers(max_value=-1, min_value=-(2**70))
junk = json_values | huge | st.text(min_size=5000, max_size=20_000)


class FuzzModel:
    """Answers at once unless a test gave the ticket a script: scripted support, or fuzzed decisions."""

    name = "fuzz"

    def __init__(self, store: BusinessStore) -> None:
        self.scripted = ScriptedModel(store)
        self.plans: dict[str, list[Decision] | None] = {}

    async def decide(self, request: ThinkRequest) -> Decision:
        if request.ticket.ticket_id not in self.plans:
            return says("Thank you for your message.")
        plan = self.plans[request.ticket.ticket_id]
        if plan is None:
            return await self.scripted.decide(request)
        return plan[request.step - 1] if request.step <= len(plan) else says("Done.")


@pytest.fixture(scope="module")
async def fuzzing(dev_server: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Harness]:
    store = BusinessStore(Path(tmp_path_factory.mktemp("fuzz")) / "business.sqlite3").create()
    harness = Harness(dev_server.client, store, f"fuzz-{uuid.uuid4()}")
    harness.model = FuzzModel(store)  # type: ignore[attr-defined]
    async with harness.worker(harness.model):  # type: ignore[attr-defined]
        yield harness


async def no_failed_workflow_tasks(handle: Handle) -> None:
    assert await events(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED) == []


# --- tickets -------------------------------------------------------------------------------------------------

options = st.fixed_dictionaries(
    {},
    optional={
        "approval_limit_cents": st.integers() | junk,
        "approval_timeout_seconds": st.integers() | junk,
        "refund_key": st.sampled_from(["none", "per_tool_call", "per_order"]) | junk,
        "max_steps": st.integers(min_value=-5, max_value=20) | junk,
        "sla_seconds": st.integers() | junk,
        "approvers": st.lists(st.text(max_size=10), max_size=3) | junk,
    },
)
tickets = st.one_of(
    junk,
    st.fixed_dictionaries(
        {},
        optional={
            "ticket_id": st.text(max_size=20) | junk,
            "question": st.text(max_size=200) | junk,
            "customer_email": st.emails() | junk,
            "opened_at": st.datetimes().map(str) | junk,
            "options": options | junk,
            "extra": junk,
        },
    ),
)


@FUZZ
@given(raw=tickets)
async def test_fuzzed_tickets_fail_at_once_with_a_clear_error_or_run(fuzzing: Harness, raw: Any) -> None:
    TRIED["tickets"] += 1
    handle = await fuzzing.start(raw)
    error: BaseException | None = None
    try:
        await handle.result()
    except WorkflowFailureError as failure:
        error = failure.cause
    if error is not None:
        assert isinstance(error, ApplicationError)
        assert error.type == "InvalidTicketInput"
        assert error.message.startswith("Invalid ticket input: ")
    await no_failed_workflow_tasks(handle)


# --- approval signals ------------------------------------------------------------------------------------

approvals = st.one_of(
    junk,
    st.fixed_dictionaries(
        {},
        optional={
            "amount_cents": st.sampled_from([4900, 1000, 0, -4900]) | junk,
            "approved": st.booleans() | junk,
            "approver": st.text(max_size=20) | junk,
        },
    ),
)


@FUZZ
@given(payloads=st.lists(approvals, min_size=1, max_size=3))
async def test_fuzzed_approvals_release_nothing_unless_they_are_a_valid_answer_about_the_amount_shown(
    fuzzing: Harness, payloads: list[Any]
) -> None:
    TRIED["approval signals"] += len(payloads)
    order = Order(
        order_id=f"F-{10_000 + TRIED['approval signals']}", amount_cents=4900, customer_email="ann@example.com"
    )
    fuzzing.store.add_order(order)
    raw = ticket(f"My order {order.order_id} never arrived")
    fuzzing.model.plans[raw["ticket_id"]] = None  # type: ignore[attr-defined]
    handle = await fuzzing.start(raw)
    await awaiting(handle, 4900)
    for payload in payloads:
        await handle.signal(APPROVE_SIGNAL, payload)
    answers = [p for p in payloads if is_valid_answer_about(p, 4900)]
    if not answers:
        await awaiting(handle, 4900)  # still waiting: nothing above released it
        await handle.signal(APPROVE_SIGNAL, {"amount_cents": 4900, "approved": False, "approver": "fuzz"})
    outcome = await handle.result()

    await no_failed_workflow_tasks(handle)
    released = bool(answers) and answers[0]["approved"] is True
    assert [r.amount_cents for r in outcome.refunds] == ([4900] if released else [])
    assert [r.amount_cents for r in fuzzing.store.refunds(order.order_id)] == ([4900] if released else [])
    rejected = [a for a in outcome.approvals if a.decision is ApprovalDecision.REJECTED]
    assert len(rejected) == len(payloads) - len(answers[:1])


def is_valid_answer_about(payload: Any, amount: int) -> bool:
    return (
        isinstance(payload, dict)
        and set(payload) == {"amount_cents", "approved", "approver"}
        and type(payload["amount_cents"]) is int
        and payload["amount_cents"] == amount
        and type(payload["approved"]) is bool
        and isinstance(payload["approver"], str)
        and payload["approver"].strip() != ""
    )


# --- model outputs ---------------------------------------------------------------------------------------

tool_names = st.sampled_from(["lookup_order", "issue_refund", "send_email"]) | st.text(max_size=20)
tool_inputs = st.dictionaries(
    st.sampled_from(["order_id", "amount_cents", "to", "subject", "body"]) | st.text(max_size=8),
    st.sampled_from(["A-1001", "A-1002", "Z-1", "ann@example.com", "eve@example.com"])
    | st.integers(min_value=-10_000, max_value=100_000)
    | json_values,
    max_size=4,
)
blocks: st.SearchStrategy[ContentBlock] = st.one_of(
    st.builds(ToolUseBlock, id=st.uuids().map(str), name=tool_names, input=tool_inputs),
    st.builds(TextBlock, text=st.text(max_size=100)),
)
decisions = st.builds(
    Decision, content=st.lists(blocks, max_size=4), stop_reason=st.sampled_from(["tool_use", "end_turn", "???"])
)


@FUZZ
@given(plan=st.lists(decisions, min_size=1, max_size=4))
async def test_fuzzed_model_outputs_end_in_tool_results_and_never_in_a_refund_that_should_not_be(
    fuzzing: Harness, plan: list[Decision]
) -> None:
    TRIED["model outputs"] += len(plan)
    raw = ticket(approval_limit_cents=2000, approval_timeout_seconds=1, max_steps=5)
    fuzzing.model.plans[raw["ticket_id"]] = plan  # type: ignore[attr-defined]
    handle = await fuzzing.start(raw)
    outcome = await handle.result()

    await no_failed_workflow_tasks(handle)
    assert outcome.steps <= 5
    for refund in outcome.refunds:
        assert 0 < refund.amount_cents <= 2000  # nobody approved anything above the limit
    for order in ("A-1001", "A-1002"):
        paid = sum(r.amount_cents for r in fuzzing.store.refunds(order))
        assert paid <= fuzzing.store.order(order).amount_cents
    assert {e.to for e in fuzzing.store.emails()} <= {"ann@example.com"}


def test_the_fuzzers_tried_what_the_readme_says() -> None:
    """Runs last in this module: the counts behind the README's figures."""
    assert TRIED["tickets"] >= 40
    assert TRIED["approval signals"] >= 40
    assert TRIED["model outputs"] >= 40
