"""A ticket from outside: what a caller starts it with (``TicketInput``), what reaches it while it is open (a
customer's reply, an event about an order) and what it waits for meanwhile, and the outcome it ends with.
Read by callers, by the workflow and by the operator commands."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    Field,
    NonNegativeInt,
    PositiveInt,
    SerializerFunctionWrapHandler,
    StrictBool,
    StringConstraints,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from activities.contracts.approvals import ApprovalRecord
from activities.contracts.conversation import UsageReport
from activities.contracts.fields import (
    DAY,
    MAX_CENTS,
    Contract,
    Currency,
    Detail,
    EmailAddress,
    Label,
    MessageId,
    MessageIds,
    OrderId,
    PersonName,
    TicketId,
    approvers_fit,
    bounded,
    trimmed_chain,
)
from activities.contracts.limits import APPROVERS_LISTED, EVENT_BYTES, TEXT_CHARS, encoded_bytes

CustomerText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=TEXT_CHARS)]
"""What a customer writes, the question or a reply: every turn's message is one, or replies joined within their
budget, so a turn always fits the payloads it travels in."""


class TicketOptions(Contract):
    """What a caller may ask of one ticket. The money rules are the operator's (``MoneyPolicy``): an option
    here may make them stricter for this ticket, never looser (``workflows.rules``)."""

    approval_limit_cents: Annotated[int, bounded(0, MAX_CENTS)] | None = None
    """Refunds above this wait for a person; at most the policy's limit. None: the policy's."""
    approval_timeout_seconds: Annotated[int, bounded(1, 90 * DAY)] | None = None
    """How long a person has to answer, silence meaning no; at most the policy's. None: the policy's."""
    refund_key: Literal["per_order"] = "per_order"
    """Read, never chosen: a payment's key always names the ticket, the order and the part. Runs of 1.1.0 and
    before wrote this option (and ``linear_history``, ``reconcile_refunds``) into every continued run's input, so
    the name stays readable with the one value a production worker ever took; the modes that switched these
    safeguards off are the crash lab's and the benchmarks' (``tests/support/demonstrations.py``), not a ticket's."""
    max_steps: Annotated[int, bounded(1, 10_000)] = 10
    """Model calls the agent may make before it gives up."""
    sla_seconds: Annotated[int, bounded(1, 3650 * DAY)] = DAY
    """A ticket older than this when its run starts goes to a person: the model is not asked."""
    approvers: (
        Annotated[list[PersonName], Field(min_length=1, max_length=APPROVERS_LISTED), AfterValidator(approvers_fit)]
        | None
    ) = None
    """Who may approve this ticket's refunds, among those the policy allows; None (left out): all of them. An
    empty list is refused: it must never read as "anyone"."""
    linear_history: Literal[True] = True
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
    reconcile_refunds: Literal[True] = True


