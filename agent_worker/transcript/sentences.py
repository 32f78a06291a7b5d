"""A transcript in words for people: the sentences a ticket's page tells its entries in, where the terminal
shows the raw form ("The agent asked for a refund of USD 49.00 on order A-1001", not ``issue_refund(...)``).

A payout is told by the kind its tool declares (``Entry.payout``, which the reader set from its registry of
tools): "a store credit of ...", "Credited ...", "declines the store credit of ...". No paying tool is named here,
so one declared anywhere, a test's included, is told in its own words."""

from __future__ import annotations

from typing import Any

from activities.contracts.approvals import ApprovalDecision, ApprovalRecord
from activities.contracts.fields import amount
from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.ticket import Outcome, Status
from activities.tools import (
    LOOKUP_ORDER,
    ORDER_EVENTS,
    SEND_EMAIL,
    SHIPPING_STATUS,
    WAIT_FOR_DELIVERY_SCAN,
    PayoutKind,
)
from agent_worker.transcript.entry import Entry

ASKED = {
    LOOKUP_ORDER.name: "The agent asked to look up order {order_id}",
    ORDER_EVENTS.name: "The agent asked for the events of order {order_id}",
    SHIPPING_STATUS.name: "The agent asked where the parcel of order {order_id} is",
    WAIT_FOR_DELIVERY_SCAN.name: "The agent asked to wait for news of order {order_id}",
}
"""The tools whose call says all it needs with the order it is about."""


def plainly(entry: Entry, currency: str | None = None) -> str:  # noqa: PLR0911 - one sentence per kind
    """An entry as a person at the desk reads it: a sentence, not a call or a JSON object ("The agent asked to
    refund USD 49.00 on order A-1001"). Entries that already read as words are told as they are; the raw form
    stays in ``entry.text``, for a page's details and for the terminal."""
    detail = entry.detail if isinstance(entry.detail, dict) else {}
    noun = _noun(entry.payout)
    if entry.kind == "asks":
        return asked_plainly(detail, currency, entry.payout)
    if entry.kind == "result" and detail:
        return _result_plainly(entry.name, detail, currency, entry.payout)
    if entry.kind == "failed":
        return f"The step {entry.name} did not finish: {entry.text.removeprefix('the activity failed: ')}"
    if entry.kind == "signal" and entry.name == APPROVE_SIGNAL and detail:
        return _answer_plainly(detail, "by signal: the approver is as the sender claimed", currency, noun)
    if entry.kind == "signal":
        return f"The ticket received the signal {entry.name}"
    if entry.kind == "answer" and detail:
        return _answer_plainly(detail, "signed in to the approval inbox", currency, noun)
    if entry.kind == "approval" and isinstance(entry.detail, int):
        return f"A {noun} of {amount(entry.detail, currency)} waits for a person"
    if entry.kind == "update":
        return f"The ticket took the update {entry.name}"
    if entry.kind == "step":
        return "The agent asks the model what to do next"
    return entry.text


def _noun(payout: PayoutKind | None) -> str:
    """What the payout is called: its declared noun, ``payout`` where no tool declares it."""
    return payout.noun if payout is not None else "payout"


def asked_plainly(call: dict[str, Any], currency: str | None = None, payout: PayoutKind | None = None) -> str:
    """A tool the model asked for (``{"name", "input", ...}``), as a sentence; ``payout``, the kind the tool
    declares if it pays."""
    name, args = str(call.get("name", "")), call.get("input") or {}
    args = args if isinstance(args, dict) else {}
    cents = args.get("amount_cents")
    if payout is not None and isinstance(cents, int):
        return f"The agent asked for a {payout.noun} of {amount(cents, currency)} on order {args.get('order_id')}"
    if name == SEND_EMAIL.name:
        return f"The agent asked to email {args.get('to') or 'the customer'}: \u201c{args.get('subject', '')}\u201d"
    if name in ASKED and args.get("order_id"):
        return ASKED[name].format(order_id=args["order_id"])
    return f"The agent asked to use {name}"


