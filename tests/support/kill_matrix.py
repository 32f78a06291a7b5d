"""A kill at every step: one approval ticket, with the worker SIGKILLed at each activity boundary in turn.

The ticket is the product's whole path: look the order up, ask for a refund above the approval limit, wait
for a person, refund, email, answer. Each kill point gets its own database, task queue and worker
processes; a new worker is started as soon as the killed one is gone, as a process supervisor would.
The test (``test_kill_matrix.py``) checks every row; the benchmark (``bench/recovery.py``) runs the same
rows one at a time and reports them with their recovery time.
"""

from __future__ import annotations

import asyncio
import signal
import statistics
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client

from activities.business import Business
from activities.contracts.approvals import ApprovalDecision
from activities.contracts.fields import money
from activities.contracts.ticket import Status
from tests.support.crashlab import Lab, recovery_seconds
from tests.support.demonstrations import Demonstration
from tests.support.fake_stripe import FakeStripe, pay_at_stripe, stripe_env
from tests.support.smtp_server import MailServer, smtp_env
from tests.support.tickets import ticket
from tests.support.waits import poll, waiting_amount

WAITING = "while waiting for approval"
NO_CRASH = "no crash"
APPROVAL_LIMIT = 2000

KILL_POINTS: tuple[str, ...] = (
    "before:money_policy#1",
    "after:money_policy#1",
    "before:think#1",
    "after:think#1",
    "before:lookup_order",
    "after:lookup_order",
    "before:think#2",
    "after:think#2",
    "before:money_policy#2",
    "after:money_policy#2",
    "before:audit#1",
    "after:audit#1",
    WAITING,
    "before:audit#2",
    "after:audit#2",
    "before:issue_refund",
    "after:issue_refund",
    "before:think#3",
    "after:think#3",
    "before:send_email",
    "after:send_email",
    "before:think#4",
    "after:think#4",
    "before:closing",
    "after:closing",
)
"""In the order the ticket reaches them. ``think#n`` is the model call for step n; ``money_policy#1`` reads the
desk's policy as the ticket starts and writes its audit entry, ``#2`` reads it again before the refund asks a
person; ``audit#1`` records that the refund waits for approval, ``audit#2`` the approval; ``closing`` writes the
closing line in the task that closes the run. The three local activities (``money_policy``, ``closing``) do their
work before their workflow task is committed: a kill after one is a task taken again, which must not write an entry
twice."""


@dataclass(frozen=True)
class Row:
    kill_point: str
    refunds: list[int]
    approved: list[int]
    emails: int
    audit_entries: int
    model_calls: int
    status: Status
    killed: int
    recovery: float | None
    """Seconds from the SIGKILL to the ticket's next activity starting on the new worker."""
    error: str | None = None
    """Why the row has no figures: the run did not finish, or a worker died of something else."""

    def markdown(self) -> str:
        if self.error is not None:
            return f"| `{self.kill_point}` | error: {self.error} | | | | | |"
        recovery = "" if self.recovery is None else f"{self.recovery:.1f} s"
        refunds = ", ".join(money(r) for r in self.refunds) or "none"
        return (
            f"| `{self.kill_point}` | {refunds} | {self.emails} | {self.audit_entries} | {self.model_calls} "
            f"| {self.status} | {recovery} |"
        )


PROVIDER_KILL_POINTS: tuple[str, ...] = (
    "before:issue_refund",
    "after:issue_refund",
    "before:send_email",
    "after:send_email",
)
"""The boundaries around the two side effects, where a real provider's own rules meet the worker's."""


@dataclass(frozen=True)
class RealProviders:
    """Stripe's API (the local fake) and a mail server (aiosmtpd) for one row: what was paid and mailed is
    counted where a real provider would count it, not in the worker's database."""

    stripe: FakeStripe
    mail: MailServer

    def env(self) -> dict[str, str]:
        return {**stripe_env(self.stripe), **smtp_env(self.mail)}


