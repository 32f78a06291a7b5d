"""The project's images as its ``Dockerfile`` builds them, read offline (no Docker engine runs on these machines):
each target's instructions, followed through the stages it is built ``FROM``, and the extras its environment is
synced with, so that the compose file and the Kubernetes manifests can be checked against what each image carries.

An image is named after its target: ``agent-worker`` for the worker's (the default target, the last stage), and
``agent-worker-<target>`` for each other program's.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
DOCKERFILE = (ROOT / "Dockerfile").read_text()
WORKER = "worker"
"""The worker's target: the Dockerfile's last stage, which ``docker build`` builds without ``--target``."""

Instruction = tuple[str, str]
"""An instruction and its arguments, continuation lines joined: ``("RUN", "uv sync ...")``."""


def stages(dockerfile: str = DOCKERFILE) -> dict[str, list[Instruction]]:
    """Each stage by its name (``FROM ... AS name``), with its instructions from its ``FROM`` on."""
    joined = re.sub(r"\\\n\s*", " ", dockerfile)
    lines = [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    found: dict[str, list[Instruction]] = {}
    current: list[Instruction] = []
    for line in lines:
        kind, _, arguments = line.partition(" ")
        if kind.upper() == "FROM":
            current = []
            found[arguments.split()[-1] if " AS " in arguments.upper() else f"stage-{len(found)}"] = current
        current.append((kind.upper(), arguments.strip()))
    return found


def targets(dockerfile: str = DOCKERFILE) -> list[str]:
    """The stages that are images of a program: those that end in a ``CMD``."""
    return [name for name, instructions in stages(dockerfile).items() if instructions[-1][0] == "CMD"]


def default_target(dockerfile: str = DOCKERFILE) -> str:
    return list(stages(dockerfile))[-1]


def instructions(target: str, dockerfile: str = DOCKERFILE) -> list[Instruction]:
    """What builds ``target``'s image: the instructions of the stages it is built from, its own last."""
    every = stages(dockerfile)
    chain = every[target]
    base = chain[0][1].split()[0]
    return [*(instructions(base, dockerfile) if base in every else []), *chain]


def copied_from(target: str, dockerfile: str = DOCKERFILE) -> str:
    """The build stage whose environment ``target``'s image copies (``COPY --from=STAGE /app/.venv ...``)."""
    (stage,) = [
        args.split()[0].removeprefix("--from=")
        for kind, args in instructions(target, dockerfile)
        if kind == "COPY" and args.startswith("--from=") and "/app/.venv" in args
    ]
    return stage


def extras(target: str, dockerfile: str = DOCKERFILE) -> set[str]:
    """The extras of ``agent-worker`` that ``target``'s environment is synced with: the ``--extra`` flags of the last
    ``uv sync`` of the stage it copies the environment from (an earlier sync is replaced by it: uv sync is exact)."""
    (*_, last) = [args for kind, args in instructions(copied_from(target, dockerfile), dockerfile) if "uv sync" in args]
    assert "--all-extras" not in last, f"{target}: every extra"
    return set(re.findall(r"--extra[ =](\S+)", last))


def image_name(target: str) -> str:
    return "agent-worker" if target == WORKER else f"agent-worker-{target}"


def target_of(image: str) -> str:
    """The target an image reference (``registry.example.com/support/agent-worker-inbox:1.4.0``) names."""
    name = image.split("@", maxsplit=1)[0].rsplit(":", 1)[0].rsplit("/", 1)[-1]
    (target,) = [t for t in targets() if image_name(t) == name]
    return target
