"""Encrypting every payload the worker and its clients write, so history holds no customer's words.

Temporal keeps every workflow input, activity input and result in its history: without this, a customer's
email address and message sit in plain text for anyone who can read the namespace. The codec encrypts each
payload with AES-GCM before it leaves the process and decrypts it on the way in, so the server stores only
ciphertext. The key id travels in the payload's metadata: after a rotation, payloads written under an old
key still decrypt (keep the old key configured) while new ones use the newest.

The worker, every client (CLI commands, the demo, tests) and the replayer must use the same codec; the
codec server (``agent_worker.codec_server``) lets the Web UI and the ``temporal`` CLI show decrypted
payloads to people holding its token.

What the content store keeps (big tool results, the conversation's nodes) never passes through the codec, so
``EncryptedBlobs`` seals it with the same keys: otherwise the customer's words that the codec keeps out of
history would sit in plain text in the ``blobs`` table or the S3 bucket instead.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from typing import Self

import structlog
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from google.protobuf.message import DecodeError
from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter, PayloadCodec, SerializationContext, WithSerializationContext

from activities.content_store import BlobBackend

log = structlog.get_logger(__name__)

ENCODING = b"binary/encrypted"
KEY_ID = "encryption-key-id"
NONCE_BYTES = 12
TAG_BYTES = 16
UNREADABLE = "unreadable_payload"
"""The one field of what ``decode`` hands on in place of a payload it cannot open (see ``EncryptionCodec``)."""

SEALED_BLOB = b"agent-worker/sealed-blob/v1\n"
"""What an encrypted blob starts with (an encrypted payload's protobuf follows), so that blobs stored before
encryption was switched on are told apart and read as they are."""


class UnreadablePayloadError(Exception):
    """A payload (or a sealed blob) this process cannot open: why, and under which key id if it names one."""

    def __init__(self, reason: str, key_id: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.key_id = key_id

    def __str__(self) -> str:
        return self.reason


class UnknownKeyError(UnreadablePayloadError, KeyError):
    """A payload names a key this process does not hold: configure the old key after a rotation."""


class PayloadAuthenticationError(UnreadablePayloadError):
    """AES-GCM refused the ciphertext under the key it names: tampered with, corrupted, or sealed under
    another key with the same id."""


class MalformedPayloadError(UnreadablePayloadError):
    """Marked as encrypted, but not in the shape ``seal`` writes: no key id, or too short to hold a nonce and
    a tag."""


class EncryptionCodec(PayloadCodec, WithSerializationContext):
    """AES-GCM over every payload, the key id in its metadata.

    ``open`` is strict: a payload it cannot open raises ``UnreadablePayloadError`` (``UnknownKeyError``,
    ``PayloadAuthenticationError``, ``MalformedPayloadError``), for callers that must refuse it (sealed
    blobs, the codec server). ``decode``, which Temporal calls on everything it reads, is lenient: such a
    payload becomes a ``json/plain`` marker, ``{"unreadable_payload": "<why>"}``, with a warning logged.
    Raising there would fail every workflow task of the run for good: one signal sent under a key the worker
    does not hold, or with tampered bytes, would wedge the ticket. As a marker, the workflow's own
    validation meets it and records it as the input error it is (a malformed approval is rejected, a ticket
    fails with ``InvalidTicketInput``); an activity result that arrives as one fails to convert, so that
    workflow task fails and is retried, as before.

    ``decode`` is the same in the worker, the replayer and every client, because the replayer must read a
    history exactly as the worker did. What it reads depends on the keys configured, though: a key id that
    was unknown when a ticket received a signal, and is configured later, turns the marker back into the
    signal on the next replay of that ticket, and the replay no longer matches its history. So every worker
    must hold a key before anything writes with it (README, "Rotating keys")."""

    def __init__(self, keys: Mapping[str, bytes], current: str) -> None:
        if current not in keys:
            raise ValueError(f"the current key {current!r} is not among the configured keys {sorted(keys)}")
        for key_id, key in keys.items():
            if len(key) not in (16, 24, 32):
                raise ValueError(f"key {key_id!r} is {len(key)} bytes; AES-GCM takes 16, 24 or 32")
        self._ciphers = {key_id: AESGCM(key) for key_id, key in keys.items()}
        self.current = current
        self._workflow_id: str | None = None

    def with_context(self, context: SerializationContext) -> Self:
        """The same codec, knowing which workflow it reads for, so that a warning names the ticket."""
        scoped = copy.copy(self)
        scoped._workflow_id = getattr(context, "workflow_id", None)  # noqa: SLF001 - a copy of this class
        return scoped

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.seal(payload) for payload in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self._open_or_mark(payload) for payload in payloads]

    def seal(self, payload: Payload) -> Payload:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[self.current].encrypt(nonce, payload.SerializeToString(), self.current.encode())
        return Payload(metadata={"encoding": ENCODING, KEY_ID: self.current.encode()}, data=nonce + sealed)

    def open(self, payload: Payload) -> Payload:
        """The payload ``seal`` was given, or ``UnreadablePayloadError`` saying why not. A payload not marked
        as encrypted was written before encryption was switched on and is returned as it is."""
        if payload.metadata.get("encoding") != ENCODING:
            return payload
        raw_id = payload.metadata.get(KEY_ID)
        if raw_id is None:
            raise MalformedPayloadError(f"an encrypted payload without {KEY_ID!r} in its metadata")
        key_id = raw_id.decode(errors="replace")
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise UnknownKeyError(f"key id {key_id!r} is not configured", key_id)
        if len(payload.data) < NONCE_BYTES + TAG_BYTES:
            raise MalformedPayloadError(f"too short to be sealed under key {key_id!r}", key_id)
        nonce, sealed = payload.data[:NONCE_BYTES], payload.data[NONCE_BYTES:]
        try:
            opened = cipher.decrypt(nonce, sealed, key_id.encode())
        except InvalidTag:
            raise PayloadAuthenticationError(f"authentication failed under key {key_id!r}", key_id) from None
        try:
            return Payload.FromString(opened)
        except DecodeError:  # authentic, so sealed by a holder of the key, but not a payload
            raise MalformedPayloadError(f"sealed under key {key_id!r}, but not a payload", key_id) from None

    def _open_or_mark(self, payload: Payload) -> Payload:
        try:
            return self.open(payload)
        except UnreadablePayloadError as error:
            # Never the payload's bytes: they are ciphertext at best, and the reason says all that is known.
            log.warning(
                "a payload could not be decrypted: handed on as unreadable",
                reason=error.reason,
                key_id=error.key_id,
                workflow_id=self._workflow_id,
            )
            return unreadable(error.reason)


def unreadable(reason: str) -> Payload:
    """What ``decode`` hands on in place of a payload it cannot open: JSON any validation refuses, saying why."""
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps({UNREADABLE: reason}).encode())


class EncryptedBlobs:
    """A ``BlobBackend`` that seals what it stores with the codec's keys and opens it on the way back.

    Keys stay ``sha256:`` of the plain bytes, so they are as deterministic as before; someone who can list
    the store and guess a blob's exact content can confirm the guess, but cannot read anything."""

    def __init__(self, backend: BlobBackend, codec: EncryptionCodec) -> None:
        self.backend = backend
        self.codec = codec

    def put_blob(self, key: str, data: bytes) -> None:
        self.backend.put_blob(key, SEALED_BLOB + self.codec.seal(Payload(data=data)).SerializeToString())

    def get_blob(self, key: str) -> bytes | None:
        stored = self.backend.get_blob(key)
        if stored is None or not stored.startswith(SEALED_BLOB):
            return stored  # missing, or stored before encryption was switched on
        return self.codec.open(Payload.FromString(stored[len(SEALED_BLOB) :])).data

    def __str__(self) -> str:
        return f"{self.backend} (encrypted)"


def with_codec(converter: DataConverter, codec: PayloadCodec | None) -> DataConverter:
    return converter if codec is None else dataclasses.replace(converter, payload_codec=codec)
