"""The approval inbox in a real browser, as a support lead uses it: headless Chromium against a dev server, a worker
and the inbox, tickets started with the ``temporal`` CLI. Sign in, watch the ticket arrive, open it, read it,
approve or decline, and see at once what came of it; and the same browser used against the person: an edited form,
a form without its token, a page on another origin. The pictures the docs show are ``scripts/screenshots.py``'s."""

from __future__ import annotations

import base64
import os
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from aiohttp import web
from playwright.async_api import Browser, BrowserContext, expect
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from activities.business import Business
from activities.business.database import Database
from activities.contracts.approvals import ApprovalDecision
from activities.contracts.fields import MAX_CENTS
from activities.contracts.ticket import Outcome, Status
from activities.contracts.world import Order
from agent_worker.cli.devserver import free_port
from agent_worker.codec import EncryptionCodec, with_codec
from agent_worker.codec_server.app import serve
from agent_worker.config import DATA_CONVERTER
from agent_worker.config.codec_settings import CodecSettings
from agent_worker.inbox.app import ticket_path
from tests.support.browser import BROWSER_WINDOW, LIVE, sign_in
from tests.support.harness import Harness
from tests.support.history import events
from tests.support.inbox import (
    CLEO,
    PASSWORDS,
    ROLES,
    TWO_PEOPLE,
    TWO_PEOPLE_WHY,
    Clock,
    inbox_alone,
    inbox_for,
    start_odd_tickets,
    start_with_cli,
    waiting_request,
)
from tests.support.processes import address

pytestmark = [pytest.mark.browser, pytest.mark.timeout(150)]


async def test_a_person_signs_in_sees_the_ticket_arrive_opens_it_and_approves_the_refund_once(
    agent: Harness, context: BrowserContext
) -> None:
    async with inbox_for(agent) as inbox:
        page = await context.new_page()
        await sign_in(page, inbox, "ann")
        await expect(page.get_by_text("no payout waits for a person")).to_be_visible()

        workflow_id = await start_with_cli(agent, reply_window_seconds=3600)  # open after it answers
        listed = page.locator(f"[data-workflow-id='{workflow_id}']")
        await expect(listed).to_be_visible(timeout=LIVE)  # no reload: the list refreshes itself
        for shown in ("49.00", "ann@example.com", "order A-1001", "request R1"):
            await expect(listed).to_contain_text(shown)
        later = await start_with_cli(
            agent, question="Order A-1003 never came", email="cleo@example.com", approval_timeout_seconds=3600
        )
        await expect(page.locator("[data-workflow-id]").first).to_have_attribute(  # the soonest deadline first
            "data-workflow-id", later, timeout=LIVE
        )

        # A second tab on the ticket whose live updates are cut (a laptop that slept): it keeps its buttons.
        stale = await context.new_page()
        await stale.route(lambda url: "partial=1" in url, lambda route: route.abort())
        await stale.goto(inbox.ticket_page(workflow_id))

        await listed.click()
        await expect(page.get_by_test_id("amount")).to_have_text("USD 49.00")
        transcript = page.get_by_test_id("transcript")
        await expect(transcript).to_contain_text("Customer (ann@example.com): My parcel for order A-1001 never arrived")
        await expect(transcript).to_contain_text("The agent asked for a refund of USD 49.00 on order A-1001")
        await expect(transcript).to_contain_text("Looked up order A-1001: charged USD 49.00, refunded before USD 0.00")
        raw = transcript.locator("details", has_text="the model asks for issue_refund").first
        await expect(raw.get_by_text("issue_refund(order_id='A-1001', amount_cents=4900)")).to_be_hidden()
        await raw.locator("summary").click()  # the raw call, one click away
        await expect(raw).to_contain_text("the model asks for issue_refund(order_id='A-1001', amount_cents=4900)")
        await expect(page.locator(".orders")).to_contain_text("A-1001")

        await page.get_by_role("button", name="Approve USD 49.00").click()
        await expect(page.get_by_test_id("notice")).to_have_text(
            "approved; Refunded USD 49.00 on order A-1001 (refund #1)."
        )
        await expect(transcript).to_contain_text(  # what the agent did next, shown live, without a reload
            "the model answers: I have emailed you about order A-1001", timeout=LIVE
        )

        await stale.get_by_role("button", name="Approve USD 49.00").click()
        await expect(stale.get_by_test_id("notice")).to_contain_text(
            "rejected: request R1 was already answered: approved by ann at "
        )
        handle = agent.client.get_workflow_handle(workflow_id, result_type=Outcome)
        await handle.cancel()  # the customer will not reply: close it
        outcome = await handle.result()
        other = agent.client.get_workflow_handle(later, result_type=Outcome)
        await other.cancel()
        await other.result()

    assert [(a.approver, a.decision, a.channel) for a in outcome.approvals] == [
        ("ann", ApprovalDecision.APPROVED, "web")
    ]
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]


