"""What the approval inbox reads from Temporal: the lists of tickets on its tabs, and one ticket whole.

Lists come from the visibility store (what ``agent-worker tickets`` reads), so they work with no worker running:
the search attributes say what a ticket waits for, the memos say which request, until when. What visibility does
not hold (the customer, the question, the ticket's approval timeout) comes from the first event of the run's
history, read once per run and kept, since a run's input never changes. A ticket's page is its history, read into
the same transcript entries ``agent-worker show`` prints (``agent_worker.transcript``), plus the request waiting,
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
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecution, WorkflowExecutionDescription, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from activities.contracts.approvals import ApprovalDecision, ApprovalRequest
from activities.contracts.fields import DAY, ORDER_ID_PATTERN, find_order_id, normalised_address
from activities.contracts.names import APPROVAL_REQUEST_MEMO, APPROVE_SIGNAL, WAITING_FOR_MEMO, WORKFLOW_NAME
from activities.contracts.ticket import Outcome, TicketState, Waiting
from activities.contracts.world import OrderLookup
from agent_worker.inbox.standing import standing
from agent_worker.operations import AWAITING, WAITING_FOR, run_ids, tickets_query
from agent_worker.stuck import STUCK_QUERY, StuckTicket, find_stuck, server_reports_problems
from agent_worker.transcript import Entry, entries, first

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
CUSTOMER_MAX = 254
"""The longest customer filter: an email address's longest."""
ORDER_FILTER = re.compile(rf"^{ORDER_ID_PATTERN}$")
INPUTS_KEPT = 1000
READ_AT_ONCE = 8
UPDATE_ACCEPTED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
UPDATE_COMPLETED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED


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
    def running(self) -> bool:
        return self.status == "running"

    @property
    def currency(self) -> str | None:
        """The currency the ticket's amounts are in: its request's, else that of the orders it looked up if they
        agree (orders looked up before lookups said theirs read as dollars, as they were); None if unknown."""
        if self.request is not None and self.request.currency:
            return self.request.currency
        found = {order.currency for order in self.orders}
        return found.pop() if len(found) == 1 else None

    @property
    def asked(self) -> Entry | None:
        """The refund the request is about, as the model asked for it (with its words around the call)."""
        refunds = [e for e in self.entries if e.kind == "asks" and isinstance(e.detail, dict)]
        refunds = [e for e in refunds if e.detail.get("name") == "issue_refund"]
        if self.request is not None:
            same = [e for e in refunds if e.detail.get("input", {}).get("amount_cents") == self.request.amount_cents]
            refunds = same or refunds
        return refunds[-1] if refunds else None


class FilterError(ValueError):
    """A filter the inbox does not take: the message says what it takes."""


