"""A capture's redaction: every payload's JSON, failure and operator's words rewritten so that no person's data
is left, and what the workflow decides on is kept:

- an email address becomes ``customer-<tag>@redacted.invalid``, the tag keyed on its normalised spelling, so two
  spellings ``same_address`` calls one mailbox stay one, and two mailboxes stay two;
- an order id (when asked) becomes another of the same shape and length, so it still passes ``OrderId``;
- free text (questions, replies, answers, email bodies, tool results, reasons: every string not known to be an
  identifier) is replaced letter for letter and digit for digit, keeping its length in characters and in encoded
  bytes, its whitespace and punctuation, so every bound of ``activities.contracts.limits`` judges it alike;
- content-store keys (``sha256:``, a hash of the customer's words) become other keys of the same shape.

Each value is keyed with an HMAC under a secret drawn for this capture and never written: the same value gets
the same placeholder everywhere in the history, and two captures cannot be joined on their placeholders.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.client import WorkflowHistory

from activities.contracts.fields import ORDER_ID_PATTERN, normalised_address
from agent_worker.capture.payloads import CaptureError, Opened, payloads_and_failures

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
        "type",
        "id",
        "name",
        "tool_use_id",
        "role",
        "stop_reason",
        "model",
        "purpose",
        "signature",
        # states, decisions and the ids that tie them together
        "status",
        "decision",
        "channel",
        "state",
        "event",
        "request_id",
        "refund_key",
        "ticket_id",
        "workflow_id",
        "idempotency_key",
        "key_prefixes",
        "provider_refund_id",
        "currency",
        "digest",
        "policy",
        "identity",
        # what a waiting payout is called (its tool's declared noun): the audit trail is searched by it
        "payout",
        # times the workflow reads back
        "at",
        "deadline",
        "until",
        "opened_at",
        "approval_deadline",
        "reply_until",
        # content-store keys (mapped by shape), and who may approve: the desk's staff, compared by name
        "conversation_ref",
        "content_ref",
        "result_ref",
        "archive_ref",
        "previous",
        "approver",
        "approvers",
        "approved_by",
        "people",
        "default_approvers",
        # the codec's marker
        "unreadable_payload",
    }
)
"""Keys whose strings are kept (their addresses, order ids and content keys still mapped): the workflow decides on
them, and none is anyone's words. A string under any other key is free text and replaced. So a new field is
redacted until it is named here, and if the workflow decides on it, the capture's replay says so."""

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


# --- a whole history: its payloads, failures and operators' words ----------------------------------------


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
