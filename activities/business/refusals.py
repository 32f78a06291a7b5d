"""What the outside systems refuse: requests that asking again will not change.

They belong to the ports, not to any one implementation: the embedded ones raise them, and an adapter for a
real provider translates its own refusals into the same ones (Stripe, for one, answers a key reused for
another request with an ``idempotency_error``, and refuses a refund above what is left of the charge). The
tool activities turn each into a non-retryable ``ApplicationError`` that the model and a person can act on.
"""

from __future__ import annotations


class OrderNotFoundError(LookupError):
    """No such order: asking again will not make one appear."""


class IdempotencyConflictError(ValueError):
    """A key was reused for a different request, which Stripe refuses rather than guess."""


class RefundExceedsChargeError(ValueError):
    """The refund would take the order's refunded total above what was charged."""


class KeyClosedError(ValueError):
    """Reconciliation settled this key as never paid: a late attempt under it must not pay."""


class MailRefusedError(ValueError):
    """The mail server refused the email for good (a 5xx reply: no such mailbox, a sender it will not relay
    for, a message it will not take): sending it again as it is will be refused again."""


class PaymentRefusedError(ValueError):
    """The payment provider refused the request for good, for a reason of its own (Stripe's other 4xx answers,
    in its words): asking again as it is will be refused again."""


class PaymentsUnusableError(PermissionError):
    """The payment provider refuses this worker's credentials (a revoked or wrong API key, a restricted key
    without the permission): no ticket can refund until a person fixes the worker's settings."""


class PolicyChangedError(Exception):
    """A payout without a person was judged by another money policy than the one in force where it is booked (the
    policy changed since the ticket last read it, or the workers disagree while a new policy rolls out): nothing
    was paid, and the ticket reads the policy again and judges the payout again. Checked after the key is claimed,
    so a repeat of a payout booked before is the first one's receipt, whatever policy is in force now."""

    def __init__(self, judged_by: str, in_force: str) -> None:
        super().__init__(f"judged by money policy {judged_by}, where {in_force} is in force: nothing was paid")


class NeedsApprovalError(Exception):
    """A refund without a person would pass one of the limits across tickets (``activities.contracts.policy.Limits``)
    that the ledger counts where refunds are booked: nothing was paid. It is not a no: a person may approve it,
    and the approved refund is neither checked nor counted. The message says which limit it met, with figures in
    the order's currency ("ann@example.com's refunds without a person in the last 24 hours: USD 57.00 of USD 50.00
    with this one"), for the approval request to cite; ``met`` names the ``Limits`` fields it met, in the
    message's order."""

    def __init__(self, reasons: list[str], met: list[str]) -> None:
        super().__init__("; ".join(reasons))
        self.met = tuple(met)
