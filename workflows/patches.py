"""Every patch of the workflow in one place: what it guards, and when it may go.

A patch (``workflow.patched``) lets new code take a new path for new runs while runs started before it replay
the old path they recorded. Each lives here, under the name the code tests it by, with what the old path was.

**Retiring one.** A patch may go once no open run was started before its release, since only those can replay
the old path. How long that takes is bounded by how long a ticket can stay open: its SLA (at most ten years,
one day by default) gates only its start, so the bound is the longest wait a run can make without a model call,
an approval's timeout (at most 90 days) or a reply window (at most 90 days), chained over the ticket's turns.
In practice: list the open runs started before the release
(``temporal workflow list --query "ExecutionStatus = 'Running' AND StartTime < '<release>'"``); when there are
none, replace ``workflow.patched(P)`` with ``workflow.deprecate_patch(P)`` and the new path alone, release, and
after one more such wait remove the call. The stored histories that record the old path go with it.
"""

from __future__ import annotations

from enum import StrEnum


class Patch(StrEnum):
    RECONCILE_TIMED_OUT_REFUNDS = "reconcile-timed-out-refunds"
    """A keyed refund whose outcome is unknown is settled with the provider before the model hears of it. Runs
    before it told the model "the tool failed"."""

    CLOSING_AUDIT = "audit-ticket-close"
    """Tickets the agent handled write a closing audit entry (status, steps, amount refunded)."""

    APPROVER_CHECK = "approver-check"
    """Only the ticket's approvers (or the worker's default ones) may release a refund. Runs already waiting
    before it keep accepting anyone, as they were promised."""

    LINEAR_HISTORY = "linear-history"
    """``think`` gets only what is new since the last step and the key of the conversation so far, and the ticket
    continues as a new run after ``continue_as_new_after_steps`` model calls or when the server suggests it. Runs
    before it send the whole conversation every step."""

    SUMMARIZE_OLD_TURNS = "summarize-old-turns"
    """A conversation whose last model call read more than ``summarize_above_tokens`` is summarised first."""

    ARCHIVE_RECORDS = "archive-records"
    """A run that continues as new hands its tool calls and per-call usage to the content store and carries only
    the archive's key. Runs before it carried them inline."""

    APPROVAL_REQUESTS = "approval-requests"
    """Requests have ids and deadlines that answers are held to, the first valid answer decides, every answer is
    audited, and the search attribute is cleared before the ticket continues as new. Runs waiting before it keep
    the last-answer-wins rules they were started under (``ApprovalDesk.strict``)."""

    OWN_ORDERS = "own-orders-only"
    """Tools act only on the ticket's customer's orders, looked up first where the model did not."""

    REFUND_PARTS = "refund-parts"
    """Per-order refund keys name the part (``refund:<ticket>/<order>/<n>``) and further parts need a person.
    Runs before it keep ``refund:<order>``."""

    CANCEL_CLEANLY = "cancel-cleanly"
    """A cancel ends the ticket as ``cancelled`` with an audit entry, and waits for a refund in flight to end paid
    or refused for good. Runs cancelled before it went on as "the tool failed" or ended as failed."""

    KEYS_PER_TICKET = "keys-per-ticket"
    """Refunds and emails are keyed by the ticket's id, not the workflow that runs it, so the same ticket started
    twice pays and mails once. Runs before it keyed by workflow id and first run id."""

    CUSTOMER_REPLIES = "customer-replies"
    """An answered ticket stays open for replies, and replies taken while it worked start a new turn. Only tickets
    with a reply window or a reply meet it; runs before it closed with their first answer."""

    EVENT_WAITS = "event-waits"
    """The ``wait_for_delivery_scan`` tool (its declaration's ``since``). Runs before it had no such tool."""

    SHIPPING_STATUS = "shipping-status"
    """The ``shipping_status`` tool (its declaration's ``since``). Runs before it had no such tool."""

    AUDIT_KEYS_PER_RUN = "audit-keys-per-run"
    """Audit entries are keyed by the run that writes them, not the ticket's first run, which a reset keeps: keyed
    so, a reset run's entries were taken for the failed run's and dropped."""

    UNUSABLE_PROVIDER = "unusable-provider"
    """A payment provider that refuses the worker's credentials ends the ticket as failed, for a person, instead
    of the model reading the error and telling the customer. Only tickets that meet such a provider meet it."""

    RELAUNCHES_REFUSED = "relaunches-refused"
    """A ticket started with a cron schedule or a retry policy fails at once as invalid input, since the server
    would start it again with its caller's arguments, a forged carried state included; and an approval a run
    carries over counts only if the audit trail the run it continues wrote holds it. Runs before it believed
    the carried state of any run the server marked as continued."""

    OPERATOR_POLICY = "operator-policy"
    """The money rules come from the operator's policy (the ``money_policy`` activity), which a ticket's options
    may only tighten; the policy's digest is audited and in the outcome, and a ticket whose model calls cost past
    the policy's budget is handed to a person. Runs before it took the limit, timeout, approvers and safeguard
    switches from the ticket's options as they were."""
    BOUNDED_TOTALS = "bounded-totals"
    """Every total a run keeps within a budget (``activities.contracts.limits``): turns, tool calls and per-call
    usage past theirs go to the content store (``Outcome.archive_ref``) while the run goes on, an answer or a tool
    call's input past its size is recorded as a head and its size, notes about what could not be taken are counted
    past a number, rejected answers to approvals past a number are audited but not listed, and a reply signalled
    past the pending replies' budget is not taken. Runs before it kept every list whole, however long, until a
    payload outgrew Temporal's limit and every workflow task failed."""

    WAITS_CONTINUE = "waits-continue"
    """A wait for an event about an order continues as new when the server suggests it, as the approval and reply
    waits did, and every wait does too at a count of history events (``WAIT_EVENTS_BEFORE_CONTINUING``). Runs
    before it waited for an event in one run however long its history grew, and other waits only on the server's
    suggestion."""

    CURRENCY_NAMED = "currency-named"
    """Amounts the model and people read name the order's currency, as looked up (``USD 49.00``): the looked-up
    order the model reads says it, and so do a refund's result, why a refund waits, and the approval request.
    Runs before it wrote bare numbers (``49.00``), and showed the model orders without their currency."""

    ANSWER_ROWS = "answer-rows"
    """Each answer that decides a request, or is one approval of several, goes to the audit trail with a row for
    auditors beside its entry (``AnsweredRequest``: who, how, when, what, which order and policy), which the
    export reads by date after Temporal has deleted the history. Runs before it wrote the entry's words alone."""
