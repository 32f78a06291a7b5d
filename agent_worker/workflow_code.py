"""The code a workflow task runs, found from the workflow's imports, and what of it a run must leave as it found it.

Workers run ``SupportAgent`` outside the SDK's sandbox: one process imports each module once and runs every ticket
it is given, one after another, on the same module objects. So two things must hold of every module whose code a
workflow task can run, and both are derived here rather than kept by hand:

- **Which modules.** ``modules()`` follows the imports of the workflow's module, and of every first-party module
  it reaches, read from their source. It does not follow a name imported only to be named as an activity (an
  activity class: its methods are the activities ``workflow.execute_activity_method`` schedules, and none of its
  code runs in the workflow; ``tests/test_imports.py`` holds that). Every module it returns gets the lint's ban
  list and the module-state checks (``tests/test_determinism.py``), whatever folder it is in.
- **That nothing outlives a run.** ``State.of(modules)`` takes a fingerprint of everything those modules hold: each
  module's names, the attributes of every class they define, the items of every list, dict, set and tuple reached
  from them, a function's defaults and closure, a cache decorator's size, an iterator's position. The replay gate
  takes one before the first history and compares after every history (``agent_worker/cli/replay.py``): a change,
  however it was spelled (through ``self``, an alias, another module's name, ``setattr``, ``globals()``, a
  ``sort()``), is state that the next ticket on the same worker would read.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import inspect
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from types import FunctionType, MethodType, ModuleType
from typing import Any

WORKFLOW_MODULE = "workflows.support_agent"
FIRST_PARTY = ("workflows", "activities", "agent_worker")
"""The packages of this project: imports of anything else are the standard library, pydantic or the SDK, which
``tests/test_imports.py`` holds workflow code to."""


def modules(root: str = WORKFLOW_MODULE) -> tuple[str, ...]:
    """Every first-party module whose code a workflow task of ``root`` can run, ``root`` first, then by name."""
    found = {root}
    queue = deque([root])
    while queue:
        for name in _imported_modules(queue.popleft()):
            if name not in found:
                found.add(name)
                queue.append(name)
    return (root, *sorted(found - {root}))


def source_path(module: str) -> Path:
    """The file a first-party module is read from."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(module)
    return Path(spec.origin)


def _imported_modules(module: str) -> Iterator[str]:
    """The first-party modules ``module``'s source imports, anywhere in it, but those only named as activities."""
    tree = ast.parse(source_path(module).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if _first_party(alias.name))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and _first_party(node.module):
            for alias in node.names:
                imported = f"{node.module}.{alias.name}"
                if is_module(imported):
                    yield imported
                elif not _names_activities(node.module, alias.name):
                    yield node.module


def _first_party(name: str) -> bool:
    return name.split(".", 1)[0] in FIRST_PARTY


