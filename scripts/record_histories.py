"""Record ``replay_histories/`` anew from scenarios: one real run per path worth guarding.

    ./dev run python scripts/record_histories.py [NAME ...]

Each scenario runs a real ticket on a fresh dev server (a real worker process for the crash) and writes
its history with ``agent-worker history export``'s writer. The histories are this build's own: a run is pinned to
the build that started it, so re-record every scenario a change of the workflow's commands touches, and replace the
files (``docs/changing-workflow-code.md``).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.plugin import SimplePlugin
from temporalio.worker import Worker

from activities import vouching
from activities.business import Business
from activities.contracts.approvals import VouchedApproval
from activities.contracts.conversation import Usage
from activities.contracts.limits import PENDING_REPLIES
from activities.contracts.names import (
    APPROVE_SIGNAL,
    CUSTOMER_MESSAGE,
    MAIL_BOUNCED,
    ORDER_EVENT_SIGNAL,
    VERIFY_SENDER,
    WAKE_SIGNAL,
)
from activities.contracts.policy import ApprovalPolicy, Limits, ModelPolicy, MoneyPolicy
from activities.contracts.world import Order
from activities.language_model import LanguageModel
from agent_worker import wiring
from agent_worker.cli.devserver import start_dev_server
from agent_worker.cli.replay import HISTORIES, export
from agent_worker.cli.worker import build_worker, local_worker
from agent_worker.config import Settings
from agent_worker.config.deployment import DeploymentSettings
from agent_worker.config.model_settings import ClaudeSettings
from agent_worker.config.web import WebSettings
from agent_worker.exits import exit_hard
from agent_worker.model_choice import choose_model
from tests.support import deployments, faults, tickets
from tests.support.bookings import BookingsUnder
from tests.support.desk import LOOSE, LOOSE_FILE
from tests.support.fake_stripe import FakeStripe, pay_at_stripe, stripe_business
from tests.support.history import events
from tests.support.holds import Holds
from tests.support.long_tickets import ContextBoundModel, LongTicketModel, long_ticket, seed_long_orders
from tests.support.models import PlaybackModel, calls, says
from tests.support.processes import address, spawn_worker, worker_env
from tests.support.tickets import Handle, answer, ticket
from tests.support.waits import awaiting, poll, waiting_for_customer, waiting_for_event


async def approve(handle: Handle, amount: int, **how: Any) -> None:
    await handle.signal(APPROVE_SIGNAL, answer(amount, **how))


def plays_back(*steps: list[tuple[str, dict[str, Any]]]) -> PlaybackModel:
    """One response of tool calls per step, then "Done.": for the paths the scripted support never takes."""
    return PlaybackModel([*(calls(*step, step=n) for n, step in enumerate(steps, 1)), says("Done.")])


class Recorder:
    def __init__(
        self,
        client: Client,
        store: Business,
        task_queue: str,
        holds: Holds | None = None,
        build: Callable[[str], Worker] | None = None,
    ) -> None:
        self.client, self.store, self.task_queue, self.holds = client, store, task_queue, holds
        self.build = build
        """For a scenario whose workers join a Worker Deployment (``DEPLOYMENTS``): a worker of another build of
        it, the same in every other way."""

    async def start(self, raw: Any) -> Handle:
        return await tickets.start(self.client, self.task_queue, raw, prefix="record")

    async def finished(self, raw: Any) -> Handle:
        handle = await self.start(raw)
        await handle.result()
        return handle


async def resolved_without_approval(r: Recorder) -> Handle:
    return await r.finished(ticket(approval_limit_cents=10_000))


async def approved_refund(r: Recorder) -> Handle:
    handle = await r.start(ticket())
    await awaiting(handle, 4900)
    await approve(handle, 4900)
    await handle.result()
    return handle


async def declined_by_a_person(r: Recorder) -> Handle:
    handle = await r.start(ticket())
    await awaiting(handle, 4900)
    await approve(handle, 4900, approved=False, approver="ben")
    await handle.result()
    return handle


async def wrong_amount_then_right_amount(r: Recorder) -> Handle:
    handle = await r.start(ticket())
    await awaiting(handle, 4900)
    await approve(handle, 1000)
    await handle.signal(APPROVE_SIGNAL, {"amount_cents": "all of it"})  # malformed: recorded, released nothing
    await approve(handle, 4900)
    await handle.result()
    return handle


async def tool_failure_handed_to_model(r: Recorder) -> Handle:
    return await r.finished(ticket("Where is my order Z-9999?"))


async def max_steps_reached(r: Recorder) -> Handle:
    return await r.finished(ticket(approval_limit_cents=10_000, max_steps=2))


async def malformed_ticket_failed(r: Recorder) -> Handle:
    handle = await r.start({"ticket_id": "T-bad", "question": "refund!", "options": {"refund_key": "per_moon"}})
    await _wait_closed(handle)  # the run fails on purpose
    return handle


async def sla_escalation(r: Recorder) -> Handle:
    opened = datetime.now(UTC) - timedelta(days=2)
    return await r.finished({**ticket(), "opened_at": opened.isoformat()})


async def sla_young_ticket_handled_by_agent(r: Recorder) -> Handle:
    """Inside a 10-second SLA when recorded, long past it whenever it is replayed: the clock trap's bait."""
    opened = datetime.now(UTC) - timedelta(seconds=1)
    return await r.finished({**ticket(approval_limit_cents=10_000, sla_seconds=10), "opened_at": opened.isoformat()})


