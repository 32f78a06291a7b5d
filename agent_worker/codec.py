"""Encrypting every payload the worker and its clients write, so history holds no customer's words.

Temporal keeps every workflow input, activity input and result in its history: without this, a customer's
email address and message sit in plain text for anyone who can read the namespace. The codec encrypts each
payload with AES-GCM before it leaves the process and decrypts it on the way in, so the server stores only
ciphertext. The key id travels in the payload's metadata: after a rotation, payloads written under an old
key still decrypt (keep the old key configured) while new ones use the newest.

The worker, every client (CLI commands, the demo, tests) and the replayer must use the same codec; the
codec server (``agent_worker.codec_server.app``) lets the Web UI and the ``temporal`` CLI show decrypted
payloads to the people it lets in, and lets the CLI encrypt what it sends.

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

from activities.content_store import BlobBackend, BlobRefusedError

log = structlog.get_logger(__name__)

ENCODING = b"binary/encrypted"
KEY_ID = "encryption-key-id"
NONCE_BYTES = 12
TAG_BYTES = 16
UNREADABLE = "unreadable_payload"
"""The one field of what ``decode`` hands on in place of a payload it cannot open (see ``EncryptionCodec``)."""

SEALED_BLOB = b"agent-worker/sealed-blob/v2\n"
"""What a sealed blob starts with (an encrypted payload's protobuf follows). Its associated data binds the
blob's key as well as the key id, so a sealed blob copied under another key does not open."""
SEALED_BLOB_V1 = b"agent-worker/sealed-blob/v1\n"
"""Blobs sealed before the key was bound: their associated data is the key id alone. They still open, since
histories point to them; what stops one being moved under another key is the content store's hash check on
every read (``ContentStore.get``): a blob's key is the hash of its plain bytes, so a moved blob opens to
bytes that do not match. A v2 blob relabelled as v1 does not open: it was sealed with the other associated
data."""


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
    another key with the same id, or (a blob) sealed for another key of the store."""


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
    must hold a key before anything writes with it (``docs/security.md``, "Rotating keys").

    A payload that is not encrypted at all was written by a client without this codec: ``temporal workflow
    start`` or ``signal`` without ``--codec-endpoint``, say, so the customer's words sit in history in plain
    text. ``decode`` hands it on as it is and logs a warning naming the workflow (never the data); with
    ``require_encrypted`` (``AGENT_REQUIRE_ENCRYPTED_INPUT``) it hands on the unreadable marker instead, so
    the ticket fails, or the approval is rejected, saying why. Everything the worker writes itself is
    encrypted, so in a worker only input from outside can arrive plain: a ticket, a signal, an update or a
    query's arguments. ``require_encrypted`` changes what a history reads as, like a key does: the replayer
    must be given the same setting as the worker that ran the ticket."""

    def __init__(self, keys: Mapping[str, bytes], current: str, *, require_encrypted: bool = False) -> None:
        if current not in keys:
            raise ValueError(f"the current key {current!r} is not among the configured keys {sorted(keys)}")
        for key_id, key in keys.items():
            if len(key) not in (16, 24, 32):
                raise ValueError(f"key {key_id!r} is {len(key)} bytes; AES-GCM takes 16, 24 or 32")
        self._ciphers = {key_id: AESGCM(key) for key_id, key in keys.items()}
        self.current = current
        self.require_encrypted = require_encrypted
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

    def seal(self, payload: Payload, bound_to: str | None = None) -> Payload:
        """Encrypt under the current key. ``bound_to`` (a blob's key) goes into the associated data, so the
        result opens only where it was meant to be read: ``open`` must be given the same."""
        nonce = os.urandom(NONCE_BYTES)
        aad = associated_data(self.current, bound_to)
        sealed = self._ciphers[self.current].encrypt(nonce, payload.SerializeToString(), aad)
        return Payload(metadata={"encoding": ENCODING, KEY_ID: self.current.encode()}, data=nonce + sealed)

    def open(self, payload: Payload, bound_to: str | None = None) -> Payload:
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
            opened = cipher.decrypt(nonce, sealed, associated_data(key_id, bound_to))
        except InvalidTag:
            raise PayloadAuthenticationError(f"authentication failed under key {key_id!r}", key_id) from None
        try:
            return Payload.FromString(opened)
        except DecodeError:  # authentic, so sealed by a holder of the key, but not a payload
            raise MalformedPayloadError(f"sealed under key {key_id!r}, but not a payload", key_id) from None

    def _open_or_mark(self, payload: Payload) -> Payload:
        if payload.metadata.get("encoding") != ENCODING:
            return self._plain(payload)
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

    def _plain(self, payload: Payload) -> Payload:
        encoding = payload.metadata.get("encoding", b"").decode(errors="replace")
        log.warning(
            "a payload arrived unencrypted: refused" if self.require_encrypted else "a payload arrived unencrypted",
            encoding=encoding,
            workflow_id=self._workflow_id,
            hint="send it through the codec server (temporal --codec-endpoint) or an agent-worker client",
        )
        return unreadable(NOT_ENCRYPTED) if self.require_encrypted else payload


NOT_ENCRYPTED = (
    "sent unencrypted, and this worker takes only encrypted input (AGENT_REQUIRE_ENCRYPTED_INPUT): send it "
    "through the codec server (temporal ... --codec-endpoint) or an agent-worker client"
)
"""Why a plain payload is refused, in the marker ``decode`` hands on, and so in the ticket's failure or the
rejected approval."""


def associated_data(key_id: str, bound_to: str | None) -> bytes:
    """What AES-GCM authenticates beside the ciphertext: the key id for a payload (and a v1 blob), the key id
    and what it is bound to otherwise. A JSON array never equals a bare key id, so neither opens as the other."""
    return key_id.encode() if bound_to is None else json.dumps([key_id, bound_to]).encode()


def unreadable(reason: str) -> Payload:
    """What ``decode`` hands on in place of a payload it cannot open: JSON any validation refuses, saying why."""
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps({UNREADABLE: reason}).encode())


