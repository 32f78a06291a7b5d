"""A worker whose refunds are booked under another money policy than the one its reads find: two workers of a
pool that disagree about the policy, as while a new policy file rolls out, made one deterministic worker.

``BookingsUnder(store, digest)`` is a plugin for ``Harness.worker(plugins=...)`` and the history recorder: the
worker's ``issue_refund`` is the real activity over the real ledger, built with ``digest`` as the policy in force
where it books (for its first ``times`` calls, then the worker's own; for every call if ``times`` is None).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.plugin import SimplePlugin
from temporalio.worker import WorkerConfig

from activities.business import Business
from activities.content_store import ContentStore
from activities.contracts.world import RefundReceipt, RefundRequest
from activities.tool_activities import ToolActivities
from activities.tools import ISSUE_REFUND, activity_name


class BookingsUnder(SimplePlugin):
    def __init__(self, store: Business, digest: str, times: int | None = None) -> None:
        super().__init__("tests-bookings-under")
        self._other = ToolActivities.over(store, ContentStore(store.blobs), in_force=digest).issue_refund
        self._times = times

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        config = super().configure_worker(config)
        registered = list(config.get("activities", []))
        own = [a for a in registered if activity_name(a) == ISSUE_REFUND.name]
        assert len(own) == 1, "the worker registers issue_refund once"
        config["activities"] = [a for a in registered if a is not own[0]] + [self._booking(own[0])]
        return config

    def _booking(self, own: Callable[..., Any]) -> Callable[..., Any]:
        calls = 0

        @activity.defn(name=ISSUE_REFUND.name)
        async def issue_refund(request: RefundRequest) -> RefundReceipt:
            nonlocal calls
            calls += 1
            under_another = self._times is None or calls <= self._times
            receipt: RefundReceipt = await (self._other if under_another else own)(request)
            return receipt

        return issue_refund
