"""Who must approve a payout: ``workflows.approval_rules.decide``, tried over every policy, order and history
hypothesis finds, with the policy's thresholds in any order.

The invariant, written from docs/money-policy.md and not from the code:

- a payout is made without a person only if every rule allows it: within the approval limit, the ticket's total
  within the limit and within the two-people threshold, no earlier payout back on the order (by this ticket or
  any), no limit across tickets met, and within what is left of the order's charge;
- two different people are asked wherever the ticket's total passes the two-people threshold, whichever of the
  two thresholds is the lower;
- a person is asked only for an amount that can still be paid, and only where enough people may approve it: under
  roles, only people whose role reaches the amount; never anybody where a policy change withdrew every approver
  the ticket named.

The last tests plant a mutation of each rule in the decision's source and show that the invariant then fails: a
check that could not fail would prove nothing.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import textwrap
import types
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from activities.contracts.fields import MAX_CENTS, normalised_address
from activities.contracts.policy import ApprovalPolicy, Limits, MoneyPolicy, PolicyInForce, Role
from activities.contracts.ticket import RefundRecord, TicketOptions
from activities.contracts.world import OrderLookup
from workflows import approval_rules
from workflows.approval_rules import Ask, Refused, Unattended, Verdict, decide
from workflows.rules import Rules, rules_for

ORDER = "A-1001"
PEOPLE = ["ann", "Ann", "ben", "cleo", "mallory"]
"""Approver names, two of them one person (the identity rule compares mailboxes, ASCII case folded)."""

amounts = st.integers(1, 300_000)
thresholds = st.integers(0, 300_000)
roles: st.SearchStrategy[list[Role]] = st.one_of(
    st.just([]),
    st.lists(
        st.builds(
            lambda name, people, reach: Role(name=name, people=people, max_cents=reach),
            st.sampled_from(["agents", "leads"]),
            st.lists(st.sampled_from(PEOPLE), min_size=1, max_size=3),
            st.integers(1, 300_000),
        ),
        max_size=2,
        unique_by=lambda role: role.name,
    ),
)
policies = st.builds(
    lambda limit, two, roles: MoneyPolicy(
        approval=ApprovalPolicy(limit_cents=limit, two_people_above_cents=two, roles=roles),
        limits=Limits(customer_cents_per_day=None, customer_refunds_per_day=None, desk_cents_per_day=None),
    ),
    thresholds,
    st.none() | thresholds,
    roles,
)


@st.composite
def situations(draw: st.DrawFn) -> dict[str, Any]:
    """A payout of some amount on an order with some history, under a policy and a ticket's options."""
    policy = draw(policies)
    default = [] if policy.approval.roles else draw(st.lists(st.sampled_from(PEOPLE), max_size=3, unique=True))
    allowed = policy.approval.people or default
    named = draw(st.none() | st.lists(st.sampled_from(PEOPLE), min_size=1, max_size=3, unique=True))
    if named is not None and allowed:
        # A ticket names some of the allowed people, or (the policy changed since it started) people it no longer has.
        named = draw(st.sampled_from([named, [p for p in named if p in allowed] or named]))
    options = TicketOptions(approvers=named, approval_limit_cents=draw(st.none() | thresholds))
    in_force = PolicyInForce(policy=policy, digest=policy.digest(), default_approvers=default)
    charged = draw(st.integers(1, 300_000))
    paid_back = draw(st.integers(0, charged))
    ticket_paid = draw(
        st.lists(
            st.builds(
                lambda n, order, cents: RefundRecord(refund_id=n, order_id=order, amount_cents=cents, currency="USD"),
                st.integers(1, 9),
                st.sampled_from([ORDER, "A-2002"]),
                st.integers(1, 100_000),
            ),
            max_size=3,
        )
    )
    return {
        "amount_cents": draw(amounts),
        "order": OrderLookup(
            order_id=ORDER,
            amount_cents=charged,
            refunded_cents=paid_back,
            customer_email="jo@example.com",
            currency=draw(st.sampled_from(["USD", "JPY", "KWD"])),
        ),
        "rules": rules_for(options, in_force, starting=False),
        "ticket_paid": ticket_paid,
        "limit_met": draw(st.sampled_from(["", "jo@example.com's payouts without a person today: 3 of 3"])),
    }


def violations(verdict: Verdict, amount_cents: int, order: OrderLookup, rules: Rules, **history: Any) -> list[str]:
    """What ``verdict`` gets wrong about this payout, by the rules as the docs state them; empty: nothing."""
    payable = amount_cents <= order.amount_cents - order.refunded_cents
    if isinstance(verdict, Refused):
        return []
    if not payable:
        return ["a payout past what is left of the charge is not refused"]
    expected = _people_asked(amount_cents, order, rules, history["ticket_paid"], history["limit_met"])
    people = verdict.people if isinstance(verdict, Ask) else 0
    wrong = [] if people == expected else [f"asks for {people} people where the rules ask for {expected}"]
    return wrong + (_who_may_not(verdict, amount_cents, rules) if isinstance(verdict, Ask) else [])


