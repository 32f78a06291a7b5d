"""Which Worker Deployment a worker joins, and as which build (``AGENT_DEPLOYMENT``, ``AGENT_BUILD_ID``).

Opt-in. With ``AGENT_DEPLOYMENT`` unset the worker is unversioned, as it always was, and tells the server only its
build id. Set, it polls as one version of that deployment, and the server routes each ticket to a version: new
tickets to the deployment's current version (or to the ramping one, for a share of them); a ticket stays on the
build that started it, and moves to the new target while it waits (``docs/rollouts.md``). ``agent_worker.wiring``
turns these into the SDK's ``WorkerDeploymentConfig``.
"""

from __future__ import annotations

from typing import Self

from pydantic import model_validator
from pydantic_settings import SettingsConfigDict

from agent_worker.config.concern import Concern

UNVERSIONED = "__unversioned__"
"""The name the server gives to "no version" in routing: no build may be called that."""


class DeploymentSettings(Concern):
    model_config = SettingsConfigDict(env_prefix="AGENT_")

    deployment: str | None = None
    """``AGENT_DEPLOYMENT``: the Worker Deployment's name, the same for every build of this service on a task queue,
    e.g. ``support-agent``. Unset (the default), or ``""`` as for every setting: the worker is unversioned."""
    build_id: str | None = None
    """``AGENT_BUILD_ID``: this worker's version within the deployment, e.g. a release tag or an image digest. Unset:
    the digest of this service's source (``agent_worker.wiring.build_id``), so two workers running the same code are
    one version, and any change of code is another."""

    @model_validator(mode="after")
    def _name_a_version(self) -> Self:
        """Refuse what the server would refuse, or take for another version, before the worker connects: the
        version's canonical name is ``<deployment>.<build id>``, so a deployment's name has no dot."""
        for variable, value in (("AGENT_DEPLOYMENT", self.deployment), ("AGENT_BUILD_ID", self.build_id)):
            if value is not None and not value.strip():
                raise ValueError(f"{variable} is blank ({value!r}): give it a name, or leave it unset")
            if value is not None and value != value.strip():
                raise ValueError(f"{variable} must not start or end with a space ({value!r})")
        if self.build_id is not None and self.deployment is None:
            raise ValueError(
                "AGENT_BUILD_ID names a version of a Worker Deployment, but AGENT_DEPLOYMENT is not set: set "
                "AGENT_DEPLOYMENT too (e.g. support-agent), or unset AGENT_BUILD_ID to run unversioned"
            )
        if self.deployment is not None and "." in self.deployment:
            raise ValueError(
                f"AGENT_DEPLOYMENT must not contain a dot ({self.deployment!r}): a version is named "
                "<deployment>.<build id>, and the dot separates them"
            )
        if self.build_id == UNVERSIONED:
            raise ValueError(f"AGENT_BUILD_ID must not be {UNVERSIONED}: the server's name for unversioned workers")
        return self
