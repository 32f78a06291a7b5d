"""``SupportAgent``: the agent loop as a deterministic Temporal workflow.

The model picks tools, the tools run, their results go back to the model, until it answers. Every call to the
world is an activity, so after a crash a new worker replays this code against the recorded history and carries on
from the last recorded step, never asking the model again about a recorded decision nor repeating a finished tool.
So this code must never take another path on replay: no clock, no randomness, no I/O but through
``temporalio.workflow`` (the determinism lint refuses it, and the replay gate, replaying ``replay_histories/`` as
the workers run, checks it in CI: docs/evals-and-replay.md). Which amounts need a
person, which key a refund carries and who may be emailed are decided here, not in the prompt: a model can be
talked out of a rule but not past an ``if``.

This module is the loop; the rest of the workflow is in pieces that each keep their own state, take a typed
snapshot of it for the run that continues the ticket (``continuation``), and are handed what they need when the
workflow is made: ``intake`` (the run's arguments, read and validated, and the SLA), ``rules`` (the operator's
money policy, tightened by the ticket), ``thinking`` (the calls to the model, what they cost, and summarising a long
conversation), ``approval_gate`` and ``approval_rules`` (the gate a large payout waits at, who must answer, and the
answers), ``toolbox``, ``ownership`` and ``payouts`` (the tools, their idempotency keys, and reconciliation),
``waits`` (the customer's replies, events about orders), ``audit_log`` (the audit trail, each entry once),
``continuation`` (when the ticket goes on in a new run), and ``failures`` (how an error reads to the model and to a
person).
How it reads each response's ``stop_reason`` is in ``docs/architecture.md``.
"""

# No ``from __future__ import annotations`` here: where a team embedding the plugin keeps the SDK's sandbox, it runs
# this module again for every run it starts or replays, and with annotations kept as strings the SDK parses each
# handler's from its string on every run (docs/benchmarks.md has the cost). Evaluated, they are parsed once.
import asyncio
from typing import Any, NoReturn, TypedDict

from temporalio import workflow
from temporalio.exceptions import ActivityError
from temporalio.workflow import ContinueAsNewVersioningBehavior

# The product's workers run this module without the SDK's sandbox (``wiring.workers_runner``); a team embedding the
# plugin may keep it, and then everything imported here is passed through it: loaded once per worker, not once per
# run, as Temporal recommends for deterministic modules. Either way what keeps these modules deterministic is the
# net of ``agent_worker.workflow_lint`` and the replay gate (docs/evals-and-replay.md), not the sandbox.
with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from activities.contracts.approvals import ApprovalReceipt, ApprovalRequest
    from activities.contracts.conversation import Message, TextBlock, UsageReport, append_turn
    from activities.contracts.fields import describe_errors, same_address
    from activities.contracts.limits import ANSWER_BYTES, INLINE_RECORDS_BYTES, cut, encoded_bytes
    from activities.contracts.names import (
        APPROVE_SIGNAL,
        AWAITING_APPROVAL_QUERY,
        CUSTOMER_MESSAGE,
        MAIL_BOUNCED,
        ORDER_EVENT_SIGNAL,
        TURNS_QUERY,
        USAGE_QUERY,
        VERIFY_SENDER,
        WAKE_SIGNAL,
        WORKFLOW_NAME,
    )
    from activities.contracts.ticket import (
        CustomerMessage,
        MailBounce,
        MessageReceipt,
        Outcome,
        SenderVerification,
        Status,
        TicketInput,
        ToolCallRecord,
        Turn,
    )
    from workflows.approval_gate import ApprovalGate
    from workflows.approval_rules import spelled
    from workflows.audit_log import AuditLog, Notes
    from workflows.continuation import ContinuedState
    from workflows.failures import ProviderUnusableError, cause, raise_if_cancelled
    from workflows.handing_over import Continuation, HandOver
    from workflows.intake import Intake, past_sla
    from workflows.rules import RulesInForce
    from workflows.thinking import Model
    from workflows.toolbox import Toolbox
    from workflows.waits import Events, Replies

