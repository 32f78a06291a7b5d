"""The wire contract between the workflow, its activities, its callers and its stored histories.

Everything that crosses a Temporal boundary is defined here once: the ticket a caller starts a run with,
the approval signal, the conversation in the Anthropic Messages shape, each tool's arguments and result,
and the outcome. Field names are part of every recorded history, so renaming one breaks runs in flight and
the histories in ``replay_histories/``; add fields with defaults instead.

It lives in ``activities/`` because the arrows point one way: workflows import activities' contracts,
activities import nothing from workflows.
"""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveInt,
    StringConstraints,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

WORKFLOW_NAME = "SupportAgent"
TASK_QUEUE = "support-agent"
APPROVE_SIGNAL = "approve"
AWAITING_APPROVAL_QUERY = "awaiting_approval_of"
USAGE_QUERY = "usage"
AWAITING_APPROVAL_ATTRIBUTE = "AwaitingApprovalCents"
APPROVAL_REQUEST_MEMO = "approval_request"
"""The memo field that holds the request waiting (``ApprovalRequest``), for as long as it waits: visibility
shows it with no worker running, so ``agent-worker approve`` can send its id when no worker answers a query."""
CUSTOMER_MESSAGE = "customer_message"
"""The customer's reply to an open ticket: a Workflow Update (refused at once when the ticket takes no more),
and a signal of the same name for relays that can only signal."""
ORDER_EVENT_SIGNAL = "order_event"
"""What another system reports about an order (a carrier's scan, a payment webhook), relayed as a signal."""
TURNS_QUERY = "turns"
TICKET_STATE_ATTRIBUTE = "TicketState"
"""What an open ticket waits for, while it waits (``TicketState``): listed with no worker running."""
WAITING_FOR_MEMO = "waiting_for"
"""The memo field that says what a waiting ticket waits for, and until when (``Waiting``)."""
SEARCH_ATTRIBUTES: dict[str, Literal["Int", "Keyword"]] = {
    AWAITING_APPROVAL_ATTRIBUTE: "Int",
    TICKET_STATE_ATTRIBUTE: "Keyword",
}
"""The search attributes the workflow sets, by type: a namespace must have them before a ticket waits."""

ORDER_ID_PATTERN = r"[A-Z]-\d{4,}"
OrderId = Annotated[str, StringConstraints(pattern=rf"^{ORDER_ID_PATTERN}$")]
EmailAddress = Annotated[
    str, StringConstraints(strip_whitespace=True, max_length=254, pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
]
NonEmpty = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]

MAX_CENTS = 2**31 - 1
"""The most any order can be charged (the ``orders`` column is a 32-bit integer on PostgreSQL), so the most any
refund or approval can be about: an amount the model, a caller or an approver sends above it is refused where
it is validated, long before it reaches a search attribute or a database column that cannot hold it."""
Cents = Annotated[int, Field(gt=0, le=MAX_CENTS)]
DAY = 86_400


def bounded(low: int, high: int) -> Any:
    """An integer option with a sane range: past it, a ticket is refused as invalid input naming the field,
    instead of overflowing a date or a search attribute in the middle of its run."""
    return Field(ge=low, le=high)


