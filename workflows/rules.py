"""The rules one ticket is judged by: the operator's money policy, made stricter by what the ticket asks for.

A caller may tighten the policy for its ticket (a lower approval limit, a shorter timeout, fewer approvers),
never loosen it: a looser option, or one that switches a safeguard off, is refused when the ticket starts,
naming the field, because whoever starts tickets (an intake integration, a script, a compromised desk tool)
must not be able to move the threshold inside the ``if`` that a customer cannot talk past. ``rules_for`` is
the one place where options and policy meet; it is pure, so ``tests/test_rules.py`` tries it over every
combination hypothesis finds. The workflow reads the policy through an activity (``RulesInForce``), so a
replay sees the policy that judged each decision, whatever the worker's file says today.

A policy changed while a ticket is open takes effect at the ticket's next refund: one that needs no person is
booked only where the policy that judged it is in force, and read again when the booking refuses it
(``workflows.payouts``); one that asks a person reads it first. A request already
waiting keeps the deadline and approvers it was opened with.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.contracts.fields import amount, same_address
    from activities.contracts.policy import Limits, MoneyPolicy, PolicyInForce, PolicyRead
    from activities.contracts.ticket import TicketOptions
    from activities.policy_activities import PolicyActivities
    from workflows import timeouts

from workflows.audit_log import AuditLog
from workflows.failures import invalid_input


@dataclass(frozen=True)
class Rules:
    """What one ticket's money decisions follow."""

    limit_cents: int
    """Above this a refund waits for a person."""
    timeout_seconds: int
    approvers: tuple[str, ...]
    """Who may answer a request; empty: anyone."""
    policy: MoneyPolicy
    digest: str
    approvers_withdrawn: bool = False
    """The policy now in force allows none of the approvers the ticket named: nobody may approve its payouts.
    ``approvers`` then still holds the policy's, and ``approval_rules.decide`` refuses, since a ticket's options may
    only make the policy stricter."""

    def reach(self, person: str) -> int | None:
        """The largest refund ``person`` may approve; None: any (the policy names no roles)."""
        if not self.policy.approval.roles:
            return None
        return self.policy.approval.reach(person)

    @property
    def roles(self) -> bool:
        """Whether the policy names roles: then only authenticated answers approve."""
        return bool(self.policy.approval.roles)

    @property
    def limits(self) -> Limits | None:
        return self.policy.limits

    @property
    def max_cost_usd(self) -> float | None:
        return self.policy.model.max_cost_usd_per_ticket


class LooserThanPolicyError(ValueError):
    """A ticket option that would loosen the operator's policy, or switch a safeguard off: field and reason."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"options.{field}: {reason}")


def rules_for(options: TicketOptions, in_force: PolicyInForce, *, starting: bool) -> Rules:
    """The policy, tightened by the ticket's options. A ticket ``starting`` has a looser option refused
    (``LooserThanPolicyError``); a ticket already open when the policy tightened is held to the stricter of the
    two instead, since failing it midway would strand what it has done."""
    approval = in_force.policy.approval
    allowed = approval.people or list(in_force.default_approvers)
    limit = _at_most(
        "approval_limit_cents",
        options.approval_limit_cents,
        approval.limit_cents,
        starting=starting,
        refused=lambda asked, desk: (
            f"{amount(asked, None)} is above the desk's approval limit of {amount(desk, None)}; a ticket may only "
            "lower it"
        ),
    )
    timeout = _at_most(
        "approval_timeout_seconds",
        options.approval_timeout_seconds,
        approval.timeout_seconds,
        starting=starting,
        refused=lambda asked, desk: f"{asked} s is longer than the desk's {desk} s; a ticket may only shorten it",
    )
    approvers = tuple(allowed)
    withdrawn = False
    if options.approvers:
        strangers = [person for person in options.approvers if allowed and not _among(person, allowed)]
        if starting and strangers:
            raise LooserThanPolicyError(
                "approvers",
                f"{', '.join(strangers)} may not approve refunds under the desk's policy (approvers: "
                f"{', '.join(allowed)}); a ticket may only name fewer",
            )
        named = tuple(p for p in options.approvers if p not in strangers)
        withdrawn = not named
        approvers = named or approvers
    return Rules(
        limit_cents=limit,
        timeout_seconds=timeout,
        approvers=approvers,
        policy=in_force.policy,
        digest=in_force.digest,
        approvers_withdrawn=withdrawn,
    )


def _among(person: str, people: Sequence[str]) -> bool:
    """Whether ``person`` is one of ``people``, by the one identity rule (``same_address``)."""
    return any(same_address(person, other) for other in people)


def _at_most(field: str, asked: int | None, desk: int, *, starting: bool, refused: Callable[[int, int], str]) -> int:
    """The desk's value, or the ticket's where it asked for less; asking for more is refused when ``starting``."""
    if asked is None:
        return desk
    if starting and asked > desk:
        raise LooserThanPolicyError(field, refused(asked, desk))
    return min(asked, desk)


class RulesInForce:
    """The Temporal side: reads the policy through the ``money_policy`` activity (workflow code may not read a
    file), judges the ticket's options against it, and has the audit trail told which policy judged it, once per
    run and again whenever it changes: by the read itself, a local activity in the workflow task that asks."""

    def __init__(self, options: TicketOptions, trail: AuditLog) -> None:
        self._options = options
        self._trail = trail
        self._rules: Rules | None = None
        self._written: str | None = None
        self._reads = 0

    @property
    def rules(self) -> Rules:
        """The rules as last read (``read``), which the run does before anything it does is judged."""
        if self._rules is None:
            raise RuntimeError("the money policy is read when the run starts, before any rule is asked for")
        return self._rules

    async def read(self, *, starting: bool) -> Rules:
        """Read the policy now in force; a ticket ``starting`` with an option looser than it fails as invalid
        input, naming the field."""
        self._reads += 1
        key = self._trail.key(f"policy-{self._reads}-")
        told = PolicyRead(ticket_id=self._trail.ticket_id, key=key, written=self._written)
        in_force = await workflow.execute_local_activity_method(
            PolicyActivities.money_policy, told, **timeouts.LOCAL_UNTIL_DONE
        )
        try:
            self._rules = rules_for(self._options, in_force, starting=starting)
        except LooserThanPolicyError as error:
            raise invalid_input(str(error)) from None
        self._written = in_force.digest
        return self._rules