async def resolved_with_closing_audit(r: Recorder) -> Handle:
    """Parts of two orders refunded without a person, one in dollars and one in euros: the closing audit entry
    totals them without naming a currency."""
    r.store.orders.add(Order(order_id="A-2002", amount_cents=1500, customer_email="ann@example.com", currency="EUR"))
    return await r.finished(ticket("Please refund part of A-1001 and A-2002.", approval_limit_cents=10_000))


async def two_lookups_at_once(r: Recorder) -> Handle:
    """Two read-only calls in one response run concurrently, in one workflow task."""
    return await r.finished(ticket("Where are my orders A-1001 and A-1002?"))


async def two_lookups_one_by_one(r: Recorder) -> Handle:
    """The same question, the model looking the orders up in two steps: two workflow tasks."""
    return await two_lookups_at_once(r)


async def approval_from_someone_not_named_then_an_approver(r: Recorder) -> Handle:
    """Only the ticket's approvers release a refund."""
    handle = await r.start(ticket(approvers=["ben"]))
    await awaiting(handle, 4900)
    await approve(handle, 4900, approver="mallory")
    await approve(handle, 4900, approver="ben")
    await handle.result()
    return handle


async def crash_with_retried_activity(r: Recorder) -> Handle:
    """A real worker process is killed with SIGKILL while the model thinks; this process's worker carries on."""
    crash = Recorder(r.client, r.store, r.task_queue + "-crash")
    settings = {"AGENT_SCRIPTED_THINK_SECONDS": "30"}
    worker = await spawn_worker(worker_env(address(r.client), crash.task_queue, r.store.database.path, **settings))
    handle = await crash.start(ticket(approval_limit_cents=10_000))

    async def thinking() -> bool:
        pending = (await handle.describe()).raw_description.pending_activities
        return any(a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED for a in pending)

    await poll(thinking, timeout=30, what="the model call to start on the worker to kill")
    worker.send_signal(signal.SIGKILL)
    await worker.wait()
    carrying_on = scripted(crash.task_queue, r.store)
    async with local_worker(r.client, carrying_on, r.store, choose_model(carrying_on, r.store.model_calls)):
        await handle.result()
    return handle


async def linear_history_with_large_results(r: Recorder) -> Handle:
    """Think gets only what is new and the conversation's
    key, and 20 KB event logs travel as a preview and a ``sha256:`` key."""
    seed_long_orders(r.store, 4)
    return await r.finished(long_ticket(4))


async def summarized_old_turns(r: Recorder) -> Handle:
    """Past its token limit, the conversation's older
    turns are summarised by the model (a ``summarize`` activity) and the ticket goes on from the summary."""
    seed_long_orders(r.store, 6)
    request = long_ticket(6)
    request["options"]["summarize_above_tokens"] = 8_000
    return await r.finished(request)


async def continued_as_new_while_awaiting_approval(r: Recorder) -> Handle:
    """A run that continues as new while its refund waits for approval (this file is the second run; the
    first, which ends in the continuation, is ``..._first_run``)."""
    return await _continued_mid_approval(r, "continued_as_new_while_awaiting_approval")


async def _continued_mid_approval(r: Recorder, name: str) -> Handle:
    handle = await r.start(ticket(continue_as_new_after_steps=2))
    first = r.client.get_workflow_handle(handle.id, run_id=handle.first_execution_run_id)

    async def continued() -> bool:
        return (await first.describe()).status == WorkflowExecutionStatus.CONTINUED_AS_NEW

    await poll(continued, timeout=30, interval=0.05, what="the first run to continue as new")
    await awaiting(handle, 4900)
    await approve(handle, 4900)
    await handle.result()
    await export(r.client, handle.id, HISTORIES / f"{name}_first_run.json", run_id=handle.first_execution_run_id)
    return handle


async def refund_timed_out_reconciled(r: Recorder) -> Handle:
    """A refund pays, then hangs through all its attempts; the workflow asks the provider (``find_refund``) before
    telling the model, and hears it was paid."""
    settings = Settings(
        task_queue=r.task_queue + "-hang",
        db_path=r.store.database.path,
        graceful_shutdown_seconds=1,
        claude=ClaudeSettings(backend="scripted"),
        policy_file=LOOSE_FILE,
    )
    hangs = faults.plugins(settings, "after:issue_refund=hang*5")
    business = wiring.business(settings)
    async with local_worker(r.client, settings, business, choose_model(settings, business.model_calls), plugins=hangs):
        return await Recorder(r.client, r.store, settings.task_queue).finished(ticket(approval_limit_cents=10_000))


async def approval_answered_twice_the_first_decides(r: Recorder) -> Handle:
    """A request with an id, its deadline and a memo;
    ann declines, mallory's later approval is rejected as already answered, and both are audited."""
    handle = await r.start(ticket())
    request = await awaiting(handle, 4900)
    assert request is not None
    await approve(handle, 4900, approved=False, approver="ann")
    await approve(handle, 4900, approver="mallory", request_id=request.request_id)
    await handle.result()
    return handle


