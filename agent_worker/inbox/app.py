"""The approval inbox as a Starlette application: pages rendered on the server, forms that work without script.

Routes, under the base path:

- ``GET /``: the tabs (waiting for approval, for the customer, for an event; stuck; recently closed), from
  visibility, so they work with no worker running; the list refreshes itself every few seconds.
- ``GET /tickets/{id}``: a ticket's page (the request, the order as looked up, what the model asked for and why,
  the transcript), kept current by ``GET /tickets/{id}/events``, a stream of server-sent events that follows the
  run's history and tells the page when to fetch its live part again.
- ``POST /tickets/{id}/answer``: approve or decline (a decline with its reason, which the inbox requires). The
  answer is the ``approve`` Workflow Update, signed for the person who signed in; the page shows at once whether
  the ticket took it and what came of the refund.
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
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote, urlsplit

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
from temporalio.client import WorkflowUpdateFailedError, WorkflowUpdateStage
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from activities import vouching
from activities.business.audit import SqlAuditTrail
from activities.contracts.approvals import AnsweredRequest, Approval, ApprovalReceipt, VouchedApproval
from activities.contracts.fields import amount, describe_errors
from activities.contracts.names import APPROVE_SIGNAL
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
from agent_worker.inbox.desk import TABS, Desk, FilterError, Filters, Listing, NotATicketError
from agent_worker.inbox.guard import Guard, Site, peer
from agent_worker.inbox.standing import progress, standing, what_yours_does
from agent_worker.transcript import CLOSED, SAID

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


@dataclass(frozen=True)
class Notice:
    """What became of a person's answer, shown at the top of the ticket's page."""

    kind: Literal["taken", "pending", "rejected", "error"]
    text: str


class Inbox:
    """The inbox's pages, bound to one desk (Temporal), one authenticator and the key answers are signed with."""

    def __init__(self, desk: Desk, auth: Authenticator, signing_key: bytes, site: Site, database: Database) -> None:
        self.desk, self.auth, self.signing_key, self.site = desk, auth, signing_key, site
        self.trail = SqlAuditTrail(database)
        """The business database's audit trail, which keeps every answer: "mine" and the export read it."""
        self.templates = Jinja2Templates(directory=HERE / "templates")
        self.templates.env.filters.update(money=shown, ago=ago, utc=utc, path=lambda value: quote(str(value), safe=""))
        self.templates.env.filters.update(progress=progress, what_yours_does=what_yours_does)
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
            # A ticket's id may hold a slash; the routes with a suffix come first, so they win.
            Route("/tickets/{workflow_id:path}/events", self.events, methods=["GET"]),
            Route("/tickets/{workflow_id:path}/answer", self.answer, methods=["POST"]),
            Route("/tickets/{workflow_id:path}", self.ticket, methods=["GET"]),
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

    async def ticket(self, request: Request, notice: Notice | None = None, status: int = 200) -> Response:
        person = await self.person(request)
        if person is None:
            return self.must_sign_in(request)
        workflow_id = request.path_params["workflow_id"]
        try:
            ticket = await self.desk.ticket(workflow_id)
        except NotATicketError:
            return self.page(request, "error.html", 404, person=person, message=f"There is no ticket {workflow_id}.")
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
        workflow_id = request.path_params["workflow_id"]
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

    async def answer(self, request: Request) -> Response:
        """Approve or decline, for the person who signed in: the form says which request, which amount and which
        decision; who answers is never read from it."""
        person = await self.person(request)
        if person is None:
            return self.must_sign_in(request)
        if not self.from_here(request):
            return forbidden("refused: this form was sent from another site")
        form = await request.form(max_files=0, max_fields=16)
        if not self.auth.keys.csrf_ok(person.binding, str(form.get("csrf", ""))):
            return forbidden("refused: the form's security token is missing or not yours; reload the page, try again")
        workflow_id = request.path_params["workflow_id"]
        fields = answer_of(form, person.name)
        if isinstance(fields, Notice):
            return await self.ticket(request, fields, 400)
        try:
            await self.desk.check(workflow_id)
        except NotATicketError:
            return await self.ticket(request)
        notice, status = await self.send(workflow_id, fields)
        log.info(
            "inbox answer", workflow_id=workflow_id, request_id=fields["request_id"], approver=person.name,
            signed_in_by=person.how, decision="approve" if fields["approved"] else "decline",
            amount_cents=fields["amount_cents"], result=notice.kind, said=notice.text,
        )  # fmt: skip
        return await self.ticket(request, notice, status)

    async def send(self, workflow_id: str, fields: dict[str, Any]) -> tuple[Notice, int]:
        """Send the answer, signed, as the ``approve`` update; what the person is told, and the status."""
        try:
            answer = VouchedApproval.model_validate({**fields, "signature": "0" * 64})
        except ValidationError as error:
            return Notice("error", f"not sent: {describe_errors(error)}"), 400
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
            ), 504
        except RPCError as error:  # the ticket closed meanwhile
            return Notice("rejected", f"refused: the ticket takes no more answers ({error.message})"), 409
        try:
            async with asyncio.timeout(RESULT_TIMEOUT.total_seconds()):
                receipt = await update.result()
        except WorkflowUpdateFailedError as error:
            return Notice("rejected", why(error)), 409
        except TimeoutError:
            return Notice("pending", f"{verb}: the ticket took it, and this page shows what comes of it"), 202
        return Notice("taken", f"{receipt.decision.value}; {receipt.result}"), 200

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


def make_app(desk: Desk, auth: Authenticator, signing_key: bytes, site: Site, database: Database) -> ASGIApp:
    inbox = Inbox(desk, auth, signing_key, site, database)
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
    return {
        "amount_cents": amount_cents, "approved": decision == "approve", "approver": approver,
        "request_id": str(form["request_id"]), **({"reason": reason} if decision == "decline" else {}),
    }  # fmt: skip


def why(error: WorkflowUpdateFailedError) -> str:
    """What the ticket said when it refused the answer ("rejected: request R1 was already answered: ...")."""
    cause = error.cause
    return cause.message if isinstance(cause, ApplicationError) else str(cause or error)


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
