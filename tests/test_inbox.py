"""The approval inbox's rules over HTTP, against a real dev server, worker and inbox: who answers is who signed in,
never a form field; a form without its token, or from another origin, changes nothing; the ticket's own reasons
reach the person at once; and the inbox will not start where it would be useless or open to anyone."""

from __future__ import annotations

import asyncio
import base64
import html
import json
import os
import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import aiohttp
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.worker import Worker

from activities.business.database import Database
from activities.contracts.approvals import ApprovalDecision, ApprovalRequest
from activities.contracts.ticket import Outcome, Status
from agent_worker.cli.devserver import binary, free_port
from agent_worker.config.web import WebSettings
from agent_worker.inbox.auth import DEVICE_COOKIE, SESSION_COOKIE
from agent_worker.inbox.server import InboxRefusedError, start_inbox
from agent_worker.passwords import password_matches
from agent_worker.stuck import find_stuck
from tests.support.handover import RELAY, NewerWorkerHandsOver, hand_over_unreadable_state
from tests.support.harness import Harness
from tests.support.history import events
from tests.support.inbox import (
    CLEO,
    KEY,
    ODD_IDS,
    PASSWORDS,
    ROLES,
    TWO_PEOPLE,
    TWO_PEOPLE_WHY,
    Clock,
    Person,
    answer_of,
    button,
    csrf_of,
    inbox_alone,
    inbox_for,
    inbox_web,
    notice_kind,
    notice_of,
    page_of,
    person,
    shown,
    start_odd_tickets,
    start_with_cli,
    waiting_request,
)
from tests.support.processes import AGENT_WORKER, address, agent_worker_dev, run
from tests.support.tickets import ticket
from tests.support.waits import awaiting, poll, waiting_for_customer

pytestmark = pytest.mark.timeout(120)

UPDATES_ACCEPTED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
ACTIVITIES_SCHEDULED = EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED


async def refused_to_start(*args: str, **env: str) -> str:
    """``agent-worker web`` as a person starts it; what it says when it refuses (it must exit non-zero)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_WEB")}
    process = await asyncio.create_subprocess_exec(
        AGENT_WORKER,
        "web",
        *args,
        env={**clean, **env},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode != 0, err
    return err.decode()


async def test_without_signing_keys_the_inbox_does_not_start_and_says_what_to_set() -> None:
    said = await refused_to_start()
    assert "needs AGENT_WEB_APPROVAL_KEYS" in said
    assert "the workers take an answer only if it is signed with one of theirs" in said


async def test_on_an_address_others_can_reach_the_inbox_needs_authentication_configured() -> None:
    said = await refused_to_start("--host", "0.0.0.0", AGENT_WEB_APPROVAL_KEYS=f'["{KEY}"]')  # refused before binding
    assert "refusing to serve the approval inbox on 0.0.0.0 without authentication" in said
    assert "AGENT_WEB_USERS" in said


async def test_on_the_loopback_with_no_authentication_it_makes_a_one_time_sign_in_that_works(agent: Harness) -> None:
    inbox = await start_inbox(
        agent.settings(web=WebSettings(approval_keys=[KEY])), agent.client, host="127.0.0.1", port=0
    )
    try:
        assert inbox.login is not None
        assert inbox.login.password in inbox.describe()
        async with person(inbox) as someone:
            assert await someone.sign_in(inbox.login.name, "not the password") == 401
            assert await someone.sign_in(inbox.login.name, inbox.login.password) == 303
            status, page = await someone.get("/")
    finally:
        await inbox.stop()
    assert status == 200
    assert f'data-testid="person">{inbox.login.name}<' in page


async def test_agent_worker_web_user_prints_a_hash_only_that_password_matches() -> None:
    process = await asyncio.create_subprocess_exec(
        AGENT_WORKER,
        "web-user",
        "ann",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(b"ann's long password\n"), 30)
    short = await asyncio.create_subprocess_exec(
        AGENT_WORKER,
        "web-user",
        "ann",
        stdin=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL,
    )
    _, refused = await asyncio.wait_for(short.communicate(b"short\n"), 30)

    assert process.returncode == 0, err
    ((name, stored),) = json.loads(out).items()
    assert name == "ann"
    assert password_matches(stored, "ann's long password")
    assert not password_matches(stored, "ann's long passwor")
    assert "AGENT_WEB_USERS" in err.decode()
    assert short.returncode != 0
    assert "at least 12 characters" in refused.decode()


async def test_start_inbox_refuses_without_keys_before_it_listens(agent: Harness) -> None:
    with pytest.raises(InboxRefusedError, match="AGENT_WEB_APPROVAL_KEYS"):
        await start_inbox(agent.settings(), agent.client, host="127.0.0.1", port=0)


async def test_nobody_signed_in_sees_no_ticket_and_answers_nothing(agent: Harness) -> None:
    async with inbox_for(agent) as inbox, person(inbox) as stranger:
        workflow_id = await start_with_cli(agent)
        request = await waiting_request(agent.client, workflow_id)
        listing = await stranger.get("/")
        partial = await stranger.get(page_of(workflow_id, partial=1))
        answered = await stranger.post(
            answer_of(workflow_id),
            {"request_id": "R1", "amount_cents": "4900", "decision": "approve", "approver": "ann"},
        )
        still = await waiting_request(agent.client, workflow_id)
        handle = agent.client.get_workflow_handle(workflow_id, result_type=Outcome)
        accepted = await events(handle, UPDATES_ACCEPTED)
        await handle.cancel()
        await handle.result()

    assert listing[0] == 303
    assert partial[0] == 401
    assert answered[0] == 401
    assert still == request
    assert accepted == []
    assert agent.store.payments.refunds() == []


async def test_an_answer_records_who_signed_in_not_the_approver_the_form_names(agent: Harness) -> None:
    async with inbox_for(agent) as inbox, person(inbox) as ann:
        workflow_id = await start_with_cli(agent)
        request = await waiting_request(agent.client, workflow_id)
        assert await ann.sign_in("ann") == 303
        status, page = await ann.answer(workflow_id, request, approver="mallory")
        outcome = await agent.client.get_workflow_handle(workflow_id, result_type=Outcome).result()

    assert (status, notice_kind(page)) == (303, "taken")
    assert notice_of(page) == "approved; Refunded USD 49.00 on order A-1001 (refund #1)."
    (record,) = outcome.approvals
    assert (record.approver, record.channel, record.decision) == ("ann", "web", ApprovalDecision.APPROVED)
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    assert "request R1: refund of USD 49.00 approved by ann (signed in, approval inbox)" in agent.store.audit.entries(
        outcome.ticket_id
    )


async def test_a_form_without_its_csrf_token_or_with_someone_elses_is_refused_and_the_request_still_waits(
    agent: Harness,
) -> None:
    async with inbox_for(agent) as inbox, person(inbox) as ann, person(inbox) as ben:
        workflow_id = await start_with_cli(agent)
        request = await waiting_request(agent.client, workflow_id)
        await ann.sign_in("ann")
        await ben.sign_in("ben")
        without = await ann.answer(workflow_id, request, csrf=None)
        _, bens_page = await ben.get(page_of(workflow_id))
        bens_token = re.search(r'name="csrf" value="([^"]+)"', bens_page)
        assert bens_token
        with_bens = await ann.answer(workflow_id, request, csrf=bens_token.group(1))
        still = await waiting_request(agent.client, workflow_id)
        handle = agent.client.get_workflow_handle(workflow_id, result_type=Outcome)
        accepted = await events(handle, UPDATES_ACCEPTED)
        await handle.cancel()
        await handle.result()

    assert without[0] == 403
    assert "security token is missing or not yours" in without[1]
    assert with_bens[0] == 403
    assert still == request
    assert accepted == []
    assert agent.store.payments.refunds() == []


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://evil.example"},
        {"Origin": "http://127.0.0.1:1"},  # the same machine, another port: the same site, another origin
        {"Origin": "null"},  # a sandboxed frame, a data: page
    ],
)
async def test_a_form_sent_from_another_origin_is_refused_even_with_a_valid_token(
    agent: Harness, headers: dict[str, str]
) -> None:
    async with inbox_for(agent) as inbox, person(inbox) as ann:
        workflow_id = await start_with_cli(agent)
        request = await waiting_request(agent.client, workflow_id)
        await ann.sign_in("ann")
        _, page = await ann.get(page_of(workflow_id))
        token = re.search(r'name="csrf" value="([^"]+)"', page)
        assert token
        form = {"csrf": token.group(1), "request_id": "R1", "amount_cents": "4900", "decision": "approve"}
        status, said = await ann.post(answer_of(workflow_id), form, headers=headers)
        still = await waiting_request(agent.client, workflow_id)
        handle = agent.client.get_workflow_handle(workflow_id, result_type=Outcome)
        await handle.cancel()
        await handle.result()

    assert status == 403
    assert "sent from another site" in said
    assert still == request
    assert agent.store.payments.refunds() == []


async def test_a_second_answer_and_an_answer_for_another_amount_are_refused_with_the_tickets_reason(
    agent: Harness,
) -> None:
    async with inbox_for(agent) as inbox, person(inbox) as ann, person(inbox) as ben:
        # open for the customer's reply once answered, so the second answer reaches an open ticket however slow
        workflow_id = await start_with_cli(agent, reply_window_seconds=86_400)
        request = await waiting_request(agent.client, workflow_id)
        await ann.sign_in("ann")
        await ben.sign_in("ben")
        wrong = await ann.answer(workflow_id, request, amount_cents="1000")
        taken = await ann.answer(workflow_id, request)
        again = await ben.answer(workflow_id, request, decision="decline", reason="Too late, I know.")
        handle = agent.client.get_workflow_handle(workflow_id, result_type=Outcome)
        await waiting_for_customer(handle, turns=1)
        await handle.cancel()
        outcome = await handle.result()

    assert (wrong[0], notice_kind(wrong[1])) == (303, "rejected")
    assert notice_of(wrong[1]) == "rejected: the refund waiting (R1) is USD 49.00, not USD 10.00"
    assert (taken[0], notice_kind(taken[1])) == (303, "taken")
    assert (again[0], notice_kind(again[1])) == (303, "rejected")
    assert notice_of(again[1]).startswith("rejected: request R1 was already answered: approved by ann at ")
    assert [turn.status for turn in outcome.turns] == [Status.RESOLVED]
    assert [(a.approver, a.decision) for a in outcome.approvals] == [("ann", ApprovalDecision.APPROVED)]
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]


async def test_someone_not_among_the_tickets_approvers_is_shown_no_buttons_and_releases_nothing(
    agent: Harness,
) -> None:
    async with inbox_for(agent) as inbox, person(inbox) as bob, person(inbox) as ann:
        workflow_id = await start_with_cli(agent, approvers=["ann"])
        request = await waiting_request(agent.client, workflow_id)
        await bob.sign_in("bob")
        _, bobs_page = await bob.get(page_of(workflow_id))
        refused = await bob.answer(workflow_id, request)  # the form, crafted: his page has none
        await ann.sign_in("ann")
        taken = await ann.answer(workflow_id, request)
        outcome = await agent.client.get_workflow_handle(workflow_id, result_type=Outcome).result()

    assert "are not among this ticket's approvers" in (shown(bobs_page, "may-not-answer") or "")
    assert 'value="approve"' not in bobs_page
    assert (refused[0], notice_kind(refused[1])) == (303, "rejected")
    assert notice_of(refused[1]) == "rejected: bob may not approve refunds on this ticket (approvers: ann)"
    assert (taken[0], notice_kind(taken[1])) == (303, "taken")
    assert [(a.approver, a.decision) for a in outcome.approvals] == [("ann", ApprovalDecision.APPROVED)]


async def test_a_large_refund_shows_its_rule_pays_nothing_on_the_first_approval_refuses_it_twice_and_pays_on_the_second(
    agent: Harness,
) -> None:
    """Two people in turn: the page and the list say why it waits and how far it is; ann's approval is 1 of 2 and
    her button goes; her forced second POST is refused with the ticket's reason; ben's approval pays, once."""
    async with inbox_for(agent, TWO_PEOPLE) as inbox, person(inbox) as ann, person(inbox) as ben:
        workflow_id = await start_with_cli(agent, **CLEO)
        request = await waiting_request(agent.client, workflow_id)
        await ann.sign_in("ann")
        await ben.sign_in("ben")
        _, before = await ann.get(page_of(workflow_id))
        _, listed_before = await ann.get("/?tab=approval")
        first = await ann.answer(workflow_id, request)
        paid_after_one = agent.store.payments.refunds()
        _, after = await ann.get(page_of(workflow_id))
        _, listed_after = await ann.get("/?tab=approval")
        twice = await ann.answer(workflow_id, request)  # the form, crafted: her button is disabled
        _, bens_page = await ben.get(page_of(workflow_id))
        second = await ben.answer(workflow_id, request)
        outcome = await agent.client.get_workflow_handle(workflow_id, result_type=Outcome).result()

    assert shown(before, "why") == TWO_PEOPLE_WHY
    assert shown(before, "progress") == "needs 2 approvals; only approvals signed in here count"
    assert "yours would be 1 of 2: nothing is paid until another person approves" in before
    assert TWO_PEOPLE_WHY in listed_before
    assert "needs 2 approvals" in listed_before
    assert "only signed-in approvals count" in listed_before
    assert (first[0], notice_kind(first[1])) == (303, "taken")
    assert notice_of(first[1]) == (
        "partly_approved; Approval 1 of 2 recorded; nothing is paid until another person approves."
    )
    assert paid_after_one == []
    assert shown(after, "progress") == "1 of 2 approvals, by ann; only approvals signed in here count"
    assert "disabled" in (button(after, "approve") or "")
    assert shown(after, "may-not-approve") == (
        "You (ann) approved this request already (1 of 2): the next approval must be another person's. "
        "You may still decline it."
    )
    assert button(after, "decline") is not None
    assert "1 of 2 approvals, by ann" in listed_after
    assert (twice[0], notice_kind(twice[1])) == (303, "rejected")
    assert notice_of(twice[1]) == (
        "rejected: ann already approved request R1 (1 of 2): the next must be another person's"
    )
    assert "disabled" not in (button(bens_page, "approve") or "disabled")
    assert "yours would be 2 of 2: it pays the refund" in bens_page
    assert (second[0], notice_kind(second[1])) == (303, "taken")
    assert notice_of(second[1]) == "approved; Refunded USD 120.00 on order A-1003 (refund #1)."
    assert [(a.approver, a.decision) for a in outcome.approvals] == [
        ("ann", ApprovalDecision.PARTLY_APPROVED),
        ("ben", ApprovalDecision.APPROVED),
    ]
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [12_000]


async def test_under_roles_an_agent_whose_role_does_not_reach_the_amount_gets_no_buttons_and_the_leads_approval_pays(
    agent: Harness,
) -> None:
    async with inbox_for(agent, ROLES) as inbox, person(inbox) as ann, person(inbox) as ben:
        workflow_id = await start_with_cli(agent, **CLEO)
        request = await waiting_request(agent.client, workflow_id)
        await ann.sign_in("ann")
        await ben.sign_in("ben")
        _, anns_page = await ann.get(page_of(workflow_id))
        refused = await ann.answer(workflow_id, request)  # the form, crafted: her page has none
        _, bens_page = await ben.get(page_of(workflow_id))
        taken = await ben.answer(workflow_id, request)
        outcome = await agent.client.get_workflow_handle(workflow_id, result_type=Outcome).result()

    assert request.approvers == ["ben"]
    assert button(anns_page, "approve") is None
    assert button(anns_page, "decline") is None
    assert shown(anns_page, "may-not-answer") == (
        "You (ann) are not among this ticket's approvers for a refund of USD 120.00 (ben), so it would not take "
        "your answer."
    )
    assert (refused[0], notice_kind(refused[1])) == (303, "rejected")
    assert notice_of(refused[1]) == "rejected: ann may not approve refunds on this ticket (approvers: ben)"
    assert shown(bens_page, "progress") == "needs 1 approval; only approvals signed in here count"
    assert button(bens_page, "approve") is not None
    assert (taken[0], notice_kind(taken[1])) == (303, "taken")
    assert [(a.approver, a.decision) for a in outcome.approvals] == [("ben", ApprovalDecision.APPROVED)]
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [12_000]


async def tool_results_sent_to_the_model(client: Client, workflow_id: str) -> list[str]:
    """Every tool result the ``think`` activity carried to the model, as its scheduled events recorded them."""
    sent = []
    for event in await events(client.get_workflow_handle(workflow_id), ACTIVITIES_SCHEDULED):
        attributes = event.activity_task_scheduled_event_attributes
        if attributes.activity_type.name != "think":
            continue
        (think,) = await client.data_converter.decode(attributes.input.payloads)
        for message in think["messages"]:
            blocks = message["content"] if isinstance(message["content"], list) else []
            sent += [str(block["content"]) for block in blocks if block.get("type") == "tool_result"]
    return sent


async def test_a_decline_without_a_reason_is_not_sent_and_one_with_a_reason_reaches_the_person_the_audit_and_the_model(
    agent: Harness,
) -> None:
    reason = "The carrier shows it delivered to your front desk on Monday."
    async with inbox_for(agent) as inbox, person(inbox) as ann:
        workflow_id = await start_with_cli(agent)
        request = await waiting_request(agent.client, workflow_id)
        await ann.sign_in("ann")
        empty = await ann.answer(workflow_id, request, decision="decline")
        blank = await ann.answer(workflow_id, request, decision="decline", reason="   \n ")
        too_long = await ann.answer(workflow_id, request, decision="decline", reason="x" * 501)
        handle = agent.client.get_workflow_handle(workflow_id, result_type=Outcome)
        accepted = await events(handle, UPDATES_ACCEPTED)
        still = await waiting_request(agent.client, workflow_id)
        taken = await ann.answer(workflow_id, request, decision="decline", reason=reason)
        outcome = await handle.result()
        model_read = await tool_results_sent_to_the_model(agent.client, workflow_id)

    for refused in (empty, blank):
        assert refused[0] == 400
        assert notice_of(refused[1]) == (
            "not sent: a decline needs a reason; it goes to the audit trail and to the model, so the customer is "
            "told why"
        )
    assert too_long[0] == 400
    assert notice_of(too_long[1]).startswith("not sent: reason: ")
    assert accepted == []
    assert still == request
    assert (taken[0], notice_kind(taken[1])) == (303, "taken")
    told = f"A person (ann) declined this refund, so it was not made. Their reason: {reason}"
    assert notice_of(taken[1]) == f"declined; {told}"
    assert outcome.status is Status.DECLINED
    assert [(a.approver, a.decision, a.reason) for a in outcome.approvals] == [
        ("ann", ApprovalDecision.DECLINED, reason)
    ]
    assert any(call.result == told for call in outcome.tool_calls)
    assert told in model_read  # the tool result the model was sent, as the history recorded the think activity's input
    assert f"request R1: refund of USD 49.00 declined by ann (signed in, approval inbox): {reason}" in (
        agent.store.audit.entries(outcome.ticket_id)
    )
    assert agent.store.payments.refunds() == []


async def test_behind_single_sign_on_the_customer_is_shown_no_buttons_for_their_own_refund_and_is_refused(
    agent: Harness,
) -> None:
    public = "http://inbox.example"
    proxy: dict[str, Any] = {"proxy_header": "X-Forwarded-Email", "public_url": public, "users": {}}
    async with inbox_for(agent, web={"trusted_proxies": ["127.0.0.1"], **proxy}) as inbox, person(inbox) as ann:
        workflow_id = await start_with_cli(agent)  # ann@example.com's refund
        cleos = await start_with_cli(agent, **CLEO)  # one she may answer: its form holds her token
        request = await waiting_request(agent.client, workflow_id)
        await waiting_request(agent.client, cleos)
        as_ann = {"Host": "inbox.example", "X-Forwarded-Email": "Ann@Example.com"}
        _, page = await ann.get(page_of(workflow_id), headers=as_ann)
        _, other = await ann.get(page_of(cleos), headers=as_ann)
        token = re.search(r'name="csrf" value="([^"]+)"', other)
        assert token
        form = {"csrf": token.group(1), "request_id": "R1", "amount_cents": "4900", "decision": "approve"}
        refused = await ann.send(answer_of(workflow_id), form, headers={**as_ann, "Origin": public})
        still = await waiting_request(agent.client, workflow_id)
        for closing in (workflow_id, cleos):
            handle = agent.client.get_workflow_handle(closing, result_type=Outcome)
            await handle.cancel()
            await handle.result()

    assert button(page, "approve") is None
    assert button(other, "approve") is not None
    assert shown(page, "may-not-answer") == (
        "You (Ann@Example.com) are this refund's customer, and nobody answers a request for a refund to themselves."
    )
    assert (refused[0], notice_kind(refused[1])) == (303, "rejected")
    assert notice_of(refused[1]) == "rejected: Ann@Example.com may not answer a request for a refund to themselves"
    assert still == request
    assert agent.store.payments.refunds() == []


async def test_behind_single_sign_on_the_proxys_header_names_the_approver_but_only_from_the_proxy(
    agent: Harness,
) -> None:
    public = "http://inbox.example"
    proxy: dict[str, Any] = {"proxy_header": "X-Forwarded-Email", "public_url": public, "users": {}}
    async with inbox_for(agent, web={"trusted_proxies": ["127.0.0.1"], **proxy}) as inbox, person(inbox) as ann:
        workflow_id = await start_with_cli(agent, approvers=["ann@example.com"], **CLEO)  # not her own refund
        request = await waiting_request(agent.client, workflow_id)
        through_proxy = {"Host": "inbox.example", "X-Forwarded-Email": "ann@example.com"}
        wrong_host = await ann.get("/", headers={**through_proxy, "Host": "attacker.example"})
        status, page = await ann.get(page_of(workflow_id), headers=through_proxy)
        token = re.search(r'name="csrf" value="([^"]+)"', page)
        assert token
        form = {"csrf": token.group(1), "request_id": "R1", "amount_cents": str(request.amount_cents)}
        taken = await ann.send(
            answer_of(workflow_id),
            {**form, "decision": "approve"},
            headers={**through_proxy, "Origin": public},
        )
        outcome = await agent.client.get_workflow_handle(workflow_id, result_type=Outcome).result()

    async with inbox_for(agent, web={"trusted_proxies": ["192.0.2.1"], **proxy}) as inbox, person(inbox) as mallory:
        not_from_the_proxy = await mallory.get(
            "/login", headers={"Host": "inbox.example", "X-Forwarded-Email": "ann@x"}
        )

    assert wrong_host[0] == 421
    assert status == 200
    assert 'data-testid="person">ann@example.com<' in page
    assert (taken[0], notice_kind(taken[1])) == (303, "taken"), taken
    assert [(a.approver, a.channel) for a in outcome.approvals] == [("ann@example.com", "web")]
    assert not_from_the_proxy[0] == 401
    assert "did not name you" in not_from_the_proxy[1]


async def test_a_host_name_pointed_at_the_loopback_by_another_site_is_not_served(agent: Harness) -> None:
    async with inbox_for(agent) as inbox, person(inbox) as someone:
        port = urlsplit(inbox.url).port
        rebound = await someone.get("/login", headers={"Host": f"evil.example:{port}"})
        malformed = await someone.get("/login", headers={"Host": "evil.example/"})
        local = await someone.get("/login", headers={"Host": f"localhost:{port}"})
    assert rebound[0] == 421
    assert malformed[0] == 421
    assert local[0] == 200


async def test_signing_in_sets_a_cookie_no_script_reads_and_no_other_site_sends_and_goes_back_only_to_the_inbox(
    agent: Harness,
) -> None:
    async with inbox_for(agent) as inbox, person(inbox) as ann:
        _, page = await ann.get("/login")
        token = re.search(r'name="csrf" value="([^"]+)"', page)
        assert token
        form = {"name": "ann", "password": "ann's long password", "csrf": token.group(1), "next": "//evil.example/"}
        async with ann.http.post(
            ann.origin + "/login", data=form, headers={"Origin": ann.origin}, allow_redirects=False
        ) as response:
            cookie = next(v for v in response.headers.getall("Set-Cookie") if v.startswith("inbox_session="))
            location = response.headers["Location"]

    attributes = {part.strip().split("=")[0].lower() for part in cookie.split(";")}
    assert {"httponly", "samesite", "path"} <= attributes
    assert "samesite=lax" in cookie.lower()
    assert "secure" not in attributes  # plain http on the loopback: a browser keeps no Secure cookie from it elsewhere
    assert location == "/"


def session_cookie(someone: Person) -> str:
    (cookie,) = [c.value for c in someone.http.cookie_jar if c.key == "inbox_session"]
    return cookie


async def test_signing_out_ends_the_session_on_the_server_so_a_copy_of_the_cookie_signs_nobody_in(
    agent: Harness,
) -> None:
    async with inbox_alone(agent) as inbox, person(inbox) as ann, person(inbox) as elsewhere:
        assert await ann.sign_in("ann") == 303
        assert await elsewhere.sign_in("ann") == 303  # ann's other browser
        copied = session_cookie(ann)
        _, page = await ann.get("/")
        signed_out = await ann.post("/logout", {"csrf": csrf_of(page)})
        async with aiohttp.ClientSession(cookies={"inbox_session": copied}) as thief_http:
            thief = Person(thief_http, inbox.url)
            taken = await thief.get("/")
            told = await thief.get("/login")
        other_browser = await elsewhere.get("/")

    assert signed_out[0] == 303
    assert taken[0] == 303  # to the sign-in page
    assert 'data-testid="login-error">Your session has ended' in told[1]
    assert other_browser[0] == 200  # signing out in one browser leaves the other signed in


async def test_a_session_idles_out_and_a_page_refreshing_itself_keeps_no_one_signed_in(agent: Harness) -> None:
    clock = Clock(datetime.now(UTC))
    database = Database(agent.store.database.url, clock=clock)
    try:
        async with inbox_alone(agent, database, web={"session_idle_minutes": 10}) as inbox, person(inbox) as ann:
            assert await ann.sign_in("ann") == 303
            clock.turn(timedelta(minutes=9))
            busy = await ann.get("/")  # ann's own request: the idle time starts again
            refreshed = []
            for _ in range(4):
                clock.turn(timedelta(minutes=3))
                refreshed.append((await ann.get("/?partial=1"))[0])  # the list refreshing itself
            after = await ann.get("/")
    finally:
        database.close()

    assert busy[0] == 200
    assert refreshed == [200, 200, 200, 401]  # 12 minutes after ann's last request, refreshes or not
    assert after[0] == 303


async def attempt(
    someone: Person, name: str, password: str, headers: dict[str, str] | None = None
) -> tuple[int, str | None, str]:
    """Sign in through the form: the status, ``Retry-After`` and the page."""
    _, page = await someone.get("/login")
    form = {"name": name, "password": password, "csrf": csrf_of(page), "next": "/"}
    sent = {"Origin": someone.origin, **(headers or {})}
    async with someone.http.post(someone.origin + "/login", data=form, headers=sent, allow_redirects=False) as response:
        return response.status, response.headers.get("Retry-After"), await response.text()


async def test_an_address_is_read_from_x_forwarded_for_only_behind_a_trusted_proxy(agent: Harness) -> None:
    """Twenty wrong passwords from one address, each for another name: the next is refused for the address. A header
    naming another address is believed only from a trusted proxy, so rotating it gets an attacker nowhere."""
    names = [f"guess-{n}" for n in range(20)]
    async with inbox_alone(agent) as inbox, person(inbox) as attacker:
        rotating = [
            await attempt(attacker, name, "guess", {"X-Forwarded-For": f"203.0.113.{n}"})
            for n, name in enumerate(names)
        ]
        spoofed = await attempt(attacker, "ann", "guess", {"X-Forwarded-For": "198.51.100.1"})
    async with inbox_alone(agent, web={"trusted_proxies": ["127.0.0.1"]}) as inbox, person(inbox) as balancer:
        one_client = [
            await attempt(balancer, name, "guess", {"X-Forwarded-For": "10.9.9.9, 203.0.113.7"}) for name in names
        ]
        same_client = await attempt(balancer, "ann", "guess", {"X-Forwarded-For": "203.0.113.7"})
        another_client = await attempt(balancer, "ann", "ann's long password", {"X-Forwarded-For": "203.0.113.8"})

    assert [status for status, _, _ in rotating] == [401] * 20
    assert spoofed[0] == 429
    assert "Too many wrong passwords from your address" in spoofed[2]
    assert [status for status, _, _ in one_client] == [401] * 20
    assert same_client[0] == 429
    assert another_client[0] == 303  # another person behind the same load balancer signs in


async def test_wrong_passwords_are_throttled_with_429_and_retry_after_for_known_and_unknown_names_alike(
    agent: Harness,
) -> None:
    """Five wrong passwords for a name in 15 minutes, then even the right one is refused unchecked, with the wait."""

    async with inbox_alone(agent) as inbox, person(inbox) as someone:
        anns = [await attempt(someone, "ann", f"guess {n}") for n in range(5)]
        ann_right = await attempt(someone, "ann", "ann's long password")
        mallorys = [await attempt(someone, "mallory", f"guess {n}") for n in range(6)]
        ben = await attempt(someone, "ben", "ben's long password")

    assert [status for status, _, _ in anns] == [401] * 5
    assert all(retry is None for _, retry, _ in anns)
    status, retry_after, page = ann_right
    assert status == 429
    assert retry_after is not None
    assert 840 < int(retry_after) <= 900
    assert "Too many wrong passwords for ann; try again in 15 min." in page
    assert [status for status, _, _ in mallorys] == [401] * 5 + [429]  # a name nobody has: the same answers
    assert "Too many wrong passwords for mallory; try again in 15 min." in mallorys[-1][2]
    assert ben[0] == 303  # ten wrong from this address, under its limit: ben signs in


async def test_a_guesser_on_anns_name_is_throttled_while_ann_signs_in_from_the_browser_she_signed_in_on_before(
    agent: Harness,
) -> None:
    """Someone guesses wrong on ann's name until the inbox stops checking; ann, back at the browser where she signed
    in before (her session over, her device cookie kept), signs in and sees the inbox; from a browser the inbox does
    not know, even her right password is refused with the guesser's."""
    right = PASSWORDS["ann"]
    async with (
        inbox_alone(agent) as inbox,
        person(inbox) as anns_desk,
        person(inbox) as guesser,
        person(inbox) as anns_phone,
    ):
        first = await attempt(anns_desk, "ann", right)
        (device,) = [cookie for cookie in anns_desk.http.cookie_jar if cookie.key == DEVICE_COOKIE]
        anns_desk.http.cookie_jar.clear(lambda cookie: cookie.key == SESSION_COOKIE)  # the next morning
        guesses = [await attempt(guesser, "ann", f"guess {n}") for n in range(6)]
        at_her_desk = await attempt(anns_desk, "ann", right)
        inbox_page = await anns_desk.get("/")
        on_a_new_browser = await attempt(anns_phone, "ann", right)
        guessing_on = await attempt(guesser, "ann", "guess 7")

    assert first[0] == 303
    assert (device["httponly"], device["samesite"].lower()) == (True, "strict")  # no script reads it, no site sends it
    assert [status for status, _, _ in guesses] == [401] * 5 + [429]
    assert at_her_desk[0] == 303
    assert inbox_page[0] == 200
    assert shown(inbox_page[1], "person") == "ann"
    assert on_a_new_browser[0] == 429
    assert "Too many wrong passwords for ann" in on_a_new_browser[2]
    assert guessing_on[0] == 429