async def approval_signals_without_input_then_approved(r: Recorder) -> Handle:
    """A signal with no input, one with two, then an approval naming its request: recorded, never a wedge."""
    handle = await r.start(ticket())
    await awaiting(handle, 4900)
    await handle.signal(APPROVE_SIGNAL)
    await handle.signal(APPROVE_SIGNAL, args=[{"amount_cents": 4900}, {"approved": True}])
    await approve(handle, 4900, request_id="R1")
    await handle.result()
    return handle


async def another_customers_order_refused(r: Recorder) -> Handle:
    """A refund asked for without a lookup is looked up
    first, and another customer's order reads as no order."""
    return await r.finished(ticket("Refund A-1004, it is mine", approval_limit_cents=10_000))


async def refund_in_two_parts(r: Recorder) -> Handle:
    """Keys name the part, and a second part of the same
    order waits for a person even below the limit."""
    handle = await r.start(ticket(approval_limit_cents=3000))
    await awaiting(handle, 500)
    await approve(handle, 500)
    await handle.result()
    return handle


async def continued_while_a_request_waits(r: Recorder) -> Handle:
    """A run that continues as new while request R1 waits: it clears the search attribute and the memo first,
    and the next run waits on for R1 (``..._first_run`` is the first run)."""
    return await _continued_mid_approval(r, "continued_while_a_request_waits")


async def cancelled_while_a_refund_waits(r: Recorder) -> Handle:
    """Cancelled while request R1 waits, the ticket clears
    what visibility shows, writes who cancelled and why, and completes as ``cancelled``."""
    handle = await r.start(ticket())
    await awaiting(handle, 4900)
    await poll(
        lambda: events(handle, EventType.EVENT_TYPE_TIMER_STARTED),
        timeout=30,
        interval=0.05,
        what="the approval's timer",
    )
    await handle.cancel(reason="by ann: the customer withdrew")
    await handle.result()
    return handle


async def cancelled_while_a_refund_is_in_flight(r: Recorder) -> Handle:
    """The refund's first attempt hangs, the cancel comes meanwhile: the refund is waited for, paid on its retry
    and recorded, and nothing follows."""
    settings = Settings(
        task_queue=r.task_queue + "-hang",
        db_path=r.store.database.path,
        graceful_shutdown_seconds=1,
        claude=ClaudeSettings(backend="scripted"),
        policy_file=LOOSE_FILE,
    )
    hangs = faults.plugins(settings, "before:issue_refund=hang")
    business = wiring.business(settings)
    async with local_worker(r.client, settings, business, choose_model(settings, business.model_calls), plugins=hangs):
        handle = await Recorder(r.client, r.store, settings.task_queue).start(ticket(approval_limit_cents=10_000))

        async def refunding() -> bool:
            pending = (await handle.describe()).raw_description.pending_activities
            return any(a.activity_type.name == "issue_refund" for a in pending)

        await poll(refunding, timeout=30, interval=0.05, what="the refund to be in flight")
        await handle.cancel()
        await handle.result()
        return handle


async def customer_replied_twice(r: Recorder) -> Handle:
    """The first answer asks which order, a reply by update
    names it (refunded, mailed), a signalled reply thanks the agent, and the window then passes with no more."""
    handle = await r.start(ticket("My parcel never arrived", reply_window_seconds=5, approval_limit_cents=10_000))
    await waiting_for_customer(handle, turns=1)
    await handle.execute_update(CUSTOMER_MESSAGE, {"text": "It is order A-1001"})
    await waiting_for_customer(handle, turns=2)
    await handle.signal(CUSTOMER_MESSAGE, {"text": "Thank you!"})
    await handle.result()
    return handle


async def waited_for_a_delivery_scan(r: Recorder) -> Handle:
    """The model waits for the carrier; a malformed event and one
    about another order come first, then the scan of the order, which ends the wait."""
    handle = await r.start(ticket("My parcel for order A-1001 is late. Is it still on its way?"))
    await waiting_for_event(handle)
    await handle.signal(ORDER_EVENT_SIGNAL, {"order_id": "A-1001"})
    await handle.signal(ORDER_EVENT_SIGNAL, {"order_id": "A-1005", "event": "delivered"})
    await handle.signal(ORDER_EVENT_SIGNAL, {"order_id": "A-1001", "event": "delivered", "detail": "at the door"})
    await handle.result()
    return handle


async def replies_past_a_turns_budget(r: Recorder) -> Handle:
    """While a refund waits, short replies by update until the
    next turn reads as many as it may (the one past it is refused by the validator, so not in the history), two
    more signalled (audited, not taken), then the approval; the next turn reads the replies taken. (The bound by
    size is the same path; its replies would make this file half a megabyte.)"""
    handle = await r.start(ticket())
    await awaiting(handle, 4900)
    with contextlib.suppress(WorkflowUpdateFailedError):
        for n in range(PENDING_REPLIES + 1):
            await handle.execute_update(CUSTOMER_MESSAGE, {"text": f"reply {n}"})
    for n in range(2):
        await handle.signal(CUSTOMER_MESSAGE, {"text": f"signalled {n}"})
    await approve(handle, 4900)
    await handle.result()
    return handle


async def answers_cut_to_their_budget(r: Recorder) -> Handle:
    """What the model writes: a call to no tool with an input past its budget, and
    an answer past its own, each recorded in the outcome as a head and a size."""
    return await r.finished(ticket())


