"""The ``think`` activity: one call to the language model, whichever model is configured.

The model is a seam: anything with ``decide(request) -> Decision`` plugs in (the scripted stand-in here,
Claude through the ``anthropic`` SDK). The activity adds what every model needs around it: a heartbeat,
so a worker that dies mid-call is noticed in seconds rather than after the call's long timeout, and a row
in ``model_calls`` for every answer, so a test or an operator can count what the model was asked.
"""

from __future__ import annotations

import asyncio
from typing import Protocol, runtime_checkable

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.business.model_calls import ModelCalls
from activities.content_store import ContentStore, append_loaded, extend, load_conversation
from activities.contracts.conversation import (
    SUMMARY_HEADER,
    Decision,
    Message,
    Summary,
    SummaryRequest,
    ThinkRequest,
    TicketContext,
)
from activities.heartbeat import heartbeating


class LanguageModel(Protocol):
    name: str

    async def decide(self, request: ThinkRequest) -> Decision: ...


@runtime_checkable
class Summarizer(Protocol):
    """A model that can also summarise a conversation for its own later use (no tools called)."""

    async def summarize(self, ticket: TicketContext, messages: list[Message]) -> Decision: ...


class ModelActivities:
    def __init__(self, model: LanguageModel, model_calls: ModelCalls, content: ContentStore) -> None:
        self.model = model
        self.model_calls = model_calls
        self.content = content

    @activity.defn(name="think")
    async def think(self, request: ThinkRequest) -> Decision:
        """Ask the model about the whole conversation, loaded from the content store as far as the request
        refers to it. With ``store_conversation``, the conversation with this answer is stored before the
        activity completes, so a crash after it loses nothing, and its key goes back with the decision."""
        async with heartbeating():
            conversation = await asyncio.to_thread(
                self._conversation, request.conversation_ref if request.store_conversation else None, request.messages
            )
            decision = await self.model.decide(
                request.model_copy(
                    update={"messages": conversation, "store_conversation": False, "conversation_ref": None}
                )
            )
            if request.store_conversation:
                turns = [*request.messages, Message(role="assistant", content=decision.content)]
                key = await asyncio.to_thread(
                    extend, self.content, request.conversation_ref, [t for t in turns if t.content]
                )
                decision = decision.model_copy(update={"conversation_ref": key})
        if not decision.model:  # a stand-in that does not say: the usage report still names who answered
            decision = decision.model_copy(update={"model": self.model.name})
        await asyncio.to_thread(self.model_calls.record, request.ticket.ticket_id, request.step)
        count_usage(decision)
        activity.logger.info(
            "model answered",
            extra={
                "model": self.model.name,
                "step": request.step,
                "stop_reason": decision.stop_reason,
                "tools": [c.name for c in decision.tool_calls],
                "input_tokens": decision.usage.input_tokens,
                "output_tokens": decision.usage.output_tokens,
                "cache_read_input_tokens": decision.usage.cache_read_input_tokens,
                "cache_creation_input_tokens": decision.usage.cache_creation_input_tokens,
                "cost_usd": decision.usage.cost_usd,
            },
        )
        return decision

    @activity.defn(name="summarize")
    async def summarize(self, request: SummaryRequest) -> Summary:
        """Let the model summarise the older turns of a conversation that outgrew its context, and store the
        conversation that goes on: the question, the summary, then the latest turns as they were (from an
        assistant turn on, so every tool result still follows its call). Stored before the activity completes,
        like ``think``'s. Not a row in ``model_calls``: the scripted model counts those per step."""
        if not isinstance(self.model, Summarizer):
            raise ApplicationError(
                f"The model {self.model.name} cannot summarise a conversation.",
                type="CannotSummarize",
                non_retryable=True,
            )
        async with heartbeating():
            conversation = await asyncio.to_thread(self._conversation, request.conversation_ref, request.messages)
            cut = split_point(conversation, request.keep_messages)
            if cut is None:
                return Summary(conversation_ref=request.conversation_ref, summarized_messages=0)
            decision = await self.model.summarize(request.ticket, conversation[:cut])
            opening = Message.user_text(f"{request.question}\n\n{SUMMARY_HEADER}\n{decision.text}")
            key = await asyncio.to_thread(extend, self.content, None, [opening, *conversation[cut:]])
        count_usage(decision)
        activity.logger.info(
            "model summarised the conversation",
            extra={"step": request.step, "summarized_messages": cut, "kept_messages": len(conversation) - cut},
        )
        return Summary(
            conversation_ref=key, summarized_messages=cut, usage=decision.usage, model=decision.model or self.model.name
        )

    def _conversation(self, ref: str | None, messages: list[Message]) -> list[Message]:
        """The whole conversation, every stored result loaded: the stored one (if any) and then ``messages``."""
        conversation = load_conversation(self.content, ref)
        append_loaded(self.content, conversation, messages)
        return conversation


def split_point(messages: list[Message], keep: int) -> int | None:
    """Where the turns kept whole begin: the latest assistant turn with at least ``keep`` messages from it on
    and more than the question before it; None if there is no such turn."""
    for index in range(len(messages) - keep, 1, -1):
        if messages[index].role == "assistant":
            return index
    return None


def count_usage(decision: Decision) -> None:
    """Model calls and tokens on the worker's metrics endpoint, by model and kind of token."""
    meter = activity.metric_meter().with_additional_attributes({"model": decision.model or "unknown"})
    meter.create_counter("agent_model_calls", "Answers the model gave", "1").add(1)
    tokens = meter.create_counter("agent_model_tokens", "Tokens the model used, by kind", "1")
    usage = decision.usage
    for kind, count in (
        ("input", usage.input_tokens),
        ("output", usage.output_tokens),
        ("cache_read", usage.cache_read_input_tokens),
        ("cache_write", usage.cache_creation_input_tokens),
    ):
        if count:
            tokens.add(count, {"kind": kind})
