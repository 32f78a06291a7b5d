"""The desk's money policy: who may release how much, what a customer and the desk may be refunded without a
person, and what a ticket's model calls may cost. The operator owns it (``AGENT_POLICY_FILE``, a TOML file the
worker reads at start); a ticket may only make it stricter (``TicketOptions``). The workflow receives it through
the ``money_policy`` activity, so a replay sees the policy that judged each decision, not today's.

Every field has a default, and the defaults are safe in production: a desk that forgets the file still has a
person look at refunds above 20.00, at a customer's fourth refund in a day, and two people at refunds above
500.00.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, field_validator

from activities.contracts.fields import (
    DAY,
    MAX_CENTS,
    Approvers,
    Cents,
    Contract,
    Label,
    PersonName,
    approvers_fit,
    bounded,
    same_address,
)
from activities.contracts.limits import PEOPLE_PER_ROLE, ROLES


def _false_is_none(value: object) -> object:
    """TOML has no null: in the file, ``false`` switches off a rule that may be off (``limits.desk_cents_per_day =
    false``), and ``policy show`` writes an off rule so. ``true`` stays an error, as does leaving the field out
    meaning anything but its default."""
    return None if value is False else value


Off = BeforeValidator(_false_is_none)


class _Policy(Contract):
    """A part of the policy: its fields' docstrings are their descriptions, which ``policy show`` prints."""

    model_config = ConfigDict(use_attribute_docstrings=True)


class Role(_Policy):
    """People who may approve refunds up to an amount."""

    name: Label
    """What the desk calls the role (``agent``, ``lead``): unique in the file."""
    people: Annotated[list[PersonName], Field(min_length=1, max_length=PEOPLE_PER_ROLE), AfterValidator(approvers_fit)]
    """Who holds it: the approver names the approval inbox signs people in as."""
    max_cents: Cents
    """The largest refund this role's people may approve."""


class ApprovalPolicy(_Policy):
    """When a refund waits for a person, for how long, and who may answer."""

    limit_cents: Annotated[int, bounded(0, MAX_CENTS)] = 2000
    """A refund above this waits for a person."""
    timeout_seconds: Annotated[int, bounded(1, 90 * DAY)] = DAY
    """How long a person has to answer; silence means no."""
    two_people_above_cents: Annotated[Annotated[int, bounded(0, MAX_CENTS)] | None, Off] = 50_000
    """A refund above this needs two different people's authenticated approvals; off (false): one is enough."""
    roles: Annotated[list[Role], Field(max_length=ROLES)] = []
    """Who may approve, and up to how much. None named: the worker's ``AGENT_APPROVERS``, else anyone, for any
    amount, by signal as well as in the approval inbox. Everyone the roles name, together, within
    ``APPROVERS_BYTES``: a request that waits carries them."""

    @field_validator("roles")
    @classmethod
    def _distinct_roles(cls, roles: list[Role]) -> list[Role]:
        """Two roles of one name would leave a reader guessing which one a person's reach comes from."""
        names = [role.name for role in roles]
        if len(set(names)) != len(names):
            raise ValueError(f"two roles share a name: {sorted(n for n in set(names) if names.count(n) > 1)}")
        return roles

    @field_validator("roles")
    @classmethod
    def _people_fit(cls, roles: list[Role]) -> list[Role]:
        """Each role's people fit, and so must everyone together: a request for the largest amount names them all."""
        approvers_fit(list(dict.fromkeys(person for role in roles for person in role.people)))
        return roles

    @property
    def people(self) -> list[str]:
        """Everyone a role names, in the order first named."""
        return list(dict.fromkeys(person for role in self.roles for person in role.people))

    def reach(self, person: str) -> int:
        """The largest refund ``person`` may approve (0: none): their largest role's. People are compared by the
        one identity rule (``same_address``: a mailbox, ASCII case folded)."""
        return max(
            (role.max_cents for role in self.roles if any(same_address(person, p) for p in role.people)), default=0
        )


class Limits(_Policy):
    """What is refunded without a person, across tickets, counted in the ledger where refunds are booked. A
    refund that would pass one waits for a person instead. Off (false in the file, None here): no such limit."""

    customer_cents_per_day: Annotated[Annotated[int, bounded(0, MAX_CENTS)] | None, Off] = 5000
    """Refunded to one customer (their email address) without a person, over the last 24 hours."""
    customer_refunds_per_day: Annotated[Annotated[int, bounded(0, 1_000_000)] | None, Off] = 3
    """Refunds to one customer without a person, over the last 24 hours."""
    desk_cents_per_day: Annotated[Annotated[int, bounded(0, MAX_CENTS)] | None, Off] = 500_000
    """Refunded by the whole desk without a person, over the last 24 hours."""


class ModelPolicy(_Policy):
    """What a ticket's model calls may cost."""

    max_cost_usd_per_ticket: Annotated[Annotated[float, Field(gt=0, le=10_000)] | None, Off] = 2.0
    """Past this estimated cost of its model calls (US dollars), a ticket is handed to a person; off: no budget."""


class MoneyPolicy(_Policy):
    """The policy file, as read and validated (``agent-worker policy check FILE``)."""

    approval: ApprovalPolicy = ApprovalPolicy()
    limits: Limits = Limits()
    model: ModelPolicy = ModelPolicy()

    def digest(self) -> str:
        """What names this policy in the audit trail and the outcome: the same for the same rules, however the
        file that states them is laid out."""
        rules = self.model_dump(mode="json")
        # Roles and their people are sets: listing them in another order states the same rules.
        roles = rules["approval"]["roles"]
        roles.sort(key=lambda role: role["name"])
        for role in roles:
            role["people"] = sorted(set(role["people"]))
        canonical = json.dumps(rules, sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()[:16]


def in_force_entry(digest: str, was: str | None) -> str:
    """The audit trail's words for the money policy a ticket's run finds in force, and the one it replaces."""
    return f"money policy {digest} in force" + ("" if was is None else f" (was {was})")


class PolicyRead(Contract):
    """What the ``money_policy`` local activity is asked: the read writes the
    audit entry for the policy it finds, when it is not the one the run last wrote (``written``), under ``key``
    followed by the digest it found. A key that names what was found keeps the trail exact when a failed
    workflow task is taken again and its read finds another policy: each entry's words follow from its key."""

    ticket_id: str
    key: str
    written: str | None = None


class PolicyInForce(Contract):
    """What the ``money_policy`` activity answers: the policy, its digest, and what the worker adds to it."""

    policy: MoneyPolicy
    digest: str
    default_approvers: Approvers = []
    """``AGENT_APPROVERS``: who may approve when the policy names no roles (empty: anyone)."""
    demonstrations: Literal[False] = False
    """Written by 1.1.0's workers into every policy read their histories hold, so it stays readable; no worker
    lets a ticket switch a safeguard off any more (the crash lab's demonstrations are ``tests/support``'s)."""
