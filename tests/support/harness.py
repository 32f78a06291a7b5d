"""A worker in the test's own process, on a scratch business database and a task queue of its own, and the
tickets started on it: what most tests drive the product through."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from temporalio.client import Client
from temporalio.plugin import SimplePlugin

from activities.audit_trail import AuditActivities
from activities.business import Business
from activities.content_store import ContentStore
from activities.contracts.policy import MoneyPolicy
from activities.contracts.ticket import Outcome
from activities.language_model import LanguageModel, ModelActivities
from activities.policy_activities import PolicyActivities
from activities.reconciliation import Reconciliation
from activities.scripted_model import ScriptedModel
from activities.tool_activities import ToolActivities
from agent_worker import wiring
from agent_worker.cli.worker import build_worker
from agent_worker.config import Settings
from agent_worker.model_choice import choose_model
from tests.support import processes, tickets
from tests.support.demonstrations import Demonstration
from tests.support.desk import LOOSE_FILE
from tests.support.faults import plugins as fault_plugins
from tests.support.tickets import Handle


@dataclass
class Harness:
    client: Client
    store: Business
    task_queue: str

    def settings(self, **overrides: Any) -> Settings:
        """A worker's settings for this harness: its queue, its database, the tests' loose desk unless told."""
        return Settings(
            **{
                "task_queue": self.task_queue,
                "db_path": self.store.database.path,
                "policy_file": LOOSE_FILE,
                **overrides,
            }
        )

    def worker_env(self, **settings: str) -> dict[str, str]:
        """The settings of an ``agent-worker worker`` process serving this harness's queue and database."""
        server = processes.address(self.client)
        return processes.worker_env(server, self.task_queue, self.store.database.path, **settings)

    @asynccontextmanager
    async def worker(
        self,
        model: LanguageModel | None = None,
        *,
        policy: MoneyPolicy | None = None,
        demonstration: Demonstration | None = None,
        faults: str = "",
        plugins: Sequence[SimplePlugin] = (),
        **settings: Any,
    ) -> AsyncIterator[None]:
        """A worker on the harness's queue and business, under ``policy`` (the tests' loose desk if None); with
        ``demonstration``, one that shows a world without a safeguard (``tests.support.demonstrations``); with
        ``faults``, one that kills or hangs itself where they say (``tests.support.faults``); with ``plugins``,
        the product's worker with those added (``tests.support.holds``)."""
        built = self.settings(**settings)
        in_force = wiring.policy_in_force(built)
        if policy is not None:
            in_force = in_force.model_copy(update={"policy": policy, "digest": policy.digest()})
        business = demonstration.guard(self.store) if demonstration else self.store
        blobs = wiring.blob_backend(built, business.blobs, wiring.codec(built))
        activities = wiring.build_activities(
            built, business, model or choose_model(built, business.model_calls), blobs=blobs, policy=in_force
        )
        async with build_worker(
            self.client,
            built,
            activities,
            deployment=wiring.deployment_config(built),
            plugins=[*fault_plugins(built, faults), *([demonstration.plugin()] if demonstration else []), *plugins],
        ):
            yield

    def activities(self, tools: type[ToolActivities] = ToolActivities) -> list[Callable[..., Any]]:
        """``think`` on the scripted model, the tools on the harness's business, and the tests' loose money
        policy, for a worker a test puts together itself: a workflow variant, or a variant of the tools
        (``tools``)."""
        store = self.store
        content = ContentStore(store.blobs)
        in_force = wiring.policy_in_force(self.settings())
        toolbox = tools.over(store, content, in_force=in_force.digest)
        policy = PolicyActivities(in_force, store.audit)
        model = ModelActivities(ScriptedModel(store.model_calls), store.model_calls, content)
        business = [*toolbox.all(), *Reconciliation.over(store).all(), *AuditActivities(store.audit).all()]
        return [model.think, *business, *policy.all()]

    async def start(self, raw_ticket: Any) -> Handle:
        return await tickets.start(self.client, self.task_queue, raw_ticket)

    async def run(
        self, raw_ticket: Any, model: LanguageModel | None = None, *, demonstration: Demonstration | None = None
    ) -> Outcome:
        async with self.worker(model, demonstration=demonstration):
            handle = await self.start(raw_ticket)
            result: Outcome = await handle.result()
            return result
