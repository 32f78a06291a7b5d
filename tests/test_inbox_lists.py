"""The approval inbox's lists and its export for auditors, over HTTP against a real dev server, worker and inbox: the
most urgent ticket first, each tab's count, filters by customer and order that what a person types cannot turn into
another visibility query, "mine" for an approver and for someone who is not one, and the CSV of answers over a range
of days, its personal data left out unless asked for and given only to the auditors the settings name, its cells
never read as formulas, and only for people signed in."""

from __future__ import annotations

import asyncio
import csv
import html
import io
import os
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from activities.business import Business
from activities.contracts.approvals import AnsweredRequest, ApprovalDecision
from activities.contracts.ticket import Outcome
from activities.contracts.world import AuditEntry, Order
from agent_worker.answers import COLUMNS, MAX_DAYS, neutral
from agent_worker.inbox.app import ticket_path
from agent_worker.inbox.desk import Desk
from agent_worker.inbox.filters import FilterError, Filters
from tests.support.harness import Harness
from tests.support.inbox import (
    CLEO,
    Person,
    inbox_alone,
    inbox_for,
    notice_kind,
    person,
    start_with_cli,
    waiting_request,
)
from tests.support.processes import AGENT_WORKER
from tests.support.tickets import ticket
from tests.support.waits import poll

pytestmark = pytest.mark.timeout(180)


def listed(page: str) -> list[str]:
    """The workflow ids a tab lists, in the order shown."""
    return re.findall(r'data-workflow-id="([^"]+)"', page)


def counts(page: str) -> dict[str, int]:
    return {tab: int(n) for tab, n in re.findall(r'data-testid="count-(\w+)">(\d+)<', page)}


async def shown_when(someone: Person, path: str, ready: Callable[[str], bool], what: str, status: int = 200) -> str:
    """The page at ``path`` once ``ready`` says it shows what visibility holds (visibility is not read-your-writes)."""

    async def page() -> str | None:
        got, html = await someone.get(path)
        assert got == status, (got, html)
        return html if ready(html) else None

    return await poll(page, timeout=60, interval=0.3, what=what)


async def cancel(agent: Harness, *workflow_ids: str) -> None:
    for workflow_id in workflow_ids:
        await agent.client.get_workflow_handle(workflow_id).cancel()


def own_orders(agent: Harness, count: int) -> list[dict[str, Any]]:
    """``count`` tickets, each about an order of its own that needs no person: an order refunded before would."""
    tickets = []
    for n in range(count):
        order_id = f"A-{3001 + n}"
        agent.store.orders.add(Order(order_id=order_id, amount_cents=1000, customer_email="dee@example.com"))
        tickets.append(ticket(f"My parcel for order {order_id} never arrived", email="dee@example.com"))
    return tickets


async def test_each_tab_lists_the_most_urgent_first_and_shows_its_count_from_visibility(agent: Harness) -> None:
    replies_later, replies_sooner, closes_first, closes_last = own_orders(agent, 4)
    async with inbox_for(agent) as inbox, person(inbox) as ann:
        # Started in another order than their deadlines: newest first would list middle, soonest, late.
        late = await start_with_cli(agent, approval_timeout_seconds=3000)
        soonest = await start_with_cli(agent, approval_timeout_seconds=1000)
        middle = await start_with_cli(agent, approval_timeout_seconds=2000)
        for workflow_id in (late, soonest, middle):
            await waiting_request(agent.client, workflow_id)
        window = {"approval_limit_cents": 2000}
        reply_later = await agent.start(replies_later | {"options": window | {"reply_window_seconds": 7200}})
        reply_sooner = await agent.start(replies_sooner | {"options": window | {"reply_window_seconds": 3600}})
        closed_first = await agent.start(closes_first)
        await closed_first.result()
        closed_last = await agent.start(closes_last)
        await closed_last.result()
        await ann.sign_in("ann")

        approval = await shown_when(
            ann,
            "/?tab=approval",
            lambda html: len(listed(html)) == 3 and counts(html).get("customer") == 2,
            "three requests and two waits for the customer",
        )
        customer = await shown_when(ann, "/?tab=customer", lambda html: len(listed(html)) == 2, "two waits listed")
        closed = await shown_when(ann, "/?tab=closed", lambda html: len(listed(html)) == 2, "two closed listed")
        await cancel(agent, late, soonest, middle, reply_later.id, reply_sooner.id)

    assert listed(approval) == [soonest, middle, late]
    assert listed(customer) == [reply_sooner.id, reply_later.id]
    assert listed(closed) == [closed_last.id, closed_first.id]
    shown = counts(approval)
    assert {tab: shown.get(tab) for tab in ("approval", "customer", "event", "closed")} == {
        "approval": 3,
        "customer": 2,
        "event": 0,
        "closed": 2,
    }
    assert shown.get("stuck", 0) == 0
    assert counts(closed) == shown


