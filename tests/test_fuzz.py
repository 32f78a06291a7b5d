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

from activities.business import Business
from activities.business.orders import DEMO_ORDERS
from activities.contracts.approvals import ApprovalDecision
from activities.contracts.conversation import ContentBlock, Decision, TextBlock, ThinkRequest, ToolUseBlock
from activities.contracts.names import APPROVE_SIGNAL, WORKFLOW_NAME
from activities.contracts.ticket import Outcome
from activities.contracts.world import Order
from activities.scripted_model import ScriptedModel
from tests.support.fake_stripe import FakeStripe, pay_at_stripe, stripe_business
from tests.support.harness import Harness
from tests.support.history import events
from tests.support.models import says
from tests.support.smtp_server import MailServer, smtp_settings
from tests.support.tickets import Handle, answer, ticket
from tests.support.waits import awaiting

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

    def __init__(self, store: Business) -> None:
        self.scripted = ScriptedModel(store.model_calls)
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
    store = Business.sqlite(Path(tmp_path_factory.mktemp("fuzz")) / "business.sqlite3").create()
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


start_args = st.one_of(
    tickets.map(lambda raw: [raw]),
    st.lists(tickets | junk, max_size=3).filter(lambda args: len(args) != 1),  # none, or a forged second, or more
)


@FUZZ
@given(args=start_args)
async def test_fuzzed_tickets_fail_at_once_with_a_clear_error_or_run(fuzzing: Harness, args: list[Any]) -> None:
    TRIED["tickets"] += 1
    handle: Handle = await fuzzing.client.start_workflow(
        WORKFLOW_NAME, args=args, id=f"ticket-{uuid.uuid4()}", task_queue=fuzzing.task_queue, result_type=Outcome
    )
    error: BaseException | None = None
    try:
        await handle.result()
    except WorkflowFailureError as failure:
        error = failure.cause
    if error is not None:
        assert isinstance(error, ApplicationError)
        assert error.type == "InvalidTicketInput"
        assert error.message.startswith("Invalid ticket input: ")
    else:
        assert len(args) == 1, "only a ticket alone starts a run; a second argument is a continued run's"
    await no_failed_workflow_tasks(handle)


# --- approval signals ------------------------------------------------------------------------------------

look_alikes = st.sampled_from(["ann", "\u0430nn", "ANN", "ann ", "a\u200bnn", "\uff42en", "ben", "mallory", ""])
"""Approvers as they may be typed: a Cyrillic a (U+0430), a zero-width space, full-width letters, blanks."""
approvals = st.one_of(
    junk,
    st.fixed_dictionaries({"unreadable_payload": st.text(max_size=30)}),  # what the codec makes of ciphertext
    st.fixed_dictionaries(
        {},
        optional={
            "amount_cents": st.sampled_from([4900, 1000, 0, -4900, 2**63, 2**64 + 4900]) | junk,
            "approved": st.booleans() | junk,
            "approver": look_alikes | st.text(max_size=20) | junk,
            "request_id": st.sampled_from(["R1", "R2", "r1", ""]) | junk,
        },
    ),
)
signals = st.one_of(
    approvals.map(lambda payload: [payload]),
    st.lists(approvals, max_size=3).filter(lambda args: len(args) != 1),  # no input, or several
)


@FUZZ
@given(sent=st.lists(signals, min_size=1, max_size=3))
async def test_fuzzed_approvals_release_nothing_unless_they_are_a_valid_answer_about_the_amount_shown(
    fuzzing: Harness, sent: list[list[Any]]
) -> None:
    TRIED["approval signals"] += len(sent)
    payloads: list[Any] = [args[0] if len(args) == 1 else None for args in sent]  # None: no valid answer
    order = Order(
        order_id=f"F-{10_000 + TRIED['approval signals']}", amount_cents=4900, customer_email="ann@example.com"
    )
    fuzzing.store.orders.add(order)
    raw = ticket(f"My order {order.order_id} never arrived")
    fuzzing.model.plans[raw["ticket_id"]] = None  # type: ignore[attr-defined]
    handle = await fuzzing.start(raw)
    await awaiting(handle, 4900)
    for args in sent:
        await handle.signal(APPROVE_SIGNAL, args=args)
    answers: list[dict[str, Any]] = [p for p in payloads if is_valid_answer_about(p, 4900)]
    if not answers:
        await awaiting(handle, 4900)  # still waiting: nothing above released it
        await handle.signal(APPROVE_SIGNAL, answer(4900, approved=False, approver="fuzz"))
    outcome = await handle.result()

    await no_failed_workflow_tasks(handle)
    released = bool(answers) and answers[0]["approved"] is True
    assert [r.amount_cents for r in outcome.refunds] == ([4900] if released else [])
    assert [r.amount_cents for r in fuzzing.store.payments.refunds(order.order_id)] == ([4900] if released else [])
    rejected = [a for a in outcome.approvals if a.decision is ApprovalDecision.REJECTED]
    assert len(rejected) == len(payloads) - len(answers[:1])


