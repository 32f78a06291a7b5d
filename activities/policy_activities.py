"""Operator policy the workflow needs but must not read itself: settings live outside workflow code.

Workflow code may not read the environment or a file (a replay on another worker could see other settings and take
another path), so the money policy in force (with the default approvers), and whether the approval inbox vouched for an
answer (its key is a secret) are asked for through activities, whose answers are recorded in the history and
replayed from there: a replay sees the policy that judged each decision, not the one in force today.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from temporalio import activity

from activities import vouching
from activities.contracts.approvals import VouchRequest
from activities.contracts.policy import PolicyInForce


class PolicyActivities:
    """The worker's policy, as its wiring built it (``agent_worker.wiring.policy_in_force``)."""

    def __init__(self, policy: PolicyInForce, web_approval_keys: Sequence[bytes] = ()) -> None:
        self.policy = policy
        self.web_approval_keys = list(web_approval_keys)

    def all(self) -> list[Callable[..., Any]]:
        return [self.money_policy, self.vouched]

    @activity.defn(name="money_policy")
    async def money_policy(self) -> PolicyInForce:
        """The desk's money policy (``AGENT_POLICY_FILE``, else the defaults), its digest, the default approvers,
        and whether this worker lets tickets switch safeguards off to demonstrate what they prevent."""
        return self.policy

    @activity.defn(name="vouched")
    async def vouched(self, request: VouchRequest) -> bool:
        """Whether the approval inbox signed this answer for this ticket (``activities.vouching``)."""
        return vouching.vouched(self.web_approval_keys, request.workflow_id, request.answer)