@contextmanager
def real_providers(store: Business) -> Iterator[RealProviders]:
    """Both servers, running for one row, with the row's order A-1001 paid at Stripe."""
    with FakeStripe().running() as account, MailServer().running() as mail:
        pay_at_stripe(account, store, "A-1001")
        yield RealProviders(account, mail)


async def run_kill_point(client: Client, directory: Path, kill_point: str, *, real: bool = False) -> Row:
    """One approval ticket with the worker killed at ``kill_point`` (or not at all, for ``NO_CRASH``); with
    ``real``, its workers refund through Stripe's API and mail through an SMTP server."""
    directory.mkdir(parents=True, exist_ok=True)
    store = Business.sqlite(directory / "business.sqlite3").create()
    with real_providers(store) if real else nullcontext() as providers:
        return await _run(client, store, kill_point, providers)


async def _run(client: Client, store: Business, kill_point: str, providers: RealProviders | None) -> Row:
    # The guard is off so that the model's change of mind after a lost answer (39.00 on a 49.00 order)
    # is paid if approved: the rows show what orchestration does, not what the provider's guard catches.
    lab = Lab(
        client,
        store,
        settings=providers.env() if providers else {},
        demonstration=None if providers else Demonstration(refund_guard=False),  # Stripe keeps its own rule
    )
    if kill_point not in (WAITING, NO_CRASH):
        lab.settings["AGENT_FAULTS"] = f"{kill_point}=kill"
    try:
        handle = await lab.start(ticket(approval_limit_cents=APPROVAL_LIMIT))
        if kill_point == WAITING:
            first = await lab.spawn()
            await poll(lambda: waiting_amount(handle), what="the refund to wait for approval")
            first.signal(signal.SIGKILL)
            await first.exited()
        outcome = await lab.supervise(handle)
        killed = lab.killed()
        recovery = await recovery_seconds(handle, killed[0], lab.workers[1]) if killed else None
        return Row(
            kill_point=kill_point,
            refunds=[r["amount"] for r in providers.stripe.refunds()]
            if providers
            else [r.amount_cents for r in store.payments.refunds()],
            approved=[a.amount_cents or 0 for a in outcome.approvals if a.decision is ApprovalDecision.APPROVED],
            emails=len(providers.mail.messages()) if providers else len(store.mail.sent()),
            audit_entries=len(store.audit.entries()),
            model_calls=len(store.model_calls.of(outcome.ticket_id)),
            status=outcome.status,
            killed=len(killed),
            recovery=recovery,
        )
    finally:
        await lab.close()


async def run_matrix(
    client: Client,
    directory: Path,
    kill_points: Sequence[str] = (NO_CRASH, *KILL_POINTS),
    concurrency: int = 1,
    *,
    real: bool = False,
) -> list[Row]:
    """Every kill point, ``concurrency`` at a time, in the order given (against real providers: ``real``)."""
    lanes = asyncio.Semaphore(concurrency)

    async def one(n: int, kill_point: str) -> Row:
        async with lanes:
            try:
                return await run_kill_point(client, directory / f"{n:02d}", kill_point, real=real)
            except Exception as error:  # noqa: BLE001 - one broken row, whatever broke it, must not hide the others
                error_text = f"{type(error).__name__}: {error}".replace("\n", " ")[:500]
                return Row(kill_point, [], [], 0, 0, 0, Status.FAILED, 0, None, error_text)

    return list(await asyncio.gather(*(one(n, point) for n, point in enumerate(kill_points))))


HEADER = (
    "| kill point | refunds | emails | audit entries | model calls | status | recovery |\n|---|---|---|---|---|---|---|"
)


def table(rows: Sequence[Row]) -> str:
    return "\n".join([HEADER, *(row.markdown() for row in rows)])


def recovery_summary(rows: Sequence[Row]) -> str:
    times = sorted(r.recovery for r in rows if r.recovery is not None and r.kill_point != WAITING)
    if not times:
        return "no recovery measured"
    return (
        f"recovery after a SIGKILL mid-activity, {len(times)} kills: median {statistics.median(times):.1f} s, "
        f"min {times[0]:.1f} s, max {times[-1]:.1f} s"
    )