async def waited_for_a_delivery_scan_across_runs(r: Recorder) -> Handle:
    """A relay floods a ticket waiting for the carrier (on a
    server that suggests continuing at 60 events), which continues as new while it waits; the scan then ends the
    wait in the new run (this file; ``..._first_run`` is the run that waited first)."""
    handle = await r.start(
        ticket("My parcel for order A-1001 is late. Is it still on its way?", approval_limit_cents=10_000)
    )
    await waiting_for_event(handle)
    waiting_run = (await handle.describe()).run_id
    for n in range(30):
        await handle.signal(ORDER_EVENT_SIGNAL, {"order_id": "A-1001", "bad": n})

    async def continued() -> bool:
        return (await handle.describe()).run_id != waiting_run

    await poll(continued, timeout=30, what="the waiting ticket to continue as a new run")
    await waiting_for_event(handle)
    await handle.signal(ORDER_EVENT_SIGNAL, {"order_id": "A-1001", "event": "delivered"})
    await handle.result()
    name = "waited_for_a_delivery_scan_across_runs_first_run"
    await export(r.client, handle.id, HISTORIES / f"{name}.json", run_id=waiting_run)
    return handle


INBOX_KEY = "recorded-inbox-key-0123456789abcdef"


async def approved_in_the_inbox(r: Recorder) -> Handle:
    """The ``approve`` update: an answer with a wrong amount refused by the validator (not in the history), a
    forged one recorded as rejected, then the inbox's signed answer, which the ticket acts on."""
    handle = await r.start(ticket())
    await awaiting(handle, 4900)
    answer = VouchedApproval(amount_cents=4900, approved=True, approver="ann", request_id="R1", signature="0" * 64)
    with contextlib.suppress(WorkflowUpdateFailedError):
        await handle.execute_update(APPROVE_SIGNAL, answer.model_copy(update={"amount_cents": 100}))
    with contextlib.suppress(WorkflowUpdateFailedError):
        await handle.execute_update(APPROVE_SIGNAL, answer)
    signed = answer.model_copy(update={"signature": vouching.sign(INBOX_KEY.encode(), handle.id, answer)})
    await handle.execute_update(APPROVE_SIGNAL, signed)
    await handle.result()
    return handle


async def shipping_status_read(r: Recorder) -> Handle:
    """A tool added by its declaration alone."""
    r.store.orders.add_event("A-1001", "scanned at the Leeds depot")
    return await r.finished(ticket("Where is my parcel for order A-1001?"))


async def stripe_refused_the_workers_key(r: Recorder) -> Handle:
    """Stripe refuses the worker's API key at the first
    lookup, and the ticket ends as failed, for a person (the business is ``stripe_with_a_revoked_key``'s)."""
    handle = await r.start(ticket(approval_limit_cents=10_000))
    await handle.result()
    return handle


def _signed(handle: Handle, amount: int, approver: str, request_id: str = "R1") -> dict[str, Any]:
    fields = answer(amount, approver=approver, request_id=request_id)
    unsigned = VouchedApproval(**fields, signature="0" * 64)
    return {**fields, "signature": vouching.sign(INBOX_KEY.encode(), handle.id, unsigned)}


async def two_people_approved_in_the_inbox(r: Recorder) -> Handle:
    """The policy read and audited, 120.00 above its
    two-person threshold, a signal's claimed approval rejected, ann's signed one recorded as 1 of 2, ben's
    second one paying (the policy is ``POLICIES``')."""
    handle = await r.start(ticket("My parcel for order A-1003 never arrived.", email="cleo@example.com"))
    await awaiting(handle, 12_000)
    await approve(handle, 12_000, approver="ann")
    await handle.execute_update(APPROVE_SIGNAL, _signed(handle, 12_000, "ann"))
    await handle.execute_update(APPROVE_SIGNAL, _signed(handle, 12_000, "ben"))
    await handle.result()
    return handle


async def answers_kept_as_rows(r: Recorder) -> Handle:
    """Ann's signed approval of 120.00, 1 of 2, then ben's decline
    with its reason, each audited with its row for auditors (the policy is ``POLICIES``')."""
    handle = await r.start(ticket("My parcel for order A-1003 never arrived.", email="cleo@example.com"))
    await awaiting(handle, 12_000)
    await handle.execute_update(APPROVE_SIGNAL, _signed(handle, 12_000, "ann"))
    fields = answer(12_000, approver="ben", request_id="R1", approved=False, reason="It arrived: signed for at 9:12.")
    unsigned = VouchedApproval(**fields, signature="0" * 64)
    signed = {**fields, "signature": vouching.sign(INBOX_KEY.encode(), handle.id, unsigned)}
    await handle.execute_update(APPROVE_SIGNAL, signed)
    await handle.result()
    rows = list(r.store.audit.answered(datetime.min.replace(tzinfo=UTC), datetime.now(UTC) + timedelta(days=1)))
    assert [answer.decision.value for _, answer in rows] == ["partly_approved", "declined"], rows
    return handle


async def limit_across_tickets_met(r: Recorder) -> Handle:
    """A limit across tickets (``operator-policy``): 15.00 is under the 20.00 limit but past bob's 10.00 a day
    without a person, so the provider refuses it unpaid, a request citing the limit waits, and ops approves it."""
    handle = await r.start(ticket("My parcel for order A-1002 never arrived.", email="bob@example.com"))
    await awaiting(handle, 1500)
    await approve(handle, 1500, approver="ops")
    await handle.result()
    return handle


