"""The version says what runs: ``agent-worker --version``, ``pyproject.toml`` and the changelog's newest release
name the same one, and every patch of the workflow belongs to a release the changelog describes."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from tests.support.processes import AGENT_WORKER, run
from workflows.patches import Patch

ROOT = Path(__file__).resolve().parents[1]


async def test_the_command_the_project_and_the_changelog_name_one_release() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    printed = (await run(AGENT_WORKER, "--version")).strip()
    releases = re.findall(r"^## (\d+\.\d+\.\d+)\b", (ROOT / "CHANGELOG.md").read_text(), flags=re.MULTILINE)
    assert printed == f"agent-worker {project}"
    assert releases[0] == project, "the changelog's newest release is the project's version"


def test_every_patch_is_described_under_its_release_in_the_changelog() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    for patch in Patch:
        release = changelog.split(f"## {patch.release}", 1)
        assert len(release) == 2, f"{patch.release} has no section in the changelog"
        section = release[1].split("\n## ", 1)[0]
        assert f"`{patch.value}`" in section, f"{patch.value} is not described under {patch.release}"
