"""A piece of workflow code that reads the clock, randomness and the environment, as a careless change to a piece
of ``workflows/`` would. Imported passed through, as ``support_agent.py`` imports every piece, it runs outside the
sandbox, and the sandbox lets every read through (``tests/test_replay.py``): ``workflows/ruff.toml`` is what
refuses such a change. It lives under ``tests/`` so that the lint lets it be."""

from __future__ import annotations

import os
import random
import time
import uuid
from datetime import UTC, datetime

READ: list[object] = []
"""What each call read, in the worker's process."""


def read_the_world() -> None:
    READ.extend([datetime.now(UTC), time.time(), random.random(), uuid.uuid4(), os.environ.get("PATH")])
