"""The operator commands, as a terminal shows them: list tickets, show one, approve or decline a refund, start,
cancel, retry a ticket, pass on a customer's reply.

Each is what a ``temporal`` CLI user would type, made readable: ``tickets`` is ``temporal workflow list`` over
Temporal's visibility store (so it works with no worker running; ``--stuck`` adds what the run's description and
history say of its failing workflow task or activity), ``show`` reads the run's history (plus a query while it runs),
``approve`` is ``temporal workflow signal --name approve``, ``reply`` is ``temporal workflow update execute --name
customer_message``, and ``retry`` is ``temporal workflow reset`` to the last model call. The calls themselves are
``agent_worker.tickets``'s; this module words what came of them, and gives each its exit code: 0 done, 1 refused
(by the ticket or the server), 2 bad input; ``approve`` says what the ticket made of the answer (``APPROVE_EXITS``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from pydantic import ValidationError
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.service import RPCError

from activities.contracts.approvals import Approval, ApprovalDecision, ApprovalRequest, Settlement
from activities.contracts.fields import amount, describe_errors
from activities.contracts.ticket import CustomerMessage, Outcome, TicketInput, TicketState, Waiting
from activities.tools import TOOLS
from agent_worker import tickets
from agent_worker.cli.commands import settings
from agent_worker.client import connect
from agent_worker.config import Settings
from agent_worker.exits import ApproveExit
from agent_worker.stuck import STUCK_AFTER_FAILURES, StuckTicket, examine, find_stuck
from agent_worker.transcript import currency_of, decided_plainly, orders_of, payout_waited
from agent_worker.transcript.terminal import lines, say
from workflows.patches import Patch

QUERY_TIMEOUT = timedelta(seconds=3)
"""How long ``show`` waits for a worker to answer what the ticket waits for; the history needs none."""

Operation = Callable[[Client, Settings, argparse.Namespace], Awaitable[int | None]]


def operator_command(operation: Operation) -> Callable[[argparse.Namespace], int]:
    """An operator command: ``operation`` with a client connected as the settings, ``--address`` and
    ``--namespace`` say, and the refusals it may meet turned into their words and exit codes."""

    def command(args: argparse.Namespace) -> int:
        return asyncio.run(operate(operation, settings(), args))

    command.__doc__ = operation.__doc__
    return command


async def operate(operation: Operation, settings: Settings, args: argparse.Namespace) -> int:
    client = await connect(settings, args.address, args.namespace)
    try:
        return await operation(client, settings, args) or 0
    except ValidationError as error:
        print(f"not sent: {describe_errors(error)}", file=sys.stderr)
        return 2
    except tickets.NotWaitingError as error:
        print(not_waiting(error), file=sys.stderr)
        return 1
    except tickets.NotRetryableError as error:
        print(error, file=sys.stderr)
        return 1
    except WorkflowUpdateFailedError as error:  # the ticket's validator refused it
        print(f"refused: {cause_of(error)}", file=sys.stderr)
        return 1
    except RPCError as error:  # no such ticket, or it is closed
        print(f"refused: {error.message}", file=sys.stderr)
        return 1


def cause_of(error: BaseException) -> str:
    while error.__cause__ is not None:
        error = error.__cause__
    return str(error)


@operator_command
async def list_tickets(client: Client, _settings: Settings, args: argparse.Namespace) -> None:
    """``tickets [--waiting-for KIND] [--stuck]``: one line a ticket, from visibility."""
    if args.stuck:
        await list_stuck(client, limit=args.limit)
        return
    async for run in tickets.listed(client, tickets.query(waiting_for=args.waiting_for), limit=args.limit):
        status = run.status.name.lower() if run.status else "unknown"
        waits = run.awaiting_cents
        say(
            f"{run.workflow_id:<40} {status:<11} {when(run.started)}"
            + (f"  waiting for approval of {amount_of(waits, run.request)}" if waits else "")
            + (f" ({describe_request(run.request)})" if waits and run.request else "")
            + (f"  {describe_waiting(run.waiting)}" if run.waiting and run.state else "")
        )


async def list_stuck(client: Client, *, limit: int) -> None:
    """One line per stuck ticket; on stderr, how they were found (the server's report, or every running ticket)."""
    search = await find_stuck(client, limit=limit)
    if not search.reported_by_server:
        print(
            f"(this server does not set {tickets.REPORTED_PROBLEMS_ATTRIBUTE}: read the pending workflow task and "
            f"activities of {search.examined} running tickets)",
            file=sys.stderr,
            flush=True,
        )
    for ticket in search.tickets:
        say(describe_stuck(ticket))


@operator_command
async def show(client: Client, _settings: Settings, args: argparse.Namespace) -> None:
    """``show T-1``: the transcript of every run (a run that ended without an outcome says why), then what it waits
    for (a worker asked), that it is stuck, or its outcome."""
    workflow_id = tickets.workflow_id_of(args.ticket)
    description = await tickets.describe(client, workflow_id)
    say(f"{workflow_id}: {description.status.name.lower() if description.status else 'unknown'}")
    told = await tickets.transcript(client, workflow_id, description.run_id)
    for entry in told:
        say(*lines(entry))
    money = await tickets.settlements_in(description)
    if description.status != WorkflowExecutionStatus.COMPLETED:  # a completed one tells them with its approvals
        for settlement in money.values():
            say(f"request {settlement.request_id}: approved; {settlement.said()}")
    if description.status == WorkflowExecutionStatus.RUNNING:
        stuck = await examine(client, workflow_id, description.run_id, at_least=STUCK_AFTER_FAILURES + 1)
        if stuck is not None:  # a query would wait on what is stuck, or find no worker that can answer it
            say("", stuck_sentence(stuck))
            return
        try:
            request = await tickets.awaiting_approval(client, workflow_id, rpc_timeout=QUERY_TIMEOUT)
        except RPCError as error:  # a query needs a worker; the history above does not
            say(f"(no worker answered the query: {error.message or error.status.name})")
        else:
            say(
                f"waiting for approval of {amount_of(request.amount_cents, request)} ({describe_request(request)})"
                if request
                else "not waiting for an approval"
            )
    elif description.status == WorkflowExecutionStatus.COMPLETED:
        say_outcome(
            await tickets.outcome(client, workflow_id), currency_of(orders_of(told)), money, payout_waited(told)
        )


def say_outcome(outcome: Outcome, currency: str | None, money: dict[str, Settlement], waited: str) -> None:
    """A closed ticket's outcome: its status and answer, its payouts by their kind, and every answer with, for an
    approval, what the money did (``money``, by request id); a request nobody answered is told as the payout
    ``waited`` for."""
    say("", f"status {outcome.status.value}, {outcome.steps} steps, {outcome.model_calls} model calls")
    say(f"answer: {outcome.answer}")
    for refund in outcome.refunds:
        shown = amount(refund.amount_cents, refund.currency)
        say(f"{TOOLS.payout_noun(refund.tool)} #{refund.refund_id}: {shown} on {refund.order_id}")
    for approval in outcome.approvals:
        asked = "" if approval.amount_cents is None else f" {amount(approval.amount_cents, currency)}"
        if approval.decision is ApprovalDecision.TIMED_OUT:  # no answer: nobody to name, no channel
            say(f"approval {approval.decision.value}{asked}: {decided_plainly(approval, currency, waited)}")
            continue
        paid = money.get(approval.request_id or "") if approval.decision is ApprovalDecision.APPROVED else None
        say(
            f"approval {approval.decision.value}{asked} by {approval.approver} at {approval.at}"
            + (f" ({approval.reason})" if approval.reason else "")
            + (f": {paid.said()}" if paid else "")
        )


APPROVE_EXITS = {
    ApprovalDecision.APPROVED: ApproveExit.DONE,
    ApprovalDecision.DECLINED: ApproveExit.DONE,
    ApprovalDecision.PARTLY_APPROVED: ApproveExit.PARTLY_APPROVED,
    None: ApproveExit.NOT_JUDGED,
}
"""``approve``'s exit code for what the ticket recorded of the answer; for an approval, what the money did decides
(``PAID_EXITS``)."""
PAID_EXITS = {"paid": ApproveExit.DONE, "refused": ApproveExit.PAYMENT_REFUSED, "open": ApproveExit.PAYMENT_OPEN}
"""``approve``'s exit code for an approval, by what the money did: 0 only for a payout booked."""


@operator_command
async def approve(client: Client, _settings: Settings, args: argparse.Namespace) -> int:
    """``approve T-1 --amount-cents N --approver NAME [--decline] [--request-id R1]``: the ``approve`` signal, what
    the ticket made of it, and for an approval what the money did (``ApproveExit``)."""
    given = Approval(
        amount_cents=args.amount_cents, approved=not args.decline, approver=args.approver, request_id=args.request_id
    )
    workflow_id = tickets.workflow_id_of(args.ticket)
    try:
        answered = await tickets.answer(client, workflow_id, given)
    except tickets.AnswerRefusedError as refused:
        print(not_counted(refused), file=sys.stderr)
        return ApproveExit.NOT_COUNTED
    if answered.decision is not ApprovalDecision.APPROVED:
        say(told(answered))
        return APPROVE_EXITS[answered.decision]
    money = await tickets.settled(client, workflow_id, answered.answer.request_id or "")
    say(told(answered, money))
    return PAID_EXITS[money.outcome] if money is not None else ApproveExit.PAYMENT_OPEN


def told(answered: tickets.Answered, money: Settlement | None = None) -> str:
    """What the ticket made of an answer it counted, and for an approval what the money did (``money``: what the
    ticket said of the payment; None, nothing yet), or that it has not judged it yet."""
    given, request = answered.answer, answered.request
    shown = amount_of(given.amount_cents, request)
    verb = "approved" if given.approved else "declined"
    sent = f"{verb} {shown} ({given.request_id}) on {answered.workflow_id} as {given.approver}"
    if answered.decision is ApprovalDecision.APPROVED:
        if money is None:
            return (
                f"{sent}: the ticket took it; the {request.payout} is still open (not paid yet, or not known yet: "
                f"agent-worker show {answered.workflow_id} tells what came of it)"
            )
        return f"{sent}: the ticket took it; {money.said()}"
    if answered.decision is ApprovalDecision.DECLINED:
        return f"{sent}: the ticket took it; the {request.payout} is not made"
    if answered.decision is ApprovalDecision.PARTLY_APPROVED:
        progress = f"{len(request.approved_by)} of {request.approvals_needed}"
        return f"{sent}: approval {progress} recorded; nothing is paid until another person approves"
    return (
        f"{sent}: sent, not judged yet (no worker took it within {tickets.JUDGED_WITHIN.seconds} s); "
        f"agent-worker show {answered.workflow_id} tells what the ticket decided"
    )


def not_counted(refused: tickets.AnswerRefusedError) -> str:
    """Why the ticket does not count an answer, and whether it was sent."""
    if refused.sent:
        return f"sent, but {refused.workflow_id} did not count it: {refused.reason}"
    return f"not sent: {refused.workflow_id} would not count it: {refused.reason}"


def not_waiting(error: tickets.NotWaitingError) -> str:
    request = error.request
    if request is None:
        return f"{error.workflow_id} is not waiting for an approval; nothing was sent"
    return (
        f"{error.workflow_id} waits for {amount_of(request.amount_cents, request)} ({describe_request(request)}), "
        f"not {amount_of(error.shown_cents, request)}; nothing was sent"
    )


@operator_command
async def start(client: Client, settings: Settings, args: argparse.Namespace) -> int:
    """``start ticket.json``: a ticket checked here first, its options against the money policy too, so bad input is
    refused before anything starts."""
    try:
        ticket = TicketInput.model_validate_json(args.input)  # the file's text: read as the command line was parsed
    except ValidationError as error:
        print(f"not started: {describe_errors(error)}", file=sys.stderr)
        return 2
    if looser := looser_than_policy(ticket, settings):
        print(f"not started: {looser}", file=sys.stderr)
        return 2
    try:
        started = await tickets.start(client, ticket, settings.task_queue)
    except tickets.DuplicateTicketError as error:
        print(error, file=sys.stderr)
        return 1
    if started.already_running:
        say(f"{started.workflow_id} is already running (run {started.run_id}); nothing was started")
    else:
        say(f"started {started.workflow_id} (run {started.run_id})")
    return 0


def looser_than_policy(ticket: TicketInput, settings: Settings) -> str | None:
    """What the workflow would fail the ticket for at once (``InvalidTicketInput``) under the policy these settings
    name: an option looser than it, checked by the workflow's own rule (``rules_for``, pure); None if none. The
    workers' file is the one in force, so the command names the one it judged by."""
    # Only here: the workflow's rules load the audit trail's database, which no other operator command needs.
    from agent_worker.wiring import policy_in_force  # noqa: PLC0415
    from workflows.rules import LooserThanPolicyError, rules_for  # noqa: PLC0415

    in_force = policy_in_force(settings)
    try:
        rules_for(ticket.options, in_force, starting=True)
    except LooserThanPolicyError as error:
        source = f"AGENT_POLICY_FILE={settings.policy_file}" if settings.policy_file else "AGENT_POLICY_FILE unset"
        return f"{error} (the money policy {in_force.digest}: {source})"
    return None


@operator_command
async def cancel(client: Client, _settings: Settings, args: argparse.Namespace) -> None:
    """``cancel T-1 --reason WHY [--by NAME]``: the ticket's audit trail records who asked, and why."""
    workflow_id = tickets.workflow_id_of(args.ticket)
    await tickets.cancel(client, workflow_id, reason=args.reason, by=args.by)
    say(f"cancel requested for {workflow_id} by {args.by}: {args.reason}")


@operator_command
async def reply(client: Client, _settings: Settings, args: argparse.Namespace) -> None:
    """``reply T-1 TEXT [--wait]``: the customer's reply, and with ``--wait`` the agent's answer to it."""
    workflow_id = tickets.workflow_id_of(args.ticket)
    receipt = await tickets.reply(client, workflow_id, CustomerMessage(text=args.text))
    say(f"reply taken by {workflow_id}: turn {receipt.turn}")
    if args.wait:
        answered = await tickets.answer_to(client, workflow_id, receipt.turn)
        say(f"answer ({answered.status.value}): {answered.answer}")


@operator_command
async def retry(client: Client, _settings: Settings, args: argparse.Namespace) -> None:
    """``retry T-1 [--by NAME]``: a closed ticket reset to its last model call."""
    workflow_id = tickets.workflow_id_of(args.ticket)
    run_id = await tickets.retry(client, workflow_id, by=args.by)
    say(f"{workflow_id} retried from its last model call by {args.by}: run {run_id}")


def describe_waiting(waiting: Waiting) -> str:
    what = "the customer's reply" if waiting.state is TicketState.WAITING_FOR_CUSTOMER else "an event"
    about = f" about {waiting.order_id}" if waiting.order_id else ""
    return f"waiting for {what}{about} until {when(waiting.until)} UTC"


def stuck_sentence(stuck: StuckTicket) -> str:
    """What ``show`` says of a stuck ticket: what fails, since when, how often, and its last failure."""
    failed = f"failed {stuck.failures} times in a row since {when(stuck.since)} UTC"
    if stuck.activity is not None:
        return f"stuck: its activity {stuck.activity}, retried until it succeeds, {failed}: {stuck.failure}"
    return f"stuck: it does nothing, its workflow task {failed}: {stuck.failure}"


def describe_stuck(ticket: StuckTicket) -> str:
    """One line: the failing workflow task's streak, or the failing activity's, by name, with its last failure."""
    what = f"activity {ticket.activity}: " if ticket.activity else ""
    return (
        f"{ticket.workflow_id:<40} stuck since {when(ticket.since)} UTC, {ticket.failures} failed attempts: "
        f"{what}{ticket.failure}"
    )


def describe_request(request: ApprovalRequest) -> str:
    order = f" on {request.order_id}" if request.order_id else ""
    return f"request {request.request_id}{order}, answer by {when(request.deadline)} UTC"


def amount_of(units: int, request: ApprovalRequest | None) -> str:
    """An amount a request is about, in its order's currency when the request says it."""
    return amount(units, request.currency if request else None)


def when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment else "-"


@operator_command
async def patches(client: Client, _settings: Settings, _args: argparse.Namespace) -> None:
    """``patches``: each patch of the workflow with the release that added it, then the oldest open ticket, from
    visibility (no worker needed). A patch is only for a change that must reach runs mid-turn on their own build,
    and may go once the oldest open ticket started after its release (``docs/changing-workflow-code.md``)."""
    for patch in Patch:
        say(f"{patch.value}  (added in {patch.release})")
    if not list(Patch):
        say("no patch in force: each ticket runs the one path of the build it is pinned to")
    oldest, open_tickets = None, 0
    async for run in tickets.listed(client, tickets.RUNNING_QUERY):  # newest first: the last is the oldest
        oldest, open_tickets = run, open_tickets + 1
    if oldest is None:
        say("no open ticket")
        return
    say(f"oldest open ticket: {oldest.workflow_id}, started {when(oldest.started)} UTC ({open_tickets} open)")