class Contract(BaseModel):
    """A message on the wire: unknown fields are refused so that a typo fails loudly instead of being lost."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# --- starting a ticket ------------------------------------------------------------------------------------


class RefundKey(StrEnum):
    """Which idempotency key a refund carries to the payment provider."""

    NONE = "none"
    """No key: every attempt is a new payment. Exists to show what Temporal alone does (seed, table row 1)."""
    PER_TOOL_CALL = "per_tool_call"
    """The same for every retry of one tool call: covers a crash, not a model that asks again."""
    PER_ORDER = "per_order"
    """``refund:<order_id>``: names the business operation, so nothing refunds an order twice."""


class TicketOptions(Contract):
    approval_limit_cents: Annotated[int, bounded(0, MAX_CENTS)] = 2000
    """Refunds above this wait for a person. It lives here, in workflow code, never in the prompt."""
    approval_timeout_seconds: Annotated[int, bounded(1, 90 * DAY)] = DAY
    """How long a person has to answer; silence after that means no."""
    refund_key: RefundKey = RefundKey.PER_ORDER
    max_steps: Annotated[int, bounded(1, 10_000)] = 10
    """Model calls the agent may make before it gives up."""
    sla_seconds: Annotated[int, bounded(1, 3650 * DAY)] = DAY
    """A ticket older than this when its run starts goes to a person: the model is not asked."""
    approvers: Annotated[list[NonEmpty], Field(min_length=1, max_length=100)] | None = None
    """Who may approve this ticket's refunds; None (left out) takes the worker's default (``AGENT_APPROVERS``).
    An empty list is refused: it must never read as "anyone"."""
    linear_history: bool = True
    """Send the model activity only what is new since the last step, with a reference to the conversation
    so far, so each step adds about the same bytes to the history. False sends the whole conversation every
    step, as runs did before (the benchmark's naive side)."""
    continue_as_new_after_steps: Annotated[int, bounded(1, 10_000)] = 100
    """Model calls one run makes before the ticket continues as a new run (sooner if the server suggests it),
    so no run's history outgrows Temporal's limits however long the ticket lasts. Linear history only."""
    summarize_above_tokens: Annotated[int, bounded(1, 10_000_000)] | None = 150_000
    """When the model's last call read more tokens than this (cached or not), the model summarises the older
    turns in a ``summarize`` activity, recorded as a model call, and the conversation goes on from the summary
    and the latest turns. Below a 200K-token context, it leaves room for the next step. None: never; a
    conversation that outgrows the model is then handed over. Linear history only."""
    reply_window_seconds: Annotated[int, bounded(0, 90 * DAY)] = 0
    """How long an answered ticket stays open for the customer's reply (``customer_message``); each reply is a
    new turn of the agent over the whole conversation. 0 closes the ticket with its first answer."""
    reconcile_refunds: bool = True
    """When a keyed refund fails with an unknown outcome (timed out, out of retries), ask the provider what
    it recorded under the key before telling the model anything. Off only to show the seed's row 5."""


class TicketInput(Contract):
    ticket_id: NonEmpty
    question: NonEmpty
    customer_email: EmailAddress
    opened_at: AwareDatetime | None = None
    """When the customer opened the ticket (with a timezone); the run's start time if left out."""
    options: TicketOptions = TicketOptions()

    @model_validator(mode="before")
    @classmethod
    def _readable(cls, data: Any) -> Any:
        """What the codec hands on for a payload it could not, or would not, open (``{"unreadable_payload":
        why}``) is refused with its reason, not as three missing fields and an unknown one."""
        if isinstance(data, dict) and set(data) == {"unreadable_payload"}:
            why = str(data["unreadable_payload"])
            raise PydanticCustomError("unreadable_payload", "unreadable_payload: {why}", {"why": why})
        return data


# --- approvals ---------------------------------------------------------------------------------------------


class Approval(Contract):
    """The ``approve`` signal: a person's answer about the request they were shown."""

    amount_cents: Cents
    approved: bool
    approver: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
    """Who answered, as the sender claims it: a signal carries no identity the worker could check."""
    request_id: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=40)] | None = None
    """The request answered, as ``awaiting_approval_of`` shows it. Without it, the answer is about the request
    waiting when it arrives, and never about a later one."""


class VouchedApproval(Approval):
    """The ``approve`` update, as the approval inbox sends it: an answer about a named request, signed by the
    inbox for the person it authenticated (``activities.vouching``)."""

    request_id: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=40)]
    signature: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


class VouchRequest(Contract):
    """What the ``vouched`` activity checks: an answer, for the workflow it was sent to."""

    workflow_id: str
    answer: VouchedApproval


