"""The pictures of the approval inbox that the README and the docs show, and what each is a picture of.

``scripts/screenshots.py`` takes them; each PNG carries a stamp (a ``tEXt`` chunk) naming what it shows: the default
money policy, by its digest, and the inbox's pages, by a digest of their templates and styles. A picture whose stamp
is not the checkout's shows a policy or pages the product no longer has, and ``tests/test_docs.py`` refuses it, saying
what to run to take them again.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from pathlib import Path

from activities.contracts.policy import MoneyPolicy

ROOT = Path(__file__).resolve().parent.parent.parent
FOLDER = ROOT / "docs" / "screenshots"
SHOTS = {
    "inbox.png": "the list: two refunds waiting, the soonest deadline first",
    "ticket.png": "a ticket's page: the request, why it waits, the model's call, the order and the transcript",
    "confirm.png": "confirming a large refund: the amount in its order's currency, the order and the customer",
}
"""Each picture the script takes, and what it shows."""
PAGES = ROOT / "agent_worker" / "inbox"
STAMP_KEY = b"agent-worker screenshot"
RETAKE = "./dev run python scripts/screenshots.py"
"""What takes them again (Chromium at /usr/bin/chromium: ``./dev chromium``)."""
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def stamp() -> str:
    """What pictures of this checkout show: the default policy's digest, and a digest of the inbox's templates and
    styles."""
    pages = hashlib.sha256()
    for path in sorted([*(PAGES / "templates").rglob("*"), *(PAGES / "static").rglob("*")]):
        if path.is_file():
            pages.update(path.relative_to(PAGES).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return f"default policy {MoneyPolicy().digest()}; pages sha256:{pages.hexdigest()[:16]}"


def chunks(png: bytes) -> list[tuple[bytes, bytes]]:
    """A PNG's chunks, (type, data), in order."""
    if not png.startswith(PNG_SIGNATURE):
        raise ValueError("not a PNG")
    found, at = [], len(PNG_SIGNATURE)
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        found.append((png[at + 4 : at + 8], png[at + 8 : at + 8 + length]))
        at += 12 + length
    return found


def stamped(png: bytes, text: str) -> bytes:
    """``png`` with a ``tEXt`` chunk ``STAMP_KEY: text`` after its header."""
    data = STAMP_KEY + b"\0" + text.encode("latin-1")
    chunk = struct.pack(">I", len(data)) + b"tEXt" + data + struct.pack(">I", zlib.crc32(b"tEXt" + data))
    header_end = len(PNG_SIGNATURE) + 12 + struct.unpack(">I", png[8:12])[0]
    return png[:header_end] + chunk + png[header_end:]


def stamp_of(png: bytes) -> str | None:
    """The stamp a picture carries, None if it carries none."""
    for kind, data in chunks(png):
        key, _, text = data.partition(b"\0")
        if kind == b"tEXt" and key == STAMP_KEY:
            return text.decode("latin-1")
    return None
