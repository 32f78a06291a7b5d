"""The tools as the workflow runs them: validation, batching, and each rule's handler (ownership, idempotency
keys, approval, reconciliation) around the activity the tool declares.

Each call runs by its tool's rule (``activities.tools.Rule``), through ``Toolbox.RULE_HANDLERS``, and every
handler schedules the declared tool's activity by its declared name: none names an activity of its own. The one
activity a handler knows is ``LOOKUP_ORDER``'s, the declaration every ownership check runs.

Decisions kept out of the prompt live here, because a customer can steer the model but not an ``if``:

- **Whose orders.** A tool acts on an order only if it is the ticket's customer's, checked from the order as
  looked up, never from what the model says; another customer's order reads as no order at all.
- **Who gets mail.** The ticket's customer address itself: the model's ``to`` is checked, never used.
- **Payments in parts.** Whatever tool pays (a refund, a store credit), its key names the tool's key prefix,
  the ticket, the order and the part (``refund:<ticket>/<order>/<n>``): the same for every retry of it and in
  every run of the ticket, so a retried or replayed payment cannot pay twice, and the workflow, whose history
  does not expire, counts the parts instead of a key that does. A part whose outcome is unknown keeps its key,
  so asking again cannot pay again; a known outcome moves on to the next part. A further part of an order paid
  back before (by this ticket, or refunded by any, as the looked-up order says) needs a person, whatever its
  amount, and so does any payment that takes the ticket's total above the approval limit: splitting a payment,
  switching tools, or asking again in a new ticket, does not dodge a person.
- **Unknown outcomes.** A payment whose outcome is unknown is settled under its key by the activity its tool
  declares (``Payout.settled_by``) before the model hears anything: paid, or, if not, the key is closed so that
  a late attempt cannot pay either.

Calls with a side effect run alone, so a payment and the email about it never race.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, cast

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic import NonNegativeInt, ValidationError
    from pydantic_core import to_json

    from activities.contracts.conversation import ToolResultBlock, ToolUseBlock
    from activities.contracts.fields import Contract, describe_errors, same_address
    from activities.contracts.limits import TOOL_INPUT_BYTES, cut, encoded_bytes
    from activities.contracts.names import NEEDS_APPROVAL
    from activities.contracts.policy import Limits
    from activities.contracts.ticket import RefundKey, RefundRecord, TicketInput, ToolCallRecord
    from activities.contracts.world import (
        EmailReceipt,
        EmailRequest,
        OrderLookup,
        RefundReceipt,
        RefundRequest,
        ToolOutput,
    )
    from activities.tools import (
        LOOKUP_ORDER,
        TOOLS,
        LookupOrderArgs,
        Payout,
        Rule,
        SendEmailArgs,
        Tool,
        WaitForDeliveryScanArgs,
    )
    from workflows import timeouts

from workflows.approvals import ApprovalGate, spelled
from workflows.failures import ToolError, cause, is_refusal, raise_if_cancelled, raise_if_unusable
from workflows.rules import Rules, RulesInForce
from workflows.waits import Events

SETTLED = cast(type, RefundReceipt | None)
"""What a settling activity returns: the payment made under the key, or None (and the key closed)."""

Handler = Callable[["Toolbox", int, ToolUseBlock, Any, Tool], Awaitable[str | ToolOutput]]
"""How the workflow runs a call to a tool under one ``Rule``: given the step, the call, its validated arguments,
and the tool's declaration, whose activity it runs."""


class ToolboxSnapshot(Contract):
    """What a run hands the next of the tools: the calls made and refunds paid, the refund parts settled per
    order, and the step in progress (its calls, and the results of those that ran) if it continued mid-step."""

    tool_calls: list[ToolCallRecord] = []
    refunds: list[RefundRecord] = []
    parts: dict[str, NonNegativeInt] = {}
    """Per order, the refund parts whose outcome is known: the next part's key counts on from here."""
    step_calls: list[ToolUseBlock] = []
    step_results: list[ToolResultBlock] = []


