"""Long tickets without history blow-up: large results out of band, linear history, continue-as-new."""

from __future__ import annotations

from dataclasses import dataclass

from temporalio.client import WorkflowExecutionStatus

from activities.content_store import ContentStore
from activities.contracts.conversation import Decision, ThinkRequest, Usage
from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.ticket import Status
from tests.support.harness import Harness
from tests.support.history import activity_attempts, measure
from tests.support.long_tickets import (
    BYTES_PER_TOKEN,
    EVENT_LOG_BYTES,
    ContextBoundModel,
    LongTicketModel,
    long_ticket,
    seed_long_orders,
)
from tests.support.outcomes import complete
from tests.support.tickets import answer, ticket
from tests.support.waits import awaiting, poll, waiting_request


async def test_a_fifty_step_ticket_with_20_kb_tool_outputs_keeps_its_history_under_1_mb(agent: Harness) -> None:
    """Each step's event log (20 KB) is stored out of band and think gets only what is new."""
    seed_long_orders(agent.store, 50)
    async with agent.worker(LongTicketModel(50)):
        handle = await agent.start(long_ticket(50))
        outcome = await handle.result()
    assert (outcome.status, outcome.steps) == (Status.RESOLVED, 50), outcome.answer
    size = await measure(agent.client, handle.id, None)
    assert size.history_bytes < 1024 * 1024
    assert size.largest_payload < 64 * 1024
    assert max(size.think_bytes) < 2 * min(size.think_bytes), "think's bytes per step do not grow with the ticket"
    assert all(call.result_ref and call.result_ref.startswith("sha256:") for call in outcome.tool_calls)


async def test_a_ticket_that_continues_as_new_while_a_refund_waits_still_answers_the_query_and_refunds_once(
    agent: Harness,
) -> None:
    """The run continues as new mid-approval; the next run waits on and the approval sent to it is used."""
    async with agent.worker():
        handle = await agent.start(ticket(continue_as_new_after_steps=2))
        await awaiting(handle, 4900)
        first = agent.client.get_workflow_handle(handle.id, run_id=handle.first_execution_run_id)

        async def continued() -> bool:
            return (await first.describe()).status == WorkflowExecutionStatus.CONTINUED_AS_NEW

        await poll(continued, timeout=20, interval=0.05, what="the first run to continue as new")
        request = await waiting_request(handle)
        assert request is not None
        assert (request.request_id, request.amount_cents) == ("R1", 4900)
        # Only the run that waits is listed: the closed one cleared the attribute as it continued.
        listing = f"WorkflowId = '{handle.id}' AND AwaitingApprovalCents > 0"

        async def one_listed() -> list[str] | None:  # visibility is eventually consistent
            listed = [w.run_id async for w in agent.client.list_workflows(listing)]
            return listed if len(listed) == 1 else None

        listed = await poll(one_listed, timeout=20, what="one run listed as waiting")
        assert listed == [latest_run := (await handle.describe()).run_id]
        assert latest_run != handle.first_execution_run_id
        await handle.signal(APPROVE_SIGNAL, answer(4900))
        outcome = await handle.result()
    assert outcome.status == Status.RESOLVED
    assert [r.amount_cents for r in agent.store.payments.refunds("A-1001")] == [4900]
    assert [r.amount_cents for r in outcome.refunds] == [4900]
    assert [(a.decision.value, a.approver) for a in outcome.approvals] == [("approved", "ann")]
    assert outcome.model_calls == outcome.steps == 4
    # The first run handed its records to the content store as it continued; the outcome carries the last
    # run's, and the archive's key, from which the whole ticket comes back in order.
    assert [(c.step, c.name) for c in outcome.tool_calls] == [(2, "issue_refund"), (3, "send_email")]
    assert [u.step for u in outcome.usage.steps] == [3, 4]
    assert outcome.archive_ref is not None
    whole = complete(ContentStore(agent.store.blobs), outcome)
    assert [(c.step, c.name) for c in whole.tool_calls] == [(1, "lookup_order"), (2, "issue_refund"), (3, "send_email")]
    assert [u.step for u in whole.usage.steps] == [1, 2, 3, 4]
    assert whole.usage.total == outcome.usage.total
    audit = agent.store.audit.entries(outcome.ticket_id)
    assert len([e for e in audit if e.startswith("refund of USD 49.00 waits for approval (request R1")]) == 1
    latest = await agent.client.get_workflow_handle(handle.id).describe()
    assert latest.run_id != handle.first_execution_run_id


async def test_a_ticket_that_continued_mails_under_a_key_named_by_the_ticket(agent: Harness) -> None:
    """Keys name the ticket (by its id, not by the run), so a run that continues it cannot pay or mail under a
    new key: the email of step 3 is the ticket's, whichever run sends it."""
    async with agent.worker():
        handle = await agent.start(ticket(approval_limit_cents=10_000, continue_as_new_after_steps=1))
        outcome = await handle.result()
    assert (outcome.status, outcome.steps) == (Status.RESOLVED, 4)
    latest = await agent.client.get_workflow_handle(handle.id).describe()
    assert latest.run_id != handle.first_execution_run_id
    (email,) = agent.store.mail.sent("ann@example.com")
    assert email.idempotency_key == f"email:ticket:{outcome.ticket_id}/3/0"


async def test_a_conversation_past_its_token_limit_is_summarised_and_the_model_reads_a_bounded_one(
    agent: Harness,
) -> None:
    """30 steps of 20 KB logs would grow what the model reads to 150K tokens; summaries keep it near 25K."""
    seed_long_orders(agent.store, 30)
    model = ContextBoundModel(30)
    request = long_ticket(30)
    request["options"]["summarize_above_tokens"] = 25_000
    async with agent.worker(model):
        handle = await agent.start(request)
        outcome = await handle.result()
    assert (outcome.status, outcome.steps) == (Status.RESOLVED, 30), outcome.answer
    assert model.summaries >= 3
    one_step = EVENT_LOG_BYTES // BYTES_PER_TOKEN
    assert model.largest_input_tokens < 25_000 + 2 * one_step
    summaries = [u for u in outcome.usage.steps if u.purpose == "summary"]
    assert len(summaries) == model.summaries
    assert outcome.model_calls == 30 + model.summaries
    assert all(s.usage.output_tokens == 30 for s in summaries)
    audit = agent.store.audit.entries(outcome.ticket_id)
    assert sum("older messages to fit the model's context" in entry for entry in audit) == model.summaries


@dataclass
class CannotSummarise:
    """``LongTicketModel``, which checks every log arrives whole (a summary would fail it), reporting a context
    past any limit, and without ``summarize``."""

    steps: int
    name: str = "cannot-summarise"

    async def decide(self, request: ThinkRequest) -> Decision:
        decision = await LongTicketModel(self.steps).decide(request)
        return decision.model_copy(update={"usage": Usage(input_tokens=1_000_000)})


async def test_a_model_that_cannot_summarise_leaves_the_conversation_whole(agent: Harness) -> None:
    """The summary is an option a model may not offer: the ticket goes on, unsummarised, and asks only once."""
    seed_long_orders(agent.store, 8)
    request = long_ticket(8)
    request["options"]["summarize_above_tokens"] = 1000
    async with agent.worker(CannotSummarise(8)):
        handle = await agent.start(request)
        outcome = await handle.result()
    assert (outcome.status, outcome.steps, outcome.model_calls) == (Status.RESOLVED, 8, 8), outcome.answer
    assert await activity_attempts(handle, "summarize") == [1], "refused once, not retried, not asked again"
