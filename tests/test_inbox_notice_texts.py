"""What the inbox tells a person after an answer, as a real inbox, worker and Temporal server say it: every kind of
notice it can produce (taken, declined with a reason, refused for another amount, for someone not named, as a
second answer, too late on an open ticket and on a closed one). The address it rides in reads as nothing without
the inbox's key: no customer, no question, no reason, however it is decoded; an altered one shows the ticket and
no notice. And no amount in what it says, or in any refusal the page shows, is a bare number."""

from __future__ import annotations

import base64
import contextlib
import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
import structlog

from activities.contracts.approvals import Approval, ApprovalRequest
from activities.contracts.ticket import Outcome
from tests.support.harness import Harness
from tests.support.inbox import (
    Person,
    answer_of,
    csrf_of,
    inbox_for,
    notice_kind,
    notice_of,
    page_of,
    person,
    shown,
    start_with_cli,
    waiting_request,
)
from tests.support.waits import waiting_for_customer
from workflows.approval_rules import ApprovalDesk

pytestmark = pytest.mark.timeout(180)

QUESTION = "My parcel for order A-1001 never arrived, it was a birthday present for my niece"
REASON = "Signed for by cleo@example.com at the front desk on Monday; the carrier has a photo"
PERSONAL = ["ann@example.com", "example.com", "cleo", "birthday", "niece", "Signed for", "front desk", "photo"]
"""What a notice may say that an address must not: the customer, the question's words, a decline's reason."""
BARE = re.compile(r"(?<![\w.,])\d[\d,]*\.\d+\b")
"""A number with decimals: an amount, unless its currency's code comes before it, or (no currency known) it says
what it is ("4,900 (49.00 in a two-decimal currency)")."""


def bare_amounts(text: str) -> list[str]:
    """The amounts in ``text`` that name no currency."""
    found = []
    for match in BARE.finditer(text):
        before, after = text[: match.start()], text[match.end() :]
        if re.search(r"\b[A-Z]{3} $", before) or after.startswith(" in a two-decimal currency"):
            continue
        found.append(match.group(0))
    return found


async def answered(who: Person, workflow_id: str, request: ApprovalRequest, **form: str) -> tuple[str, str]:
    """Press a button on the ticket's page: the address the inbox redirects to, and the page found there."""
    _, page = await who.get(page_of(workflow_id))
    sent = {"csrf": csrf_of(page), "request_id": request.request_id, "amount_cents": str(request.amount_cents)}
    sent |= {"decision": "approve", **form}
    async with who.http.post(
        who.origin + answer_of(workflow_id), data=sent, headers={"Origin": who.origin}, allow_redirects=False
    ) as response:
        assert response.status == 303, await response.text()
        location = response.headers["Location"]
    _, landed = await who.get(location)
    return location, landed


def readable(location: str) -> list[str]:
    """Every way an address's notice could be read without a key: as sent, percent-decoded, base64url-decoded."""
    sealed = parse_qs(urlsplit(location).query)["notice"][0]
    ways = [location, unquote(location), sealed]
    with contextlib.suppress(ValueError):  # binascii.Error is one
        ways.append(base64.urlsafe_b64decode(sealed + "=" * (-len(sealed) % 4)).decode("latin-1"))
    return ways


