"""The plain loop and the product killed at the same moment: ``./dev run python -m bench.crash_vs_plain_loop``.

The crash is the seed's: SIGKILL right after the payment provider committed the refund, before the loop
(or the ``issue_refund`` activity) could record it. The plain loop (``baseline/plain_loop.py``) is run
again for the same ticket, as whoever restarts it would; the product's worker is replaced by a new one.
Both use the same scripted model, store and provider. The rows with the provider's refund-total guard
off show what orchestration alone does; the last two show what the guard adds.
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from temporalio.client import Client

from activities.business import Business
from activities.contracts.fields import money
from agent_worker.cli.devserver import start_dev_server
from agent_worker.exits import exit_hard
from tests.support.crashlab import Lab, run_plain_loop
from tests.support.demonstrations import KEYS, Demonstration
from tests.support.tickets import ticket

RESULTS = Path(__file__).parent / "results"
CRASH = "after:issue_refund=kill"
QUESTION = "My parcel for order A-1001 never arrived"


@dataclass(frozen=True)
class Case:
    loop: str
    refund_key: str
    guard: bool


CASES = (
    Case("plain loop (baseline)", "none", guard=False),
    Case("SupportAgent on Temporal", "none", guard=False),
    Case("SupportAgent on Temporal", "per_tool_call", guard=False),
    Case("SupportAgent on Temporal", "per_order", guard=False),
    Case("plain loop (baseline)", "none", guard=True),
    Case("SupportAgent on Temporal", "per_order", guard=True),
)


async def run(client: Client, directory: Path, case: Case) -> str:
    store = Business.sqlite(directory / "business.sqlite3").create()
    shown = Demonstration(refund_key=KEYS[case.refund_key], refund_guard=case.guard)
    if case.loop.startswith("plain"):
        ticket_id = f"T-{uuid.uuid4().hex[:8]}"
        for _ in range(2):  # killed, then run again from its last save
            await run_plain_loop(store, ticket_id, QUESTION, AGENT_FAULTS=CRASH, **shown.env())
    else:
        lab = Lab(client, store, settings={"AGENT_FAULTS": CRASH}, demonstration=shown)
        try:
            handle = await lab.start(ticket(QUESTION, approval_limit_cents=10_000))
            ticket_id = (await lab.supervise(handle)).ticket_id
        finally:
            await lab.close()
    refunds = ", ".join(money(r.amount_cents) for r in store.payments.refunds()) or "none"
    calls = len(store.model_calls.of(ticket_id))
    guard = "on" if case.guard else "off"
    return f"| {case.loop} | `{case.refund_key}` | {guard} | {refunds} | {calls} |"


async def main() -> str:
    env = await start_dev_server(None)
    try:
        with tempfile.TemporaryDirectory(prefix="baseline-") as scratch:
            rows = [await run(env.client, Path(scratch) / str(n), case) for n, case in enumerate(CASES)]
    finally:
        await env.shutdown()
    return "\n".join(
        [
            f"Killed after the provider paid, before it was recorded; {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
            "",
            "| loop | refund key | provider guard | refunds paid | model calls |",
            "|---|---|---|---|---|",
            *rows,
            "",
        ]
    )


if __name__ == "__main__":
    report = asyncio.run(main())
    print(report)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "crash_vs_plain_loop.md").write_text(report)
    exit_hard(0)
