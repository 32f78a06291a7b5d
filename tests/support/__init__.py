"""What the tests, the benchmarks and the scripts share, in one place: tests import helpers from here and never
from another test module, and ``bench/`` and ``scripts/`` import from here and never from a test module
(``tests/test_imports.py`` holds them to it). Fixtures stay in ``tests/conftest.py``.

Modules are imported by name (``from tests.support.waits import poll``), so a benchmark that spawns worker
processes does not load pytest, Playwright or the inbox's web stack.
"""
