"""``SupportAgent``: the agent loop as a deterministic Temporal workflow.

The model picks tools, the tools run, their results go back to the model, until it answers. Every call to
the world is an activity, so after a crash a new worker replays this code against the recorded history
and carries on from the last recorded step: it does not ask the model again about a recorded decision and
does not repeat a finished tool. What this code must never do is take another path on replay: no clock,
no randomness, no I/O except through ``temporalio.workflow``; the sandbox enforces it and the stored
histories in ``replay_histories/`` check it in CI.

Three decisions stay in this code and out of the prompt, because a model can be talked out of a rule
but not past an ``if``: which amounts need a person's approval, which idempotency key a refund carries,
and who may be emailed.

This module is the loop; the rest of the workflow is in pieces that each keep their own state and are handed
what they need: ``intake`` (the run's arguments, read and validated, and the SLA), ``model`` (the calls to the
model, what they cost, and summarising a long conversation), ``approvals`` (the gate a large refund waits at,
and the answers to it), ``tools`` (the tools, their idempotency keys, and refund reconciliation), ``waits`` (the
customer's replies, events about orders), ``audit`` (the audit trail, each entry once), ``continuation``
(handing the ticket to a new run), and ``failures`` (how an error reads to the model and to a person).

How the loop reads each model response (its ``stop_reason``, as the Messages API reports it):

- ``tool_use``: every tool call in it runs, and all their results go back in one user turn, in the order
  the calls were made. Consecutive read-only calls (``lookup_order``) run at once; a call with a side effect
  (a refund, an email) runs alone, after everything before it and before everything after it.
- ``end_turn`` (or ``stop_sequence``): the text is the answer, and the ticket is closed.
- ``max_tokens``: the response was cut off, so a tool call in it may be cut off too (a refund of "49"
  instead of "4900" would still validate). Nothing in it runs: each call is answered with an error saying
  so, and the model is asked to carry on more briefly. It costs a step, within ``max_steps``.
- ``pause_turn``: the API paused a long turn; it goes back as it is, and the next response continues the
  same assistant turn.
- ``refusal`` or ``model_context_window_exceeded``: the model will not, or cannot, go on. The ticket is
  closed as ``handed_over`` with an answer that says a person will take it.
"""

from __future__ import annotations

import asyncio
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.exceptions import ActivityError

# Everything this module imports is passed through the sandbox: loaded once per worker, not once per run.
# The sandbox re-imports the module a workflow is defined in for every run it starts or replays; for the
# rest (contracts, activity references, and the workflow's own helpers, deterministic modules in files of
# their own, as Temporal recommends) a copy per run costs memory and time and buys nothing (README, "Throughput
# and cost per ticket", from ``bench/throughput.py``).
with workflow.unsafe.imports_passed_through():
    from activities.contracts.approvals import (
        ApprovalReceipt,
        ApprovalRequest,
    )
    from activities.contracts.continued import ContinuedState
    from activities.contracts.conversation import Message, TextBlock, UsageReport, append_turn
    from activities.contracts.limits import ANSWER_BYTES, INLINE_RECORDS_BYTES, cut, encoded_bytes
    from activities.contracts.names import (
        APPROVE_SIGNAL,
        AWAITING_APPROVAL_QUERY,
        CUSTOMER_MESSAGE,
        ORDER_EVENT_SIGNAL,
        TURNS_QUERY,
        USAGE_QUERY,
        WORKFLOW_NAME,
    )
    from activities.contracts.ticket import MessageReceipt, Outcome, Status, Turn
    from workflows.approvals import AWAITING_APPROVAL, ApprovalGate, spelled
    from workflows.audit import AuditTrail
    from workflows.continuation import Continuation
    from workflows.failures import ProviderUnusableError, ToolError, cause, is_refusal, raise_if_cancelled
    from workflows.intake import UnreadableStateError, past_sla, read_input
    from workflows.model import Model
    from workflows.rules import RulesInForce
    from workflows.tools import Toolbox
    from workflows.waits import Events, Replies

__all__ = [
    "AWAITING_APPROVAL",
    "CUT_OFF",
    "REFUSED",
    "STOPPED",
    "TOO_LONG",
    "SupportAgent",
    "ToolError",
    "UnreadableStateError",
    "cause",
    "is_refusal",
]
"""The workflow, and the names other modules and tests import from here (defined where they belong)."""


