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

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeKey

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from activities.contracts.continued import ContinuedState
    from activities.contracts.fields import describe_errors
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

from workflows.continuation import Continuation
from workflows.patches import Patch

TICKET_STATE = SearchAttributeKey.for_keyword(TICKET_STATE_ATTRIBUTE)

MAX_KEPT_EVENTS = 100
"""Events kept for waits to come: beyond this, the oldest go, so a chatty relay cannot grow what a run
hands the next one without bound."""


class Replies:
    """The ticket's turns (the question, then each reply, with the answer to each), and the replies taken that
    no turn has read yet."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.pending: list[str] = []
        self.closed: str | None = None
        """Why the ticket takes no more replies (None while it does)."""
        self.message = ""
        """What the turn in progress answers: the question, or the replies it read."""
        self.first_step = 1
        self.until: datetime | None = None
        """While the ticket waits for a reply: until when (workflow time)."""
        self.refunds_before = self.approvals_before = 0
        self.working = True
        """Whether a turn is in progress (a reply taken now is read by the turn after it)."""
        self.notes: list[str] = []
        """What the audit trail must still be told: replies that could not be taken, and why."""

    def check(self, args: Sequence[Any]) -> CustomerMessage:
        """The reply, if the ticket takes it; ``ValueError`` saying why not otherwise (the update's validator:
        the sender is told, and nothing is recorded)."""
        if self.closed:
            raise ValueError(f"This ticket takes no more replies: {self.closed}.")
        if len(args) != 1:
            raise ValueError(f'A reply is one JSON object, {{"text": "..."}}; got {len(args)} arguments.')
        try:
            return CustomerMessage.model_validate(args[0])
        except ValidationError as error:
            raise ValueError(f"Invalid reply: {describe_errors(error)}") from None

    def take(self, args: Sequence[Any]) -> MessageReceipt:
        """Keep a reply for the next turn (after the validator let it through)."""
        self.pending.append(self.check(args).text)
        turn = len(self.turns) + (2 if self.working else 1)
        workflow.logger.info("the customer replied", extra={"turn": turn})
        return MessageReceipt(turn=turn)

    def take_signalled(self, args: Sequence[Any]) -> None:
        """A reply sent as a signal, which cannot be refused: what cannot be taken goes to the audit trail."""
        try:
            self.take(args)
        except ValueError as error:
            workflow.logger.warning("a reply could not be taken", extra={"reason": str(error)})
            self.notes.append(f"a reply signalled to the ticket was not taken: {error}")

    def open(self, message: str, first_step: int, *, refunds: int = 0, approvals: int = 0) -> None:
        """A turn begins at ``first_step``, answering ``message``, after the ticket's first ``refunds`` refunds
        and ``approvals`` answers about refunds (what this turn does is counted from there)."""
        self.message, self.first_step, self.working = message, first_step, True
        self.refunds_before, self.approvals_before = refunds, approvals

    def answered(self, turn: Turn) -> None:
        self.turns.append(turn)
        self.working = False

    async def after(
        self, answered: Outcome, window_seconds: int, continuation: Continuation, notes: Callable[[], Awaitable[None]]
    ) -> str | None:
        """The customer's reply the next turn reads, after a turn ``answered``: taken while the agent worked, or
        waited for (the CUSTOMER_REPLIES patch, only on tickets that meet it), once the audit trail has its
        ``notes``. None: the ticket closes with this turn's outcome. A ticket the agent did not answer (it failed,
        gave up, handed over) goes to a person, not back to the customer."""
        if answered.status not in {Status.RESOLVED, Status.DECLINED}:
            self.closed = f"it was closed as {answered.status.value}, for a person to take over"
            return None
        if not (window_seconds or self.pending) or not workflow.patched(Patch.CUSTOMER_REPLIES):
            self.closed = "it is closed"
            return None
        await notes()
        return await self.wait(window_seconds, continuation)

    async def wait(self, window_seconds: int, continuation: Continuation) -> str | None:
        """The replies the next turn reads, waiting up to the window for one if none came meanwhile; None when
        none came and the ticket closes (from then on, the validator refuses replies).

        A ticket parked this long may be flooded with signals: when the server suggests it, the ticket continues
        as new while it waits, and the next run waits on until the same moment (``until``, carried over)."""
        if not self.pending and (window_seconds or self.until):
            self.until = self.until or workflow.now() + timedelta(seconds=window_seconds)
            suggested = workflow.info().is_continue_as_new_suggested
            remaining = self.until - workflow.now()  # a run that took over late may find the window gone
            if remaining > timedelta(0):
                async with _Visible(Waiting(state=TicketState.WAITING_FOR_CUSTOMER, until=self.until)):
                    with contextlib.suppress(TimeoutError):
                        await workflow.wait_condition(
                            lambda: bool(self.pending) or (continuation.linear and suggested()),
                            timeout=remaining,
                        )
            if not self.pending and continuation.linear and suggested() and workflow.now() < self.until:
                await continuation.continue_waiting()
        self.until = None
        if not self.pending:
            self.closed = "the ticket is closed"
            return None
        text, self.pending = "\n\n".join(self.pending), []
        return text

    def restore(self, state: ContinuedState, question: str) -> None:
        self.turns = list(state.turns)
        self.pending = list(state.replies)
        self.open(
            state.turn_message or question, state.turn_first_step or 1,
            refunds=state.turn_refunds_before, approvals=state.turn_approvals_before,
        )  # fmt: skip
        self.until = state.reply_until
        self.working = state.reply_until is None  # a ticket handed over while it waited has answered its turn

    def hand_over(self) -> dict[str, Any]:
        """What ``ContinuedState`` carries of the replies."""
        return {
            "turns": self.turns, "turn_message": self.message, "turn_first_step": self.first_step,
            "turn_refunds_before": self.refunds_before, "turn_approvals_before": self.approvals_before,
            "replies": self.pending, "reply_until": self.until,
        }  # fmt: skip


class Events:
    """Events about orders, kept until a wait takes them."""

    def __init__(self) -> None:
        self.kept: list[OrderEvent] = []
        self.notes: list[str] = []

    def receive(self, args: Sequence[Any]) -> None:
        """An ``order_event`` signal, whatever it holds: kept if it is one, noted for the audit trail if not."""
        why = f"expected one JSON object, got {len(args)} arguments"
        if len(args) == 1:
            try:
                event = OrderEvent.model_validate(args[0])
            except ValidationError as error:
                why = describe_errors(error)
            else:
                self.kept = [*self.kept, event][-MAX_KEPT_EVENTS:]
                return
        workflow.logger.warning("an order event could not be read", extra={"reason": why})
        self.notes.append(f"an order event was not taken: {why}")

    async def wait_for(self, order_id: str, hours: int) -> OrderEvent | None:
        """The first event about the order, kept or to come within the hours; None if none came."""
        if self._first(order_id) is None:
            until = workflow.now() + timedelta(hours=hours)
            async with _Visible(Waiting(state=TicketState.WAITING_FOR_EVENT, until=until, order_id=order_id)):
                with contextlib.suppress(TimeoutError):
                    await workflow.wait_condition(
                        lambda: self._first(order_id) is not None, timeout=until - workflow.now()
                    )
        event = self._first(order_id)
        if event is not None:
            self.kept.remove(event)
        return event

    def _first(self, order_id: str) -> OrderEvent | None:
        return next((event for event in self.kept if event.order_id == order_id), None)

    def restore(self, state: ContinuedState) -> None:
        self.kept = list(state.events)

    def hand_over(self) -> dict[str, Any]:
        return {"events": self.kept}


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
