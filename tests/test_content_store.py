"""The content store: conversations as chains of nodes, large results by key, and the worker's cache of both."""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError

from activities.business import Business
from activities.content_store import (
    BlobBackend,
    ContentStore,
    archive_records,
    extend,
    load_conversation,
    offload,
)
from activities.contracts.archive import RecordsArchive
from activities.contracts.conversation import (
    Message,
    StepUsage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    UsageReport,
)
from activities.contracts.ticket import Outcome, Status, ToolCallRecord
from tests.support.outcomes import complete
from tests.support.stores import MemoryBlobs


class CountingBackend:
    """The business store's blobs, counting reads: what a worker pays for a cache miss."""

    def __init__(self, blobs: BlobBackend) -> None:
        self.blobs = blobs
        self.reads = 0

    def put_blob(self, key: str, data: bytes) -> None:
        self.blobs.put_blob(key, data)

    def get_blob(self, key: str) -> bytes | None:
        self.reads += 1
        return self.blobs.get_blob(key)


def step(store: ContentStore, n: int, size: int) -> list[Message]:
    """One step's turns: a tool call and its result, stored out of band when above 1 KB."""
    result = offload(store, f"event log {n} " + "x" * size, inline_max_bytes=1024)
    call = ToolUseBlock(id=f"toolu_{n}", name="order_events", input={"order_id": f"L-{n:05d}"})
    block = ToolResultBlock(tool_use_id=call.id, content=result.content, content_ref=result.content_ref)
    return [Message(role="assistant", content=[call]), Message(role="user", content=[block])]


def results(messages: list[Message]) -> list[str]:
    return [b.content for m in messages for b in m.content if isinstance(b, ToolResultBlock)]


def test_a_conversation_reads_back_whole_on_a_worker_that_never_saw_it(store: Business) -> None:
    writer = ContentStore(store.blobs)
    key = extend(writer, None, [Message.user_text("Where are my parcels?")])
    for n in range(1, 6):
        key = extend(writer, key, step(writer, n, 5000))

    reader = ContentStore(CountingBackend(store.blobs))
    cold = load_conversation(reader, key)
    assert cold == load_conversation(writer, key)
    assert [len(r) for r in results(cold)] == [len(f"event log {n} ") + 5000 for n in range(1, 6)]
    assert all(b.content_ref is None for m in cold for b in m.content if isinstance(b, ToolResultBlock))
    assert [m.role for m in cold] == ["user", *["assistant", "user"] * 5]


def test_the_worker_that_stored_the_last_step_reads_nothing_to_take_the_next(store: Business) -> None:
    backend = CountingBackend(store.blobs)
    content = ContentStore(backend, cache_entries=1)  # results evicted at once: only the conversation cache helps
    key = extend(content, None, [Message.user_text("Where are my parcels?")])
    for n in range(1, 20):
        key = extend(content, key, step(content, n, 5000))
    backend.reads = 0
    key = extend(content, key, step(content, 20, 5000))
    assert len(results(load_conversation(content, key))) == 20
    assert backend.reads == 0


def test_the_conversation_cache_is_bounded_by_bytes_and_falls_back_to_the_store(store: Business) -> None:
    backend = CountingBackend(store.blobs)
    content = ContentStore(backend, cache_entries=1, conversation_bytes=50_000)
    keys = []
    for ticket in range(5):
        key = extend(content, None, [Message.user_text(f"ticket {ticket}")])
        keys.append(extend(content, key, step(content, ticket, 20_000)))
    backend.reads = 0
    assert len(results(load_conversation(content, keys[-1]))) == 1
    assert backend.reads == 0, "the newest conversation is cached"
    assert len(results(load_conversation(content, keys[0]))) == 1
    assert backend.reads > 0, "the oldest was evicted, and reads back from the store"


def test_the_same_turns_after_the_same_conversation_get_the_same_key(store: Business) -> None:
    """A retried think stores the same node under the same key, wherever it runs."""
    first, second = ContentStore(store.blobs), ContentStore(store.blobs)
    question = [Message.user_text("Where are my parcels?")]
    assert extend(first, None, question) == extend(second, None, question)
    key = extend(first, None, question)
    assert extend(first, key, [Message(role="assistant", content=[TextBlock(text="On their way.")])]) != key


def test_a_key_the_store_does_not_hold_fails_without_retries(store: Business) -> None:
    with pytest.raises(ApplicationError) as raised:
        load_conversation(ContentStore(store.blobs), "sha256:" + "0" * 64)
    assert raised.value.type == "ContentMissing"
    assert raised.value.non_retryable


def test_bytes_replaced_in_the_backend_are_refused_without_retries_naming_the_key() -> None:
    """A key names the bytes a history points to: other bytes under it are never handed to the model."""
    backend = MemoryBlobs()
    key = ContentStore(backend).put(b'{"order_id": "A-1001", "amount_cents": 4900}')
    backend.blobs[key] = b'{"order_id": "A-1001", "amount_cents": 490000}'
    with pytest.raises(ApplicationError) as raised:
        ContentStore(backend).get(key)
    assert raised.value.type == "ContentCorrupted"
    assert raised.value.non_retryable
    assert key in raised.value.message


def test_records_archived_run_by_run_come_back_in_order(store: Business) -> None:
    content = ContentStore(store.blobs)

    def record(n: int) -> ToolCallRecord:
        return ToolCallRecord(
            step=n, tool_use_id=f"toolu_{n}", name="lookup_order", input={}, result="", is_error=False
        )

    def usage(n: int) -> StepUsage:
        return StepUsage(step=n, model="scripted", usage=Usage(input_tokens=n))

    key = None
    for run in range(3):  # three runs of two steps each continued as new
        steps = (2 * run + 1, 2 * run + 2)
        archive = RecordsArchive(previous=key, tool_calls=[record(n) for n in steps], usage=[usage(n) for n in steps])
        key = archive_records(content, archive)
    outcome = Outcome(
        ticket_id="T-1",
        status=Status.RESOLVED,
        answer="done",
        steps=7,
        model_calls=7,
        tool_calls=[record(7)],
        usage=UsageReport(total=Usage(input_tokens=28), steps=[usage(7)]),
        archive_ref=key,
    )
    whole = complete(ContentStore(store.blobs), outcome)
    assert [c.step for c in whole.tool_calls] == [1, 2, 3, 4, 5, 6, 7]
    assert [u.usage.input_tokens for u in whole.usage.steps] == [1, 2, 3, 4, 5, 6, 7]
    assert whole.archive_ref is None
    assert complete(content, whole) == whole