class Toolbox:
    """Runs the tool calls of one ticket and keeps what they did (the calls and their results, the refunds
    made) and the step in progress. Given the ticket, the rules it is judged by, the approval gate a large refund
    waits at, and the events about orders a wait takes."""

    def __init__(self, ticket: TicketInput, rules: RulesInForce, gate: ApprovalGate, events: Events) -> None:
        self._ticket = ticket
        self._rules = rules
        self._gate = gate
        self._events = events
        self.tool_calls: list[ToolCallRecord] = []
        self.refunds: list[RefundRecord] = []
        self.orders: dict[str, OrderLookup] = {}
        """Orders of this ticket's customer, as looked up in this run."""
        self.parts: dict[str, int] = {}
        """Per order, the refund parts whose outcome is known (paid, or settled as not made)."""
        self.unsettled: set[str] = set()
        """Keys of refund parts sent whose outcome is unknown: a replay under one is no new refund."""
        self.step_calls: list[ToolUseBlock] = []
        self.step_results: list[ToolResultBlock] = []
        """The step in progress: its tool calls, and the results of those that ran (carried if it continues)."""
        self._carried_step: tuple[list[ToolUseBlock], list[ToolResultBlock]] = ([], [])

    def snapshot(self) -> ToolboxSnapshot:
        return ToolboxSnapshot(
            tool_calls=self.tool_calls, refunds=self.refunds, parts=self.parts, step_calls=self.step_calls,
            step_results=self.step_results,
        )  # fmt: skip

    def restore(self, snapshot: ToolboxSnapshot) -> None:
        """Take over the tool calls and refunds from the run continued; its step in progress runs on in
        ``resume``."""
        self.tool_calls = list(snapshot.tool_calls)
        self.refunds = list(snapshot.refunds)
        self.parts = dict(snapshot.parts)
        self._carried_step = (list(snapshot.step_calls), list(snapshot.step_results))

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

        No patch guards this: the activities are scheduled in the same order as when they ran one by one,
        only more of them in one workflow task, and the replayer accepts that (``two_lookups_one_by_one.json``,
        recorded before, replays on this code).

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

    async def _read(self, _step: int, _call: ToolUseBlock, args: Any, tool: Tool) -> str | ToolOutput:
        """A read about one of the customer's orders: the order is checked first, then the tool's activity runs and
        its result goes to the model as it is. The lookup every check runs is itself such a read: the check is
        the read, made afresh."""
        order = await self._own_order(args.order_id, look_up=tool is LOOKUP_ORDER)
        if tool is LOOKUP_ORDER:
            return _as_read(order)
        result = await _run(tool, args)
        return result if isinstance(result, (str, ToolOutput)) else result.model_dump_json()

    async def _pay(self, step: int, call: ToolUseBlock, args: Any, tool: Tool) -> str:
        """A payment back to the customer (a refund, a store credit): the order checked, a person asked where the
        rules say, paid under its part's key, an unknown outcome settled, and counted toward the ticket's total."""
        options = self._ticket.options
        await self._own_order(args.order_id)
        rules = await self._rules.read(starting=False)  # a policy changed since the ticket read it judges this one
        why = self._needs_person(args, rules)
        if why is None:
            try:  # held to the limits across tickets where the payment is booked, with nobody's approval
                return await self._pay_part(step, call, args, tool, unattended=rules.limits)
            except ActivityError as error:
                if not _needs_approval(error):
                    raise
                why = cause(error)  # a limit across tickets met: nothing was paid, and a person may still say yes
        workflow.logger.info("payment waits for a person", extra={"why": why, "tool": tool.name})
        request_id = await self._gate.wait(
            args.amount_cents, args.order_id, options, rules, customer=self._ticket.customer_email, why=why,
            currency=self._currency(args.order_id),
        )  # fmt: skip
        try:
            text = await self._pay_part(step, call, args, tool)
        except (ToolError, ActivityError) as error:
            self._gate.settled(request_id, str(error) if isinstance(error, ToolError) else cause(error))
            raise
        self._gate.settled(request_id, text)
        return text

    async def _pay_part(
        self, step: int, call: ToolUseBlock, args: Any, tool: Tool, *, unattended: Limits | None = None
    ) -> str:
        """Make the payment (a person approved it, or it needed none: then it is held to ``unattended``, the
        limits across tickets, if the policy sets them), under the key its rule gives it."""
        payout = _payout(tool)
        if self._rules.rules.refund_key is not RefundKey.PER_ORDER:  # a demonstration's key, or none
            return await self._paid(tool, args, self._demonstration_key(step, call, payout), unattended)
        part = self.parts.get(args.order_id, 0) + 1
        key = f"{payout.key}:{self._ticket_key()}/{args.order_id}/{part}"
        try:
            text = await self._paid(tool, args, key, unattended)
        except ActivityError as error:
            if _needs_approval(error):  # refused before anything was booked: the same part, once approved
                raise
            # outcome unknown (not reconciled): the part keeps its key for the next ask
            self.unsettled.add(key)
            raise
        except ToolError:  # refused for good, or settled as not made: the next ask is the next part
            self.parts[args.order_id] = part
            raise
        self.parts[args.order_id] = part
        return text

    def _needs_person(self, args: Any, rules: Rules) -> str | None:
        """Why this payment must wait for a person, or None. The ticket's total and the parts of an order count
        every payment the ticket made, whichever tool made it."""
        limit = rules.limit_cents
        said = functools.partial(self._money, order_id=args.order_id)
        if args.amount_cents > limit:
            return f"{said(args.amount_cents)} is above the approval limit of {said(limit)}"
        refunded = sum(r.amount_cents for r in self.refunds)
        if refunded + args.amount_cents > limit:
            return f"with {said(refunded)} already paid back, the ticket's total would pass {said(limit)}"
        if any(r.order_id == args.order_id for r in self.refunds):
            return f"order {args.order_id} was already paid back on this ticket: a further part needs a person"
        looked_up = self.orders.get(args.order_id)
        if looked_up is not None and looked_up.refunded_cents > 0:
            before = said(looked_up.refunded_cents)
            return f"{before} of order {args.order_id} was refunded before: a further part needs a person"
        return None

    async def _paid(self, tool: Tool, args: Any, key: str | None, unattended: Limits | None = None) -> str:
        """Pay, settle an unknown outcome, and count it. A cancel of the ticket does not cut this short: it waits
        for the payment to end paid and counted, or refused for good, and then ends the ticket."""
        request = RefundRequest(
            order_id=args.order_id, amount_cents=args.amount_cents, idempotency_key=key,
            **({"customer_email": self._ticket.customer_email, "limits": unattended} if unattended else {}),
        )  # fmt: skip
        settle = asyncio.ensure_future(self._settle(tool, request))
        try:
            return await asyncio.shield(settle)
        except asyncio.CancelledError:
            # Paid and counted, refused, or (a keyless payment whose attempts all timed out) unknown for good:
            # whichever, the cancel then ends the ticket, and the loop does not go on.
            with contextlib.suppress(ToolError, ActivityError):
                await settle
            raise

    async def _settle(self, tool: Tool, request: RefundRequest) -> str:
        payout = _payout(tool)
        try:
            receipt: RefundReceipt = await _run(tool, request)
        except ActivityError as error:
            receipt = await self._reconcile(tool, request, error)
        key = request.idempotency_key
        paid = self._money(receipt.amount_cents, receipt.order_id)
        number = f"{payout.noun} #{receipt.refund_id}"
        if any((r.tool, r.refund_id) == (tool.name, receipt.refund_id) for r in self.refunds):
            # a replay is never counted twice
            return (
                f"{number[:1].upper()}{number[1:]} of {paid} on order {receipt.order_id} was "
                "already made and is counted once; nothing more was paid."
            )
        self.refunds.append(
            RefundRecord(
                refund_id=receipt.refund_id, order_id=receipt.order_id, amount_cents=receipt.amount_cents,
                currency=self._currency(receipt.order_id), tool=tool.name,
            )
        )  # fmt: skip
        if receipt.replayed and key in self.unsettled:
            self.unsettled.discard(key)
            return (
                f"{payout.done} {paid} on order {receipt.order_id} ({number}): "
                "an earlier request whose answer was lost had made it; nothing more was paid."
            )
        return f"{payout.done} {paid} on order {receipt.order_id} ({number})."

    async def _reconcile(self, tool: Tool, request: RefundRequest, error: ActivityError) -> RefundReceipt:
        """A payment that failed without a refusal (timed out, out of retries) may well have been paid: ask
        the ledger that keeps the money what it recorded under the key (the tool's ``settled_by`` activity), and
        tell the model that, not "the tool failed".

        Without this, the model hears of a failure, asks for the payment again, and a key per tool call pays
        twice. Only a keyed payment can be looked up. "Not found" is the truth when asked:
        every attempt of the payment has been given up on by then, so none will pay later unless a hung
        attempt outlives its timeout, and with the default per-order key even that could not pay twice.
        """
        payout = _payout(tool)
        key = request.idempotency_key
        if key is None or not self._rules.rules.reconcile_refunds or is_refusal(error):
            raise error
        found: RefundReceipt | None = await workflow.execute_activity(
            payout.settled_by, key, result_type=SETTLED, **timeouts.attempt(payout.settled_by)
        )
        workflow.logger.warning(
            "payment outcome unknown, reconciled",
            extra={"cause": cause(error), "key": key, "tool": tool.name, "id": found.refund_id if found else None},
        )
        asked = (
            f"The {payout.noun} of {self._money(request.amount_cents, request.order_id)} on order {request.order_id}"
        )
        if found is None:
            raise ToolError(
                f"{asked} was not made: {payout.keeper} did not answer in time ({cause(error)}) and has no "
                f"{payout.noun} under this request's key."
            )
        if (found.order_id, found.amount_cents) != (request.order_id, request.amount_cents):
            held = self._money(found.amount_cents, found.order_id)
            raise ToolError(
                f"{asked} was not made: {payout.keeper} holds {payout.noun} #{found.refund_id} of {held} on "
                f"{found.order_id} under the same key, and refuses a key reused for another amount."
            )
        return found

    def _currency(self, order_id: str) -> str | None:
        """The order's currency as this run looked it up (None: not looked up)."""
        order = self.orders.get(order_id)
        return order.currency if order is not None else None

    def _money(self, units: int, order_id: str) -> str:
        """An amount of the order as the model and people read it, in its currency (``USD 49.00``). The policy's
        limits count the smallest unit of whatever currency the order is in, so they read in it too."""
        return spelled(units, self._currency(order_id))

    async def _own_order(self, order_id: str, *, look_up: bool = False) -> OrderLookup:
        """The order, if it is this ticket's customer's (looked up unless this run has, or ``look_up``); a
        ``ToolError`` that reads exactly as a missing order otherwise, so nothing of another customer leaks."""
        order = self.orders.get(order_id)
        if order is None or look_up:
            order = await _run(LOOKUP_ORDER, LookupOrderArgs(order_id=order_id))
        if not same_address(order.customer_email, self._ticket.customer_email):
            raise ToolError(f"The tool failed: There is no order {order_id}")  # as ``_use`` words a missing one
        self.orders[order_id] = order
        return order

    async def _wait_for_event(self, _step: int, _call: ToolUseBlock, args: WaitForDeliveryScanArgs, _tool: Tool) -> str:
        """Park the ticket until an event about the order arrives (or came already), or the hours run out."""
        await self._own_order(args.order_id)
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
        request = EmailRequest(
            to=customer,  # the ticket's address itself, never the one the model wrote
            subject=args.subject,
            body=args.body,
            idempotency_key=f"email:{self._call_key(step, call)}",
        )
        receipt: EmailReceipt = await _run(tool, request)
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

    def _demonstration_key(self, step: int, call: ToolUseBlock, payout: Payout) -> str | None:
        """The key of a payment under a demonstration's rule (``PER_ORDER``, the rule in production, keys the
        part in ``_pay_part``): one per tool call, which a model asking again pays twice under, or none at all."""
        per_call = self._rules.rules.refund_key is RefundKey.PER_TOOL_CALL
        return f"{payout.key}:{self._call_key(step, call)}" if per_call else None

    RULE_HANDLERS: ClassVar[dict[Rule, Handler]] = {
        Rule.READS: _read,
        Rule.PAYS: _pay,
        Rule.MAILS: _send_email,
        Rule.WAITS: _wait_for_event,
    }
    """The handler of each rule; which tool is under which rule is declared in ``TOOLS``."""


def _needs_approval(error: ActivityError) -> bool:
    """Whether the ledger refused a payment without a person because it would pass a limit across tickets."""
    return isinstance(error.cause, ApplicationError) and error.cause.type == NEEDS_APPROVAL


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


async def _run(tool: Tool, arg: Any) -> Any:
    """Run the tool's declared activity, by its declared name, with its attempt."""
    return await workflow.execute_activity(tool.name, arg, result_type=tool.returns, **timeouts.attempt(tool.name))


def _payout(tool: Tool) -> Payout:
    assert tool.payout is not None, f"{tool.name} pays, so it declares its payout"
    return tool.payout