async def test_a_decline_needs_a_reason_and_the_person_sees_it_quoted_and_nothing_paid(
    agent: Harness, context: BrowserContext
) -> None:
    """The browser will not send a decline without a reason; one sent anyway (``required`` taken out) is refused by
    the inbox; the reason given goes to the ticket, and the person reads what the model was told."""
    reason = "The carrier shows it delivered to your front desk on Monday."
    async with inbox_for(agent) as inbox:
        workflow_id = await start_with_cli(agent)
        await waiting_request(agent.client, workflow_id)
        page = await context.new_page()
        await sign_in(page, inbox, "ben")
        await page.goto(inbox.ticket_page(workflow_id))
        box = page.get_by_label("Why decline?")
        await page.get_by_role("button", name="Decline").click()
        assert await box.evaluate("box => box.validity.valueMissing")  # the browser kept the form
        await expect(page.get_by_test_id("notice")).to_have_count(0)

        await box.evaluate("box => box.removeAttribute('required')")
        await page.get_by_role("button", name="Decline").click()
        await expect(page.get_by_test_id("notice")).to_have_text(
            "not sent: a decline needs a reason; it goes to the audit trail and to the model, so the customer is "
            "told why"
        )
        assert (await waiting_request(agent.client, workflow_id)).request_id == "R1"

        await page.get_by_label("Why decline?").fill(reason)
        await page.get_by_role("button", name="Decline").click()
        await expect(page.get_by_test_id("notice")).to_have_text(
            f"declined; A person (ben) declined this refund, so it was not made. Their reason: {reason}"
        )
        await expect(page.get_by_test_id("status")).to_have_text("completed", timeout=LIVE)  # live, no reload
        await expect(page.get_by_test_id("outcome")).to_contain_text("Outcome: declined")
        await expect(page.get_by_test_id("outcome")).to_contain_text(
            f"declined by ben (signed in, approval inbox): {reason}"
        )
        outcome = await agent.client.get_workflow_handle(workflow_id, result_type=Outcome).result()

    assert outcome.status is Status.DECLINED
    assert [(a.approver, a.decision, a.reason) for a in outcome.approvals] == [
        ("ben", ApprovalDecision.DECLINED, reason)
    ]
    assert f"request R1: refund of USD 49.00 declined by ben (signed in, approval inbox): {reason}" in (
        agent.store.audit.entries(outcome.ticket_id)
    )
    assert agent.store.payments.refunds() == []


