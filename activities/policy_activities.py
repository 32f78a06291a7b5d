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
from activities.business.audit import AuditTrail
from activities.calls import call
from activities.contracts.approvals import VouchRequest
from activities.contracts.policy import PolicyInForce, PolicyRead, in_force_entry
from activities.contracts.world import AuditEntry


class PolicyActivities:
    """The worker's policy, as its wiring built it (``agent_worker.wiring.policy_in_force``), and the audit trail
    its reads write the policy's entry to."""

    def __init__(self, policy: PolicyInForce, trail: AuditTrail, web_approval_keys: Sequence[bytes] = ()) -> None:
        self.policy = policy
        self.trail = trail
        self.web_approval_keys = list(web_approval_keys)

    def all(self) -> list[Callable[..., Any]]:
        return [self.money_policy, self.vouched]

    @activity.defn(name="money_policy")
    async def money_policy(self, read: PolicyRead | None = None) -> PolicyInForce:
        """The desk's money policy (``AGENT_POLICY_FILE``, else the defaults), its digest and the default
        approvers. Asked with a ``read`` (as the workflow asks it), it writes the ticket's audit entry for
        the policy it finds, once per key, unless the run wrote that policy's entry last: the trail learns of
        the policy from the read that found it, with no activity of its own."""
        if read is not None and self.policy.digest != read.written:
            entry = AuditEntry(
                ticket_id=read.ticket_id,
                entry=in_force_entry(self.policy.digest, read.written),
                idempotency_key=f"{read.key}{self.policy.digest}",
            )
            await call(lambda: self.trail.write(entry))
        return self.policy

    @activity.defn(name="vouched")
    async def vouched(self, request: VouchRequest) -> bool:
        """Whether the approval inbox signed this answer for this ticket (``activities.vouching``)."""
        return vouching.vouched(self.web_approval_keys, request.workflow_id, request.answer)