async def test_agent_worker_web_sessions_lists_who_is_signed_in_and_ends_all_of_a_persons_sessions(
    agent: Harness,
) -> None:
    env = {**os.environ, "AGENT_DB_PATH": str(agent.store.database.path)}

    async def command(*args: str) -> str:
        done = await asyncio.create_subprocess_exec(
            AGENT_WORKER,
            "web-sessions",
            *args,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(done.communicate(), 60)
        assert done.returncode == 0, err
        return out.decode()

    async with inbox_alone(agent) as inbox, person(inbox) as ann, person(inbox) as ann_too, person(inbox) as ben:
        for someone, name in ((ann, "ann"), (ann_too, "ann"), (ben, "ben")):
            assert await someone.sign_in(name) == 303
        listed = await command("list")
        listed_ann = await command("list", "ann")
        ended = await command("end", "ann")
        after = [(await someone.get("/"))[0] for someone in (ann, ann_too, ben)]
        none_left = await command("list", "ann")

    rows = [line.split("\t") for line in listed.splitlines()]
    assert [row[0] for row in rows] == ["ann", "ann", "ben"]
    assert all(row[4] == "127.0.0.1" and row[2].startswith("signed in ") for row in rows)
    assert [line.split("\t")[0] for line in listed_ann.splitlines()] == ["ann", "ann"]
    assert ended.strip() == "ended 2 sessions of ann"
    assert after == [303, 303, 200]
    assert none_left.strip() == "no live sessions of ann"


async def listed_on(someone: Person, tab: str, expected: set[str]) -> str:
    """The tab's page once it lists every one of ``expected`` (visibility lags a little)."""

    async def listing_them() -> str | None:
        status, page = await someone.get(f"/?tab={tab}")
        assert status == 200
        return page if all(f'data-workflow-id="{workflow_id}"' in page for workflow_id in expected) else None

    return await poll(listing_them, timeout=90, interval=0.5, what=f"the {tab} tab to list {sorted(expected)}")


async def test_each_tab_lists_its_tickets_from_visibility_with_no_worker_running(
    agent: Harness, client: Client
) -> None:
    async with agent.worker(), Worker(client, task_queue=RELAY, workflows=[NewerWorkerHandsOver]):
        # The refunds the others make are of other orders: a refund of A-1001 by one of them would leave the waiting
        # ticket's request to a ledger that no longer covers it, refused with nobody asked.
        waiting = await agent.start(ticket())
        replied_to = await agent.start(
            ticket(
                "My parcel for order A-1002 never arrived",
                "bob@example.com",
                approval_limit_cents=10_000,
                reply_window_seconds=3600,
            )
        )
        on_its_way = await agent.start(ticket("My parcel for order A-1001 is on its way", approval_limit_cents=10_000))
        done = await agent.start(
            ticket("My parcel for order A-1004 never arrived", "dev@example.com", approval_limit_cents=10_000)
        )
        stuck = await hand_over_unreadable_state(client, agent.task_queue)
        await awaiting(waiting, 4900)
        await done.result()

        async def marked_stuck() -> bool:
            return bool((await find_stuck(client, limit=10, within=f"TaskQueue = '{agent.task_queue}'")).tickets)

        # the server marks it after two failed workflow tasks, 10 s apart
        await poll(marked_stuck, timeout=90, interval=1, what="the server to mark the ticket stuck")

    inbox = await start_inbox(agent.settings(web=inbox_web()), client, port=0)
    tabs = {
        "approval": waiting.id,
        "customer": replied_to.id,
        "event": on_its_way.id,
        "closed": done.id,
        "stuck": stuck.id,
    }
    try:
        async with person(inbox) as ann:
            await ann.sign_in("ann")
            pages = {tab: await listed_on(ann, tab, {workflow_id}) for tab, workflow_id in tabs.items()}
            status, ticket_page = await ann.get(page_of(waiting.id))
    finally:
        await inbox.stop()
        for handle in (waiting, replied_to, on_its_way):
            await handle.cancel()
        await stuck.terminate("test over")

    for tab, page in pages.items():
        listed = set(re.findall(r'data-workflow-id="([^"]+)"', page))
        assert listed == {tabs[tab]}, (tab, listed)
    assert "49.00" in pages["approval"]
    assert "order A-1001" in pages["event"]
    assert "UnreadableStateError" in pages["stuck"]
    assert status == 200
    assert 'data-testid="amount">USD 49.00<' in ticket_page
    assert "the model asks for issue_refund(order_id=&#39;A-1001&#39;, amount_cents=4900)" in ticket_page
    # in words, the call in its details
    assert "The agent asked for a refund of USD 49.00 on order A-1001" in ticket_page


async def test_agent_worker_dev_serves_the_inbox_beside_its_worker_and_prints_how_to_sign_in(tmp_path: Path) -> None:
    """``agent-worker dev`` with nothing configured: the inbox on the loopback, a one-time sign-in printed, and a key
    made for the run that its own worker holds, so an answer from the inbox releases the refund."""
    port, ui_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_")} | {"AGENT_MODEL_BACKEND": "scripted"}
    async with agent_worker_dev(tmp_path, port, ui_port, env) as said:
        found = re.search(
            r"approval inbox on (\S+) \(sign in as (\S+) with password (\S+), made for this run\)", "".join(said)
        )
        assert found, said
        url, name, password = found.groups()
        workflow_id = f"ticket-{uuid.uuid4()}"
        temporal = [binary("temporal"), "--address", f"127.0.0.1:{port}"]
        await run(
            *temporal,
            "workflow",
            "start",
            "--type",
            "SupportAgent",
            "--task-queue",
            "support-agent",
            "--workflow-id",
            workflow_id,
            "--input",
            json.dumps(ticket()),
        )
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
            someone = Person(http, url)
            assert await someone.sign_in(name, password) == 303

            async def request_shown() -> str | None:
                _, page = await someone.get(page_of(workflow_id))
                return page if 'data-testid="request-id"' in page else None

            page = await poll(request_shown, timeout=30, interval=0.2, what="the ticket's page to show the request")
            request = ApprovalRequest(request_id="R1", amount_cents=4900, deadline=datetime.now(UTC))
            status, answered = await someone.answer(workflow_id, request)

    assert url.startswith("http://127.0.0.1:")
    assert "AGENT_WEB_APPROVAL_KEYS is not set" in "".join(said)
    assert 'data-testid="amount">USD 49.00<' in page
    assert (status, notice_kind(answered)) == (303, "taken")
    assert notice_of(answered) == "approved; Refunded USD 49.00 on order A-1001 (refund #1)."


def link_to(listing: str, workflow_id: str) -> str:
    """The address a list's entry for ``workflow_id`` links to, as a browser reads it from the page."""
    entry = re.search(rf'data-workflow-id="{re.escape(html.escape(workflow_id))}">\s*<a href="([^"]+)"', listing)
    assert entry, (workflow_id, listing)
    return html.unescape(entry.group(1))


def form_action(page: str) -> str:
    found = re.search(r'<form method="post" action="([^"]+)" class="answer approve">', page)
    assert found, page
    return html.unescape(found.group(1))


async def test_a_ticket_whatever_its_id_holds_is_listed_opened_and_approved_through_the_links_the_inbox_makes(
    agent: Harness,
) -> None:
    """Ids with a path's suffix, an escape, a query, a fragment, ``..``, a space and letters outside ASCII: the
    list's link opens that ticket and no other, and the page's own form approves it."""
    async with inbox_for(agent) as inbox, person(inbox) as ann:
        orders = await start_odd_tickets(agent)
        await ann.sign_in("ann")
        listing = await listed_on(ann, "approval", set(ODD_IDS))
        opened, answered = {}, {}
        for workflow_id in ODD_IDS:
            request = await waiting_request(agent.client, workflow_id)
            status, page = await ann.get(link_to(listing, workflow_id))
            opened[workflow_id] = (
                status,
                shown(page, "request-id"),
                f"&middot; {html.escape(workflow_id)}</p>" in page,
            )
            form = {"csrf": csrf_of(page), "request_id": request.request_id, "amount_cents": "4900"}
            sent, landed = await ann.send(form_action(page), {**form, "decision": "approve"})
            answered[workflow_id] = (sent, notice_of(landed), f"&middot; {html.escape(workflow_id)}</p>" in landed)
        outcomes = {
            workflow_id: await agent.client.get_workflow_handle(workflow_id, result_type=Outcome).result()
            for workflow_id in ODD_IDS
        }

    for workflow_id, order_id in orders.items():
        assert opened[workflow_id] == (200, "R1", True), workflow_id
        sent, notice, same_ticket = answered[workflow_id]
        assert (sent, same_ticket) == (303, True), workflow_id
        assert re.fullmatch(rf"approved; Refunded USD 49\.00 on order {order_id} \(refund #\d+\)\.", notice), notice
        assert [(a.approver, a.decision) for a in outcomes[workflow_id].approvals] == [
            ("ann", ApprovalDecision.APPROVED)
        ], workflow_id
        assert [r.amount_cents for r in agent.store.payments.refunds(order_id)] == [4900], workflow_id


async def test_an_address_from_before_the_id_moved_to_the_query_string_leads_to_the_same_ticket(
    agent: Harness,
) -> None:
    async with inbox_for(agent) as inbox, person(inbox) as ann:
        workflow_id = await start_with_cli(agent, workflow_id=f"old-{uuid.uuid4()}/with space")
        await waiting_request(agent.client, workflow_id)
        await ann.sign_in("ann")
        async with ann.http.get(
            f"{ann.origin}/tickets/{quote(workflow_id, safe='/')}", allow_redirects=False
        ) as response:
            status, location = response.status, response.headers["Location"]
        _, page = await ann.get(location)
        shared_answer_address = await ann.get(answer_of(workflow_id))
        handle = agent.client.get_workflow_handle(workflow_id, result_type=Outcome)
        accepted = await events(handle, UPDATES_ACCEPTED)
        await handle.cancel()
        await handle.result()

    assert (status, location) == (301, page_of(workflow_id))
    assert shown(page, "request-id") == "R1"
    assert shared_answer_address[0] == 303  # opened as a page, the answer's address sends nothing
    assert accepted == []


async def test_an_answer_redirects_to_the_tickets_page_whose_notice_only_the_person_who_answered_sees(
    agent: Harness,
) -> None:
    """POST, redirect, GET: a reload shows the result again and sends nothing; the same address opened by someone
    else, or with the notice altered, shows the ticket without it."""
    async with inbox_for(agent) as inbox, person(inbox) as ann, person(inbox) as ben:
        workflow_id = await start_with_cli(agent)
        request = await waiting_request(agent.client, workflow_id)
        await ann.sign_in("ann")
        await ben.sign_in("ben")
        _, page = await ann.get(page_of(workflow_id))
        form = {"csrf": csrf_of(page), "request_id": request.request_id, "amount_cents": "4900", "decision": "approve"}
        async with ann.http.post(
            ann.origin + answer_of(workflow_id), data=form, headers={"Origin": ann.origin}, allow_redirects=False
        ) as response:
            status, location = response.status, response.headers["Location"]
        _, landed = await ann.get(location)
        _, reloaded = await ann.get(location)
        _, bens = await ben.get(location)
        sealed = parse_qs(urlsplit(location).query)["notice"][0]
        raw = bytearray(base64.urlsafe_b64decode(sealed + "=" * (-len(sealed) % 4)))
        raw[-20] ^= 1  # one bit of the encrypted text, turned
        altered = base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")
        _, forged = await ann.get(page_of(workflow_id, notice=altered))
        _, made_up = await ann.get(page_of(workflow_id, notice="taken"))
        outcome = await agent.client.get_workflow_handle(workflow_id, result_type=Outcome).result()
        accepted = await events(agent.client.get_workflow_handle(workflow_id), UPDATES_ACCEPTED)

    assert status == 303
    assert location.startswith(page_of(workflow_id) + "&notice=")
    for seen in (landed, reloaded):
        assert (notice_kind(seen), notice_of(seen)) == (
            "taken",
            "approved; Refunded USD 49.00 on order A-1001 (refund #1).",
        )
    for page_without in (bens, forged, made_up):
        assert 'data-testid="notice"' not in page_without
        assert f"&middot; {workflow_id}</p>" in page_without  # the ticket itself opens
    assert len(accepted) == 1
    assert [(a.approver, a.decision) for a in outcome.approvals] == [("ann", ApprovalDecision.APPROVED)]
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]


