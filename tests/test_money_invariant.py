"""Where two money rules meet, no money moves without the people the strictest of them asks for: real tickets,
started with the ``temporal`` CLI, Claude reached through the ``anthropic`` client at a local Messages API, a real
worker under the policy, and the people answering by signal and in the approval inbox over HTTP.

The decision itself (``workflows.approval_rules.decide``) is tried over every policy and history in
``tests/test_payout_decision.py``; these show the worker acts on it."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import pytest

from activities.contracts.approvals import ApprovalDecision
from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.policy import ApprovalPolicy, Limits, MoneyPolicy
from activities.contracts.ticket import Outcome
from agent_worker.cli.devserver import binary
from agent_worker.config.model_settings import ClaudeSettings
from tests.support.desk import LOOSE
from tests.support.fake_messages_api import FakeMessagesAPI, message, text, tool_use
from tests.support.harness import Harness
from tests.support.inbox import (
    CLEO,
    TWO_PEOPLE,
    Person,
    answer_of,
    inbox_for,
    notice_kind,
    notice_of,
    page_of,
    person,
    start_with_cli,
    waiting_request,
)
from tests.support.processes import address, run

PUBLIC = "http://inbox.example"
SSO: dict[str, Any] = {
    "proxy_header": "X-Forwarded-Email",
    "public_url": PUBLIC,
    "users": {},
    "trusted_proxies": ["127.0.0.1"],
}
"""The approval inbox behind single sign-on: the proxy on 127.0.0.1 names the person in ``X-Forwarded-Email``."""


def refund_of_cleos_order(api: FakeMessagesAPI, amount_cents: int = 12_000) -> None:
    """Claude looks A-1003 (120.00, cleo's) up, asks for a refund of ``amount_cents``, then answers."""
    api.script(
        message(tool_use("lookup_order", order_id="A-1003"), stop_reason="tool_use"),
        message(tool_use("issue_refund", order_id="A-1003", amount_cents=amount_cents), stop_reason="tool_use"),
        message(text("I have told you what came of your refund.")),
    )


def policy(limit: int, two_above: int, customer_day: int) -> MoneyPolicy:
    return LOOSE.model_copy(
        update={
            "approval": ApprovalPolicy(limit_cents=limit, two_people_above_cents=two_above),
            "limits": Limits(
                customer_cents_per_day=customer_day, customer_refunds_per_day=None, desk_cents_per_day=None
            ),
        }
    )


@pytest.mark.parametrize(("limit", "two_above", "customer_day"), list(itertools.permutations((6000, 15_000, 20_000))))
async def test_a_refund_meets_as_many_people_as_the_strictest_threshold_asks_whatever_their_order(
    agent: Harness, fake_api: FakeMessagesAPI, limit: int, two_above: int, customer_day: int
) -> None:
    """120.00 is above one of the three thresholds (approval limit, two people, a customer's day without a person),
    whichever it is: above the two-people one, two people are asked even where the approval limit is higher, and
    nothing is paid until they answer; above either other, one person."""
    refund_of_cleos_order(fake_api)
    async with agent.worker(policy=policy(limit, two_above, customer_day), claude=ClaudeSettings(backend="auto")):
        workflow_id = await start_with_cli(agent, approval_limit_cents=limit, **CLEO)
        request = await waiting_request(agent.client, workflow_id)
        paid_while_waiting = agent.store.payments.refunds()
        declined = {"amount_cents": 12_000, "approved": False, "approver": "ben", "request_id": request.request_id}
        await run(
            binary("temporal"),
            "--address",
            address(agent.client),
            "workflow",
            "signal",
            "--workflow-id",
            workflow_id,
            "--name",
            APPROVE_SIGNAL,
            "--input",
            json.dumps(declined),
        )
        outcome = await agent.client.get_workflow_handle(workflow_id, result_type=Outcome).result()

    assert paid_while_waiting == []
    assert (request.approvals_needed, request.signed_in_only) == ((2, True) if two_above == 6000 else (1, False))
    assert [a.decision for a in outcome.approvals] == [ApprovalDecision.DECLINED]
    assert agent.store.payments.refunds() == []


async def test_a_person_is_never_asked_for_more_than_is_left_of_the_charge(
    agent: Harness, fake_api: FakeMessagesAPI
) -> None:
    """Claude asks for 1,200.00 back on a 120.00 order: refused at once, with nobody asked and nothing paid."""
    refund_of_cleos_order(fake_api, amount_cents=120_000)
    async with agent.worker(policy=TWO_PEOPLE, claude=ClaudeSettings(backend="auto")):
        workflow_id = await start_with_cli(agent, **CLEO)
        outcome = await agent.client.get_workflow_handle(workflow_id, result_type=Outcome).result()

    assert outcome.approvals == []
    assert agent.store.payments.refunds() == []
    told = (
        "This refund of USD 1,200.00 was not made, and no person was asked: USD 1,200.00 is more than is left of "
        "order A-1003's charge: USD 0.00 of USD 120.00 was paid back already."
    )
    assert told in [c.result for c in outcome.tool_calls]
    assert told in json.dumps(fake_api.requests[-1].body["messages"][-1])


async def approve_as(someone: Person, mailbox: str, workflow_id: str) -> tuple[int, str]:
    """Approve the ticket's request R1 in the inbox, signed in by the proxy as ``mailbox``: the page, then its form."""
    as_them = {"Host": "inbox.example", "X-Forwarded-Email": mailbox}
    _, page = await someone.get(page_of(workflow_id), headers=as_them)
    token = re.search(r'name="csrf" value="([^"]+)"', page)
    assert token, page
    form = {"csrf": token.group(1), "request_id": "R1", "amount_cents": "12000", "decision": "approve"}
    return await someone.send(answer_of(workflow_id), form, headers={**as_them, "Origin": PUBLIC})


async def test_two_spellings_of_one_mailbox_behind_single_sign_on_are_one_person_of_the_two_needed(
    agent: Harness,
) -> None:
    """The proxy names ann@example.com, then Ann@Example.COM: one person, so her second approval is refused and
    nothing is paid until ben@example.com approves; then the refund is paid once."""
    async with (
        inbox_for(agent, TWO_PEOPLE, web=SSO) as inbox,
        person(inbox) as ann,
        person(inbox) as ann_again,
        person(inbox) as ben,
    ):
        workflow_id = await start_with_cli(agent, **CLEO)
        await waiting_request(agent.client, workflow_id)
        first = await approve_as(ann, "ann@example.com", workflow_id)
        second = await approve_as(ann_again, "Ann@Example.COM", workflow_id)
        paid_after_one_person = agent.store.payments.refunds()
        third = await approve_as(ben, "ben@example.com", workflow_id)
        outcome = await agent.client.get_workflow_handle(workflow_id, result_type=Outcome).result()

    assert notice_of(first[1]) == (
        "partly_approved; Approval 1 of 2 recorded; nothing is paid until another person approves."
    )
    assert (second[0], notice_kind(second[1])) == (303, "rejected")
    assert notice_of(second[1]) == (
        "rejected: Ann@Example.COM already approved request R1 (1 of 2): the next must be another person's"
    )
    assert paid_after_one_person == []
    assert notice_of(third[1]) == "approved; Refunded USD 120.00 on order A-1003 (refund #1)."
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [12_000]
    assert [(a.approver, a.decision) for a in outcome.approvals] == [
        ("ann@example.com", ApprovalDecision.PARTLY_APPROVED),
        ("ben@example.com", ApprovalDecision.APPROVED),
    ]
