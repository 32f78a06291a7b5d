"""The same ticket against Anthropic's real API. Skipped unless ANTHROPIC_API_KEY is set; it costs a few cents.

Run it with ``ANTHROPIC_API_KEY=... ./dev test tests/test_claude_live.py``. It checks what no fake can: that
the model, reading the policy and the tool descriptions this code sends, actually follows the support script.
"""

from __future__ import annotations

import os

import pytest

from activities.claude_model import ClaudeModel
from activities.contracts.ticket import Status
from agent_worker.config.model_settings import ClaudeSettings
from agent_worker.model_choice import choose_model
from tests.support.harness import Harness
from tests.support.tickets import ticket

pytestmark = pytest.mark.skipif(
    not os.environ.get("ANTHROPIC_API_KEY"), reason="talks to Anthropic's API: set ANTHROPIC_API_KEY to run it"
)


async def test_claude_looks_up_refunds_the_order_total_emails_the_customer_and_answers(agent: Harness) -> None:
    model = choose_model(agent.settings(claude=ClaudeSettings(backend="claude")), agent.store.model_calls)
    assert isinstance(model, ClaudeModel)
    try:
        outcome = await agent.run(ticket(approval_limit_cents=10_000, max_steps=8), model)
    finally:
        await model.close()

    assert outcome.status is Status.RESOLVED, outcome.answer
    assert outcome.tool_calls[0].name == "lookup_order"
    assert [(r.order_id, r.amount_cents) for r in agent.store.payments.refunds()] == [("A-1001", 4900)]
    assert [e.to for e in agent.store.mail.sent()] == ["ann@example.com"]
    assert outcome.usage.total.output_tokens > 0
    assert outcome.usage.total.cost_usd > 0