async def test_an_approval_above_the_confirmation_amount_is_sent_only_with_that_persons_confirmation(
    agent: Harness,
) -> None:
    """The first press shows a page stating the amount, the order and the customer, sending nothing; a form that
    claims a confirmation, or carries someone else's, gets that page again; the page's own button sends it. Below
    the amount, and a decline, go at once."""
    async with (
        inbox_for(agent, web={"confirm_above_cents": 10_000}) as inbox,
        person(inbox) as ann,
        person(inbox) as ben,
    ):
        large = await start_with_cli(agent, **CLEO)  # 120.00
        small = await start_with_cli(agent)  # 49.00
        request = await waiting_request(agent.client, large)
        small_request = await waiting_request(agent.client, small)
        await ann.sign_in("ann")
        await ben.sign_in("ben")
        asked = await ann.answer(large, request)
        crafted = await ann.answer(large, request, confirmed="yes")
        _, bens_confirmation = await ben.answer(large, request)
        bens = re.search(r'name="confirmed" value="([^"]+)"', bens_confirmation)
        assert bens
        borrowed = await ann.answer(large, request, confirmed=html.unescape(bens.group(1)))
        handle = agent.client.get_workflow_handle(large, result_type=Outcome)
        accepted_before = await events(handle, UPDATES_ACCEPTED)
        still = await waiting_request(agent.client, large)
        taken = await ann.confirm(asked[1])
        straight = await ann.answer(small, small_request)
        outcome = await handle.result()
        await agent.client.get_workflow_handle(small, result_type=Outcome).result()

    assert asked[0] == 200
    assert shown(asked[1], "confirm-amount") == "USD 120.00"
    assert shown(asked[1], "confirm-order") == "A-1003"
    assert shown(asked[1], "confirm-customer") == "cleo@example.com"
    assert button(asked[1], "approve") is not None
    for refused in (crafted, borrowed):
        assert refused[0] == 200
        assert 'data-testid="confirm"' in refused[1]
    assert accepted_before == []
    assert still == request
    assert (taken[0], notice_kind(taken[1])) == (303, "taken")
    assert notice_of(taken[1]) == "approved; Refunded USD 120.00 on order A-1003 (refund #1)."
    assert (straight[0], notice_kind(straight[1])) == (303, "taken")
    assert [(a.approver, a.decision) for a in outcome.approvals] == [("ann", ApprovalDecision.APPROVED)]
    assert sorted(r.amount_cents for r in agent.store.payments.refunds()) == [4900, 12_000]


