"""What the tests share: a worker on a scratch store, tickets to start, and ways to read a run's history."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHandle

from activities.business import Business
from activities.content_store import ContentStore
from activities.contracts.approvals import ApprovalRequest
from activities.contracts.conversation import ContentBlock, Decision, TextBlock, ThinkRequest, ToolUseBlock
from activities.contracts.names import AWAITING_APPROVAL_QUERY, WORKFLOW_NAME
from activities.contracts.ticket import Outcome
from activities.model import LanguageModel, ModelActivities
from activities.scripted_model import ScriptedModel
from activities.tools import ToolActivities
from agent_worker.config import Settings
from agent_worker.worker import build_worker

Handle = WorkflowHandle[Any, Outcome]


def ticket(
    question: str = "My parcel for order A-1001 never arrived", email: str = "ann@example.com", **options: Any
) -> dict[str, Any]:
    """A ticket as a caller sends it: plain JSON, the way ``temporal workflow start --input`` does."""
    return {
        "ticket_id": f"T-{uuid.uuid4().hex[:8]}",
        "question": question,
        "customer_email": email,
        "options": options,
    }


@dataclass
class Harness:
    client: Client
    store: Business
    task_queue: str

    def settings(self, **overrides: Any) -> Settings:
        return Settings(task_queue=self.task_queue, db_path=self.store.database.path, **overrides)

    @asynccontextmanager
    async def worker(self, model: LanguageModel | None = None, **settings: Any) -> AsyncIterator[None]:
        async with build_worker(self.client, self.settings(**settings), self.store, model):
            yield

    def activities(self, tools: type[ToolActivities] = ToolActivities) -> list[Callable[..., Any]]:
        """``think`` on the scripted model and the tools, on the harness's business, for a worker a test puts
        together itself: a workflow variant, or a variant of the tools (``tools``)."""
        store = self.store
        content = ContentStore(store.blobs)
        toolbox = tools(
            orders=store.orders, payments=store.payments, mail=store.mail, audit=store.audit, content=content
        )
        return [ModelActivities(ScriptedModel(store.model_calls), store.model_calls, content).think, *toolbox.all()]

    async def start(self, raw_ticket: Any) -> Handle:
        return await self.client.start_workflow(
            WORKFLOW_NAME, raw_ticket, id=f"ticket-{uuid.uuid4()}", task_queue=self.task_queue, result_type=Outcome
        )

    async def run(self, raw_ticket: Any, model: LanguageModel | None = None) -> Outcome:
        async with self.worker(model):
            handle = await self.start(raw_ticket)
            result: Outcome = await handle.result()
            return result


async def waiting_request(handle: Handle) -> ApprovalRequest | None:
    """The approval request the run's query reports, or None."""
    request: ApprovalRequest | None = await handle.query(
        AWAITING_APPROVAL_QUERY,
        result_type=ApprovalRequest | None,  # type: ignore[arg-type]
    )
    return request


async def awaiting(handle: Handle, amount: int | None, timeout: float = 20) -> ApprovalRequest | None:
    """Wait until the run's approval query reports a request for ``amount`` (or none, for None), and return it
    (a bounded poll: queries are not pushed)."""
    async with asyncio.timeout(timeout):
        while True:
            request = await waiting_request(handle)
            if (request.amount_cents if request else None) == amount:
                return request
            await asyncio.sleep(0.05)


def answer(amount: int, *, approved: bool = True, approver: str = "ann", **extra: Any) -> dict[str, Any]:
    """An ``approve`` signal's payload, as ``temporal workflow signal --input`` sends it."""
    return {"amount_cents": amount, "approved": approved, "approver": approver, **extra}


async def events(handle: Handle, *kinds: EventType.ValueType) -> list[HistoryEvent]:
    found = [event async for event in handle.fetch_history_events()]
    return [event for event in found if not kinds or event.event_type in kinds]


async def activity_attempts(handle: Handle, activity: str) -> list[int]:
    """For each time ``activity`` was scheduled, the attempts it took: the server records only the last
    attempt's start event, with its attempt number."""
    history = await events(handle)
    scheduled = {
        e.event_id
        for e in history
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == activity
    }
    return [
        e.activity_task_started_event_attributes.attempt
        for e in history
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and e.activity_task_started_event_attributes.scheduled_event_id in scheduled
    ]


@dataclass
class PlaybackModel:
    """A model that plays a fixed list of responses, one per step, and keeps every request it was sent.

    For the paths the support script never takes: unknown tools, nonsense arguments, two refunds."""

    responses: Sequence[Decision]
    name: str = "playback"
    requests: list[ThinkRequest] = field(default_factory=list)

    async def decide(self, request: ThinkRequest) -> Decision:
        self.requests.append(request)
        return self.responses[min(request.step, len(self.responses)) - 1]


def calls(*tool_calls: tuple[str, dict[str, Any]], step: int = 0) -> Decision:
    content: list[ContentBlock] = [
        ToolUseBlock(id=f"toolu_{step}_{n}", name=name, input=tool_input)
        for n, (name, tool_input) in enumerate(tool_calls)
    ]
    return Decision(content=content, stop_reason="tool_use")


def says(text: str) -> Decision:
    return Decision(content=[TextBlock(text=text)], stop_reason="end_turn")