HOSTILE_ORDERS = ["A-1001' OR WorkflowType = 'SupportAgent", "A-1001\\", 'A-1001" OR 1=1', "A-1001 OR x", "*"]
HOSTILE_CUSTOMERS = ["x'OR'1'='1", "'", '"', "\\", "ann@example.com'--", "%')OR(TaskQueue!='"]


async def test_filters_by_customer_and_order_keep_theirs_and_hostile_values_are_refused_or_match_nothing(
    agent: Harness,
) -> None:
    async with inbox_for(agent) as inbox, person(inbox) as ann:
        anns = await start_with_cli(agent)  # order A-1001, ann@example.com
        cleos = await start_with_cli(agent, **CLEO)  # order A-1003, cleo@example.com
        for workflow_id in (anns, cleos):
            await waiting_request(agent.client, workflow_id)
        await ann.sign_in("ann")
        await shown_when(ann, "/", lambda html: len(listed(html)) == 2, "both requests listed")
        by_customer = await ann.get("/?customer=CLEO%40Example")
        by_order = await ann.get("/?order=a-1001")
        by_both = await ann.get("/?customer=ann%40example.com&order=A-1003")
        refused_orders = [await ann.get("/", params={"order": value}) for value in HOSTILE_ORDERS]
        hostile_customers = [await ann.get("/", params={"customer": value}) for value in HOSTILE_CUSTOMERS]
        too_long = await ann.get("/", params={"customer": "a" * 255})
        with_a_space = await ann.get("/", params={"customer": "x' OR TaskQueue != '"})
        await cancel(agent, anns, cleos)

    assert by_customer[0] == 200
    assert listed(by_customer[1]) == [cleos]
    assert listed(by_order[1]) == [anns]
    assert listed(by_both[1]) == []
    for status, page in refused_orders:
        assert status == 400
        assert "Not filtered: an order is an order id" in page
        assert listed(page) == []
    for status, page in hostile_customers:  # a part of an address no customer has: nothing, not everything
        assert status == 200
        assert listed(page) == []
    for status, page in (too_long, with_a_space):
        assert status == 400
        assert "a customer is an email address, or part of one" in page
        assert listed(page) == []


def test_an_order_filter_takes_order_ids_alone_and_a_task_queue_that_could_break_out_of_its_quotes_is_refused(
    agent: Harness,
) -> None:
    """Filters are applied to what visibility listed, never written into its query (``Desk.query`` takes a tab
    alone); what is written, the task queue, is refused where it could close its quotes."""
    for value in HOSTILE_CUSTOMERS:  # kept as typed, to compare with addresses: they match none
        assert Filters.of({"customer": value}).customer == value
    assert Filters.of({"order": " a-1001 "}).order == "A-1001"
    for value in HOSTILE_ORDERS:
        with pytest.raises(FilterError):
            Filters.of({"order": value})
    for queue in ("support' OR '1'='1", "support\\"):
        with pytest.raises(ValueError, match="a task queue name the inbox can put in a visibility query"):
            Desk(agent.client, queue)


async def test_mine_lists_what_an_approver_may_answer_and_what_they_answered_and_nothing_of_it_for_another(
    agent: Harness,
) -> None:
    async with inbox_for(agent) as inbox, person(inbox) as ann, person(inbox) as bob:
        anns_only = await start_with_cli(agent, approvers=["ann"])
        anyones = await start_with_cli(agent)
        answered = await start_with_cli(agent, approvers=["ann"])
        requests = {w: await waiting_request(agent.client, w) for w in (anns_only, anyones, answered)}
        await ann.sign_in("ann")
        await bob.sign_in("bob")
        status, page = await ann.answer(answered, requests[answered])
        assert (status, notice_kind(page)) == (303, "taken")
        await shown_when(ann, "/", lambda html: len(listed(html)) == 2, "the two requests left listed")
        anns_view = (await ann.get("/?mine=1"))[1]
        bobs_view = (await bob.get("/?mine=1"))[1]
        await cancel(agent, anns_only, anyones)

    assert sorted(listed(anns_view)) == sorted([anns_only, anyones])
    assert listed(bobs_view) == [anyones]
    anns_answers = anns_view.split('data-testid="answered"', 1)[1]
    assert re.findall(r'data-request="[^"]*/(R\d+)"', anns_answers) == [requests[answered].request_id]
    assert f"/{ticket_path(answered)}" in html.unescape(anns_answers)
    assert "approved" in anns_answers
    bobs_answers = bobs_view.split('data-testid="answered"', 1)[1]
    assert "Nothing yet." in bobs_answers
    assert "data-request=" not in bobs_answers