CUT_OFF = (
    "Your reply was cut off at the maximum length before it was complete, so none of its tool calls ran. "
    "Please continue, more briefly."
)
REFUSED = "I cannot help with this request myself. A person from our support team will take your ticket over."
TOO_LONG = "This conversation has grown too long for me. A person from our support team will take your ticket over."
OVER_BUDGET = "This ticket needs more work than I may do on my own. A person from our support team will take it over."
STOPPED: dict[str, str] = {"refusal": REFUSED, "model_context_window_exceeded": TOO_LONG}
"""Stop reasons after which the model will not, or cannot, go on: the answer the customer gets instead."""


@workflow.defn(name=WORKFLOW_NAME)
class SupportAgent:
    def __init__(self) -> None:
        self._continuation = Continuation(hand_over=self._continue_as_new)
        self._replies = Replies()
        self._events = Events(self._continuation)
        """Made here, not in ``run``: a reply or an event may come before the run has read its ticket."""
        self._trail = AuditTrail(notes_from=(self._replies, self._events))
        self._gate = ApprovalGate(audit=self._trail.write, audited=self._trail.holds, continuation=self._continuation)
        """Made here too: an approval may be signalled before the run has read its ticket."""
        self._model = Model(self._continuation, audit=self._trail.write)
        """And here: the ``usage`` query may be asked of a run whose input could not be read."""
        self._handing_over = False

    @workflow.run
    async def run(self, *args: Any) -> Outcome:
        self._ticket, carried = read_input(args)
        ticket = self._ticket
        self._trail.open(ticket.ticket_id)
        self._model.open(ticket)
        self._rules = RulesInForce(ticket.options, audit=self._trail.write)
        self._tools = Toolbox(ticket, self._rules, self._gate, self._events)
        if carried is not None:
            extra = {"ticket_id": ticket.ticket_id, "steps": carried.steps_taken}
            workflow.logger.info("ticket continued", extra=extra)
            self._restore(carried)
        await self._gate.ready()  # first: the request a continued run waits on is answered by the query at once
        await self._rules.read(starting=carried is None)
        if carried is None:
            self._replies.open(ticket.question, 1)
            workflow.logger.info("ticket opened", extra={"ticket_id": ticket.ticket_id})
            if escalation := past_sla(ticket):
                await self._gate.flush()
                await self._trail.write(f"escalated to a person: {escalation}")
                return self._outcome(
                    Status.ESCALATED, 0,
                    "Your ticket has waited longer than we promised, so a colleague is taking it over.",
                )  # fmt: skip
        try:
            outcome = await self._converse(carried)
        except asyncio.CancelledError:
            outcome = await self._cancelled()
        self._replies.closed = self._replies.closed or "it is closed"
        if unread := len(self._replies.pending):  # taken, and then the ticket was cancelled or handed over
            self._replies.notes.add(
                f"{unread} repl{'y' if unread == 1 else 'ies'} taken and not answered: {self._replies.closed}"
            )
        await self._within_budgets()
        outcome = outcome.model_copy(update=self._records())
        await self._gate.flush()
        await self._trail.write_notes()
        refunded = sum(r.amount_cents for r in outcome.refunds)
        currencies = {r.currency for r in outcome.refunds}
        total = spelled(refunded, currencies.pop() if len(currencies) == 1 else None)
        await self._trail.write(f"closed as {outcome.status.value} after {outcome.steps} steps; refunded {total}")
        await workflow.wait_condition(workflow.all_handlers_finished)  # an ``approve`` update is told the end
        workflow.logger.info("ticket closed", extra={"status": outcome.status.value, "steps": outcome.steps})
        return outcome

    @workflow.signal(name=APPROVE_SIGNAL)
    def approve(self, *args: Any) -> None:
        """A person's answer to the refund waiting for approval (``workflows.approval_rules`` says what it
        releases). Any number of arguments is taken: a signal sent with none, or two, is recorded as a
        malformed answer instead of failing every workflow task of the run with a TypeError."""
        self._gate.receive(args)

    @workflow.update(name=APPROVE_SIGNAL)
    async def approve_vouched(self, *args: Any) -> ApprovalReceipt:
        """A person's answer as the approval inbox sends it (``VouchedApproval``): the same rules as the signal,
        but the answer counts only if the inbox's signature checks, is recorded as ``web``, and the person is told
        what came of it, once it has: "approved; Refunded 49.00 on order A-1001 (refund #12)."."""
        return await self._gate.answer_vouched(
            args[0], closed=lambda: self._replies.closed is not None, handing_over=lambda: self._handing_over
        )

    @approve_vouched.validator
    def _may_decide(self, *args: Any) -> None:
        """Refuse at once, before anything is recorded, an answer that would release nothing, saying why ("the
        refund waiting (R2) is 59.00, not 49.00", "request R1 was already answered: approved by ann at ...")."""
        self._gate.check_vouched(args)

    @workflow.update(name=CUSTOMER_MESSAGE)
    def customer_message(self, *args: Any) -> MessageReceipt:
        """The customer's reply, ``{"text": "..."}``: read by the next turn of the agent. It returns once the
        reply is taken, with the turn that will read it."""
        return self._replies.take(args)

    @customer_message.validator
    def _may_take(self, *args: Any) -> None:
        """Refuse, before anything is recorded, a reply the ticket cannot take: it is closed or cancelled, or the
        reply is not one object with a non-empty ``text``."""
        self._replies.check(args)

    @workflow.signal(name=CUSTOMER_MESSAGE)
    def customer_message_signalled(self, *args: Any) -> None:
        """The same reply as a signal, for relays that can only signal: what it cannot take is audited."""
        self._replies.take_signalled(args)

    @workflow.signal(name=ORDER_EVENT_SIGNAL)
    def order_event(self, *args: Any) -> None:
        """Something another system reports about an order (``OrderEvent``), kept until a wait takes it."""
        self._events.receive(args)

    @workflow.query(name=TURNS_QUERY)
    def turns(self) -> list[Turn]:
        """The turns answered so far: what the customer wrote, and the agent's answer to it."""
        return self._replies.turns

    @workflow.query(name=AWAITING_APPROVAL_QUERY)
    def awaiting_approval_of(self) -> ApprovalRequest | None:
        """The request a person is being asked to answer (its id, amount, order, deadline and approvers), or
        None: what the approval screen shows, and what ``agent-worker approve`` sends the id of."""
        return self._gate.awaiting

    @workflow.query(name=USAGE_QUERY)
    def usage(self) -> UsageReport:
        """Tokens and estimated cost so far: in total, and per model call of this run (a ticket that continued
        as new keeps its earlier runs' in the content store, under ``Outcome.archive_ref``)."""
        return self._model.usage

    async def _converse(self, carried: ContinuedState | None) -> Outcome:
        """The ticket's turns: the question, answered, then each reply of the customer's while the ticket stays
        open for them (``reply_window_seconds``), answered over the whole conversation with the same rules, keys
        and approvals. Steps are numbered across turns, so no two calls of the ticket share a key.

        With linear history, ``messages`` holds only what the model has not been sent yet; the conversation
        so far is ``self._model.conversation_ref``. Without it, ``messages`` is the whole conversation."""
        ticket = self._ticket
        self._continuation.linear = carried is not None or ticket.options.linear_history
        messages = [Message.user_text(ticket.question)] if carried is None else await self._resume(carried)
        first = 1 if carried is None else carried.steps_taken + 1
        if carried is not None and carried.reply_until is not None:  # it continued while it waited for a reply
            last = self._replies.turns[-1]
            outcome = self._outcome(last.status, last.last_step, last.answer)
        else:
            outcome, messages = await self._turn(first, messages)
        while True:
            await self._within_budgets()
            window = self._ticket.options.reply_window_seconds
            reply = await self._replies.after(outcome, window, self._continuation, self._trail.write_notes)
            if reply is None:
                return outcome
            first = outcome.steps + 1
            self._replies.open(reply, first, refunds=len(self._tools.refunds), approvals=len(self._gate.records))
            await self._trail.write(f"the customer replied: turn {self._replies.count + 1} begins")
            append_turn(messages, "user", [TextBlock(text=reply)])
            outcome, messages = await self._turn(first, messages)

    async def _turn(self, first: int, messages: list[Message]) -> tuple[Outcome, list[Message]]:
        """One turn of the agent loop (``_steps``), ended as failed, for a person, by a provider that refuses the
        worker itself."""
        try:
            return await self._steps(first, messages)
        except ProviderUnusableError as error:
            return self._outcome(Status.FAILED, error.step, str(error)), messages

    async def _steps(self, first: int, messages: list[Message]) -> tuple[Outcome, list[Message]]:
        """Think, use the tools asked for, repeat until the model answers or the turn's steps (``max_steps`` from
        its first) run out. Returns how it ended, and what is still unsent."""
        ticket = self._ticket
        last = self._replies.first_step + ticket.options.max_steps - 1
        for step in range(first, last + 1):
            if self._model.should_summarize():
                messages = await self._model.summarize(step, messages)
            if self._continuation.should_continue(ticket.options.continue_as_new_after_steps):
                await self._continue_as_new(step - 1, messages)
            try:
                decision = await self._model.think(step, messages)
            except ActivityError as error:
                raise_if_cancelled(error)
                return self._outcome(
                    Status.FAILED,
                    step,
                    f"The agent could not get an answer from the model ({cause(error)}). "
                    "A person will take this ticket over.",
                ), messages
            if handed_over := await self._hands_over(step, decision.stop_reason):
                return handed_over, messages
            if self._continuation.linear:  # the activity stored the conversation with this answer in it
                self._model.conversation_ref, messages = decision.conversation_ref, []
            else:
                append_turn(messages, "assistant", decision.content)
            if decision.stop_reason == "max_tokens":
                results = [self._tools.answer_call(step, call, CUT_OFF, is_error=True) for call in decision.tool_calls]
                append_turn(messages, "user", [*results, TextBlock(text=CUT_OFF)])
                continue
            if decision.stop_reason == "pause_turn" and not decision.tool_calls:
                continue
            if not decision.tool_calls:
                status = Status.DECLINED if self._refund_was_refused(this_turn=True) else Status.RESOLVED
                return self._outcome(status, step, decision.text), messages
            append_turn(messages, "user", list(await self._tools.use_all(step, decision.tool_calls)))
            await self._within_budgets()
        gave_up = f"Gave up after {ticket.options.max_steps} steps. A person will take this ticket over."
        return self._outcome(Status.GAVE_UP, last, gave_up), messages

    async def _resume(self, carried: ContinuedState) -> list[Message]:
        """What the model has not been sent yet, after running the calls of the step the last run was in the
        middle of (a refund waiting for approval) that it did not get to."""
        messages = list(carried.pending)
        if carried.calls:
            step = self._continuation.step = carried.steps_taken
            append_turn(messages, "user", list(await self._tools.use_all(step, carried.calls, carried.results)))
        return messages

    async def _hands_over(self, step: int, stop_reason: str | None) -> Outcome | None:
        """The ticket handed to a person after this model call, with its conversation kept: the model will not or
        cannot go on, or its calls have cost more than the policy's budget (it would never loop on); else None."""
        if stop_reason in STOPPED:
            return self._outcome(Status.HANDED_OVER, step, STOPPED[stop_reason])
        if spent := self._over_budget():
            await self._trail.write(f"handed to a person: the model's budget is spent ({spent})")
            return self._outcome(Status.HANDED_OVER, step, OVER_BUDGET)
        return None

    def _over_budget(self) -> str | None:
        """What the ticket's model calls have cost against the policy's budget, once past it; else None. Checked
        after every model call, so a ticket stops at the first call past it and the conversation is kept for the
        person who takes it over."""
        budget = self._rules.rules.max_cost_usd
        spent = self._model.usage.total.cost_usd
        return f"${spent:.2f} of ${budget:.2f}" if budget is not None and spent > budget else None

    async def _cancelled(self) -> Outcome:
        """The ticket was cancelled: say who and why in the audit trail (the request's reason; ``agent-worker
        cancel`` puts who asked in it), and close it with what was done before. It completes rather than ending
        as Temporal's CANCELED, so that its outcome still says what was refunded and approved."""
        reason = workflow.cancellation_reason() or "no reason given"
        self._replies.closed = f"it was cancelled ({reason})"
        workflow.logger.info("ticket cancelled", extra={"reason": reason})
        await self._trail.write(f"cancelled: {reason}")
        return self._outcome(
            Status.CANCELLED, self._continuation.step, f"This ticket was cancelled ({reason}). A person will follow up."
        )

    def _refund_was_refused(self, *, this_turn: bool = False) -> bool:
        """Whether a refund was refused by a person and none was made instead: on the ticket, or in this turn."""
        refunds, answers = (self._replies.refunds_before, self._replies.approvals_before) if this_turn else (0, 0)
        return not self._tools.refunds[refunds:] and self._gate.refused(answers)

    # --- continuing as a new run ---

    async def _continue_as_new(self, steps_taken: int, pending: list[Message]) -> NoReturn:
        """Hand everything to a new run of this ticket: same workflow id, a fresh history."""
        self._handing_over = True  # an ``approve`` update waiting for its refund returns: the next run pays
        await workflow.wait_condition(workflow.all_handlers_finished)
        await self._gate.flush()  # the next run carries the answers as records, already in the audit trail
        if await self._continuation.archive(self._tools.tool_calls, self._model.usage):
            self._tools.tool_calls, self._model.usage = [], UsageReport(total=self._model.usage.total)
        await self._trail.write_notes()  # last: nothing that arrives meanwhile is left unwritten
        state = ContinuedState(
            steps_taken=steps_taken,
            pending=pending,
            calls=self._tools.step_calls,
            results=self._tools.step_results,
            archive_ref=self._continuation.archive_ref,
            **self._trail.hand_over(),
            **self._model.hand_over(),
            **self._gate.hand_over(),
            **self._tools.hand_over(),
            **self._replies.hand_over(),
            **self._events.hand_over(),
        )
        workflow.logger.info("ticket continues as a new run", extra={"steps": steps_taken})
        workflow.continue_as_new(args=[self._ticket, state])

    async def _within_budgets(self) -> None:
        """Hand the oldest turns, or the tool calls and per-call usage, to the content store once they outgrow
        what the outcome and the ``turns`` query may carry (``INLINE_TURNS_BYTES``, ``INLINE_RECORDS_BYTES``), as
        a run continuing as new hands its records."""
        turns, calls, usage = self._replies.overflow(), self._tools.tool_calls, self._model.usage
        records = encoded_bytes(calls) + encoded_bytes(usage.steps) > INLINE_RECORDS_BYTES
        if turns or records:
            await self._continuation.archive(calls if records else [], usage if records else UsageReport(), turns)
            if records:
                self._tools.tool_calls, self._model.usage = [], UsageReport(total=usage.total)

    def _records(self) -> dict[str, Any]:
        """What the outcome carries of the records that go to the content store past their budgets."""
        return {
            "tool_calls": self._tools.tool_calls, "usage": self._model.usage, "turns": self._replies.turns,
            "archive_ref": self._continuation.archive_ref,
        }  # fmt: skip

    def _restore(self, state: ContinuedState) -> None:
        self._trail.restore(state)
        self._model.restore(state)
        self._continuation.archive_ref = state.archive_ref
        self._tools.restore(state)
        self._gate.restore(state)
        self._replies.restore(state, self._ticket.question)
        self._events.restore(state)

    def _outcome(self, status: Status, steps: int, answer: str) -> Outcome:
        """How the ticket stands with this answer: the turn in progress ends with it, as ``status``. An answered
        ticket is ``declined`` if a person refused a refund on it and none was made, whichever turn it was in:
        a customer who says thanks after a decline has still not had the money."""
        workflow.logger.info("ticket answered", extra={"status": status.value, "steps": steps})
        answer = cut(answer, ANSWER_BYTES)  # the whole answer is in the conversation
        replies = self._replies
        if replies.working:
            replies.answered(
                Turn(message=replies.message, answer=answer, status=status, first_step=replies.first_step,
                     last_step=steps)
            )  # fmt: skip
        if status in {Status.RESOLVED, Status.DECLINED}:
            status = Status.DECLINED if self._refund_was_refused() else Status.RESOLVED
        return Outcome(
            ticket_id=self._ticket.ticket_id,
            status=status,
            answer=answer,
            steps=steps,
            model_calls=self._model.calls,
            refunds=self._tools.refunds,
            approvals=self._gate.records,
            unlisted_answers=self._gate.unlisted,
            policy=self._rules.rules.digest,
            **self._records(),
        )
