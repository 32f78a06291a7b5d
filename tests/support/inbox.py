"""What the approval inbox's tests share: a worker and an inbox on a test's task queue, people with passwords, tickets
started with the ``temporal`` CLI, and a person's HTTP client (cookies, the forms' CSRF tokens)."""

from __future__ import annotations

import contextlib
import functools
import html
import json
import re
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
from temporalio.client import Client
from temporalio.service import RPCError

from activities.business.database import Database
from activities.contracts.approvals import ApprovalRequest
from activities.contracts.names import APPROVAL_REQUEST_MEMO
from activities.contracts.policy import ApprovalPolicy, MoneyPolicy, Role
from activities.contracts.world import Order
from agent_worker.cli.devserver import binary
from agent_worker.config.web import WebSettings
from agent_worker.inbox.app import ticket_path
from agent_worker.inbox.server import RunningInbox, start_inbox
from agent_worker.passwords import hash_password
from tests.support.desk import LOOSE
from tests.support.harness import Harness
from tests.support.processes import address, run
from tests.support.tickets import ticket
from tests.support.waits import poll

KEY = "inbox-test-key-0123456789abcdef0123456789"
PASSWORDS = {"ann": "ann's long password", "ben": "ben's long password", "bob": "bob's long password"}


CLEO = {"question": "My parcel for order A-1003 never arrived.", "email": "cleo@example.com"}
"""A ticket about A-1003, charged 120.00: above two-people's threshold and the agents' role below."""
TWO_PEOPLE = LOOSE.model_copy(update={"approval": ApprovalPolicy(limit_cents=2000, two_people_above_cents=10_000)})
"""The tests' loose desk, but a person above 20.00 and two different people above 100.00."""
TWO_PEOPLE_WHY = (
    "USD 120.00 is above the approval limit of USD 20.00; USD 120.00 is above the two-people threshold of USD 100.00"
)
"""Why a refund of 120.00 waits under ``TWO_PEOPLE``, as the request says: every rule that asks for a person."""
ROLES = LOOSE.model_copy(
    update={
        "approval": ApprovalPolicy(
            limit_cents=2000,
            two_people_above_cents=None,
            roles=[
                Role(name="agents", people=["ann", "bob"], max_cents=5000),
                Role(name="leads", people=["ben"], max_cents=50_000),
            ],
        )
    }
)
"""A person above 20.00, one approval, by roles: ann and bob up to 50.00, ben, the lead, up to 500.00."""


@functools.cache
def password_hashes() -> dict[str, str]:
    """Made once per session: argon2id takes a quarter of a second a hash, on purpose."""
    return {name: hash_password(password) for name, password in PASSWORDS.items()}


def inbox_web(**fields: Any) -> WebSettings:
    """The inbox's settings (``Settings.web``) the tests run it with: the approval key the worker holds, and ann,
    ben and bob's passwords; ``fields`` are other ``WebSettings`` fields, or these replaced."""
    return WebSettings(**{"approval_keys": [KEY], "users": password_hashes(), **fields})