class ApprovalRequest(Contract):
    """A refund waiting for a person: what ``awaiting_approval_of`` returns, and what a run that continues as
    new hands the next one."""

    request_id: str
    """``R1``, ``R2``, ...: the ticket's requests in order, across its runs."""
    amount_cents: Cents
    order_id: str = ""
    deadline: datetime
    """Workflow time after which silence means no, and an answer releases nothing."""
    approvers: list[str] = []
    """Who may answer; empty when neither the ticket nor the worker names anyone."""


class ApprovalDecision(StrEnum):
    APPROVED = "approved"
    DECLINED = "declined"
    TIMED_OUT = "timed_out"
    REJECTED = "rejected"
    """The answer released nothing: malformed, too late, already answered, from someone not allowed, or about
    an amount or a request nobody is waiting for."""


class ApprovalRecord(Contract):
    amount_cents: int | None
    decision: ApprovalDecision
    approver: str | None
    at: datetime
    """Workflow time, so it is the same on every replay."""
    reason: str = ""
    request_id: str | None = None
    """The request the answer decided or was rejected for (None: no request was waiting, or runs before ids)."""
    channel: Literal["signal", "web"] = "signal"
    """How the answer came: ``web``, vouched for by the approval inbox for the person it authenticated; ``signal``,
    the approver as the sender claims it."""


class ApprovalReceipt(Contract):
    """What the ``approve`` update answers once the request is decided and its refund made or refused."""

    request_id: str
    decision: ApprovalDecision
    result: str
    """What came of the refund, in the words the model was given ("Refunded 49.00 on order A-1001 (refund
    #12).", "A person (ann) declined this refund, so it was not made.")."""


# --- what reaches an open ticket: the customer's replies, and events from other systems ---------------------


class CustomerMessage(Contract):
    """The ``customer_message`` update (or signal): the customer's reply to the ticket."""

    text: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=20_000)]


class MessageReceipt(Contract):
    """What ``customer_message`` answers once the reply is taken: the turn it starts, or joins if the agent
    is still working on the one before (replies that arrive meanwhile are read together)."""

    turn: PositiveInt


class OrderEvent(Contract):
    """The ``order_event`` signal: something another system reports about an order, as a webhook relay
    forwards it (``{"order_id": "A-1001", "event": "delivered", "detail": "left at the front door"}``)."""

    order_id: OrderId
    event: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100)]
    detail: Annotated[str, StringConstraints(strip_whitespace=True, max_length=2_000)] = ""


class TicketState(StrEnum):
    """The ``TicketState`` search attribute: what an open ticket waits for, set only while it waits."""

    WAITING_FOR_CUSTOMER = "waiting_for_customer"
    WAITING_FOR_EVENT = "waiting_for_event"


class Waiting(Contract):
    """The ``waiting_for`` memo: what the ticket waits for, until when (workflow time)."""

    state: TicketState
    until: datetime
    order_id: str | None = None
    """For an event: the order it must be about."""


# --- the conversation, in the Anthropic Messages shape -----------------------------------------------------


class TextBlock(Contract):
    type: Literal["text"] = "text"
    text: str


class ToolUseBlock(Contract):
    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any]


class ToolResultBlock(Contract):
    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str
    """The result; when ``content_ref`` is set, only a short preview of it."""
    is_error: bool = False
    content_ref: str | None = None
    """Where a result too large for the history is kept (``sha256:<hex>`` in the content store); the
    ``think`` activity loads it before the model reads the conversation."""


class ThinkingBlock(Contract):
    """Claude's reasoning before a tool call. The API refuses a tool result whose assistant turn comes back
    without it, or altered, so it is kept verbatim, signature included, and never shown to anyone."""

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str


class RedactedThinkingBlock(Contract):
    """Reasoning the API encrypted; like ``ThinkingBlock`` it must go back exactly as it came."""

    type: Literal["redacted_thinking"] = "redacted_thinking"
    data: str


