"""The tools as the workflow runs them: validation, batching, and each rule's handler (ownership, idempotency
keys, approval, reconciliation) around the activity the tool declares.

Each call runs by its tool's rule (``activities.tools.Rule``), through ``Toolbox.RULE_HANDLERS``, and every
handler schedules the declared tool's activity by its declared name: none names an activity of its own. The one
activity a handler knows is ``LOOKUP_ORDER``'s, the declaration every ownership check runs.

Decisions kept out of the prompt live here and in the pieces it hands calls to, because a customer can steer
the model but not an ``if``: whose orders (``ownership``), who gets mail (the ticket's customer address itself:
the model's ``to`` is checked, never used), and everything about paying back (``payouts``: keys per part, when a
person must approve, settling an unknown outcome).

Calls with a side effect run alone, so a payment and the email about it never race.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any, ClassVar

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from pydantic import ValidationError
    from pydantic_core import to_json

    from activities.contracts.conversation import ToolResultBlock, ToolUseBlock
    from activities.contracts.fields import Snapshot, describe_errors, same_address
    from activities.contracts.limits import TOOL_INPUT_BYTES, cut, encoded_bytes
    from activities.contracts.ticket import CustomerMessage, MailThread, RefundRecord, TicketInput, ToolCallRecord
    from activities.contracts.world import (
        EmailReceipt,
        EmailRequest,
        OrderLookup,
        ToolOutput,
    )
    from activities.tools import (
        LOOKUP_ORDER,
        TOOLS,
        Rule,
        SendEmailArgs,
        Tool,
        WaitForDeliveryScanArgs,
    )

from workflows.approval_gate import ApprovalGate
from workflows.failures import ToolError, cause, raise_if_cancelled, raise_if_unusable
from workflows.ownership import AboutAnOrder, CustomerOrders, run
from workflows.payouts import Payment, Payouts, PayoutsSnapshot
from workflows.rules import RulesInForce
from workflows.waits import Events

Handler = Callable[["Toolbox", int, ToolUseBlock, Any, Tool], Awaitable[str | ToolOutput]]
"""How the workflow runs a call to a tool under one ``Rule``: given the step, the call, its validated arguments,
and the tool's declaration, whose activity it runs."""


class ToolboxSnapshot(Snapshot):
    """What a run hands the next of the tools: the calls made, the payments, and the step in progress (its calls,
    and the results of those that ran) if it continued mid-step."""

    tool_calls: list[ToolCallRecord] = []
    payouts: PayoutsSnapshot = PayoutsSnapshot()
    step_calls: list[ToolUseBlock] = []
    step_results: list[ToolResultBlock] = []
    sender_verified: bool | None = None
    """Whether the customer was verified by the time the run handed over; None (runs before it): as the ticket
    started."""
    bounced: str | None = None
    """Why the customer's address refuses the desk's mail, if it bounced it (``mail_bounced``)."""
    thread: MailThread | None = None
    """The customer's mail the desk's emails answer, if any came; None (runs before it, too): as the ticket
    started."""

    newer = frozenset({"thread"})  # 1.3.0