async def test_two_people_approve_in_turn_the_first_sees_1_of_2_and_nothing_paid_and_the_second_pays(
    agent: Harness, browser: Browser, context: BrowserContext
) -> None:
    """ben has the page open while ann approves: it shows her approval live, keeping what he had typed, and his
    approval is the one that pays."""
    async with inbox_for(agent, TWO_PEOPLE) as inbox:
        workflow_id = await start_with_cli(agent, **CLEO)
        await waiting_request(agent.client, workflow_id)
        bens_browser = await browser.new_context(viewport=BROWSER_WINDOW)
        ben = await bens_browser.new_page()
        await sign_in(ben, inbox, "ben")
        await ben.goto(inbox.ticket_page(workflow_id))
        await expect(ben.get_by_test_id("progress")).to_have_text(
            "needs 2 approvals; only approvals signed in here count"
        )
        await ben.get_by_label("Why decline?").fill("Half a thought")  # he starts a reason, then thinks better

        ann = await context.new_page()
        await sign_in(ann, inbox, "ann")
        listed = ann.locator(f"[data-workflow-id='{workflow_id}']")
        await expect(listed).to_contain_text(TWO_PEOPLE_WHY, timeout=LIVE)
        await expect(listed).to_contain_text("needs 2 approvals")
        await listed.click()
        await expect(ann.get_by_test_id("why")).to_have_text(TWO_PEOPLE_WHY)
        await expect(ann.locator("form.approve")).to_contain_text("yours would be 1 of 2")
        await ann.get_by_role("button", name="Approve USD 120.00").click()
        await expect(ann.get_by_test_id("notice")).to_have_text(
            "partly_approved; Approval 1 of 2 recorded; nothing is paid until another person approves."
        )
        await expect(ann.get_by_test_id("progress")).to_have_text(
            "1 of 2 approvals, by ann; only approvals signed in here count"
        )
        paid_after_one = agent.store.payments.refunds()

        await expect(ben.get_by_test_id("progress")).to_have_text(  # live, no reload
            "1 of 2 approvals, by ann; only approvals signed in here count", timeout=LIVE
        )
        await expect(ben.locator("form.approve")).to_contain_text("yours would be 2 of 2: it pays the refund")
        await expect(ben.get_by_label("Why decline?")).to_have_value("Half a thought")  # the redraw kept it
        await ben.get_by_role("button", name="Approve USD 120.00").click()
        await expect(ben.get_by_test_id("notice")).to_have_text(
            "approved; Refunded USD 120.00 on order A-1003 (refund #1)."
        )
        outcome = await agent.client.get_workflow_handle(workflow_id, result_type=Outcome).result()
        await bens_browser.close()

    assert paid_after_one == []
    assert [(a.approver, a.decision, a.channel) for a in outcome.approvals] == [
        ("ann", ApprovalDecision.PARTLY_APPROVED, "web"),
        ("ben", ApprovalDecision.APPROVED, "web"),
    ]
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [12_000]


async def test_after_approving_the_same_persons_button_is_disabled_with_why_and_a_forced_click_is_refused(
    agent: Harness, context: BrowserContext
) -> None:
    async with inbox_for(agent, TWO_PEOPLE) as inbox:
        workflow_id = await start_with_cli(agent, **CLEO)
        await waiting_request(agent.client, workflow_id)
        page = await context.new_page()
        await sign_in(page, inbox, "ann")
        await page.goto(inbox.ticket_page(workflow_id))
        approve = page.get_by_role("button", name="Approve USD 120.00")
        await approve.click()
        await expect(page.get_by_test_id("notice")).to_contain_text("partly_approved; Approval 1 of 2 recorded")
        await expect(approve).to_be_disabled()
        await expect(page.get_by_test_id("may-not-approve")).to_have_text(
            "You (ann) approved this request already (1 of 2): the next approval must be another person's. "
            "You may still decline it."
        )
        await expect(page.get_by_role("button", name="Decline")).to_be_enabled()

        await approve.evaluate("button => button.removeAttribute('disabled')")
        await approve.click()
        await expect(page.get_by_test_id("notice")).to_have_text(
            "rejected: ann already approved request R1 (1 of 2): the next must be another person's"
        )
        still = await waiting_request(agent.client, workflow_id)
        handle = agent.client.get_workflow_handle(workflow_id, result_type=Outcome)
        await handle.cancel()
        outcome = await handle.result()

    assert still.request_id == "R1"
    assert [(a.approver, a.decision) for a in outcome.approvals if a.approver] == [
        ("ann", ApprovalDecision.PARTLY_APPROVED)
    ]
    assert agent.store.payments.refunds() == []


async def test_an_agent_whose_role_does_not_reach_the_amount_sees_no_approve_button_and_a_leads_approval_pays(
    agent: Harness, browser: Browser, context: BrowserContext
) -> None:
    async with inbox_for(agent, ROLES) as inbox:
        workflow_id = await start_with_cli(agent, **CLEO)
        await waiting_request(agent.client, workflow_id)
        ann = await context.new_page()
        await sign_in(ann, inbox, "ann")
        await ann.goto(inbox.ticket_page(workflow_id))
        await expect(ann.get_by_test_id("may-not-answer")).to_have_text(
            "You (ann) are not among this ticket's approvers for a refund of USD 120.00 (ben), so it would not "
            "take your answer."
        )
        await expect(ann.get_by_role("button", name="Approve USD 120.00")).to_have_count(0)
        await expect(ann.get_by_role("button", name="Decline")).to_have_count(0)

        leads_browser = await browser.new_context()
        ben = await leads_browser.new_page()
        await sign_in(ben, inbox, "ben")
        await ben.goto(inbox.ticket_page(workflow_id))
        await ben.get_by_role("button", name="Approve USD 120.00").click()
        await expect(ben.get_by_test_id("notice")).to_have_text(
            "approved; Refunded USD 120.00 on order A-1003 (refund #1)."
        )
        outcome = await agent.client.get_workflow_handle(workflow_id, result_type=Outcome).result()
        await leads_browser.close()

    assert [(a.approver, a.decision) for a in outcome.approvals] == [("ben", ApprovalDecision.APPROVED)]
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [12_000]