async def test_every_notice_an_answer_can_get_is_unreadable_in_its_address_and_names_every_amounts_currency(
    agent: Harness,
) -> None:
    """A person's reason mentions the customer; the question is personal. The page shows each notice whole to the
    person who answered, while the address they land on (browser history, access logs, a shared link) holds none
    of it, and turning one character of it shows the ticket without a notice."""
    notices: dict[str, tuple[str, str]] = {}
    with structlog.testing.capture_logs() as logs:
        async with (
            inbox_for(agent) as inbox,
            person(inbox) as ann,
            person(inbox) as ben,
            person(inbox) as bob,
        ):
            for who, name in ((ann, "ann"), (ben, "ben"), (bob, "bob")):
                await who.sign_in(name)
            open_for_replies: dict[str, Any] = {"question": QUESTION, "reply_window_seconds": 3600}
            paid = await start_with_cli(agent, approvers=["ann", "ben"], **open_for_replies)
            declined = await start_with_cli(agent, **open_for_replies)
            silent = await start_with_cli(agent, approval_timeout_seconds=2, **open_for_replies)
            first = await waiting_request(agent.client, paid)
            second = await waiting_request(agent.client, declined)
            unanswered = await waiting_request(agent.client, silent)

            notices["another amount"] = await answered(ann, paid, first, amount_cents="100")
            notices["not among the approvers"] = await answered(bob, paid, first)
            _, bobs_page = await bob.get(page_of(paid))
            notices["approved"] = await answered(ann, paid, first)
            notices["a second answer"] = await answered(ben, paid, first, decision="decline", reason=REASON)
            notices["declined with a reason"] = await answered(ben, declined, second, decision="decline", reason=REASON)
            handle = agent.client.get_workflow_handle(silent, result_type=Outcome)
            await waiting_for_customer(handle, 1)  # the deadline passed, and the agent told the customer
            notices["too late, the ticket open"] = await answered(ann, silent, unanswered)
            for workflow_id in (paid, declined, silent):
                closing = agent.client.get_workflow_handle(workflow_id, result_type=Outcome)
                await closing.cancel()
                await closing.result()
            notices["too late, the ticket closed"] = await answered(ann, paid, first)

            location, _ = notices["declined with a reason"]
            sealed = parse_qs(urlsplit(location).query)["notice"][0]
            turned = sealed[:10] + ("A" if sealed[10] != "A" else "B") + sealed[11:]
            status, tampered = await ben.get(page_of(declined, notice=turned))

    said = {kind: notice_of(page) for kind, (_, page) in notices.items()}
    assert notice_kind(notices["approved"][1]) == "taken"
    assert said["approved"] == "approved; Refunded USD 49.00 on order A-1001 (refund #1)."
    assert REASON in said["declined with a reason"]  # the person reads it whole
    assert said["another amount"] == "rejected: the refund waiting (R1) is USD 49.00, not USD 1.00"
    assert said["not among the approvers"].startswith("rejected: bob may not approve")
    assert said["a second answer"].startswith("rejected: request R1 was already answered: approved by ann")
    assert said["too late, the ticket open"].startswith("not taken: the deadline for request R1 passed at ")
    assert said["too late, the ticket closed"].startswith("not taken: this ticket has closed: ")
    for kind, (location, _) in notices.items():
        assert "@" not in unquote(location), (kind, location)
        for way in readable(location):
            assert not [word for word in PERSONAL if word.lower() in way.lower()], (kind, way)
            assert said[kind] not in way, (kind, way)
    refusals = [*said.values(), shown(bobs_page, "may-not-answer") or ""]
    assert {text: bare_amounts(text) for text in refusals if bare_amounts(text)} == {}
    assert (status, 'data-testid="notice"' in tampered) == (200, False)
    answers = [entry for entry in logs if entry["event"] == "inbox answer"]
    assert len(answers) == len(notices)
    assert not [entry for entry in answers if "front desk" in str(entry)]  # the inbox's own log keeps no reason
    assert f"&middot; {declined}</p>" in tampered  # the ticket itself opens


def test_a_refusal_of_another_amount_names_the_currency_or_says_what_the_number_is() -> None:
    """A request opened before requests said their currency (carried on by a continued run) still waits in 1.2.0;
    an answer for another amount was refused with "is 49.00, not 1.00", on a page that says "USD 49.00"."""
    at = datetime(2026, 12, 1, 9, tzinfo=UTC)
    refusals = []
    for currency in (None, "USD", "JPY"):
        desk = ApprovalDesk()
        desk.open(4900, "A-1001", datetime(2026, 12, 2, tzinfo=UTC), [], currency=currency)
        refused = desk.why_not(Approval(amount_cents=100, approved=True, approver="ann"), at, "web", for_people=True)
        assert refused is not None
        refusals.append(refused)

    assert refusals == [
        "the refund waiting (R1) is 4,900 (49.00 in a two-decimal currency), not 100 (1.00 in a two-decimal currency)",
        "the refund waiting (R1) is USD 49.00, not USD 1.00",
        "the refund waiting (R1) is JPY 4,900, not JPY 100",
    ]
    assert [bare_amounts(text) for text in refusals] == [[], [], []]
