"""What the approval inbox reads from Temporal: the lists of tickets on its tabs, and one ticket whole. Every call is
``agent_worker.tickets``'s, the client the command line uses too; this module sorts, filters and keeps.

Lists come from the visibility store (what ``agent-worker tickets`` reads), so they work with no worker running:
the search attributes say what a ticket waits for, the memos say which request, until when. What visibility does
not hold (the customer, the question, the ticket's approval timeout) comes from the first event of the run's
history, read once per run and kept, since a run's input never changes. A ticket's page is its history, read into
the same transcript entries ``agent-worker show`` prints (``tickets.transcript``), plus the request waiting,
from the run's memo.

The memo is written when a request opens and not again when one of the approvals it needs is recorded ("1 of 2"),
so who has approved a request that needs two people is read from the run's history as well: every ``approve``
update the ticket answered as ``partly_approved`` for that request. Like the rest, that needs no worker.

Only tickets on the inbox's task queue are listed or opened: a ticket of another deployment sharing the namespace
is not this inbox's to answer.

A tab lists what is most urgent first: the soonest deadline, the wait that ends soonest, the ticket stuck longest,
the ticket closed last. Visibility lists runs newest first and cannot sort by a memo, so the desk reads up to
``SCAN`` runs of a tab from visibility (their memos come with the listing, no history read), sorts and filters
them, and reads the input of the first ``LIMIT`` only; each tab's count is visibility's own (``count_workflows``),
so a page that did not see every ticket says how many there are. The filters (customer, order, "mine") are applied
here, to what was read, never written into a visibility query: what a person types cannot change what is asked of
the server. A customer filter needs each run's input (its first event, decrypted by the data converter), since
the customer's address is in no search attribute: a plain one would show it to anyone who can list workflows,
and the codec keeps it encrypted in history.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError
from temporalio.client import Client, WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from activities.contracts.approvals import ApprovalRequest
from activities.contracts.fields import DAY, find_order_id
from activities.contracts.names import WORKFLOW_NAME
from activities.contracts.ticket import Outcome, TicketState, Waiting
from activities.contracts.world import OrderLookup
from activities.tools import TOOLS, Tools
from agent_worker import tickets
from agent_worker.inbox.filters import Filters
from agent_worker.stuck import StuckTicket, find_stuck, server_reports_problems
from agent_worker.tickets import Entry, Seen
from agent_worker.transcript import currency_of, orders_of, payout_waited

TABS = {
    "approval": "For approval",
    "customer": "For the customer",
    "event": "For an event",
    "stuck": "Stuck",
    "closed": "Recently closed",
}
"""Each tab's name: what its tickets wait for (or are)."""
CLOSED_STATUSES = ("Completed", "Failed", "Canceled", "Terminated", "TimedOut")
"""A ticket that continued as new is not closed: its next run goes on."""
RECENTLY = timedelta(days=7)
LIMIT = 100
"""The most tickets a tab shows."""
SCAN = 1000
"""The most runs a tab reads from visibility to sort and filter: one page of the list (memos included), the
inputs of the shown ones only, or of all of them for a customer filter (kept by run, ``INPUTS_KEPT``)."""
UNFILTERED = Filters()
INPUTS_KEPT = 1000
READ_AT_ONCE = 8


