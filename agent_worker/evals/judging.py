"""What a scenario expected, against what its ticket did: one ``Check`` per expectation the scenario states.

A scenario whose model could not be asked (a stale or missing recording, a script that ran out) or whose ticket did
not end fails on that alone, with the reason: its other checks would judge a ticket that did not run as written.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from activities.contracts.fields import amount, same_address
from activities.contracts.ticket import Outcome
from agent_worker.evals.runner import Ran
from agent_worker.evals.scenario import Expect


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str = ""


def judge(ran: Ran) -> list[Check]:
    if ran.refused is not None:
        return [Check("model answered", passed=False, detail=ran.refused)]
    if ran.outcome is None:
        return [Check("ticket ended", passed=False, detail=ran.error or "no outcome")]
    return [*_what_it_did(ran, ran.outcome), *_how_it_went(ran.scenario.expect, ran.outcome)]


def _what_it_did(ran: Ran, outcome: Outcome) -> list[Check]:
    """The money, the person and the mail."""
    expect = ran.scenario.expect
    checks: list[Check] = []
    if expect.refunds is not None:
        paid = Counter((r.order_id, r.amount_cents) for r in outcome.refunds)
        wanted = Counter((r.order_id, r.amount_cents) for r in expect.refunds)
        currencies = {o.order_id: o.currency for o in ran.scenario.orders}
        currencies |= {r.order_id: r.currency for r in outcome.refunds}
        said = f"paid {_payments(paid, currencies)}, expected {_payments(wanted, currencies)}"
        checks.append(Check("refunds", paid == wanted, said))
    if expect.asked_person is not None:
        asked, wanted_asked = YES[ran.asked_person], YES[expect.asked_person]
        checks.append(Check("asked a person", asked == wanted_asked, f"{asked}, expected {wanted_asked}"))
    if expect.emails is not None:
        if expect.emails.count is not None:
            count = len(ran.emails)
            checks.append(
                Check("emails", count == expect.emails.count, f"{count} sent, expected {expect.emails.count}")
            )
        if expect.emails.only_customer:
            customer = ran.scenario.ticket.customer
            others = sorted({e.to for e in ran.emails if not same_address(e.to, customer)})
            checks.append(
                Check("emails only to the customer", not others, f"also to {', '.join(others)}" * bool(others))
            )
    return checks


def _how_it_went(expect: Expect, outcome: Outcome) -> list[Check]:
    """The status, the steps and cost it took, and the answer's words."""
    checks: list[Check] = []
    if expect.status is not None:
        status = f"{outcome.status.value}, expected {expect.status.value}"
        checks.append(Check("status", outcome.status == expect.status, status))
    if expect.max_steps is not None:
        steps = f"{outcome.model_calls} of at most {expect.max_steps}"
        checks.append(Check("steps", outcome.model_calls <= expect.max_steps, steps))
    if expect.max_cost_usd is not None:
        cost = outcome.usage.total.cost_usd
        checks.append(Check("cost", cost <= expect.max_cost_usd, f"${cost:.4f} of at most ${expect.max_cost_usd:.4f}"))
    answer = outcome.answer.casefold()
    checks.extend(Check(f"answer says {words!r}", words.casefold() in answer) for words in expect.answer_contains)
    checks.extend(
        Check(f"answer never says {words!r}", words.casefold() not in answer) for words in expect.answer_excludes
    )
    return checks


def _payments(payments: Counter[tuple[str, int]], currencies: dict[str, str]) -> str:
    """Payments as people read them, each in its order's currency (``USD 19.00 on A-1001 x2``)."""
    if not payments:
        return "nothing"
    return ", ".join(
        f"{amount(cents, currencies.get(order))} on {order}" + (f" x{n}" if n > 1 else "")
        for (order, cents), n in sorted(payments.items())
    )


YES = {True: "yes", False: "no"}