ContentBlock = Annotated[
    TextBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock | RedactedThinkingBlock,
    Field(discriminator="type"),
]


class Message(Contract):
    role: Literal["user", "assistant"]
    content: list[ContentBlock]

    @classmethod
    def user_text(cls, text: str) -> Message:
        return cls(role="user", content=[TextBlock(text=text)])


class TicketContext(Contract):
    """What the model is told about the ticket besides the conversation."""

    ticket_id: str
    customer_email: str


class ThinkRequest(Contract):
    ticket: TicketContext
    step: PositiveInt
    messages: list[Message]
    """The whole conversation; with ``store_conversation``, only what is new since ``conversation_ref``."""
    store_conversation: bool = False
    """The activity keeps the conversation in the content store and returns its new reference with the
    decision, so the history carries each turn once instead of the whole conversation every step."""
    conversation_ref: str | None = None
    """The conversation so far (as the last decision returned it); None on the first step."""


class Usage(Contract):
    """Tokens one model call used (or several, summed), and what they cost by the worker's price table.

    ``input_tokens`` counts only the input that was neither read from nor written to the prompt cache: the
    API bills the three at different prices, so they are kept apart as the API reports them."""

    input_tokens: NonNegativeInt = 0
    output_tokens: NonNegativeInt = 0
    cache_read_input_tokens: NonNegativeInt = 0
    cache_creation_input_tokens: NonNegativeInt = 0
    cost_usd: NonNegativeFloat = 0.0
    """An estimate, from the price the worker that made the call had for its model; 0 where it had none."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens + other.cache_creation_input_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
        )


class StepUsage(Contract):
    step: int
    model: str
    usage: Usage
    purpose: Literal["think", "summary"] = "think"
    """``summary``: the call that summarised older turns before this step's ``think``."""


class UsageReport(Contract):
    """What the ``usage`` query returns while a ticket runs, and what its outcome carries at the end."""

    total: Usage = Usage()
    steps: list[StepUsage] = []
    """One entry per model call, in order."""


class Decision(Contract):
    """One model response: its content blocks go into the conversation as the assistant's turn.

    ``stop_reason`` is the Messages API's: ``end_turn`` (an answer), ``tool_use``, ``max_tokens`` (cut off),
    ``pause_turn`` (to be continued), ``refusal``, ``stop_sequence`` or ``model_context_window_exceeded``."""

    content: list[ContentBlock]
    stop_reason: str = "end_turn"
    usage: Usage = Usage()
    model: str = ""
    """The model that answered, as the API names it; empty for a stand-in."""
    conversation_ref: str | None = None
    """With ``ThinkRequest.store_conversation``: the conversation including this answer, as stored."""

    @property
    def tool_calls(self) -> list[ToolUseBlock]:
        return [block for block in self.content if isinstance(block, ToolUseBlock)]

    @property
    def text(self) -> str:
        return "\n".join(block.text for block in self.content if isinstance(block, TextBlock))


SUMMARY_HEADER = "Summary of the conversation before the latest turns, which were too long to keep whole:"


class SummaryRequest(Contract):
    """Summarise the conversation ``conversation_ref`` followed by ``messages`` (not yet sent to the model),
    keeping at least the last ``keep_messages`` as they are."""

    ticket: TicketContext
    step: PositiveInt
    question: str
    """The customer's question: the new conversation starts with it, then the summary."""
    conversation_ref: str
    messages: list[Message] = []
    keep_messages: PositiveInt = 4


class Summary(Contract):
    conversation_ref: str
    """The conversation that goes on: the question and the summary, then the turns kept. The one asked about
    when there was nothing old enough to summarise (``summarized_messages`` is 0)."""
    summarized_messages: NonNegativeInt
    usage: Usage = Usage()
    model: str = ""


# --- tools: arguments (what the model must send) and results (what the activities return) ------------------


class AuditEntry(Contract):
    ticket_id: str
    entry: str
    idempotency_key: str


class Order(Contract):
    order_id: str
    amount_cents: int
    customer_email: str