async def test_an_edited_form_and_a_page_on_another_origin_answer_nothing_in_anyones_name(
    agent: Harness, context: BrowserContext
) -> None:
    async with inbox_for(agent) as inbox:
        workflow_id = await start_with_cli(agent)
        await waiting_request(agent.client, workflow_id)
        page = await context.new_page()
        await sign_in(page, inbox, "ann")
        ticket_page = inbox.ticket_page(workflow_id)

        # The form with its CSRF token taken out.
        await page.goto(ticket_page)
        await page.evaluate("document.querySelector('form.approve input[name=csrf]').remove()")
        await page.get_by_role("button", name="Approve USD 49.00").click()
        await expect(page.locator("body")).to_contain_text("security token is missing or not yours")

        # A page on another origin of the same machine (so the browser sends ann's cookie), holding ann's token as
        # if it had leaked, submits the form by itself.
        await page.goto(ticket_page)
        token = await page.locator("form.approve input[name=csrf]").get_attribute("value")
        assert token
        attacker = await serve_page(attack(inbox.url + ticket_path(workflow_id, "answer"), token))
        try:
            await page.goto(attacker.url)
            await expect(page.locator("body")).to_contain_text("sent from another site")
        finally:
            await attacker.runner.cleanup()
        assert (await waiting_request(agent.client, workflow_id)).request_id == "R1"

        # The form with an approver field added: it is ann who answers, whatever the form says.
        await page.goto(ticket_page)
        await page.evaluate(
            "document.querySelector('form.approve').insertAdjacentHTML("
            "'beforeend', '<input type=hidden name=approver value=mallory>')"
        )
        await page.get_by_role("button", name="Approve USD 49.00").click()
        await expect(page.get_by_test_id("notice")).to_have_text(
            "approved; Refunded USD 49.00 on order A-1001 (refund #1)."
        )
        outcome = await agent.client.get_workflow_handle(workflow_id, result_type=Outcome).result()

    assert [(a.approver, a.decision, a.channel) for a in outcome.approvals] == [
        ("ann", ApprovalDecision.APPROVED, "web")
    ]
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]


async def test_with_encryption_on_the_inbox_shows_the_ticket_decrypted_and_the_answer_goes_through(
    client: Client, store: Business, context: BrowserContext
) -> None:
    keys = {"2026-11": os.urandom(32)}
    codec = EncryptionCodec(keys, "2026-11", require_encrypted=True)
    encrypted = await Client.connect(address(client), data_converter=with_codec(DATA_CONVERTER, codec))
    agent = Harness(encrypted, store, task_queue=f"support-agent-{uuid.uuid4()}")
    codec_keys = {key_id: base64.b64encode(key).decode() for key_id, key in keys.items()}
    codec_port = free_port()
    codec_server = await serve(codec, None, "http://127.0.0.1:1", "127.0.0.1", codec_port)
    question = "My parcel for order A-1001 never arrived, my name is Ann Lovelace"
    try:
        async with inbox_for(agent, codec=CodecSettings(keys=codec_keys, require_encrypted_input=True)) as inbox:
            workflow_id = await start_with_cli(
                agent, "--codec-endpoint", f"http://127.0.0.1:{codec_port}", question=question
            )
            await waiting_request(agent.client, workflow_id)
            page = await context.new_page()
            await sign_in(page, inbox, "ann")
            await page.goto(inbox.ticket_page(workflow_id))
            await expect(page.get_by_test_id("transcript")).to_contain_text(f"Customer (ann@example.com): {question}")
            await page.get_by_role("button", name="Approve USD 49.00").click()
            await expect(page.get_by_test_id("notice")).to_have_text(
                "approved; Refunded USD 49.00 on order A-1001 (refund #1)."
            )
            outcome = await agent.client.get_workflow_handle(workflow_id, result_type=Outcome).result()
    finally:
        await codec_server.cleanup()

    stored = (await client.get_workflow_handle(workflow_id).fetch_history()).to_json()
    assert "Lovelace" not in stored
    assert "ann@example.com" not in stored
    assert outcome.approvals[0].channel == "web"
    assert [r.amount_cents for r in store.payments.refunds()] == [4900]


