"""What an open ticket waits for besides a person's approval: the customer's reply, and news from other systems.

Both arrive at any time, as messages to the running workflow, and both are kept until something reads them,
so that nothing sent a moment too early is lost:

- **Replies.** A ticket that has answered may stay open for the customer's reply (``reply_window_seconds``).
  A reply is the Workflow Update ``customer_message``, which a validator refuses at once when the ticket takes
  no more (closed, cancelled) or the text is empty, so the sender knows; the signal of the same name is for
  relays that can only signal, and what it cannot take goes to the audit trail instead. Each reply starts a
  new turn of the agent over the whole conversation; replies that arrive while the agent works are read
  together when its answer is out.
- **Events.** ``order_event`` signals (a carrier's scan, a payment webhook) are kept until a
  ``wait_for_delivery_scan`` takes the first one about its order: an event that came before the wait began is
  not lost, and one about another order is left for a wait about that order.

While a ticket waits, the search attribute ``TicketState`` says for what and the memo ``waiting_for`` until
when, so a desk lists the tickets waiting for customers, or for carriers, with no worker running; both are
cleared on every way out of the wait that runs code (an answer, the time running out, a cancel).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeKey

with workflow.unsafe.imports_passed_through():
    from pydantic import NonNegativeInt, ValidationError

    from activities.contracts.fields import Contract, describe_errors
    from activities.contracts.limits import (
        EVENTS_KEPT,
        INLINE_TURNS_BYTES,
        PENDING_REPLIES,
        PENDING_REPLY_BYTES,
        encoded_bytes,
    )
    from activities.contracts.names import TICKET_STATE_ATTRIBUTE, WAITING_FOR_MEMO
    from activities.contracts.ticket import (
        CustomerMessage,
        MessageReceipt,
        OrderEvent,
        Outcome,
        Status,
        TicketState,
        Turn,
        Waiting,
    )

from workflows.audit_log import Notes
from workflows.handing_over import Continuation

TICKET_STATE = SearchAttributeKey.for_keyword(TICKET_STATE_ATTRIBUTE)
NO_MORE_REPLIES = "This ticket takes no more replies"
"""How a reply to a ticket that has closed to replies is refused: the mail receiver reads it as "start a new
ticket", where every other refusal is "try again later"."""
UNVERIFIED_REPLY = (
    "This ticket's customer is verified, and this reply is not verified to come from them: it cannot be taken"
)
"""Why a verified ticket refuses an unverified reply (``support_agent``'s validator): the mail receiver bounces the
reply with these words."""


class RepliesSnapshot(Contract):
    """What a run hands the next of the conversation's turns: those answered, the one in progress, the replies no
    turn has read yet, and, if it continued while it waited for a reply, until when."""

    turns: list[Turn] = []
    archived: NonNegativeInt = 0
    """Turns that went to the content store, before ``turns``."""
    message: str = ""
    """What the customer wrote that the turn in progress answers."""
    first_step: NonNegativeInt = 1
    """The first step of the turn in progress: its steps are counted against ``max_steps`` from there."""
    pending: list[str] = []
    until: datetime | None = None


class EventWait(Contract):
    """A wait for news about an order, as a run hands it on: about which order, until when (workflow time)."""

    order_id: str
    until: datetime


class EventsSnapshot(Contract):
    """What a run hands the next of the events about orders: those no wait has taken, and the wait in progress."""

    kept: list[OrderEvent] = []
    waiting: EventWait | None = None