class Clock:
    """A database's clock, which a test turns: sessions age and wrong passwords are forgotten without waiting."""

    def __init__(self, now: datetime | None = None) -> None:
        self.now = now or datetime(2026, 11, 30, 9, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def turn(self, span: timedelta) -> None:
        self.now += span


@asynccontextmanager
async def inbox_for(
    agent: Harness,
    policy: MoneyPolicy | None = None,
    *,
    database: Database | None = None,
    web: Mapping[str, Any] | None = None,
    **settings: Any,
) -> AsyncIterator[RunningInbox]:
    """A worker holding the inbox's key, under ``policy`` (the tests' loose desk if None), and the inbox for its task
    queue on 127.0.0.1, with ann, ben and bob able to sign in; ``web`` (``WebSettings`` fields) and ``settings`` go
    to both (the inbox's sign-in, the codec's keys). The inbox keeps its sessions in ``database`` if given (one
    whose clock the test turns), else in the harness's business database as the settings name it."""
    both = {"web": inbox_web(**(web or {})), **settings}
    async with agent.worker(policy=policy, **both):
        inbox_settings = agent.settings(**both)
        inbox = await start_inbox(inbox_settings, agent.client, host="127.0.0.1", port=0, database=database)
        try:
            yield inbox
        finally:
            await inbox.stop()


@asynccontextmanager
async def inbox_alone(
    agent: Harness, database: Database | None = None, web: Mapping[str, Any] | None = None
) -> AsyncIterator[RunningInbox]:
    """The inbox with ann, ben and bob able to sign in, and no worker: signing in and out needs none. Its sessions
    in ``database`` if given (one whose clock the test turns), else in the harness's business database; ``web``
    its other ``WebSettings`` fields."""
    configured = agent.settings(web=inbox_web(**(web or {})))
    inbox = await start_inbox(configured, agent.client, host="127.0.0.1", port=0, database=database)
    try:
        yield inbox
    finally:
        await inbox.stop()


ODD_IDS = ["x/events", "a%2Fb", "q?x=1", "h#1", "..", "../..", "with space", "ünïcødé", "ends/answer"]
"""Workflow ids a ticket may have that an address must not misread: a path's suffix, an escape, a query, a
fragment, the segments browsers normalise away, a space, letters outside ASCII."""


async def start_with_cli(agent: Harness, *codec_flags: str, workflow_id: str | None = None, **options: Any) -> str:
    """Start a ticket as an integration would, with the ``temporal`` CLI; its workflow id (a fresh one unless
    given: a given one still running from an earlier test is ended first)."""
    if workflow_id is None:
        workflow_id = f"ticket-{uuid.uuid4()}"
    else:
        with contextlib.suppress(RPCError):
            await agent.client.get_workflow_handle(workflow_id).terminate("a test starts this id afresh")
    await run(
        binary("temporal"),
        "--address",
        address(agent.client),
        "workflow",
        "start",
        "--type",
        "SupportAgent",
        "--task-queue",
        agent.task_queue,
        "--workflow-id",
        workflow_id,
        "--input",
        json.dumps(ticket(**options)),
        *codec_flags,
    )
    return workflow_id


async def start_odd_tickets(agent: Harness) -> dict[str, str]:
    """A ticket under each of ``ODD_IDS``, each about an order of its own (so each refund is paid, not refused as
    already made): each id, and its order."""
    orders = {workflow_id: f"A-{2001 + n}" for n, workflow_id in enumerate(ODD_IDS)}
    for workflow_id, order_id in orders.items():
        agent.store.orders.add(Order(order_id=order_id, amount_cents=4900, customer_email="ann@example.com"))
        await start_with_cli(agent, workflow_id=workflow_id, question=f"My parcel for order {order_id} never arrived")
    return orders


async def waiting_request(client: Client, workflow_id: str, timeout: float = 20) -> ApprovalRequest:
    """The request a ticket waits on, once its memo shows one (memos are not pushed)."""

    async def memo() -> ApprovalRequest | None:
        description = await client.get_workflow_handle(workflow_id).describe()
        request: ApprovalRequest | None = await description.memo_value(
            APPROVAL_REQUEST_MEMO,
            None,
            type_hint=ApprovalRequest | None,  # type: ignore[arg-type]
        )
        return request

    return await poll(memo, timeout=timeout, interval=0.05, what=f"{workflow_id}'s memo to show a request")


def page_of(workflow_id: str, **params: object) -> str:
    """A ticket's page, as the inbox links it."""
    return "/" + ticket_path(workflow_id, "", **params)


def answer_of(workflow_id: str) -> str:
    """Where a ticket's answer forms post."""
    return "/" + ticket_path(workflow_id, "answer")


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, page
    return found.group(1)


class Person:
    """Someone using the inbox over HTTP, as their browser would: cookies kept, forms sent from the inbox's origin."""

    def __init__(self, http: aiohttp.ClientSession, url: str) -> None:
        self.http = http
        self.origin = url.rstrip("/")

    async def get(self, path: str, **kwargs: Any) -> tuple[int, str]:
        async with self.http.get(self.origin + path, allow_redirects=False, **kwargs) as response:
            return response.status, await response.text()

    async def post(self, path: str, form: dict[str, str], *, headers: dict[str, str] | None = None) -> tuple[int, str]:
        sent = {"Origin": self.origin, **(headers or {})}
        async with self.http.post(self.origin + path, data=form, headers=sent, allow_redirects=False) as response:
            return response.status, await response.text()

    async def sign_in(self, name: str, password: str | None = None) -> int:
        _, page = await self.get("/login")
        form = {"name": name, "password": password or PASSWORDS[name], "csrf": csrf_of(page), "next": "/"}
        status, _ = await self.post("/login", form)
        return status

    async def answer(
        self, workflow_id: str, request: ApprovalRequest, decision: str = "approve", **form: str | None
    ) -> tuple[int, str]:
        """Press a button on the ticket's page: the form as the page made it, changed by ``form``. The status the
        POST was answered with, and the page the person then sees: a redirect followed, as a browser does."""
        _, page = await self.get(page_of(workflow_id))
        sent = {
            "csrf": csrf_of(page),
            "request_id": request.request_id,
            "amount_cents": str(request.amount_cents),
            "decision": decision,
            **form,
        }
        return await self.send(answer_of(workflow_id), {k: v for k, v in sent.items() if v is not None})

    async def send(self, path: str, form: dict[str, str], *, headers: dict[str, str] | None = None) -> tuple[int, str]:
        """POST a form from the inbox's origin; its status, and the page it leads to (a 303 followed, with the same
        ``headers``)."""
        sent = {"Origin": self.origin, **(headers or {})}
        async with self.http.post(self.origin + path, data=form, headers=sent, allow_redirects=False) as response:
            status, page, location = response.status, await response.text(), response.headers.get("Location")
        if status == 303 and location:
            assert location.startswith("/"), location  # the inbox's own page, never elsewhere
            _, page = await self.get(location, headers=headers)
        return status, page

    async def confirm(self, page: str) -> tuple[int, str]:
        """Press the confirmation page's button: its form as the page made it."""
        form = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page))
        action = re.search(r'<form method="post" action="([^"]+)" class="answer approve">', page)
        assert action, page
        assert "confirmed" in form, page
        return await self.send(
            html.unescape(action.group(1)), {**{k: html.unescape(v) for k, v in form.items()}, "decision": "approve"}
        )


