"""The model as the workflow keeps it: each call to it, what the calls cost, and the room left in its context.

Every call to the model is an activity (``think`` for a step, ``summarize`` to fold older turns); what the
workflow keeps of them is what outlives the call. The outcome and the ``usage`` query report every call and
its tokens and cost, summed across the ticket's runs. The conversation so far lives in the content store, and
the workflow holds only its key, which each answer replaces. And the tokens the model read at
its last call say how close the conversation is to its context window: past ``summarize_above_tokens``, the older
turns are summarised before the next step, so a long ticket is not handed
over for a full window. A model that refuses to summarise is not asked again; the ticket goes on without.

The loop decides what an answer means; this piece keeps the state behind the calls, which a continued run
takes over (``snapshot``, ``restore``). Given the ticket and the audit trail, which
records each summary.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from pydantic import NonNegativeInt

    from activities.contracts.conversation import (
        Decision,
        Message,
        StepUsage,
        Summary,
        SummaryRequest,
        ThinkRequest,
        TicketContext,
        UsageReport,
    )
    from activities.contracts.fields import Contract
    from activities.contracts.ticket import TicketInput
    from activities.language_model import ModelActivities
    from workflows import timeouts

from workflows.audit_log import Audit
from workflows.failures import cause, is_refusal, raise_if_cancelled


class ModelSnapshot(Contract):
    """What a run hands the next of the model's calls: the conversation's key, and what the calls cost so far."""

    conversation_ref: str | None = None
    calls: NonNegativeInt = 0
    usage: UsageReport = UsageReport()


class Model:
    """The ticket's calls to the model: made through here, counted here. Given the ticket and the audit trail."""

    def __init__(self, ticket: TicketInput, *, audit: Audit) -> None:
        self._ticket = ticket
        self._audit = audit
        self.calls = 0
        self.usage = UsageReport()
        self.conversation_ref: str | None = None
        """The conversation so far, in the content store: each answer names the conversation with it in."""
        self._context_tokens = 0
        """Tokens the model read at its last call: how close the conversation is to its context window."""
        self._can_summarize = True

    def snapshot(self) -> ModelSnapshot:
        return ModelSnapshot(conversation_ref=self.conversation_ref, calls=self.calls, usage=self.usage)

    def restore(self, snapshot: ModelSnapshot) -> None:
        """Take over the conversation and the count of calls from the run continued."""
        self.conversation_ref = snapshot.conversation_ref
        self.calls = snapshot.calls
        self.usage = snapshot.usage

    def archived(self) -> list[StepUsage]:
        """Hand over the per-call usage for the content store's archive; only the total stays."""
        steps, self.usage = self.usage.steps, UsageReport(total=self.usage.total)
        return steps

    async def think(self, step: int, messages: list[Message]) -> Decision:
        """The model's next move at ``step``, given what it has not been sent yet."""
        request = ThinkRequest(
            ticket=self._context(),
            step=step,
            messages=messages,
            store_conversation=True,
            conversation_ref=self.conversation_ref,
        )
        decision = await workflow.execute_activity_method(ModelActivities.think, request, **timeouts.attempt("think"))
        self.conversation_ref = decision.conversation_ref  # the activity stored the conversation with this answer
        self._count(StepUsage(step=step, model=decision.model, usage=decision.usage))
        usage = decision.usage
        self._context_tokens = (
            usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens + usage.output_tokens
        )
        return decision

    def should_summarize(self) -> bool:
        limit = self._ticket.options.summarize_above_tokens
        return (
            self._can_summarize
            and self.conversation_ref is not None
            and limit is not None
            and self._context_tokens > limit
        )

    async def summarize(self, step: int, messages: list[Message]) -> list[Message]:
        """Have the model summarise the older turns; return what is still to be sent (nothing once they are
        folded into the summarised conversation). If it cannot, the ticket goes on without: the next step may
        then find the conversation too long for the model, and hand the ticket over."""
        assert self.conversation_ref is not None
        self._context_tokens = 0
        request = SummaryRequest(
            ticket=self._context(),
            step=step,
            question=self._ticket.question,
            conversation_ref=self.conversation_ref,
            messages=messages,
        )
        try:
            summary: Summary = await workflow.execute_activity_method(
                ModelActivities.summarize, request, **timeouts.attempt("summarize")
            )
        except ActivityError as error:
            raise_if_cancelled(error)
            workflow.logger.warning("the conversation could not be summarised", extra={"cause": cause(error)})
            self._can_summarize = not is_refusal(error)  # a model that cannot will not learn to at the next step
            return messages
        if not summary.summarized_messages:
            return messages
        self._count(StepUsage(step=step, model=summary.model, usage=summary.usage, purpose="summary"))
        self.conversation_ref = summary.conversation_ref
        await self._audit(f"summarised {summary.summarized_messages} older messages to fit the model's context")
        return []

    def _context(self) -> TicketContext:
        """What the model is told about the ticket besides the conversation."""
        return TicketContext(ticket_id=self._ticket.ticket_id, customer_email=self._ticket.customer_email)

    def _count(self, call: StepUsage) -> None:
        self.calls += 1
        self.usage = UsageReport(total=self.usage.total + call.usage, steps=[*self.usage.steps, call])
