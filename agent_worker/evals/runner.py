"""Run scenarios as real tickets: a dev server, and for each scenario a worker of its own, on a scratch shop.

Each scenario gets a fresh SQLite business holding only its orders, a task queue of its own, and a worker built as
the product builds one (``local_worker``: the workflow, the activities, the money policy in force) whose model is
Claude through the real ``anthropic`` client, pointed at the local Messages API. Nothing can be paid or mailed for
real: the business is the embedded ledger and outbox whatever the configuration says. The runner plays the people
around the ticket, watching what the ticket waits for (its search attributes and memo, as an operator's tools
do): it answers each approval request as the scenario says, sends each reply once the agent has answered the turn
before, and each order event once the ticket waits for one.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.common import WorkflowIDReusePolicy

from activities.business import Business
from activities.contracts.approvals import Approval
from activities.contracts.names import WORKFLOW_NAME
from activities.contracts.ticket import CustomerMessage, Outcome, TicketInput, TicketState
from activities.contracts.world import EmailRequest
from agent_worker import model_choice, tickets
from agent_worker.cli.worker import local_worker
from agent_worker.config import Settings
from agent_worker.evals.messages_api import MessagesAPI
from agent_worker.evals.scenario import Scenario

POLL_SECONDS = 0.3
REPLY_WINDOW_SECONDS = 10
"""How long a ticket with replies to come stays open after each answer, unless its scenario says: the runner
sends each reply as soon as the turn before is answered, so this only delays the close after the last one."""
DEFAULT_CONFIG = "default"


@dataclass(frozen=True)
class Configuration:
    """A set of ``AGENT_*`` settings a suite runs under (``--compare A B``): the model, the system prompt, the
    money policy file, any setting a worker reads. ``default`` sets none."""

    name: str
    environment: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> Configuration:
        """A YAML or JSON mapping of variable names to values; its name is the file's stem. A relative path in a
        ``*_FILE`` variable (``AGENT_POLICY_FILE``) is read from the configuration's folder, wherever the suite
        is run from."""
        if path.name == DEFAULT_CONFIG:
            return cls(DEFAULT_CONFIG)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as error:
            raise ValueError(f"{path}: cannot be read: {error}") from None
        if not isinstance(data, dict) or not all(isinstance(k, str) and k.startswith("AGENT_") for k in data):
            raise ValueError(f"{path}: a configuration is a mapping of AGENT_* variables to values")
        variables = {k: str(v) for k, v in data.items()}
        for name, value in variables.items():
            if name.endswith("_FILE") and value and not Path(value).is_absolute():
                variables[name] = str((path.parent / value).resolve())
        return cls(path.stem, variables)

    def settings(self, **fixed: object) -> Settings:
        with environment(self.environment):
            return Settings(**fixed)


@contextlib.contextmanager
def environment(variables: Mapping[str, str]) -> Iterator[None]:
    """The process's environment with ``variables`` set, for settings read while it lasts."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@dataclass
class Ran:
    """What one scenario did, as observed from outside: its outcome, the emails in its outbox, whether a person
    was asked, and why it could not be judged, if it could not."""

    scenario: Scenario
    config: str
    outcome: Outcome | None = None
    emails: list[EmailRequest] = field(default_factory=list)
    asked_person: bool = False
    refused: str | None = None
    """Why the model's API refused a request: stale, not recorded, a script that ran out, Claude's refusal."""
    error: str | None = None
    """Why no outcome: the ticket did not end within the time given it."""
    waiting: str | None = None
    """What the ticket was last seen waiting for (``waiting for event``), to say why one did not end."""
    seconds: float = 0.0