async def model_budget_spent(r: Recorder) -> Handle:
    """The model's budget (``operator-policy``): each call costs 0.75, the third passes 2.00, and the ticket is
    handed to a person."""
    return await r.finished(ticket(max_steps=20))


async def approved_in_euros(r: Recorder) -> Handle:
    """An order in euros, looked up with its currency, whose
    refund waits with a request naming it, and whose result the model reads as ``EUR 49.00``."""
    r.store.orders.add(Order(order_id="A-2001", amount_cents=4900, customer_email="ann@example.com", currency="EUR"))
    handle = await r.start(ticket("My parcel for order A-2001 never arrived."))
    await awaiting(handle, 4900)
    await approve(handle, 4900)
    await handle.result()
    return handle


async def store_credit_approved(r: Recorder) -> Handle:
    """Store credit instead of a refund, above the limit: it waits for a person like a refund, and is issued under
    its part's key once approved."""
    handle = await r.start(ticket("I would rather have store credit for order A-1001."))
    await awaiting(handle, 4900)
    await approve(handle, 4900)
    await handle.result()
    return handle


async def nobody_answered_in_time(r: Recorder) -> Handle:
    """Nobody answers before the deadline; the ticket closes as ``unanswered``, and the audit's closing line says
    which request nobody answered, until when."""
    return await r.finished(ticket(approval_timeout_seconds=2))


async def judged_again_under_the_policy_in_force(r: Recorder) -> Handle:
    """A refund that needs no person is judged by the policy read as the ticket started and booked under its
    digest; the first booking is made where another policy is in force (``tests.support.bookings``): refused with
    nothing paid, the policy read again, the refund judged again and booked."""
    return await resolved_without_approval(r)


async def two_people_below_the_limit(r: Recorder) -> Handle:
    """120.00 under an approval limit of 1,000.00 but above two people's threshold of 100.00: ann's and ben's
    signed approvals pay it."""
    question = "My parcel for order A-1003 never arrived."
    handle = await r.start(ticket(question, email="cleo@example.com", approval_limit_cents=100_000))
    await awaiting(handle, 12_000)
    await handle.execute_update(APPROVE_SIGNAL, _signed(handle, 12_000, "ann"))
    await handle.execute_update(APPROVE_SIGNAL, _signed(handle, 12_000, "ben"))
    await handle.result()
    return handle


async def refused_past_the_charge(r: Recorder) -> Handle:
    """1,200.00 asked back on a 120.00 order, refused and audited with nobody asked."""
    return await r.finished(ticket("My parcel for order A-1003 never arrived.", email="cleo@example.com"))


async def answered_while_it_hands_over(r: Recorder) -> Handle:
    """An approval signalled while the first run, handing over as its refund waits, archives its records; the run
    writes it to the audit trail before its snapshot, and the next run pays (``..._first_run`` is the first
    run)."""
    assert r.holds is not None
    handle = await r.start(ticket(continue_as_new_after_steps=2))
    await r.holds.entered("archive_records")
    await approve(handle, 4900, request_id="R1")
    r.holds.release("archive_records")
    await handle.result()
    name = "answered_while_it_hands_over"
    await export(r.client, handle.id, HISTORIES / f"{name}_first_run.json", run_id=handle.first_execution_run_id)
    return handle


async def refused_as_the_ledger_has_it(r: Recorder) -> Handle:
    """Two tickets wait to refund the whole of one order; the first is paid;
    the second's approval is refused by the booking (its settlement, refused, in the memo), and the model's second
    ask, judged by the order as the ledger has it now, is refused with nobody asked (this file is the second)."""
    first, second = await r.start(ticket()), await r.start(ticket())
    await awaiting(first, 4900)
    await awaiting(second, 4900)
    await approve(first, 4900)
    await first.result()
    await approve(second, 4900)
    await second.result()
    return second


async def approval_wait_flooded_across_runs(r: Recorder) -> Handle:
    """A request waits while a relay floods the ticket with events (on a server that
    suggests continuing at 60 events); the approval wait hands over by the rule every wait keeps
    (``Continuation.wait``) and the next run takes the approval (``..._first_run`` is the run that waited first)."""
    handle = await r.start(ticket())
    await awaiting(handle, 4900)
    waiting_run = (await handle.describe()).run_id
    for n in range(30):
        await handle.signal(ORDER_EVENT_SIGNAL, {"order_id": "B-9999", "event": "scanned", "detail": str(n)})
    await continued_from(handle, waiting_run)
    await awaiting(handle, 4900)
    await approve(handle, 4900)
    await handle.result()
    await export(
        r.client, handle.id, HISTORIES / "approval_wait_flooded_across_runs_first_run.json", run_id=waiting_run
    )
    for n, run_id in enumerate(
        await runs_between(r.client, handle, waiting_run), start=2
    ):  # a flood may hand over twice
        await export(r.client, handle.id, HISTORIES / f"approval_wait_flooded_across_runs_run_{n}.json", run_id=run_id)
    return handle


