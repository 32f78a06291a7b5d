"""Claude behind the ``think`` activity, through the real ``anthropic`` SDK.

One ``AsyncAnthropic`` client per worker process, with the SDK's own retries off: Temporal's retry policy
(``workflows/timeouts.py``) is the only one, so a retry is visible in the run's history, bounded by the
activity's attempts, and spaced by the server rather than by a sleeping worker. What the adapter owns is the
translation between the workflow's conversation (``activities.contracts``, in the Messages API's shape) and
the API, and the classification of every failure:

- 408, 409, 429, 5xx (529 "overloaded" included), timeouts and connection errors raise retryable errors,
  with the API's ``retry-after`` as the next attempt's delay when it sends one;
- every other 4xx (400, 401, 403, 404, 413, ...) raises a non-retryable error with the API's message, which
  the workflow turns into an outcome handed to a person: retrying a bad key or a bad request only spends the
  attempts before telling the same thing.

Prompt caching: the tool definitions and the support policy are the same for every ticket and go first,
each ending in a cache breakpoint; the conversation's last block carries a third, so the next step of the
same ticket reads the conversation so far from the cache instead of paying for it again.
"""

from __future__ import annotations

import email.utils
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import anthropic
import structlog
from anthropic import types as api
from temporalio.exceptions import ApplicationError

from activities.contracts.conversation import (
    ContentBlock,
    Decision,
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ThinkRequest,
    TicketContext,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    append_turn,
)
from activities.pricing import ModelPrice, priced
from activities.prompt import ticket_context
from activities.tools import TOOLS

log = structlog.get_logger(__name__)

CACHE: api.CacheControlEphemeralParam = {"type": "ephemeral"}

HINTS: dict[int, str] = {
    401: "check ANTHROPIC_API_KEY",
    403: "the key may not use this model or workspace",
    404: "check AGENT_ANTHROPIC_MODEL and ANTHROPIC_BASE_URL",
    413: "the conversation is too large for one request",
}
"""What a person can do about a refusal that will not go away on a retry."""

SUMMARIZE = (
    "This conversation is growing too long to keep whole. Summarise it so far for your own later use: what the "
    "customer wants, the facts the tools returned that still matter (order ids, amounts, refund and email "
    "numbers), what has been done, and what is left to do. Write only the summary; call no tools."
)


class ClaudeModel:
    """The ``LanguageModel`` the worker runs when Anthropic credentials are configured."""

    def __init__(  # noqa: PLR0913 - every argument is a setting, named at the one call site
        self,
        client: anthropic.AsyncAnthropic,
        *,
        model: str,
        max_tokens: int,
        temperature: float | None,
        system_prompt: str,
        prices: dict[str, ModelPrice],
    ) -> None:
        self.client = client
        self.name = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.system_prompt = system_prompt
        self.prices = prices
        self.tools = tool_definitions()

    async def decide(self, request: ThinkRequest) -> Decision:
        return await self._create(request.ticket, request.messages, {"type": "auto"})

    async def summarize(self, ticket: TicketContext, messages: list[Message]) -> Decision:
        """A summary of ``messages`` for the model's own later use. The tools are sent (the API refuses tool
        blocks in a conversation without them) with ``tool_choice: none``, so it answers in text."""
        asked = [*messages]
        append_turn(asked, "user", [TextBlock(text=SUMMARIZE)])
        return await self._create(ticket, asked, {"type": "none"})

    async def _create(
        self, ticket: TicketContext, messages: list[Message], tool_choice: api.ToolChoiceParam
    ) -> Decision:
        try:
            response = await self.client.messages.create(
                model=self.name,
                max_tokens=self.max_tokens,
                system=self.system(ticket),
                tools=self.tools,
                tool_choice=tool_choice,
                messages=message_params(messages),
                # This SDK has no `temperature` argument any more (5-series models refuse one): it goes in the
                # body as the API documents it, and only when a setting asks for it.
                extra_body=None if self.temperature is None else {"temperature": self.temperature},
            )
        except anthropic.APIStatusError as error:
            raise status_error(error) from None
        except anthropic.APITimeoutError:
            raise ApplicationError(
                f"The Claude API did not answer within the request timeout ({timeout(self.client)}).",
                type="APITimeoutError",
            ) from None
        except anthropic.APIConnectionError as error:
            reason = error.__cause__ or error
            raise ApplicationError(
                f"Could not reach the Claude API at {self.client.base_url}: {reason}", type="APIConnectionError"
            ) from None
        if response.stop_reason == "refusal":
            details = response.stop_details
            log.warning(
                "the model refused",
                category=details.category if details else None,
                explanation=details.explanation if details else None,
            )
        return Decision(
            content=[content_block(block) for block in response.content],
            stop_reason=response.stop_reason or "end_turn",
            usage=priced(usage(response.usage), response.model, self.prices),
            model=response.model,
        )

    def system(self, ticket: TicketContext) -> list[api.TextBlockParam]:
        """The policy (the same for every ticket, so cached), then this ticket's details."""
        return [
            {"type": "text", "text": self.system_prompt, "cache_control": CACHE},
            {"type": "text", "text": ticket_context(ticket)},
        ]

    async def close(self) -> None:
        await self.client.close()


