"""How long each activity may take and how often it is retried.

Temporal owns every retry: model and tool clients inside activities run with their own retries off.
The numbers follow from what each call is and from what a crash must cost:

- Every activity heartbeats, with a heartbeat timeout of a few seconds, so a worker
  killed in the middle is noticed in seconds. The start-to-close timeouts can then be sized for the work
  (two minutes for a model call) without making a crash cost two minutes.
- The tools' own timeouts and retries are declared with the tools (``activities.tools.TOOLS``): a refund's
  schedule-to-close timeout, for one, stays far below the payment provider's 24-hour key lifetime.
- Attempts are bounded, so a tool that keeps failing is handed to the model instead of retried forever.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy
from temporalio.workflow import ActivityConfig

from activities.heartbeat import HEARTBEAT_TIMEOUT
from activities.tools import TOOLS

HEARTBEAT = HEARTBEAT_TIMEOUT

THINK: ActivityConfig = {
    "start_to_close_timeout": timedelta(minutes=2),
    "heartbeat_timeout": HEARTBEAT,
    "retry_policy": RetryPolicy(
        initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=60), maximum_attempts=8
    ),
}


FIND_REFUND: ActivityConfig = {
    "heartbeat_timeout": HEARTBEAT,
    "start_to_close_timeout": timedelta(seconds=10),
    "retry_policy": RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30)),
}


AUDIT: ActivityConfig = {
    "heartbeat_timeout": HEARTBEAT,
    "start_to_close_timeout": timedelta(seconds=10),
    # The trail must be written: retried until it is, like the provider lookup above.
    "retry_policy": RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30)),
}

MONEY_POLICY: ActivityConfig = {
    # It answers from what the worker read at start, so it needs no heartbeat: a start-to-close as short as the
    # others' heartbeat timeout makes a worker killed in the middle cost no more than elsewhere.
    "start_to_close_timeout": HEARTBEAT,
    "retry_policy": RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30)),
}

VOUCHED: ActivityConfig = MONEY_POLICY
"""Checks a signature against the worker's keys at once, like ``money_policy``."""


ARCHIVE_RECORDS: ActivityConfig = {
    "heartbeat_timeout": HEARTBEAT,
    "start_to_close_timeout": timedelta(seconds=30),
    # The next run carries only the key: the ticket cannot continue until the records are stored.
    "retry_policy": RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30)),
}


ALL: tuple[ActivityConfig, ...] = (
    THINK, FIND_REFUND, AUDIT, MONEY_POLICY, ARCHIVE_RECORDS, *(t.config for t in TOOLS.values() if t.config),
)  # fmt: skip
LONGEST_ATTEMPT: timedelta = max(options.get("start_to_close_timeout") or timedelta(0) for options in ALL)
"""The longest one attempt of any activity may run: a model call's two minutes. A worker told to stop gives its
activities in flight this long to finish (``AGENT_GRACEFUL_SHUTDOWN_SECONDS``), so a deploy never cuts a call
short that the next worker would then make, and pay for, again."""