def is_module(name: str) -> bool:
    """Whether ``name`` is a module (``from a import b``: ``a.b`` a module, not a name ``a`` holds)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ModuleNotFoundError, ValueError):
        return False


def _names_activities(module: str, name: str) -> bool:
    """Whether ``module.name`` is an activity class: a class some of whose methods are activity definitions."""
    value = getattr(importlib.import_module(module), name, None)
    return inspect.isclass(value) and any(
        hasattr(member, "__temporal_activity_definition") for member in vars(value).values()
    )


# --- the state a run must leave as it found it --------------------------------------------------------------------

_SCALARS = (type(None), bool, int, float, complex, str, bytes, range, slice, Enum, Path)
_SEQUENCES = (list, tuple, deque, bytearray)
_SETS = (set, frozenset)
_LAZY_CLASS_ATTRIBUTES = frozenset(
    {"__pydantic_complete__", "__pydantic_core_schema__", "__pydantic_validator__", "__pydantic_serializer__"}
    | {"__pydantic_fields_complete__", "__pydantic_parent_namespace__", "__abstractmethods__", "_abc_impl"}
    | {"__signature__", "__pydantic_generic_metadata__", "__class_vars__", "__private_attributes__"}
    | {"__parameters__", "__weakref__", "__dict__"}
)
"""Attributes the language or pydantic set on a class as it is first used (a model rebuilt once its forward
references resolve, an ABC's cache of the classes it has seen): each is the library's bookkeeping, made once per
process, never a run's. Compared by nothing."""


@dataclass(frozen=True)
class State:
    """A fingerprint of everything some modules hold, as ``path -> value``: ``workflows.timeouts.ATTEMPTS['think']``
    maps to what that item held, written out as far as it is this project's or a container of the language's."""

    values: Mapping[str, str]

    @classmethod
    def of(cls, names: Iterable[str]) -> State:
        walk = _Walk({name: importlib.import_module(name) for name in names})
        for name, module in walk.modules.items():
            walk.module(name, module)
        return cls(walk.values)

    def changes(self, later: State) -> list[str]:
        """Each path whose value differs in ``later``, or that appeared or went, as a sentence a reader can act on."""
        found = []
        for path in sorted(self.values.keys() | later.values.keys()):
            before, after = self.values.get(path), later.values.get(path)
            if before == after:
                continue
            if before is None:
                found.append(f"{path} appeared: {_short(after)}")
            elif after is None:
                found.append(f"{path} went (it held {_short(before)})")
            else:
                found.append(f"{path} changed from {_short(before)} to {_short(after)}")
        return found


def _short(text: str | None, limit: int = 120) -> str:
    text = text or ""
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


class _Walk:
    """One traversal: each object is written out once, at the first path that reaches it (later paths name it)."""

    def __init__(self, modules: dict[str, ModuleType]) -> None:
        self.modules = modules
        self.values: dict[str, str] = {}
        self.seen: dict[int, str] = {}
        self.keep: list[object] = []  # holds what was seen, so that no id is reused within one walk

    def module(self, name: str, module: ModuleType) -> None:
        for key, value in vars(module).items():
            if key in {"__builtins__", "__loader__", "__spec__", "__cached__", "__file__", "__path__"}:
                continue
            if isinstance(value, ModuleType):
                self.values[f"{name}.{key}"] = f"<module {value.__name__}>"
            elif isinstance(value, type | FunctionType) and value.__module__ != name:  # walked where it is defined
                self.values[f"{name}.{key}"] = f"<{value.__module__}.{value.__qualname__}>"
            else:
                self.value(f"{name}.{key}", value)

    def value(self, path: str, value: object) -> None:  # noqa: C901, PLR0912 - one branch per kind of holder
        if isinstance(value, _SCALARS):
            self.values[path] = repr(value)
            return
        if id(value) in self.seen:
            self.values[path] = f"<same as {self.seen[id(value)]}>"
            return
        self.seen[id(value)] = path
        self.keep.append(value)
        if isinstance(value, dict):
            self.values[path] = f"<dict of {len(value)}>"
            for key, item in value.items():
                self.value(f"{path}[{key!r}]", item)
        elif isinstance(value, _SEQUENCES):
            self.values[path] = f"<{type(value).__name__} of {len(value)}>"
            for index, item in enumerate(value):
                self.value(f"{path}[{index}]", item)
        elif isinstance(value, _SETS):
            self.values[path] = f"<{type(value).__name__} {sorted(map(repr, value))}>"
        elif isinstance(value, type):
            self.values[path] = f"<class {value.__module__}.{value.__qualname__}>"
            if self._ours(value.__module__):
                for key, item in vars(value).items():
                    if key not in _LAZY_CLASS_ATTRIBUTES:
                        self.value(f"{path}.{key}", item)
        elif callable(cache_info := getattr(value, "cache_info", None)):  # functools.cache, lru_cache and their kind
            self.values[path] = f"<cached function holding {cache_info().currsize}>"
            self.value(f"{path}.__wrapped__", getattr(value, "__wrapped__", None))
        elif isinstance(value, FunctionType):
            self.values[path] = f"<function {value.__module__}.{value.__qualname__}>"
            self.value(f"{path}.__defaults__", value.__defaults__)
            self.value(f"{path}.__kwdefaults__", value.__kwdefaults__)
            for index, cell in enumerate(value.__closure__ or ()):
                self.value(f"{path}.<closure {index}>", cell.cell_contents if cell.cell_contents is not None else None)
            for key, item in vars(value).items():
                self.value(f"{path}.{key}", item)
        elif isinstance(value, MethodType | staticmethod | classmethod | property | functools.partial):
            inner = getattr(value, "__func__", None) or getattr(value, "fget", None) or getattr(value, "func", None)
            self.values[path] = f"<{type(value).__name__}>"
            self.value(f"{path}.<function>", inner)
        elif isinstance(value, Iterator):
            self.values[path] = f"<iterator {_position(value)}>"
        elif self._ours(type(value).__module__):
            self.values[path] = f"<{type(value).__qualname__}>"
            for key, item in _attributes(value):
                self.value(f"{path}.{key}", item)
        else:
            self.values[path] = f"<{type(value).__module__}.{type(value).__qualname__} at {id(value):#x}>"

    def _ours(self, module: str) -> bool:
        return module in self.modules


def _attributes(value: object) -> Iterator[tuple[str, object]]:
    yield from getattr(value, "__dict__", {}).items()
    for cls in type(value).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if slot != "__dict__" and hasattr(value, slot):
                yield slot, getattr(value, slot)


def _position(iterator: Iterator[Any]) -> str:
    """Where an iterator stands: a generator's frame and line, a built-in iterator's own account of itself."""
    frame = getattr(iterator, "gi_frame", None)
    if frame is not None or hasattr(iterator, "gi_frame"):
        return f"generator at {frame.f_lasti if frame is not None else 'end'}"
    try:
        return repr(iterator.__reduce__())
    except TypeError:
        return f"at {id(iterator):#x}"
