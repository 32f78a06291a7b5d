"""Row 6 of the seed's crash table: the plain loop the product is measured against (``baseline/``).

The loop runs as a real process, killed by SIGKILL right after the provider paid, and is run again for
the same ticket, as whoever restarts it would.
"""

from __future__ import annotations

import signal
from collections import Counter

import pytest

from activities.business import Business
from tests.support.crashlab import run_plain_loop

pytestmark = pytest.mark.slow

QUESTION = "My parcel for order A-1001 never arrived"


async def test_the_plain_loop_killed_after_the_refund_pays_again_and_the_second_refund_is_a_different_amount(
    store: Business,
) -> None:
    crash = {"DEMONSTRATION": "refund_guard=off", "AGENT_FAULTS": "after:issue_refund=kill"}

    killed, _ = await run_plain_loop(store, "T-plain", QUESTION, **crash)
    rerun, answer = await run_plain_loop(store, "T-plain", QUESTION, **crash)

    assert (killed, rerun) == (-signal.SIGKILL, 0)
    assert [r.amount_cents for r in store.payments.refunds()] == [4900, 3900]
    calls = Counter(call.step for call in store.model_calls.of("T-plain"))
    assert sum(calls.values()) == 5
    assert calls[2] == 2
    assert "refunded USD 39.00" in answer


async def test_with_the_refund_guard_on_the_plain_loops_second_refund_is_refused(store: Business) -> None:
    killed, _ = await run_plain_loop(store, "T-plain", QUESTION, AGENT_FAULTS="after:issue_refund=kill")
    rerun, answer = await run_plain_loop(store, "T-plain", QUESTION, AGENT_FAULTS="after:issue_refund=kill")

    assert (killed, rerun) == (-signal.SIGKILL, 0)
    assert [r.amount_cents for r in store.payments.refunds()] == [4900]
    assert (
        "Refusing to refund USD 39.00 on A-1001: USD 49.00 of USD 49.00 is already paid back (refunds USD 49.00)"
        in answer
    )
