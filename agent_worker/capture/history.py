"""Real tickets into the replay gate: a run's history, captured through the codec, its personal data redacted.

The histories in ``replay_histories/`` come from our own scenarios; a desk's real tickets take paths those never
took. ``capture`` writes one of them for the gate, and only if it replays on this code: a history that does not
replay would fail CI on arrival, and one whose redaction changed what the workflow decides would guard a path
no ticket took.

Without redaction a capture is what ``agent-worker history export`` writes: every payload as stored, encrypted
if the desk encrypts. With it, every payload is opened through the codec (``capture_payloads``) and its JSON
rewritten (``capture_redaction``: the rules, and why they keep what the workflow decides on), then written plain
(what a CI without the desk's keys replays) or sealed again under the current key (``encrypt``). What decides is
then checked, not assumed: the redacted history is replayed before anything is written.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client
from temporalio.converter import DataConverter
from temporalio.service import RPCError

from agent_worker.capture.payloads import CaptureError, copy_history, open_payloads, seal
from agent_worker.capture.redaction import Redactor, redact
from agent_worker.cli.replay import fetch, history_text, replay_history
from agent_worker.codec import EncryptionCodec
from agent_worker.config import DATA_CONVERTER

__all__ = ["CaptureError", "Captured", "Redactor", "Request", "capture", "check_out"]
"""What ``agent-worker replay capture`` takes from here: the command, with the error it raises and the redactor it
is given (their homes are ``capture_payloads`` and ``capture_redaction``)."""


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