async def test_a_request_nobody_answered_is_told_as_nobody_answering_and_a_late_answer_hears_the_ticket_closed(
    agent: Harness,
) -> None:
    """A timeout is no answer: the page and ``agent-worker show`` name no approver and no channel. An answer sent
    after the ticket closed is told so in the desk's words, not Temporal's."""
    async with inbox_for(agent) as inbox, person(inbox) as ann:
        workflow_id = await start_with_cli(agent, approval_timeout_seconds=2)
        request = await waiting_request(agent.client, workflow_id)
        await ann.sign_in("ann")
        _, page = await ann.get(page_of(workflow_id))
        outcome = await agent.client.get_workflow_handle(workflow_id, result_type=Outcome).result()
        form = {"csrf": csrf_of(page), "request_id": request.request_id, "amount_cents": "4900", "decision": "approve"}
        late = await ann.send(answer_of(workflow_id), form)
        _, closed = await ann.get(page_of(workflow_id))
    printed = await run(AGENT_WORKER, "show", workflow_id, "--address", address(agent.client))

    assert [(a.decision, a.approver) for a in outcome.approvals] == [(ApprovalDecision.TIMED_OUT, None)]
    (told,) = re.findall(r'data-testid="approval">([^<]*)<', closed)
    assert re.fullmatch(
        r"request R1: nobody answered by \d{4}-\d\d-\d\d \d\d:\d\d UTC; the refund of USD 49.00 "
        r"was not made",
        html.unescape(told),
    ), told
    assert "signal" not in told
    assert (late[0], notice_kind(late[1])) == (303, "rejected")
    assert re.fullmatch(  # not "it was declined": nobody declined it
        r"not taken: this ticket has closed at \d{4}-\d\d-\d\d \d\d:\d\d UTC: request R1: nobody answered by "
        r"\d{4}-\d\d-\d\d \d\d:\d\d UTC; the refund of USD 49.00 was not made",
        notice_of(late[1]),
    ), notice_of(late[1])
    assert "approval timed_out USD 49.00: request R1: nobody answered by " in printed
    assert "by None" not in printed


async def test_a_ticket_that_failed_at_once_says_on_its_page_why_naming_the_field(agent: Harness) -> None:
    """The ticket's page tells the same ending ``agent-worker show`` prints: the failure's type and message."""
    async with inbox_for(agent, TWO_PEOPLE) as inbox, person(inbox) as ann:
        workflow_id = await start_with_cli(agent, approval_limit_cents=999_999)
        with pytest.raises(WorkflowFailureError):
            await agent.client.get_workflow_handle(workflow_id).result()
        await ann.sign_in("ann")
        status, page = await ann.get(page_of(workflow_id))
    assert status == 200
    assert (
        "the run failed: InvalidTicketInput: Invalid ticket input: options.approval_limit_cents: 999,999 "
        "(9,999.99 in a two-decimal currency) is above the desk's approval limit of 2,000"
    ) in html.unescape(page)
