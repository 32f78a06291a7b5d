"""What the tests, the benchmarks and the scripts share, in one place: tests import helpers from here and never
from another test module, and ``bench/`` and ``scripts/`` import from here and never from a test module.
Fixtures stay in ``tests/conftest.py``.

Modules are imported by name (``from tests.support.harness import Harness``), so a benchmark that spawns worker
processes does not load pytest, Playwright or the inbox's web stack.
"""