async def test_reloading_after_an_answer_shows_its_result_again_and_sends_nothing(
    agent: Harness, context: BrowserContext
) -> None:
    """After Approve the browser is on the ticket's own address: a reload shows what came of the answer, with no
    red error and no second answer, and the address opens the ticket when shared."""
    async with inbox_for(agent) as inbox:
        workflow_id = await start_with_cli(agent)
        await waiting_request(agent.client, workflow_id)
        page = await context.new_page()
        await sign_in(page, inbox, "ann")
        await page.goto(inbox.ticket_page(workflow_id))
        await page.get_by_role("button", name="Approve USD 49.00").click()
        taken = "approved; Refunded USD 49.00 on order A-1001 (refund #1)."
        await expect(page.get_by_test_id("notice")).to_have_text(taken)
        landed = page.url
        for _ in range(2):
            await page.reload()
            await expect(page.get_by_test_id("notice")).to_have_text(taken)
            await expect(page.locator(".notice.error, .notice.rejected")).to_have_count(0)
        await expect(page.get_by_test_id("outcome")).to_contain_text(
            "49.00 approved by ann (signed in, approval inbox)", timeout=LIVE
        )
        handle = agent.client.get_workflow_handle(workflow_id, result_type=Outcome)
        outcome = await handle.result()
        accepted = await events(handle, EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)

    assert landed.startswith(inbox.ticket_page(workflow_id) + "&notice=")
    assert len(accepted) == 1
    assert [(a.approver, a.decision) for a in outcome.approvals] == [("ann", ApprovalDecision.APPROVED)]
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]


@pytest.mark.parametrize("script", [True, False], ids=["with JavaScript", "without JavaScript"])
async def test_a_large_approval_asks_once_more_stating_amount_order_and_customer(
    agent: Harness,
    browser: Browser,
    script: bool,  # noqa: FBT001 - a parameter of the test, not a flag
) -> None:
    async with inbox_for(agent, web={"confirm_above_cents": 10_000}) as inbox:
        workflow_id = await start_with_cli(agent, **CLEO)  # 120.00
        await waiting_request(agent.client, workflow_id)
        context = await browser.new_context(java_script_enabled=script)
        page = await context.new_page()
        await sign_in(page, inbox, "ann")
        await page.goto(inbox.ticket_page(workflow_id))
        await page.get_by_role("button", name="Approve USD 120.00").click()
        await expect(page.get_by_test_id("confirm-amount")).to_have_text("USD 120.00")
        await expect(page.get_by_test_id("confirm-order")).to_have_text("A-1003")
        await expect(page.get_by_test_id("confirm-customer")).to_have_text("cleo@example.com")
        paid_before = agent.store.payments.refunds()
        still = await waiting_request(agent.client, workflow_id)
        await page.get_by_role("button", name="Yes, approve USD 120.00 on order A-1003").click()
        await expect(page.get_by_test_id("notice")).to_have_text(
            "approved; Refunded USD 120.00 on order A-1003 (refund #1)."
        )
        outcome = await agent.client.get_workflow_handle(workflow_id, result_type=Outcome).result()
        await context.close()

    assert paid_before == []
    assert still.request_id == "R1"
    assert [(a.approver, a.decision) for a in outcome.approvals] == [("ann", ApprovalDecision.APPROVED)]
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [12_000]


