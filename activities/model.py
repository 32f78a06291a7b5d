"""The ``think`` activity: one call to the language model, whichever model is configured.

The model is a seam: anything with ``decide(request) -> Decision`` plugs in (the scripted stand-in here,
Claude through the ``anthropic`` SDK). The activity adds what every model needs around it: a heartbeat,
so a worker that dies mid-call is noticed in seconds rather than after the call's long timeout, and a row
in ``model_calls`` for every answer, so a test or an operator can count what the model was asked.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from temporalio import activity

from activities.content_store import ContentStore, extend, load_conversation, resolve
from activities.contracts import Decision, Message, ThinkRequest, append_turn
from activities.heartbeat import heartbeating
from activities.store import BusinessStore


class LanguageModel(Protocol):
    name: str

    async def decide(self, request: ThinkRequest) -> Decision: ...


class ModelActivities:
    def __init__(self, model: LanguageModel, store: BusinessStore, content: ContentStore | None = None) -> None:
        self.model = model
        self.store = store
        self.content = content or ContentStore(store)

    @activity.defn(name="think")
    async def think(self, request: ThinkRequest) -> Decision:
        """Ask the model about the whole conversation, loaded from the content store as far as the request
        refers to it. With ``store_conversation``, the conversation with this answer is stored before the
        activity completes, so a crash after it loses nothing, and its key goes back with the decision."""
        async with heartbeating():
            conversation = await asyncio.to_thread(self._conversation, request)
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
        await asyncio.to_thread(self.store.record_model_call, request.ticket.ticket_id, request.step)
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

    def _conversation(self, request: ThinkRequest) -> list[Message]:
        """The whole conversation, every stored result loaded: the request's, or the stored one and then the
        request's turns."""
        if not request.store_conversation:
            return resolve(self.content, request.messages)
        messages = load_conversation(self.content, request.conversation_ref)
        for turn in resolve(self.content, request.messages):
            append_turn(messages, turn.role, list(turn.content))
        return messages


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
