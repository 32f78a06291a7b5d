"""Which programs this installation can run: each program besides the worker is an extra of the distribution
(``agent-worker[inbox]``, ``[mail-in]``, ``[codec-server]``, ``[evals]``, ``[dev-server]``; ``pyproject.toml`` says
what each holds), so that a worker's image carries only the worker. A command whose extra is missing says so in words,
naming what to install, before it imports anything of its program: the alternative is a ``ModuleNotFoundError`` from
deep inside it, naming a module the operator never chose.

What an extra requires is read from the installed distribution's own metadata, the one list ``pyproject.toml`` writes,
so this module keeps no list of its own to drift from it.
"""

from __future__ import annotations

import importlib.metadata
import re

DISTRIBUTION = "agent-worker"
_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)[^;]*;\s*extra\s*==\s*['\"]([^'\"]+)['\"]\s*$")
"""A ``Requires-Dist`` line of an extra, as the build backend writes it: ``name[...]spec; extra == 'inbox'``."""


class MissingExtraError(Exception):
    """A command's extra is not installed: the message says which, and the command that installs it."""


def required_by(extra: str) -> list[str]:
    """The distributions ``agent-worker[extra]`` requires; none when the distribution is not installed (a source tree
    run as it is, whose imports then speak for themselves)."""
    try:
        requires = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    found = (_REQUIREMENT.fullmatch(line) for line in requires)
    return [match[1] for match in found if match is not None and match[2] == extra]


def missing(extra: str) -> list[str]:
    """Those of ``required_by(extra)`` that are not installed here."""
    absent = []
    for name in required_by(extra):
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            absent.append(name)
    return absent


def require(extra: str, command: str) -> None:
    """Return if ``command``'s extra is installed, else raise ``MissingExtraError`` saying what to install."""
    absent = missing(extra)
    if absent:
        raise MissingExtraError(
            f"agent-worker {command} needs the {extra} extra, which is not installed here (missing: "
            f"{', '.join(absent)}): install it with pip install 'agent-worker[{extra}]' (or uv sync --extra {extra}). "
            f"A worker's installation leaves it out on purpose: the worker does not need it."
        )
