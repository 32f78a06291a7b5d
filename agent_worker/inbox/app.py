"""The approval inbox as a Starlette application: pages rendered on the server, forms that work without script.

Routes, under the base path:

- ``GET /``: the tabs (waiting for approval, for the customer, for an event; stuck; recently closed), from
  visibility, so they work with no worker running; the list refreshes itself every few seconds.
- ``GET /ticket?id=ID``: a ticket's page (the request, the order as looked up, what the agent asked for and why,
  the transcript in sentences), kept current by ``GET /ticket/events?id=ID``, a stream of server-sent events that
  follows the run's history and tells the page when to fetch its live part again. A ticket's id may be any text
  (``/``, ``%``, ``?``, ``#``, ``..``, spaces), so it is never part of a path, which browsers and proxies
  normalise: it rides in the query string, encoded by ``ticket_path`` alone. ``GET /tickets/ID``, the address
  before, still leads there.
- ``POST /ticket/answer?id=ID``: approve or decline (a decline with its reason, which the inbox requires). The
  answer is the ``approve`` Workflow Update, signed for the person who signed in; then a redirect (303) to the
  ticket's page, which shows whether the ticket took it and what came of the refund (``notices``), so a reload
  never sends it again. An approval above ``confirm_above_cents`` is sent only with the confirmation the inbox
  asked for first, on a page of its own.
- ``GET /export.csv?from=YYYY-MM-DD&to=YYYY-MM-DD[&personal=1]``: the answers given over a range of days, as CSV,
  for auditors (``agent_worker.answers``), from the business database's audit trail.
- ``GET|POST /login`` (a throttled attempt is answered 429 with ``Retry-After``), ``POST /logout`` (the session
  ends on the server: a copy of its cookie stops working too); ``GET /healthz`` for a proxy's health check;
  ``/static/`` for the script and the style sheet.

Every page is ``no-store`` and may not be framed; the content security policy lets in no script but the inbox's
own file and no inline script at all, so text from a ticket (a customer's words, the model's) can never run.
Every POST must come from the inbox's own origin and carry the CSRF token of the person sending it.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode, urlsplit

import structlog
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp
from temporalio.client import (
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowUpdateFailedError,
    WorkflowUpdateStage,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from activities import vouching
from activities.business.audit import SqlAuditTrail
from activities.contracts.approvals import AnsweredRequest, Approval, ApprovalReceipt, ApprovalRequest, VouchedApproval
from activities.contracts.fields import amount, describe_errors
from activities.contracts.names import APPROVAL_REQUEST_MEMO, APPROVE_SIGNAL
from activities.contracts.ticket import Outcome, Status
from agent_worker import answers
from agent_worker.codec_server import loopback_name
from agent_worker.inbox.auth import (
    LOGIN_COOKIE,
    SESSION_COOKIE,
    Authenticator,
    Person,
    SignedIn,
    Throttled,
    same_origin,
)
from agent_worker.inbox.desk import TABS, Desk, Listing, NotATicketError
from agent_worker.inbox.filters import FilterError, Filters
from agent_worker.inbox.guard import Guard, Site, peer
from agent_worker.inbox.notices import Notice, confirmation, confirmed, seal, unseal
from agent_worker.inbox.standing import progress, standing, what_yours_does
from agent_worker.transcript import CLOSED, SAID, asked_plainly, decided_plainly, plainly

if TYPE_CHECKING:
    from activities.business.database import Database

log = structlog.get_logger(__name__)

HERE = Path(__file__).parent
ACCEPT_TIMEOUT = timedelta(seconds=20)
"""How long an answer may wait for a worker to validate it before the person is told none has yet."""
RESULT_TIMEOUT = timedelta(seconds=30)
"""How long the page waits, after the ticket took the answer, for what came of the refund."""
REASON_MAX: int = Approval.model_json_schema()["properties"]["reason"]["anyOf"][0]["maxLength"]
"""The longest reason the ``approve`` update takes, from its contract: the form holds the person to it as they type."""
ANSWERED_DAYS = 30
"""How far back "mine" lists the answers the person gave."""
ANSWERED_SHOWN = 50
"""The most of them it lists, the latest first; the export has them all."""
NO_REASON = (
    "not sent: a decline needs a reason; it goes to the audit trail and to the model, so the customer is told why"
)
CLOSED_AS = {
    Status.RESOLVED: "it was resolved",
    Status.DECLINED: "it was declined",
    Status.GAVE_UP: "the agent gave up on it",
    Status.FAILED: "it failed and went to a person",
    Status.HANDED_OVER: "it was handed to a person",
    Status.ESCALATED: "it went to a person, past its SLA",
    Status.CANCELLED: "it was cancelled",
}
"""How a closed ticket's outcome is told when an answer reaches it too late."""


