"""Claude behind the ``think`` activity: the real ``anthropic`` client, over HTTP, against a local Messages API.

Nothing of the SDK is patched: the worker builds its client from ``ANTHROPIC_API_KEY`` and
``ANTHROPIC_BASE_URL`` as in production, and the fake API (``tests/support/fake_messages_api.py``) answers what a
test scripts and refuses what the real API would refuse.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import signal
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, get_args

import anthropic
import pytest
import structlog
from anthropic._data import DEPRECATED_MODELS
from anthropic.types import Model
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from activities.claude_model import ClaudeModel, retry_after
from activities.contracts.conversation import (
    SUMMARY_HEADER,
    Message,
    ThinkRequest,
    TicketContext,
    Usage,
    UsageReport,
)
from activities.contracts.names import APPROVE_SIGNAL, USAGE_QUERY
from activities.contracts.policy import ModelPolicy, MoneyPolicy
from activities.contracts.ticket import Status
from activities.pricing import DEFAULT_PRICES, ModelPrice, priced
from activities.prompt import SUPPORT_POLICY
from activities.scripted_model import ScriptedModel
from activities.tools import TOOLS
from agent_worker.config import Settings
from agent_worker.config.model_settings import DEFAULT_MODEL, ClaudeSettings
from agent_worker.model_choice import NoCredentialsError, choose_model
from tests.support.fake_messages_api import (
    FakeMessagesAPI,
    Reply,
    error,
    message,
    text,
    thinking,
    tool_use,
)
from tests.support.harness import Harness
from tests.support.history import activity_attempts, events
from tests.support.processes import spawn_worker
from tests.support.tickets import answer, ticket
from tests.support.waits import awaiting
from workflows.support_agent import CUT_OFF, REFUSED

API_KEY = "sk-ant-test-key"
NO_APPROVAL_NEEDED = 10_000
CACHED = {"type": "ephemeral"}


@pytest.fixture
def fake_api() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI().running() as api:
        yield api


@pytest.fixture
def sdk_env(monkeypatch: pytest.MonkeyPatch, fake_api: FakeMessagesAPI, tmp_path: Path) -> None:
    """The SDK's own environment, as an operator sets it: a key, and the base URL of a gateway; nothing else
    of the machine's (no other ANTHROPIC_* variable, no profile in the home directory)."""
    for name in os.environ:
        if name.startswith("ANTHROPIC_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_api.url)


def claude_settings(agent: Harness, **overrides: Any) -> Settings:
    """The harness's settings with the model chosen as ``auto`` does; ``overrides`` are ``ClaudeSettings`` fields."""
    return agent.settings(claude=ClaudeSettings(**{"backend": "auto", **overrides}))


@pytest.fixture
async def claude(agent: Harness, sdk_env: None) -> AsyncIterator[ClaudeModel]:
    """The model exactly as the worker chooses it with a key configured (2 s request timeout)."""
    model = choose_model(claude_settings(agent, timeout_seconds=2.0), agent.store.model_calls)
    assert isinstance(model, ClaudeModel)
    yield model
    await model.close()


def ids(blocks: list[dict[str, Any]], kind: str, key: str = "id") -> list[str]:
    return [b[key] for b in blocks if b["type"] == kind]


def support_script() -> tuple[list[Reply], list[dict[str, Any]]]:
    """The support script as Claude plays it, with its usage per step; also returns its tool calls."""
    calls = [
        tool_use("lookup_order", order_id="A-1001"),
        tool_use("issue_refund", order_id="A-1001", amount_cents=4900),
        tool_use("send_email", to="ann@example.com", subject="Your refund", body="We refunded 49.00 (refund #1)."),
    ]
    replies = [
        message(
            thinking("The customer names A-1001: look it up before anything else."),
            calls[0],
            stop_reason="tool_use",
            usage={"input_tokens": 900, "output_tokens": 80, "cache_creation_input_tokens": 1500},
        ),
        message(
            calls[1],
            stop_reason="tool_use",
            usage={"input_tokens": 60, "output_tokens": 40, "cache_read_input_tokens": 1500},
        ),
        message(
            text("The refund went through; now the customer hears about it."),
            calls[2],
            stop_reason="tool_use",
            usage={"input_tokens": 50, "output_tokens": 90, "cache_read_input_tokens": 1700},
        ),
        message(
            text("I have refunded 49.00 for order A-1001 and emailed you the details."),
            usage={"input_tokens": 40, "output_tokens": 30, "cache_read_input_tokens": 1900},
        ),
    ]
    return replies, calls


def cost(usage: dict[str, int], price: ModelPrice = DEFAULT_PRICES[DEFAULT_MODEL]) -> float:
    return (
        usage["input_tokens"] * price.input
        + usage["output_tokens"] * price.output
        + usage.get("cache_read_input_tokens", 0) * price.cache_read
        + usage.get("cache_creation_input_tokens", 0) * price.cache_write
    ) / 1_000_000


# --- the whole ticket --------------------------------------------------------------------------------------


async def test_a_ticket_on_claude_waits_for_approval_refunds_emails_and_reports_tokens_and_cost_as_it_goes(
    agent: Harness, fake_api: FakeMessagesAPI, claude: ClaudeModel
) -> None:
    replies, _ = support_script()
    fake_api.script(*replies)
    async with agent.worker(claude):
        handle = await agent.start(ticket(approval_limit_cents=2000))
        await awaiting(handle, 4900)
        while_waiting = await handle.query(USAGE_QUERY, result_type=UsageReport)
        await handle.signal(APPROVE_SIGNAL, answer(4900))
        outcome = await handle.result()

    assert outcome.status is Status.RESOLVED
    assert outcome.answer == "I have refunded 49.00 for order A-1001 and emailed you the details."
    assert [(r.order_id, r.amount_cents) for r in agent.store.payments.refunds()] == [("A-1001", 4900)]
    assert [(e.to, e.body) for e in agent.store.mail.sent()] == [("ann@example.com", "We refunded 49.00 (refund #1).")]
    assert [a.approver for a in outcome.approvals] == ["ann"]

    usages = [reply.body["usage"] for reply in replies]
    assert [s.step for s in while_waiting.steps] == [1, 2]
    assert while_waiting.total.input_tokens == 960
    assert while_waiting.total.cache_read_input_tokens == 1500
    assert while_waiting.total.cost_usd == pytest.approx(cost(usages[0]) + cost(usages[1]))

    total = outcome.usage.total
    assert [s.model for s in outcome.usage.steps] == [DEFAULT_MODEL] * 4
    assert (total.input_tokens, total.output_tokens) == (1050, 240)
    assert (total.cache_read_input_tokens, total.cache_creation_input_tokens) == (5100, 1500)
    assert total.cost_usd == pytest.approx(sum(cost(u) for u in usages))
    assert total.cost_usd > 0


async def test_every_request_names_the_model_describes_the_tools_from_their_argument_models_and_marks_the_cache(
    agent: Harness, fake_api: FakeMessagesAPI, claude: ClaudeModel
) -> None:
    replies, calls = support_script()
    fake_api.script(*replies)
    outcome = await agent.run(ticket(approval_limit_cents=NO_APPROVAL_NEEDED), claude)
    assert outcome.status is Status.RESOLVED

    assert len(fake_api.requests) == 4
    for request in fake_api.requests:
        body = request.body
        assert (body["model"], body["max_tokens"]) == (DEFAULT_MODEL, 8192)
        assert "temperature" not in body
        sent_key = request.headers.get("x-api-key") or request.headers.get("authorization", "").removeprefix("Bearer ")
        assert sent_key == API_KEY, "the key came from ANTHROPIC_API_KEY"
        assert request.headers["x-stainless-retry-count"] == "0"
        tools = body["tools"]
        assert [t["name"] for t in tools] == list(TOOLS)
        for tool, spec in zip(tools, TOOLS.values(), strict=True):
            assert tool["input_schema"] == spec.args.model_json_schema()
            assert tool["description"] == inspect.cleandoc(spec.args.__doc__ or "")
        assert [t.get("cache_control") for t in tools] == [None] * (len(tools) - 1) + [CACHED]
        policy, this_ticket = body["system"]
        assert (policy["text"], policy["cache_control"]) == (SUPPORT_POLICY, CACHED)
        assert "cache_control" not in this_ticket
        assert outcome.ticket_id in this_ticket["text"]
        assert "ann@example.com" in this_ticket["text"]
        assert request.messages[-1]["content"][-1]["cache_control"] == CACHED

    assert "Always do this before refunding" in fake_api.requests[0].body["tools"][0]["description"]
    assert fake_api.requests[0].body["tools"][1]["input_schema"]["properties"]["amount_cents"]["exclusiveMinimum"] == 0

    last = fake_api.requests[-1].messages
    assert [m["role"] for m in last] == ["user", "assistant"] * 3 + ["user"]
    for asked, answered in zip(last[1::2], last[2::2], strict=True):
        assert ids(answered["content"], "tool_result", "tool_use_id") == ids(asked["content"], "tool_use")
        assert not any(b["is_error"] for b in answered["content"])
    assert ids(last[1]["content"], "tool_use") + ids(last[3]["content"], "tool_use") + ids(
        last[5]["content"], "tool_use"
    ) == [c["id"] for c in calls]
    assert last[1]["content"] == replies[0].body["content"], "the thinking block goes back exactly as it came"


# --- several tool calls, and bad ones ----------------------------------------------------------------------


async def test_two_lookups_in_one_response_run_at_once_and_the_email_after_them_waits_for_both(
    agent: Harness, fake_api: FakeMessagesAPI, claude: ClaudeModel
) -> None:
    calls = [
        tool_use("lookup_order", order_id="A-1001"),
        tool_use("lookup_order", order_id="A-1005"),
        tool_use("send_email", to="ann@example.com", subject="Your orders", body="Both orders are on their way."),
    ]
    fake_api.script(message(*calls, stop_reason="tool_use"), message(text("Both found; I emailed you.")))
    async with agent.worker(claude):
        handle = await agent.start(ticket())
        outcome = await handle.result()

    history = await events(handle)
    scheduled = {
        e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    completed = {
        e.activity_task_completed_event_attributes.scheduled_event_id: e.event_id
        for e in history
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
    }
    lookups = [event_id for event_id, name in scheduled.items() if name == "lookup_order"]
    (email,) = [event_id for event_id, name in scheduled.items() if name == "send_email"]
    assert len(lookups) == 2
    assert max(lookups) < min(completed[e] for e in lookups), "the second lookup was scheduled before the first ended"
    assert email > max(completed[e] for e in lookups), "the email was sent only after both lookups ended"

    answer = fake_api.requests[1].messages[-1]["content"]
    assert ids(answer, "tool_result", "tool_use_id") == [c["id"] for c in calls]
    assert [b["is_error"] for b in answer] == [False, False, False]
    assert '"order_id":"A-1005"' in answer[1]["content"]
    assert outcome.status is Status.RESOLVED


async def test_invalid_arguments_from_claude_go_back_as_error_results_and_no_tool_runs(
    agent: Harness, fake_api: FakeMessagesAPI, claude: ClaudeModel
) -> None:
    calls = [
        tool_use("issue_refund", order_id="A-1001", amount_cents="all of it"),
        tool_use("lookup_order", order="A-1001"),
    ]
    fake_api.script(message(*calls, stop_reason="tool_use"), message(text("Which order, and how much?")))
    async with agent.worker(claude):
        handle = await agent.start(ticket(approval_limit_cents=NO_APPROVAL_NEEDED))
        outcome = await handle.result()

    results = fake_api.requests[1].messages[-1]["content"]
    assert ids(results, "tool_result", "tool_use_id") == [c["id"] for c in calls]
    assert all(r["is_error"] for r in results)
    assert "amount_cents: Input should be a valid integer" in results[0]["content"]
    assert "order_id: Field required" in results[1]["content"]
    assert agent.store.payments.refunds() == []
    assert await activity_attempts(handle, "lookup_order") == []
    assert outcome.status is Status.RESOLVED


# --- stop reasons ------------------------------------------------------------------------------------------


async def test_a_refusal_hands_the_ticket_to_a_person_and_runs_nothing(
    agent: Harness, fake_api: FakeMessagesAPI, claude: ClaudeModel
) -> None:
    fake_api.script(
        message(
            text("I can't help with that."),
            stop_reason="refusal",
            stop_details={"type": "refusal", "category": "general_harms", "explanation": "policy"},
        )
    )
    outcome = await agent.run(ticket(), claude)

    assert outcome.status is Status.HANDED_OVER
    assert outcome.answer == REFUSED
    assert "person" in outcome.answer
    assert outcome.tool_calls == []
    assert outcome.model_calls == 1


async def test_a_response_cut_off_at_max_tokens_runs_none_of_its_tool_calls_and_the_model_is_asked_to_go_on(
    agent: Harness, fake_api: FakeMessagesAPI, claude: ClaudeModel
) -> None:
    cut = tool_use("issue_refund", order_id="A-1001", amount_cents=49)
    fake_api.script(message(cut, stop_reason="max_tokens"), message(text("Let me start again.")))
    outcome = await agent.run(ticket(approval_limit_cents=NO_APPROVAL_NEEDED), claude)

    assert agent.store.payments.refunds() == []
    result, note = fake_api.requests[1].messages[-1]["content"]
    assert (result["tool_use_id"], result["is_error"], result["content"]) == (cut["id"], True, CUT_OFF)
    assert note["type"] == "text"
    assert "cut off" in note["text"]
    assert outcome.status is Status.RESOLVED
    assert [(c.name, c.is_error) for c in outcome.tool_calls] == [("issue_refund", True)]


async def test_a_paused_turn_goes_back_as_it_is_and_the_next_response_continues_it(
    agent: Harness, fake_api: FakeMessagesAPI, claude: ClaudeModel
) -> None:
    fake_api.script(
        message(text("Let me look into order A-1001."), stop_reason="pause_turn"),
        message(text("Your parcel is on its way.")),
    )
    outcome = await agent.run(ticket(), claude)

    resumed = fake_api.requests[1].messages
    assert [m["role"] for m in resumed] == ["user", "assistant"]
    assert resumed[-1]["content"][0]["text"] == "Let me look into order A-1001."
    assert (outcome.status, outcome.answer, outcome.steps) == (Status.RESOLVED, "Your parcel is on its way.", 2)


async def test_a_conversation_past_its_token_limit_is_summarised_by_claude_without_tools_and_goes_on_from_there(
    agent: Harness, fake_api: FakeMessagesAPI, claude: ClaudeModel
) -> None:
    lookups = [tool_use("lookup_order", order_id="A-1001") for _ in range(3)]
    summary = "Order A-1001 (49.00, ann@example.com) was looked up three times; nothing else was done."
    fake_api.script(
        message(lookups[0], stop_reason="tool_use"),
        message(lookups[1], stop_reason="tool_use"),
        message(lookups[2], stop_reason="tool_use", usage={"input_tokens": 400, "cache_read_input_tokens": 4000}),
        message(text(summary), usage={"input_tokens": 300, "output_tokens": 60}),
        message(text("Your order A-1001 is on its way.")),
    )
    outcome = await agent.run(ticket(approval_limit_cents=NO_APPROVAL_NEEDED, summarize_above_tokens=4000), claude)
    assert (outcome.status, outcome.steps, outcome.model_calls) == (Status.RESOLVED, 4, 5)
    assert [u.purpose for u in outcome.usage.steps] == ["think"] * 3 + ["summary", "think"]
    assert outcome.usage.steps[3].usage.output_tokens == 60

    before, asked, after = (fake_api.requests[n] for n in (2, 3, 4))
    assert asked.body["tool_choice"] == {"type": "none"}, "the summary is text: the tools are there, not to be called"
    assert [t["name"] for t in asked.body["tools"]] == list(TOOLS)
    # Summarised: the question and the first lookup with its result; the instruction joins the last user turn.
    assert [m["role"] for m in asked.messages] == ["user", "assistant", "user"]
    assert asked.messages[:2] == before.messages[:2]
    assert "Summarise it so far" in asked.messages[-1]["content"][-1]["text"]
    # Then the conversation goes on from the question and the summary, the latest turns kept as they were.
    opening = after.messages[0]["content"][0]["text"]
    assert opening.startswith("My parcel for order A-1001 never arrived")
    assert f"{SUMMARY_HEADER}\n{summary}" in opening
    assert after.messages[1:3] == [strip_cache(m) for m in before.messages[3:5]]
    assert after.messages[3]["content"] == [lookups[2]]
    assert ids(after.messages[4]["content"], "tool_result", "tool_use_id") == [lookups[2]["id"]]
    assert after.body["tool_choice"] == {"type": "auto"}
    assert any("summarised 3 older messages" in e for e in agent.store.audit.entries(outcome.ticket_id))


def strip_cache(message: dict[str, Any]) -> dict[str, Any]:
    """A message as sent, without the cache breakpoint the last message of a request carries."""
    content = [{k: v for k, v in block.items() if k != "cache_control"} for block in message["content"]]
    return {**message, "content": content}


# --- errors ------------------------------------------------------------------------------------------------


async def test_a_429_is_retried_after_the_retry_after_it_names_and_the_one_answer_is_acted_on_once(
    agent: Harness, fake_api: FakeMessagesAPI, claude: ClaudeModel
) -> None:
    fake_api.script(
        error(429, "rate_limit_error", "Number of request tokens has exceeded your rate limit.", {"retry-after": "2"}),
        message(tool_use("lookup_order", order_id="A-1001"), stop_reason="tool_use"),
        message(text("Found it.")),
    )
    async with agent.worker(claude):
        handle = await agent.start(ticket())
        outcome = await handle.result()

    assert await activity_attempts(handle, "think") == [2, 1]
    assert await activity_attempts(handle, "lookup_order") == [1]
    limited, retried = fake_api.requests[:2]
    assert retried.at - limited.at >= 2.0, "the retry waited as long as retry-after said, not the 1 s backoff"
    assert retried.headers["x-stainless-retry-count"] == "0", "the SDK did not retry on its own"
    assert len(agent.store.model_calls.of(outcome.ticket_id)) == 2
    assert outcome.status is Status.RESOLVED


@pytest.mark.parametrize(("status", "kind"), [(529, "overloaded_error"), (500, "api_error")])
async def test_an_overloaded_or_failing_api_is_retried_by_temporal(
    agent: Harness, fake_api: FakeMessagesAPI, claude: ClaudeModel, status: int, kind: str
) -> None:
    fake_api.script(error(status, kind, "Try again later."), message(text("Here is your answer.")))
    async with agent.worker(claude):
        handle = await agent.start(ticket())
        outcome = await handle.result()

    assert await activity_attempts(handle, "think") == [2]
    assert (outcome.status, outcome.answer) == (Status.RESOLVED, "Here is your answer.")


REFUSED_REQUESTS = {
    "bad request": (400, "invalid_request_error", "max_tokens: 99999999 > 128000, the maximum", ""),
    "bad key": (401, "authentication_error", "invalid x-api-key", "check ANTHROPIC_API_KEY"),
    "no permission": (403, "permission_error", "Your API key does not have permission", "may not use this model"),
    "no such model": (404, "not_found_error", "model: claude-nonexistent", "check AGENT_ANTHROPIC_MODEL"),
    "too large": (413, "request_too_large", "Request exceeds the maximum allowed number of bytes", "too large"),
}


@pytest.mark.parametrize("refused", REFUSED_REQUESTS.values(), ids=REFUSED_REQUESTS.keys())
async def test_a_request_the_api_refuses_is_not_retried_and_the_ticket_goes_to_a_person_with_the_apis_words(
    agent: Harness, fake_api: FakeMessagesAPI, claude: ClaudeModel, refused: tuple[int, str, str, str]
) -> None:
    status, kind, detail, hint = refused
    fake_api.script(error(status, kind, detail))
    async with agent.worker(claude):
        handle = await agent.start(ticket())
        outcome = await handle.result()

    assert await activity_attempts(handle, "think") == [1]
    assert len(fake_api.requests) == 1
    assert outcome.status is Status.FAILED
    assert f"The Claude API answered {status} {kind}: {detail}" in outcome.answer
    assert hint in outcome.answer
    assert "A person will take this ticket over." in outcome.answer


async def test_a_request_that_times_out_is_retried_and_its_late_answer_is_never_acted_on(
    agent: Harness, fake_api: FakeMessagesAPI, claude: ClaudeModel
) -> None:
    late = message(tool_use("issue_refund", order_id="A-1001", amount_cents=4900), stop_reason="tool_use")
    fake_api.script(Reply(late.body, delay=3.0), message(text("Sorry for the wait: a colleague will call you.")))
    async with agent.worker(claude):
        handle = await agent.start(ticket(approval_limit_cents=NO_APPROVAL_NEEDED))
        outcome = await handle.result()

    assert await activity_attempts(handle, "think") == [2]
    assert agent.store.payments.refunds() == []
    assert (outcome.status, outcome.model_calls) == (Status.RESOLVED, 1)


async def test_an_api_nobody_answers_at_is_a_retryable_error_that_names_the_address() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    client = anthropic.AsyncAnthropic(api_key=API_KEY, base_url=f"http://127.0.0.1:{port}", max_retries=0)
    model = ClaudeModel(
        client, model=DEFAULT_MODEL, max_tokens=1024, temperature=None, system_prompt="", prices=DEFAULT_PRICES
    )
    request = ThinkRequest(
        ticket=TicketContext(ticket_id="T-1", customer_email="ann@example.com"),
        step=1,
        messages=[Message.user_text("Where is my parcel?")],
    )
    with pytest.raises(ApplicationError) as raised:
        await model.decide(request)
    await model.close()

    assert raised.value.type == "APIConnectionError"
    assert not raised.value.non_retryable
    assert f"127.0.0.1:{port}" in raised.value.message


def test_retry_after_is_read_in_milliseconds_seconds_or_as_a_date() -> None:
    assert retry_after({"retry-after-ms": "250"}).total_seconds() == 0.25  # type: ignore[union-attr]
    assert retry_after({"retry-after": "3"}).total_seconds() == 3  # type: ignore[union-attr]
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) is None, "a date in the past: no wait"
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({}) is None


# --- the worker process, configured as in production ------------------------------------------------------


async def test_a_worker_process_given_only_the_sdks_variables_runs_tickets_on_claude_and_never_logs_the_key(
    agent: Harness, client: Client, fake_api: FakeMessagesAPI, sdk_env: None
) -> None:
    replies, _ = support_script()
    fake_api.script(*replies)
    settings = {"AGENT_MODEL_BACKEND": "auto", "AGENT_LOG_LEVEL": "DEBUG"}  # DEBUG: the SDK logs requests
    worker = await spawn_worker(
        agent.worker_env(**settings), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        handle = await agent.start(ticket(approval_limit_cents=NO_APPROVAL_NEEDED))
        outcome = await asyncio.wait_for(handle.result(), 60)
    finally:
        worker.send_signal(signal.SIGTERM)
        out, err = await asyncio.wait_for(worker.communicate(), 60)

    assert outcome.status is Status.RESOLVED
    assert len(fake_api.requests) == 4
    lines = [json.loads(line) for line in err.decode().splitlines() if line.startswith("{")]
    assert any(line["event"] == "model: Claude" and line["base_url"].startswith(fake_api.url) for line in lines)
    answered = [line for line in lines if line["event"] == "model answered"]
    assert [line["output_tokens"] for line in answered] == [80, 40, 90, 30]
    history = (await handle.fetch_history()).to_json()
    assert API_KEY not in out.decode() + err.decode() + history + outcome.model_dump_json()


# --- pricing -----------------------------------------------------------------------------------------------


def dearest_cost(usage: dict[str, int]) -> float:
    """What the usage costs at the highest price of each token kind any model in the table has."""
    top = {kind: max(getattr(price, kind) for price in DEFAULT_PRICES.values()) for kind in ModelPrice.model_fields}
    return cost(usage, ModelPrice(**top))


async def test_a_response_naming_a_model_without_a_price_costs_what_the_dearest_known_model_would_so_the_budget_holds(
    agent: Harness, fake_api: FakeMessagesAPI, claude: ClaudeModel
) -> None:
    """A gateway that answers with a renamed model once made every call cost 0, and switched the budget off: the
    ticket went on calling the model. Priced at the dearest known model, its first call spends the budget and the
    ticket goes to a person; the operator is warned once for the name, not once per call."""
    renamed = f"gateway/sonnet-{uuid.uuid4().hex[:8]}"
    usage = {"input_tokens": 20_000, "output_tokens": 90_000}
    fake_api.script(
        message(tool_use("lookup_order", order_id="A-1001"), stop_reason="tool_use", usage=usage, model=renamed),
        message(tool_use("lookup_order", order_id="A-1001"), stop_reason="tool_use", usage=usage, model=renamed),
        message(text("Your parcel is on its way."), usage=usage, model=renamed),
    )
    budget = MoneyPolicy(model=ModelPolicy(max_cost_usd_per_ticket=2.0))
    with structlog.testing.capture_logs() as logs:
        async with agent.worker(claude, policy=budget):
            outcome = await (await agent.start(ticket())).result()

    assert cost(usage) < 2.0 < dearest_cost(usage)  # at the configured model's price, not spent after one call
    assert outcome.usage.total.cost_usd == pytest.approx(dearest_cost(usage))
    assert [step.model for step in outcome.usage.steps] == [renamed]
    assert outcome.status is Status.HANDED_OVER
    assert outcome.model_calls == 1
    warned = [line for line in logs if line["log_level"] == "warning" and line.get("model") == renamed]
    assert len(warned) == 1
    assert "AGENT_ANTHROPIC_PRICES" in warned[0]["event"]


def test_an_unknown_model_is_priced_per_token_kind_at_the_dearest_price_and_a_dated_id_at_its_aliass() -> None:
    """The dearest price of each kind, which may come from different models: no known model's call costs more."""
    used = Usage(input_tokens=1000, output_tokens=500, cache_creation_input_tokens=200, cache_read_input_tokens=3000)
    unknown = priced(used, f"renamed-{uuid.uuid4().hex[:8]}", DEFAULT_PRICES).cost_usd
    dated = priced(used, "claude-haiku-4-5-20251001", DEFAULT_PRICES).cost_usd

    assert unknown == pytest.approx(
        dearest_cost(
            {
                "input_tokens": 1000,
                "output_tokens": 500,
                "cache_creation_input_tokens": 200,
                "cache_read_input_tokens": 3000,
            }
        )
    )
    assert unknown >= max(price.cost(used) for price in DEFAULT_PRICES.values())
    assert dated == pytest.approx(DEFAULT_PRICES["claude-haiku-4-5"].cost(used))
    assert priced(used, "anything", {}).cost_usd == 0  # no table at all: nothing to price by


# --- choosing the model ------------------------------------------------------------------------------------


def test_without_an_api_key_a_worker_refuses_the_script_and_only_the_dev_stack_falls_back_to_it(
    agent: Harness, sdk_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The script refunds for real: outside ``dev`` and the demo it runs only when asked for by name."""
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(NoCredentialsError, match=r"set ANTHROPIC_API_KEY .* or AGENT_MODEL_BACKEND=scripted"):
        choose_model(claude_settings(agent), agent.store.model_calls)
    with structlog.testing.capture_logs() as logs:
        model = choose_model(claude_settings(agent), agent.store.model_calls, dev_stack=True)

    assert isinstance(model, ScriptedModel)
    assert any("set ANTHROPIC_API_KEY" in line["event"] and line["log_level"] == "warning" for line in logs)
    with pytest.raises(NoCredentialsError, match="AGENT_MODEL_BACKEND=claude, but no ANTHROPIC_API_KEY"):
        choose_model(claude_settings(agent, backend="claude"), agent.store.model_calls, dev_stack=True)


def test_a_configured_but_broken_anthropic_profile_stops_the_worker_instead_of_running_the_script(
    agent: Harness, sdk_env: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", str(tmp_path / "empty"))
    with pytest.raises(NoCredentialsError, match="configured but cannot be used: Config file not found"):
        choose_model(claude_settings(agent), agent.store.model_calls)


async def test_with_an_api_key_the_worker_runs_claude_through_one_client_with_the_sdks_retries_off(
    agent: Harness, sdk_env: None, fake_api: FakeMessagesAPI
) -> None:
    with structlog.testing.capture_logs() as logs:
        model = choose_model(claude_settings(agent), agent.store.model_calls)

    assert isinstance(model, ClaudeModel)
    assert model.name == DEFAULT_MODEL
    assert model.client.max_retries == 0
    assert str(model.client.base_url).rstrip("/") == fake_api.url
    assert any(line["event"] == "model: Claude" and line["model"] == DEFAULT_MODEL for line in logs)
    await model.close()


def test_the_default_model_is_a_current_claude_model_from_the_sdks_list_with_a_price() -> None:
    (known, _) = get_args(Model)
    assert DEFAULT_MODEL in get_args(known)
    assert DEFAULT_MODEL not in DEPRECATED_MODELS
    assert DEFAULT_MODEL in DEFAULT_PRICES


# --- the fake keeps the real API's rules -------------------------------------------------------------------


async def test_the_fake_api_refuses_the_conversations_the_real_one_refuses(fake_api: FakeMessagesAPI) -> None:
    """Every test above leans on these refusals to catch a malformed conversation, so they are checked too."""
    asked = message(thinking("Look it up."), tool_use("lookup_order", order_id="A-1001"), stop_reason="tool_use")
    fake_api.script(asked)
    client = anthropic.AsyncAnthropic(api_key=API_KEY, base_url=fake_api.url, max_retries=0)
    question = turn("user", text("Where is A-1001?"))
    await client.messages.create(model=DEFAULT_MODEL, max_tokens=100, messages=[question])
    thought, call = asked.body["content"]
    answer = turn("user", {"type": "tool_result", "tool_use_id": call["id"], "content": "{}"})
    broken = {
        "unanswered tool_use": [question, turn("assistant", thought, call), turn("user", text("Well?"))],
        "tampered thinking": [question, turn("assistant", {**thought, "thinking": "Refund it all."}, call), answer],
        "dropped thinking": [question, turn("assistant", call), answer],
        "two user turns": [question, question],
    }
    for name, messages in broken.items():
        with pytest.raises(anthropic.BadRequestError):
            await client.messages.create(model=DEFAULT_MODEL, max_tokens=100, messages=messages)
        assert not fake_api.replies, name
    await client.close()


def turn(role: str, *blocks: dict[str, Any]) -> Any:
    """A message param as JSON, the way the fake sees it (the SDK's TypedDicts are for the adapter)."""
    return {"role": role, "content": list(blocks)}
