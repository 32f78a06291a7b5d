"""Every outside system's client gives up before the attempt of each activity it runs in, checked in one place
(``agent_worker.wiring.check_client_timeouts``) against the activities' own timeouts (``workflows.timeouts``)."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest

from agent_worker.cli.worker import serve
from agent_worker.config import Settings
from agent_worker.config.model_settings import ClaudeSettings
from agent_worker.config.payment_settings import StripeSettings
from agent_worker.wiring import ClientTimeoutError, check_client_timeouts
from workflows import timeouts


def attempt_seconds(activity: str) -> float:
    limit = timeouts.attempt(activity).get("start_to_close_timeout")
    assert limit is not None, activity
    return limit.total_seconds()


@pytest.mark.parametrize(
    ("concern", "variable", "activity"),
    [
        ("claude", "AGENT_ANTHROPIC_TIMEOUT_SECONDS", "think"),
        ("stripe", "AGENT_STRIPE_TIMEOUT_SECONDS", "lookup_order"),  # the shortest attempt Stripe is called in
        ("smtp", "AGENT_SMTP_TIMEOUT_SECONDS", "send_email"),
    ],
)
def test_a_client_timeout_that_would_outlive_an_attempt_it_runs_in_stops_the_worker_naming_both(
    concern: str, variable: str, activity: str
) -> None:
    attempt = attempt_seconds(activity)
    said = f"{variable}={attempt:g} is not below the {activity} activity's attempt (start_to_close_timeout"
    model = Settings.model_fields[concern].annotation
    assert isinstance(model, type)
    with pytest.raises(ClientTimeoutError, match=re.escape(f"{said} {attempt:g} s)")):
        check_client_timeouts(Settings(**{concern: model(timeout_seconds=attempt)}))
    check_client_timeouts(Settings(**{concern: model(timeout_seconds=attempt - 0.5)}))


def test_stripe_is_checked_against_every_activity_that_calls_it_not_only_the_refund() -> None:
    """The order lookup asks Stripe for the charge and the settlement asks it for a refund by key: a timeout that
    fits the refund's 30 s attempt but not their 10 s would outlive them."""
    assert attempt_seconds("issue_refund") > attempt_seconds("find_refund") == attempt_seconds("lookup_order")
    with pytest.raises(ClientTimeoutError, match="lookup_order"):
        check_client_timeouts(Settings(stripe=StripeSettings(timeout_seconds=attempt_seconds("issue_refund") - 1)))


async def test_the_worker_is_not_built_with_an_anthropic_timeout_as_long_as_a_think_attempt(tmp_path: Path) -> None:
    """The SDK's request timeout at the ``think`` activity's two minutes: a slow call would outlive its attempt."""
    assert timeouts.attempt("think")["start_to_close_timeout"] == timedelta(minutes=2)
    check_client_timeouts(Settings())  # the defaults fit
    with pytest.raises(ClientTimeoutError, match=r"AGENT_ANTHROPIC_TIMEOUT_SECONDS=120 is not below the think"):
        await serve(Settings(claude=ClaudeSettings(timeout_seconds=120), data_dir=tmp_path), "127.0.0.1:1")


def test_an_activity_no_one_declared_timeouts_for_is_refused_by_name_not_run_on_a_default() -> None:
    with pytest.raises(LookupError, match="'issue_refnud'"):
        timeouts.attempt("issue_refnud")
    assert timeouts.attempt("issue_store_credit") == timeouts.PAY
    assert timeouts.attempt("find_store_credit") == timeouts.UNTIL_DONE