def ticket_path(workflow_id: str, action: str = "", **params: object) -> str:
    """The one way to name a ticket's page (``action``: its ``events`` or ``answer``), relative to the inbox's root:
    ``ticket?id=...``, every character of the id but letters, digits and ``_.-~`` percent-encoded, so no id can
    read as a path, another parameter or a fragment."""
    query = urlencode({"id": workflow_id, **{k: str(v) for k, v in params.items()}}, quote_via=quote, safe="")
    return f"ticket{'/' + action if action else ''}?{query}"


class Inbox:
    """The inbox's pages, bound to one desk (Temporal), one authenticator and the key answers are signed with."""

    def __init__(  # noqa: PLR0913 - what the inbox is bound to
        self,
        desk: Desk,
        auth: Authenticator,
        signing_key: bytes,
        site: Site,
        database: Database,
        *,
        confirm_above_cents: int,
    ) -> None:
        self.desk, self.auth, self.signing_key, self.site = desk, auth, signing_key, site
        self.trail = SqlAuditTrail(database)
        """The business database's audit trail, which keeps every answer: "mine" and the export read it."""
        self.confirm_above_cents = confirm_above_cents
        self.templates = Jinja2Templates(directory=HERE / "templates")
        self.templates.env.filters.update(money=shown, ago=ago, utc=utc, ticket_url=self.ticket_url)
        self.templates.env.filters.update(progress=progress, what_yours_does=what_yours_does)
        self.templates.env.filters.update(plainly=plainly, asked_plainly=asked_plainly, decided=decided_plainly)
        self.templates.env.globals.update(base=site.base_path, tabs=TABS, said=SAID, reason_max=REASON_MAX)
        self.templates.env.globals.update(answered_days=ANSWERED_DAYS)

    def routes(self) -> list[BaseRoute]:
        routes: list[BaseRoute] = [
            Route("/", self.inbox, methods=["GET"]),
            Route("/login", self.login_page, methods=["GET"]),
            Route("/login", self.login, methods=["POST"]),
            Route("/logout", self.logout, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/export.csv", self.export, methods=["GET"]),
            # The ticket's id is in the query string, whatever it holds (``ticket_path``).
            Route("/ticket", self.ticket, methods=["GET"]),
            Route("/ticket/events", self.events, methods=["GET"]),
            Route("/ticket/answer", self.answer, methods=["POST"]),
            Route("/ticket/answer", self.back_to_ticket, methods=["GET"]),
            Route("/tickets/{workflow_id:path}", self.old_address, methods=["GET"]),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ]
        return [Mount(self.site.base_path, routes=routes)] if self.site.base_path else routes

    # --- who is asking ---------------------------------------------------------------------------------------

    async def person(self, request: Request, *, active: bool | None = None) -> Person | None:
        """Who sent the request (the session's row is read in a thread: the database blocks). A page's live part,
        fetched by the page itself, is not the person's doing: it keeps no session from idling out."""
        token = request.cookies.get(SESSION_COOKIE)
        active = "partial" not in request.query_params if active is None else active
        return await asyncio.to_thread(self.auth.person, peer(request), request.headers, token, active=active)

    def address(self, request: Request) -> str | None:
        """Where the person is, for the sign-in throttle: the connection's address, or behind a trusted proxy (or
        load balancer), the last address its ``X-Forwarded-For`` names, the one the proxy itself saw."""
        connection = peer(request)
        forwarded = request.headers.get("x-forwarded-for", "")
        if self.auth.trusted(connection) and forwarded.strip():
            return forwarded.split(",")[-1].strip()
        return connection

    def own_origin(self, request: Request) -> str:
        """The inbox's origin as the browser sees it: the public URL's, else the request's own (its scheme as the
        single-sign-on proxy reports it, from the proxy only)."""
        if self.site.public_origin:
            return self.site.public_origin
        scheme = request.url.scheme
        forwarded = request.headers.get("x-forwarded-proto", "").lower()
        if self.auth.trusted(peer(request)) and forwarded in {"http", "https"}:
            scheme = forwarded
        return f"{scheme}://{request.headers.get('host', '')}".lower()

    def secure(self, request: Request) -> bool:
        """Whether cookies get ``Secure``: everywhere but plain http on this machine itself (a browser keeps no
        ``Secure`` cookie from an http page elsewhere, and on the loopback nothing crosses a network)."""
        origin = self.own_origin(request)
        return origin.startswith("https://") or not loopback_name(urlsplit(origin).hostname)

    def from_here(self, request: Request) -> bool:
        return same_origin(request.headers.get("origin"), request.headers.get("referer"), self.own_origin(request))

    def must_sign_in(self, request: Request, *, page: bool = True) -> Response:
        """To the sign-in page from a page; a plain 401 to a script (a live part, the event stream) or a form."""
        if page and request.method == "GET" and "partial" not in request.query_params:
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse(f"{self.site.base_path}/login?next={quote(target)}", status_code=303)
        return PlainTextResponse("sign in first", status_code=401)

    # --- pages -----------------------------------------------------------------------------------------------

    def page(self, request: Request, name: str, status: int = 200, **context: Any) -> Response:
        return self.templates.TemplateResponse(request, name, context, status_code=status)

    async def inbox(self, request: Request) -> Response:
        """A tab, most urgent first, with every tab's count, narrowed by the filters in the page's query (a GET form
        that needs no script); a filter it does not take is refused, saying what it takes, and nothing is read."""
        person = await self.person(request)
        if person is None:
            return self.must_sign_in(request)
        tab = request.query_params.get("tab", "approval")
        if tab not in TABS:
            tab = "approval"
        partial = "partial" in request.query_params
        csrf = self.auth.keys.csrf(person.binding)
        context: dict[str, Any] = {"person": person, "csrf": csrf, "tab": tab, "counts": {}, "answered": None}
        try:
            filters = Filters.of(request.query_params)
        except FilterError as error:
            context.update(filters=Filters(), refused=str(error), listing=Listing([], None, 0))
            return self.page(request, "_list.html" if partial else "inbox.html", 400, **context)
        counts = await self.desk.counts()
        listing = await self.desk.listed(tab, filters, person.name, total=counts[tab])
        answered = await self.answered_by(person.name) if filters.mine else None
        context.update(filters=filters, refused="", listing=listing, counts=counts, answered=answered)
        return self.page(request, "_list.html" if partial else "inbox.html", **context)

    async def answered_by(self, name: str) -> list[tuple[str, AnsweredRequest]]:
        """The answers ``name`` gave in the last ``ANSWERED_DAYS`` days, the latest first, each with its ticket's id,
        from the audit trail."""
        until = now()

        def read() -> list[tuple[str, AnsweredRequest]]:
            since = until - timedelta(days=ANSWERED_DAYS)
            return list(self.trail.answered(since, until, approver=name, limit=ANSWERED_SHOWN, latest_first=True))

        return await asyncio.to_thread(read)

    async def export(self, request: Request) -> Response:
        """The answers over a range of days as CSV, for auditors, to a person signed in; the customer's personal
        data only with ``personal=1``. Refused, saying why, for a range ``answers.days`` does not take."""
        person = await self.person(request)
        if person is None:
            return self.must_sign_in(request, page=False)
        start, end = request.query_params.get("from", ""), request.query_params.get("to", "")
        personal = request.query_params.get("personal", "") == "1"
        try:
            lines = await asyncio.to_thread(answers.export, self.trail, start, end, personal=personal)
        except answers.ExportRefusedError as error:
            return PlainTextResponse(f"not exported: {error}", status_code=400)
        log.info("inbox export", who=person.name, start=start, end=end, personal=personal)
        disposition = f'attachment; filename="{answers.filename(start, end, personal=personal)}"'
        return StreamingResponse(
            lines, media_type="text/csv; charset=utf-8", headers={"Content-Disposition": disposition}
        )

    def ticket_url(self, workflow_id: str, action: str = "", **params: object) -> str:
        """The ``ticket_url`` filter: a ticket's address under this inbox's base path (``ticket_path``)."""
        return f"{self.site.base_path}/{ticket_path(workflow_id, action, **params)}"

    async def old_address(self, request: Request) -> Response:
        """``/tickets/ID``, as links shared before the id moved to the query string read: the same ticket's page.
        (An id that ends in ``/events`` or holds ``..`` never worked there, and is not guessed at now.)"""
        return RedirectResponse(self.ticket_url(request.path_params["workflow_id"]), status_code=301)

    async def back_to_ticket(self, request: Request) -> Response:
        """The answer's address opened as a page (shared, or typed): the ticket's page, sending nothing."""
        workflow_id = request.query_params.get("id")
        return RedirectResponse(self.ticket_url(workflow_id) if workflow_id else f"{self.site.base_path}/", 303)

    def no_ticket(self, request: Request, person: Person, workflow_id: str | None) -> Response:
        message = f"There is no ticket {workflow_id}." if workflow_id else "This address names no ticket."
        return self.page(request, "error.html", 404, person=person, message=message)

    async def ticket(self, request: Request, notice: Notice | None = None, status: int = 200) -> Response:
        person = await self.person(request)
        if person is None:
            return self.must_sign_in(request)
        workflow_id = request.query_params.get("id")
        if not workflow_id:
            return self.no_ticket(request, person, workflow_id)
        try:
            ticket = await self.desk.ticket(workflow_id)
        except NotATicketError:
            return self.no_ticket(request, person, workflow_id)
        if notice is None and request.method == "GET":  # what became of this person's answer, if it was theirs
            keys, sealed = self.auth.keys, request.query_params.get("notice")
            notice = unseal(keys, sealed, binding=person.binding, workflow_id=workflow_id, now=now())
        partial = "partial" in request.query_params and request.method == "GET"
        context = {
            "person": person, "csrf": self.auth.keys.csrf(person.binding), "ticket": ticket, "notice": notice,
            "standing": standing(ticket.request, person.name) if ticket.request else None,
        }  # fmt: skip
        return self.page(request, "_ticket.html" if partial else "ticket.html", status, **context)

    async def events(self, request: Request) -> Response:
        """Server-sent events while the ticket runs: ``history`` when its history grows (the page then fetches its
        live part again), ``closed`` when the run ends. The page says which run and event it showed, so nothing that
        happened between its rendering and this stream is missed; a run that continued as new ends the stream, and
        the browser reconnects to the next one."""
        if await self.person(request, active=False) is None:
            return self.must_sign_in(request, page=False)
        workflow_id = request.query_params.get("id", "")
        shown_run = request.query_params.get("run", "")
        try:
            shown = int(request.query_params.get("after", "0"))
        except ValueError:
            shown = 0
        return StreamingResponse(
            self.follow(workflow_id, shown_run, shown),
            media_type="text/event-stream",
            headers={"X-Accel-Buffering": "no"},  # nginx and the like: pass each event on as it comes
        )

    async def follow(self, workflow_id: str, shown_run: str, shown: int) -> AsyncIterator[str]:
        yield "retry: 2000\n\n"
        try:
            description = await self.desk.check(workflow_id)
        except NotATicketError:
            yield "event: closed\ndata: gone\n\n"
            return
        if description.run_id != shown_run:
            yield "event: history\ndata: new run\n\n"
            shown = 0
        run = self.desk.client.get_workflow_handle(workflow_id, run_id=description.run_id)
        async for event in run.fetch_history_events(wait_new_event=True):
            if event.event_id > shown:
                yield f"event: history\ndata: {event.event_id}\n\n"
            if event.event_type in CLOSED:
                if not event.HasField("workflow_execution_continued_as_new_event_attributes"):
                    yield f"event: closed\ndata: {CLOSED[event.event_type]}\n\n"
                return  # a run that continued as new: the browser reconnects, and follows the next run

    async def answer(self, request: Request) -> Response:  # noqa: PLR0911 - one return per way a form ends
        """Approve or decline, for the person who signed in: the form says which request, which amount and which
        decision; who answers is never read from it. A form the inbox refuses before sending (no reason for a
        decline) is answered with the page and what is missing; an approval above the confirmation amount without
        this person's confirmation of it, with the page that asks for it; anything sent, with a redirect to the
        ticket's page, carrying what came of it."""
        person = await self.person(request)
        if person is None:
            return self.must_sign_in(request)
        if not self.from_here(request):
            return forbidden("refused: this form was sent from another site")
        form = await request.form(max_files=0, max_fields=16)
        if not self.auth.keys.csrf_ok(person.binding, str(form.get("csrf", ""))):
            return forbidden("refused: the form's security token is missing or not yours; reload the page, try again")
        workflow_id = request.query_params.get("id")
        if not workflow_id:
            return self.no_ticket(request, person, workflow_id)
        fields = answer_of(form, person.name)
        if isinstance(fields, Notice):
            return await self.ticket(request, fields, 400)
        try:
            description = await self.desk.check(workflow_id)
        except NotATicketError:
            return self.no_ticket(request, person, workflow_id)
        request_waiting = await waiting_of(description)
        if fields["approved"] and fields["amount_cents"] > self.confirm_above_cents:
            about = {
                "binding": person.binding, "workflow_id": workflow_id, "request_id": fields["request_id"],
                "amount_cents": fields["amount_cents"], "now": now(),
            }  # fmt: skip
            if not confirmed(self.auth.keys, str(form.get("confirmed", "")), **about):
                return await self.confirm(
                    request, person, description=description, waiting=request_waiting, fields=fields, about=about
                )
        notice = await self.send(workflow_id, fields, request_waiting)
        log.info(
            "inbox answer", workflow_id=workflow_id, request_id=fields["request_id"], approver=person.name,
            signed_in_by=person.how, decision="approve" if fields["approved"] else "decline",
            amount_cents=fields["amount_cents"], result=notice.kind, said=notice.text,
        )  # fmt: skip
        sealed = seal(self.auth.keys, notice, binding=person.binding, workflow_id=workflow_id, now=now())
        return RedirectResponse(self.ticket_url(workflow_id, notice=sealed), status_code=303)

    async def confirm(  # noqa: PLR0913 - the answer, and what the page says about it
        self, request: Request, person: Person, *, description: WorkflowExecutionDescription,
        waiting: ApprovalRequest | None, fields: dict[str, Any], about: dict[str, Any],
    ) -> Response:  # fmt: skip
        """The page that asks once more before a large approval: the amount, the order and the customer, and the
        one button that sends it, with this person's confirmation of exactly this answer."""
        same = waiting if waiting is not None and waiting.request_id == fields["request_id"] else None
        ticket = await self.desk.ticket_input(description.id, description.run_id)
        context = {
            "person": person, "csrf": self.auth.keys.csrf(person.binding), "workflow_id": description.id,
            "ticket": ticket, "request_id": fields["request_id"], "amount_cents": fields["amount_cents"],
            "order_id": same.order_id if same else "", "currency": same.currency if same else None,
            "customer": (same.customer_email if same else "") or str(ticket.get("customer_email", "")),
            "confirmation": confirmation(self.auth.keys, **about), "confirm_above_cents": self.confirm_above_cents,
        }  # fmt: skip
        return self.page(request, "confirm.html", **context)

    async def send(self, workflow_id: str, fields: dict[str, Any], waiting: ApprovalRequest | None) -> Notice:
        """Send the answer (``answer_of``'s), signed, as the ``approve`` update; what the person is told, in the
        desk's words."""
        answer = VouchedApproval.model_validate({**fields, "signature": "0" * 64})
        answer = answer.model_copy(update={"signature": vouching.sign(self.signing_key, workflow_id, answer)})
        verb = "approved" if answer.approved else "declined"
        handle = self.desk.client.get_workflow_handle(workflow_id)
        try:
            async with asyncio.timeout(ACCEPT_TIMEOUT.total_seconds()):
                update = await handle.start_update(
                    APPROVE_SIGNAL, answer, wait_for_stage=WorkflowUpdateStage.ACCEPTED, id=f"inbox-{uuid.uuid4()}",
                    result_type=ApprovalReceipt,
                )  # fmt: skip
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
        return Notice("taken", f"{receipt.decision.value}; {receipt.result}")

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
            handle = self.desk.client.get_workflow_handle(workflow_id, run_id=description.run_id, result_type=Outcome)
            try:
                outcome = await handle.result()
            except Exception:  # noqa: BLE001 - an outcome of another shape: the status alone says enough
                how = "it completed"
            else:
                how = CLOSED_AS.get(outcome.status, f"it closed as {outcome.status.value}")
        return f"this ticket has closed: {how} at {utc(description.close_time)}"

    # --- signing in and out ----------------------------------------------------------------------------------

    async def login_page(
        self, request: Request, error: str = "", status: int = 200, headers: dict[str, str] | None = None
    ) -> Response:
        target = self.next_page(request.query_params.get("next"))
        if await self.person(request) is not None:
            return RedirectResponse(target, status_code=303)
        if not self.auth.passwords:
            header = self.auth.proxy_header or "a sign-on header"
            message = f"This inbox signs people in through single sign-on, and the proxy did not name you ({header})."
            return self.page(request, "error.html", 401, person=None, message=message)
        nonce = request.cookies.get(LOGIN_COOKIE) or uuid.uuid4().hex
        ended = SESSION_COOKIE in request.cookies
        if not error and self.secure(request) and self.own_origin(request).startswith("http://"):
            error = "Signing in needs https here: open this inbox through its https address."
        if not error and ended:
            error = "Your session has ended (signed out, idle too long, or too old): sign in again."
        response = self.page(
            request, "login.html", status, person=None, error=error, next=target,
            csrf=self.auth.keys.mac("login", nonce),
        )  # fmt: skip
        response.headers.update(headers or {})
        if ended:
            response.delete_cookie(SESSION_COOKIE, path=self.cookie_path)
        response.set_cookie(
            LOGIN_COOKIE, nonce, path=self.cookie_path, httponly=True, samesite="strict", secure=self.secure(request)
        )
        return response

    async def login(self, request: Request) -> Response:
        if not self.from_here(request):
            return forbidden("refused: this sign-in form was sent from another site")
        form = await request.form(max_files=0, max_fields=8)
        nonce = request.cookies.get(LOGIN_COOKIE, "")
        if not nonce or not self.auth.keys.valid("login", nonce, str(form.get("csrf", ""))):
            return await self.login_page(request, "The sign-in form expired; try again.", 403)
        name, password = str(form.get("name", "")).strip(), str(form.get("password", ""))
        address, agent = self.address(request), request.headers.get("user-agent")
        result = await asyncio.to_thread(self.auth.sign_in, name, password, address=address, user_agent=agent)
        if isinstance(result, Throttled):
            log.warning("inbox sign-in throttled", name=name, peer=address, who=result.who, wait=result.seconds)
            whose = f"for {name}" if result.who == "person" else "from your address"
            said = f"Too many wrong passwords {whose}; try again in {result.wait()}."
            return await self.login_page(request, said, 429, {"Retry-After": str(result.seconds)})
        if not isinstance(result, SignedIn):
            log.warning("inbox sign-in refused", name=name, peer=address)
            return await self.login_page(request, "Wrong name or password.", 401)
        log.info("inbox sign-in", name=name, peer=address)
        response = RedirectResponse(self.next_page(str(form.get("next", ""))), status_code=303)
        response.set_cookie(
            SESSION_COOKIE, result.token, max_age=int(self.auth.lifetime.total_seconds()), path=self.cookie_path,
            httponly=True, samesite="lax", secure=self.secure(request),
        )  # fmt: skip
        response.delete_cookie(LOGIN_COOKIE, path=self.cookie_path)
        return response

    async def logout(self, request: Request) -> Response:
        """Sign out: the session ends on the server, so a copy of its cookie stops working too."""
        person = await self.person(request)
        if person is not None:
            form = await request.form(max_files=0, max_fields=4)
            if not self.from_here(request) or not self.auth.keys.csrf_ok(person.binding, str(form.get("csrf", ""))):
                return forbidden("refused: this form was sent from another site, or without its security token")
            await asyncio.to_thread(self.auth.sign_out, request.cookies.get(SESSION_COOKIE))
            log.info("inbox sign-out", name=person.name, peer=self.address(request))
        response = RedirectResponse(f"{self.site.base_path}/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path=self.cookie_path)
        return response

    @property
    def cookie_path(self) -> str:
        return self.site.base_path or "/"

    def next_page(self, target: str | None) -> str:
        """Where to go after signing in: a page of this inbox, never another site (``//evil.example``)."""
        home = f"{self.site.base_path}/"
        if not target or not target.startswith(home) or target.startswith("//") or "\\" in target:
            return home
        return target


def make_app(  # noqa: PLR0913 - what the inbox is bound to
    desk: Desk, auth: Authenticator, signing_key: bytes, site: Site, database: Database, *, confirm_above_cents: int
) -> ASGIApp:
    inbox = Inbox(desk, auth, signing_key, site, database, confirm_above_cents=confirm_above_cents)
    return Guard(Starlette(routes=inbox.routes()), site, auth)


async def healthz(_request: Request) -> Response:
    return PlainTextResponse("ok")


def forbidden(text: str) -> Response:
    return PlainTextResponse(text, status_code=403)


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
        "amount_cents": amount_cents, "approved": decision == "approve", "approver": approver,
        "request_id": str(form["request_id"]), **({"reason": reason} if decision == "decline" else {}),
    }  # fmt: skip
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


TOO_LATE = re.compile(r"^rejected: seen at [^,]+, after request (?P<request>\S+)'s deadline$")
TIMED_OUT = re.compile(r"^rejected: request (?P<request>\S+) was already closed: nobody answered by (?P<at>.+)$")


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
            "had answered, so the refund was not made"
        )
    return cause.message


def shown(units: int, currency: str | None = None) -> str:
    """The ``money`` filter: ``{{ cents|money(currency) }}`` reads ``USD 2,147,483.64``."""
    return amount(units, currency)


def now() -> datetime:
    return datetime.now(UTC)


def ago(moment: datetime | None) -> str:
    """How long ago, as a person says it: "3 min", "2 h 5 min", "4 days"."""
    if moment is None:
        return "-"
    return duration(now() - moment)


def duration(span: timedelta) -> str:
    seconds = max(int(span.total_seconds()), 0)
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86_400
    if days >= 2:
        return f"{days} days"
    if hours:
        return f"{hours} h {minutes % 60} min"
    if minutes:
        return f"{minutes} min"
    return f"{seconds} s"


def utc(moment: datetime | None) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC") if moment else "-"
