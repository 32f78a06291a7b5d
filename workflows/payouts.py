"""Payments back to the customer, whichever tool makes them (a refund, a store credit): the rules every paying
tool is under, read from its declaration (``PayoutKind``), never written per tool.

- **Keys per part.** A payment's key names the tool's key prefix, the ticket, the order and the part
  (``refund:ticket:<id>/<order>/<n>``): the same for every retry of it and in every run of the ticket, so a
  retried or replayed payment cannot pay twice, and the workflow, whose history does not expire, counts the
  parts instead of a key that does. A part whose outcome is unknown keeps its key, so asking again cannot pay
  again; a known outcome moves on to the next part.
- **A person where the rules say.** Above the approval limit, past it with what the ticket paid back already,
  or a further part of an order paid back before (by this ticket, or refunded by any, as the looked-up order
  says): splitting a payment, switching tools, or asking again in a new ticket does not dodge a person. A
  payment needing none is still held to the policy's limits across tickets where it is booked.
- **Unknown outcomes.** A payment whose outcome is unknown is settled under its key by the activity its tool
  declares (``PayoutKind.settled_by``) before the model hears anything: paid, or, if not, the key is closed so that
  a late attempt cannot pay either.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from typing import Protocol, cast

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic import NonNegativeInt

    from activities.contracts.approvals import Settlement
    from activities.contracts.fields import Snapshot
    from activities.contracts.limits import SETTLEMENT_REASON_CHARS
    from activities.contracts.names import NEEDS_APPROVAL, POLICY_CHANGED
    from activities.contracts.policy import Limits
    from activities.contracts.ticket import RefundRecord, TicketInput
    from activities.contracts.world import RefundReceipt, RefundRequest
    from activities.tools import PayoutKind, Tool
    from workflows import timeouts
    from workflows.approval_rules import Ask, Refused, Unattended, Verdict, decide

from workflows.approval_gate import ApprovalGate
from workflows.failures import ToolError, cause, is_refusal
from workflows.ownership import CustomerOrders, run
from workflows.rules import Rules, RulesInForce

SETTLED = cast(type, RefundReceipt | None)
"""What a settling activity returns: the payment made under the key, or None (and the key closed)."""
POLICY_READS_PER_PAYOUT = 3
"""How often one payout reads the policy again after a booking refused it as judged by another: a policy changed
once is read once; workers still disagreeing after three reads are a rollout in progress, and nothing is paid."""


class Payment(Protocol):
    """The arguments of every paying tool (``IssueRefundArgs``, ``IssueStoreCreditArgs``): which order, how much."""

    @property
    def order_id(self) -> str: ...
    @property
    def amount_cents(self) -> int: ...


class PayoutsSnapshot(Snapshot):
    """What a run hands the next of the ticket's payments: those made, and the parts settled per order."""

    paid: list[RefundRecord] = []
    parts: dict[str, NonNegativeInt] = {}
    """Per order, the parts whose outcome is known (paid, or settled as not made): the next key counts on."""
    paid_before_turn: NonNegativeInt = 0
    """Payments made before the turn in progress (``Payouts.turn_begins``)."""

    newer = frozenset({"paid_before_turn"})  # 1.4.0: runs before kept it as the replies' ``refunds_before``


