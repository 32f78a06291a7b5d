"""What a request's page offers the person who signed in, and what it tells them of the policy it waits under.

The page mirrors the ``approve`` update's validator (``workflows.approval_rules``), in the same order, so that a
person is not offered a button whose answer the ticket would refuse, and reads why instead. The page decides
nothing: the validator judges every answer that reaches it, a crafted form's included, and the page may be a
moment behind the ticket (it shows what the memo and history said when it was drawn).
"""

from __future__ import annotations

from dataclasses import dataclass

from activities.contracts.approvals import ApprovalRequest
from activities.contracts.fields import amount, same_address


@dataclass(frozen=True)
class Standing:
    """Why this person may not answer the request at all, and why they may not approve it; None where they may."""

    answer: str | None = None
    approve: str | None = None


def standing(request: ApprovalRequest, name: str) -> Standing:
    """What the page lets ``name`` do with ``request``, checked as the validator checks: the approvers (under roles,
    only those whose role reaches the amount), the customer themselves, an approval already given."""
    if request.approvers and not request.among(name, request.approvers):
        asked = amount(request.amount_cents, request.currency)
        no = (
            f"You ({name}) are not among this ticket's approvers for a {request.payout} of {asked} "
            f"({', '.join(request.approvers)}), so it would not take your answer."
        )
        return Standing(no, no)
    if request.customer_email and same_address(name, request.customer_email):
        payout = request.payout
        no = f"You ({name}) are this {payout}'s customer, and nobody answers a request for a {payout} to themselves."
        return Standing(no, no)
    if request.among(name, request.approved_by):
        done = len(request.approved_by)
        return Standing(
            approve=f"You ({name}) approved this request already ({done} of {request.approvals_needed}): the next "
            "approval must be another person's. You may still decline it."
        )
    return Standing()


def progress(request: ApprovalRequest) -> str:
    """How far the request's approvals have come: "needs 2 approvals", "1 of 2 approvals, by ann"."""
    needed = request.approvals_needed
    if request.approved_by:
        return f"{len(request.approved_by)} of {needed} approvals, by {', '.join(request.approved_by)}"
    return f"needs {needed} approval{'s' if needed != 1 else ''}"


def what_yours_does(request: ApprovalRequest) -> str:
    """What an approval from this person would do: decide, or count as one of several, or be the last of them."""
    if request.approvals_needed <= 1:
        return "the first answer decides"
    nth = len(request.approved_by) + 1
    if nth < request.approvals_needed:
        return f"yours would be {nth} of {request.approvals_needed}: nothing is paid until another person approves"
    return f"yours would be {nth} of {request.approvals_needed}: it pays the {request.payout}"
