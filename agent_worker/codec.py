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

import dataclasses
import os
from collections.abc import Mapping, Sequence

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter, PayloadCodec

from activities.content_store import BlobBackend

ENCODING = b"binary/encrypted"
KEY_ID = "encryption-key-id"
NONCE_BYTES = 12
SEALED_BLOB = b"agent-worker/sealed-blob/v1\n"
"""What an encrypted blob starts with (an encrypted payload's protobuf follows), so that blobs stored before
encryption was switched on are told apart and read as they are."""


class UnknownKeyError(KeyError):
    """A payload names a key this process does not hold: configure the old key after a rotation."""


class EncryptionCodec(PayloadCodec):
    def __init__(self, keys: Mapping[str, bytes], current: str) -> None:
        if current not in keys:
            raise ValueError(f"the current key {current!r} is not among the configured keys {sorted(keys)}")
        for key_id, key in keys.items():
            if len(key) not in (16, 24, 32):
                raise ValueError(f"key {key_id!r} is {len(key)} bytes; AES-GCM takes 16, 24 or 32")
        self._ciphers = {key_id: AESGCM(key) for key_id, key in keys.items()}
        self.current = current

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.seal(payload) for payload in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.open(payload) for payload in payloads]

    def seal(self, payload: Payload) -> Payload:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[self.current].encrypt(nonce, payload.SerializeToString(), self.current.encode())
        return Payload(metadata={"encoding": ENCODING, KEY_ID: self.current.encode()}, data=nonce + sealed)

    def open(self, payload: Payload) -> Payload:
        if payload.metadata.get("encoding") != ENCODING:
            return payload  # written before encryption was switched on: readable as it is
        key_id = payload.metadata[KEY_ID].decode()
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise UnknownKeyError(f"payload encrypted with key {key_id!r}, which is not configured")
        nonce, sealed = payload.data[:NONCE_BYTES], payload.data[NONCE_BYTES:]
        return Payload.FromString(cipher.decrypt(nonce, sealed, key_id.encode()))


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
