"""Signing in and out of the approval inbox: ``GET|POST /login`` (a throttled attempt is answered 429 with
``Retry-After``; a sign-in sets the browser's device cookie, so the person's next sign-in there is counted apart
from other people's guesses) and ``POST /logout``, which ends the session on the server, so a copy of its cookie
stops working too, and leaves the device known."""

from __future__ import annotations

import asyncio
import uuid

import structlog
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from agent_worker.inbox.auth import DEVICE_COOKIE, DEVICE_LIFETIME, LOGIN_COOKIE, SESSION_COOKIE, SignedIn, Throttled
from agent_worker.inbox.pages import Pages, forbidden

log = structlog.get_logger(__name__)


class Login:
    """The sign-in page and form, and signing out, for one inbox's ``Pages``."""

    def __init__(self, pages: Pages) -> None:
        self.pages = pages

    async def login_page(
        self, request: Request, error: str = "", status: int = 200, headers: dict[str, str] | None = None
    ) -> Response:
        pages, auth = self.pages, self.pages.auth
        target = self.next_page(request.query_params.get("next"))
        if await pages.person(request) is not None:
            return RedirectResponse(target, status_code=303)
        if not auth.passwords:
            header = auth.proxy_header or "a sign-on header"
            message = f"This inbox signs people in through single sign-on, and the proxy did not name you ({header})."
            return pages.page(request, "error.html", 401, person=None, message=message)
        nonce = request.cookies.get(LOGIN_COOKIE) or uuid.uuid4().hex
        ended = SESSION_COOKIE in request.cookies
        if not error and pages.secure(request) and pages.own_origin(request).startswith("http://"):
            error = "Signing in needs https here: open this inbox through its https address."
        if not error and ended:
            error = "Your session has ended (signed out, idle too long, or too old): sign in again."
        response = pages.page(
            request,
            "login.html",
            status,
            person=None,
            error=error,
            next=target,
            csrf=auth.keys.mac("login", nonce),
        )
        response.headers.update(headers or {})
        if ended:
            response.delete_cookie(SESSION_COOKIE, path=pages.cookie_path)
        response.set_cookie(
            LOGIN_COOKIE, nonce, path=pages.cookie_path, httponly=True, samesite="strict", secure=pages.secure(request)
        )
        return response

    async def login(self, request: Request) -> Response:
        pages, auth = self.pages, self.pages.auth
        if not pages.from_here(request):
            return forbidden("refused: this sign-in form was sent from another site")
        form = await request.form(max_files=0, max_fields=8)
        nonce = request.cookies.get(LOGIN_COOKIE, "")
        if not nonce or not auth.keys.valid("login", nonce, str(form.get("csrf", ""))):
            return await self.login_page(request, "The sign-in form expired; try again.", 403)
        name, password = str(form.get("name", "")).strip(), str(form.get("password", ""))
        address, agent = pages.address(request), request.headers.get("user-agent")
        device = request.cookies.get(DEVICE_COOKIE)
        result = await asyncio.to_thread(auth.sign_in, name, password, address=address, user_agent=agent, device=device)
        if isinstance(result, Throttled):
            log.warning("inbox sign-in throttled", name=name, peer=address, who=result.who, wait=result.seconds)
            whose = "from your address" if result.who == "address" else f"for {name}"
            said = f"Too many wrong passwords {whose}; try again in {result.wait()}."
            return await self.login_page(request, said, 429, {"Retry-After": str(result.seconds)})
        if not isinstance(result, SignedIn):
            log.warning("inbox sign-in refused", name=name, peer=address)
            return await self.login_page(request, "Wrong name or password.", 401)
        log.info("inbox sign-in", name=name, peer=address)
        response = RedirectResponse(self.next_page(str(form.get("next", ""))), status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            result.token,
            max_age=int(auth.lifetime.total_seconds()),
            path=pages.cookie_path,
            httponly=True,
            samesite="lax",
            secure=pages.secure(request),
        )
        response.set_cookie(
            DEVICE_COOKIE,
            result.device,
            max_age=int(DEVICE_LIFETIME.total_seconds()),
            path=pages.cookie_path,
            httponly=True,
            samesite="strict",
            secure=pages.secure(request),
        )
        response.delete_cookie(LOGIN_COOKIE, path=pages.cookie_path)
        return response

    async def logout(self, request: Request) -> Response:
        """Sign out: the session ends on the server, so a copy of its cookie stops working too."""
        pages, auth = self.pages, self.pages.auth
        person = await pages.person(request)
        if person is not None:
            form = await request.form(max_files=0, max_fields=4)
            if not pages.from_here(request) or not auth.keys.csrf_ok(person.binding, str(form.get("csrf", ""))):
                return forbidden("refused: this form was sent from another site, or without its security token")
            await asyncio.to_thread(auth.sign_out, request.cookies.get(SESSION_COOKIE))
            log.info("inbox sign-out", name=person.name, peer=pages.address(request))
        response = RedirectResponse(f"{pages.site.base_path}/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path=pages.cookie_path)
        return response

    def next_page(self, target: str | None) -> str:
        """Where to go after signing in: a page of this inbox, never another site (``//evil.example``)."""
        home = f"{self.pages.site.base_path}/"
        if not target or not target.startswith(home) or target.startswith("//") or "\\" in target:
            return home
        return target
