"""The entry point ``bench/peers.py`` starts a peer's worker with: ``python run.py MODULE``, in the peer's own
environment. The workflow is imported from its module, not run as ``__main__``, so Temporal's sandbox can import the
module that defines it again, as it does for every run."""

from __future__ import annotations

import asyncio
import importlib
import sys

if __name__ == "__main__":
    asyncio.run(importlib.import_module(sys.argv[1]).main())