CUT_OFF = (
    "Your reply was cut off at the maximum length before it was complete, so none of its tool calls ran. "
    "Please continue, more briefly."
)
REFUSED = "I cannot help with this request myself. A person from our support team will take your ticket over."
TOO_LONG = "This conversation has grown too long for me. A person from our support team will take your ticket over."
OVER_BUDGET = "This ticket needs more work than I may do on my own. A person from our support team will take it over."
STOPPED: dict[str, str] = {"refusal": REFUSED, "model_context_window_exceeded": TOO_LONG}
"""Stop reasons after which the model will not, or cannot, go on: the answer the customer gets instead."""


class Records(TypedDict):
    """The outcome's fields that the run's records fill (``Outcome``'s own names and types): refreshed at the close,
    when a cancel or a budget may have added to them since the answer."""

    tool_calls: list[ToolCallRecord]
    usage: UsageReport
    turns: list[Turn]
    archive_ref: str | None


@workflow.defn(name=WORKFLOW_NAME)
class SupportAgent:
    @workflow.init
    def __init__(self, *args: Any) -> None:
        """Read the run's arguments and make the pieces, each told what it needs, before any signal, update or
        query reaches them. A caller's bad input is kept for ``run`` to fail the run with; the pieces that need
        the ticket are made only when there is one."""
        self._intake = Intake.read(args)
        ticket, carried = self._intake.ticket, self._intake.carried
        self._continuation = Continuation()
        self._replies = Replies()
        self._events = Events(self._continuation)
        self._bounces = Notes("bounces signalled to the ticket")
        """Bounces ``mail_bounced`` could not take, for the audit trail: written where the run writes its other
        notes, so a flood of them costs the history a bounded number of entries, not one each."""
        self._bounced = Notes("bounces of the desk's mail")
        """The customer's address bouncing the desk's mail: one note, the first time (a repeat changes nothing)."""
        self._trail = AuditLog(
            ticket.ticket_id if ticket else "", notes_from=(self._replies, self._events, self._bounces, self._bounced)
        )
        self._gate = ApprovalGate(audit=self._trail.write, audited=self._trail.holds, continuation=self._continuation)
        self._handing_over = False
        if ticket is None:
            return
        self._ticket: TicketInput = ticket
        self._model = Model(ticket, audit=self._trail.write)
        self._rules = RulesInForce(ticket.options, self._trail)
        self._tools = Toolbox(ticket, self._rules, self._gate, self._events)
        if carried is not None:
            self._restore(carried)

    @workflow.run
    async def run(self, *_args: Any) -> Outcome:
        if self._intake.problem is not None:
            raise self._intake.problem
        ticket, carried = self._ticket, self._intake.carried
        if carried is not None:
            extra = {"ticket_id": ticket.ticket_id, "steps": carried.steps_taken}
            workflow.logger.info("ticket continued", extra=extra)
        await self._gate.ready()  # first: the request a continued run waits on is answered by the query at once
        await self._rules.read(starting=carried is None)
        if carried is None:
            self._replies.open(ticket.question, 1)
            workflow.logger.info("ticket opened", extra={"ticket_id": ticket.ticket_id})
            if escalation := past_sla(ticket):
                await self._gate.flush()
                await self._trail.write(f"escalated to a person: {escalation}")
                return self._outcome(
                    Status.ESCALATED,
                    0,
                    "Your ticket has waited longer than we promised, so a colleague is taking it over.",
                )
        try:
            outcome = await self._until_closed(carried)
        except asyncio.CancelledError:
            outcome = await self._cancelled()
        self._replies.close("it is closed")
        await self._within_budgets()
        outcome = outcome.model_copy(update=self._records())
        await self._gate.flush()
        await self._trail.write_notes()
        refunded = sum(r.amount_cents for r in outcome.refunds)
        currencies = {r.currency for r in outcome.refunds}
        total = spelled(refunded, currencies.pop() if len(currencies) == 1 else None)
        closing = f"closed as {outcome.status.value} after {outcome.steps} steps"
        if outcome.unanswered is not None:  # no refund was made at all
            await self._trail.close(f"{closing}: {outcome.unanswered}")
        else:
            await self._trail.close(f"{closing}; refunded {total}")
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
        what came of it, once it has: "approved; Refunded USD 49.00 on order A-1001 (refund #12)."."""
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
        reply is taken, with the turn that will read it. A reply verified to come from the customer verifies an
        unverified ticket's sender, before the turn that reads it."""
        receipt = self._replies.take(args)
        reply = CustomerMessage.model_validate(args[0])
        if reply.sender_verified:
            self._tools.verify_sender()
        self._tools.replied(reply)
        return receipt

    @customer_message.validator
    def _may_take(self, *args: Any) -> None:
        """Refuse, before anything is recorded, a reply the ticket cannot take: it is closed or cancelled, or the
        reply is not one object with a non-empty ``text``, or it is not verified and the ticket's customer is:
        nothing of it reaches the model."""
        self._replies.check(args, customer_verified=self._customer_verified())

    @workflow.update(name=VERIFY_SENDER)
    async def verify_sender(self, *args: Any) -> str:
        """A person has verified that the customer is who the ticket says (``SenderVerification``): the tools may
        touch the customer's orders from the next call on. Recorded in the audit trail with who said so."""
        verification = SenderVerification.model_validate(args[0])
        if not self._tools.verify_sender():
            return "The ticket's customer was verified already."
        await self._trail.write(f"the customer {self._ticket.customer_email} verified by {verification.by}")
        return f"The ticket's customer is verified by {verification.by}."

    @verify_sender.validator
    def _may_verify(self, *args: Any) -> None:
        """Refuse at once what could change nothing: no ticket, a closed one, or not one ``{"by": ...}``."""
        if self._intake.ticket is None or self._replies.closed is not None:
            raise ValueError("This ticket is closed: there is nobody left to verify.")
        if len(args) != 1:
            raise ValueError(f'A verification is one JSON object, {{"by": "..."}}; got {len(args)} arguments.')
        try:
            SenderVerification.model_validate(args[0])
        except ValidationError as error:
            raise ValueError(f"Invalid verification: {describe_errors(error)}") from None

    @workflow.signal(name=CUSTOMER_MESSAGE)
    def customer_message_signalled(self, *args: Any) -> None:
        """The same reply as a signal, for relays that can only signal: what it cannot take is audited. A reply
        marked verified verifies the customer, as the update's does."""
        reply = self._replies.take_signalled(args, customer_verified=self._customer_verified())
        if reply is not None and reply.sender_verified:
            self._tools.verify_sender()
        if reply is not None:
            self._tools.replied(reply)

    def _customer_verified(self) -> bool:
        """Whether the ticket's customer is verified (by the caller's word, a person, or a verified reply)."""
        return self._intake.ticket is not None and self._tools.sender_verified

    @workflow.signal(name=MAIL_BOUNCED)
    def mail_bounced(self, *args: Any) -> None:
        """The customer's mail server refused the desk's email for good (``MailBounce``): no more mail goes to the
        address, and the audit trail is told, as it is of one that cannot be read or is not this customer's (each
        a note, ``Notes``: the trail takes them with the run's other notes, within their bound)."""
        try:
            bounce = MailBounce.model_validate(args[0] if len(args) == 1 else None)
        except ValidationError as error:
            self._bounces.add(f"a bounce was not taken: {describe_errors(error)}")
            return
        if self._intake.ticket is None or not same_address(bounce.address, self._ticket.customer_email):
            self._bounces.add(f"a bounce for {bounce.address}, not this ticket's customer, was not taken")
            return
        why = f"{bounce.status} {bounce.diagnostic}".strip()
        if self._tools.bounced(why):
            self._bounced.add(f"the customer's address {bounce.address} bounced the desk's email: {why}")

    @workflow.signal(name=ORDER_EVENT_SIGNAL)
    def order_event(self, *args: Any) -> None:
        """Something another system reports about an order (``OrderEvent``), kept until a wait takes it."""
        self._events.receive(args)

    @workflow.signal(name=WAKE_SIGNAL)
    def wake(self, *_args: Any) -> None:
        """Nothing but a workflow task: a waiting ticket, woken, asks whether its Worker Deployment has a new target
        build for it, and if so moves there (``Continuation.retargeted``). Any arguments are ignored."""

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
        as new keeps its earlier runs' in the content store, under ``Outcome.archive_ref``). None for a run whose
        input could not be read."""
        return self._model.usage if self._intake.ticket is not None else UsageReport()

    async def _until_closed(self, carried: ContinuedState | None) -> Outcome:
        """The ticket's turns until it closes; or, where this run has done its share (``HandOver``: the loop at its
        budget of model calls, a long wait the server asks to end), the ticket handed to a new run."""
        try:
            return await self._converse(carried)
        except HandOver as handover:
            await self._continue_as_new(handover)

    async def _converse(self, carried: ContinuedState | None) -> Outcome:
        """The ticket's turns: the question, answered, then each reply of the customer's while the ticket stays
        open for them (``reply_window_seconds``), answered over the whole conversation with the same rules, keys
        and approvals. Steps are numbered across turns, so no two calls of the ticket share a key.

        ``messages`` holds only what the model has not been sent yet; the conversation so far is in the content
        store, under the model's key, so each step adds about the same bytes to the history."""
        window = self._ticket.options.reply_window_seconds
        if carried is None:
            messages, first = [Message.user_text(self._ticket.question)], 1
        else:  # first the calls of the step the last run was in the middle of (a refund waiting for approval)
            messages, first = list(carried.pending), carried.steps_taken + 1
            if results := await self._tools.resume(carried.steps_taken):
                append_turn(messages, "user", list(results))
        if carried is not None and carried.replies.until is not None:  # it continued while it waited for a reply
            last = self._replies.turns[-1]
            outcome = self._outcome(last.status, last.last_step, last.answer)
        else:
            outcome, messages = await self._turn(first, messages)
        while True:
            await self._within_budgets()
            if self._replies.closes_after(outcome, window):
                return outcome
            await self._trail.write_notes()
            reply = await self._replies.wait(window, self._continuation)
            if reply is None:
                return outcome
            first = outcome.steps + 1
            self._replies.open(reply, first)
            self._tools.turn_begins()  # what the turn pays and what people answer in it are its own
            self._gate.turn_begins()
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
        options = self._ticket.options
        last = self._replies.first_step + options.max_steps - 1
        for step in range(first, last + 1):
            if self._model.should_summarize():
                messages = await self._model.summarize(step, messages)
            if self._continuation.should_continue(options.continue_as_new_after_steps):
                raise HandOver(step - 1, messages)
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
            self._continuation.stepped(step)
            if handed_over := await self._hands_over(step, decision.stop_reason):
                return handed_over, messages
            messages = []  # the model's key names the conversation with this answer in it
            if decision.stop_reason == "max_tokens":
                results = [self._tools.answer_call(step, call, CUT_OFF, is_error=True) for call in decision.tool_calls]
                append_turn(messages, "user", [*results, TextBlock(text=CUT_OFF)])
                continue
            if decision.stop_reason == "pause_turn" and not decision.tool_calls:
                continue
            if not decision.tool_calls:
                status = self._refused_as(this_turn=True) or Status.RESOLVED
                return self._outcome(status, step, decision.text), messages
            append_turn(messages, "user", list(await self._tools.use_all(step, decision.tool_calls)))
            await self._within_budgets()
        gave_up = f"Gave up after {options.max_steps} steps. A person will take this ticket over."
        return self._outcome(Status.GAVE_UP, last, gave_up), messages

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
        self._replies.close(f"it was cancelled ({reason})")
        workflow.logger.info("ticket cancelled", extra={"reason": reason})
        await self._trail.write(f"cancelled: {reason}")
        return self._outcome(
            Status.CANCELLED, self._continuation.step, f"This ticket was cancelled ({reason}). A person will follow up."
        )

    def _refused_as(self, *, this_turn: bool = False) -> Status | None:
        """How an answered ticket ends if a refund was refused and none was made instead (on the ticket, or in this
        turn): ``declined`` where a person declined one, ``unanswered`` where one only waited past its deadline;
        None if none was refused."""
        refunds = self._tools.refunds_this_turn if this_turn else self._tools.refunds
        if refunds or not self._gate.refused(this_turn=this_turn):
            return None
        if self._gate.unanswered(this_turn=this_turn) is not None:
            return Status.UNANSWERED
        return Status.DECLINED

    # --- continuing as a new run ---

    async def _continue_as_new(self, handover: HandOver) -> NoReturn:
        """Hand everything to a new run of this ticket: same workflow id, a fresh history, and each piece's
        snapshot of its state."""
        self._handing_over = True  # an ``approve`` update waiting for its refund returns: the next run pays
        await workflow.wait_condition(workflow.all_handlers_finished)
        await self._gate.flush()  # the next run carries the answers as records, already in the audit trail
        await self._continuation.archive(self._tools.archived(), self._model.archived())
        await self._trail.write_notes()
        # An answer that came while those were written is carried as a record the next run takes as audited:
        # write it first, and hand over only once nothing is running and nothing is unwritten. From that check to
        # ``continue_as_new`` nothing awaits, so no handler runs in between.
        while not (workflow.all_handlers_finished() and self._gate.written()):
            await workflow.wait_condition(workflow.all_handlers_finished)
            await self._gate.flush()
            await self._trail.write_notes()
        state = ContinuedState(
            steps_taken=handover.steps_taken,
            pending=handover.pending,
            archive_ref=self._continuation.archive_ref,
            audit=self._trail.snapshot(),
            model=self._model.snapshot(),
            gate=self._gate.snapshot(),
            toolbox=self._tools.snapshot(),
            replies=self._replies.snapshot(),
            events=self._events.snapshot(),
            moving=not handover.at_rest and self._continuation.retargeted(),
        )
        # Handed over at rest, with a new target build: the next run starts there (``AUTO_UPGRADE`` until its first
        # task, then pinned to it). Otherwise it inherits this run's build, so a turn ends on the code that began it,
        # and moves at its next wait (``moving``).
        moves = handover.at_rest and self._continuation.retargeted()
        extra = {"steps": handover.steps_taken, "moves": moves}
        workflow.logger.info("ticket continues as a new run", extra=extra)
        workflow.continue_as_new(
            args=[self._ticket, state],
            memo=self._gate.memo(),
            initial_versioning_behavior=ContinueAsNewVersioningBehavior.AUTO_UPGRADE if moves else None,
        )

    def _restore(self, carried: ContinuedState) -> None:
        """Each piece takes over its own state from the run this one continues."""
        self._continuation.resume(carried.steps_taken, carried.archive_ref, moving=carried.moving)
        self._trail.restore(carried.audit)
        self._model.restore(carried.model)
        self._gate.restore(carried.gate)
        self._tools.restore(carried.toolbox)
        self._replies.restore(carried.replies)
        self._events.restore(carried.events)

    async def _within_budgets(self) -> None:
        """Hand the oldest turns, or the tool calls and per-call usage, to the content store once they outgrow
        what the outcome and the ``turns`` query may carry (``INLINE_TURNS_BYTES``, ``INLINE_RECORDS_BYTES``), as
        a run continuing as new hands its records."""
        turns = self._replies.overflow()
        records = encoded_bytes(self._tools.tool_calls) + encoded_bytes(self._model.usage.steps) > INLINE_RECORDS_BYTES
        if records:
            await self._continuation.archive(self._tools.archived(), self._model.archived(), turns)
        elif turns:
            await self._continuation.archive([], [], turns)

    def _records(self) -> Records:
        """What the outcome carries of the records that go to the content store past their budgets."""
        return Records(
            tool_calls=self._tools.tool_calls,
            usage=self._model.usage,
            turns=self._replies.turns,
            archive_ref=self._continuation.archive_ref,
        )

    def _outcome(self, status: Status, steps: int, answer: str) -> Outcome:
        """How the ticket stands with this answer: the turn in progress ends with it, as ``status``. An answered
        ticket is ``declined`` if a person refused a refund on it and none was made, whichever turn it was in (a
        customer who says thanks after a decline has still not had the money), ``unanswered`` if nobody answered
        one in time and none was made."""
        workflow.logger.info("ticket answered", extra={"status": status.value, "steps": steps})
        answer = cut(answer, ANSWER_BYTES)  # the whole answer is in the conversation
        replies = self._replies
        if replies.working:
            replies.answered(
                Turn(
                    message=replies.message,
                    answer=answer,
                    status=status,
                    first_step=replies.first_step,
                    last_step=steps,
                )
            )
        if status in {Status.RESOLVED, Status.DECLINED, Status.UNANSWERED}:
            status = self._refused_as() or Status.RESOLVED
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
            unanswered=self._gate.unanswered() if status is Status.UNANSWERED else None,
            **self._records(),
        )
