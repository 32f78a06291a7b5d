"""Answering a ticket in the approval inbox (``POST /ticket/answer?id=ID``): approve, or decline with the reason the
inbox requires, for the person who signed in.

The form says which request, which amount and which decision; who answers is never read from it. The answer is
sent (``sending``), then the person is redirected (303) to the ticket's page, which shows whether the ticket took it
and what came of the refund (``notices``), so a reload never sends it again. An approval above
``confirm_above_cents`` is sent only with the confirmation the inbox asked for first, on a page of its own.
"""

from __future__ import annotations

from typing import Any

import structlog
from pydantic import ValidationError
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from temporalio.client import WorkflowExecutionDescription, WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.service import RPCError

from activities.contracts.approvals import ApprovalRequest, VouchedApproval
from activities.contracts.fields import describe_errors
from activities.contracts.names import APPROVAL_REQUEST_MEMO
from agent_worker import tickets
from agent_worker.inbox.auth import Person
from agent_worker.inbox.desk import NotATicketError
from agent_worker.inbox.formats import now
from agent_worker.inbox.notices import Notice, confirmation, confirmed, seal
from agent_worker.inbox.pages import Pages, forbidden
from agent_worker.inbox.sending import Sender
from agent_worker.inbox.ticket_page import TicketPage

log = structlog.get_logger(__name__)

WITHHELD = "(withheld: a decline's reason is personal data)"
"""What the inbox's log says of a decline the ticket took, in place of its words."""
NO_REASON = (
    "not sent: a decline needs a reason; it goes to the audit trail and to the model, so the customer is told why"
)


class Answering:
    """The answer form's route and the confirmation page, for one inbox's ``Pages``: a form refused before sending
    is answered with the ticket's page (``ticket_page``), an answer sent through ``sender``."""

    def __init__(self, pages: Pages, ticket_page: TicketPage, sender: Sender, *, confirm_above_cents: int) -> None:
        self.pages, self.ticket_page, self.sender = pages, ticket_page, sender
        self.confirm_above_cents = confirm_above_cents

    async def answer(self, request: Request) -> Response:
        """Approve or decline, for the person who signed in: the form says which request, which amount and which
        decision; who answers is never read from it. A form the inbox refuses before sending (no reason for a
        decline) is answered with the page and what is missing; an approval above the confirmation amount without
        this person's confirmation of it, with the page that asks for it; anything sent, with a redirect to the
        ticket's page, carrying what came of it."""
        pages, keys = self.pages, self.pages.auth.keys
        posted = await self._posted(request, max_fields=16)
        if isinstance(posted, Response):
            return posted
        person, form, workflow_id = posted
        fields = answer_of(form, person.name)
        if isinstance(fields, Notice):
            return await self.ticket_page.ticket(request, fields, 400)
        try:
            description = await pages.desk.check(workflow_id)
        except NotATicketError:
            return self.ticket_page.no_ticket(request, person, workflow_id)
        request_waiting = await waiting_of(description)
        if fields["approved"] and fields["amount_cents"] > self.confirm_above_cents:
            about = {
                "binding": person.binding,
                "workflow_id": workflow_id,
                "request_id": fields["request_id"],
                "amount_cents": fields["amount_cents"],
                "now": now(),
            }
            if not confirmed(keys, str(form.get("confirmed", "")), **about):
                return await self.confirm(
                    request, person, description=description, waiting=request_waiting, fields=fields, about=about
                )
        notice = await self.sender.send(workflow_id, fields, request_waiting)
        log.info(
            "inbox answer",
            workflow_id=workflow_id,
            request_id=fields["request_id"],
            approver=person.name,
            signed_in_by=person.how,
            decision="approve" if fields["approved"] else "decline",
            amount_cents=fields["amount_cents"],
            result=notice.kind,
            # A decline the ticket took quotes its reason, personal data the export withholds too.
            said=notice.text if fields["approved"] or notice.kind != "taken" else WITHHELD,
        )
        return self._back_to_the_ticket(person, workflow_id, notice)

    async def verify_sender(self, request: Request) -> Response:
        """Mark the ticket's customer verified, for the person who signed in (``POST /ticket/verify-sender?id=ID``):
        they checked who wrote by the desk's own means, and the ticket's audit trail records who said so. The
        ticket refuses nothing it can take twice: a second press is told the customer was verified already."""
        pages = self.pages
        posted = await self._posted(request, max_fields=4)
        if isinstance(posted, Response):
            return posted
        person, _form, workflow_id = posted
        try:
            await pages.desk.check(workflow_id)
        except NotATicketError:
            return self.ticket_page.no_ticket(request, person, workflow_id)
        try:
            notice = Notice("taken", await tickets.verify_sender(pages.desk.client, workflow_id, by=person.name))
        except WorkflowUpdateFailedError as error:
            notice = Notice("rejected", f"not verified: {error.cause or error}")
        except RPCError as error:
            notice = Notice("error", f"not verified: {error.message}")
        log.info("inbox verified sender", workflow_id=workflow_id, by=person.name, result=notice.kind)
        return self._back_to_the_ticket(person, workflow_id, notice)

    async def _posted(self, request: Request, *, max_fields: int) -> tuple[Person, FormData, str] | Response:
        """A form about a ticket, as every form that acts on one is checked before it is read: sent by a person
        signed in, from this site, with their security token, naming a ticket; else the response refusing it."""
        pages, keys = self.pages, self.pages.auth.keys
        person = await pages.person(request)
        if person is None:
            return pages.must_sign_in(request)
        if not pages.from_here(request):
            return forbidden("refused: this form was sent from another site")
        form = await request.form(max_files=0, max_fields=max_fields)
        if not keys.csrf_ok(person.binding, str(form.get("csrf", ""))):
            return forbidden("refused: the form's security token is missing or not yours; reload the page, try again")
        workflow_id = request.query_params.get("id")
        if not workflow_id:
            return self.ticket_page.no_ticket(request, person, workflow_id)
        return person, form, workflow_id

    def _back_to_the_ticket(self, person: Person, workflow_id: str, notice: Notice) -> Response:
        """The redirect (303) to the ticket's page, carrying what came of the form, sealed for this person."""
        sealed = seal(self.pages.auth.keys, notice, binding=person.binding, workflow_id=workflow_id, now=now())
        return RedirectResponse(self.pages.ticket_url(workflow_id, notice=sealed), status_code=303)

    async def confirm(  # noqa: PLR0913 - the answer, and what the page says about it
        self,
        request: Request,
        person: Person,
        *,
        description: WorkflowExecutionDescription,
        waiting: ApprovalRequest | None,
        fields: dict[str, Any],
        about: dict[str, Any],
    ) -> Response:
        """The page that asks once more before a large approval: the amount, the order and the customer, and the
        one button that sends it, with this person's confirmation of exactly this answer."""
        keys = self.pages.auth.keys
        same = waiting if waiting is not None and waiting.request_id == fields["request_id"] else None
        ticket = await self.pages.desk.ticket_input(description.id, description.run_id)
        context = {
            "person": person,
            "csrf": keys.csrf(person.binding),
            "workflow_id": description.id,
            "ticket": ticket,
            "request_id": fields["request_id"],
            "amount_cents": fields["amount_cents"],
            "order_id": same.order_id if same else "",
            "currency": same.currency if same else None,
            "payout": same.payout if same else "payout",
            "customer": (same.customer_email if same else "") or str(ticket.get("customer_email", "")),
            "confirmation": confirmation(keys, **about),
            "confirm_above_cents": self.confirm_above_cents,
        }
        return self.pages.page(request, "confirm.html", **context)


