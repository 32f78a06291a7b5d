"""The smallest workflow that moves to a new build at continue-as-new: the primitive 2.0's tickets will stand on.

A run of it is pinned to the build that started it (the worker's default behaviour, as the product's tickets will
be: declared on ``@workflow.defn`` it would go with every task an unversioned worker completes too, which server
1.32.0 refuses). It waits to be woken; woken, it asks whether the deployment's target version has changed, and if
so continues as new, with or without asking to move (``initial_versioning_behavior``). It returns what it saw."""

from __future__ import annotations

from dataclasses import dataclass

from temporalio import workflow
from temporalio.workflow import ContinueAsNewVersioningBehavior


@dataclass(frozen=True)
class Seen:
    """What a run saw: the build it ran on, whether the target had changed when it was woken, and the run number."""

    build: str
    target_changed: bool
    run: int


@workflow.defn(name="UpgradesOnContinue")
class UpgradesOnContinue:
    def __init__(self) -> None:
        self._woken = False

    @workflow.signal
    def wake(self) -> None:
        self._woken = True

    @workflow.run
    async def run(self, move: bool, run: int = 1, seen: list[Seen] | None = None) -> list[Seen]:  # noqa: FBT001 - a workflow takes positional arguments
        seen = [*(seen or [])]
        if run == 1:
            await workflow.wait_condition(lambda: self._woken)
        info = workflow.info()
        version = info.get_current_deployment_version()
        seen.append(Seen(version.build_id if version else "", info.is_target_worker_deployment_version_changed(), run))
        if run == 1 and seen[-1].target_changed:
            behaviour = ContinueAsNewVersioningBehavior.AUTO_UPGRADE if move else None
            workflow.continue_as_new(args=[move, run + 1, seen], initial_versioning_behavior=behaviour)
        return seen