async def csv_of(someone: Person, query: dict[str, str]) -> tuple[int, dict[str, str], str]:
    async with someone.http.get(f"{someone.origin}/export.csv", params=query, allow_redirects=False) as response:
        return response.status, dict(response.headers), await response.text()


async def refused_to_a_non_auditor(
    someone: Person, days: dict[str, str], *, without: tuple[str, ...], plain: str
) -> None:
    """``someone`` asks for the export with personal data and is refused with nothing of it (403, no file, none of
    ``without`` in the body), and still gets the export without it, the same as ``plain``."""
    status, headers, body = await csv_of(someone, {**days, "personal": "1"})
    assert status == 403
    assert "Content-Disposition" not in headers
    assert body.startswith("not exported: the customers' personal data is for the people AGENT_WEB_AUDITORS names")
    assert not [word for word in without if word in body]
    got, _, body = await csv_of(someone, days)
    assert (got, rows(body)) == (200, rows(plain))


def rows(body: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(body)))


async def test_the_export_holds_each_answer_with_its_policy_leaves_personal_data_out_and_writes_no_formula(
    agent: Harness,
) -> None:
    agent.store.orders.add(Order(order_id="A-2001", amount_cents=3100, customer_email="=1+1@example.com"))
    today = datetime.now(UTC).date()
    days = {"from": str(today - timedelta(days=1)), "to": str(today + timedelta(days=1))}
    reason = "@SUM(1+1) it reached her at 1 Elm Street"
    async with (
        inbox_for(agent, web={"auditors": ["ann"]}) as inbox,
        person(inbox) as ann,
        person(inbox) as ben,
        person(inbox) as stranger,
    ):
        approved = await start_with_cli(agent)
        formula = ticket("My parcel for order A-2001 never arrived", email="=1+1@example.com")
        declined = await agent.start({**formula, "ticket_id": "+T-formula"})
        timed_out = await agent.start(ticket(approval_timeout_seconds=1))
        await asyncio.gather(ann.sign_in("ann"), ben.sign_in("ben"))
        approving = await ann.answer(approved, await waiting_request(agent.client, approved))
        request = await waiting_request(agent.client, declined.id)
        declining = await ben.answer(declined.id, request, "decline", reason=reason)
        assert [(status, notice_kind(page)) for status, page in (approving, declining)] == [(303, "taken")] * 2
        outcome: Outcome = await timed_out.result()
        plain = await csv_of(ann, days)
        personal = await csv_of(ann, {**days, "personal": "1"})
        earlier = await csv_of(ann, {"from": str(today - timedelta(days=9)), "to": str(today - timedelta(days=2))})
        unsigned = await csv_of(stranger, days)
        await refused_to_a_non_auditor(ben, days, without=("example.com", "Elm Street"), plain=plain[2])

    status, headers, body = plain
    assert status == 200
    assert headers["Content-Type"].startswith("text/csv")
    assert headers["Content-Disposition"] == f'attachment; filename="answers-{days["from"]}-to-{days["to"]}.csv"'
    assert next(csv.reader(io.StringIO(body))) == list(COLUMNS)
    by_workflow = {row["workflow_id"]: row for row in rows(body)}
    assert set(by_workflow) == {approved, declined.id, timed_out.id}
    digest = by_workflow[approved]["policy"]
    assert f"money policy {digest} in force" in agent.store.audit.entries()
    yes = by_workflow[approved]
    assert {k: yes[k] for k in ("decision", "approver", "channel", "amount", "currency", "order", "reason")} == {
        "decision": "approved",
        "approver": "ann",
        "channel": "inbox, signed in",
        "amount": "49.00",
        "currency": "USD",
        "order": "A-1001",
        "reason": "",
    }
    no = by_workflow[declined.id]
    assert (no["ticket"], no["decision"], no["approver"], no["amount"], no["order"]) == (
        "'+T-formula",
        "declined",
        "ben",
        "31.00",
        "A-2001",
    )
    assert no["reason"] == "(withheld: personal data)"
    late = by_workflow[timed_out.id]
    assert (late["decision"], late["approver"], late["channel"], late["ticket"]) == (
        "timed out",
        "",
        "",
        outcome.ticket_id,
    )
    assert "Elm Street" not in body
    assert "example.com" not in body

    status, headers, body = personal
    assert status == 200
    assert headers["Content-Disposition"].endswith('-personal.csv"')
    with_data = {row["workflow_id"]: row for row in rows(body)}
    assert with_data[declined.id]["customer_email"] == "'=1+1@example.com"
    assert with_data[declined.id]["reason"] == f"'{reason}"
    assert with_data[approved]["customer_email"] == "ann@example.com"
    for line in csv.reader(io.StringIO(body)):  # no cell a spreadsheet would run
        assert not any(cell.startswith(("=", "+", "-", "@")) for cell in line), line

    assert earlier[0] == 200
    assert rows(earlier[2]) == []
    assert unsigned[0] == 401
    assert approved not in unsigned[2]


