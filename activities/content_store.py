"""Where conversation data lives when it is too big for Temporal's history: a content-addressed store.

Temporal records every activity input and result. A conversation sent whole to the model at every step is
recorded once per step, so the history grows with the square of its length, and a 20 KB tool result is
recorded again at every later step. Two things keep it linear:

- a tool result above the worker's inline limit is stored here and the history carries only its key and a
  short preview (``offload``); the ``think`` activity loads it back before the model reads it (``resolve``);
- the ``think`` activity keeps the conversation here as a chain of nodes, each holding the turns one step
  added and the key of the node before it (``save_turns``, ``load_conversation``), and the workflow sends
  only what is new plus the key of the conversation so far.

Two more things live here for the same reason: the records of a ticket's earlier runs, which a run that
continues as new hands over (``archive_records``) instead of carrying them, and the conversation that goes
on after the model summarised its older turns (``summarize``, in ``activities.language_model``).

Keys are ``sha256:<hex>`` of the stored bytes, so they are deterministic: a retried activity that stores
the same content gets the same key, two workers storing it race harmlessly, and a key in a history always
names the same bytes. A node's bytes include the key of the node before it, so a conversation's key names
the whole conversation, as a Merkle chain does. Every read checks the bytes against their key, so bytes
replaced or moved in the backend (by a bug, a bad restore, or someone who can write to the bucket) are
refused, never handed to the model as what the history points to.

The backend is anything with ``put_blob(key, data)`` and ``get_blob(key)`` (``BlobBackend``, the blobs'
port): the business database's ``blobs`` table by default (``activities.business.blobs``, SQLite or
PostgreSQL, shared by every worker that shares the database), or an S3 bucket (``activities.s3_blobs``, with
``AGENT_S3_BUCKET``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections import OrderedDict
from typing import Protocol

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.contracts.archive import RecordsArchive
from activities.contracts.conversation import Message, ToolResultBlock, append_turn
from activities.contracts.world import ToolOutput
from activities.heartbeat import heartbeating

PREVIEW_CHARS = 160
CONVERSATION_CACHE_BYTES = 64 * 1024 * 1024
"""What the worker keeps of whole conversations, so the next step of a ticket reads only its newest node: a
conversation Claude can read is under a megabyte, so this holds the tickets in flight on a busy worker."""


class BlobBackend(Protocol):
    def put_blob(self, key: str, data: bytes) -> None: ...

    def get_blob(self, key: str) -> bytes | None:
        """The bytes stored under ``key``, None if there are none; ``BlobRefusedError`` if what is there must not
        be read as them."""
        ...


class BlobRefusedError(Exception):
    """A backend holds something under a key that it will not hand back as that key's content (a sealed blob
    that fails authentication, an unsealed one where sealing is required). Nothing a retry fixes."""


def content_key(data: bytes) -> str:
    """The key of ``data`` in the store: what it is stored under, and what it is checked against when read."""
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


class ContentStore:
    """Content-addressed blobs over a backend, with a small in-process cache: content under a key never
    changes, so a cached entry can never be stale. Activities call it from several threads at once
    (``asyncio.to_thread``), so the caches change under a lock; the backend is called outside it."""

    def __init__(
        self, backend: BlobBackend, cache_entries: int = 256, conversation_bytes: int = CONVERSATION_CACHE_BYTES
    ) -> None:
        self.backend = backend
        self._cache: OrderedDict[str, bytes] = OrderedDict()
        self._cache_entries = cache_entries
        self._conversations: OrderedDict[str, tuple[tuple[Message, ...], int]] = OrderedDict()
        """Whole conversations by key, every stored result loaded, with their size in bytes (about)."""
        self._conversation_bytes = conversation_bytes
        self._cached_bytes = 0
        self._lock = threading.Lock()

    def conversation(self, key: str) -> tuple[list[Message], int] | None:
        with self._lock:
            cached = self._conversations.get(key)
            if cached is None:
                return None
            self._conversations.move_to_end(key)
        return list(cached[0]), cached[1]

    def remember_conversation(self, key: str, messages: list[Message], size: int) -> None:
        with self._lock:
            if key in self._conversations:
                return
            self._conversations[key] = (tuple(messages), size)
            self._cached_bytes += size
            while self._cached_bytes > self._conversation_bytes and len(self._conversations) > 1:
                _, (_, dropped) = self._conversations.popitem(last=False)
                self._cached_bytes -= dropped

    def put(self, data: bytes) -> str:
        key = content_key(data)
        with self._lock:
            cached = key in self._cache
        if not cached:
            self.backend.put_blob(key, data)
        self._remember(key, data)
        return key

    def get(self, key: str) -> bytes:
        with self._lock:
            data = self._cache.get(key)
        if data is None:
            data = self._read(key)
        self._remember(key, data)
        return data

    def _read(self, key: str) -> bytes:
        """The backend's bytes under ``key``, checked against it. Each failure is one no retry can fix: the
        store lost, or holds something else than, the content a history points to."""
        try:
            data = self.backend.get_blob(key)
        except BlobRefusedError as error:
            raise ApplicationError(
                f"The content store refuses what it holds under {key}: {error}",
                type="ContentRefused",
                non_retryable=True,
            ) from error
        if data is None:
            raise ApplicationError(
                f"The content store has nothing under {key}", type="ContentMissing", non_retryable=True
            )
        if (found := content_key(data)) != key:
            raise ApplicationError(
                f"The content store's bytes under {key} are not what was stored there: they hash to {found}",
                type="ContentCorrupted",
                non_retryable=True,
            )
        return data

    def _remember(self, key: str, data: bytes) -> None:
        with self._lock:
            self._cache[key] = data
            self._cache.move_to_end(key)
            while len(self._cache) > self._cache_entries:
                self._cache.popitem(last=False)


# --- large tool results ---------------------------------------------------------------------------------


def offload(store: ContentStore, text: str, inline_max_bytes: int) -> ToolOutput:
    """The result as it goes into the history: whole if small, else a preview and the key of the whole."""
    data = text.encode()
    if len(data) <= inline_max_bytes:
        return ToolOutput(content=text, size=len(data))
    key = store.put(data)
    preview = f"{text[:PREVIEW_CHARS]}… [{len(data)} bytes in all, stored as {key}]"
    return ToolOutput(content=preview, content_ref=key, size=len(data))


def resolve(store: ContentStore, messages: list[Message]) -> list[Message]:
    """The conversation as the model must read it: every stored tool result loaded in full."""
    return [
        message.model_copy(
            update={
                "content": [
                    block.model_copy(update={"content": store.get(block.content_ref).decode(), "content_ref": None})
                    if isinstance(block, ToolResultBlock) and block.content_ref
                    else block
                    for block in message.content
                ]
            }
        )
        for message in messages
    ]


# --- the conversation, as a chain of nodes ----------------------------------------------------------------


def save_turns(store: ContentStore, previous: str | None, turns: list[Message]) -> str:
    """Store the turns one step added after the conversation ``previous``; return the new conversation's key.
    The node keeps stored results as their keys, so it is as small as the history's record of the step."""
    node = {"previous": previous, "turns": [turn.model_dump(mode="json") for turn in turns]}
    return store.put(json.dumps(node, sort_keys=True, separators=(",", ":")).encode())


