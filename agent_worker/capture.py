"""Real tickets into the replay gate: a run's history, captured through the codec, its personal data redacted.

The histories in ``replay_histories/`` come from our own scenarios; a desk's real tickets take paths those never
took. ``capture`` writes one of them for the gate, and only if it replays on this code: a history that does not
replay would fail CI on arrival, and one whose redaction changed what the workflow decides would guard a path
no ticket took.

Without redaction a capture is what ``agent-worker history export`` writes: every payload as stored, encrypted
if the desk encrypts. With it, every payload is opened through the codec and its JSON rewritten
(``Redactor``), then written plain (what a CI without the desk's keys replays) or sealed again under the current
key (``encrypt``). The redaction keeps what the workflow decides on:

- an email address becomes ``customer-<tag>@redacted.invalid``, the tag keyed on its normalised spelling, so two
  spellings ``same_address`` calls one mailbox stay one, and two mailboxes stay two;
- an order id (when asked) becomes another of the same shape and length, so it still passes ``OrderId``;
- free text (questions, replies, answers, email bodies, tool results, reasons: every string not known to be an
  identifier) is replaced letter for letter and digit for digit, keeping its length in characters and in encoded
  bytes, its whitespace and punctuation, so every bound of ``activities.contracts.limits`` judges it alike;
- content-store keys (``sha256:``, a hash of the customer's words) become other keys of the same shape.

Each value is keyed with an HMAC under a secret drawn for this capture and never written: the same value gets
the same placeholder everywhere in the history, and two captures cannot be joined on their placeholders.
What decides is then checked, not assumed: the redacted history is replayed before anything is written.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHistory
from temporalio.converter import DataConverter
from temporalio.service import RPCError

from activities.contracts.fields import ORDER_ID_PATTERN, normalised_address
from agent_worker.codec import ENCODING, EncryptionCodec, UnreadablePayloadError, unreadable
from agent_worker.config import DATA_CONVERTER
from agent_worker.replay import fetch, history_text, replay_history

EMAIL_DOMAIN = "redacted.invalid"
"""Reserved (RFC 2606): a placeholder address can never reach anyone."""
WHOLE_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
"""``EmailAddress``'s own pattern: what the contracts take for an address is what is mapped as one."""
EMAIL_IN_TEXT = re.compile(r"[^\s@\"'<>()\[\]{},;:]+@[^\s@\"'<>()\[\]{},;:]+\.[^\s@\"'<>()\[\]{},;:.]+")
ORDER_ID = re.compile(ORDER_ID_PATTERN)
CONTENT_KEY = re.compile(r"sha256:[0-9a-f]{64}")
TOKEN = re.compile(r"[^\s]*")
"""A bare string without whitespace: an identifier (a key, a limit's name) rather than anyone's words."""

IDENTIFIERS = frozenset(
    {
        # what a conversation and the model's answers are made of
        "type", "id", "name", "tool_use_id", "role", "stop_reason", "model", "purpose", "signature",
        # states, decisions and the ids that tie them together
        "status", "decision", "channel", "state", "event", "request_id", "refund_key", "ticket_id", "workflow_id",
        "idempotency_key", "key_prefixes", "provider_refund_id", "currency", "digest", "policy",
        # times the workflow reads back
        "at", "deadline", "until", "opened_at", "approval_deadline", "reply_until",
        # content-store keys (mapped by shape), and who may approve: the desk's staff, compared by name
        "conversation_ref", "content_ref", "result_ref", "archive_ref", "previous",
        "approver", "approvers", "approved_by", "people", "default_approvers",
        # the codec's marker
        "unreadable_payload",
    }
)  # fmt: skip
"""Keys whose strings are kept (their addresses, order ids and content keys still mapped): the workflow decides on
them, and none is anyone's words. A string under any other key is free text and replaced. So a new field is
redacted until it is named here, and if the workflow decides on it, the capture's replay says so."""