class TicketInput(Contract):
    """What a caller starts a ticket with. Every field is bounded (``activities.contracts.limits``), so the largest
    ticket fits ``TICKET_INPUT_BYTES``: the run's input, and the first argument of every run that continues it."""

    ticket_id: TicketId
    question: CustomerText
    customer_email: EmailAddress
    opened_at: AwareDatetime | None = None
    """When the customer opened the ticket (with a timezone); the run's start time if left out."""
    options: TicketOptions = TicketOptions()
    sender_verified: StrictBool = True
    """Whether ``customer_email`` is known to be the person asking (a JSON boolean: ``"false"`` or ``0`` is refused,
    not read as whatever pydantic's lax mode would make of it). True (the default, and every ticket before the
    field): the caller vouches for it, as a desk's integration that signed its user in does; the mail receiver
    sets False for mail whose ``From:`` it could not verify. An unverified ticket may answer in general terms but
    never looks up, reveals or pays against an order (``workflows.ownership``) until a person verifies the sender
    (``verify_sender``) or the customer writes again from a verified message."""
    message_id: MessageId | None = None
    """The ``Message-ID`` of the mail that started the ticket, which the desk's email answers (``In-Reply-To``)
    until the customer replies by mail; None (a ticket started another way): the desk's email answers nothing."""
    references: MessageIds = []
    """The conversation that mail belongs to, oldest first (its ``References``, or its ``In-Reply-To``)."""

    @model_serializer(mode="wrap")
    def _without_no_mail(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return without_no_mail(handler(self))

    @model_validator(mode="before")
    @classmethod
    def _readable(cls, data: Any) -> Any:
        """What the codec hands on for a payload it could not, or would not, open (``{"unreadable_payload":
        why}``) is refused with its reason, not as three missing fields and an unknown one."""
        if isinstance(data, dict) and set(data) == {"unreadable_payload"}:
            why = str(data["unreadable_payload"])
            raise PydanticCustomError("unreadable_payload", "unreadable_payload: {why}", {"why": why})
        return data


class CustomerMessage(Contract):
    """The ``customer_message`` update (or signal): the customer's reply to the ticket."""

    text: CustomerText
    sender_verified: bool | None = None
    """What the sender of the reply says of its author: True, verified as the customer (a verified mail), which
    verifies an unverified ticket; False, not verified, which a verified ticket refuses; None, the caller's word,
    as every reply before the field."""
    message_id: MessageId | None = None
    """The ``Message-ID`` of the mail the reply came in: the desk's emails answer it from now on."""
    references: MessageIds = []
    """The conversation that mail belongs to, oldest first (its ``References``, or its ``In-Reply-To``)."""

    @model_serializer(mode="wrap")
    def _without_no_mail(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return without_no_mail(handler(self))


def without_no_mail(fields: dict[str, Any]) -> dict[str, Any]:
    """A ticket or reply that came by no mail, as it was sent before it could name one: a worker of the release
    before (which refuses fields it does not know) takes it during a rolling deploy, and a ticket started from
    the CLI starts with the very input it always did."""
    if fields.get("message_id") is None:
        fields.pop("message_id", None)
    if not fields.get("references"):
        fields.pop("references", None)
    return fields


class MailThread(Contract):
    """The customer's mail the desk's next email answers: its ``In-Reply-To`` and ``References`` (RFC 5322,
    3.6.4), the customer's latest message by mail and the conversation up to it. Made from contracts whose ids
    were checked where they came in; a run hands it to the next (``THREAD_BYTES``)."""

    in_reply_to: str
    references: list[str]
    """Oldest first, ending with ``in_reply_to``: the mail that started the ticket, the chain the answered mail
    names, and the answered mail itself, at most ``REFERENCES_KEPT`` (``trimmed_chain``)."""

    @classmethod
    def answering(cls, mail: TicketInput | CustomerMessage, ticket: TicketInput) -> MailThread | None:
        """What an email answering ``mail`` (the ticket's first or a reply) carries; None if it came by no mail."""
        if mail.message_id is None:
            return None
        first = [ticket.message_id] if ticket.message_id else []
        return cls(
            in_reply_to=mail.message_id,
            references=trimmed_chain([*first, *mail.references, mail.message_id]),
        )


class MailBounce(Contract):
    """The ``mail_bounced`` signal: the customer's mail server refused the desk's email for good (a delivery status
    notification the mail receiver read), so the agent must not write to the address again."""

    address: EmailAddress
    status: Label
    """The enhanced status code the notification gives, ``5.1.1``."""
    diagnostic: Detail = ""
    """What the refusing server said, if the notification says."""


class SenderVerification(Contract):
    """The ``verify_sender`` update: a person has checked that the ticket's customer is who they say they are."""

    by: PersonName
    """Who checked, as the audit trail records it."""


class MessageReceipt(Contract):
    """What ``customer_message`` answers once the reply is taken: the turn it starts, or joins if the agent
    is still working on the one before (replies that arrive meanwhile are read together)."""

    turn: PositiveInt


class OrderEvent(Contract):
    """The ``order_event`` signal: something another system reports about an order, as a webhook relay
    forwards it (``{"order_id": "A-1001", "event": "delivered", "detail": "left at the front door"}``)."""

    order_id: OrderId
    event: Label
    detail: Detail = ""

    @model_validator(mode="after")
    def _fits(self) -> OrderEvent:
        """A relay's event is kept for the waits to come, and handed to every run that continues the ticket: one
        past ``EVENT_BYTES`` (a detail of control characters, six bytes each in JSON) is refused, with its size."""
        size = encoded_bytes(self)
        if size > EVENT_BYTES:
            raise PydanticCustomError(
                "event_too_long",
                "the event takes {size} bytes as JSON, more than {limit}",
                {"size": size, "limit": EVENT_BYTES},
            )
        return self


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


class Status(StrEnum):
    RESOLVED = "resolved"
    DECLINED = "declined"
    """A person declined the refund the ticket needed, and none was made. (Runs before 1.2.0's
    ``unanswered-closing`` patch said it of a refund nobody answered too; their approvals tell the two apart.)"""
    UNANSWERED = "unanswered"
    """The refund the ticket needed waited for a person past its deadline, nobody answered, and none was made:
    not a decline, which a desk counts against its approvers (``Outcome.unanswered`` says which request, until
    when)."""
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
    """A payment back to the customer the ticket made: a refund, or whatever other tool pays (``tool``)."""

    refund_id: int
    """Its number in the ledger of the tool that paid it (``refund #3``): unique per tool, not across tools."""
    order_id: str
    amount_cents: int
    currency: Currency
    """The order's currency as the ticket looked it up: every release since 1.0.0 has written it."""
    tool: str = "issue_refund"
    """The tool that paid it."""


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
    answer (one turn unless the ticket stayed open for replies, ``reply_window_seconds``). With ``archive_ref``
    set, the newest turns only, within ``INLINE_TURNS_BYTES``: the older ones are in the archive."""
    policy: str | None = None
    """The digest of the money policy the ticket's last decisions were judged by (``MoneyPolicy.digest``); None
    for runs before the policy file."""
    archive_ref: str | None = None
    """Set on a ticket that continued as new, or whose records outgrew their budget: the tool calls, per-call
    usage and turns that went to the content store (``RecordsArchive``); ``tool_calls``, ``usage.steps`` and
    ``turns`` then hold only the newest. ``activities.content_store.complete`` puts them back together."""
    unlisted_answers: int = 0
    """Rejected answers to approval requests past ``REJECTED_ANSWERS_KEPT``: in the audit trail, not listed."""
    unanswered: str | None = None
    """With ``status`` ``unanswered``, what nobody answered, in the words the audit trail closes with ("request R1:
    nobody answered by 2026-12-01 09:14 UTC; the refund of USD 49.00 was not made"); None otherwise, and for runs
    before 1.2.0's ``unanswered-closing`` patch."""