class Toolbox:
    """Runs the tool calls of one ticket and keeps what they did (the calls and their results, the refunds
    made) and the step in progress. Given the ticket, the rules it is judged by, the approval gate a large refund
    waits at, and the events about orders a wait takes."""

    def __init__(self, ticket: TicketInput, rules: RulesInForce, gate: ApprovalGate, events: Events) -> None:
        self._ticket = ticket
        self._rules = rules
        self._gate = gate
        self._events = events
        self._orders = CustomerOrders(ticket.customer_email, verified=ticket.sender_verified)
        self._payouts = Payouts(ticket, rules, gate, self._orders)
        self.tool_calls: list[ToolCallRecord] = []
        self.step_calls: list[ToolUseBlock] = []
        self.step_results: list[ToolResultBlock] = []
        """The step in progress: its tool calls, and the results of those that ran (carried if it continues)."""
        self._carried_step: tuple[list[ToolUseBlock], list[ToolResultBlock]] = ([], [])
        self._bounced: str | None = None
        self._thread = MailThread.answering(ticket, ticket)
        """The customer's latest mail, which the desk's emails answer (threaded under it in their mail program)."""

    @property
    def refunds(self) -> list[RefundRecord]:
        """Every payment back to the customer the ticket made, whichever tool made it."""
        return self._payouts.paid

    @property
    def refunds_this_turn(self) -> list[RefundRecord]:
        return self._payouts.paid_this_turn

    def turn_begins(self) -> None:
        self._payouts.turn_begins()

    def snapshot(self) -> ToolboxSnapshot:
        return ToolboxSnapshot(
            tool_calls=self.tool_calls,
            payouts=self._payouts.snapshot(),
            step_calls=self.step_calls,
            step_results=self.step_results,
            sender_verified=None if self._orders.verified == self._ticket.sender_verified else self._orders.verified,
            bounced=self._bounced,
            thread=self._thread,
        )

    def restore(self, snapshot: ToolboxSnapshot) -> None:
        """Take over the tool calls and refunds from the run continued; its step in progress runs on in
        ``resume``."""
        self.tool_calls = list(snapshot.tool_calls)
        self._payouts.restore(snapshot.payouts)
        self._carried_step = (list(snapshot.step_calls), list(snapshot.step_results))
        if snapshot.sender_verified is not None:
            self._orders.verified = snapshot.sender_verified
        self._bounced = snapshot.bounced
        self._thread = snapshot.thread or self._thread

    def replied(self, reply: CustomerMessage) -> None:
        """The customer wrote again: if by mail, the desk's emails answer that mail from now on. It changes no
        command, only what the next ``send_email`` carries."""
        self._thread = MailThread.answering(reply, self._ticket) or self._thread

    def bounced(self, why: str) -> bool:
        """The customer's address refused the desk's mail for good: ``send_email`` is refused from now on. Whether
        it had not bounced before."""
        first, self._bounced = self._bounced is None, self._bounced or why
        return first

    @property
    def sender_verified(self) -> bool:
        """Whether the tools may touch the customer's orders: the sender is verified, or was the caller's word."""
        return self._orders.verified

    def verify_sender(self) -> bool:
        """The sender is verified from now on (a person said so, or a verified message came); whether it was not."""
        was, self._orders.verified = self._orders.verified, True
        return not was

    async def resume(self, step: int) -> list[ToolResultBlock]:
        """The results of the step the run continued was in the middle of (a refund waiting for approval), after
        running its calls that did not run then; none if it was not in the middle of one."""
        (calls, done), self._carried_step = self._carried_step, ([], [])
        return await self.use_all(step, calls, done) if calls else []

    def archived(self) -> list[ToolCallRecord]:
        """Hand over the tool calls for the content store's archive; the outcome no longer carries them."""
        calls, self.tool_calls = self.tool_calls, []
        return calls

    async def use_all(
        self, step: int, calls: list[ToolUseBlock], done: list[ToolResultBlock] | None = None
    ) -> list[ToolResultBlock]:
        """Run every tool call of one response; return their results in the order of the calls.

        Consecutive read-only calls run at once; a call with a side effect runs alone, so a refund and the
        email about it never race, and the approval a refund waits for is asked for one refund at a time.

        ``done`` are the results of the first calls, run by the run this one continues: only the rest run.
        Results are kept as each batch ends, so a run that continues while a refund waits for approval hands
        over the results of the calls before it."""
        self.step_calls, self.step_results = calls, list(done or [])
        for batch in _batches(calls[len(self.step_results) :]):
            outcomes = await asyncio.gather(*(self._use(step, call) for call in batch))
            self.step_results += [
                self.answer_call(step, call, content, is_error=is_error)
                for call, (content, is_error) in zip(batch, outcomes, strict=True)
            ]
        results, self.step_calls, self.step_results = self.step_results, [], []
        return results

    async def _use(self, step: int, call: ToolUseBlock) -> tuple[str | ToolOutput, bool]:
        """Run one tool call and turn whatever happens into the result the model reads, and whether it is an
        error."""
        try:
            return await self._invoke(step, call), False
        except ToolError as error:
            return str(error), True
        except ActivityError as error:
            raise_if_cancelled(error)
            raise_if_unusable(error, step)
            # Out of retries, or not worth retrying: the model hears about it instead of the run failing.
            return f"The tool failed: {cause(error)}", True

    def answer_call(
        self, step: int, call: ToolUseBlock, result: str | ToolOutput, *, is_error: bool
    ) -> ToolResultBlock:
        """Record a tool call with its result in the outcome, and make the block that answers it. A result kept
        in the content store is recorded as its preview and key, and an input past ``TOOL_INPUT_BYTES`` as a head
        of it: the whole call is in the conversation."""
        output = result if isinstance(result, ToolOutput) else ToolOutput(content=result)
        recorded = call.input
        if encoded_bytes(recorded) > TOOL_INPUT_BYTES:
            recorded = {"cut": cut(to_json(recorded).decode(), TOOL_INPUT_BYTES)}
        self.tool_calls.append(
            ToolCallRecord(
                step=step,
                tool_use_id=call.id,
                name=call.name,
                input=recorded,
                result=output.content,
                is_error=is_error,
                result_ref=output.content_ref,
            )
        )
        return ToolResultBlock(
            tool_use_id=call.id, content=output.content, is_error=is_error, content_ref=output.content_ref
        )

    async def _invoke(self, step: int, call: ToolUseBlock) -> str | ToolOutput:
        """Validate the call against its tool's declaration, then run it by the handler of the tool's rule."""
        tool = TOOLS.get(call.name)
        if tool is None:
            raise ToolError(f"There is no tool named {call.name!r}. The tools are: {', '.join(TOOLS)}.")
        try:
            args = tool.args.model_validate(call.input)
        except ValidationError as error:
            raise ToolError(f"Invalid arguments for {call.name}: {describe_errors(error)}") from None
        return await self.RULE_HANDLERS[tool.rule](self, step, call, args, tool)

    # --- the handlers, one per rule ---

    async def _read(self, _step: int, _call: ToolUseBlock, args: AboutAnOrder, tool: Tool) -> str | ToolOutput:
        """A read about one of the customer's orders: the order is checked first, then the tool's activity runs and
        its result goes to the model as it is. The lookup every check runs is itself such a read: the check is
        the read, made afresh."""
        order = await self._orders.own(args.order_id, look_up=tool is LOOKUP_ORDER)
        if tool is LOOKUP_ORDER:
            return _as_read(order)
        result = await run(tool, args)
        return result if isinstance(result, (str, ToolOutput)) else result.model_dump_json()

    async def _pay(self, _step: int, _call: ToolUseBlock, args: Payment, tool: Tool) -> str:
        return await self._payouts.pay(tool, args)

    async def _wait_for_event(self, _step: int, _call: ToolUseBlock, args: WaitForDeliveryScanArgs, _tool: Tool) -> str:
        """Park the ticket until an event about the order arrives (or came already), or the hours run out."""
        await self._orders.own(args.order_id)
        event = await self._events.wait_for(args.order_id, args.hours)
        if event is None:
            return f"No event about order {args.order_id} arrived within {args.hours} hours."
        detail = f": {event.detail}" if event.detail else ""
        return f"Reported about order {args.order_id}: {event.event}{detail}"

    async def _send_email(self, step: int, call: ToolUseBlock, args: SendEmailArgs, tool: Tool) -> str:
        """An email to the ticket's customer, keyed per tool call."""
        customer = self._ticket.customer_email
        if not same_address(args.to, customer):
            raise ToolError(f"Emails go only to this ticket's customer, {customer}.")
        if self._bounced is not None:  # reached only through ``mail_bounced``, which no run before it received
            raise ToolError(
                f"The customer's address refused the desk's last email for good ({self._bounced}): do not email it "
                "again. Answer here; a colleague will reach the customer another way."
            )
        request = EmailRequest(
            to=customer,  # the ticket's address itself, never the one the model wrote
            subject=args.subject,
            body=args.body,
            idempotency_key=f"email:{self._call_key(step, call)}",
            in_reply_to=self._thread.in_reply_to if self._thread else None,
            references=self._thread.references if self._thread else [],
        )
        receipt: EmailReceipt = await run(tool, request)
        return f"Email #{receipt.email_id} sent to {receipt.to}."

    # --- idempotency keys ---

    def _call_key(self, step: int, call: ToolUseBlock) -> str:
        """The same for every retry of this tool call, different for every other call, and the same in every
        run of the ticket (steps are numbered across runs). Keyed per ticket, a call is named by its place in
        the step rather than by the id the model gave it: a duplicate run of the ticket, whose model named its
        calls anew, sends the same email under the same key, and so sends nothing."""
        index = next(n for n, c in enumerate(self.step_calls) if c.id == call.id)
        return f"{self._ticket_key()}/{step}/{index}"

    def _ticket_key(self) -> str:
        """What names the ticket in the keys of what it does to the world: its id, not the workflow's or a run's,
        so the same ticket started twice pays and mails once."""
        return f"ticket:{self._ticket.ticket_id}"

    RULE_HANDLERS: ClassVar[Mapping[Rule, Handler]] = MappingProxyType(
        {
            Rule.READS: _read,
            Rule.PAYS: _pay,
            Rule.MAILS: _send_email,
            Rule.WAITS: _wait_for_event,
        }
    )
    """The handler of each rule (read-only: a class's table is every ticket's); which tool is under which rule is
    declared in ``TOOLS``."""


def _batches(calls: list[ToolUseBlock]) -> list[list[ToolUseBlock]]:
    """The calls in order: consecutive read-only ones together, every other one alone."""
    batches: list[list[ToolUseBlock]] = []
    for call in calls:
        if _reads_only(call) and batches and _reads_only(batches[-1][0]):
            batches[-1].append(call)
        else:
            batches.append([call])
    return batches


def _reads_only(call: ToolUseBlock) -> bool:
    """A call to a tool that does not exist runs nothing, so it may join any batch of reads."""
    tool = TOOLS.get(call.name)
    return tool is None or tool.rule.reads_only


def _as_read(order: OrderLookup) -> str:
    """The looked-up order as the model reads it, its currency included."""
    return order.model_dump_json()