def _people_asked(
    amount_cents: int, order: OrderLookup, rules: Rules, ticket_paid: list[RefundRecord], limit_met: str
) -> int:
    total = sum(r.amount_cents for r in ticket_paid) + amount_cents
    two_above = rules.policy.approval.two_people_above_cents
    if two_above is not None and total > two_above:
        return 2
    paid_back_before = order.refunded_cents > 0 or any(r.order_id == order.order_id for r in ticket_paid)
    return 1 if total > rules.limit_cents or paid_back_before or limit_met else 0


def _who_may_not(verdict: Ask, amount_cents: int, rules: Rules) -> list[str]:
    """What is wrong with who a verdict lets approve, and how."""
    wrong = []
    if rules.approvers_withdrawn:
        wrong.append("asks somebody where every approver the ticket named was withdrawn")
    if rules.roles and any((rules.reach(person) or 0) < amount_cents for person in verdict.approvers):
        wrong.append("lets a person approve past their role's reach")
    if rules.roles and not verdict.approvers:
        wrong.append("lets anyone approve under roles")
    if rules.approvers and not set(verdict.approvers) <= set(rules.approvers):
        wrong.append("lets someone the rules do not allow approve")
    distinct = {normalised_address(person) for person in verdict.approvers}
    if verdict.approvers and len(distinct) < verdict.people:
        wrong.append(f"asks for {verdict.people} people among {len(distinct)} who may approve")
    if (verdict.people > 1 or rules.roles) and not verdict.signed_in_only:
        wrong.append("takes two people's approvals, or one under roles, by signal, where a name is only a claim")
    return wrong


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(situation=situations())
def test_a_payout_is_made_without_a_person_only_if_every_rule_allows_it(situation: dict[str, Any]) -> None:
    verdict = decide(**situation)
    assert violations(verdict, **situation) == []


@given(situation=situations(), lower=thresholds)
def test_a_stricter_limit_never_asks_for_fewer_people(situation: dict[str, Any], lower: int) -> None:
    """Lowering the approval limit, as a ticket may, never lets through what the looser limit held back."""
    rules: Rules = situation["rules"]
    stricter = {**situation, "rules": _replace(rules, limit_cents=min(lower, rules.limit_cents))}
    before, after = decide(**situation), decide(**stricter)
    assert isinstance(before, Refused) or isinstance(after, Refused) or _people(after) >= _people(before)


@pytest.mark.parametrize(
    ("limit", "two_above", "amount", "people"),
    [
        (100_000, 50_000, 60_000, 2),  # the two-people threshold below the limit: two people, not nobody
        (50_000, 100_000, 60_000, 1),
        (50_000, 100_000, 160_000, 2),
        (50_000, 50_000, 50_001, 2),
        (50_000, 50_000, 50_000, 0),
        (0, 0, 1, 2),
        (100_000, None, 60_000, 0),
        (100_000, 0, 1, 2),
    ],
)
def test_every_order_of_the_thresholds_reads_one_way(
    limit: int, two_above: int | None, amount: int, people: int
) -> None:
    """Each order of the approval limit and the two-people threshold, and the two equal: the strictest wins."""
    policy = MoneyPolicy(approval=ApprovalPolicy(limit_cents=limit, two_people_above_cents=two_above))
    rules = rules_for(TicketOptions(), PolicyInForce(policy=policy, digest=policy.digest()), starting=True)
    order = OrderLookup(order_id=ORDER, amount_cents=200_000, customer_email="jo@example.com", currency="USD")
    verdict = decide(amount, order, rules, ticket_paid=[])
    assert not isinstance(verdict, Refused)
    assert _people(verdict) == people


def test_a_ticket_split_under_the_two_people_threshold_still_needs_two() -> None:
    """Two payouts of 300.00 on one ticket, under a two-people threshold of 500.00: the second needs two people."""
    policy = MoneyPolicy(approval=ApprovalPolicy(limit_cents=100_000, two_people_above_cents=50_000))
    rules = rules_for(TicketOptions(), PolicyInForce(policy=policy, digest=policy.digest()), starting=True)
    order = OrderLookup(order_id="A-2002", amount_cents=200_000, customer_email="jo@example.com", currency="USD")
    first = RefundRecord(refund_id=1, order_id=ORDER, amount_cents=30_000, currency="USD")
    verdict = decide(30_000, order, rules, ticket_paid=[first])
    assert isinstance(verdict, Ask)
    assert verdict.people == 2
    assert "the ticket's total would pass the two-people threshold of USD 500.00" in verdict.why


def test_nobody_is_asked_for_more_than_is_left_of_the_charge() -> None:
    """A person asked to approve 150.00 on a 15.00 order could only be refused later: the payout is refused now."""
    rules = rules_for(TicketOptions(), PolicyInForce(policy=MoneyPolicy(), digest="d"), starting=True)
    order = OrderLookup(order_id=ORDER, amount_cents=1500, customer_email="jo@example.com", currency="JPY")
    verdict = decide(15_000, order, rules, ticket_paid=[])
    assert isinstance(verdict, Refused)
    assert (
        verdict.why
        == "JPY 15,000 is more than is left of order A-1001's charge: JPY 0 of JPY 1,500 was paid back already"
    )