async def test_tickets_with_odd_ids_are_each_opened_from_the_list_and_approved(
    agent: Harness, context: BrowserContext
) -> None:
    """A path's suffix (``x/events``, ``…/answer``), an escape, a query, a fragment, ``..`` (which a browser
    would normalise in a path), a space, letters outside ASCII: each opens its own ticket from the list, and
    its Approve pays its own order."""
    async with inbox_for(agent) as inbox:
        orders = await start_odd_tickets(agent)
        page = await context.new_page()
        await sign_in(page, inbox, "ann")
        for workflow_id, order_id in orders.items():
            await page.goto(inbox.url)
            listed = page.locator(f'li[data-workflow-id="{workflow_id}"] a')
            await expect(listed).to_contain_text(f"order {order_id}", timeout=LIVE)
            await listed.click()
            await expect(page.locator("p.meta")).to_contain_text(workflow_id)
            await expect(page.get_by_test_id("asked")).to_contain_text(f"a refund of USD 49.00 on order {order_id}")
            await page.get_by_role("button", name="Approve USD 49.00").click()
            await expect(page.get_by_test_id("notice")).to_contain_text(
                f"approved; Refunded USD 49.00 on order {order_id} (refund #"
            )
            await expect(page.locator("p.meta")).to_contain_text(workflow_id)
        outcomes = {
            workflow_id: await agent.client.get_workflow_handle(workflow_id, result_type=Outcome).result()
            for workflow_id in orders
        }

    for workflow_id, order_id in orders.items():
        assert [(a.approver, a.decision) for a in outcomes[workflow_id].approvals] == [
            ("ann", ApprovalDecision.APPROVED)
        ], workflow_id
        assert [r.amount_cents for r in agent.store.payments.refunds(order_id)] == [4900], workflow_id


class ServedPage:
    def __init__(self, runner: web.AppRunner, url: str) -> None:
        self.runner, self.url = runner, url


