"""The money policy the tests' workers run under, unless a test states its own.

The product's defaults are strict (``MoneyPolicy()``: 20.00 without a person, limits across tickets, two people
above 500.00, a model budget), and a ticket may only tighten them. Most tests are about something else (a crash,
a reply, a codec) and ask for the limit they need on the ticket, as they always have; so their workers run a desk
whose policy is as loose as the contract allows, and ``tests.support.tickets.ticket`` names the product's 20.00
limit on every ticket that names none. The tests of the policy itself run workers under the policy they test.

``demonstrations`` is on here, and only here: the crash table and the benchmarks switch safeguards off on a
ticket to show what goes wrong without them, which a worker the product builds refuses.
"""

from __future__ import annotations

from activities.contracts.fields import MAX_CENTS
from activities.contracts.policy import ApprovalPolicy, Limits, ModelPolicy, MoneyPolicy, PolicyInForce

LOOSE = MoneyPolicy(
    approval=ApprovalPolicy(limit_cents=MAX_CENTS, two_people_above_cents=None, timeout_seconds=90 * 86_400),
    limits=Limits(customer_cents_per_day=None, customer_refunds_per_day=None, desk_cents_per_day=None),
    model=ModelPolicy(max_cost_usd_per_ticket=None),
)


def in_force(policy: MoneyPolicy = LOOSE, *, demonstrations: bool = True) -> PolicyInForce:
    """What the ``money_policy`` activity of a test's worker answers (with the worker's ``approvers`` setting)."""
    return PolicyInForce(policy=policy, digest=policy.digest(), demonstrations=demonstrations)


TEST_DESK = in_force()
