"""Operator policy the workflow needs but must not read itself: settings live outside workflow code.

Workflow code may not read the environment or a file (a replay on another worker could see other settings and
take another path), so the money policy, the default approvers, and whether the approval inbox vouched for an
answer (its key is a secret), are asked for through activities, whose answers are recorded in the history and
replayed from there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from temporalio import activity

from activities import vouching
from activities.contracts.approvals import VouchRequest
from activities.contracts.policy import MoneyPolicy, PolicyInForce


class PolicyActivities:
    def __init__(
        self, approvers: list[str], web_approval_keys: Sequence[bytes] = (), in_force: PolicyInForce | None = None
    ) -> None:
        self.approvers = approvers
        self.web_approval_keys = list(web_approval_keys)
        given = in_force or PolicyInForce(policy=MoneyPolicy(), digest=MoneyPolicy().digest())
        self.in_force = given.model_copy(update={"default_approvers": approvers})

    def all(self) -> list[Callable[..., Any]]:
        return [self.default_approvers, self.vouched, self.money_policy]

    @activity.defn(name="money_policy")
    async def money_policy(self) -> PolicyInForce:
        """The desk's money policy as the worker holds it, with its digest and the default approvers."""
        return self.in_force

    @activity.defn(name="default_approvers")
    async def default_approvers(self) -> list[str]:
        """Who may approve refunds on tickets that name nobody; empty means anyone."""
        return self.approvers

    @activity.defn(name="vouched")
    async def vouched(self, request: VouchRequest) -> bool:
        """Whether the approval inbox signed this answer for this ticket (``activities.vouching``)."""
        return vouching.vouched(self.web_approval_keys, request.workflow_id, request.answer)