def _result_plainly(name: str, result: dict[str, Any], currency: str | None, payout: PayoutKind | None) -> str:
    def cents(key: str) -> str:
        value = result.get(key)
        return amount(value, currency) if isinstance(value, int) else "?"

    if name == LOOKUP_ORDER.name:
        return (
            f"Looked up order {result.get('order_id')}: charged {cents('amount_cents')}, refunded before "
            f"{cents('refunded_cents')}, customer {result.get('customer_email')}"
        )
    if payout is not None:
        again = " (made before under the same key: not paid twice)" if result.get("replayed") else ""
        number = f"{payout.noun} #{result.get('refund_id')}"
        return f"{payout.done} {cents('amount_cents')} on order {result.get('order_id')} ({number}){again}"
    if name == SEND_EMAIL.name:
        again = " (sent before: not sent twice)" if result.get("replayed") else ""
        return f"Emailed {result.get('to')} (email #{result.get('email_id')}){again}"
    if name in {ORDER_EVENTS.name, SHIPPING_STATUS.name} and "content" in result:
        return f"{'Order events' if name == ORDER_EVENTS.name else 'Shipping'}: {result['content']}"
    return f"The step {name} finished"


def _answer_plainly(answer: dict[str, Any], how: str, currency: str | None, noun: str) -> str:
    cents = answer.get("amount_cents")
    shown = amount(cents, currency) if isinstance(cents, int) else "an amount"
    verb = "approves" if answer.get("approved") else "declines"
    request = f" (request {answer['request_id']})" if answer.get("request_id") else ""
    return f"{answer.get('approver') or 'Someone'}, {how}, {verb} the {noun} of {shown}{request}"


def decided_plainly(record: ApprovalRecord, currency: str | None = None, payout: str = "payout") -> str:
    """An answer the ticket recorded about a ``payout`` (its noun: ``refund``, ``store credit``, as the request
    names it), as a person reads it. A timeout is what it is, not an answer: nobody sent it, by no channel, so it
    names neither (the record's approver is empty and its channel meaningless)."""
    request = f"request {record.request_id}: " if record.request_id else ""
    shown = amount(record.amount_cents, currency) if record.amount_cents is not None else "the amount asked"
    if record.decision is ApprovalDecision.TIMED_OUT:
        return f"{request}nobody answered by {record.at:%Y-%m-%d %H:%M} UTC; the {payout} of {shown} was not made"
    via = "signed in, approval inbox" if record.channel == "web" else "by signal, as claimed"
    who = f"{record.approver or 'an unknown sender'} ({via})"
    at = f"at {record.at:%Y-%m-%d %H:%M} UTC: "
    request = f"request {record.request_id}, {at}" if record.request_id else at
    if record.decision is ApprovalDecision.REJECTED:
        return f"{request}an answer from {who} was rejected: {record.reason}"
    if record.decision is ApprovalDecision.PARTLY_APPROVED:
        return f"{request}{shown} approved by {who}, approval {record.reason}; nothing is paid by it alone"
    because = f": {record.reason}" if record.decision is ApprovalDecision.DECLINED and record.reason else ""
    return f"{request}{shown} {record.decision.value} by {who}{because}"


def unanswered_plainly(outcome: Outcome, currency: str | None = None) -> str | None:
    """What nobody answered, if the ticket closed because a refund waited past its deadline with no answer: the
    outcome's own words ("request R1: nobody answered by 2026-12-01 09:14 UTC; the refund of USD 49.00 was not
    made"), or for a run before 1.2.0's ``unanswered-closing`` patch, which closed it as ``declined``, the same
    words read from its approvals (a timeout, and nobody who declined). None for any other ending."""
    if outcome.status is Status.UNANSWERED and outcome.unanswered:
        return outcome.unanswered
    if outcome.status is not Status.DECLINED or outcome.refunds:
        return None
    if any(a.decision is ApprovalDecision.DECLINED for a in outcome.approvals):
        return None
    timed_out = [a for a in outcome.approvals if a.decision is ApprovalDecision.TIMED_OUT]
    return decided_plainly(timed_out[-1], currency, "refund") if timed_out else None  # the only payout before 1.2.0
