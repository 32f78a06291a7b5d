"""Encrypting every payload the worker and its clients write, so history holds no customer's words.

Temporal keeps every workflow input, activity input and result in its history: without this, a customer's
email address and message sit in plain text for anyone who can read the namespace. The codec encrypts each
payload with AES-GCM before it leaves the process and decrypts it on the way in, so the server stores only
ciphertext. The key id travels in the payload's metadata: after a rotation, payloads written under an old
key still decrypt (keep the old key configured) while new ones use the newest.

The worker, every client (CLI commands, the demo, tests) and the replayer must use the same codec; the
codec server (``agent_worker.codec_server``) lets the Web UI and the ``temporal`` CLI show decrypted
payloads to people holding its token.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter, PayloadCodec

ENCODING = b"binary/encrypted"
KEY_ID = "encryption-key-id"
NONCE_BYTES = 12


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
        cipher = self._ciphers[self.current]
        encoded = []
        for payload in payloads:
            nonce = os.urandom(NONCE_BYTES)
            sealed = cipher.encrypt(nonce, payload.SerializeToString(), self.current.encode())
            encoded.append(Payload(metadata={"encoding": ENCODING, KEY_ID: self.current.encode()}, data=nonce + sealed))
        return encoded

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        decoded = []
        for payload in payloads:
            if payload.metadata.get("encoding") != ENCODING:
                decoded.append(payload)  # written before encryption was switched on: readable as it is
                continue
            key_id = payload.metadata[KEY_ID].decode()
            cipher = self._ciphers.get(key_id)
            if cipher is None:
                raise UnknownKeyError(f"payload encrypted with key {key_id!r}, which is not configured")
            nonce, sealed = payload.data[:NONCE_BYTES], payload.data[NONCE_BYTES:]
            decoded.append(Payload.FromString(cipher.decrypt(nonce, sealed, key_id.encode())))
        return decoded


def with_codec(converter: DataConverter, codec: PayloadCodec | None) -> DataConverter:
    return converter if codec is None else dataclasses.replace(converter, payload_codec=codec)
