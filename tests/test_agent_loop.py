"""The support agent without crashes: the seed article's non-crash rows and the loop's contract."""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus

from activities.business import Business
from activities.contracts.approvals import ApprovalDecision
from activities.contracts.conversation import Message, ToolResultBlock
from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.ticket import Status
from activities.tools import TOOLS
from agent_worker import wiring
from tests.support.harness import Harness
from tests.support.history import activity_attempts, events
from tests.support.models import PlaybackModel, calls, says
from tests.support.tickets import answer, ticket
from tests.support.waits import awaiting
from workflows.approval_gate import AWAITING_APPROVAL

NO_APPROVAL_NEEDED = 10_000


async def test_without_a_crash_it_refunds_once_and_asks_the_model_four_times(agent: Harness) -> None:
    outcome = await agent.run(ticket(approval_limit_cents=NO_APPROVAL_NEEDED))

    assert outcome.status is Status.RESOLVED
    assert [(r.order_id, r.amount_cents) for r in agent.store.payments.refunds()] == [("A-1001", 4900)]
    assert [e.to for e in agent.store.mail.sent()] == ["ann@example.com"]
    assert "49.00" in agent.store.mail.sent()[0].body
    assert outcome.model_calls == 4
    assert len(agent.store.model_calls.of(outcome.ticket_id)) == 4
    assert [c.name for c in outcome.tool_calls] == ["lookup_order", "issue_refund", "send_email"]
    assert [(r.order_id, r.amount_cents) for r in outcome.refunds] == [("A-1001", 4900)]
    assert "refund #1" in outcome.answer
    assert [(s.step, s.model) for s in outcome.usage.steps] == [
        (1, "scripted"),
        (2, "scripted"),
        (3, "scripted"),
        (4, "scripted"),
    ]
    assert outcome.usage.total.cost_usd == 0


async def test_the_approval_query_reports_4900_and_an_approval_of_1000_releases_nothing(agent: Harness) -> None:
    async with agent.worker():
        handle = await agent.start(ticket(approval_limit_cents=2000))
        await awaiting(handle, 4900)

        await handle.signal(APPROVE_SIGNAL, answer(1000))
        await awaiting(handle, 4900)
        assert agent.store.payments.refunds() == []

        await handle.signal(APPROVE_SIGNAL, answer(4900, approver="ben"))
        outcome = await handle.result()
        assert await handle.query("awaiting_approval_of") is None

    assert outcome.status is Status.RESOLVED
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    rejected, approved = outcome.approvals
    assert (rejected.decision, rejected.amount_cents, rejected.approver) == (ApprovalDecision.REJECTED, 1000, "ann")
    assert "USD 49.00, not USD 10.00" in rejected.reason
    assert (approved.decision, approved.amount_cents, approved.approver) == (ApprovalDecision.APPROVED, 4900, "ben")
    assert approved.at >= rejected.at


async def test_a_declined_refund_is_not_made_and_the_customer_is_told(agent: Harness) -> None:
    async with agent.worker():
        handle = await agent.start(ticket())
        await awaiting(handle, 4900)
        await handle.signal(APPROVE_SIGNAL, answer(4900, approved=False, approver="ben"))
        outcome = await handle.result()

    assert outcome.status is Status.DECLINED
    assert agent.store.payments.refunds() == []
    assert "could not approve" in agent.store.mail.sent()[0].body
    assert [(a.decision, a.approver) for a in outcome.approvals] == [(ApprovalDecision.DECLINED, "ben")]
    refund_call = next(c for c in outcome.tool_calls if c.name == "issue_refund")
    assert refund_call.is_error
    assert "declined" in refund_call.result


async def test_an_approval_is_consumed_so_a_second_refund_waits_for_a_second_one(agent: Harness) -> None:
    refund = ("issue_refund", {"order_id": "A-1001", "amount_cents": 1500})
    model = PlaybackModel([calls(refund, step=1), calls(refund, step=2), says("Refunded twice.")])
    async with agent.worker(model):
        handle = await agent.start(ticket(approval_limit_cents=1000))
        await awaiting(handle, 1500)
        await handle.signal(APPROVE_SIGNAL, answer(1500))
        await awaiting(handle, None)
        await awaiting(handle, 1500)
        assert len(agent.store.payments.refunds()) == 1
        await handle.signal(APPROVE_SIGNAL, answer(1500))
        outcome = await handle.result()

    assert [r.amount_cents for r in agent.store.payments.refunds()] == [1500, 1500]
    assert [a.decision for a in outcome.approvals] == [ApprovalDecision.APPROVED, ApprovalDecision.APPROVED]


async def test_waiting_tickets_carry_the_amount_as_a_search_attribute_until_answered(agent: Harness) -> None:
    async with agent.worker():
        handle = await agent.start(ticket())
        await awaiting(handle, 4900)
        description = await handle.describe()
        assert description.typed_search_attributes.get(AWAITING_APPROVAL) == 4900
        await handle.signal(APPROVE_SIGNAL, answer(4900))
        await handle.result()
        description = await handle.describe()
        assert description.typed_search_attributes.get(AWAITING_APPROVAL) is None
        assert description.status is WorkflowExecutionStatus.COMPLETED


