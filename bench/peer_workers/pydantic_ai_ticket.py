"""The bench's ticket on Pydantic AI's Temporal integration, run by ``bench/peers.py`` in a virtual environment of its
own (``pydantic-ai-slim[temporal]``), never in this project's.

Written the way Pydantic AI's documentation recommends for the installed version: a plain ``Agent`` with the
``TemporalDurability`` capability, listed in the workflow's ``__pydantic_ai_agents__`` so ``PydanticAIPlugin``
registers its activities (each model request and each tool call is one); a ``FunctionModel`` plays the bench's script
(``shop.next_move``) inside the model-request activity. The tools act on the bench's SQLite shop in a thread, as this
project's tools do.
"""

from __future__ import annotations

import asyncio
import os

from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import PydanticAIPlugin, PydanticAIWorkflow, TemporalDurability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from shop import INSTRUCTIONS, Shop, next_move


def scripted(messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
    question, results = "", []
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    question = part.content
                elif isinstance(part, ToolReturnPart):
                    results.append(str(part.content))
    move = next_move(question, results)
    if isinstance(move, str):
        return ModelResponse(parts=[TextPart(move)])
    name, arguments = move
    return ModelResponse(parts=[ToolCallPart(name, arguments)])


def shop() -> Shop:
    return Shop(os.environ["PEER_SHOP"])


async def lookup_order(order_id: str) -> str:
    """Look up an order by its id."""
    return await asyncio.to_thread(shop().lookup_order, order_id)


async def issue_refund(order_id: str, amount_cents: int) -> str:
    """Refund an order."""
    return await asyncio.to_thread(shop().issue_refund, order_id, amount_cents)


async def send_email(to: str, subject: str, body: str) -> str:
    """Email the customer."""
    return await asyncio.to_thread(shop().send_email, to, subject, body)


agent = Agent(
    FunctionModel(scripted),
    name="support",
    instructions=INSTRUCTIONS,
    tools=[lookup_order, issue_refund, send_email],
    capabilities=[TemporalDurability()],
)


@workflow.defn(name="PeerTicket")
class PeerTicket(PydanticAIWorkflow):
    __pydantic_ai_agents__ = [agent]  # noqa: RUF012 - the integration's own class attribute

    @workflow.run
    async def run(self, ticket: dict[str, str]) -> str:
        result = await agent.run(ticket["question"])
        return result.output


async def main() -> None:
    client = await Client.connect(os.environ["TEMPORAL_ADDRESS"], plugins=[PydanticAIPlugin()])
    await Worker(client, task_queue=os.environ["PEER_TASK_QUEUE"], workflows=[PeerTicket]).run()


if __name__ == "__main__":
    asyncio.run(main())