@asynccontextmanager
async def person(inbox: RunningInbox) -> AsyncIterator[Person]:
    """A fresh HTTP client with its own cookies (``unsafe``: they are kept for 127.0.0.1, an address)."""
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        yield Person(http, inbox.url)


def shown(page: str, testid: str) -> str | None:
    """The text of the page's element marked ``data-testid=testid``, unescaped; None if there is none."""
    found = re.search(rf'data-testid="{testid}"[^>]*>([^<]*)<', page)
    return html.unescape(found.group(1)) if found else None


def button(page: str, decision: str) -> str | None:
    """The page's button for ``decision`` (approve, decline), its tag as drawn; None if the page offers none."""
    found = re.search(rf'<button [^>]*value="{decision}"[^>]*>', page)
    return found.group(0) if found else None


def notice_of(page: str) -> str:
    """What the ticket's page tells the person about their answer."""
    found = re.search(r'data-testid="notice">([^<]*)<', page)
    assert found, page
    return html.unescape(found.group(1))


def notice_kind(page: str) -> str:
    """How the page tells it: ``taken``, ``pending`` (green, amber), ``rejected`` or ``error`` (red)."""
    found = re.search(r'<p class="notice (\w+)" role="status" data-testid="notice">', page)
    assert found, page
    return found.group(1)
