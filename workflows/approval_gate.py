"""The approval gate: a refund above the ticket's limit waits here until a person answers, or time runs out.

A model can be talked into a large refund, so whether one needs a person is decided in code, and so is what
an answer releases: the rules are ``workflows.approval_rules``, pure logic kept apart from Temporal so that it
can be tested over every interleaving. This module is their Temporal side: the answers arrive as signals at
any time, the deadline is a durable timer, the request is visible to the ``awaiting_approval_of`` query and to
the ``AwaitingApprovalCents`` search attribute for as long as it waits and not a moment longer, every answer
goes to the audit trail, and a wait can outlast a run (a day, by default), so it carries over to the run that
continues the ticket with the same request, the same deadline, and an answer already received.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.common import SearchAttributeKey
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic import NonNegativeInt, ValidationError

    from activities.contracts.approvals import (
        AnsweredRequest,
        Approval,
        ApprovalDecision,
        ApprovalReceipt,
        ApprovalRecord,
        ApprovalRequest,
        Settlement,
        VouchedApproval,
        VouchRequest,
    )
    from activities.contracts.fields import Snapshot, amount, describe_errors
    from activities.contracts.limits import REJECTED_ANSWERS_KEPT, SETTLEMENTS_SHOWN
    from activities.contracts.names import APPROVAL_REQUEST_MEMO, AWAITING_APPROVAL_ATTRIBUTE, SETTLED_MEMO
    from activities.contracts.ticket import TicketOptions
    from activities.policy_activities import PolicyActivities
    from workflows import timeouts
    from workflows.approval_rules import ApprovalDesk, Ask, spelled

from workflows.audit_log import Audit, Audited, Notes
from workflows.failures import ToolError
from workflows.handing_over import Continuation
from workflows.rules import Rules

AWAITING_APPROVAL = SearchAttributeKey.for_int(AWAITING_APPROVAL_ATTRIBUTE)


class GateSnapshot(Snapshot):
    """What a run hands the next of the gate: every answer so far, and the request waiting with the answer that
    decided it, if any (checked again by the next run against the audit trail, not believed). Who may answer is
    the waiting request's, and for a later request the rules', read anew: not carried a second time."""

    approvers: list[str] = []
    """Written empty since 1.1.0 and read by nobody: kept so that a run of 1.0.0, which wrote the approvers here,
    continues into this worker, and one of this worker into a 1.0.0 worker."""
    records: list[ApprovalRecord] = []
    waiting: ApprovalRequest | None = None
    decided: ApprovalRecord | None = None
    requests_made: NonNegativeInt = 0
    unlisted: NonNegativeInt = 0
    """Rejected answers audited but not listed in ``records`` (past their budget)."""
    records_before_turn: NonNegativeInt = 0
    """Records before the turn in progress (``ApprovalGate.turn_begins``)."""

    newer = frozenset({"records_before_turn"})  # 1.4.0: runs before kept it as the replies' ``approvals_before``


class ApprovalGate:
    """The Temporal side of the approval rules: the request waiting (at most one at a time), the timer, the
    search attribute, and the audit trail of every answer. Given the audit trail to write to, and the run's
    continuation to hand a long wait to."""

    def __init__(self, audit: Audit, audited: Audited, continuation: Continuation) -> None:
        self._audit = audit
        self._audited_entry = audited
        self._continuation = continuation
        self.desk = ApprovalDesk()
        self._audited = 0
        """How many of the desk's records are in the audit trail."""
        self._records_before_turn = 0
        """How many of them came before the turn in progress (``turn_begins``)."""
        self._counted = 0
        """How many of them the ``agent_approvals`` metric has counted."""
        self._inbox: list[tuple[Sequence[Any], datetime]] | None = []
        """Answers that arrived before the run had read its ticket and what the last run handed over: they
        are judged once it has, in the order they came (None from then on)."""
        self._carried: tuple[ApprovalRequest, ApprovalRecord | None] | None = None
        """The request the last run waited on, and the answer that decided it, until ``ready`` takes them over."""
        self.unlisted = 0
        """Rejected answers past ``REJECTED_ANSWERS_KEPT``: audited (``_unlisted``), counted, not in the records."""
        self._unlisted = Notes("rejected answers to approval requests")
        self._requests: dict[str, ApprovalRequest] = {}
        """The requests this run waited on, by id: what an answer's row for auditors says of its request."""
        self._digest: str | None = None
        """The money policy the last request waited under, for the rows of its answers."""
        self.results: dict[str, str] = {}
        """What came of each request this run decided, as the model was told it: what the ``approve`` update
        waits for, to tell the person who answered."""

    @property
    def awaiting(self) -> ApprovalRequest | None:
        return self.desk.waiting

    @property
    def records(self) -> list[ApprovalRecord]:
        return self.desk.records

    def receive(self, args: Sequence[Any]) -> None:
        """A signal's arguments, however many and whatever they hold: an answer is judged by the rules at
        the workflow time it is seen, and recorded whatever it is."""
        if self._inbox is not None:
            self._inbox.append((args, workflow.now()))
            return
        self._judge(args, workflow.now())

    async def ready(self) -> None:
        """The run has read its ticket and what the last run handed over: take over the request that waited
        then, so that answers are judged against it from now on, and judge the answers that came meanwhile. An
        answer handed over with the request counts only if the last run's audit trail holds it: carried state
        is checked, not believed."""
        if self._carried is not None:
            (request, decided), self._carried = self._carried, None
            audited = decided is None or await self._audited_entry(describe(decided, request))
            self.desk.resume(request, decided, workflow.now(), audited=audited)
        inbox, self._inbox = self._inbox or [], None
        for args, at in inbox:
            self._judge(args, at)

    def check_vouched(self, args: Sequence[Any]) -> None:
        """The ``approve`` update's validator: ``ValueError`` saying why, for an answer that would release nothing.
        Before ``ready`` the request the last run handed over is not taken over yet, so the answer is judged once it
        is (``answer_vouched`` waits), not refused as about no request."""
        if len(args) != 1:
            raise ValueError(f"An answer is one JSON object; got {len(args)} arguments.")
        try:
            answer = VouchedApproval.model_validate(args[0])
        except ValidationError as error:
            raise ValueError(f"Invalid answer: {describe_errors(error)}") from None
        if self._inbox is not None:
            return
        if reason := self.desk.why_not(answer, workflow.now(), channel="web", for_people=True):
            raise ValueError(f"rejected: {reason}")

    async def answer_vouched(
        self, payload: Any, *, closed: Callable[[], bool], handing_over: Callable[[], bool]
    ) -> ApprovalReceipt:
        """The ``approve`` update (its validator let it through): the answer counts only if the inbox's signature
        checks, and the person is told what came of the refund once it has, or that the ticket closed, or went
        on in a new run, first."""
        if self._inbox is not None:  # the first task of a continued run: judged against the request it takes over
            await workflow.wait_condition(lambda: self._inbox is None)
        at = workflow.now()
        answer = VouchedApproval.model_validate(payload)
        check = VouchRequest(workflow_id=workflow.info().workflow_id, answer=answer)
        vouched = await workflow.execute_activity_method(PolicyActivities.vouched, check, **timeouts.attempt("vouched"))
        record = self.receive_vouched(answer, at, vouched=vouched)
        if record.decision is ApprovalDecision.REJECTED:
            raise ApplicationError(f"rejected: {record.reason}", type="ApprovalRejected", non_retryable=True)
        request_id = record.request_id or ""
        if record.decision is ApprovalDecision.PARTLY_APPROVED:
            return ApprovalReceipt(
                request_id=request_id,
                decision=record.decision,
                result=f"Approval {record.reason} recorded; nothing is paid until another person approves.",
            )
        await workflow.wait_condition(lambda: request_id in self.results or closed() or handing_over())
        result = self.results.get(request_id) or (
            "The ticket continues in a new run, which acts on the answer."
            if handing_over()
            else "The ticket closed before the refund was made."
        )
        return ApprovalReceipt(request_id=request_id, decision=record.decision, result=result)

    def receive_vouched(self, answer: VouchedApproval, at: datetime, *, vouched: bool) -> ApprovalRecord:
        """An answer the approval inbox sent (the ``approve`` update), seen at ``at``, and whether the inbox's
        signature checked: judged by the same rules as a signal, recorded as ``web``, or rejected unchecked."""
        approval = answer.model_dump(exclude={"signature"})
        if vouched:
            record = self.desk.receive([approval], at, channel="web")
        else:
            why = "the approval inbox's signature does not check: not sent by the inbox, or for another answer"
            record = self.desk.reject(Approval.model_validate(approval), why, at, channel="web")
        self._log(record)
        return record

    def _judge(self, args: Sequence[Any], at: datetime) -> None:
        self._log(self.desk.receive(args, at))

    def _log(self, record: ApprovalRecord) -> None:
        if record.decision is ApprovalDecision.REJECTED:
            workflow.logger.warning(
                "approval released nothing", extra={"reason": record.reason, "approver": record.approver}
            )
        self._count()
        if record.decision is ApprovalDecision.PARTLY_APPROVED and self.desk.waiting is not None:
            # Visibility shows who has approved so far, with no worker to query.
            workflow.upsert_memo({APPROVAL_REQUEST_MEMO: self.desk.waiting.model_dump(mode="json")})
        if record.decision is ApprovalDecision.REJECTED and self._past_budget():
            # The record is the desk's last, not yet audited: the audit trail gets it as a note instead.
            self.desk.forget_rejected()
            self._counted -= 1
            self.unlisted += 1
            self._unlisted.add(describe(record, self._request_of(record)))

    def _past_budget(self) -> bool:
        """Whether the rejected answers listed exceed ``REJECTED_ANSWERS_KEPT``: a flood of bad signals must not
        grow the outcome, or what a run hands the next, without bound."""
        rejected = sum(r.decision is ApprovalDecision.REJECTED for r in self.desk.records)
        return rejected > REJECTED_ANSWERS_KEPT

    async def wait(  # noqa: PLR0913 - the refund, and the rules it waits under
        self,
        amount_cents: int,
        order_id: str,
        options: TicketOptions,
        rules: Rules,
        *,
        customer: str,
        why: str,
        ask: Ask,
        currency: str | None = None,
        noun: str = "refund",
    ) -> str:
        """Wait for a person to approve this amount, and return the request's id; raise the refusal the model
        must hear otherwise. ``ask`` says who may answer and how many (``approval_rules.decide``); ``rules``
        say by when (the policy's, tightened by the ticket). ``customer`` may not answer,
        and ``why`` the refund waits is shown with the request, which calls it ``noun`` (its tool's declared one)."""
        resumed = self._resume(amount_cents)
        if not resumed:
            deadline = workflow.now() + timedelta(seconds=rules.timeout_seconds)
            self.desk.open(
                amount_cents,
                order_id,
                deadline,
                list(ask.approvers),
                needed=ask.people,
                signed_in_only=ask.signed_in_only,
                customer_email=customer,
                why=why,
                opened_at=workflow.now(),
                currency=currency,
                identity="mailbox",
                payout=noun,
            )
        request = self.desk.waiting
        assert request is not None
        self._requests[request.request_id], self._digest = request, rules.digest
        workflow.upsert_search_attributes([AWAITING_APPROVAL.value_set(amount_cents)])
        workflow.upsert_memo({APPROVAL_REQUEST_MEMO: request.model_dump(mode="json")})
        if not resumed:  # the run this one continues wrote it already
            until = f"request {request.request_id}, answer by {request.deadline:%Y-%m-%d %H:%M:%S} UTC"
            await self._audit(f"{request.payout} of {spelled(amount_cents, currency)} waits for approval ({until})")
        try:
            await self._wait_for_answer(request, options)
        except TimeoutError:  # silence is an answer too: no
            self.desk.expire(workflow.now())
        except asyncio.CancelledError:
            self._leave()
            raise
        # Not in a ``finally``: continue-as-new raises through here (having cleared it), and a run evicted
        # from the worker's cache while it waits is closed with GeneratorExit, when a workflow call would run
        # outside the workflow's event loop.
        self._leave()
        decision = self.desk.close()
        self._count()
        await self.flush()
        if refused := _refusal(decision, request.payout):
            self.settled(request.request_id, refused)
            raise ToolError(refused)
        return request.request_id

    async def refuse(self, amount_cents: int, currency: str | None, why: str, noun: str = "refund") -> NoReturn:
        """A payout no answer could make payable (``approval_rules.Refused``): refused at once, audited, nobody asked.
        A request the last run handed over for it waits no more."""
        if self._resume(amount_cents):
            self.desk.abandon()
            self._leave()
        said = spelled(amount_cents, currency)
        await self._audit(f"{noun} of {said} refused without asking anyone: {why}")
        raise ToolError(f"This {noun} of {said} was not made, and no person was asked: {why}.")

    def settled(self, request_id: str, result: str, money: Settlement | None = None) -> None:
        """What came of a request's refund, for the person who answered it through the ``approve`` update; and, for an
        approved one whose payment was tried, what the money did (``money``), in the memo, where ``agent-worker
        approve``, ``show`` and the inbox read it, with no worker needed. It is written in the workflow task that
        completes the ``approve`` update, so whoever reads the receipt finds it there."""
        self.results[request_id] = result
        if money is not None:
            told = [*_settled_so_far(), money.model_dump(mode="json")][-SETTLEMENTS_SHOWN:]
            workflow.upsert_memo({SETTLED_MEMO: told})

    def memo(self) -> dict[str, Any] | None:
        """What the run that continues the ticket starts its memo with: the settlements told so far, which the server
        does not carry over by itself (None: nothing to carry)."""
        told = _settled_so_far()
        return {SETTLED_MEMO: told} if told else None

    def written(self) -> bool:
        """Whether every answer received, and every note of one past the budget, is in the audit trail."""
        return self._audited == len(self.desk.records) and not len(self._unlisted)

    async def flush(self) -> None:
        """Write every answer not yet in the audit trail, in the order received."""
        while self._audited < len(self.desk.records):
            record = self.desk.records[self._audited]
            self._audited += 1
            await self._audit(describe(record, self._request_of(record)), self._answered(record))
        while (note := self._unlisted.take()) is not None:
            await self._audit(note)

    def _request_of(self, record: ApprovalRecord) -> ApprovalRequest | None:
        """The request an answer is about, as this run knows it (None: not known)."""
        waiting = self.desk.waiting
        request = self._requests.get(record.request_id or "") or waiting
        return request if request is not None and request.request_id == record.request_id else None

    def _answered(self, record: ApprovalRecord) -> AnsweredRequest | None:
        """The row for auditors of an answer that counted: None for a rejected one, which the audit trail's words
        keep."""
        decision = record.decision
        if decision is ApprovalDecision.REJECTED or record.request_id is None:
            return None
        request = self._request_of(record)
        asked = request.amount_cents if request else None
        timed_out = decision is ApprovalDecision.TIMED_OUT
        return AnsweredRequest(
            workflow_id=workflow.info().workflow_id,
            request_id=record.request_id,
            decision=decision,
            approver=None if timed_out else record.approver,
            channel=None if timed_out else record.channel,
            at=record.at,
            amount_cents=record.amount_cents if record.amount_cents is not None else asked,
            currency=request.currency if request else None,
            order_id=request.order_id if request else "",
            customer_email=request.customer_email if request else "",
            reason=record.reason,
            policy_digest=self._digest,
        )

    async def _wait_for_answer(self, request: ApprovalRequest, options: TicketOptions) -> None:
        """Wait for the person until the request's deadline (raise ``TimeoutError`` then). A run that is due
        to continue as new does so first, and one the server asks to continue while it waits does so then:
        the next run waits on for the same request until the same deadline, and answers the same query."""
        if self.desk.decision is None and self._continuation.should_continue(options.continue_as_new_after_steps):
            self._hand_over()
        if request.deadline <= workflow.now():
            raise TimeoutError
        answered = await self._continuation.wait(
            lambda: self.desk.decision is not None,
            request.deadline,
            leaving=self._leave,  # the closed run must not be listed as waiting beside the one that waits on
        )
        if not answered:
            raise TimeoutError

    def _hand_over(self) -> NoReturn:
        self._leave()  # the closed run must not be listed as waiting beside the one that waits on
        self._continuation.continue_waiting()

    def _leave(self) -> None:
        """Nothing waits any more, as far as visibility can tell: cleared on every way out of a wait."""
        workflow.upsert_search_attributes([AWAITING_APPROVAL.value_unset()])
        workflow.upsert_memo({APPROVAL_REQUEST_MEMO: None})

    def _resume(self, amount_cents: int) -> bool:
        """Take over the request the last run was waiting on, if this is the refund it was for."""
        waiting = self.desk.waiting
        if waiting is not None:  # taken over in ``ready``
            if waiting.amount_cents == amount_cents:
                return True
            self.desk.abandon()  # not this refund's: it cannot be answered any more
        return False

    def turn_begins(self) -> None:
        """A reply begins a turn: its answers are judged from here (``refused``, ``unanswered``)."""
        self._records_before_turn = len(self.desk.records)

    def _judged(self, *, this_turn: bool) -> list[ApprovalRecord]:
        return self.desk.records[self._records_before_turn :] if this_turn else self.desk.records

    def refused(self, *, this_turn: bool = False) -> bool:
        """Whether a person declined a refund, or let one time out (on the ticket, or in this turn)."""
        refused = {ApprovalDecision.DECLINED, ApprovalDecision.TIMED_OUT}
        return any(a.decision in refused for a in self._judged(this_turn=this_turn))

    def unanswered(self, *, this_turn: bool = False) -> str | None:
        """What nobody answered, if a request timed out and no person declined one (on the ticket, or in this
        turn): "request R1: nobody answered by 2026-12-01 09:14 UTC; the refund of USD 49.00 was not made". None
        where a person declined, or nothing timed out."""
        records = self._judged(this_turn=this_turn)
        if any(a.decision is ApprovalDecision.DECLINED for a in records):
            return None
        timed_out = [a for a in records if a.decision is ApprovalDecision.TIMED_OUT]
        if not timed_out:
            return None
        record = timed_out[-1]
        request = self._request_of(record)
        noun, currency = (request.payout, request.currency) if request is not None else ("refund", None)
        by = request.deadline if request is not None else record.at
        units = record.amount_cents if record.amount_cents is not None else (request.amount_cents if request else 0)
        return (
            f"request {record.request_id}: nobody answered by {by:%Y-%m-%d %H:%M} UTC; the {noun} of "
            f"{amount(units, currency)} was not made"
        )

    def restore(self, snapshot: GateSnapshot) -> None:
        """Take over the records, and a wait (with any answer to it) from the run continued; the
        wait is taken over in ``ready``, once the answer handed over with it has been checked."""
        self.desk.take_over(snapshot.records, snapshot.requests_made)
        self._audited = self._counted = len(self.desk.records)
        self.unlisted = snapshot.unlisted
        self._records_before_turn = snapshot.records_before_turn
        if snapshot.waiting is not None:
            self._carried = (snapshot.waiting, snapshot.decided)

    def snapshot(self) -> GateSnapshot:
        return GateSnapshot(
            records=self.desk.records,
            waiting=self.desk.waiting,
            decided=self.desk.decision,
            requests_made=self.desk.requests_made,
            unlisted=self.unlisted,
            records_before_turn=self._records_before_turn,
        )

    def _count(self) -> None:
        """Count new records in the metric: metrics from workflow code are not emitted while replaying."""
        counter = workflow.metric_meter().create_counter("agent_approvals", "Answers about refunds, by decision", "1")
        for record in self.desk.records[self._counted :]:
            counter.add(1, {"decision": record.decision.value})
        self._counted = len(self.desk.records)