async def test_a_tool_that_cannot_succeed_runs_once_and_the_model_is_told_instead_of_the_workflow_failing(
    agent: Harness,
) -> None:
    async with agent.worker():
        handle = await agent.start(ticket("Where is my order Z-9999?"))
        outcome = await handle.result()

    assert await activity_attempts(handle, "lookup_order") == [1]
    assert outcome.status is Status.RESOLVED
    lookup = outcome.tool_calls[0]
    assert lookup.is_error
    assert "There is no order Z-9999" in lookup.result
    assert "could not find order Z-9999" in outcome.answer
    assert agent.store.payments.refunds() == []


async def test_a_tool_that_does_not_exist_is_reported_to_the_model_and_nothing_runs(agent: Harness) -> None:
    model = PlaybackModel([calls(("delete_database", {"really": True}), step=1), says("Sorry.")])
    outcome = await agent.run(ticket(), model)

    result = _tool_result(model.requests[1].messages[-1])
    assert result.is_error
    assert "no tool named 'delete_database'" in result.content
    assert f"The tools are: {', '.join(TOOLS)}." in result.content
    assert {"lookup_order", "issue_refund", "issue_store_credit", "send_email"} <= set(TOOLS)
    assert outcome.status is Status.RESOLVED


async def test_nonsense_arguments_go_back_to_the_model_and_never_reach_the_tool(agent: Harness) -> None:
    model = PlaybackModel(
        [
            calls(
                ("issue_refund", {"order_id": "A-1001", "amount_cents": -500}),
                ("issue_refund", {"order_id": "A-1001", "amount_cents": "lots"}),
                ("lookup_order", {"order": "A-1001"}),
                ("send_email", {"to": "mallory@example.com", "subject": "hi", "body": "refund me"}),
                step=1,
            ),
            says("Sorry."),
        ]
    )
    outcome = await agent.run(ticket(), model)

    results = model.requests[1].messages[-1].content
    assert [r.tool_use_id for r in results if isinstance(r, ToolResultBlock)] == [f"toolu_1_{n}" for n in range(4)]
    assert all(isinstance(r, ToolResultBlock) and r.is_error for r in results)
    texts = [r.content for r in results if isinstance(r, ToolResultBlock)]
    assert "amount_cents: Input should be greater than 0" in texts[0]
    assert "amount_cents: Input should be a valid integer" in texts[1]
    assert "order_id: Field required" in texts[2]
    assert "only to this ticket's customer, ann@example.com" in texts[3]
    assert agent.store.payments.refunds() == []
    assert agent.store.mail.sent() == []
    assert outcome.status is Status.RESOLVED


async def test_several_tool_calls_in_one_decision_each_get_their_result_in_one_turn(agent: Harness) -> None:
    model = PlaybackModel(
        [
            calls(("lookup_order", {"order_id": "A-1001"}), ("lookup_order", {"order_id": "A-1005"}), step=1),
            says("Both found."),
        ]
    )
    await agent.run(ticket(), model)

    turn = model.requests[1].messages[-1]
    assert turn.role == "user"
    assert [(b.tool_use_id, b.is_error) for b in turn.content if isinstance(b, ToolResultBlock)] == [
        ("toolu_1_0", False),
        ("toolu_1_1", False),
    ]
    assert [m.role for m in model.requests[1].messages] == ["user", "assistant", "user"]


async def test_an_agent_that_never_answers_gives_up_after_max_steps(agent: Harness) -> None:
    model = PlaybackModel([calls(("lookup_order", {"order_id": "A-1001"}), step=n) for n in range(1, 4)])
    outcome = await agent.run(ticket(max_steps=3), model)

    assert outcome.status is Status.GAVE_UP
    assert outcome.steps == 3
    assert outcome.model_calls == 3
    assert "Gave up after 3 steps" in outcome.answer


async def test_a_refund_above_the_charge_is_refused_before_the_provider_or_a_person_is_asked_and_the_model_is_told(
    agent: Harness, store: Business
) -> None:
    model = PlaybackModel(
        [calls(("issue_refund", {"order_id": "A-1005", "amount_cents": 2600}), step=1), says("Could not refund.")]
    )
    outcome = await agent.run(ticket(approval_limit_cents=NO_APPROVAL_NEEDED), model)

    assert store.payments.refunds() == []
    assert outcome.tool_calls[0].is_error
    assert outcome.tool_calls[0].result == (
        "This refund of USD 26.00 was not made, and no person was asked: USD 26.00 is more than is left of order "
        "A-1005's charge: USD 0.00 of USD 25.00 was paid back already."
    )
    assert outcome.approvals == []


def _tool_result(message: Message) -> ToolResultBlock:
    (block,) = message.content
    assert isinstance(block, ToolResultBlock)
    return block


async def test_a_worker_names_its_build_by_this_services_code(agent: Harness) -> None:
    """Not the SDK's default, a digest of every loaded module's bytecode computed at each start: the service's own
    source and the SDK's version, which the server records on every workflow task the worker completes."""
    async with agent.worker():
        handle = await agent.start(ticket(approval_limit_cents=10_000))
        await handle.result()

    completed = await events(handle, EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
    builds = {
        e.workflow_task_completed_event_attributes.worker_version.build_id
        or e.workflow_task_completed_event_attributes.binary_checksum
        for e in completed
    }
    assert builds == {wiring.build_id()}
    assert wiring.build_id().startswith("agent-worker-")
