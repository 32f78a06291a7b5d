"""The approval gate: a refund above the ticket's limit waits here until a person answers, or time runs out.

A model can be talked into a large refund, so whether one needs a person is decided in code, and so is what
an answer releases: only the refund of the amount the person was shown, only once, and only if they may
approve refunds on this ticket. The answer arrives as a signal, at any time; everything it did or failed to
release is recorded for the outcome. A wait can outlast a run (a day, by default), so it carries over to the
run that continues the ticket with the same amount and the same deadline, and an answer already received.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeKey

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError

    from activities.contracts import (
        AWAITING_APPROVAL_ATTRIBUTE,
        Approval,
        ApprovalDecision,
        ApprovalRecord,
        ContinuedState,
        TicketOptions,
        describe_errors,
        money,
    )
    from activities.policy import PolicyActivities
    from workflows import policies

from workflows.continuation import Continuation
from workflows.failures import ToolError

AWAITING_APPROVAL = SearchAttributeKey.for_int(AWAITING_APPROVAL_ATTRIBUTE)

APPROVER_CHECK = "approver-check"
"""Patch: only the ticket's approvers (or the worker's default ones) may release a refund. Runs that were
already waiting before it keep accepting anyone, as they were promised."""

Audit = Callable[[str], Awaitable[None]]
"""Write an entry to the ticket's audit trail."""


class ApprovalGate:
    """The refund waiting for a person (at most one at a time), the answer to it, who may answer, and the
    record of every answer. Given the audit trail to write to, and the run's continuation to hand a long
    wait to."""

    def __init__(self, audit: Audit, continuation: Continuation) -> None:
        self._audit = audit
        self._continuation = continuation
        self.awaiting: int | None = None
        self.answer: Approval | None = None
        self.records: list[ApprovalRecord] = []
        self.approvers: list[str] | None = None
        self._carried_wait: tuple[int, datetime] | None = None

    def approve(self, raw_approval: Any) -> None:
        """A person's answer. It releases only the refund of the amount they were shown, and only once.

        The payload is validated here rather than by the converter: a payload that fails to decode is
        dropped by the SDK with nothing but a log line, while this records why it released nothing."""
        try:
            approval = Approval.model_validate(raw_approval)
        except ValidationError as error:
            self._reject(None, None, f"malformed approval: {describe_errors(error)}")
            return
        if self.awaiting is None:
            self._reject(approval.amount_cents, approval.approver, "no refund is waiting for approval")
        elif approval.amount_cents != self.awaiting:
            self._reject(
                approval.amount_cents,
                approval.approver,
                f"the refund waiting is {money(self.awaiting)}, not {money(approval.amount_cents)}",
            )
        elif self.approvers and approval.approver not in self.approvers:
            self._reject(
                approval.amount_cents, approval.approver,
                f"{approval.approver} may not approve refunds on this ticket (approvers: {', '.join(self.approvers)})",
            )  # fmt: skip
        else:
            self.answer = approval

    async def wait(self, amount_cents: int, options: TicketOptions) -> None:
        """Wait for a person to approve this amount; raise the refusal the model must hear otherwise."""
        if workflow.patched(APPROVER_CHECK) and self.approvers is None:
            self.approvers = options.approvers
            if self.approvers is None:
                self.approvers = await workflow.execute_activity_method(
                    PolicyActivities.default_approvers, **policies.DEFAULT_APPROVERS
                )
        timeout = timedelta(seconds=options.approval_timeout_seconds)
        carried, self._carried_wait = self._carried_wait, None
        resumed = carried is not None and carried[0] == amount_cents
        deadline = carried[1] if carried is not None and resumed else workflow.now() + timeout
        self.awaiting = amount_cents
        if not resumed:  # an answer the last run received is kept
            self.answer = None
        workflow.upsert_search_attributes([AWAITING_APPROVAL.value_set(amount_cents)])
        if not resumed:  # the run this one continues wrote it already
            await self._audit(f"refund of {money(amount_cents)} waits for approval")
        with contextlib.suppress(TimeoutError):  # silence is an answer too: no
            await self._wait_for_answer(amount_cents, deadline, options)
        # Not in a ``finally``: continue-as-new raises through here (the next run waits on, with the attribute
        # set), and a run evicted from the worker's cache while it waits is closed with GeneratorExit, when a
        # workflow call would run outside the workflow's event loop.
        workflow.upsert_search_attributes([AWAITING_APPROVAL.value_unset()])
        self.awaiting = None
        answer, self.answer = self.answer, None  # consumed: a second refund needs a second approval
        await self._audit(
            f"refund of {money(amount_cents)} "
            + (f"{'approved' if answer.approved else 'declined'} by {answer.approver}" if answer else "timed out")
        )
        if answer is None:
            self._record(amount_cents, ApprovalDecision.TIMED_OUT, None, f"no answer within {timeout}")
            raise ToolError("A person did not approve this refund in time, so it was not made.")
        if not answer.approved:
            self._record(amount_cents, ApprovalDecision.DECLINED, answer.approver)
            raise ToolError(f"A person ({answer.approver}) declined this refund, so it was not made.")
        self._record(amount_cents, ApprovalDecision.APPROVED, answer.approver)

    async def _wait_for_answer(self, amount_cents: int, deadline: datetime, options: TicketOptions) -> None:
        """Wait for the person until ``deadline`` (raise ``TimeoutError`` then). A run that is due to continue
        as new does so first, and one the server asks to continue while it waits does so then: the next run
        waits on for the same amount until the same deadline, and answers the same query."""
        if self.answer is None and self._continuation.should_continue(options.continue_as_new_after_steps):
            await self._continuation.continue_waiting(amount_cents, deadline)
        remaining = deadline - workflow.now()
        if remaining <= timedelta(0):
            raise TimeoutError
        suggested = workflow.info().is_continue_as_new_suggested
        await workflow.wait_condition(
            lambda: self.answer is not None or (self._continuation.linear and suggested()), timeout=remaining
        )
        if self.answer is None:
            await self._continuation.continue_waiting(amount_cents, deadline)

    def refused(self) -> bool:
        """Whether a person declined a refund, or let one time out."""
        refused = {ApprovalDecision.DECLINED, ApprovalDecision.TIMED_OUT}
        return any(a.decision in refused for a in self.records)

    def restore(self, state: ContinuedState) -> None:
        """Take over the approvers, the records, and a wait (with any answer to it) from the run continued."""
        self.approvers = state.approvers
        self.records = list(state.approvals)
        if state.awaiting is not None and state.approval_deadline is not None:
            self._carried_wait = (state.awaiting, state.approval_deadline)
            self.answer = state.answer

    def _record(self, amount: int | None, decision: ApprovalDecision, approver: str | None, reason: str = "") -> None:
        # Metrics from workflow code are not emitted while replaying: an answer is counted once.
        workflow.metric_meter().create_counter("agent_approvals", "Answers about refunds, by decision", "1").add(
            1, {"decision": decision.value}
        )
        self.records.append(
            ApprovalRecord(amount_cents=amount, decision=decision, approver=approver, at=workflow.now(), reason=reason)
        )

    def _reject(self, amount: int | None, approver: str | None, reason: str) -> None:
        workflow.logger.warning("approval released nothing", extra={"reason": reason, "approver": approver})
        self._record(amount, ApprovalDecision.REJECTED, approver, reason)