async def test_with_no_auditors_set_nobody_exports_personal_data_not_even_an_approver_who_asks_for_it(
    agent: Harness,
) -> None:
    """An operator who never thought of auditors gets the safe default: the export without personal data alone."""
    days = {"from": "2026-03-01", "to": "2026-03-02"}
    async with inbox_alone(agent) as inbox, person(inbox) as ann:
        await ann.sign_in("ann")
        await refused_to_a_non_auditor(ann, days, without=(), plain=(await csv_of(ann, days))[2])


@pytest.mark.parametrize(
    ("days", "said"),
    [
        ({"from": "2026-01-01", "to": "2027-06-30"}, f"a range of at most {MAX_DAYS} days"),
        ({"from": "2026-03-02", "to": "2026-03-01"}, "from (2026-03-02) is after to (2026-03-01)"),
        ({"from": "2026-3-1", "to": "2026-03-02"}, "from and to are dates, YYYY-MM-DD"),
        ({"from": "2026-03-01"}, "from and to are dates, YYYY-MM-DD"),
        ({"from": "2026-03-01'; DROP TABLE answers; --", "to": "2026-03-02"}, "from and to are dates, YYYY-MM-DD"),
    ],
)
async def test_the_export_refuses_a_range_it_does_not_take_and_says_why(
    agent: Harness, days: dict[str, str], said: str
) -> None:
    async with inbox_for(agent) as inbox, person(inbox) as ann:
        await ann.sign_in("ann")
        status, headers, body = await csv_of(ann, days)

    assert status == 400
    assert "Content-Disposition" not in headers
    assert body.startswith(f"not exported: {said}")


async def test_agent_worker_answers_export_writes_what_the_inbox_exports(agent: Harness) -> None:
    today = datetime.now(UTC).date()
    days = {"from": str(today - timedelta(days=1)), "to": str(today + timedelta(days=1))}
    async with inbox_for(agent, web={"auditors": ["ann"]}) as inbox, person(inbox) as ann:
        workflow_id = await start_with_cli(agent)
        await ann.sign_in("ann")
        await ann.answer(workflow_id, await waiting_request(agent.client, workflow_id))
        await agent.client.get_workflow_handle(workflow_id).result()
        _, _, from_inbox = await csv_of(ann, {**days, "personal": "1"})
    env: dict[str, Any] = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_")}
    env["AGENT_DB_PATH"] = str(agent.store.database.path)
    process = await asyncio.create_subprocess_exec(
        AGENT_WORKER,
        "answers",
        "export",
        "--from",
        days["from"],
        "--to",
        days["to"],
        "--personal",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    refused = await asyncio.create_subprocess_exec(
        AGENT_WORKER,
        "answers",
        "export",
        "--from",
        "2020-01-01",
        "--to",
        "2026-01-01",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, why = await asyncio.wait_for(refused.communicate(), 60)

    assert process.returncode == 0, err
    assert out.decode() == from_inbox
    assert [row["workflow_id"] for row in rows(from_inbox)] == [workflow_id]
    assert refused.returncode == 2
    assert f"a range of at most {MAX_DAYS} days" in why.decode()


def test_a_cell_that_would_start_a_formula_is_written_as_text() -> None:
    for cell in ("=1+1", "+1", "-1", "@SUM(A1)", "\t=1", "\r=1"):
        assert neutral(cell) == f"'{cell}"
    for cell in ("ann", "A-1001", "49.00", "", " =1"):
        assert neutral(cell) == cell


def test_an_answer_whose_audit_activity_is_retried_is_one_row_and_another_entrys_answer_is_another(
    store: Business,
) -> None:
    """The ``audit`` activity retried after its first attempt wrote (a worker killed before it reported back): the
    entry and its answer's row are written once, under the entry's key; another entry's answer is its own row."""
    at = datetime.now(UTC)
    answer = AnsweredRequest(
        workflow_id="ticket-T-1",
        request_id="R1",
        decision=ApprovalDecision.APPROVED,
        approver="ann",
        channel="web",
        at=at,
        amount_cents=4900,
        currency="USD",
        order_id="A-1001",
    )
    entry = AuditEntry(ticket_id="T-1", entry="request R1: approved", idempotency_key="audit:t/r/3", answer=answer)

    for _ in range(3):
        store.audit.write(entry)
    store.audit.write(entry.model_copy(update={"idempotency_key": "audit:t/r/4", "answer": answer}))

    found = list(store.audit.answered(at - timedelta(minutes=1), at + timedelta(minutes=1)))
    assert [(ticket, a.request_id, a.approver) for ticket, a in found] == [("T-1", "R1", "ann")] * 2
    assert store.audit.entries("T-1") == ["request R1: approved"] * 2