class OrderLookup(Order):
    """An order as ``lookup_order`` reports it: what was charged, and how much of it the payment provider has
    refunded so far, by any ticket. A further refund of an order refunded before needs a person."""

    refunded_cents: NonNegativeInt = 0


class RefundRequest(Contract):
    order_id: str
    amount_cents: Cents
    idempotency_key: str | None


class RefundReceipt(Contract):
    refund_id: int
    order_id: str
    amount_cents: int
    replayed: bool = False
    """True when the provider recognised the key and paid nothing this time."""


class ToolOutput(Contract):
    """A tool's result as text; one above the worker's inline limit is kept in the content store and only a
    preview and its reference travel through the history."""

    content: str
    content_ref: str | None = None
    size: NonNegativeInt = 0
    """Bytes of the whole result (UTF-8)."""


class EmailRequest(Contract):
    to: str
    subject: str
    body: str
    idempotency_key: str


class EmailReceipt(Contract):
    email_id: int
    to: str
    replayed: bool = False


# --- the outcome -------------------------------------------------------------------------------------------


class Status(StrEnum):
    RESOLVED = "resolved"
    DECLINED = "declined"
    """The refund the ticket needed was not approved."""
    GAVE_UP = "gave_up"
    """The agent used all its steps without answering."""
    FAILED = "failed"
    """The model could not be reached, or its API refused the request (a bad key, a bad request): something
    is wrong with the system, and the ticket is handed to a person."""
    HANDED_OVER = "handed_over"
    """The model itself declined to go on (a refusal, or a conversation too long for it): nothing is broken,
    but the ticket needs a person."""
    ESCALATED = "escalated"
    """The ticket was older than its SLA: it went straight to a person, without asking the model."""
    CANCELLED = "cancelled"
    """Someone cancelled the ticket (``temporal workflow cancel``, ``agent-worker cancel``); what was done before
    the cancel, a refund in flight included, is in the outcome."""


class ToolCallRecord(Contract):
    step: int
    tool_use_id: str
    name: str
    input: dict[str, Any]
    result: str
    is_error: bool
    result_ref: str | None = None
    """Where the whole result is kept when ``result`` is only its preview."""


class RefundRecord(Contract):
    refund_id: int
    order_id: str
    amount_cents: int


class Turn(Contract):
    """One turn of the ticket: what the customer wrote (the question, then each reply), and how the agent
    answered it."""

    message: str
    answer: str
    status: Status
    first_step: NonNegativeInt
    """The first model call of the turn (steps are numbered across the ticket, so keys never repeat)."""
    last_step: NonNegativeInt


class Outcome(Contract):
    ticket_id: str
    status: Status
    answer: str
    steps: int
    model_calls: int
    tool_calls: list[ToolCallRecord] = []
    refunds: list[RefundRecord] = []
    approvals: list[ApprovalRecord] = []
    usage: UsageReport = UsageReport()
    """Tokens and estimated cost, in total and per model call."""
    turns: list[Turn] = []
    """Every turn, in order: the question and the answer to it, then each reply of the customer's and its
    answer (one turn unless the ticket stayed open for replies, ``reply_window_seconds``)."""
    archive_ref: str | None = None
    """Set on a ticket that continued as new: the tool calls and per-call usage of its earlier runs, kept in
    the content store (``RecordsArchive``); ``tool_calls`` and ``usage.steps`` then hold only the last run's.
    ``activities.content_store.complete`` puts them back together."""


# --- a ticket that continues as a new run ----------------------------------------------------------------