@dataclass(frozen=True)
class Listed:
    """A ticket as a tab lists it."""

    workflow_id: str
    run_id: str
    status: str
    started: datetime
    closed: datetime | None
    ticket: dict[str, Any]
    """The ticket's input as it was started (``TicketInput``'s fields), or empty if it could not be read."""
    request: ApprovalRequest | None = None
    waiting: Waiting | None = None
    stuck: StuckTicket | None = None

    @property
    def customer(self) -> str:
        return str(self.ticket.get("customer_email", ""))

    @property
    def question(self) -> str:
        return str(self.ticket.get("question", ""))

    @property
    def order(self) -> str:
        """The order the ticket is about: its request's, its wait's, else the first its question names."""
        if self.request is not None and self.request.order_id:
            return self.request.order_id
        if self.waiting is not None and self.waiting.order_id:
            return self.waiting.order_id
        return find_order_id(self.question) or ""

    @property
    def since(self) -> datetime:
        """When the ticket began to wait for what it waits for: when its request opened (or, for a request opened
        before requests said so, its deadline less the ticket's approval timeout), or the end of the reply window
        less its length; else when the run started (a wait for an event
        lasts as long as the model asked, which visibility does not keep)."""
        options = self.ticket.get("options") or {}
        options = options if isinstance(options, dict) else {}
        if self.request is not None and self.request.opened_at is not None:
            return self.request.opened_at
        if self.request is not None:  # opened before requests said when: the ticket's own timeout, if it set one
            return self.request.deadline - timedelta(seconds=int(options.get("approval_timeout_seconds", DAY)))
        if self.waiting is not None and self.waiting.state is TicketState.WAITING_FOR_CUSTOMER:
            return self.waiting.until - timedelta(seconds=int(options.get("reply_window_seconds", 0)))
        return self.started


@dataclass
class Ticket:
    """One ticket, whole: what its page shows."""

    workflow_id: str
    run_id: str
    status: str
    entries: list[Entry]
    ticket: dict[str, Any]
    request: ApprovalRequest | None
    waiting: Waiting | None
    history_length: int
    outcome: Outcome | None = None
    orders: list[OrderLookup] = field(default_factory=list)

    @property
    def sender_to_verify(self) -> bool:
        """Whether the ticket waits for a person to verify its customer: it started unverified (mail whose From:
        did not verify), runs, and its audit trail records no one verifying them yet (a verified reply verifies it
        unaudited: the page then still offers the button, and the ticket says it was verified already)."""
        if self.ticket.get("sender_verified", True) is not False or not self.running:
            return False
        return not any(e.kind == "audit" and " verified by " in str(e.detail) for e in self.entries)

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def currency(self) -> str | None:
        """The currency the ticket's amounts are in: its request's, else that of the orders it looked up if they
        agree; None if unknown."""
        if self.request is not None and self.request.currency:
            return self.request.currency
        return currency_of(self.orders)

    @property
    def asked(self) -> Entry | None:
        """The payout the request is about, as the model asked for it (with its words around the call)."""
        payouts = [e for e in self.entries if e.kind == "asks" and isinstance(e.detail, dict) and e.payout is not None]
        if self.request is not None:
            same = [e for e in payouts if e.detail.get("input", {}).get("amount_cents") == self.request.amount_cents]
            payouts = same or payouts
        return payouts[-1] if payouts else None

    @property
    def payout(self) -> str:
        """What the payout its answers are about is called: its request's, else that of the last payout that waited
        for a person (the transcript's), else ``payout``."""
        return self.request.payout if self.request is not None else payout_waited(self.entries)


@dataclass(frozen=True)
class Listing:
    """A tab's tickets, most urgent first, and how many there are: ``total`` runs on the tab as visibility counts
    them (None where it cannot count them: stuck tickets on a server that does not report them), ``read`` of them
    sorted and filtered here."""

    tickets: list[Listed]
    total: int | None
    read: int

    @property
    def partial(self) -> bool:
        """Whether the tab holds more runs than were read, so the most urgent of them may not be shown."""
        return self.total is not None and self.total > self.read


URGENT: dict[str, tuple[Callable[[Listed], datetime], bool]] = {
    "approval": (lambda t: t.request.deadline if t.request else t.since, False),
    "customer": (lambda t: t.waiting.until if t.waiting else t.since, False),
    "event": (lambda t: t.waiting.until if t.waiting else t.since, False),
    "stuck": (lambda t: t.stuck.since if t.stuck and t.stuck.since else t.started, False),
    "closed": (lambda t: t.closed or t.started, True),
}
"""Each tab's order, most urgent first: by what, and whether the latest comes first. The soonest deadline of a
request, the soonest end of a wait, the ticket stuck longest, the ticket closed last."""


class NotATicketError(LookupError):
    """No such workflow, or not a ticket of this inbox's task queue."""