def test_a_policy_change_that_withdraws_every_named_approver_leaves_nobody_not_everybody() -> None:
    """The ticket named ann; the policy now in force names only ben: nobody may approve, so nothing is paid."""
    started = MoneyPolicy(approval=ApprovalPolicy(roles=[Role(name="a", people=["ann", "ben"], max_cents=MAX_CENTS)]))
    changed = MoneyPolicy(approval=ApprovalPolicy(roles=[Role(name="a", people=["ben"], max_cents=MAX_CENTS)]))
    options = TicketOptions(approvers=["ann"])
    rules_for(options, PolicyInForce(policy=started, digest="1"), starting=True)
    rules = rules_for(options, PolicyInForce(policy=changed, digest="2"), starting=False)
    order = OrderLookup(order_id=ORDER, amount_cents=10_000, customer_email="jo@example.com", currency="USD")
    verdict = decide(5000, order, rules, ticket_paid=[])
    assert isinstance(verdict, Refused)
    assert "none of the approvers this ticket named may approve" in verdict.why


def test_two_spellings_of_one_mailbox_are_one_person_when_counting_who_may_approve() -> None:
    """Roles naming ann and Ann: one person, so a payout that needs two is refused, not sent to one twice."""
    roles = [Role(name="a", people=["ann@example.com", "Ann@Example.COM"], max_cents=MAX_CENTS)]
    policy = MoneyPolicy(approval=ApprovalPolicy(roles=roles, two_people_above_cents=1000))
    rules = rules_for(TicketOptions(), PolicyInForce(policy=policy, digest="d"), starting=True)
    order = OrderLookup(order_id=ORDER, amount_cents=10_000, customer_email="jo@example.com", currency="USD")
    verdict = decide(5000, order, rules, ticket_paid=[])
    assert isinstance(verdict, Refused)
    assert "it needs two different people" in verdict.why or "no two different people" in verdict.why


# --- the invariant catches a mutation of each rule ---

MUTANTS = {
    "the approval limit and the ticket's total forgotten": ("if total > rules.limit_cents:", "if False:"),
    "the ticket's total read as this payout alone": ("total = already + amount_cents", "total = amount_cents"),
    "the two-people threshold compared with the limit": (
        "if two_above is not None and total > two_above:",
        "if two_above is not None and total > two_above and amount_cents > rules.limit_cents:",
    ),
    "a further part of an order paid back by this ticket": (
        "if any(r.order_id == order.order_id for r in ticket_paid):",
        "if False:",
    ),
    "an order paid back before by anyone": ("elif order.refunded_cents > 0:", "elif False:"),
    "a limit across tickets met": ("if limit_met:", "if False:"),
    "what is left of the charge": ("if amount_cents > left:", "if False:"),
    "roles' reach": ("(rules.reach(person) or 0) >= amount_cents", "True"),
    "approvers withdrawn": ("if rules.approvers_withdrawn:", "if False:"),
    "people counted by name, not identity": (
        "normalised_address(person) for person in able",
        "person for person in able",
    ),
    "two people by signal": ("signed_in_only=rules.roles or people > 1", "signed_in_only=rules.roles"),
}


def _mutant(find_text: str, replace_text: str) -> Callable[..., Verdict]:
    """``decide`` with one rule changed in its source, built beside the real module's names."""
    source = textwrap.dedent(inspect.getsource(approval_rules))
    assert source.count(find_text) == 1, f"the rule {find_text!r} is not where the mutant expects it"
    module = types.ModuleType("mutated_approval_rules")
    sys.modules[module.__name__] = module  # a dataclass looks its module up while it is being made
    try:
        code = compile(source.replace(find_text, replace_text), module.__name__, "exec")
        exec(code, module.__dict__)  # the module's own source, mutated on purpose
    finally:
        del sys.modules[module.__name__]
    # The verdicts it returns are the real module's kinds, so that the invariant reads them as it reads the real ones.
    module.__dict__.update(Unattended=Unattended, Ask=Ask, Refused=Refused)
    namespace = module.__dict__
    mutated: Callable[..., Verdict] = namespace["decide"]
    return mutated


@pytest.mark.parametrize("name", MUTANTS)
def test_the_invariant_fails_when_a_rule_is_mutated(name: str) -> None:
    mutated = _mutant(*MUTANTS[name])
    found = find(
        situations(),
        lambda situation: bool(violations(mutated(**situation), **situation)),
        settings=settings(max_examples=5000, deadline=None, database=None),
    )
    assert violations(mutated(**found), **found)


def _people(verdict: Verdict) -> int:
    return verdict.people if isinstance(verdict, Ask) else 0


def _replace(rules: Rules, **changes: Any) -> Rules:
    return dataclasses.replace(rules, **changes)
