"""A history's payloads for a capture: found in every event, opened through the codec as the worker read them,
and sealed again once rewritten; and ``CaptureError``, why a history is not captured.

A payload that cannot be seen into (kept in external storage, not JSON, or written by the worker under keys the
capture lacks) stops the capture: nothing is written rather than a history redacted in part.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.history.v1 import MarkerRecordedEventAttributes as MarkerAttributes
from temporalio.client import WorkflowHistory

from agent_worker.codec import ENCODING, EncryptionCodec, UnreadablePayloadError, unreadable

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


SDK_MARKER_METADATA = {"core_patch": "patch-data", "core_local_activity": "data"}
"""The marker details the SDK writes for itself, by marker: a patch's id, a local activity's sequence number, id and
type. Not payloads of ours (the codec never sees them, and no customer's words are in them), and what replay
matches the workflow's commands against, so a capture leaves them as recorded. A local activity's ``result`` is
ours, and is redacted like any activity's."""


class CaptureError(Exception):
    """Why a history was not captured: said to the person, and nothing is written. ``code`` is the command's
    exit code: 1 when the history is refused, 2 when the request is (``--out``, the options)."""

    def __init__(self, message: str, *, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


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
    """Every message inside ``message``, depth first, maps and repeated fields included, but the SDK's own marker
    details (``SDK_MARKER_METADATA``)."""
    for descriptor, value in message.ListFields():
        if descriptor.type != FieldDescriptor.TYPE_MESSAGE:
            continue
        entry = descriptor.message_type
        if entry is not None and entry.GetOptions().map_entry:
            messages = entry.fields_by_name["value"].type == FieldDescriptor.TYPE_MESSAGE
            sdk_own = SDK_MARKER_METADATA.get(message.marker_name) if isinstance(message, MarkerAttributes) else None
            items = [item for key, item in value.items() if key != sdk_own] if messages else []
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


def seal(opened: list[Opened], codec: EncryptionCodec | None) -> None:
    """Write each opened payload back into its event: sealed under the current key if ``codec`` is given and it
    was encrypted, plain otherwise (as the replayer of a CI without the desk's keys reads it)."""
    for item in opened:
        item.slot.CopyFrom(codec.seal(item.plain) if codec is not None and item.was_encrypted else item.plain)
