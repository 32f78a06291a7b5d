"""Stand-ins for the business side where a test needs one it can reach into."""

from __future__ import annotations

from collections.abc import Callable

from activities.business import Business

StoreFactory = Callable[..., Business]
"""What the ``make_store`` fixture gives: a business store on the backend under test, with the settings given."""


class MemoryBlobs:
    """Blobs in a dict, which a test may overwrite as someone with write access to the bucket could."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}

    def put_blob(self, key: str, data: bytes) -> None:
        self.blobs.setdefault(key, data)

    def get_blob(self, key: str) -> bytes | None:
        return self.blobs.get(key)
