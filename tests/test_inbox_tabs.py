"""The inbox as an approver works through a queue: many ticket tabs open at once in one browser, over HTTP/1.1 as
``agent-worker dev`` and a plain reverse proxy serve it. Every tab loads and keeps current; a poll of a ticket that
did not change is an empty ``304``."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.async_api import BrowserContext, Page, Request, expect

from activities.contracts.ticket import Outcome
from activities.contracts.world import Order
from tests.support.browser import LIVE, send_sign_in
from tests.support.harness import Harness
from tests.support.inbox import inbox_for, page_of, person, start_with_cli, waiting_request

pytestmark = pytest.mark.timeout(180)

TABS = 12
"""More than the six connections a browser opens to one host over HTTP/1.1."""


@pytest.mark.browser
async def test_twelve_ticket_tabs_in_one_browser_all_load_and_each_shows_an_answer_given_elsewhere(
    agent: Harness, context: BrowserContext
) -> None:
    """A live-update stream per tab held the browser's six connections, and the seventh tab never loaded."""
    orders = [f"A-{3001 + n}" for n in range(TABS)]
    for order_id in orders:
        agent.store.orders.add(Order(order_id=order_id, amount_cents=4900, customer_email="ann@example.com"))
    async with inbox_for(agent) as inbox, person(inbox) as ben:
        tickets = [
            await start_with_cli(agent, question=f"My parcel for order {order_id} never arrived") for order_id in orders
        ]
        requests = [await waiting_request(agent.client, workflow_id) for workflow_id in tickets]

        first = await context.new_page()
        await send_sign_in(first, inbox, "ann")
        tabs: list[Page] = []
        for workflow_id in tickets:  # each tab opened while the ones before stay open, as a person opens them
            tab = await context.new_page()
            await tab.goto(inbox.ticket_page(workflow_id), timeout=15_000)
            await expect(tab.get_by_test_id("amount")).to_have_text("USD 49.00")
            tabs.append(tab)

        await ben.sign_in("ben")
        for workflow_id, request in zip(tickets, requests, strict=True):  # answered in another browser
            answered = await ben.answer(workflow_id, request)
            assert answered[0] == 303
        for tab in tabs:
            await expect(tab.get_by_test_id("status")).to_have_text("completed", timeout=LIVE)  # no reload
            await expect(tab.get_by_test_id("outcome")).to_contain_text("approved by ben")
        outcomes = [await agent.client.get_workflow_handle(w, result_type=Outcome).result() for w in tickets]

    assert [[(a.approver, a.channel) for a in outcome.approvals] for outcome in outcomes] == [[("ben", "web")]] * TABS
    assert sorted(r.order_id for r in agent.store.payments.refunds()) == orders


async def test_a_poll_of_an_unchanged_ticket_is_an_empty_304_and_a_change_or_another_person_gets_the_page(
    agent: Harness,
) -> None:
    """What the script relies on: the version the page was drawn at answers 304 until the ticket changes; a proxy's
    weakened tag still matches; one person's version is not another's; the page itself is never stored."""
    async with inbox_for(agent) as inbox, person(inbox) as ann, person(inbox) as ben:
        workflow_id = await start_with_cli(agent, reply_window_seconds=3600)
        request = await waiting_request(agent.client, workflow_id)
        await ann.sign_in("ann")
        await ben.sign_in("ben")
        live = page_of(workflow_id, partial=1)
        async with ann.http.get(ann.origin + live) as drawn:
            version, cache = drawn.headers["ETag"], drawn.headers["Cache-Control"]
            assert drawn.status == 200
        async with ann.http.get(ann.origin + live, headers={"If-None-Match": version}) as unchanged:
            unchanged_status, unchanged_body = unchanged.status, await unchanged.read()
        async with ann.http.get(ann.origin + live, headers={"If-None-Match": f"W/{version}"}) as weakened:
            weakened_status = weakened.status
        async with ben.http.get(ben.origin + live, headers={"If-None-Match": version}) as bens:
            bens_status, bens_version = bens.status, bens.headers["ETag"]
        _, full_page = await ann.get(page_of(workflow_id))

        await ben.answer(workflow_id, request, decision="decline", reason="The carrier shows it delivered.")
        async with ann.http.get(ann.origin + live, headers={"If-None-Match": version}) as changed:
            changed_status, changed_version = changed.status, changed.headers["ETag"]
            changed_page = await changed.text()
        handle = agent.client.get_workflow_handle(workflow_id, result_type=Outcome)
        await handle.cancel()
        await handle.result()

    assert cache == "no-store"  # the browser keeps no copy of a ticket: the script keeps the version
    assert (unchanged_status, unchanged_body) == (304, b"")
    assert weakened_status == 304
    assert version.strip('"') in full_page  # the page says the version it was drawn at
    assert (bens_status, bens_version != version) == (200, True)
    assert changed_status == 200
    assert changed_version != version
    assert "declined by ben" in changed_page


HIDDEN = """
window.__hidden = true;
Object.defineProperty(document, "hidden", { get: () => window.__hidden });
Object.defineProperty(document, "visibilityState", { get: () => (window.__hidden ? "hidden" : "visible") });
"""
"""A tab behind others, as the Page Visibility API tells it: headless Chromium shows every page."""
SHOW = "() => { window.__hidden = false; document.dispatchEvent(new Event('visibilitychange')); }"
"""The person brings the tab to the front."""


@pytest.mark.browser
async def test_a_hidden_tab_asks_nothing_while_a_shown_one_polls_and_catches_up_the_moment_it_is_shown(
    agent: Harness, context: BrowserContext
) -> None:
    """Twelve tabs polling every two seconds are twelve requests a person does not look at; a hidden one waits."""
    async with inbox_for(agent) as inbox, person(inbox) as ben:
        workflow_id = await start_with_cli(agent)
        request = await waiting_request(agent.client, workflow_id)
        shown = await context.new_page()
        await send_sign_in(shown, inbox, "ann")
        hidden = await context.new_page()
        await hidden.add_init_script(HIDDEN)
        polls: dict[Page, int] = {shown: 0, hidden: 0}

        def counted(tab: Page) -> Callable[[Request], None]:
            def count(sent: Request) -> None:
                polls[tab] += "partial=1" in sent.url

            return count

        for tab in (shown, hidden):
            tab.on("request", counted(tab))
        await hidden.goto(inbox.ticket_page(workflow_id))
        await shown.goto(inbox.ticket_page(workflow_id))
        await expect(hidden.get_by_test_id("amount")).to_have_text("USD 49.00")

        await ben.sign_in("ben")
        await ben.answer(workflow_id, request, decision="decline", reason="The carrier shows it delivered.")
        await expect(shown.get_by_test_id("outcome")).to_contain_text("declined by ben", timeout=LIVE)
        for _ in range(3):  # three more polls of the shown tab: the hidden one, opened first, would have made as many
            async with shown.expect_request(lambda sent: "partial=1" in sent.url, timeout=LIVE):
                pass
        polled_while_hidden = polls[hidden]
        await expect(hidden.get_by_test_id("outcome")).to_have_count(0)  # still as it was drawn
        await hidden.evaluate(SHOW)
        await expect(hidden.get_by_test_id("outcome")).to_contain_text("declined by ben", timeout=LIVE)
        outcome = await agent.client.get_workflow_handle(workflow_id, result_type=Outcome).result()

    assert [(a.approver, a.channel) for a in outcome.approvals] == [("ben", "web")]
    assert polls[shown] >= 1
    assert polled_while_hidden == 0
    assert polls[hidden] >= 1
