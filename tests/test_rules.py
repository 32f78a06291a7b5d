"""A ticket's options may tighten the operator's money policy, never loosen it: ``workflows.rules.rules_for``, the
one place options and policy meet, tried over every combination hypothesis finds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from activities.contracts.fields import DAY, MAX_CENTS
from activities.contracts.policy import ApprovalPolicy, MoneyPolicy, PolicyInForce, Role
from activities.contracts.ticket import TicketOptions
from workflows.rules import LooserThanPolicyError, rules_for

PEOPLE = ["ann", "ben", "cleo", "mallory"]

policies = st.builds(
    lambda limit, timeout, roles: MoneyPolicy(
        approval=ApprovalPolicy(limit_cents=limit, timeout_seconds=timeout, roles=roles)
    ),
    st.integers(0, MAX_CENTS),
    st.integers(1, 90 * DAY),
    st.one_of(
        st.just([]),
        st.lists(st.sampled_from(PEOPLE[:3]), min_size=1, max_size=3, unique=True).map(
            lambda people: [Role(name="agents", people=people, max_cents=50_000)]
        ),
    ),
)
options = st.builds(
    TicketOptions,
    approval_limit_cents=st.none() | st.integers(0, MAX_CENTS),
    approval_timeout_seconds=st.none() | st.integers(1, 90 * DAY),
    approvers=st.none() | st.lists(st.sampled_from(PEOPLE), min_size=1, max_size=4, unique=True),
)


def in_force(policy: MoneyPolicy, default_approvers: list[str] | None = None) -> PolicyInForce:
    return PolicyInForce(policy=policy, digest=policy.digest(), default_approvers=default_approvers or [])


@given(policy=policies, asked=options, default_approvers=st.lists(st.sampled_from(PEOPLE[:2]), unique=True))
def test_whatever_a_ticket_asks_its_rules_are_never_looser_than_the_policy(
    policy: MoneyPolicy, asked: TicketOptions, default_approvers: list[str]
) -> None:
    """Accepted when starting or held to the stricter when already open: limit, timeout and approvers within the
    policy's."""
    allowed = policy.approval.people or default_approvers
    for starting in (True, False):
        try:
            rules = rules_for(asked, in_force(policy, default_approvers), starting=starting)
        except LooserThanPolicyError:
            assert starting, "an open ticket is held to the stricter rules, never failed"
            continue
        assert rules.limit_cents <= policy.approval.limit_cents
        assert rules.timeout_seconds <= policy.approval.timeout_seconds
        assert rules.approvers is not None
        if allowed:
            assert rules.approvers, "never 'anyone' where the policy names people"
            assert set(rules.approvers) <= set(allowed)


@given(policy=policies, asked=options)
def test_a_ticket_that_only_tightens_is_taken_with_what_it_asked(policy: MoneyPolicy, asked: TicketOptions) -> None:
    """The other side: a stricter ask is never refused, and is what the ticket is held to."""
    approval = policy.approval
    tighter = asked.model_copy(
        update={
            "approval_limit_cents": None
            if asked.approval_limit_cents is None
            else min(asked.approval_limit_cents, approval.limit_cents),
            "approval_timeout_seconds": None
            if asked.approval_timeout_seconds is None
            else min(asked.approval_timeout_seconds, approval.timeout_seconds),
            "approvers": [p for p in asked.approvers or [] if not approval.people or p in approval.people] or None,
        }
    )
    rules = rules_for(tighter, in_force(policy), starting=True)
    if tighter.approval_limit_cents is not None:
        assert rules.limit_cents == tighter.approval_limit_cents
    if tighter.approvers:
        assert list(rules.approvers or ()) == tighter.approvers


@pytest.mark.parametrize(
    ("asked", "field"),
    [
        (
            {"approval_limit_cents": 2001},
            "options.approval_limit_cents: 2,001 (20.01 in a two-decimal currency) is above the desk's approval limit",
        ),
        ({"approval_timeout_seconds": DAY + 1}, "options.approval_timeout_seconds: 86401 s is longer"),
        ({"approvers": ["mallory"]}, "options.approvers: mallory may not approve refunds under the desk's policy"),
    ],
)
def test_each_looser_option_is_refused_naming_its_field(asked: dict[str, object], field: str) -> None:
    policy = MoneyPolicy(approval=ApprovalPolicy(roles=[Role(name="agents", people=["ann"], max_cents=9000)]))
    with pytest.raises(LooserThanPolicyError) as refused:
        rules_for(TicketOptions.model_validate(asked), in_force(policy), starting=True)
    assert str(refused.value).startswith(field)


@pytest.mark.parametrize(
    "asked",
    [{"refund_key": "none"}, {"refund_key": "per_tool_call"}, {"reconcile_refunds": False}, {"linear_history": False}],
)
def test_no_ticket_can_switch_a_safeguard_off_whatever_the_worker(asked: dict[str, object]) -> None:
    """The options 1.1.0's demonstration workers took are read only with the value production ran: a ticket's
    input that switches one off is not a ticket (the crash lab changes the activities instead,
    ``tests/support/demonstrations.py``)."""
    (field,) = asked
    with pytest.raises(ValidationError) as refused:
        TicketOptions.model_validate(asked)
    assert [error["loc"] for error in refused.value.errors()] == [(field,)]
    assert TicketOptions.model_validate({field: TicketOptions.model_fields[field].default}) == TicketOptions()
