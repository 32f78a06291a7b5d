"""The conversation in the Anthropic Messages shape, and what the workflow and the model activity say to each
other about it: the request for the next move, the decision, tokens used, summaries."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveInt,
)

from activities.contracts.fields import Contract


class TextBlock(Contract):
    type: Literal["text"] = "text"
    text: str


class ToolUseBlock(Contract):
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any]


class ToolResultBlock(Contract):
    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str
    """The result; when ``content_ref`` is set, only a short preview of it."""
    is_error: bool = False
    content_ref: str | None = None
    """Where a result too large for the history is kept (``sha256:<hex>`` in the content store); the
    ``think`` activity loads it before the model reads the conversation."""


class ThinkingBlock(Contract):
    """Claude's reasoning before a tool call. The API refuses a tool result whose assistant turn comes back
    without it, or altered, so it is kept verbatim, signature included, and never shown to anyone."""

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str


class RedactedThinkingBlock(Contract):
    """Reasoning the API encrypted; like ``ThinkingBlock`` it must go back exactly as it came."""

    type: Literal["redacted_thinking"] = "redacted_thinking"
    data: str


ContentBlock = Annotated[
    TextBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock | RedactedThinkingBlock,
    Field(discriminator="type"),
]


class Message(Contract):
    role: Literal["user", "assistant"]
    content: list[ContentBlock]

    @classmethod
    def user_text(cls, text: str) -> Message:
        return cls(role="user", content=[TextBlock(text=text)])


class TicketContext(Contract):
    """What the model is told about the ticket besides the conversation."""

    ticket_id: str
    customer_email: str


class ThinkRequest(Contract):
    ticket: TicketContext
    step: PositiveInt
    messages: list[Message]
    """The whole conversation; with ``store_conversation``, only what is new since ``conversation_ref``."""
    store_conversation: bool = False
    """The activity keeps the conversation in the content store and returns its new reference with the
    decision, so the history carries each turn once instead of the whole conversation every step."""
    conversation_ref: str | None = None
    """The conversation so far (as the last decision returned it); None on the first step."""


class Usage(Contract):
    """Tokens one model call used (or several, summed), and what they cost by the worker's price table.

    ``input_tokens`` counts only the input that was neither read from nor written to the prompt cache: the
    API bills the three at different prices, so they are kept apart as the API reports them."""

    input_tokens: NonNegativeInt = 0
    output_tokens: NonNegativeInt = 0
    cache_read_input_tokens: NonNegativeInt = 0
    cache_creation_input_tokens: NonNegativeInt = 0
    cost_usd: NonNegativeFloat = 0.0
    """An estimate, from the price the worker that made the call had for its model, or where it had none, the
    dearest price in its table (``activities.pricing.priced``); 0 for a model that is not Claude's (the script)."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens + other.cache_creation_input_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
        )


class StepUsage(Contract):
    step: int
    model: str
    usage: Usage
    purpose: Literal["think", "summary"] = "think"
    """``summary``: the call that summarised older turns before this step's ``think``."""


class UsageReport(Contract):
    """What the ``usage`` query returns while a ticket runs, and what its outcome carries at the end."""

    total: Usage = Usage()
    steps: list[StepUsage] = []
    """One entry per model call, in order."""


class Decision(Contract):
    """One model response: its content blocks go into the conversation as the assistant's turn.

    ``stop_reason`` is the Messages API's: ``end_turn`` (an answer), ``tool_use``, ``max_tokens`` (cut off),
    ``pause_turn`` (to be continued), ``refusal``, ``stop_sequence`` or ``model_context_window_exceeded``."""

    content: list[ContentBlock]
    stop_reason: str = "end_turn"
    usage: Usage = Usage()
    model: str = ""
    """The model that answered, as the API names it; empty for a stand-in."""
    conversation_ref: str | None = None
    """With ``ThinkRequest.store_conversation``: the conversation including this answer, as stored."""

    @property
    def tool_calls(self) -> list[ToolUseBlock]:
        return [block for block in self.content if isinstance(block, ToolUseBlock)]

    @property
    def text(self) -> str:
        return "\n".join(block.text for block in self.content if isinstance(block, TextBlock))


SUMMARY_HEADER = "Summary of the conversation before the latest turns, which were too long to keep whole:"


class SummaryRequest(Contract):
    """Summarise the conversation ``conversation_ref`` followed by ``messages`` (not yet sent to the model),
    keeping at least the last ``keep_messages`` as they are."""

    ticket: TicketContext
    step: PositiveInt
    question: str
    """The customer's question: the new conversation starts with it, then the summary."""
    conversation_ref: str
    messages: list[Message] = []
    keep_messages: PositiveInt = 4


class Summary(Contract):
    conversation_ref: str
    """The conversation that goes on: the question and the summary, then the turns kept. The one asked about
    when there was nothing old enough to summarise (``summarized_messages`` is 0)."""
    summarized_messages: NonNegativeInt
    usage: Usage = Usage()
    model: str = ""


def append_turn(messages: list[Message], role: Literal["user", "assistant"], content: list[ContentBlock]) -> None:
    """Add a turn to the conversation, continuing the last one if it has the same role (after a
    ``pause_turn``, or after a cut-off response that said nothing), so roles keep alternating as the API
    expects. Empty content adds nothing: the API refuses an empty turn."""
    if not content:
        return
    if messages and messages[-1].role == role:
        messages[-1] = Message(role=role, content=[*messages[-1].content, *content])
    else:
        messages.append(Message(role=role, content=content))