class ContinuedState(Contract):
    """Everything a run hands to the run that continues it: the conversation by reference, the step it got
    to, a step cut short by the continuation (the tool calls still to run and the results of those that ran),
    an approval being waited for, and everything the outcome reports."""

    steps_taken: NonNegativeInt
    conversation_ref: str | None
    pending: list[Message] = []
    """Turns not yet sent to the model (the results of the last step's tool calls)."""
    calls: list[ToolUseBlock] = []
    """The tool calls of the step cut short, all of them, in order."""
    results: list[ToolResultBlock] = []
    """Results of the first of ``calls``, those that ran before the continuation."""
    awaiting: PositiveInt | None = None
    """The amount a person was being asked to approve when the run continued (runs before request ids)."""
    approval_deadline: datetime | None = None
    answer: Approval | None = None
    """An answer to that approval the last run received but had not acted on yet (runs before request ids)."""
    approvers: list[str] | None = None
    request: ApprovalRequest | None = None
    """The request waiting when the run continued; it waits on in the next run, until the same deadline."""
    decided: ApprovalRecord | None = None
    """The answer that decided ``request`` before the run could act on it: checked again by the next run."""
    requests_made: NonNegativeInt = 0
    refund_parts: dict[str, NonNegativeInt] = {}
    """Per order, the refund parts whose outcome is known: the next part's key counts on from here."""
    model_calls: NonNegativeInt = 0
    usage: UsageReport = UsageReport()
    tool_calls: list[ToolCallRecord] = []
    refunds: list[RefundRecord] = []
    approvals: list[ApprovalRecord] = []
    audits: NonNegativeInt = 0
    turns: list[Turn] = []
    turn_message: str = ""
    """What the customer wrote that the turn in progress answers."""
    turn_first_step: NonNegativeInt = 0
    """The first step of the turn in progress: its steps are counted against ``max_steps`` from there."""
    turn_refunds_before: NonNegativeInt = 0
    turn_approvals_before: NonNegativeInt = 0
    """Refunds and approval records before the turn in progress: whether it ends declined is judged by its own."""
    replies: list[str] = []
    """Replies taken that no turn has read yet."""
    reply_until: datetime | None = None
    """Set when the run continued while the ticket waited for a reply: the next run waits on until then."""
    events: list[OrderEvent] = []
    """Events received that no wait has taken yet."""
    archive_ref: str | None = None
    """The tool calls and per-call usage of the runs before, in the content store: a run hands its own there
    as it continues, so what a run carries does not grow with the ticket."""


class RecordsArchive(Contract):
    """One run's tool calls and per-call usage, as it hands them to the content store when the ticket
    continues as new, after those of the runs before it (``previous``): a chain, one node per run."""

    previous: str | None
    tool_calls: list[ToolCallRecord] = []
    usage: list[StepUsage] = []


def append_turn(messages: list[Message], role: Literal["user", "assistant"], content: list[ContentBlock]) -> None:
    """Add a turn to the conversation, continuing the last one if it has the same role (after a
    ``pause_turn``, or after a cut-off response that said nothing), so roles keep alternating as the API
    expects. Empty content adds nothing: the API refuses an empty turn."""
    if not content:
        return
    if messages and messages[-1].role == role:
        messages[-1] = Message(role=role, content=[*messages[-1].content, *content])
    else:
        messages.append(Message(role=role, content=content))


def find_order_id(text: str) -> str | None:
    """The first order id a customer's words name, if any."""
    match = re.search(ORDER_ID_PATTERN, text)
    return match.group(0) if match else None


def same_address(a: str, b: str) -> bool:
    """Whether two email addresses are the same mailbox, as far as code may assume: identical but for the case
    of ASCII letters. Nothing Unicode folds is equal (``straße`` is not ``strasse``, the Kelvin sign is not
    ``k``), so a look-alike the model writes never matches the customer's address."""
    return a.strip().translate(_ASCII_LOWER) == b.strip().translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def money(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02d}"


def describe_errors(error: ValidationError) -> str:
    """A validation error as one line that names each bad field: ``options.max_steps: Input should be ...``."""
    parts = []
    for detail in error.errors(include_url=False):
        field = ".".join(str(part) for part in detail["loc"]) or "input"
        parts.append(f"{field}: {detail['msg']}")
    return "; ".join(parts)