@dataclass
class Runner:
    client: Client
    api: MessagesAPI
    scratch: Path
    timeout_seconds: float = 120.0

    async def run(self, scenario: Scenario, config: Configuration) -> Ran:
        started = time.monotonic()
        ran = Ran(scenario, config.name)
        key = f"{config.name}-{scenario.name}"
        store = Business.sqlite(self.scratch / f"{key}.sqlite3").create(seed_demo_orders=False)
        try:
            for order in scenario.orders:
                store.orders.add(order.order())
                for note in order.events:
                    store.orders.add_event(order.order_id, note)
            settings = config.settings(task_queue=f"eval-{key}", db_path=store.database.path)
            api_client = model_choice.anthropic_client(
                settings, base_url=self.api.base_url(config.name, scenario.name), api_key="eval-local"
            )
            assert api_client is not None  # a key is given
            model = model_choice.claude_model(settings, api_client)
            try:
                async with local_worker(self.client, settings, store, model):
                    handle = await self.start(scenario, settings.task_queue, f"eval-{key}")
                    try:
                        ran.outcome = await asyncio.wait_for(self.drive(handle, scenario, ran), self.timeout_seconds)
                    except WorkflowFailureError as failed:
                        ran.error = f"the ticket failed: {failed.cause}"
                    except TimeoutError:
                        waiting = f" (it was {ran.waiting})" if ran.waiting else ""
                        ran.error = f"the ticket did not end within {self.timeout_seconds:.0f} s{waiting}"
                        with contextlib.suppress(Exception):
                            await handle.terminate("the eval gave up on it")
            finally:
                await api_client.close()
            ran.emails = store.mail.sent()
        finally:
            store.close()
        ran.refused = self.api.refused.get((config.name, scenario.name))
        ran.seconds = time.monotonic() - started
        return ran

    async def start(self, scenario: Scenario, task_queue: str, workflow_id: str) -> WorkflowHandle[object, Outcome]:
        options = scenario.ticket.options
        if scenario.replies and options.reply_window_seconds == 0:
            options = options.model_copy(update={"reply_window_seconds": REPLY_WINDOW_SECONDS})
        ticket = TicketInput(
            ticket_id=scenario.ticket_id,
            question=scenario.ticket.question,
            customer_email=scenario.ticket.customer,
            options=options,
        )
        return await self.client.start_workflow(
            WORKFLOW_NAME,
            ticket,
            id=workflow_id,
            task_queue=task_queue,
            result_type=Outcome,
            id_reuse_policy=WorkflowIDReusePolicy.TERMINATE_IF_RUNNING,
        )

    async def drive(self, handle: WorkflowHandle[object, Outcome], scenario: Scenario, ran: Ran) -> Outcome:
        """Play the people around the ticket until it ends."""
        result = asyncio.ensure_future(handle.result())
        replies, events = list(scenario.replies), list(scenario.events)
        answered_requests: set[str] = set()
        was_waiting_for_event = False
        try:
            while not result.done():
                await asyncio.wait([result], timeout=POLL_SECONDS)
                if result.done():
                    break
                seen = await tickets.seen(await handle.describe())
                ran.waiting = seen.state.replace("_", " ") if seen.state else None
                if not seen.running:
                    continue
                request = seen.request if seen.awaiting_cents else None
                if request is not None and request.request_id not in answered_requests:
                    ran.asked_person = True
                    answered_requests.add(request.request_id)
                    await tickets.approve(
                        self.client, handle.id, approval(scenario, request.amount_cents, request.request_id)
                    )
                # One event each time the ticket starts waiting for one: visibility still shows it waiting for a
                # moment after the event has arrived.
                waiting_for_event = seen.state == TicketState.WAITING_FOR_EVENT.value
                if waiting_for_event and not was_waiting_for_event and events:
                    await tickets.report_event(self.client, handle.id, events.pop(0))
                was_waiting_for_event = waiting_for_event
                if replies and seen.state == TicketState.WAITING_FOR_CUSTOMER.value:
                    answered = await tickets.turns(self.client, handle.id)
                    if len(answered) == 1 + len(scenario.replies) - len(replies):
                        await tickets.reply(self.client, handle.id, CustomerMessage(text=replies.pop(0)))
            outcome: Outcome = result.result()
        finally:
            result.cancel()
        ran.asked_person = ran.asked_person or bool(outcome.approvals)
        return outcome


def approval(scenario: Scenario, amount_cents: int, request_id: str) -> Approval:
    answer = scenario.approval
    if answer is None:
        return Approval(
            amount_cents=amount_cents,
            approved=False,
            approver="eval-runner",
            request_id=request_id,
            reason="the scenario says nothing about approvals",
        )
    return Approval(
        amount_cents=amount_cents,
        approved=answer.approve,
        approver=answer.approver,
        request_id=request_id,
        reason=answer.reason,
    )


def scratch_folder() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="agent-eval-")
