"""The names a caller types: the workflow and its task queue, its signals, updates and queries, its search
attributes and memo fields. Read by anyone who drives a ticket (the ``temporal`` CLI, the operator commands, the
inbox) as much as by the workflow. A name is part of every recorded history and every script that uses it."""

from __future__ import annotations

from typing import Literal

WORKFLOW_NAME = "SupportAgent"
TASK_QUEUE = "support-agent"
APPROVE_SIGNAL = "approve"
AWAITING_APPROVAL_QUERY = "awaiting_approval_of"
USAGE_QUERY = "usage"
AWAITING_APPROVAL_ATTRIBUTE = "AwaitingApprovalCents"
APPROVAL_REQUEST_MEMO = "approval_request"
"""The memo field that holds the request waiting (``ApprovalRequest``), for as long as it waits: visibility
shows it with no worker running, so ``agent-worker approve`` can send its id when no worker answers a query."""
CUSTOMER_MESSAGE = "customer_message"
"""The customer's reply to an open ticket: a Workflow Update (refused at once when the ticket takes no more),
and a signal of the same name for relays that can only signal."""
MAIL_BOUNCED = "mail_bounced"
"""The customer's mail server refused the desk's email for good (``MailBounce``): the ticket records it and sends
that address no more mail."""
VERIFY_SENDER = "verify_sender"
"""A person vouches for the ticket's customer (``SenderVerification``): a Workflow Update, so the inbox hears the
ticket took it."""
ORDER_EVENT_SIGNAL = "order_event"
"""What another system reports about an order (a carrier's scan, a payment webhook), relayed as a signal."""
WAKE_SIGNAL = "wake"
"""Wakes a waiting ticket, and does nothing else: woken, a ticket whose Worker Deployment has a new target build for
it moves there (``agent-worker rollout move`` sends it to the waiting tickets of a build being retired)."""
TURNS_QUERY = "turns"
TICKET_STATE_ATTRIBUTE = "TicketState"
"""What an open ticket waits for, while it waits (``TicketState``): listed with no worker running."""
WAITING_FOR_MEMO = "waiting_for"
"""The memo field that says what a waiting ticket waits for, and until when (``Waiting``)."""
SETTLED_MEMO = "settled"
"""The memo field that says what the money did for each approved request of the ticket's latest ones
(``Settlement``s, newest last): what ``approve``, ``show`` and the inbox read, with no worker needed."""
PAYMENTS_UNUSABLE = "PaymentsUnusable"
"""The error type of a tool whose payment provider refuses the worker's credentials: the ticket ends as failed,
for a person, since no tool call can succeed until the worker's settings are fixed."""
POLICY_CHANGED = "PolicyChanged"
"""The error type of a payout activity refusing a payout without a person that was judged by another money policy
than the booking worker's (``RefundRequest.policy``): nothing was paid, and the workflow reads the policy again."""
NEEDS_APPROVAL = "NeedsApproval"
"""The error type of ``issue_refund`` refusing a refund without a person that would pass one of the limits across
tickets (``Limits``): nothing was paid, and the refund may still be made with a person's approval. The message
names the limit met, with figures in the order's currency ("ann@example.com's refunds without a person in the last
24 hours: USD 57.00 of USD 50.00 with this one"; several, joined by "; "), for the approval request to cite; the
error's one detail lists the ``Limits`` fields met (``["customer_cents_per_day"]``)."""
SEARCH_ATTRIBUTES: dict[str, Literal["Int", "Keyword"]] = {
    AWAITING_APPROVAL_ATTRIBUTE: "Int",
    TICKET_STATE_ATTRIBUTE: "Keyword",
}
"""The search attributes the workflow sets, by type: a namespace must have them before a ticket waits."""
MAIL_MEMO = "mail"
"""The memo field of a ticket started by mail (``agent_worker.mail_in.MailOrigin``), written once at its start: the
message it came from, its sender, its attachments by name and size, and the ticket it follows, if any."""
