"""Where a patch of the workflow would go: none is in force.

A ticket's run is pinned to the build that started it and moves to a new build only at continue-as-new, carrying
its snapshot (``docs/changing-workflow-code.md``), so no build replays a history another build wrote, and a change
to workflow code needs no patch: it is a new build. A patch (Temporal's ``patched`` check) is left for the one
change that must reach runs mid-turn on their own build, a fix forced onto pinned runs: a member below, named for
what it changes, whose value starts with the release that adds it (``"2.1.0/name"``), asked as
``taken(Patch.NAME)``, never by a string nor by ``workflow.patched`` itself.
"""

from __future__ import annotations

from enum import StrEnum

from temporalio import workflow


class Patch(StrEnum):
    """The patches in force, each ``"<release>/<name>"``: none."""

    @property
    def release(self) -> str:
        """The release that added the patch: runs started before it was deployed take the old path."""
        return self.value.partition("/")[0]


def taken(patch: Patch) -> bool:
    """Whether the current run takes ``patch``'s new path: what every piece asks instead of ``workflow.patched``."""
    return workflow.patched(patch)  # noqa: TID251 - the one place that asks Temporal