class Payouts:
    """The ticket's payments back to the customer. Given the ticket, the rules it is judged by, the approval gate
    a payment waits at, and the customer's orders every payment is checked against."""

    def __init__(self, ticket: TicketInput, rules: RulesInForce, gate: ApprovalGate, orders: CustomerOrders) -> None:
        self._ticket = ticket
        self._rules = rules
        self._gate = gate
        self._orders = orders
        self.paid: list[RefundRecord] = []
        self._paid_before_turn = 0
        self._parts: dict[str, int] = {}
        self._unsettled: set[str] = set()
        """Keys of parts sent whose outcome is unknown: a replay under one is no new payment."""

    def turn_begins(self) -> None:
        """A reply begins a turn: what it pays is counted from here (``paid_this_turn``)."""
        self._paid_before_turn = len(self.paid)

    @property
    def paid_this_turn(self) -> list[RefundRecord]:
        """The payments of the turn in progress: whether it ends declined is judged by its own."""
        return self.paid[self._paid_before_turn :]

    def snapshot(self) -> PayoutsSnapshot:
        return PayoutsSnapshot(paid=self.paid, parts=self._parts, paid_before_turn=self._paid_before_turn)

    def restore(self, snapshot: PayoutsSnapshot) -> None:
        self.paid = list(snapshot.paid)
        self._parts = dict(snapshot.parts)
        self._paid_before_turn = snapshot.paid_before_turn

    async def pay(self, tool: Tool, args: Payment) -> str:
        """A payment back to the customer (a refund, a store credit): the order checked, a person asked where the
        rules say, paid under its part's key, an unknown outcome settled, and counted toward the ticket's total.

        It is judged by the policy as the run last read it, with no read of its own where it needs no person, since
        the booking refuses a payout judged by any policy but the one in force where it is booked
        (``PolicyChangedError``: nothing paid), and the policy is then read again and the payout judged again. A
        payout that asks a person, or is refused, is judged by the policy read now (or just confirmed by a
        booking), so a request names the approvers in force. Workers that keep disagreeing about the policy (a
        rollout of a new one half done) pay nothing without a person: the model hears so."""
        order = await self._orders.own(args.order_id)
        rules, current = self._rules.rules, False
        for _ in range(POLICY_READS_PER_PAYOUT):
            verdict = decide(args.amount_cents, order, rules, ticket_paid=self.paid)
            if isinstance(verdict, Unattended):
                try:
                    return await self._pay_part(tool, args, unattended=rules.limits, policy=rules.digest)
                except ActivityError as error:
                    if _policy_changed(error):
                        rules, current = await self._rules.read(starting=False), True
                        continue
                    if not _needs_approval(error):
                        raise
                    # the booking found this policy in force (it checks that first) and a limit across tickets met
                    verdict = decide(args.amount_cents, order, rules, ticket_paid=self.paid, limit_met=cause(error))
                    current = True
            if not current:
                rules, current = await self._rules.read(starting=False), True
                continue
            return await self._pay_asked(tool, args, verdict, rules)
        raise ToolError(
            f"The {_payout(tool).noun} of {self._orders.money(args.amount_cents, args.order_id)} on order "
            f"{args.order_id} was not made: the desk's money policy changed while it was being made. Nothing was "
            "paid; it may be asked for again in a few minutes."
        )

    async def _pay_asked(self, tool: Tool, args: Payment, verdict: Verdict, rules: Rules) -> str:
        """A payment that needs a person (``Ask``), or is refused with nobody asked (``Refused``)."""
        if isinstance(verdict, Ask):
            verdict = await self._as_the_ledger_has_it(args, verdict, rules)
        currency = self._orders.currency(args.order_id)
        if isinstance(verdict, Refused):
            await self._gate.refuse(args.amount_cents, currency, verdict.why, _payout(tool).noun)
        assert isinstance(verdict, Ask), "a limit across tickets met asks for a person: never unattended again"
        workflow.logger.info("payment waits for a person", extra={"why": verdict.why, "tool": tool.name})
        request_id = await self._gate.wait(
            args.amount_cents,
            args.order_id,
            self._ticket.options,
            rules,
            customer=self._ticket.customer_email,
            why=verdict.why,
            currency=currency,
            ask=verdict,
            noun=_payout(tool).noun,
        )
        return await self._pay_approved(tool, args, request_id)

    async def _as_the_ledger_has_it(self, args: Payment, asked: Ask, rules: Rules) -> Verdict:
        """``asked`` judged again by the order as the ledger has it now (looked up again): refused, with nobody asked,
        where what was paid back since the run looked it up (by another ticket, or a payout this ticket's booking
        refused as paid back already) leaves too little of the charge. A person is asked only for money an answer can
        still pay; a person still asked is asked as ``asked`` says, since a lookup never makes a payout need fewer."""
        order = await self._orders.own(args.order_id, look_up=True)
        again = decide(args.amount_cents, order, rules, ticket_paid=self.paid)
        return again if isinstance(again, Refused) else asked

    async def _pay_approved(self, tool: Tool, args: Payment, request_id: str) -> str:
        """Make a payment its request's people approved, and tell whoever answered what came of it: the money's word
        (``Settlement``: paid under its id, refused with the booking's reason, or still open), not the approval's."""
        settlement = functools.partial(
            Settlement,
            request_id=request_id,
            payout=_payout(tool).noun,
            amount_cents=args.amount_cents,
            currency=self._orders.currency(args.order_id),
            order_id=args.order_id,
        )
        try:
            text = await self._pay_part(tool, args)
        except ToolError as error:  # refused for good, or settled as not made
            said = str(error)
            self._gate.settled(request_id, said, settlement(outcome="refused", reason=_reason(said)))
            raise
        except ActivityError as error:
            said, outcome = cause(error), "refused" if is_refusal(error) else "open"
            self._gate.settled(request_id, said, settlement(outcome=outcome, reason=_reason(said)))
            raise
        made = next(r for r in reversed(self.paid) if (r.tool, r.order_id) == (tool.name, args.order_id))
        self._gate.settled(request_id, text, settlement(outcome="paid", payout_id=made.refund_id))
        return text

    async def _pay_part(
        self, tool: Tool, args: Payment, *, unattended: Limits | None = None, policy: str | None = None
    ) -> str:
        """Make the payment (a person approved it, or it needed none: then it is held to ``unattended``, the
        limits across tickets, and booked only where ``policy`` is in force), under the key its rule gives it."""
        payout = _payout(tool)
        part = self._parts.get(args.order_id, 0) + 1
        key = f"{payout.key}:ticket:{self._ticket.ticket_id}/{args.order_id}/{part}"
        try:
            text = await self._paid(tool, args, key, unattended, policy)
        except ActivityError as error:
            if _needs_approval(error) or _policy_changed(error):  # refused before anything was booked: same part
                raise
            # outcome unknown (not reconciled): the part keeps its key for the next ask
            self._unsettled.add(key)
            raise
        except ToolError:  # refused for good, or settled as not made: the next ask is the next part
            self._parts[args.order_id] = part
            raise
        self._parts[args.order_id] = part
        return text

    async def _paid(
        self, tool: Tool, args: Payment, key: str, unattended: Limits | None = None, policy: str | None = None
    ) -> str:
        """Pay, settle an unknown outcome, and count it. A cancel of the ticket does not cut this short: it waits
        for the payment to end paid and counted, or refused for good, and then ends the ticket."""
        request = RefundRequest(
            order_id=args.order_id,
            amount_cents=args.amount_cents,
            idempotency_key=key,
            customer_email=self._ticket.customer_email if unattended else None,  # counted only when unattended
            limits=unattended,
            ticket_id=self._ticket.ticket_id,  # the booking writes the payment's audit entry under it
            policy=policy,
        )
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
            receipt: RefundReceipt = await run(tool, request)
        except ActivityError as error:
            receipt = await self._reconcile(tool, request, error)
        key = request.idempotency_key
        paid = self._orders.money(receipt.amount_cents, receipt.order_id)
        number = f"{payout.noun} #{receipt.refund_id}"
        if any((r.tool, r.refund_id) == (tool.name, receipt.refund_id) for r in self.paid):
            # a replay is never counted twice
            return (
                f"{number[:1].upper()}{number[1:]} of {paid} on order {receipt.order_id} was "
                "already made and is counted once; nothing more was paid."
            )
        order = self._orders.get(request.order_id)
        assert order is not None, "a payment is made only on an order the run owns: ``pay`` looks it up first"
        self.paid.append(
            RefundRecord(
                refund_id=receipt.refund_id,
                order_id=receipt.order_id,
                amount_cents=receipt.amount_cents,
                currency=order.currency,
                tool=tool.name,
            )
        )
        self._orders.paid_back(receipt.order_id, receipt.amount_cents)
        if receipt.replayed and key in self._unsettled:
            self._unsettled.discard(key)
            return (
                f"{payout.done} {paid} on order {receipt.order_id} ({number}): "
                "an earlier request whose answer was lost had made it; nothing more was paid."
            )
        return f"{payout.done} {paid} on order {receipt.order_id} ({number})."

    async def _reconcile(self, tool: Tool, request: RefundRequest, error: ActivityError) -> RefundReceipt:
        """A payment that failed without a refusal (timed out, out of retries) may well have been paid: ask
        the ledger that keeps the money what it recorded under the key (the tool's ``settled_by`` activity), and
        tell the model that, not "the tool failed".

        Without this, the model hears of a failure and asks for the payment again: the part's key keeps that from
        paying twice, but the model would have told the customer the payment failed. "Not found" is the truth when
        asked: every attempt has been given up on by then, and one that outlives its timeout finds its key closed
        by the question (the crash lab's timed-out rows show both, ``tests/test_timed_out_refunds.py``).
        """
        payout = _payout(tool)
        key = request.idempotency_key
        if is_refusal(error):
            raise error
        found: RefundReceipt | None = await workflow.execute_activity(
            payout.settled_by, key, result_type=SETTLED, **timeouts.attempt(payout.settled_by)
        )
        workflow.logger.warning(
            "payment outcome unknown, reconciled",
            extra={"cause": cause(error), "key": key, "tool": tool.name, "id": found.refund_id if found else None},
        )
        amount = self._orders.money(request.amount_cents, request.order_id)
        asked = f"The {payout.noun} of {amount} on order {request.order_id}"
        if found is None:
            raise ToolError(
                f"{asked} was not made: {payout.keeper} did not answer in time ({cause(error)}) and has no "
                f"{payout.noun} under this request's key."
            )
        if (found.order_id, found.amount_cents) != (request.order_id, request.amount_cents):
            held = self._orders.money(found.amount_cents, found.order_id)
            raise ToolError(
                f"{asked} was not made: {payout.keeper} holds {payout.noun} #{found.refund_id} of {held} on "
                f"{found.order_id} under the same key, and refuses a key reused for another amount."
            )
        return found


def _reason(said: str) -> str:
    """Why a payout was not made, as a settlement keeps it: its head, within ``SETTLEMENT_REASON_CHARS``."""
    return said if len(said) <= SETTLEMENT_REASON_CHARS else f"{said[: SETTLEMENT_REASON_CHARS - 1]}…"


def _needs_approval(error: ActivityError) -> bool:
    """Whether the ledger refused a payment without a person because it would pass a limit across tickets."""
    return isinstance(error.cause, ApplicationError) and error.cause.type == NEEDS_APPROVAL


def _policy_changed(error: ActivityError) -> bool:
    """Whether the booking refused a payment without a person judged by another policy than the one in force."""
    return isinstance(error.cause, ApplicationError) and error.cause.type == POLICY_CHANGED


def _payout(tool: Tool) -> PayoutKind:
    assert tool.payout is not None, f"{tool.name} pays, so it declares its payout"
    return tool.payout