async def moved_to_a_new_build_while_it_waits(r: Recorder) -> Handle:
    """A ticket waits for a person on build v1 of its deployment; v2 is made current, and the ticket, woken as
    ``agent-worker rollout move`` wakes it, hears its target changed and continues as new on v2
    (``Continuation.retargeted``), waiting for the same request, which is approved and paid there (``..._first_run``
    is the run that waited on v1)."""
    assert r.build is not None, "recorded with a deployment (DEPLOYMENTS)"
    name = DEPLOYMENTS["moved_to_a_new_build_while_it_waits"]
    await current(r, name, "v1")
    handle = await r.start(ticket())
    await awaiting(handle, 4900)
    waiting_run = (await handle.describe()).run_id
    async with r.build("v2"):
        await current(r, name, "v2")
        await handle.signal(WAKE_SIGNAL)
        await continued_from(handle, waiting_run)
        await awaiting(handle, 4900)
        await approve(handle, 4900)
        await handle.result()
    first = HISTORIES / "moved_to_a_new_build_while_it_waits_first_run.json"
    await export(r.client, handle.id, first, run_id=waiting_run)
    return handle


async def current(r: Recorder, name: str, build: str) -> None:
    """Make ``build`` the current version of deployment ``name`` once its workers have polled, and wait until the
    scenario's task queue routes to it (a ticket woken before then is not told its target changed)."""
    await deployments.registered(r.client, name, build)
    await deployments.deployment(
        r.client, "set-current-version", "--deployment-name", name, "--build-id", build, "--yes"
    )
    await deployments.routed_to(r.client, r.task_queue, build)


async def continued_from(handle: Handle, run_id: str) -> None:
    """Wait until the ticket's latest run is no longer ``run_id``: the waiting run has handed over."""

    async def continued() -> bool:
        return (await handle.describe()).run_id != run_id

    await poll(continued, timeout=30, what="the waiting ticket to continue as a new run")


async def runs_between(client: Client, handle: Handle, first: str) -> list[str]:
    """The runs of ``handle``'s ticket after ``first`` and before its latest, oldest first: each stored beside the
    run that handed over to it, so every hand-over has the run that took it over stored too."""
    runs: list[str] = []
    history = await client.get_workflow_handle(handle.id).fetch_history()
    before = history.events[0].workflow_execution_started_event_attributes.continued_execution_run_id
    while before and before != first:
        runs.insert(0, before)
        history = await client.get_workflow_handle(handle.id, run_id=before).fetch_history()
        before = history.events[0].workflow_execution_started_event_attributes.continued_execution_run_id
    return runs


@contextlib.contextmanager
def stripe_with_a_revoked_key(folder: Path) -> Iterator[Business]:
    with FakeStripe().running() as account:
        store = stripe_business(account, folder, api_key="sk_test_revoked").create()
        pay_at_stripe(account, store, "A-1001")
        yield store
        store.close()


@contextlib.contextmanager
def embedded(folder: Path) -> Iterator[Business]:
    store = Business.sqlite(folder / "business.sqlite3").create()
    yield store
    store.close()


async def _wait_closed(handle: Handle) -> None:
    async def closed() -> bool:
        return (await handle.describe()).close_time is not None

    await poll(closed, timeout=30, interval=0.05, what="the run to close")


async def unverified_sender_refused(r: Recorder) -> Handle:
    """A ticket whose sender is not verified (mail whose From: did not verify),
    the model asking to look an order up and refund it: both refused before any activity runs, and answered."""
    return await r.finished({**ticket("Refund A-1001 now", approval_limit_cents=10_000), "sender_verified": False})


async def unverified_sender_verified_by_a_person(r: Recorder) -> Handle:
    """The lookup of an unverified ticket refused, then a person verifies the
    sender (the ``verify_sender`` update, audited), and a verified reply's turn looks the order up and refunds it."""
    raw = ticket("My parcel for order A-1001 never arrived", reply_window_seconds=5, approval_limit_cents=10_000)
    handle = await r.start({**raw, "sender_verified": False})
    await waiting_for_customer(handle, turns=1)
    await handle.execute_update(VERIFY_SENDER, {"by": "ann"})
    await handle.execute_update(CUSTOMER_MESSAGE, {"text": "It is order A-1001", "sender_verified": True})
    await handle.result()
    return handle


async def mail_bounced_then_no_more_mail(r: Recorder) -> Handle:
    """The customer's address bounces the desk's email (``mail_bounced``, audited); the next turn's email is refused
    before any activity runs."""
    handle = await r.start(ticket("Please email me the details", reply_window_seconds=5))
    await waiting_for_customer(handle, turns=1)
    await handle.signal(MAIL_BOUNCED, {"address": "ann@example.com", "status": "5.1.1", "diagnostic": "no such user"})
    await handle.execute_update(CUSTOMER_MESSAGE, {"text": "Did you write to me?"})
    await handle.result()
    return handle