async def serve_page(html: str) -> ServedPage:
    """A page on another port of 127.0.0.1: another origin, the same site as the inbox."""

    async def page(_request: web.Request) -> web.Response:
        return web.Response(text=html, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return ServedPage(runner, f"http://127.0.0.1:{port}/")


def attack(action: str, token: str) -> str:
    return (
        f'<form method="post" action="{action}">'
        f'<input name="csrf" value="{token}"><input name="request_id" value="R1">'
        '<input name="amount_cents" value="4900"><input name="decision" value="approve"></form>'
        "<script>document.forms[0].submit()</script>"
    )


async def test_after_signing_out_a_copy_of_the_cookie_taken_before_lands_on_the_sign_in_page(
    agent: Harness, browser: Browser, context: BrowserContext
) -> None:
    """Someone copied ann's cookie while she was signed in (a shared computer, a stolen file). She signs out; the
    copy, set in another browser, opens the sign-in page, not her inbox."""
    async with inbox_alone(agent) as inbox:
        page = await context.new_page()
        await sign_in(page, inbox, "ann")
        (copied,) = [cookie["value"] for cookie in await context.cookies() if cookie.get("name") == "inbox_session"]
        await page.get_by_role("button", name="Sign out").click()
        await expect(page.get_by_role("button", name="Sign in")).to_be_visible()

        elsewhere = await browser.new_context()
        try:
            await elsewhere.add_cookies([{"name": "inbox_session", "value": copied, "url": inbox.url}])
            stolen = await elsewhere.new_page()
            await stolen.goto(inbox.url)
            await expect(stolen.get_by_test_id("login-error")).to_have_text(
                "Your session has ended (signed out, idle too long, or too old): sign in again."
            )
            await expect(stolen.get_by_test_id("person")).to_have_count(0)
            assert "/login" in stolen.url
        finally:
            await elsewhere.close()


async def test_an_inbox_left_open_idles_out_and_shows_the_sign_in_page_by_itself(
    agent: Harness, context: BrowserContext
) -> None:
    """The database's clock is turned past the idle time: the list, refreshing itself, is refused and reloads onto
    the sign-in page. Its refreshes kept nobody signed in; a click by the person, before, did."""
    clock = Clock(datetime.now(UTC))
    database = Database(agent.store.database.url, clock=clock)
    try:
        async with inbox_alone(agent, database, web={"session_idle_minutes": 30}) as inbox:
            page = await context.new_page()
            await sign_in(page, inbox, "ann")
            clock.turn(timedelta(minutes=29))
            await page.reload()  # ann's own request: she is not idle, and the idle time starts again
            await expect(page.get_by_test_id("person")).to_have_text("ann")
            clock.turn(timedelta(minutes=29))  # 58 minutes after signing in, 29 after her last request
            await page.reload()
            await expect(page.get_by_test_id("person")).to_have_text("ann")
            clock.turn(timedelta(minutes=31))  # left open: only the list refreshing itself
            await expect(page.get_by_test_id("login-error")).to_have_text(
                "Your session has ended (signed out, idle too long, or too old): sign in again.", timeout=LIVE
            )
            assert "/login" in page.url
            await page.goto(inbox.url)
            await expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    finally:
        database.close()


async def test_wrong_passwords_are_throttled_and_the_page_says_for_how_long(
    agent: Harness, context: BrowserContext
) -> None:
    """Five wrong passwords for ann: the sixth attempt, with her right password, is refused unchecked, with 429 and
    Retry-After, and the page says why and for how long."""
    async with inbox_alone(agent) as inbox:
        page = await context.new_page()
        await page.goto(inbox.url)
        for n in range(5):
            await page.get_by_label("Name").fill("ann")
            await page.get_by_label("Password").fill(f"guess number {n}")
            await page.get_by_role("button", name="Sign in").click()
            await expect(page.get_by_test_id("login-error")).to_have_text("Wrong name or password.")
        await page.get_by_label("Name").fill("ann")
        await page.get_by_label("Password").fill(PASSWORDS["ann"])
        async with page.expect_response(lambda r: r.request.method == "POST" and "/login" in r.url) as answered:
            await page.get_by_role("button", name="Sign in").click()
        response = await answered.value
        await expect(page.get_by_test_id("login-error")).to_have_text(
            "Too many wrong passwords for ann; try again in 15 min."
        )
        await expect(page.get_by_test_id("person")).to_have_count(0)

    assert response.status == 429
    retry_after = await response.header_value("retry-after")
    assert retry_after is not None
    assert 0 < int(retry_after) <= 15 * 60


async def test_every_amount_reads_in_its_orders_currency_with_its_thousands_separated(
    agent: Harness, browser: Browser
) -> None:
    """An order of EUR 2,147,483.64, the most an order may be charged: the list, the page, its buttons, the order
    as looked up, the transcript, the confirmation, the result and the customer's email all say so, and no page
    shows the bare number."""
    agent.store.orders.add(
        Order(order_id="A-8001", amount_cents=MAX_CENTS // 10, customer_email="dora@example.com", currency="eur")
    )
    shown, bare = "EUR 2,147,483.64", "2147483.64"
    async with inbox_for(agent) as inbox:
        workflow_id = await start_with_cli(
            agent, question="My parcel for order A-8001 never arrived.", email="dora@example.com"
        )
        await waiting_request(agent.client, workflow_id)
        context = await browser.new_context()
        page = await context.new_page()
        await sign_in(page, inbox, "ann")
        listed = page.locator(f'li[data-workflow-id="{workflow_id}"]')
        await expect(listed.locator(".amount")).to_have_text(shown, timeout=LIVE)
        pages = [await page.content()]
        await listed.get_by_role("link").click()
        await expect(page.get_by_test_id("amount")).to_have_text(shown)
        await expect(page.get_by_test_id("why")).to_have_text(f"{shown} is above the approval limit of EUR 20.00")
        await expect(page.get_by_test_id("asked")).to_contain_text(
            f"The agent asked for a refund of {shown} on order A-8001"
        )
        await expect(page.locator("section.orders")).to_contain_text(shown)
        await expect(page.get_by_test_id("transcript")).to_contain_text(f"charged {shown}, refunded before EUR 0.00")
        pages.append(await page.content())
        await page.get_by_role("button", name=f"Approve {shown}").click()
        await expect(page.get_by_test_id("confirm-amount")).to_have_text(shown)
        pages.append(await page.content())
        await page.get_by_role("button", name=f"Yes, approve {shown} on order A-8001").click()
        await expect(page.get_by_test_id("notice")).to_have_text(
            f"approved; Refunded {shown} on order A-8001 (refund #1)."
        )
        await agent.client.get_workflow_handle(workflow_id, result_type=Outcome).result()
        await page.reload()
        await expect(page.get_by_test_id("outcome")).to_contain_text(f"refund #1: {shown} on A-8001")
        pages.append(await page.content())
        await context.close()

    leaks = [html[html.find(bare) - 200 : html.find(bare) + 50] for html in pages if bare in html]
    assert leaks == []
    (email,) = agent.store.mail.sent()
    assert email.body == f"We have refunded {shown} for order A-8001 (refund #1)."
