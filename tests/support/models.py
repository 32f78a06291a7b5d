"""Models that play a script, for the paths the scripted support model never takes: unknown tools, nonsense
arguments, two refunds, two calls in one response. Any object with ``decide`` plugs into ``think``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from activities.contracts.conversation import ContentBlock, Decision, TextBlock, ThinkRequest, ToolUseBlock


@dataclass
class PlaybackModel:
    """A model that plays a fixed list of responses, one per step (the last one again past the end), and keeps
    every request it was sent."""

    responses: Sequence[Decision]
    name: str = "playback"
    requests: list[ThinkRequest] = field(default_factory=list)

    async def decide(self, request: ThinkRequest) -> Decision:
        self.requests.append(request)
        return self.responses[min(request.step, len(self.responses)) - 1]


def calls(*tool_calls: tuple[str, dict[str, Any]], step: int = 0) -> Decision:
    """A response asking for ``tool_calls``, in order, with ids ``toolu_<step>_<n>``."""
    content: list[ContentBlock] = [
        ToolUseBlock(id=f"toolu_{step}_{n}", name=name, input=tool_input)
        for n, (name, tool_input) in enumerate(tool_calls)
    ]
    return Decision(content=content, stop_reason="tool_use")


def says(text: str) -> Decision:
    """A final answer."""
    return Decision(content=[TextBlock(text=text)], stop_reason="end_turn")