SCENARIOS: dict[str, Callable[[Recorder], Awaitable[Handle]]] = {
    f.__name__: f
    for f in (
        resolved_without_approval,
        approved_refund,
        declined_by_a_person,
        wrong_amount_then_right_amount,
        tool_failure_handed_to_model,
        max_steps_reached,
        malformed_ticket_failed,
        sla_escalation,
        sla_young_ticket_handled_by_agent,
        crash_with_retried_activity,
        resolved_with_closing_audit,
        approval_from_someone_not_named_then_an_approver,
        two_lookups_at_once,
        linear_history_with_large_results,
        continued_as_new_while_awaiting_approval,
        refund_timed_out_reconciled,
        summarized_old_turns,
        approval_answered_twice_the_first_decides,
        approval_signals_without_input_then_approved,
        another_customers_order_refused,
        refund_in_two_parts,
        continued_while_a_request_waits,
        cancelled_while_a_refund_waits,
        cancelled_while_a_refund_is_in_flight,
        customer_replied_twice,
        two_lookups_one_by_one,
        waited_for_a_delivery_scan,
        approved_in_the_inbox,
        shipping_status_read,
        stripe_refused_the_workers_key,
        two_people_approved_in_the_inbox,
        model_budget_spent,
        limit_across_tickets_met,
        replies_past_a_turns_budget,
        answers_cut_to_their_budget,
        waited_for_a_delivery_scan_across_runs,
        approved_in_euros,
        answers_kept_as_rows,
        store_credit_approved,
        two_people_below_the_limit,
        refused_past_the_charge,
        answered_while_it_hands_over,
        nobody_answered_in_time,
        judged_again_under_the_policy_in_force,
        unverified_sender_refused,
        unverified_sender_verified_by_a_person,
        mail_bounced_then_no_more_mail,
        refused_as_the_ledger_has_it,
        approval_wait_flooded_across_runs,
        moved_to_a_new_build_while_it_waits,
    )
}

MODELS: dict[str, Callable[[], LanguageModel]] = {
    "two_lookups_at_once": lambda: PlaybackModel(
        [
            calls(("lookup_order", {"order_id": "A-1001"}), ("lookup_order", {"order_id": "A-1005"}), step=1),
            says("Both orders are on their way."),
        ],
        name="two-lookups",
    ),
    "two_lookups_one_by_one": lambda: plays_back(
        [("lookup_order", {"order_id": "A-1001"})], [("lookup_order", {"order_id": "A-1002"})]
    ),
    "resolved_with_closing_audit": lambda: plays_back(
        [("lookup_order", {"order_id": "A-1001"}), ("lookup_order", {"order_id": "A-2002"})],
        [("issue_refund", {"order_id": "A-1001", "amount_cents": 1000})],
        [("issue_refund", {"order_id": "A-2002", "amount_cents": 500})],
    ),
    "linear_history_with_large_results": lambda: LongTicketModel(4),
    "summarized_old_turns": lambda: ContextBoundModel(6),
    "another_customers_order_refused": lambda: plays_back(
        [("issue_refund", {"order_id": "A-1004", "amount_cents": 899})]
    ),
    "shipping_status_read": lambda: plays_back([("shipping_status", {"order_id": "A-1001"})]),
    "store_credit_approved": lambda: plays_back(
        [("lookup_order", {"order_id": "A-1001"})],
        [("issue_store_credit", {"order_id": "A-1001", "amount_cents": 4900})],
    ),
    "model_budget_spent": lambda: PlaybackModel(
        [calls(("lookup_order", {"order_id": "A-1001"})).model_copy(update={"usage": Usage(cost_usd=0.75)})]
    ),
    "answers_cut_to_their_budget": lambda: PlaybackModel(
        [calls(("no_such_tool", {"blob": "y" * 10_000}), step=1), says("z" * 40_000)], name="writes-long"
    ),
    "refused_past_the_charge": lambda: plays_back(
        [("lookup_order", {"order_id": "A-1003"})], [("issue_refund", {"order_id": "A-1003", "amount_cents": 120_000})]
    ),
    "mail_bounced_then_no_more_mail": lambda: PlaybackModel(
        [
            calls(("send_email", {"to": "ann@example.com", "subject": "Details", "body": "Here."}), step=1),
            says("Emailed."),
            calls(("send_email", {"to": "ann@example.com", "subject": "Again", "body": "Here."}), step=3),
            says("We could not email you."),
        ]
    ),
    "unverified_sender_refused": lambda: plays_back(
        [("lookup_order", {"order_id": "A-1001"})], [("issue_refund", {"order_id": "A-1001", "amount_cents": 4900})]
    ),
    "refund_in_two_parts": lambda: plays_back(
        [("lookup_order", {"order_id": "A-1001"})],
        [("issue_refund", {"order_id": "A-1001", "amount_cents": 1000})],
        [("issue_refund", {"order_id": "A-1001", "amount_cents": 500})],
    ),
}
"""Scenarios that need another model than the script."""

CHANGED = LOOSE.model_copy(update={"approval": LOOSE.approval.model_copy(update={"timeout_seconds": 86_400})})
"""The loose desk with another approval timeout: another digest, the same decision for a refund nobody approves."""

POLICIES: dict[str, MoneyPolicy] = {
    "two_people_approved_in_the_inbox": LOOSE.model_copy(
        update={"approval": ApprovalPolicy(limit_cents=2000, two_people_above_cents=10_000)}
    ),
    "answers_kept_as_rows": LOOSE.model_copy(
        update={"approval": ApprovalPolicy(limit_cents=2000, two_people_above_cents=10_000)}
    ),
    "two_people_below_the_limit": LOOSE.model_copy(
        update={"approval": ApprovalPolicy(limit_cents=100_000, two_people_above_cents=10_000)}
    ),
    "model_budget_spent": LOOSE.model_copy(update={"model": ModelPolicy(max_cost_usd_per_ticket=2.0)}),
    "limit_across_tickets_met": LOOSE.model_copy(
        update={"approval": ApprovalPolicy(limit_cents=2000), "limits": Limits(customer_cents_per_day=1000)}
    ),
}
"""Scenarios recorded under a policy of their own; the others under the tests' loose desk, which lets a ticket
ask for the limit it needs (``tests/support/desk.py``)."""

