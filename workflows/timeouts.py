"""How long each activity may take and how often it is retried: one attempt config per activity name, and a
default for any other.

Temporal owns every retry: model and tool clients inside activities run with their own retries off.
The numbers follow from what each call is and from what a crash must cost:

- The activities that wait on something outside the worker heartbeat, with a heartbeat timeout of a few
  seconds (``activities.heartbeat``): ``think`` and ``summarize`` while the model answers, the tools and the
  settling of a payment while the shop, the payment provider or the mail server answers, ``audit``,
  ``audited`` and ``archive_records`` while the business database or the content store does. A worker killed in
  the middle of one is noticed in seconds, so start-to-close timeouts can be sized for the work (two minutes
  for a model call) without making a crash cost two minutes.
- ``money_policy`` and ``vouched`` do not heartbeat: they answer at once from what the worker holds in memory,
  so a start-to-close timeout as short as the others' heartbeat timeout bounds them instead, and a worker
  killed during one costs no more than elsewhere.
- A tool's attempt is its rule's (``activities.tools.Rule``), and the settling of a payment's is the same for
  every tool that pays, so a tool declared with a rule gets the attempt that rule needs: a payment's
  schedule-to-close timeout, for one, stays far below the payment provider's 24-hour key lifetime.
- Attempts are bounded, so a tool that keeps failing is handed to the model instead of retried forever; what
  must happen for the ticket to go on (the audit trail, settling a payment, archiving records) is retried until
  it does.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy
from temporalio.workflow import ActivityConfig, LocalActivityConfig

from activities.contracts.limits import HEARTBEAT_TIMEOUT
from activities.tools import TOOLS, Rule, Tools

HEARTBEAT = HEARTBEAT_TIMEOUT

THINK: ActivityConfig = {
    "start_to_close_timeout": timedelta(minutes=2),
    "heartbeat_timeout": HEARTBEAT,
    "retry_policy": RetryPolicy(
        initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=60), maximum_attempts=8
    ),
}
"""A model call, and a summary of a long conversation, which is one."""

UNTIL_DONE: ActivityConfig = {
    "heartbeat_timeout": HEARTBEAT,
    "start_to_close_timeout": timedelta(seconds=10),
    "retry_policy": RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30)),
}
"""What the ticket cannot go on without: the audit trail must be written, and a payment's outcome must be
settled before the model hears of it. Retried until it is."""

ARCHIVE_RECORDS: ActivityConfig = {
    **UNTIL_DONE,
    "start_to_close_timeout": timedelta(seconds=30),
}
"""The next run carries only the key: the ticket cannot continue until the records are stored."""

AT_ONCE: ActivityConfig = {
    "start_to_close_timeout": HEARTBEAT,
    "retry_policy": RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30)),
}
"""An answer from what the worker holds in memory (the policy in force, a signature checked against its keys):
no heartbeat, and a start-to-close timeout as short as the others' heartbeat timeout."""

READ: ActivityConfig = {
    "heartbeat_timeout": HEARTBEAT,
    "start_to_close_timeout": timedelta(seconds=10),
    "retry_policy": RetryPolicy(
        initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10), maximum_attempts=5
    ),
}
"""A read of the shop's database; a long result is stored by the activity, so it takes no longer to record."""

PAY: ActivityConfig = {
    "start_to_close_timeout": timedelta(seconds=30),
    "schedule_to_close_timeout": timedelta(hours=1),
    "heartbeat_timeout": HEARTBEAT,
    "retry_policy": RetryPolicy(
        initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30), maximum_attempts=5
    ),
}
"""The schedule-to-close timeout is far below the provider's 24-hour key lifetime: a retry that arrived after
the key expired would be a new payment. Attempts are bounded, so a payment that keeps failing is settled and
handed to the model instead of retried forever."""

MAIL_ATTEMPT = timedelta(seconds=30)
"""How long one attempt at an email may take: a mail server's delivery must fit in it."""

MAIL: ActivityConfig = {
    "heartbeat_timeout": HEARTBEAT,
    "start_to_close_timeout": MAIL_ATTEMPT,
    "retry_policy": RetryPolicy(
        initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30), maximum_attempts=5
    ),
}
"""Through a mail server, each attempt is one delivery bounded by ``AGENT_SMTP_TIMEOUT_SECONDS`` (below the
start-to-close timeout, which the setting is checked against), so a slow server ends an attempt with a
retryable answer; a 4xx reply, a refused connection or a timeout is retried here, a 5xx is not."""

BY_RULE: dict[Rule, ActivityConfig] = {Rule.READS: READ, Rule.PAYS: PAY, Rule.MAILS: MAIL}
"""A tool's attempt, by its rule (a tool that waits runs no activity)."""

ATTEMPTS: dict[str, ActivityConfig] = {
    "think": THINK,
    "summarize": THINK,
    "archive_records": ARCHIVE_RECORDS,
    "audit": UNTIL_DONE,
    "audited": UNTIL_DONE,
    "money_policy": AT_ONCE,
    "vouched": AT_ONCE,
    **{tool.name: BY_RULE[tool.rule] for tool in TOOLS.values() if tool.rule in BY_RULE},
    **{tool.payout.settled_by: UNTIL_DONE for tool in TOOLS.values() if tool.payout is not None},
}
"""Every activity the workflow runs, by the name it is registered under."""

LOCAL_UNTIL_DONE: LocalActivityConfig = {
    "start_to_close_timeout": UNTIL_DONE["start_to_close_timeout"],
    "retry_policy": UNTIL_DONE["retry_policy"],
}
"""``UNTIL_DONE`` for a local activity that writes the audit trail (``money_policy`` asked to write the policy's
entry, the closing line): a business database that is down holds the ticket, and
the SDK waits out the longer backoffs on a timer instead of in the task."""


def attempt(name: str, tools: Tools = TOOLS) -> ActivityConfig:
    """The timeouts and retries of the activity registered as ``name``: the table's, else those its tool's
    declaration in ``tools`` gives it (a registry with a tool the product does not have, as a test declares). A
    name neither knows is a mistake in the code, refused by name rather than run on a default nobody chose for it."""
    if name in ATTEMPTS:
        return ATTEMPTS[name]
    for tool in tools.values():
        if tool.name == name and tool.rule in BY_RULE:
            return BY_RULE[tool.rule]
        if tool.payout is not None and tool.payout.settled_by == name:
            return UNTIL_DONE
    raise LookupError(f"no timeouts are declared for the activity {name!r}: add it to workflows.timeouts.ATTEMPTS")


LONGEST_ATTEMPT: timedelta = max(options.get("start_to_close_timeout") or timedelta(0) for options in ATTEMPTS.values())
"""The longest one attempt of any activity may run: a model call's two minutes. A worker told to stop gives its
activities in flight this long to finish (``AGENT_GRACEFUL_SHUTDOWN_SECONDS``), so a deploy never cuts a call
short that the next worker would then make, and pay for, again."""