def tool_definitions() -> list[api.ToolParam]:
    """The tools as Claude sees them, from the argument models the workflow validates calls with."""
    tools: list[api.ToolParam] = [
        {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema()}
        for tool in TOOLS.values()
    ]
    tools[-1]["cache_control"] = CACHE
    return tools


# --- the conversation, out to the API ----------------------------------------------------------------------


def message_params(messages: list[Message]) -> list[api.MessageParam]:
    """The conversation as the API takes it, its last block marked as a cache breakpoint."""
    return [message_param(message, cache=n == len(messages) - 1) for n, message in enumerate(messages)]


def message_param(message: Message, *, cache: bool) -> api.MessageParam:
    blocks = [block_param(block) for block in message.content]
    if cache and blocks:
        last = blocks[-1]
        if last["type"] == "text" or last["type"] == "tool_use" or last["type"] == "tool_result":
            last["cache_control"] = CACHE
    if message.role == "user":
        return {"role": "user", "content": blocks}
    return {"role": "assistant", "content": blocks}


def block_param(block: ContentBlock) -> api.ContentBlockParam:
    match block:
        case TextBlock():
            return {"type": "text", "text": block.text}
        case ToolUseBlock():
            return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
        case ToolResultBlock():
            return {
                "type": "tool_result",
                "tool_use_id": block.tool_use_id,
                "content": block.content,
                "is_error": block.is_error,
            }
        case ThinkingBlock():
            return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
        case RedactedThinkingBlock():
            return {"type": "redacted_thinking", "data": block.data}


# --- the response, back into the contract ------------------------------------------------------------------


def content_block(block: api.ContentBlock) -> ContentBlock:
    match block:
        case api.TextBlock():
            return TextBlock(text=block.text)
        case api.ToolUseBlock():
            return ToolUseBlock(id=block.id, name=block.name, input=dict(block.input))
        case api.ThinkingBlock():
            return ThinkingBlock(thinking=block.thinking, signature=block.signature)
        case api.RedactedThinkingBlock():
            return RedactedThinkingBlock(data=block.data)
    raise ApplicationError(
        f"Claude answered with a {block.type!r} block, which this agent does not handle.",
        type="UnsupportedContentBlock",
        non_retryable=True,
    )


def usage(reported: api.Usage) -> Usage:
    return Usage(
        input_tokens=reported.input_tokens,
        output_tokens=reported.output_tokens,
        cache_read_input_tokens=reported.cache_read_input_tokens or 0,
        cache_creation_input_tokens=reported.cache_creation_input_tokens or 0,
    )


# --- failures ----------------------------------------------------------------------------------------------


def status_error(error: anthropic.APIStatusError) -> ApplicationError:
    """The API's answer as an error Temporal retries, or not, with the API's own words in it."""
    status = error.status_code
    retryable = status in {408, 409, 429} or status >= 500
    kind = f" {error.type}" if error.type else ""
    hint = f" ({HINTS[status]})" if status in HINTS else ""
    request_id = f" [request {error.request_id}]" if error.request_id else ""
    return ApplicationError(
        f"The Claude API answered {status}{kind}: {error.api_message or error.message}{hint}{request_id}",
        type=type(error).__name__,
        non_retryable=not retryable,
        next_retry_delay=retry_after(error.response.headers) if retryable else None,
    )


def timeout(client: anthropic.AsyncAnthropic) -> str:
    limit = client.timeout
    if isinstance(limit, int | float):
        return f"{limit:g} s"
    return f"{limit.read:g} s" if isinstance(limit, anthropic.Timeout) and limit.read is not None else str(limit)


def retry_after(headers: Mapping[str, str]) -> timedelta | None:
    """How long the API asked us to wait: ``retry-after-ms``, or ``retry-after`` in seconds or as a date."""
    for name, seconds_per_unit in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            seconds = float(headers.get(name, "")) * seconds_per_unit
        except ValueError:
            continue
        return timedelta(seconds=seconds) if seconds > 0 else None
    try:
        when = email.utils.parsedate_to_datetime(headers.get("retry-after", ""))
    except (TypeError, ValueError):
        return None
    wait = when.replace(tzinfo=when.tzinfo or UTC) - datetime.now(UTC)
    return wait if wait > timedelta(0) else None
