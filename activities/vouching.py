"""Answers a web server vouches for: how the worker tells an authenticated approval from a claimed one.

An ``approve`` signal says who approved, and anyone who may signal the workflow can say anything. The approval
inbox authenticates the person (single sign-on, or a password) and then vouches for the answer: it signs the
answer, bound to the ticket's workflow and the request it answers, with a key only it and the workers hold
(``AGENT_WEB_APPROVAL_KEYS``). The workflow has the signature checked by an activity (workflow code may not
read the key) before the answer counts, and records it as ``channel: web``; an answer whose signature does not
check releases nothing. Several keys may be listed, so the key can be rotated: the inbox signs with the last.

HMAC-SHA256 over a canonical JSON of exactly the fields that decide something: a signature cannot be moved to
another ticket, another request, another amount, another decision or another person.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence

from activities.contracts.approvals import VouchedApproval


def message(workflow_id: str, answer: VouchedApproval) -> bytes:
    """What is signed: the ticket's workflow and every field of the answer that decides something."""
    fields = {
        "workflow_id": workflow_id,
        "request_id": answer.request_id,
        "amount_cents": answer.amount_cents,
        "approved": answer.approved,
        "approver": answer.approver,
        **({"reason": answer.reason} if answer.reason else {}),  # signed when given; absent, as before reasons
    }
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def sign(key: bytes, workflow_id: str, answer: VouchedApproval) -> str:
    return hmac.new(key, message(workflow_id, answer), hashlib.sha256).hexdigest()


def vouched(keys: Sequence[bytes], workflow_id: str, answer: VouchedApproval) -> bool:
    """Whether one of ``keys`` signed this answer for this ticket."""
    return any(hmac.compare_digest(sign(key, workflow_id, answer), answer.signature) for key in keys)
