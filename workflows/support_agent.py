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
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar, Generic, TypeVar

from temporalio import workflow
from temporalio.common import SearchAttributeKey
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel, ValidationError

    from activities.contracts import (
        APPROVE_SIGNAL,
        AWAITING_APPROVAL_ATTRIBUTE,
        AWAITING_APPROVAL_QUERY,
        WORKFLOW_NAME,
        Approval,
        ApprovalDecision,
        ApprovalRecord,
        AuditEntry,
        Decision,
        EmailRequest,
        IssueRefundArgs,
        LookupOrderArgs,
        Message,
        Outcome,
        RefundKey,
        RefundReceipt,
        RefundRecord,
        RefundRequest,
        SendEmailArgs,
        Status,
        ThinkRequest,
        TicketContext,
        TicketInput,
        ToolCallRecord,
        ToolResultBlock,
        ToolUseBlock,
        describe_errors,
        money,
    )
    from activities.model import ModelActivities
    from activities.policy import PolicyActivities
    from activities.tools import ToolActivities
    from workflows import policies

AWAITING_APPROVAL = SearchAttributeKey.for_int(AWAITING_APPROVAL_ATTRIBUTE)
RECONCILE_PATCH = "reconcile-timed-out-refunds"
"""Runs recorded before reconciliation existed replay without it: their histories have no such marker."""

APPROVER_CHECK = "approver-check"
"""Patch: only the ticket's approvers (or the worker's default ones) may release a refund. Runs that were
already waiting before it keep accepting anyone, as they were promised."""

CLOSING_AUDIT = "audit-ticket-close"
"""Patch: tickets the agent handled write a closing audit entry (status, steps, amount refunded). Runs
started before it replay without the entry; retire the patch (``workflow.deprecate_patch``, then remove it)
once no run started before it can still be open: the approval timeout bounds that at 24 hours by default."""


class ToolError(Exception):
    """A tool result the model must see as an error (``is_error``), not a reason to fail the run."""


ArgsT = TypeVar("ArgsT", bound=BaseModel)


@dataclass(frozen=True)
class Tool(Generic[ArgsT]):
    """What the workflow knows of a tool: the arguments it validates and the step that runs it."""

    args: type[ArgsT]
    run: Callable[[SupportAgent, int, ToolUseBlock, ArgsT], Awaitable[str]]


