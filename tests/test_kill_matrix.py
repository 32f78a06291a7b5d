"""A kill at every step of an approval ticket: the run always ends as if nothing had happened, give or
take one model call. ``bench/recovery.py`` runs the same rows one at a time and times the recovery."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import Client

from tests.support.kill_matrix import KILL_POINTS, NO_CRASH, PROVIDER_KILL_POINTS, WAITING, run_matrix, table

pytestmark = pytest.mark.slow
LANES = 6
"""Kill points run side by side, each with its own workers: two minutes instead of five."""


@pytest.mark.timeout(600)  # 24 tickets and 47 worker processes: minutes when the machine is shared
async def test_a_worker_killed_at_any_step_finishes_with_one_refund_one_email_and_at_most_one_extra_model_call(
    client: Client, tmp_path: Path
) -> None:
    without_crash, *rows = await run_matrix(client, tmp_path, (NO_CRASH, *KILL_POINTS), concurrency=LANES)
    report = table([without_crash, *rows])

    assert without_crash.error is None, report
    assert without_crash.refunds == without_crash.approved == [4900], report
    assert (without_crash.emails, without_crash.model_calls) == (1, 4), report
    for row in rows:
        assert row.error is None, f"{row.kill_point}: {row.error}\n{report}"
        lost_an_answer = row.kill_point.startswith("after:think")
        assert row.killed == 1, f"{row.kill_point}: no worker was killed\n{report}"
        assert len(row.approved) == 1, f"{row.kill_point}: approvals {row.approved}\n{report}"
        assert row.refunds == row.approved, f"{row.kill_point}: refunds are not the one approved\n{report}"
        assert row.emails == 1, f"{row.kill_point}\n{report}"
        assert row.audit_entries == without_crash.audit_entries, f"{row.kill_point}\n{report}"
        assert row.status is without_crash.status, f"{row.kill_point}\n{report}"
        assert row.model_calls == without_crash.model_calls + lost_an_answer, f"{row.kill_point}\n{report}"
        if row.kill_point != WAITING:
            assert row.recovery is not None, f"{row.kill_point}: no step started on the new worker\n{report}"


@pytest.mark.timeout(600)
async def test_killed_around_a_refund_and_an_email_against_stripe_and_an_smtp_server_pays_and_mails_once(
    client: Client, tmp_path: Path
) -> None:
    """The same ticket against the real-protocol providers: refunds counted at Stripe's API (the fake), emails
    at the SMTP server, for the kills around the two side effects."""
    without_crash, *rows = await run_matrix(
        client, tmp_path, (NO_CRASH, *PROVIDER_KILL_POINTS), concurrency=len(PROVIDER_KILL_POINTS) + 1, real=True
    )
    report = table([without_crash, *rows])

    assert without_crash.error is None, report
    assert without_crash.refunds == without_crash.approved == [4900], report
    assert without_crash.emails == 1, report
    for row in rows:
        assert row.error is None, f"{row.kill_point}: {row.error}\n{report}"
        assert row.killed == 1, f"{row.kill_point}: no worker was killed\n{report}"
        assert row.refunds == row.approved == [4900], f"{row.kill_point}: paid at Stripe {row.refunds}\n{report}"
        assert row.emails == 1, f"{row.kill_point}: messages at the server\n{report}"
        assert row.status is without_crash.status, f"{row.kill_point}\n{report}"
        assert row.model_calls == without_crash.model_calls, f"{row.kill_point}\n{report}"
