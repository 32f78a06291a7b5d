"""Where conversation data lives when it is too big for Temporal's history: a content-addressed store.

Temporal records every activity input and result. A conversation sent whole to the model at every step is
recorded once per step, so the history grows with the square of its length, and a 20 KB tool result is
recorded again at every later step. Two things keep it linear:

- a tool result above the worker's inline limit is stored here and the history carries only its key and a
  short preview (``offload``); the ``think`` activity loads it back before the model reads it (``resolve``);
- the ``think`` activity keeps the conversation here as a chain of nodes, each holding the turns one step
  added and the key of the node before it (``save_turns``, ``load_conversation``), and the workflow sends
  only what is new plus the key of the conversation so far.

Keys are ``sha256:<hex>`` of the stored bytes, so they are deterministic: a retried activity that stores
the same content gets the same key, two workers storing it race harmlessly, and a key in a history always
names the same bytes. A node's bytes include the key of the node before it, so a conversation's key names
the whole conversation, as a Merkle chain does.

The backend is anything with ``put_blob(key, data)`` and ``get_blob(key)``: the business store's ``blobs``
table by default (SQLite or PostgreSQL, shared by every worker that shares the store), or an S3 bucket
(``activities.s3_blobs``, with ``AGENT_S3_BUCKET``).
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from typing import Protocol

from temporalio.exceptions import ApplicationError

from activities.contracts import Message, ToolOutput, ToolResultBlock, append_turn

PREVIEW_CHARS = 160
CONVERSATIONS_CACHED = 64


class BlobBackend(Protocol):
    def put_blob(self, key: str, data: bytes) -> None: ...

    def get_blob(self, key: str) -> bytes | None: ...


class ContentStore:
    """Content-addressed blobs over a backend, with a small in-process cache: content under a key never
    changes, so a cached entry can never be stale."""

    def __init__(self, backend: BlobBackend, cache_entries: int = 256) -> None:
        self.backend = backend
        self._cache: OrderedDict[str, bytes] = OrderedDict()
        self._cache_entries = cache_entries
        self.conversations: OrderedDict[str, tuple[Message, ...]] = OrderedDict()
        """Whole conversations by key, so the next step of a ticket reads only its newest node."""

    def remember_conversation(self, key: str, messages: list[Message]) -> None:
        self.conversations[key] = tuple(messages)
        self.conversations.move_to_end(key)
        while len(self.conversations) > CONVERSATIONS_CACHED:
            self.conversations.popitem(last=False)

    def put(self, data: bytes) -> str:
        key = f"sha256:{hashlib.sha256(data).hexdigest()}"
        if key not in self._cache:
            self.backend.put_blob(key, data)
        self._remember(key, data)
        return key

    def get(self, key: str) -> bytes:
        data = self._cache.get(key)
        if data is None:
            data = self.backend.get_blob(key)
            if data is None:
                # Nothing a retry can fix: the store lost content a history points to.
                raise ApplicationError(f"The content store has nothing under {key}", type="ContentMissing",
                                       non_retryable=True)  # fmt: skip
        self._remember(key, data)
        return data

    def _remember(self, key: str, data: bytes) -> None:
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
    """Store the turns one step added after the conversation ``previous``; return the new conversation's key."""
    node = {"previous": previous, "turns": [turn.model_dump(mode="json") for turn in turns]}
    return store.put(json.dumps(node, sort_keys=True, separators=(",", ":")).encode())


def load_conversation(store: ContentStore, key: str | None) -> list[Message]:
    """The conversation a key names, turns merged as ``append_turn`` merges them. Walking the chain costs one
    read per step the first time; the snapshot of every key met is cached, so a worker that ran the previous
    step reads only the newest node."""
    chain: list[list[Message]] = []
    base: list[Message] = []
    while key is not None:
        cached = store.conversations.get(key)
        if cached is not None:
            base = list(cached)
            break
        node = json.loads(store.get(key))
        chain.append([Message.model_validate(turn) for turn in node["turns"]])
        key = node["previous"]
    messages = base
    for turns in reversed(chain):
        for turn in turns:
            append_turn(messages, turn.role, list(turn.content))
    return messages


def extend(store: ContentStore, key: str | None, turns: list[Message]) -> tuple[str, list[Message]]:
    """Store ``turns`` as one node after the conversation ``key``; return the new key and the conversation."""
    messages = load_conversation(store, key)
    for turn in turns:
        append_turn(messages, turn.role, list(turn.content))
    new_key = save_turns(store, key, turns)
    store.remember_conversation(new_key, messages)
    return new_key, messages
