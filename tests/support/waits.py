"""Bounded polling, and the waits built on it: queries, search attributes and memos are not pushed, so the tests,
benchmarks and scripts ask again until the answer comes. Every wait has a bound and names what it waited for
when the bound passes; none is a fixed sleep standing in for a condition."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from activities.contracts.approvals import ApprovalRequest
from activities.contracts.names import AWAITING_APPROVAL_QUERY, TURNS_QUERY, WAITING_FOR_MEMO
from activities.contracts.ticket import TicketState, Turn, Waiting
from tests.support.tickets import Handle
from workflows.approval_gate import AWAITING_APPROVAL
from workflows.waits import TICKET_STATE

T = TypeVar("T")


async def poll(
    check: Callable[[], Awaitable[T | None]], *, timeout: float = 60, interval: float = 0.1, what: str = "a condition"
) -> T:
    """Call ``check`` every ``interval`` seconds until it returns something truthy, and return that.

    After ``timeout`` seconds, raises ``TimeoutError`` naming ``what``. A ``TimeoutError`` of ``check``'s own
    (a command that hung) passes through as it is."""
    deadline = asyncio.timeout(timeout)
    try:
        async with deadline:
            while True:
                value = await check()
                if value:
                    return value
                await asyncio.sleep(interval)
    except TimeoutError:
        if deadline.expired():
            raise TimeoutError(f"waited {timeout} s for {what}") from None
        raise


async def waiting_request(handle: Handle) -> ApprovalRequest | None:
    """The approval request the run's query reports, or None."""
    request: ApprovalRequest | None = await handle.query(
        AWAITING_APPROVAL_QUERY,
        result_type=ApprovalRequest | None,  # type: ignore[arg-type]
    )
    return request


async def awaiting(handle: Handle, amount: int | None, timeout: float = 20) -> ApprovalRequest | None:
    """Wait until the run's approval query reports a request for ``amount`` (or none, for None), and return it."""

    async def reported() -> tuple[ApprovalRequest | None] | None:
        request = await waiting_request(handle)
        return (request,) if (request.amount_cents if request else None) == amount else None

    (request,) = await poll(reported, timeout=timeout, interval=0.05, what=f"the approval query to report {amount}")
    return request


async def waiting_amount(handle: Handle) -> int | None:
    """The amount the run waits for a person to approve, from its search attribute: no worker needed."""
    description = await handle.describe()
    return description.typed_search_attributes.get(AWAITING_APPROVAL)


async def waiting_for_customer(handle: Handle, turns: int) -> None:
    """Wait until the ticket has answered ``turns`` turns and waits for the customer."""

    async def waits() -> bool:
        description = await handle.describe()
        done: list[Turn] = await handle.query(TURNS_QUERY, result_type=list[Turn])
        return len(done) == turns and description.typed_search_attributes.get(TICKET_STATE) == "waiting_for_customer"

    await poll(waits, timeout=30, what=f"turn {turns} to be answered and the customer waited for")


async def waiting_for_event(handle: Handle) -> Waiting:
    """Wait until the ticket waits for news about an order, and return what it waits for (its memo)."""

    async def waits() -> Waiting | None:
        description = await handle.describe()
        if description.typed_search_attributes.get(TICKET_STATE) != TicketState.WAITING_FOR_EVENT.value:
            return None
        waiting: Waiting = await description.memo_value(WAITING_FOR_MEMO, type_hint=Waiting)
        return waiting

    return await poll(waits, timeout=30, what="the ticket to wait for an event")
