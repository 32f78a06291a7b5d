"""A new ticket runs the workflow's one path: it asks Temporal for no patch, so its history holds no patch marker
and no ``TemporalChangeVersion`` upsert (sdk-core's, beside every marker), events and a Cloud Action fewer a
ticket. A ticket moves to a new build at continue-as-new, so no build replays another's history and no change
needs a patch (``docs/changing-workflow-code.md``)."""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from activities.contracts.names import APPROVE_SIGNAL
from activities.contracts.ticket import Status
from tests.support.harness import Harness
from tests.support.history import events
from tests.support.tickets import answer, ticket
from tests.support.waits import awaiting

CHANGE_VERSION = "TemporalChangeVersion"


def patch_markers(history: list[HistoryEvent]) -> list[HistoryEvent]:
    return [
        e
        for e in history
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
        and e.marker_recorded_event_attributes.marker_name == "core_patch"
    ]


def change_version_upserts(history: list[HistoryEvent]) -> list[HistoryEvent]:
    return [
        e
        for e in history
        if e.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
        and CHANGE_VERSION in e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
    ]


async def test_a_new_ticket_refunded_without_a_person_records_no_patch_marker_and_no_change_version(
    agent: Harness,
) -> None:
    async with agent.worker():
        handle = await agent.start(ticket(approval_limit_cents=10_000))
        outcome = await handle.result()
    history = await events(handle)

    assert outcome.status is Status.RESOLVED
    assert [r.amount_cents for r in outcome.refunds] == [4900]
    assert patch_markers(history) == []
    assert change_version_upserts(history) == []
    assert any(e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED for e in history), "its local activities' are"


async def test_a_new_ticket_that_waits_for_a_person_records_no_patch_marker_and_no_change_version(
    agent: Harness,
) -> None:
    """The approval's path (the gate, the ledger looked up again, the settlement in the memo) asks no patch
    either; its only upserts are the request's own search attribute."""
    async with agent.worker():
        handle = await agent.start(ticket())
        await awaiting(handle, 4900)
        await handle.signal(APPROVE_SIGNAL, answer(4900))
        outcome = await handle.result()
    history = await events(handle)

    assert outcome.status is Status.RESOLVED
    assert patch_markers(history) == []
    assert change_version_upserts(history) == []
    assert len(await events(handle, EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES)) == 2
