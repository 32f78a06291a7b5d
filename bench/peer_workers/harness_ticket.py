"""The bench's ticket on temporal-agent-harness, run by ``bench/peers.py`` in a virtual environment of its own
(``temporal-agent-harness[pydantic-ai]``), never in this project's.

On the harness a ticket is a session, not a run: an ``@agent.defn`` workflow started with an ``AgentConfig``, the
question sent to its ``@agent.accepts`` handler as the ``send_agent_message`` update, the turn followed on the agent's
event stream through the harness's own client (``AgentClient.send_message``) until it ends, then the ``close``
signal. The turn runs Pydantic AI as the harness's README and ``pydantic_ai_harness`` module show: the tools are
``@agent.activity_tool_defn`` activities dispatched through the runner (its approval gate set to pass every call:
this ticket needs no person), wired onto a ``TemporalAgent`` with ``build_harness_toolset``; a ``FunctionModel`` plays
the bench's script (``shop.next_move``) in the model-request activity. The model's streaming hook is left out: the
script does not stream.

``main`` runs the worker. ``drive`` runs the client side in a process of its own, so the worker's CPU is its own: it
reads ``<request id> <question>`` lines on stdin, runs each ticket to its closed session, and answers
``<request id> <workflow id>`` (or ``<request id> ! <error>``) on stdout.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
import warnings
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import AgentPlugin, PydanticAIPlugin, TemporalAgent
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

from temporal_agent_harness.ai_sdks.pydantic_ai_harness import HarnessDeps, build_harness_toolset
from temporal_agent_harness.harness import AgentWorkflowRunner, agent
from temporal_agent_harness.harness.agent_client import AgentClient, AgentTurnError, AgentTurnTimeout
from temporal_agent_harness.harness.agent_protocol import AgentConfig, ToolApprovalPolicy
from temporal_agent_harness.plugin import AgentHarnessPlugin
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.workflow import ActivityConfig

TOOL_CONFIG = ActivityConfig(start_to_close_timeout=timedelta(seconds=60))


def shop() -> Shop:
    return Shop(os.environ["PEER_SHOP"])


@agent.activity_tool_defn(activity_config=TOOL_CONFIG)
async def lookup_order(order_id: str) -> str:
    """Look up an order by its id."""
    return await asyncio.to_thread(shop().lookup_order, order_id)


@agent.activity_tool_defn(activity_config=TOOL_CONFIG)
async def issue_refund(order_id: str, amount_cents: int) -> str:
    """Refund an order."""
    return await asyncio.to_thread(shop().issue_refund, order_id, amount_cents)


@agent.activity_tool_defn(activity_config=TOOL_CONFIG)
async def send_email(to: str, subject: str, body: str) -> str:
    """Email the customer."""
    return await asyncio.to_thread(shop().send_email, to, subject, body)


TOOLS = [lookup_order, issue_refund, send_email]


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


toolset, tool_config = build_harness_toolset(TOOLS, id="support-tools")
with warnings.catch_warnings():  # the harness's documented path is the wrapper Pydantic AI now deprecates
    warnings.simplefilter("ignore")
    support = TemporalAgent(
        Agent(FunctionModel(scripted), instructions=INSTRUCTIONS, toolsets=[toolset], deps_type=HarnessDeps),
        name="support",
        tool_activity_config=tool_config,
    )


class Ticket(BaseModel):
    """A customer's question."""

    question: str


class Answer(BaseModel):
    """The agent's answer to the customer."""

    answer: str


@agent.defn
class HarnessTicket:
    @agent.init
    def __init__(self, config: AgentConfig) -> None:
        self._runner = AgentWorkflowRunner(
            config, stream=WorkflowStream(), approval_policy_default=ToolApprovalPolicy.dangerously_skip_all()
        )

    @agent.accepts
    async def ticket(self, message: Ticket) -> Answer:
        """Answer a support ticket."""
        result = await support.run(message.question, deps=HarnessDeps(runner=self._runner))
        return Answer(answer=result.output)


def plugins() -> list[Any]:
    return [PydanticAIPlugin(), AgentHarnessPlugin(tools=TOOLS)]


async def main() -> None:
    client = await Client.connect(os.environ["TEMPORAL_ADDRESS"], plugins=plugins())
    worker = Worker(
        client, task_queue=os.environ["PEER_TASK_QUEUE"], workflows=[HarnessTicket], plugins=[AgentPlugin(support)]
    )
    await worker.run()


async def one_ticket(client: Client, request: str, question: str) -> str:
    workflow_id = f"harness-{uuid.uuid4()}"
    await client.start_workflow(
        "HarnessTicket", AgentConfig(), id=workflow_id, task_queue=os.environ["PEER_TASK_QUEUE"]
    )
    session = AgentClient(client, workflow_id)
    turn = await session.send_message("ticket", {"question": question}, on_item=lambda item, _offset: item)
    async for item in turn:
        if isinstance(item, AgentTurnError | AgentTurnTimeout):
            return f"{request} ! {item}"
    await client.get_workflow_handle(workflow_id).signal("close")
    return f"{request} {workflow_id}"


async def drive() -> None:
    client = await Client.connect(os.environ["TEMPORAL_ADDRESS"], plugins=plugins())
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    tasks = set()

    async def answer(request: str, question: str) -> None:
        try:
            line = await one_ticket(client, request, question)
        except Exception as error:  # noqa: BLE001 - the bench reports it
            line = f"{request} ! {type(error).__name__}: {error}"
        sys.stdout.write(line.replace("\n", " ") + "\n")
        sys.stdout.flush()

    while raw := await reader.readline():
        request, question = raw.decode().rstrip("\n").split(" ", 1)
        task = asyncio.create_task(answer(request, question))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