@workflow.defn(name=WORKFLOW_NAME)
class SupportAgent:
    def __init__(self) -> None:
        self._awaiting: int | None = None
        self._answer: Approval | None = None
        self._approvals: list[ApprovalRecord] = []
        self._tool_calls: list[ToolCallRecord] = []
        self._refunds: list[RefundRecord] = []
        self._model_calls = 0
        self._audits = 0
        self._approvers: list[str] | None = None

    @workflow.run
    async def run(self, raw_ticket: Any = None) -> Outcome:
        """Take the input loosely and validate it here: a typed argument that fails to decode would leave
        the run RUNNING with its first workflow task failing forever, instead of failing it clearly."""
        try:
            self._ticket = TicketInput.model_validate(raw_ticket)
        except ValidationError as error:
            raise ApplicationError(
                f"Invalid ticket input: {describe_errors(error)}",
                type="InvalidTicketInput",
                non_retryable=True,
            ) from None
        ticket = self._ticket
        workflow.logger.info("ticket opened", extra={"ticket_id": ticket.ticket_id})
        if escalation := self._past_sla():
            await self._audit(f"escalated to a person: {escalation}")
            return self._outcome(
                Status.ESCALATED, 0, "Your ticket has waited longer than we promised, so a colleague is taking it over."
            )
        outcome = await self._converse()
        if workflow.patched(CLOSING_AUDIT):
            refunded = sum(r.amount_cents for r in outcome.refunds)
            await self._audit(
                f"closed as {outcome.status.value} after {outcome.steps} steps; refunded {money(refunded)}"
            )
        return outcome

    @workflow.signal(name=APPROVE_SIGNAL)
    def approve(self, raw_approval: Any) -> None:
        """A person's answer. It releases only the refund of the amount they were shown, and only once.

        The payload is validated here rather than by the converter: a payload that fails to decode is
        dropped by the SDK with nothing but a log line, while this records why it released nothing."""
        try:
            approval = Approval.model_validate(raw_approval)
        except ValidationError as error:
            self._reject(None, None, f"malformed approval: {describe_errors(error)}")
            return
        if self._awaiting is None:
            self._reject(approval.amount_cents, approval.approver, "no refund is waiting for approval")
        elif approval.amount_cents != self._awaiting:
            self._reject(
                approval.amount_cents,
                approval.approver,
                f"the refund waiting is {money(self._awaiting)}, not {money(approval.amount_cents)}",
            )
        elif self._approvers and approval.approver not in self._approvers:
            self._reject(
                approval.amount_cents, approval.approver,
                f"{approval.approver} may not approve refunds on this ticket (approvers: {', '.join(self._approvers)})",
            )  # fmt: skip
        else:
            self._answer = approval

    @workflow.query(name=AWAITING_APPROVAL_QUERY)
    def awaiting_approval_of(self) -> int | None:
        """The amount in cents a person is being asked to approve, or None: what the approval screen shows."""
        return self._awaiting

    async def _converse(self) -> Outcome:
        """The agent loop: think, use the tools asked for, repeat until the model answers or steps run out."""
        ticket = self._ticket
        messages = [Message.user_text(ticket.question)]
        for step in range(1, ticket.options.max_steps + 1):
            try:
                decision = await self._think(step, messages)
            except ActivityError as error:
                return self._outcome(
                    Status.FAILED,
                    step,
                    f"The agent could not get an answer from the model ({cause(error)}). "
                    "A person will take this ticket over.",
                )
            messages.append(Message(role="assistant", content=decision.content))
            if not decision.tool_calls:
                status = Status.DECLINED if self._refund_was_refused() else Status.RESOLVED
                return self._outcome(status, step, decision.text)
            results = [await self._use(step, call) for call in decision.tool_calls]
            messages.append(Message(role="user", content=list(results)))
        return self._outcome(
            Status.GAVE_UP,
            ticket.options.max_steps,
            f"Gave up after {ticket.options.max_steps} steps. A person will take this ticket over.",
        )

    def _past_sla(self) -> str | None:
        """Why the ticket is past its SLA, or None. Workflow time, never the wall clock: a replay hours
        later must see the moment the decision was first made, or it takes the other branch."""
        opened_at = self._ticket.opened_at or workflow.info().start_time
        age = workflow.now() - opened_at
        sla = timedelta(seconds=self._ticket.options.sla_seconds)
        return f"opened {age} ago, SLA {sla}" if age > sla else None

    async def _audit(self, entry: str) -> None:
        info = workflow.info()
        self._audits += 1
        await workflow.execute_activity_method(
            ToolActivities.audit,
            AuditEntry(
                ticket_id=self._ticket.ticket_id,
                entry=entry,
                idempotency_key=f"audit:{info.workflow_id}/{info.run_id}/{self._audits}",
            ),
            **policies.AUDIT,
        )

    # --- the loop's two kinds of step ---

    async def _think(self, step: int, messages: list[Message]) -> Decision:
        context = TicketContext(ticket_id=self._ticket.ticket_id, customer_email=self._ticket.customer_email)
        decision = await workflow.execute_activity_method(
            ModelActivities.think,
            ThinkRequest(ticket=context, step=step, messages=messages),
            **policies.THINK,
        )
        self._model_calls += 1
        return decision

    async def _use(self, step: int, call: ToolUseBlock) -> ToolResultBlock:
        """Run one tool call and turn whatever happens into the tool result the model reads."""
        try:
            content, is_error = await self._invoke(step, call), False
        except ToolError as error:
            content, is_error = str(error), True
        except ActivityError as error:
            # Out of retries, or not worth retrying: the model hears about it instead of the run failing.
            content, is_error = f"The tool failed: {cause(error)}", True
        self._tool_calls.append(
            ToolCallRecord(
                step=step,
                tool_use_id=call.id,
                name=call.name,
                input=call.input,
                result=content,
                is_error=is_error,
            )
        )
        return ToolResultBlock(tool_use_id=call.id, content=content, is_error=is_error)

    async def _invoke(self, step: int, call: ToolUseBlock) -> str:
        tool = self.TOOLS.get(call.name)
        if tool is None:
            raise ToolError(f"There is no tool named {call.name!r}. The tools are: {', '.join(self.TOOLS)}.")
        try:
            args = tool.args.model_validate(call.input)
        except ValidationError as error:
            raise ToolError(f"Invalid arguments for {call.name}: {describe_errors(error)}") from None
        return await tool.run(self, step, call, args)

    # --- the tools ---

    async def _lookup_order(self, _step: int, _call: ToolUseBlock, args: LookupOrderArgs) -> str:
        order = await workflow.execute_activity_method(ToolActivities.lookup_order, args, **policies.LOOKUP_ORDER)
        return order.model_dump_json()

    async def _issue_refund(self, step: int, call: ToolUseBlock, args: IssueRefundArgs) -> str:
        if args.amount_cents > self._ticket.options.approval_limit_cents:
            await self._await_approval(args.amount_cents)
        request = RefundRequest(
            order_id=args.order_id,
            amount_cents=args.amount_cents,
            idempotency_key=self._refund_key(step, call, args),
        )
        try:
            receipt = await workflow.execute_activity_method(
                ToolActivities.issue_refund, request, **policies.ISSUE_REFUND
            )
        except ActivityError as error:
            receipt = await self._reconcile(request, error)
        self._refunds.append(
            RefundRecord(refund_id=receipt.refund_id, order_id=receipt.order_id, amount_cents=receipt.amount_cents)
        )
        return f"Refunded {money(receipt.amount_cents)} on order {receipt.order_id} (refund #{receipt.refund_id})."

    async def _send_email(self, step: int, call: ToolUseBlock, args: SendEmailArgs) -> str:
        if args.to.casefold() != self._ticket.customer_email.casefold():
            raise ToolError(f"Emails go only to this ticket's customer, {self._ticket.customer_email}.")
        request = EmailRequest(
            to=args.to,
            subject=args.subject,
            body=args.body,
            idempotency_key=f"email:{self._call_key(step, call)}",
        )
        receipt = await workflow.execute_activity_method(ToolActivities.send_email, request, **policies.SEND_EMAIL)
        return f"Email #{receipt.email_id} sent to {receipt.to}."

    async def _reconcile(self, request: RefundRequest, error: ActivityError) -> RefundReceipt:
        """A refund that failed without a refusal (timed out, out of retries) may well have been paid: ask
        the provider what it recorded under the key, and tell the model that, not "the tool failed".

        Without this, the model hears of a failure, asks for the refund again, and a key per tool call pays
        twice (the seed's row 5). Only a keyed refund can be looked up. "Not found" is the truth when asked:
        every attempt of the refund has been given up on by then, so none will pay later unless a hung
        attempt outlives its timeout, and with the default per-order key even that could not pay twice.
        """
        key = request.idempotency_key
        if (
            key is None
            or not self._ticket.options.reconcile_refunds
            or is_refusal(error)
            or not workflow.patched(RECONCILE_PATCH)
        ):
            raise error
        found = await workflow.execute_activity_method(ToolActivities.find_refund, key, **policies.FIND_REFUND)
        workflow.logger.warning(
            "refund outcome unknown, reconciled with the provider",
            extra={"cause": cause(error), "key": key, "refund_id": found.refund_id if found else None},
        )
        if found is None:
            raise ToolError(
                f"The refund of {money(request.amount_cents)} on order {request.order_id} was not made: the "
                f"payment provider did not answer in time ({cause(error)}) and has no refund under this request's key."
            )
        if (found.order_id, found.amount_cents) != (request.order_id, request.amount_cents):
            raise ToolError(
                f"The refund of {money(request.amount_cents)} on order {request.order_id} was not made: the "
                f"provider holds refund #{found.refund_id} of {money(found.amount_cents)} on {found.order_id} under "
                "the same key, and refuses a key reused for another amount."
            )
        return found

    # --- approvals ---

    async def _await_approval(self, amount_cents: int) -> None:
        """Wait for a person to approve this amount; raise the refusal the model must hear otherwise."""
        if workflow.patched(APPROVER_CHECK) and self._approvers is None:
            self._approvers = self._ticket.options.approvers
            if self._approvers is None:
                self._approvers = await workflow.execute_activity_method(
                    PolicyActivities.default_approvers, **policies.DEFAULT_APPROVERS
                )
        self._awaiting, self._answer = amount_cents, None
        workflow.upsert_search_attributes([AWAITING_APPROVAL.value_set(amount_cents)])
        await self._audit(f"refund of {money(amount_cents)} waits for approval")
        timeout = timedelta(seconds=self._ticket.options.approval_timeout_seconds)
        try:
            await workflow.wait_condition(lambda: self._answer is not None, timeout=timeout)
        except TimeoutError:
            pass
        finally:
            workflow.upsert_search_attributes([AWAITING_APPROVAL.value_unset()])
            self._awaiting = None
        answer, self._answer = self._answer, None  # consumed: a second refund needs a second approval
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

    def _record(self, amount: int | None, decision: ApprovalDecision, approver: str | None, reason: str = "") -> None:
        self._approvals.append(
            ApprovalRecord(amount_cents=amount, decision=decision, approver=approver, at=workflow.now(), reason=reason)
        )

    def _reject(self, amount: int | None, approver: str | None, reason: str) -> None:
        workflow.logger.warning("approval released nothing", extra={"reason": reason, "approver": approver})
        self._record(amount, ApprovalDecision.REJECTED, approver, reason)

    def _refund_was_refused(self) -> bool:
        refused = {ApprovalDecision.DECLINED, ApprovalDecision.TIMED_OUT}
        return not self._refunds and any(a.decision in refused for a in self._approvals)

    # --- idempotency keys ---

    def _call_key(self, step: int, call: ToolUseBlock) -> str:
        """The same for every retry of this tool call, different for every other call."""
        info = workflow.info()
        return f"{info.workflow_id}/{info.run_id}/{step}/{call.id}"

    def _refund_key(self, step: int, call: ToolUseBlock, args: IssueRefundArgs) -> str | None:
        return {
            RefundKey.NONE: None,
            RefundKey.PER_TOOL_CALL: f"refund:{self._call_key(step, call)}",
            RefundKey.PER_ORDER: f"refund:{args.order_id}",
        }[self._ticket.options.refund_key]

    TOOLS: ClassVar[dict[str, Tool[Any]]] = {
        "lookup_order": Tool(LookupOrderArgs, _lookup_order),
        "issue_refund": Tool(IssueRefundArgs, _issue_refund),
        "send_email": Tool(SendEmailArgs, _send_email),
    }

    def _outcome(self, status: Status, steps: int, answer: str) -> Outcome:
        workflow.logger.info("ticket closed", extra={"status": status.value, "steps": steps})
        return Outcome(
            ticket_id=self._ticket.ticket_id,
            status=status,
            answer=answer,
            steps=steps,
            model_calls=self._model_calls,
            tool_calls=self._tool_calls,
            refunds=self._refunds,
            approvals=self._approvals,
        )


def is_refusal(error: ActivityError) -> bool:
    """Whether the activity failed with a definite answer (a non-retryable error: the provider refused, the
    order does not exist), as opposed to an unknown outcome (a timeout, retries used up)."""
    return isinstance(error.cause, ApplicationError) and error.cause.non_retryable


def cause(error: ActivityError) -> str:
    """The message a person can act on, from the innermost cause of an activity's failure."""
    inner: BaseException = error
    while inner.__cause__ is not None:
        inner = inner.__cause__
    if isinstance(inner, ApplicationError):
        return inner.message
    return str(inner) or type(inner).__name__