def _settled_so_far() -> list[dict[str, Any]]:
    """The settlements the run's memo tells (``SETTLED_MEMO``), oldest first."""
    return [s for s in workflow.memo_value(SETTLED_MEMO, [], type_hint=list) if isinstance(s, dict)]


def _refusal(decision: ApprovalRecord, noun: str) -> str | None:
    """What the model is told of a request for a ``noun`` that was not approved; None if it was."""
    if decision.decision is ApprovalDecision.TIMED_OUT:
        return f"A person did not approve this {noun} in time, so it was not made."
    if decision.decision is ApprovalDecision.DECLINED:
        because = f" Their reason: {decision.reason}" if decision.reason else ""
        return f"A person ({decision.approver}) declined this {noun}, so it was not made.{because}"
    return None


def describe(record: ApprovalRecord, about: ApprovalRequest | None = None) -> str:
    """An answer as the audit trail reads it: one the approval inbox vouched for says so, one signalled does not
    (its approver is as the sender claimed). The payout named as ``about`` (the request answered) calls it, amounts
    in its currency; a refund, in bare amounts, where the request is not known. A run checks that the trail holds
    what the run before wrote by this text, so for a request it never changes."""
    request = f"request {record.request_id}: " if record.request_id else ""
    via = " (signed in, approval inbox)" if record.channel == "web" else ""
    noun, currency = (about.payout, about.currency) if about is not None else ("refund", None)
    amount = f"{noun} of {spelled(record.amount_cents, currency)}" if record.amount_cents is not None else noun
    if record.decision is ApprovalDecision.TIMED_OUT:
        return f"{request}{amount} timed out: nobody answered before the deadline"
    if record.decision is ApprovalDecision.REJECTED:
        return f"{request}answer from {record.approver or 'an unknown sender'} rejected: {record.reason}"
    if record.decision is ApprovalDecision.PARTLY_APPROVED:
        return f"{request}{amount} approved by {record.approver}{via}: {record.reason}, nothing paid yet"
    because = f": {record.reason}" if record.decision is ApprovalDecision.DECLINED and record.reason else ""
    return f"{request}{amount} {record.decision.value} by {record.approver}{via}{because}"