def load_conversation(store: ContentStore, key: str | None) -> list[Message]:
    """The conversation a key names, as the model reads it (every stored result loaded), turns merged as
    ``append_turn`` merges them. Walking the chain costs one read per step the first time; every conversation
    this worker stored is cached, so the worker that ran a ticket's last step reads nothing at the next."""
    return _load(store, key)[0]


def extend(store: ContentStore, key: str | None, turns: list[Message]) -> str:
    """Store ``turns`` as one node after the conversation ``key``; return the new conversation's key."""
    messages, size = _load(store, key)
    size += append_loaded(store, messages, turns)
    new_key = save_turns(store, key, turns)
    store.remember_conversation(new_key, messages, size)
    return new_key


def _load(store: ContentStore, key: str | None) -> tuple[list[Message], int]:
    chain: list[list[Message]] = []
    messages: list[Message] = []
    size = 0
    while key is not None:
        cached = store.conversation(key)
        if cached is not None:
            messages, size = cached
            break
        node = json.loads(store.get(key))
        chain.append([Message.model_validate(turn) for turn in node["turns"]])
        key = node["previous"]
    for turns in reversed(chain):
        size += append_loaded(store, messages, turns)
    return messages, size


def append_loaded(store: ContentStore, messages: list[Message], turns: list[Message]) -> int:
    """Append ``turns`` to ``messages`` with their stored results loaded, merged as ``append_turn`` merges
    them; return their size in bytes, about."""
    size = 0
    for turn in resolve(store, turns):
        append_turn(messages, turn.role, list(turn.content))
        size += len(turn.model_dump_json())
    return size


# --- what earlier runs of a ticket did ---------------------------------------------------------------------


def archive_records(store: ContentStore, archive: RecordsArchive) -> str:
    """Store one run's tool calls and usage after those of the runs before; return the archive's key."""
    return store.put(archive.model_dump_json().encode())


def load_records(store: ContentStore, key: str | None) -> RecordsArchive:
    """Every tool call, per-call usage and turn an archive holds, oldest first, as one archive."""
    archives: list[RecordsArchive] = []
    while key is not None:
        archives.append(RecordsArchive.model_validate_json(store.get(key)))
        key = archives[-1].previous
    archives.reverse()
    return RecordsArchive(
        previous=None,
        tool_calls=[c for a in archives for c in a.tool_calls],
        usage=[u for a in archives for u in a.usage],
        turns=[t for a in archives for t in a.turns],
    )


class ContentActivities:
    def __init__(self, store: ContentStore) -> None:
        self.store = store

    @activity.defn(name="archive_records")
    async def archive_records(self, archive: RecordsArchive) -> str:
        """A run's records into the content store, as the ticket continues as new. The key is the content's
        hash, so a retry stores the same bytes under the same key."""
        async with heartbeating():
            return await asyncio.to_thread(archive_records, self.store, archive)
