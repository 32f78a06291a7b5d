"""An answer sent to its ticket, and what the person is told of it: the ``approve`` Workflow Update, signed for the
person who signed in, and in the desk's words whether the ticket took it, refused it (a passed deadline, an answer
already given) or closed before it came, and what came of the refund."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta
from typing import Any

from temporalio.client import WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from activities import vouching
from activities.contracts.approvals import (
    ApprovalDecision,
    ApprovalReceipt,
    ApprovalRequest,
    Settlement,
    VouchedApproval,
)
from activities.contracts.ticket import Status
from agent_worker import tickets
from agent_worker.inbox.desk import Desk, NotATicketError
from agent_worker.inbox.formats import utc
from agent_worker.inbox.notices import Notice
from agent_worker.transcript import unanswered_plainly

ACCEPT_TIMEOUT = timedelta(seconds=20)
"""How long an answer may wait for a worker to validate it before the person is told none has yet."""
RESULT_TIMEOUT = timedelta(seconds=30)
"""How long the page waits, after the ticket took the answer, for what came of the refund."""
CLOSED_AS = {
    Status.RESOLVED: "it was resolved",
    Status.DECLINED: "it was declined",
    Status.UNANSWERED: "nobody answered its request in time",
    Status.GAVE_UP: "the agent gave up on it",
    Status.FAILED: "it failed and went to a person",
    Status.HANDED_OVER: "it was handed to a person",
    Status.ESCALATED: "it went to a person, past its SLA",
    Status.CANCELLED: "it was cancelled",
}
"""How a closed ticket's outcome is told when an answer reaches it too late."""
TOO_LATE = re.compile(r"^rejected: seen at [^,]+, after request (?P<request>\S+)'s deadline$")
TIMED_OUT = re.compile(r"^rejected: request (?P<request>\S+) was already closed: nobody answered by (?P<at>.+)$")


class Sender:
    """Sends answers through one desk (Temporal), signed with the key the workers check them against."""

    def __init__(self, desk: Desk, signing_key: bytes) -> None:
        self.desk, self.signing_key = desk, signing_key

    async def send(self, workflow_id: str, fields: dict[str, Any], waiting: ApprovalRequest | None) -> Notice:
        """Send the answer (``answer_of``'s), signed, as the ``approve`` update; what the person is told, in the
        desk's words."""
        answer = VouchedApproval.model_validate({**fields, "signature": "0" * 64})
        answer = answer.model_copy(update={"signature": vouching.sign(self.signing_key, workflow_id, answer)})
        verb = "approved" if answer.approved else "declined"
        try:
            async with asyncio.timeout(ACCEPT_TIMEOUT.total_seconds()):
                update = await tickets.send_vouched(self.desk.client, workflow_id, answer)
        except TimeoutError:
            return Notice(
                "pending",
                f"No worker has taken the answer in {ACCEPT_TIMEOUT.seconds} s (a worker checks it first). It may "
                f"still be taken when one runs: this page shows it if it is.",
            )
        except RPCError:  # the ticket closed meanwhile
            return Notice("rejected", f"not taken: {await self.closed_words(workflow_id)}")
        try:
            async with asyncio.timeout(RESULT_TIMEOUT.total_seconds()):
                receipt = await update.result()
        except WorkflowUpdateFailedError as error:
            said = why(error, waiting)
            return Notice("rejected", said or f"not taken: {await self.closed_words(workflow_id)}")
        except TimeoutError:
            return Notice("pending", f"{verb}: the ticket took it, and this page shows what comes of it")
        return told(receipt, await self.settled(workflow_id, receipt))

    async def settled(self, workflow_id: str, receipt: ApprovalReceipt) -> Settlement | None:
        """What the money did for the request an approval decided, as the ticket's memo says (written in the task
        that completed the update); None for another decision, a run before 1.5.0, or a ticket gone meanwhile."""
        if receipt.decision is not ApprovalDecision.APPROVED:
            return None
        try:
            return (await tickets.settlements(self.desk.client, workflow_id)).get(receipt.request_id)
        except RPCError:
            return None

    async def closed_words(self, workflow_id: str) -> str:
        """Why a ticket takes no answers, as the desk says it: "this ticket has closed: it was resolved at ..."."""
        try:
            description = await self.desk.check(workflow_id)
        except NotATicketError:
            return "there is no such ticket any more"
        if description.status == WorkflowExecutionStatus.RUNNING:
            return "the ticket did not take the answer; reload its page to see what it waits for"
        how = f"it {description.status.name.lower().replace('_', ' ')}" if description.status else "it ended"
        if description.status == WorkflowExecutionStatus.COMPLETED:
            try:
                outcome = await tickets.outcome(self.desk.client, workflow_id, run_id=description.run_id)
            except Exception:  # noqa: BLE001 - an outcome of another shape: the status alone says enough
                how = "it completed"
            else:
                if nobody := unanswered_plainly(outcome):  # not "declined": nobody did
                    return f"this ticket has closed at {utc(description.close_time)}: {nobody}"
                how = CLOSED_AS.get(outcome.status, f"it closed as {outcome.status.value}")
        return f"this ticket has closed: {how} at {utc(description.close_time)}"


def told(receipt: ApprovalReceipt, money: Settlement | None) -> Notice:
    """What the person is told of an answer the ticket took: for an approval whose payment was tried, what the money
    did (``money``: paid with its id, refused by the booking with its reason, or still open), never "approved"
    alone."""
    if money is None or money.outcome == "paid":  # the result names the payout's id
        return Notice("taken", f"{receipt.decision.value}; {receipt.result}")
    if money.outcome == "refused":
        return Notice("rejected", f"{receipt.decision.value}, but the payment was refused: {money.said()}")
    return Notice("pending", f"{receipt.decision.value}; {money.said()}")


def why(error: WorkflowUpdateFailedError, waiting: ApprovalRequest | None = None) -> str | None:
    """What the ticket said when it refused the answer ("rejected: request R1 was already answered: ..."), with a
    passed deadline told as the desk tells it; None if the refusal is Temporal's, not the ticket's (the ticket
    closed while the answer was on its way)."""
    cause = error.cause
    if not isinstance(cause, ApplicationError):
        return None
    if (late := TOO_LATE.match(cause.message)) and waiting is not None:
        return f"not taken: the deadline for request {late['request']} passed at {utc(waiting.deadline)}"
    if expired := TIMED_OUT.match(cause.message):
        return (
            f"not taken: the deadline for request {expired['request']} passed at {expired['at'][:16]} UTC; nobody "
            f"had answered, so the {waiting.payout if waiting is not None else 'payout'} was not made"
        )
    return cause.message