@dataclass(frozen=True)
class Filters:
    """What a person narrows a tab to: one customer (their address, or part of it, in any case), one order, and
    "mine", the requests the person signed in may answer. Checked before anything is read."""

    customer: str = ""
    order: str = ""
    mine: bool = False

    @classmethod
    def of(cls, params: Mapping[str, str]) -> Filters:
        """The filters a page's query asks for; ``FilterError`` for a value outside what they take."""
        customer = params.get("customer", "").strip()
        order = params.get("order", "").strip().upper()
        if len(customer) > CUSTOMER_MAX or any(c.isspace() or not c.isprintable() for c in customer):
            raise FilterError(
                f"a customer is an email address, or part of one: up to {CUSTOMER_MAX} characters, no spaces"
            )
        if order and not ORDER_FILTER.match(order):
            raise FilterError("an order is an order id, a capital letter, a dash and four digits or more (A-1001)")
        return cls(customer, order, params.get("mine", "") in {"1", "on", "yes"})

    def __bool__(self) -> bool:
        return bool(self.customer or self.order or self.mine)

    def query(self) -> dict[str, str]:
        """The page's query parameters that keep these filters (for the tabs' links and the live part)."""
        kept = {"customer": self.customer, "order": self.order, "mine": "1" if self.mine else ""}
        return {key: value for key, value in kept.items() if value}

    def keeps(self, ticket: Listed, person: str) -> bool:
        """Whether ``ticket`` is one of those the filters keep for ``person``. "Mine" keeps the requests that
        would take ``person``'s answer (``standing``): a ticket that waits for no request is nobody's."""
        if self.order and ticket.order != self.order:
            return False
        if self.customer and normalised_address(self.customer) not in normalised_address(ticket.customer):
            return False
        return not self.mine or (ticket.request is not None and standing(ticket.request, person).answer is None)


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

    def __init__(self, client: Client, task_queue: str) -> None:
        if "'" in task_queue or "\\" in task_queue:
            raise ValueError(f"a task queue name the inbox can put in a visibility query, not {task_queue!r}")
        self.client, self.task_queue = client, task_queue
        self._inputs: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._reading = asyncio.Semaphore(READ_AT_ONCE)
        self._reports_stuck: bool | None = None
        """Whether the server marks stuck runs (its namespace's capabilities), asked once."""

    def query(self, tab: str) -> str:
        """The visibility query of a tab, for this inbox's task queue. Nothing a person types goes in it."""
        queue = f" AND TaskQueue = '{self.task_queue}'"
        if tab in WAITING_FOR:
            return tickets_query(waiting_for=tab) + queue
        if tab == "stuck":
            return STUCK_QUERY + queue
        since = (datetime.now(UTC) - RECENTLY).strftime("%Y-%m-%dT%H:%M:%SZ")
        statuses = ", ".join(f"'{status}'" for status in CLOSED_STATUSES)
        return f"{tickets_query()}{queue} AND ExecutionStatus IN ({statuses}) AND CloseTime > '{since}'"

    async def counts(self) -> dict[str, int | None]:
        """How many tickets each tab holds, from visibility's count (no listing); stuck ones only where the server
        reports them (``TemporalReportedProblems``), else None: finding them then means describing every run."""
        if self._reports_stuck is None:
            self._reports_stuck = await server_reports_problems(self.client)
        tabs = [tab for tab in TABS if tab != "stuck" or self._reports_stuck]
        found = await asyncio.gather(*(self.client.count_workflows(self.query(tab)) for tab in tabs))
        counted = {tab: count.count for tab, count in zip(tabs, found, strict=True)}
        return {tab: counted.get(tab) for tab in TABS}

    async def listed(
        self, tab: str, filters: Filters = Filters(), person: str = "", *, total: int | None = None, limit: int = LIMIT
    ) -> Listing:
        """The tickets on a tab that ``filters`` keep for ``person``, most urgent first (``URGENT``), at most
        ``limit``; ``total``, the tab's count, if the caller has it."""
        if tab == "stuck":
            stuck = await self._stuck(SCAN)
            return self._sorted(tab, [t for t in stuck if filters.keeps(t, person)][:limit], total, len(stuck))
        seen = [await self._seen(e) async for e in self.client.list_workflows(self.query(tab), limit=SCAN)]
        if filters.customer:  # the address is in the run's input alone
            seen = await asyncio.gather(*(self._with_input(t) for t in seen))
        kept = self._sorted(tab, [t for t in seen if filters.keeps(t, person)], total, len(seen))
        shown = await asyncio.gather(*(self._whole(t) for t in kept.tickets[:limit]))
        return dataclasses.replace(kept, tickets=list(shown))

    def _sorted(self, tab: str, tickets: list[Listed], total: int | None, read: int) -> Listing:
        key, latest_first = URGENT[tab]
        return Listing(sorted(tickets, key=key, reverse=latest_first), total, read)

    async def _stuck(self, limit: int) -> list[Listed]:
        search = await find_stuck(self.client, limit=limit, within=f"TaskQueue = '{self.task_queue}'")
        tickets = []
        for stuck in search.tickets:
            description = await self.client.get_workflow_handle(stuck.workflow_id, run_id=stuck.run_id).describe()
            listed = await self._whole(await self._seen(description))
            tickets.append(dataclasses.replace(listed, stuck=stuck))
        return tickets

    async def _seen(self, execution: WorkflowExecution) -> Listed:
        """A run as its listing shows it, memos and all, with no history read: enough to sort and filter by."""
        request = None
        if execution.typed_search_attributes.get(AWAITING):
            request = await execution.memo_value(APPROVAL_REQUEST_MEMO, None, type_hint=ApprovalRequest | None)  # type: ignore[arg-type]
        waiting = await execution.memo_value(WAITING_FOR_MEMO, None, type_hint=Waiting | None)  # type: ignore[arg-type]
        running = execution.status == WorkflowExecutionStatus.RUNNING
        return Listed(
            workflow_id=execution.id,
            run_id=execution.run_id,
            status=status_of(execution),
            started=execution.start_time,
            closed=execution.close_time,
            ticket={},
            request=request if running else None,
            waiting=waiting if running else None,
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
            handle = self.client.get_workflow_handle(workflow_id, run_id=run_id)
            ticket: Any = None
            async for event in handle.fetch_history_events(page_size=1):
                started = event.workflow_execution_started_event_attributes
                ticket = first(await self.client.data_converter.decode(started.input.payloads))
                break
        found = ticket if isinstance(ticket, dict) else {}
        self._inputs[run_id] = found
        if len(self._inputs) > INPUTS_KEPT:
            self._inputs.popitem(last=False)
        return found

    async def approved_so_far(self, workflow_id: str, run_id: str, request: ApprovalRequest) -> ApprovalRequest:
        """The request with everyone who has approved it so far: the memo's (a run that continued as new writes the
        approvals its last run took), then each approval this run recorded as one of several, in order."""
        if request.approvals_needed <= len(request.approved_by):
            return request
        approved_by = list(request.approved_by)
        approvers: dict[int, str] = {}
        async with self._reading:
            handle = self.client.get_workflow_handle(workflow_id, run_id=run_id)
            async for event in handle.fetch_history_events():
                if event.event_type == UPDATE_ACCEPTED:
                    accepted = event.workflow_execution_update_accepted_event_attributes.accepted_request.input
                    answer = first(await self.client.data_converter.decode(accepted.args.payloads))
                    if accepted.name == APPROVE_SIGNAL and isinstance(answer, dict):
                        approvers[event.event_id] = str(answer.get("approver", ""))
                elif event.event_type == UPDATE_COMPLETED:
                    completed = event.workflow_execution_update_completed_event_attributes
                    approver = approvers.get(completed.accepted_event_id)
                    if approver is None or not completed.outcome.HasField("success"):
                        continue
                    receipt = first(await self.client.data_converter.decode(completed.outcome.success.payloads))
                    if (
                        isinstance(receipt, dict)
                        and receipt.get("request_id") == request.request_id
                        and receipt.get("decision") == ApprovalDecision.PARTLY_APPROVED.value
                        and approver not in approved_by
                    ):
                        approved_by.append(approver)
        return request.model_copy(update={"approved_by": approved_by})

    async def check(self, workflow_id: str) -> WorkflowExecutionDescription:
        """The ticket's description if it is a ticket of this inbox's task queue, else ``NotATicketError``."""
        try:
            description = await self.client.get_workflow_handle(workflow_id).describe()
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
        told: list[Entry] = []
        for run_id in await run_ids(self.client, workflow_id, description.run_id):
            run = self.client.get_workflow_handle(workflow_id, run_id=run_id)
            told += [entry async for entry in entries(self.client, run, follow=False)]
        running = description.status == WorkflowExecutionStatus.RUNNING
        request = await description.memo_value(APPROVAL_REQUEST_MEMO, None, type_hint=ApprovalRequest | None)  # type: ignore[arg-type]
        waiting = await description.memo_value(WAITING_FOR_MEMO, None, type_hint=Waiting | None)  # type: ignore[arg-type]
        if request is not None and running:
            request = await self.approved_so_far(workflow_id, description.run_id, request)
        question = next((e.detail for e in told if e.kind == "customer" and isinstance(e.detail, dict)), None)
        return Ticket(
            workflow_id=workflow_id,
            run_id=description.run_id,
            status=status_of(description),
            entries=told,
            ticket=question or await self.ticket_input(workflow_id, description.run_id),
            request=request if running else None,
            waiting=waiting if running else None,
            history_length=description.history_length,
            outcome=outcome_of(told),
            orders=orders_of(told),
        )


def status_of(execution: WorkflowExecution) -> str:
    return execution.status.name.lower().replace("_", " ") if execution.status else "unknown"


def outcome_of(told: Sequence[Entry]) -> Outcome | None:
    closing = [e for e in told if e.kind == "closed" and isinstance(e.detail, dict)]
    try:
        return Outcome.model_validate(closing[-1].detail) if closing else None
    except ValidationError:
        return None  # an outcome of another shape than this version's: the transcript still tells it


def orders_of(told: Sequence[Entry]) -> list[OrderLookup]:
    """Every order the model looked up, as the tool reported it, the latest look-up of each."""
    orders: dict[str, OrderLookup] = {}
    for e in told:
        if e.kind == "result" and e.name == "lookup_order" and isinstance(e.detail, dict):
            try:
                order = OrderLookup.model_validate(e.detail)
            except ValidationError:
                continue
            orders[order.order_id] = order
    return list(orders.values())
