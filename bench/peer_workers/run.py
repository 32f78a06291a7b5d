"""The entry point ``bench/peers.py`` starts a peer's processes with: ``python run.py MODULE [FUNCTION]``, in the
peer's own environment (``FUNCTION`` is ``main``, the worker, unless named: ``drive`` for a peer whose tickets need a
client of its own). The workflow is imported from its module, not run as ``__main__``, so Temporal's sandbox can
import the module that defines it again, as it does for every run."""

from __future__ import annotations

import asyncio
import importlib
import sys

if __name__ == "__main__":
    module = importlib.import_module(sys.argv[1])
    asyncio.run(getattr(module, sys.argv[2] if len(sys.argv) > 2 else "main")())