def is_valid_answer_about(payload: Any, amount: int) -> bool:
    """The rules as the README states them, for the only request of these tickets (R1): one JSON object, its
    fields and no others, the amount shown, a non-blank approver (anyone may approve: the worker names
    nobody), and the request's id or none."""
    return (
        isinstance(payload, dict)
        and set(payload) - {"request_id"} == {"amount_cents", "approved", "approver"}
        and type(payload["amount_cents"]) is int
        and payload["amount_cents"] == amount
        and type(payload["approved"]) is bool
        and isinstance(payload["approver"], str)
        and 0 < len(payload["approver"].strip()) <= 200
        and payload.get("request_id") in (None, "R1")
    )


# --- model outputs ---------------------------------------------------------------------------------------

tool_names = st.sampled_from(["lookup_order", "issue_refund", "send_email", "order_events"]) | st.text(max_size=20)
addresses = st.sampled_from(
    [
        "ann@example.com",
        "ANN@Example.com",
        "eve@example.com",
        "ann@ex\u0430mple.com",
        "ann@example.com.evil.io",
        "ann@example.com\nBcc: eve@example.com",
        "\uff45ve@example.com",
        "dev@example.com",
    ]
)
"""The customer's address, and what a steered model writes instead: a Cyrillic a (U+0430), full-width letters, an
injected header, another customer."""
tool_inputs = st.dictionaries(
    st.sampled_from(["order_id", "amount_cents", "to", "subject", "body"]) | st.text(max_size=8),
    st.sampled_from(["A-1001", "A-1002", "A-1004", "A-1005", "Z-1"])
    | addresses
    | st.integers(min_value=-10_000, max_value=100_000)
    | st.integers(min_value=2**31 - 2, max_value=2**70)
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
    for order in ("A-1001", "A-1005"):
        paid = sum(r.amount_cents for r in fuzzing.store.payments.refunds(order))
        assert paid <= fuzzing.store.orders.order(order).amount_cents
    for order in ("A-1002", "A-1003", "A-1004"):  # other customers' orders: never refunded on ann's tickets
        assert fuzzing.store.payments.refunds(order) == []
    assert {e.to for e in fuzzing.store.mail.sent()} <= {"ann@example.com"}  # the address itself, never a look-alike
    assert all("dev@example.com" not in c.result for c in outcome.tool_calls)


@pytest.fixture(scope="module")
async def fuzzing_real(
    dev_server: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[Harness, FakeStripe, MailServer]]:
    """A worker that refunds through Stripe's API (the local fake) and mails through an SMTP server, every demo
    order paid at Stripe."""
    with FakeStripe().running() as account, MailServer().running() as mail:
        folder = Path(tmp_path_factory.mktemp("fuzz-real"))
        store = stripe_business(account, folder, {"smtp": smtp_settings(mail)}).create()
        payments = pay_at_stripe(account, store, *(order.order_id for order in DEMO_ORDERS))
        harness = Harness(dev_server.client, store, f"fuzz-real-{uuid.uuid4()}")
        harness.model = FuzzModel(store)  # type: ignore[attr-defined]
        harness.payments = payments  # type: ignore[attr-defined]
        async with harness.worker(harness.model):  # type: ignore[attr-defined]
            yield harness, account, mail


@settings(FUZZ, max_examples=20)
@given(plan=st.lists(decisions, min_size=1, max_size=4))
async def test_fuzzed_model_outputs_against_stripe_and_an_smtp_server_pay_and_mail_only_what_they_may(
    fuzzing_real: tuple[Harness, FakeStripe, MailServer], plan: list[Decision]
) -> None:
    """The same outputs, with the side effects counted where a real provider counts them: at Stripe's API and
    at the mail server."""
    harness, account, mail = fuzzing_real
    TRIED["model outputs against Stripe and SMTP"] += len(plan)
    raw = ticket(approval_limit_cents=2000, approval_timeout_seconds=1, max_steps=5)
    harness.model.plans[raw["ticket_id"]] = plan  # type: ignore[attr-defined]
    handle = await harness.start(raw)
    outcome = await handle.result()

    await no_failed_workflow_tasks(handle)
    for refund in outcome.refunds:
        assert 0 < refund.amount_cents <= 2000
    payments: dict[str, str] = harness.payments  # type: ignore[attr-defined]
    at_stripe = account.refunds()
    for order in ("A-1002", "A-1003", "A-1004"):  # other customers' orders: never refunded on ann's tickets
        assert [r for r in at_stripe if r["payment_intent"] == payments[order]] == []
    assert all(r["amount"] <= 2000 for r in at_stripe)
    assert {rcpt for received in mail.messages() for rcpt in received.rcpt_tos} <= {"ann@example.com"}


def test_the_fuzzers_tried_what_the_readme_says() -> None:
    """Runs last in this module: the counts behind the README's figures."""
    assert TRIED["tickets"] >= 40
    assert TRIED["approval signals"] >= 40
    assert TRIED["model outputs"] >= 40
    assert TRIED["model outputs against Stripe and SMTP"] >= 20
