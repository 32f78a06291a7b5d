"""Deliberately broken versions of ``SupportAgent``, for proving that the replay gate can fail.

Each is registered under the real workflow's name, as a careless change would be deployed. They live in
a module of their own because the sandbox re-imports a workflow's module on every run. Like
``workflows/support_agent.py``, the module evaluates its annotations (no ``from __future__ import annotations``):
the SDK refuses a workflow whose ``run`` is annotated otherwise than the ``__init__`` it inherits.
"""

import random
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.audit_trail import AuditActivities
    from activities.contracts.names import WORKFLOW_NAME
    from activities.contracts.ticket import Outcome, Status, TicketInput
    from activities.contracts.world import AuditEntry
    from activities.policy_activities import PolicyActivities
    from activities.tools import LOOKUP_ORDER, LookupOrderArgs
    from tests.support.careless_piece import read_the_world
    from workflows import timeouts
    from workflows.approval_gate import ApprovalGate
    from workflows.support_agent import SupportAgent
    from workflows.toolbox import Toolbox


@workflow.defn(name=WORKFLOW_NAME)
class LooksUpBeforeThinking(SupportAgent):
    """A "harmless" release that looks the order up before asking the model."""

    @workflow.run
    async def run(self, *args: Any) -> Outcome:
        await workflow.execute_activity(
            LOOKUP_ORDER.name, LookupOrderArgs(order_id="A-1001"), **timeouts.attempt(LOOKUP_ORDER.name)
        )
        return await super().run(*args)


@workflow.defn(name=WORKFLOW_NAME, sandboxed=False)
class DecidesOnTheWallClock(SupportAgent):
    """The seed article's SLA puzzle in Python: the SLA check reads the machine's clock instead of
    workflow time, so a replay after the SLA has passed takes the escalation branch."""

    @workflow.run
    async def run(self, *args: Any) -> Outcome:
        ticket = TicketInput.model_validate(args[0])
        opened_at = ticket.opened_at or workflow.info().start_time
        if datetime.now(UTC) - opened_at > timedelta(seconds=ticket.options.sla_seconds):
            await workflow.execute_activity_method(
                AuditActivities.audit,
                AuditEntry(ticket_id=ticket.ticket_id, entry="escalated", idempotency_key="audit:clock"),
                **timeouts.attempt("audit"),
            )
            return Outcome(ticket_id=ticket.ticket_id, status=Status.ESCALATED, answer="", steps=0, model_calls=0)
        return await super().run(*args)


@workflow.defn(name=WORKFLOW_NAME)
class ReadsTheClockInTheSandbox(SupportAgent):
    @workflow.run
    async def run(self, *args: Any) -> Outcome:
        workflow.logger.info("it is %s", datetime.now(UTC))
        return await super().run(*args)


@workflow.defn(name=WORKFLOW_NAME)
class DrawsRandomnessInTheSandbox(SupportAgent):
    @workflow.run
    async def run(self, *args: Any) -> Outcome:
        workflow.logger.info("lucky number %s", random.random())
        return await super().run(*args)


@workflow.defn(name=WORKFLOW_NAME)
class ReadsTheWorldInAPassedThroughPiece(SupportAgent):
    """The reads the two above make, and more, made in a piece imported passed through, as every piece of
    ``workflows/`` is: the sandbox does not see them. (Imported by its full name, as support_agent.py imports the
    pieces: ``from tests.support import careless_piece`` would load it inside the sandbox, since the sandbox holds
    its own ``tests.support``, this module's package.)"""

    @workflow.run
    async def run(self, *args: Any) -> Outcome:
        read_the_world()
        return await super().run(*args)


@workflow.defn(name=WORKFLOW_NAME)
class AuditsMore(SupportAgent):
    """One more audit entry when the ticket closes, with the build's histories not recorded anew: each replays a
    command it does not have."""

    @workflow.run
    async def run(self, *args: Any) -> Outcome:
        outcome = await super().run(*args)
        await self._trail.write("closed")
        return outcome


class _GateThatRereadsThePolicy(ApprovalGate):
    async def wait(self, *args: Any, **kwargs: Any) -> str:
        await workflow.execute_activity_method(PolicyActivities.money_policy, **timeouts.attempt("money_policy"))
        return await super().wait(*args, **kwargs)


@workflow.defn(name=WORKFLOW_NAME)
class ApprovalGateRereadsThePolicy(SupportAgent):
    """A gate that reads the money policy again as a refund starts to wait, with the build's histories not
    recorded anew: a history of a run that waited finds an activity where it has the wait."""

    @workflow.init
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._gate = _GateThatRereadsThePolicy(
            audit=self._trail.write, audited=self._trail.holds, continuation=self._continuation
        )
        self._tools = Toolbox(self._ticket, self._rules, self._gate, self._events)  # the toolbox waits at it

    @workflow.run
    async def run(self, *args: Any) -> Outcome:
        return await super().run(*args)