class EncryptedBlobs:
    """A ``BlobBackend`` that seals what it stores with the codec's keys and opens it on the way back.

    Keys stay ``sha256:`` of the plain bytes, so they are as deterministic as before; someone who can list
    the store and guess a blob's exact content can confirm the guess, but cannot read anything. Opening is
    strict: a blob sealed under a key id this worker does not hold raises ``UnknownKeyError`` (another
    worker may hold it, so the activity is retried); one that fails authentication (tampered, or sealed for
    another key of the store) or is not sealed at all raises ``BlobRefusedError``, which the content store
    turns into a non-retryable error.

    Unsealed blobs are read only with ``accept_plaintext`` (``AGENT_BLOBS_ACCEPT_PLAINTEXT``), during a
    migration from a store written before encryption was switched on. Refusing them otherwise does not
    change what a reader can be handed (the content store checks every blob against its key whatever its
    form), but it makes a worker left without keys, writing customers' words in plain text, fail loudly
    instead of going unnoticed."""

    def __init__(self, backend: BlobBackend, codec: EncryptionCodec, *, accept_plaintext: bool = False) -> None:
        self.backend = backend
        self.codec = codec
        self.accept_plaintext = accept_plaintext

    def put_blob(self, key: str, data: bytes) -> None:
        sealed = self.codec.seal(Payload(data=data), bound_to=key)
        self.backend.put_blob(key, SEALED_BLOB + sealed.SerializeToString())

    def get_blob(self, key: str) -> bytes | None:
        stored = self.backend.get_blob(key)
        if stored is None:
            return None
        if stored.startswith(SEALED_BLOB):
            prefix, bound_to = SEALED_BLOB, key
        elif stored.startswith(SEALED_BLOB_V1):
            prefix, bound_to = SEALED_BLOB_V1, None
        elif self.accept_plaintext:
            return stored
        else:
            raise BlobRefusedError(
                f"{key} is stored unsealed; set AGENT_BLOBS_ACCEPT_PLAINTEXT=true while blobs written before "
                f"encryption was switched on are still in use"
            )
        try:
            return self.codec.open(Payload.FromString(stored[len(prefix) :]), bound_to=bound_to).data
        except UnknownKeyError:
            raise
        except (UnreadablePayloadError, DecodeError) as error:
            raise BlobRefusedError(f"{key} does not open: {str(error) or 'not a sealed payload'}") from error

    def __str__(self) -> str:
        return f"{self.backend} (encrypted)"


def with_codec(converter: DataConverter, codec: PayloadCodec | None) -> DataConverter:
    return converter if codec is None else dataclasses.replace(converter, payload_codec=codec)
