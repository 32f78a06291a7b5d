"""Tickets and approvals as callers send them: plain JSON, the way ``temporal workflow start --input`` and
``temporal workflow signal --input`` send them, so the tests go through the same decoding as a real caller."""

from __future__ import annotations

import uuid
from typing import Any

from temporalio.client import Client, WorkflowHandle

from activities.contracts.names import WORKFLOW_NAME
from activities.contracts.policy import MoneyPolicy
from activities.contracts.ticket import Outcome

Handle = WorkflowHandle[Any, Outcome]


def ticket(
    question: str = "My parcel for order A-1001 never arrived", email: str = "ann@example.com", **options: Any
) -> dict[str, Any]:
    """A ticket as a caller sends it: plain JSON, the way ``temporal workflow start --input`` does. It names the
    product's default approval limit, 20.00, unless told another (``tests.support.desk`` says why)."""
    return {
        "ticket_id": f"T-{uuid.uuid4().hex[:8]}",
        "question": question,
        "customer_email": email,
        "options": {"approval_limit_cents": DEFAULT_LIMIT_CENTS, **options},
    }


DEFAULT_LIMIT_CENTS = MoneyPolicy().approval.limit_cents


def answer(amount: int, *, approved: bool = True, approver: str = "ann", **extra: Any) -> dict[str, Any]:
    """An ``approve`` signal's payload, as ``temporal workflow signal --input`` sends it."""
    return {"amount_cents": amount, "approved": approved, "approver": approver, **extra}


async def start(client: Client, task_queue: str, raw_ticket: Any, *, prefix: str = "ticket") -> Handle:
    """Start a ticket under a fresh workflow id (``<prefix>-<uuid>``) on ``task_queue``."""
    return await client.start_workflow(
        WORKFLOW_NAME, raw_ticket, id=f"{prefix}-{uuid.uuid4()}", task_queue=task_queue, result_type=Outcome
    )