class Desk:
    """Reads tickets for the inbox from one Temporal namespace and task queue."""

    def __init__(self, client: Client, task_queue: str, tools: Tools = TOOLS) -> None:
        if "'" in task_queue or "\\" in task_queue:
            raise ValueError(f"a task queue name the inbox can put in a visibility query, not {task_queue!r}")
        self.client, self.task_queue = client, task_queue
        self.tools = tools
        """What the tickets' payouts are called, read from the tools' declarations (a test's registry, in a test)."""
        self._inputs: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._reading = asyncio.Semaphore(READ_AT_ONCE)
        self._reports_stuck: bool | None = None
        """Whether the server marks stuck runs (its namespace's capabilities), asked once."""

    def query(self, tab: str) -> str:
        """The visibility query of a tab, for this inbox's task queue. Nothing a person types goes in it."""
        queue = f" AND TaskQueue = '{self.task_queue}'"
        if tab in tickets.WAITING_FOR:
            return tickets.query(waiting_for=tab) + queue
        if tab == "stuck":
            return tickets.STUCK_QUERY + queue
        since = (datetime.now(UTC) - RECENTLY).strftime("%Y-%m-%dT%H:%M:%SZ")
        statuses = ", ".join(f"'{status}'" for status in CLOSED_STATUSES)
        return f"{tickets.query()}{queue} AND ExecutionStatus IN ({statuses}) AND CloseTime > '{since}'"

    async def counts(self) -> dict[str, int | None]:
        """How many tickets each tab holds, from visibility's count (no listing); stuck ones only where the server
        reports them (``TemporalReportedProblems``), else None: finding them then means describing every run."""
        if self._reports_stuck is None:
            self._reports_stuck = await server_reports_problems(self.client)
        tabs = [tab for tab in TABS if tab != "stuck" or self._reports_stuck]
        found = await asyncio.gather(*(tickets.count(self.client, self.query(tab)) for tab in tabs))
        counted = dict(zip(tabs, found, strict=True))
        return {tab: counted.get(tab) for tab in TABS}

    async def listed(
        self, tab: str, filters: Filters = UNFILTERED, person: str = "", *, total: int | None = None, limit: int = LIMIT
    ) -> Listing:
        """The tickets on a tab that ``filters`` keep for ``person``, most urgent first (``URGENT``), at most
        ``limit``; ``total``, the tab's count, if the caller has it."""
        if tab == "stuck":
            stuck = await self._stuck(SCAN)
            return self._sorted(tab, [t for t in stuck if filters.keeps(t, person)][:limit], total, len(stuck))
        seen = [self._seen(run) async for run in tickets.listed(self.client, self.query(tab), limit=SCAN)]
        if filters.customer:  # the address is in the run's input alone
            seen = await asyncio.gather(*(self._with_input(t) for t in seen))
        kept = self._sorted(tab, [t for t in seen if filters.keeps(t, person)], total, len(seen))
        shown = await asyncio.gather(*(self._whole(t) for t in kept.tickets[:limit]))
        return dataclasses.replace(kept, tickets=list(shown))

    def _sorted(self, tab: str, tickets: list[Listed], total: int | None, read: int) -> Listing:
        key, latest_first = URGENT[tab]
        return Listing(sorted(tickets, key=key, reverse=latest_first), total, read)

    async def _stuck(self, limit: int) -> list[Listed]:
        # Not every running ticket described on each view of the tab: an activity that keeps failing is for
        # ``agent-worker tickets --stuck`` and the alert on it (docs/operations.md#stuck-tickets).
        within = f"TaskQueue = '{self.task_queue}'"
        search = await find_stuck(self.client, limit=limit, within=within, activities=False)
        found = []
        for stuck in search.tickets:
            description = await tickets.handle(self.client, stuck.workflow_id, run_id=stuck.run_id).describe()
            listed = await self._whole(self._seen(await tickets.seen(description)))
            found.append(dataclasses.replace(listed, stuck=stuck))
        return found

    def _seen(self, run: Seen) -> Listed:
        """A run as its listing shows it, memos and all, with no history read: enough to sort and filter by. Only
        a running ticket waits; a request counts while its search attribute says it waits."""
        return Listed(
            workflow_id=run.workflow_id,
            run_id=run.run_id,
            status=status_name(run.status),
            started=run.started,
            closed=run.closed,
            ticket={},
            request=run.request if run.running and run.awaiting_cents else None,
            waiting=run.waiting if run.running else None,
        )

    async def _with_input(self, listed: Listed) -> Listed:
        return dataclasses.replace(listed, ticket=await self.ticket_input(listed.workflow_id, listed.run_id))

    async def _whole(self, listed: Listed) -> Listed:
        """A listed run with what its page shows beyond its memos: its input, and who has approved its request."""
        request = listed.request
        if request is not None:
            request = await self.approved_so_far(listed.workflow_id, listed.run_id, request)
        listed = listed if listed.ticket else await self._with_input(listed)
        return dataclasses.replace(listed, request=request)

    async def ticket_input(self, workflow_id: str, run_id: str) -> dict[str, Any]:
        """The run's input (its first event), kept by run: it never changes."""
        if run_id in self._inputs:
            self._inputs.move_to_end(run_id)
            return self._inputs[run_id]
        async with self._reading:
            found = await tickets.ticket_input(self.client, workflow_id, run_id)
        self._inputs[run_id] = found
        if len(self._inputs) > INPUTS_KEPT:
            self._inputs.popitem(last=False)
        return found

    async def approved_so_far(self, workflow_id: str, run_id: str, request: ApprovalRequest) -> ApprovalRequest:
        """The request with everyone who has approved it so far: the memo's (a run that continued as new writes the
        approvals its last run took), then each approval this run recorded as one of several, in order."""
        if request.approvals_needed <= len(request.approved_by):
            return request
        async with self._reading:
            recorded = await tickets.partly_approved_by(self.client, workflow_id, run_id, request.request_id)
        approved_by = list(request.approved_by)
        for approver in recorded:
            if not request.among(approver, approved_by):
                approved_by.append(approver)
        return request.model_copy(update={"approved_by": approved_by})

    async def check(self, workflow_id: str) -> WorkflowExecutionDescription:
        """The ticket's description if it is a ticket of this inbox's task queue, else ``NotATicketError``."""
        try:
            description = await tickets.describe(self.client, workflow_id)
        except RPCError as error:
            if error.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
                raise NotATicketError(workflow_id) from None
            raise
        if description.workflow_type != WORKFLOW_NAME or description.task_queue != self.task_queue:
            raise NotATicketError(workflow_id)
        return description

    async def ticket(self, workflow_id: str) -> Ticket:
        """A ticket whole: every run's entries, the request waiting (from the memo: no worker needed), the orders
        the model looked up, the outcome once it has one. ``NotATicketError`` if it is not this inbox's."""
        description = await self.check(workflow_id)
        told = await tickets.transcript(self.client, workflow_id, description.run_id, self.tools)
        run = await tickets.seen(description)
        request, waiting = (run.request, run.waiting) if run.running else (None, None)
        if request is not None:
            request = await self.approved_so_far(workflow_id, description.run_id, request)
        question = next((e.detail for e in told if e.kind == "customer" and isinstance(e.detail, dict)), None)
        return Ticket(
            workflow_id=workflow_id,
            run_id=description.run_id,
            status=status_name(description.status),
            entries=told,
            ticket=question or await self.ticket_input(workflow_id, description.run_id),
            request=request,
            waiting=waiting,
            history_length=description.history_length,
            outcome=outcome_of(told),
            orders=orders_of(told),
        )


def status_name(status: WorkflowExecutionStatus | None) -> str:
    return status.name.lower().replace("_", " ") if status else "unknown"


def outcome_of(told: Sequence[Entry]) -> Outcome | None:
    closing = [e for e in told if e.kind == "closed" and isinstance(e.detail, dict)]
    try:
        return Outcome.model_validate(closing[-1].detail) if closing else None
    except ValidationError:
        return None  # an outcome of another shape than this version's: the transcript still tells it