def answer_of(form: FormData, approver: str) -> dict[str, Any] | Notice:
    """The answer a form asks to send, for ``approver`` (who signed in, never a field of the form), or what is missing
    from it: the request, the amount, the decision, and for a decline its reason, which the inbox requires so that
    the customer can be told why (the contract leaves it optional, for the ``temporal`` CLI's signal)."""
    decision = form.get("decision")
    try:
        amount_cents = int(str(form.get("amount_cents", "")))
    except ValueError:
        amount_cents = -1
    if decision not in {"approve", "decline"} or amount_cents < 0 or not form.get("request_id"):
        return Notice("error", "not sent: the form is incomplete")
    reason = str(form.get("reason", "")).strip()
    if decision == "decline" and not reason:
        return Notice("error", NO_REASON)
    fields = {
        "amount_cents": amount_cents,
        "approved": decision == "approve",
        "approver": approver,
        "request_id": str(form["request_id"]),
        **({"reason": reason} if decision == "decline" else {}),
    }
    try:
        VouchedApproval.model_validate({**fields, "signature": "0" * 64})
    except ValidationError as error:
        return Notice("error", f"not sent: {describe_errors(error)}")
    return fields


async def waiting_of(description: WorkflowExecutionDescription) -> ApprovalRequest | None:
    """The request the ticket's memo says waits, if any (no worker needed)."""
    if description.status != WorkflowExecutionStatus.RUNNING:
        return None
    request: ApprovalRequest | None = await description.memo_value(
        APPROVAL_REQUEST_MEMO,
        None,
        type_hint=ApprovalRequest | None,  # type: ignore[arg-type]
    )
    return request
