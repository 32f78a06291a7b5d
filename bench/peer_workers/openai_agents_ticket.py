"""The bench's ticket on the OpenAI Agents SDK's Temporal integration, run by ``bench/peers.py`` in a virtual
environment of its own (``temporalio-openai-agents``, the package PyPI carries for ``temporalio.openai_agents``),
never in this project's.

Written as the integration's documentation shows: ``OpenAIAgentsPlugin`` on the client, an ``Agent`` whose tools are
activities (``activity_as_tool``) and ``Runner.run`` in the workflow; each model call runs in the plugin's model
activity, where a scripted ``ModelProvider`` plays the bench's script (``shop.next_move``). The tools act on the
bench's SQLite shop in a thread, as this project's tools do.
"""

from __future__ import annotations

import asyncio
import json
import os
from datetime import timedelta
from typing import Any

from agents import Agent, Model, ModelProvider, ModelResponse, Runner, Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.openai_agents import ModelActivityParameters, OpenAIAgentsPlugin
from temporalio.openai_agents.workflow import activity_as_tool
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from shop import INSTRUCTIONS, Shop, next_move

TOOL_TIMEOUT = timedelta(seconds=60)


def shop() -> Shop:
    return Shop(os.environ["PEER_SHOP"])


@activity.defn
async def lookup_order(order_id: str) -> str:
    """Look up an order by its id."""
    return await asyncio.to_thread(shop().lookup_order, order_id)


@activity.defn
async def issue_refund(order_id: str, amount_cents: int) -> str:
    """Refund an order."""
    return await asyncio.to_thread(shop().issue_refund, order_id, amount_cents)


@activity.defn
async def send_email(to: str, subject: str, body: str) -> str:
    """Email the customer."""
    return await asyncio.to_thread(shop().send_email, to, subject, body)


class ScriptedModel(Model):
    """Plays the bench's script from the items so far: the user's question and the tools' outputs."""

    async def get_response(
        self,
        system_instructions: Any,  # noqa: ARG002
        input: Any,  # noqa: A002 - the SDK's name
        *args: Any,  # noqa: ARG002 - settings, tools, schema, handoffs, tracing: the script needs none
        **kwargs: Any,  # noqa: ARG002
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        question = next((str(i.get("content")) for i in items if i.get("role") == "user"), "")
        results = [str(i.get("output")) for i in items if i.get("type") == "function_call_output"]
        move = next_move(question, results)
        if isinstance(move, str):
            text = ResponseOutputText(text=move, annotations=[], type="output_text")
            output: Any = ResponseOutputMessage(
                id="answer", content=[text], role="assistant", status="completed", type="message"
            )
        else:
            name, arguments = move
            call = f"call-{len(results)}"
            output = ResponseFunctionToolCall(
                arguments=json.dumps(arguments),
                call_id=call,
                name=name,
                type="function_call",
                id=call,
                status="completed",
            )
        return ModelResponse(output=[output], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the bench's ticket does not stream")


class ScriptedProvider(ModelProvider):
    def get_model(self, model_name: str | None) -> Model:  # noqa: ARG002 - one model
        return ScriptedModel()


@workflow.defn(name="PeerTicket")
class PeerTicket:
    @workflow.run
    async def run(self, ticket: dict[str, str]) -> str:
        agent: Agent[None] = Agent(
            name="support",
            instructions=INSTRUCTIONS,
            tools=[
                activity_as_tool(tool, start_to_close_timeout=TOOL_TIMEOUT)
                for tool in (lookup_order, issue_refund, send_email)
            ],
        )
        result = await Runner.run(agent, ticket["question"])
        return str(result.final_output)


async def main() -> None:
    plugin = OpenAIAgentsPlugin(
        model_params=ModelActivityParameters(start_to_close_timeout=TOOL_TIMEOUT), model_provider=ScriptedProvider()
    )
    client = await Client.connect(os.environ["TEMPORAL_ADDRESS"], plugins=[plugin])
    worker = Worker(
        client,
        task_queue=os.environ["PEER_TASK_QUEUE"],
        workflows=[PeerTicket],
        activities=[lookup_order, issue_refund, send_email],
    )
    await worker.run()