STORES: dict[str, Callable[[Path], contextlib.AbstractContextManager[Business]]] = {
    "stripe_refused_the_workers_key": stripe_with_a_revoked_key,
}
"""Scenarios that need another business than the embedded one in a SQLite file of their own."""

HOLDS: dict[str, tuple[str, ...]] = {"answered_while_it_hands_over": ("archive_records",)}
"""Scenarios whose worker holds activities at their start until the scenario lets them go (``tests.support.holds``)."""

PLUGINS: dict[str, Callable[[Business], SimplePlugin]] = {
    "judged_again_under_the_policy_in_force": lambda store: BookingsUnder(store, CHANGED.digest(), times=1),
}
"""Scenarios whose worker is changed by a plugin of the tests' (``tests.support``), given the scenario's business."""

SERVER_ARGS: dict[str, list[str]] = {
    "waited_for_a_delivery_scan_across_runs": ["--dynamic-config-value", "limit.historyCount.suggestContinueAsNew=60"],
    "approval_wait_flooded_across_runs": ["--dynamic-config-value", "limit.historyCount.suggestContinueAsNew=60"],
}
"""Scenarios that need a dev server of their own, set up otherwise than the shared one."""

DEPLOYMENTS: dict[str, str] = {"moved_to_a_new_build_while_it_waits": f"record-{uuid.uuid4().hex[:8]}"}
"""Scenarios whose workers join a Worker Deployment of this name (tickets pinned, as under ``AGENT_DEPLOYMENT``),
as build v1; the scenario makes others (``Recorder.build``)."""


def scripted(task_queue: str, store: Business) -> Settings:
    """Settings that run the scripted model even where ANTHROPIC_API_KEY is set: histories are recorded from the
    script, never from (and never billed to) Claude. The worker holds the inbox's key of ``approved_in_the_inbox``."""
    return Settings(
        task_queue=task_queue,
        db_path=store.database.path,
        claude=ClaudeSettings(backend="scripted"),
        web=WebSettings(approval_keys=[INBOX_KEY]),
        policy_file=LOOSE_FILE,
    )


def deployed(
    client: Client, settings: Settings, activities: Any, plugins: list[SimplePlugin], deployment: str
) -> Callable[[str], Worker]:
    """How a scenario of ``DEPLOYMENTS`` makes a worker of a build of ``deployment``, as ``AGENT_DEPLOYMENT`` and
    ``AGENT_BUILD_ID`` make one: the same settings, activities and plugins otherwise."""

    def build(build_id: str) -> Worker:
        versioned = settings.model_copy(
            update={"versioning": DeploymentSettings(deployment=deployment, build_id=build_id)}
        )
        config = wiring.deployment_config(versioned)
        return build_worker(client, versioned, activities, deployment=config, plugins=plugins)

    return build


async def record(names: list[str], out: Path) -> None:
    env = await start_dev_server(None)
    try:
        for name in names or list(SCENARIOS):
            own = await start_dev_server(None, extra_args=SERVER_ARGS[name]) if name in SERVER_ARGS else None
            client = (own or env).client
            try:
                with (
                    tempfile.TemporaryDirectory() as scratch,  # a business database of its own per scenario
                    STORES.get(name, embedded)(Path(scratch)) as store,
                ):
                    task_queue = f"record-{uuid.uuid4()}"
                    model = MODELS[name]() if name in MODELS else None
                    settings = scripted(task_queue, store)
                    in_force = wiring.policy_in_force(settings)
                    if name in POLICIES:
                        policy = POLICIES[name]
                        in_force = in_force.model_copy(update={"policy": policy, "digest": policy.digest()})
                    holds = Holds(*HOLDS[name]) if name in HOLDS else None
                    plugins: list[SimplePlugin] = [holds] if holds else []
                    if name in PLUGINS:
                        plugins.append(PLUGINS[name](store))
                    activities = wiring.build_activities(
                        settings,
                        store,
                        model or choose_model(settings, store.model_calls),
                        blobs=store.blobs,
                        policy=in_force,
                    )

                    build = (
                        deployed(client, settings, activities, plugins, DEPLOYMENTS[name])
                        if name in DEPLOYMENTS
                        else None
                    )
                    worker = build("v1") if build else build_worker(client, settings, activities, plugins=plugins)
                    async with worker:
                        recorder = Recorder(client, store, task_queue, holds, build)
                        handle = await SCENARIOS[name](recorder)
                    count = await export(client, handle.id, out / f"{name}.json")
                    print(f"recorded {name}: {count} events", flush=True)
            finally:
                if own is not None:
                    await own.shutdown()
    finally:
        await env.shutdown()


if __name__ == "__main__":
    asyncio.run(record(sys.argv[1:], HISTORIES))
    exit_hard(0)
