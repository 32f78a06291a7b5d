"""Record, with a release's own code, hand-overs that ``replay_histories/`` has no scenario for: a run that hands
over mid-turn at its budget of model calls, after money was paid and before the model was told of it, and one
that hands over while it waits for the customer's reply.

Run from a scratch copy of the release's commit, so every import below is that release's own (``README.md`` here):

    cd /tmp/1.4.0 && PYTHONPATH=$PWD .venv/bin/python /path/to/project/tests/handed_over/record_hand_overs.py

Each scenario is added to that release's recorder (``scripts/record_histories.py``, whose ``Recorder``,
``SCENARIOS``, ``MODELS`` and ``record`` every release since 1.0.0 has), which records it on a fresh dev server into
the copy's ``replay_histories/``, the run that continued as ``NAME.json`` and the first as ``NAME_first_run.json``.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from typing import Any

recorder: Any = importlib.import_module("scripts.record_histories")
"""The recorder of the release whose copy this runs in (found on ``PYTHONPATH``), not the project's of today."""

PAID_THEN_HANDED_OVER = "paid_then_handed_over_mid_turn"
APPROVED_THEN_HANDED_OVER = "approved_then_handed_over_mid_turn"
WAITING_FOR_A_REPLY = "handed_over_waiting_for_a_reply"


async def paid_then_handed_over_mid_turn(r: Any) -> Any:
    """10.00 of order A-1001 refunded without a person (the limit is 30.00); the run has made its two model calls,
    so it hands over with the refund's result not yet told to the model (``pending``) and the part paid. The next
    run's model asks for 5.00 more, a second part, which waits for a person even below the limit; approved, paid
    as part 2."""
    handle = await r.start(recorder.ticket(approval_limit_cents=3000, continue_as_new_after_steps=2))
    await recorder.awaiting(handle, 500)
    await recorder.approve(handle, 500)
    await handle.result()
    await _export_first_run(r, handle, PAID_THEN_HANDED_OVER)
    return handle


async def approved_then_handed_over_mid_turn(r: Any) -> Any:
    """49.00 approved by ann and paid, the customer emailed at the third model call; the run hands over with the
    email's result not yet told to the model, the answer and the payment carried. The next run only answers."""
    handle = await r.start(recorder.ticket(continue_as_new_after_steps=3))
    await recorder.awaiting(handle, 4900)
    await recorder.approve(handle, 4900)
    await handle.result()
    await _export_first_run(r, handle, APPROVED_THEN_HANDED_OVER)
    return handle


async def handed_over_waiting_for_a_reply(r: Any) -> Any:
    """The first answer asks which order and the ticket waits 8 s for a reply; malformed replies flood it (on a
    server that suggests continuing at 60 events) until it hands over while it waits, its turns and the window
    carried. The reply, by update, reaches the next run, whose model answers it, and which waits out its next
    window (a reply that led to a refund would grow that run, too, past the server's suggestion)."""
    handle = await r.start(recorder.ticket("My parcel never arrived", reply_window_seconds=8))
    await recorder.waiting_for_customer(handle, turns=1)
    waiting_run = (await handle.describe()).run_id
    for n in range(30):
        await handle.signal(recorder.CUSTOMER_MESSAGE, {"bad": n})

    async def continued() -> bool:
        return bool((await handle.describe()).run_id != waiting_run)

    await recorder.poll(continued, timeout=30, what="the waiting ticket to continue as a new run")
    await recorder.waiting_for_customer(handle, turns=1)
    await handle.execute_update(recorder.CUSTOMER_MESSAGE, {"text": "Thank you, it came today."})
    await handle.result()
    path = recorder.HISTORIES / f"{WAITING_FOR_A_REPLY}_first_run.json"
    await recorder.export(r.client, handle.id, path, run_id=waiting_run)
    return handle


async def _export_first_run(r: Any, handle: Any, name: str) -> None:
    path = recorder.HISTORIES / f"{name}_first_run.json"
    await recorder.export(r.client, handle.id, path, run_id=handle.first_execution_run_id)


recorder.SCENARIOS[PAID_THEN_HANDED_OVER] = paid_then_handed_over_mid_turn
recorder.SCENARIOS[APPROVED_THEN_HANDED_OVER] = approved_then_handed_over_mid_turn
recorder.SCENARIOS[WAITING_FOR_A_REPLY] = handed_over_waiting_for_a_reply
recorder.SERVER_ARGS[WAITING_FOR_A_REPLY] = ["--dynamic-config-value", "limit.historyCount.suggestContinueAsNew=60"]
recorder.MODELS[PAID_THEN_HANDED_OVER] = lambda: recorder.plays_back(
    [("lookup_order", {"order_id": "A-1001"})],
    [("issue_refund", {"order_id": "A-1001", "amount_cents": 1000})],
    [("issue_refund", {"order_id": "A-1001", "amount_cents": 500})],
)

if __name__ == "__main__":
    every = [PAID_THEN_HANDED_OVER, APPROVED_THEN_HANDED_OVER, WAITING_FOR_A_REPLY]
    asyncio.run(recorder.record(sys.argv[1:] or every, recorder.HISTORIES))
    recorder.exit_hard(0)