OUTSIDE_EVENTS = frozenset(
    {
        "workflow_execution_signaled_event_attributes",
        "workflow_execution_update_accepted_event_attributes",
        "workflow_execution_update_admitted_event_attributes",
    }
)
"""Events whose payloads come from outside the worker (a signal, an update): one the codec cannot open was read
by the worker as the codec's marker, and is captured as that marker. A payload the worker wrote itself that does
not open means the capture holds the wrong keys. The ticket itself (the started event) comes from outside too,
but one that does not open is a ticket that never ran: the wrong keys again."""

_ALPHABETS = {
    "upper": "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "lower": "abcdefghijklmnopqrstuvwxyz",
    "digit": "0123456789",
    2: "àáâãäåæçèéêëìíîïðñòóôõöøùúûüýþÿ",
    3: "".join(chr(c) for c in range(0x4E00, 0x4E00 + 256)),
    4: "".join(chr(c) for c in range(0x20000, 0x20000 + 256)),
}
"""What a letter or digit is replaced with: one of its own kind and of the same UTF-8 length, so text keeps its size
in characters and in bytes (none of these is escaped in JSON, and neither was a letter or a digit)."""


class CaptureError(Exception):
    """Why a history was not captured: said to the person, and nothing is written. ``code`` is the command's
    exit code: 1 when the history is refused, 2 when the request is (``--out``, the options)."""

    def __init__(self, message: str, *, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Redactor:
    """Consistent placeholders for one capture: the same value, the same placeholder, across the whole history."""

    order_ids: bool = False
    secret: bytes = field(default_factory=lambda: os.urandom(32))
    originals: set[str] = field(default_factory=set)
    """Values seen in the history, which no placeholder may equal (``collect`` fills it before redacting)."""
    _emails: dict[str, str] = field(default_factory=dict)
    _orders: dict[str, str] = field(default_factory=dict)
    _given: set[str] = field(default_factory=set)

    def collect(self, text: str) -> None:
        """Note the addresses and order ids in ``text``, so no placeholder is made equal to one of them."""
        self.originals.update(normalised_address(m.group(0)) for m in EMAIL_IN_TEXT.finditer(text))
        self.originals.update(m.group(0) for m in ORDER_ID.finditer(text))

    def _tag(self, kind: str, value: str, attempt: int) -> bytes:
        return hmac.new(self.secret, f"{kind}\0{attempt}\0{value}".encode(), hashlib.sha256).digest()

    def _unique(self, kind: str, value: str, make: Callable[[bytes], str]) -> str:
        """A placeholder for ``value`` that no other value has, and that is no value of the history."""
        attempt = 0
        while True:
            candidate = make(self._tag(kind, value, attempt))
            if candidate not in self._given and candidate not in self.originals:
                self._given.add(candidate)
                return candidate
            attempt += 1

    def email(self, address: str) -> str:
        key = normalised_address(address)
        if key not in self._emails:
            self._emails[key] = self._unique("email", key, lambda t: f"customer-{t.hex()[:8]}@{EMAIL_DOMAIN}")
        return self._emails[key]

    def order_id(self, order_id: str) -> str:
        if not self.order_ids:
            return order_id
        if order_id not in self._orders:
            digits = len(order_id) - 2

            def make(tag: bytes) -> str:
                number = int.from_bytes(tag, "big") % 10**digits
                return f"{order_id[0]}-{number:0{digits}d}"

            self._orders[order_id] = self._unique("order", order_id, make)
        return self._orders[order_id]

    def content_key(self, key: str) -> str:
        return "sha256:" + self._tag("content", key, 0).hex()

    def identifier(self, text: str) -> str:
        """A string the workflow may decide on, kept, with the addresses, order ids and content keys in it
        mapped: a whole address keeps the whitespace around it, as ``same_address`` ignores it."""
        stripped = text.strip()
        if stripped and WHOLE_EMAIL.fullmatch(stripped):
            start = text.index(stripped)
            return text[:start] + self.email(stripped) + text[start + len(stripped) :]
        text = CONTENT_KEY.sub(lambda m: self.content_key(m.group(0)), text)
        text = EMAIL_IN_TEXT.sub(lambda m: self.email(m.group(0)), text)
        return ORDER_ID.sub(lambda m: self.order_id(m.group(0)), text)

    def text(self, text: str) -> str:
        """Free text, each letter and digit replaced by another of its kind and size, keyed on the whole text;
        everything else (whitespace, punctuation, symbols) kept. Order ids in it are mapped like any other, and
        keep their length too."""
        stream = hashlib.shake_256(self._tag("text", text, 0)).digest(2 * len(text) + 2)
        out, last = [], 0
        for match in ORDER_ID.finditer(text):
            out.append(self._scramble(text[last : match.start()], stream, last))
            out.append(self.order_id(match.group(0)))
            last = match.end()
        out.append(self._scramble(text[last:], stream, last))
        return "".join(out)

    @staticmethod
    def _scramble(text: str, stream: bytes, offset: int) -> str:
        chars = []
        for i, char in enumerate(text, offset):
            kind = _kind(char)
            if kind is None:
                chars.append(char)
            else:
                alphabet = _ALPHABETS[kind]
                chars.append(alphabet[int.from_bytes(stream[2 * i : 2 * i + 2], "big") % len(alphabet)])
        return "".join(chars)

    def json(self, value: Any, key: str | None = None) -> Any:
        """A payload's JSON with every string redacted by what its key says it is (``IDENTIFIERS``), or by its
        shape: a whole address or order id is mapped as one wherever it is, and anything else under ``to`` or
        ``order_id`` (what a model wrote there, say) is free text. A bare string (no key: an activity's argument, a
        failure's detail) is kept as an identifier if it has no whitespace, and is free text otherwise."""
        if isinstance(value, dict):
            return {self.identifier(k): self.json(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.json(v, key) for v in value]
        if not isinstance(value, str):
            return value
        if key in IDENTIFIERS or (key is None and TOKEN.fullmatch(value)):
            return self.identifier(value)
        stripped = value.strip()
        if stripped and (WHOLE_EMAIL.fullmatch(stripped) or ORDER_ID.fullmatch(stripped)):
            return self.identifier(value)  # an address or an order id, under any key, is mapped as one
        return self.text(value)


def _kind(char: str) -> str | int | None:
    """Which alphabet replaces ``char``: letters and digits only (by their Unicode category), so that what a
    validator strips, refuses or escapes (whitespace, controls, format characters, quotes) stays as it was."""
    if char.isascii():
        if char.isupper():
            return "upper"
        if char.islower():
            return "lower"
        return "digit" if char.isdigit() else None
    if unicodedata.category(char)[0] in "LN":
        return len(char.encode())
    return None


# --- the history's payloads ------------------------------------------------------------------------------


@dataclass
class Opened:
    """A payload of the history, opened as the worker read it."""

    slot: Payload
    """The payload in the (copied) event, rewritten in place."""
    plain: Payload
    was_encrypted: bool
    event_id: int


def copy_history(history: WorkflowHistory) -> WorkflowHistory:
    events = []
    for event in history.events:
        copied = HistoryEvent()
        copied.CopyFrom(event)
        events.append(copied)
    return WorkflowHistory(history.workflow_id, events)


def _messages(message: Message) -> Iterator[Message]:
    """Every message inside ``message``, depth first, maps and repeated fields included."""
    for descriptor, value in message.ListFields():
        if descriptor.type != FieldDescriptor.TYPE_MESSAGE:
            continue
        entry = descriptor.message_type
        if entry is not None and entry.GetOptions().map_entry:
            messages = entry.fields_by_name["value"].type == FieldDescriptor.TYPE_MESSAGE
            items = list(value.values()) if messages else []
        elif descriptor.is_repeated:
            items = list(value)
        else:
            items = [value]
        for item in items:
            yield item
            if not isinstance(item, Payload):
                yield from _messages(item)


def payloads_and_failures(event: HistoryEvent) -> tuple[list[Payload], list[Failure]]:
    payloads, failures = [], []
    for message in _messages(event):
        if isinstance(message, Payload):
            payloads.append(message)
        elif isinstance(message, Failure):
            failures.append(message)
    return payloads, failures


def open_payloads(history: WorkflowHistory, codec: EncryptionCodec | None) -> list[Opened]:
    """Every payload of ``history`` (a copy: rewritten in place later), opened as the worker read it, or the
    reason this capture cannot read it (``CaptureError``)."""
    opened = []
    for event in history.events:
        attributes = event.WhichOneof("attributes") or ""
        payloads, _ = payloads_and_failures(event)
        for payload in payloads:
            encoding = payload.metadata.get("encoding", b"")
            where = f"event {event.event_id} ({attributes.removesuffix('_event_attributes')})"
            if stored_elsewhere(payload):
                raise CaptureError(
                    f"{where} is a reference to a payload kept in external storage (AGENT_S3_BUCKET), which capture "
                    f"does not follow yet: nothing is written"
                )
            if encoding == ENCODING:
                if codec is None:
                    raise CaptureError(
                        f"{where} is encrypted, and no key is configured: set AGENT_CODEC_KEYS to the keys the "
                        f"desk's workers encrypt with"
                    )
                try:
                    plain = codec.open(payload)
                except UnreadablePayloadError as error:
                    if attributes not in OUTSIDE_EVENTS:
                        raise CaptureError(
                            f"{where} does not open: {error}. Capture needs the keys the desk's workers encrypt "
                            f"with (AGENT_CODEC_KEYS)"
                        ) from None
                    plain = unreadable(error.reason)  # as the worker read it
                if stored_elsewhere(plain):
                    raise CaptureError(
                        f"{where} opens to a reference to external storage, which capture does not follow"
                    )
                opened.append(Opened(payload, plain, was_encrypted=True, event_id=event.event_id))
            elif encoding.startswith(b"json/") or encoding == b"binary/null":
                opened.append(Opened(payload, payload, was_encrypted=False, event_id=event.event_id))
            else:
                raise CaptureError(
                    f"{where} holds a payload encoded as {encoding.decode(errors='replace')!r}, which capture "
                    f"cannot see into (a payload kept in external storage, or not JSON): nothing is written"
                )
    return opened


def stored_elsewhere(payload: Payload) -> bool:
    """Whether ``payload`` only points to one in external storage (temporalio's ``ExternalStorage``, in any of the
    forms it writes): rewriting its JSON would break the pointer, and redacting it needs what it points to."""
    metadata = payload.metadata
    return (
        "__temporal_external_storage_reference" in metadata
        or metadata.get("encoding") == b"json/external-storage-reference"
        or b"ExternalStorageReference" in metadata.get("messageType", b"")
    )


def redact(history: WorkflowHistory, opened: list[Opened], redactor: Redactor) -> None:
    """Rewrite, in place, every payload (``opened``, of ``history``) and every failure's message and stack trace,
    and the free text an operator gave a cancel or a termination."""
    documents = [_document(o) for o in opened]
    for document in documents:
        if document is not None:
            _collect(redactor, document)
    failures = [f for event in history.events for f in payloads_and_failures(event)[1]]
    for failure in failures:
        redactor.collect(failure.message)
        redactor.collect(failure.stack_trace)
    for item, document in zip(opened, documents, strict=True):
        if document is None:
            continue
        plain = Payload()
        plain.CopyFrom(item.plain)
        plain.data = json.dumps(redactor.json(document), ensure_ascii=False, separators=(",", ":")).encode()
        item.plain = plain
    for failure in failures:
        failure.message = redactor.identifier(failure.message)
        failure.stack_trace = redactor.identifier(failure.stack_trace)
    for event in history.events:
        if event.HasField("workflow_execution_cancel_requested_event_attributes"):
            cancel = event.workflow_execution_cancel_requested_event_attributes
            cancel.cause = redactor.text(cancel.cause)
        if event.HasField("workflow_execution_terminated_event_attributes"):
            terminated = event.workflow_execution_terminated_event_attributes
            terminated.reason = redactor.text(terminated.reason)


def _document(item: Opened) -> Any | None:
    if not item.plain.metadata.get("encoding", b"").startswith(b"json/") or not item.plain.data:
        return None
    try:
        return json.loads(item.plain.data)
    except ValueError as error:
        raise CaptureError(f"a payload of event {item.event_id} is marked as JSON but is not: {error}") from None


def _collect(redactor: Redactor, value: Any) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            redactor.collect(key)
            _collect(redactor, item)
    elif isinstance(value, list):
        for item in value:
            _collect(redactor, item)
    elif isinstance(value, str):
        redactor.collect(value)


def seal(opened: list[Opened], codec: EncryptionCodec | None) -> None:
    """Write each opened payload back into its event: sealed under the current key if ``codec`` is given and it
    was encrypted, plain otherwise (as the replayer of a CI without the desk's keys reads it)."""
    for item in opened:
        item.slot.CopyFrom(codec.seal(item.plain) if codec is not None and item.was_encrypted else item.plain)


# --- the command ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Captured:
    events: int
    payloads: int
    """Payloads opened and rewritten (0 without redaction: written as stored)."""


def check_out(out: Path, *, force: bool) -> None:
    """Refuse, before anything is fetched, a destination that would lose or misplace something: a folder that
    does not exist (a typo would otherwise make one), or a file already there without ``force``."""
    if not out.parent.is_dir():
        raise CaptureError(f"{out.parent} is not a folder: create it first, or fix the path", code=2)
    if out.is_dir():
        raise CaptureError(f"{out} is a folder: name the file to write", code=2)
    if out.exists() and not force:
        raise CaptureError(f"{out} exists: pass --force to replace it", code=2)


@dataclass(frozen=True)
class Request:
    """What to capture: ``workflow_id``'s latest run, or ``run_id``, to ``out`` (replaced only with ``force``),
    redacted with ``redactor`` if given, and then sealed again under the current key with ``encrypt``."""

    workflow_id: str
    out: Path
    run_id: str | None = None
    redactor: Redactor | None = None
    encrypt: bool = False
    force: bool = False


async def capture(
    client: Client, request: Request, *, converter: DataConverter, codec: EncryptionCodec | None
) -> Captured:
    """Write the history ``request`` names for the replay gate: only if it replays on this code, before and after
    redaction. ``converter`` is the one the desk's workers read with (``wiring.data_converter``), ``codec`` the one
    in it. Raises ``CaptureError`` having written nothing."""
    workflow_id, out, run_id, redactor = request.workflow_id, request.out, request.run_id, request.redactor
    encrypt, force = request.encrypt, request.force
    check_out(out, force=force)
    try:
        history = await fetch(client, workflow_id, run_id)
    except RPCError as error:
        which = f"run {run_id} of {workflow_id}" if run_id else workflow_id
        raise CaptureError(f"cannot read the history of {which}: {error.message}") from None
    if not history.events:
        raise CaptureError(f"{workflow_id} has no history to capture")
    working = copy_history(history)
    opened = open_payloads(working, codec)
    failure = await replay_history(history, converter)
    if failure is not None:
        raise CaptureError(
            f"the history of {workflow_id} does not replay on this code even as stored, so the gate would fail on "
            f"it at once: {failure}"
        )
    if redactor is not None:
        redact(working, opened, redactor)
        seal(opened, codec if encrypt else None)
        failure = await replay_history(working, converter if encrypt else DATA_CONVERTER)
        if failure is not None:
            raise CaptureError(
                f"redacting {workflow_id} changed what the workflow decides, so its history would guard a path the "
                f"ticket never took; nothing is written. The first mismatch: {failure}"
            )
    text = history_text(working if redactor is not None else history)
    await asyncio.to_thread(_write, out, text, force=force)
    return Captured(len(history.events), len(opened) if redactor is not None else 0)


def _write(out: Path, text: str, *, force: bool) -> None:
    """All or nothing: a replaced file is swapped in whole; a new one is created only if still absent."""
    if not force:
        try:
            with out.open("x") as file:
                file.write(text)
        except FileExistsError:
            raise CaptureError(f"{out} exists: pass --force to replace it", code=2) from None
        return
    temporary = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    temporary.write_text(text)
    temporary.replace(out)