class Replies:
    """The ticket's turns (the question, then each reply, with the answer to each), and the replies taken that
    no turn has read yet."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        """The turns the outcome and the ``turns`` query carry: the newest, within their budget."""
        self.archived = 0
        """Turns before ``turns``, handed to the content store as the inline ones outgrew their budget."""
        self.pending: list[str] = []
        self.closed: str | None = None
        """Why the ticket takes no more replies (None while it does)."""
        self.message = ""
        """What the turn in progress answers: the question, or the replies it read."""
        self.first_step = 1
        self.until: datetime | None = None
        """While the ticket waits for a reply: until when (workflow time)."""
        self.working = True
        """Whether a turn is in progress (a reply taken now is read by the turn after it)."""
        self._notes = Notes("replies signalled to the ticket")
        """What the audit trail must still be told: replies that could not be taken, and why."""

    def take_note(self) -> str | None:
        return self._notes.take()

    @property
    def count(self) -> int:
        """Turns answered so far, archived ones included."""
        return self.archived + len(self.turns)

    def check(self, args: Sequence[Any], *, customer_verified: bool = False) -> CustomerMessage:
        """The reply, if the ticket takes it; ``ValueError`` saying why not otherwise (the update's validator:
        the sender is told, and nothing is recorded). A reply the next turn has no room for is refused too:
        the turn reads its replies in one input, bounded in number and size (``PENDING_REPLIES``,
        ``PENDING_REPLY_BYTES``), and the customer may send more once the agent has answered. So is a reply
        marked unverified when the ticket's customer is verified (``customer_verified``): it may be anyone's."""
        reply = self._read(args)
        if why := self._no_room_for(reply.text) or self._unverified(reply, customer_verified=customer_verified):
            raise ValueError(why)
        return reply

    @staticmethod
    def _unverified(reply: CustomerMessage, *, customer_verified: bool) -> str | None:
        return UNVERIFIED_REPLY if customer_verified and reply.sender_verified is False else None

    def _read(self, args: Sequence[Any]) -> CustomerMessage:
        if self.closed:
            raise ValueError(f"{NO_MORE_REPLIES}: {self.closed}.")
        if len(args) != 1:
            raise ValueError(f'A reply is one JSON object, {{"text": "..."}}; got {len(args)} arguments.')
        try:
            return CustomerMessage.model_validate(args[0])
        except ValidationError as error:
            raise ValueError(f"Invalid reply: {describe_errors(error)}") from None

    def _no_room_for(self, text: str) -> str | None:
        """Why the next turn cannot read this reply too, or None."""
        if len(self.pending) >= PENDING_REPLIES:
            return (
                f"The agent has {len(self.pending)} replies it has not read yet, as many as one turn reads; "
                "send this once it has answered."
            )
        if (size := encoded_bytes([*self.pending, text])) > PENDING_REPLY_BYTES:
            return (
                f"The replies the agent has not read yet and this one come to {size} bytes, more than one turn "
                f"reads ({PENDING_REPLY_BYTES}); send this once it has answered."
            )
        return None

    def take(self, args: Sequence[Any]) -> MessageReceipt:
        """Keep a reply for the next turn (after the validator let it through; it is not asked again here, so a
        run that replays replies taken before the budget takes them as it did)."""
        self.pending.append(self._read(args).text)
        turn = self.count + (2 if self.working else 1)
        workflow.logger.info("the customer replied", extra={"turn": turn})
        return MessageReceipt(turn=turn)

    def take_signalled(self, args: Sequence[Any], *, customer_verified: bool = False) -> CustomerMessage | None:
        """A reply sent as a signal, which cannot be refused: what cannot be taken goes to the audit trail, and
        so does a reply the next turn has no room for, or an unverified one to a verified customer (``check``).
        The reply, if taken."""
        try:
            reply = self._read(args)
        except ValueError as error:
            why: str | None = str(error)
        else:
            why = self._no_room_for(reply.text) or self._unverified(reply, customer_verified=customer_verified)
        if why is None:
            self.take(args)
            return reply
        workflow.logger.warning("a reply could not be taken", extra={"reason": why})
        self._notes.add(f"a reply signalled to the ticket was not taken: {why}")
        return None

    def open(self, message: str, first_step: int) -> None:
        """A turn begins at ``first_step``, answering ``message``."""
        self.message, self.first_step, self.working = message, first_step, True

    def answered(self, turn: Turn) -> None:
        self.turns.append(turn)
        self.working = False

    def overflow(self) -> list[Turn]:
        """The oldest turns, taken out of those carried once they outgrow ``INLINE_TURNS_BYTES`` (down to half
        of it, the newest turn kept whatever its size), for the caller to hand to the content store."""
        if encoded_bytes(self.turns) <= INLINE_TURNS_BYTES:
            return []
        out = 0
        while out < len(self.turns) - 1 and encoded_bytes(self.turns[out:]) > INLINE_TURNS_BYTES // 2:
            out += 1
        gone, self.turns = self.turns[:out], self.turns[out:]
        self.archived += len(gone)
        return gone

    def closes_after(self, answered: Outcome, window_seconds: int) -> bool:
        """Whether the ticket closes with the turn that ``answered``: it does unless the agent answered and a reply
        came meanwhile or may still come within the window. A ticket the agent did not answer (it failed, gave up,
        handed over) goes to a person, not back to the customer."""
        if answered.status not in {Status.RESOLVED, Status.DECLINED, Status.UNANSWERED}:
            self.close(f"it was closed as {answered.status.value}, for a person to take over")
        elif not (window_seconds or self.pending):
            self.close("it is closed")
        return self.closed is not None

    def close(self, why: str) -> None:
        """The ticket takes no more replies, for this reason (the first one given stands); replies taken and not
        read are noted for the audit trail."""
        if self.closed is not None:
            return
        self.closed = why
        if unread := len(self.pending):
            self._notes.add(f"{unread} repl{'y' if unread == 1 else 'ies'} taken and not answered: {why}")

    async def wait(self, window_seconds: int, continuation: Continuation) -> str | None:
        """The replies the next turn reads, waiting up to the window for one if none came meanwhile; None when
        none came and the ticket closes (from then on, the validator refuses replies).

        A ticket parked this long may be flooded with signals: when the server suggests it, the ticket continues
        as new while it waits (or once its history has grown long), and the next run waits on until the same
        moment (``until``, carried over)."""
        if not self.pending and (window_seconds or self.until):
            self.until = until = self.until or workflow.now() + timedelta(seconds=window_seconds)
            if until > workflow.now():  # a run that took over late may find the window gone
                async with _Visible(Waiting(state=TicketState.WAITING_FOR_CUSTOMER, until=until)):
                    await continuation.wait(lambda: bool(self.pending), until)
        self.until = None
        if not self.pending:
            self.close("the ticket is closed")
            return None
        text, self.pending = "\n\n".join(self.pending), []
        return text

    def snapshot(self) -> RepliesSnapshot:
        return RepliesSnapshot(
            turns=self.turns,
            archived=self.archived,
            message=self.message,
            first_step=self.first_step,
            pending=self.pending,
            until=self.until,
        )

    def restore(self, snapshot: RepliesSnapshot) -> None:
        self.turns = list(snapshot.turns)
        self.archived = snapshot.archived
        self.pending = list(snapshot.pending)
        self.open(snapshot.message, snapshot.first_step)
        self.until = snapshot.until
        self.working = snapshot.until is None  # a ticket handed over while it waited has answered its turn


class Events:
    """Events about orders, kept until a wait takes them, and the wait for one (which may outlast a run). Given
    the run's continuation, to hand a long wait to."""

    def __init__(self, continuation: Continuation) -> None:
        self._continuation = continuation
        self.kept: list[OrderEvent] = []
        self._notes = Notes("order events")
        self.waiting: EventWait | None = None
        """The wait in progress: the order, and until when; handed to the run that continues the ticket."""

    def receive(self, args: Sequence[Any]) -> None:
        """An ``order_event`` signal, whatever it holds: kept if it is one, noted for the audit trail if not."""
        why = f"expected one JSON object, got {len(args)} arguments"
        if len(args) == 1:
            try:
                event = OrderEvent.model_validate(args[0])
            except ValidationError as error:
                why = describe_errors(error)
            else:
                self.kept = [*self.kept, event][-EVENTS_KEPT:]
                return
        workflow.logger.warning("an order event could not be read", extra={"reason": why})
        self._notes.add(f"an order event was not taken: {why}")

    async def wait_for(self, order_id: str, hours: int) -> OrderEvent | None:
        """The first event about the order, kept or to come within the hours; None if none came.

        A wait may last thirty days, and a relay may flood it meanwhile: when the server suggests it or the
        history has grown long, the ticket continues as new while it waits, and the
        next run, which runs the step's calls it had not finished, waits on until the same moment."""
        if self._first(order_id) is None:
            carried = self.waiting
            if carried is not None and carried.order_id == order_id:
                until = carried.until
            else:
                until = workflow.now() + timedelta(hours=hours)
            self.waiting = EventWait(order_id=order_id, until=until)
            if until > workflow.now():
                async with _Visible(Waiting(state=TicketState.WAITING_FOR_EVENT, until=until, order_id=order_id)):
                    await self._continuation.wait(lambda: self._first(order_id) is not None, until)
        self.waiting = None
        event = self._first(order_id)
        if event is not None:
            self.kept.remove(event)
        return event

    def _first(self, order_id: str) -> OrderEvent | None:
        return next((event for event in self.kept if event.order_id == order_id), None)

    def take_note(self) -> str | None:
        return self._notes.take()

    def snapshot(self) -> EventsSnapshot:
        return EventsSnapshot(kept=self.kept, waiting=self.waiting)

    def restore(self, snapshot: EventsSnapshot) -> None:
        self.kept = list(snapshot.kept)
        self.waiting = snapshot.waiting


class _Visible:
    """Visibility while the ticket waits: the search attribute and the memo set on the way in, cleared on the
    way out, a cancel included. Not on a continue-as-new or an eviction from the worker's cache, which do not
    run through a wait here."""

    def __init__(self, waiting: Waiting) -> None:
        self._waiting = waiting

    async def __aenter__(self) -> None:
        workflow.upsert_search_attributes([TICKET_STATE.value_set(self._waiting.state.value)])
        workflow.upsert_memo({WAITING_FOR_MEMO: self._waiting.model_dump(mode="json")})

    async def __aexit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is GeneratorExit:  # evicted from the cache: no workflow call may run now
            return
        workflow.upsert_search_attributes([TICKET_STATE.value_unset()])
        workflow.upsert_memo({WAITING_FOR_MEMO: None})
