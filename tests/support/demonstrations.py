"""What goes wrong without the product's safeguards, shown on the product's own worker with one thing changed
beneath it: the crash table's rows and the benchmarks that compare.

A production worker keys every payment by the ticket, the order and the part, asks the provider what it
recorded before telling the model that a payment failed, and its embedded provider refuses to pay back more
than an order's charge. None of that can be switched off by a ticket or a setting. A demonstration changes what
the activities do, never the workflow, so the run it shows is the product's run:

- ``refund_key="none"`` gives each attempt of a paying activity a key of its own (every attempt is a new
  payment); ``"per_tool_call"`` one key per scheduled activity, the same across its retries (a crash is covered,
  a model asking again is not). Both rewrite the key the workflow sent, in an activity interceptor.
- ``reconcile=False`` answers the lookup of an unknown outcome (``find_refund``, ``find_store_credit``) with a
  failure, so the model hears the payment failed, as a workflow that never asked would tell it. A key other than
  the product's cannot be looked up by the product's key, so a rewritten key implies it.
- ``refund_guard=False`` puts a provider that pays back past the charge (``PaysPastTheCharge``, built here: the
  product has no such mode) in place of the embedded one, so a figure shows what orchestration alone does.

In the test's process a ``Demonstration`` is a plugin (``Harness.worker(demonstration=...)``); for a worker process
of its own (``Lab(demonstration=...)``, the plain loop) it travels in the ``DEMONSTRATION`` environment variable.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any, Literal

from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.plugin import SimplePlugin
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor, WorkerConfig

from activities.business import Business
from activities.business.payments import SqlPayments
from activities.contracts.world import Charge, RefundRequest
from activities.tools import TOOLS

ENV = "DEMONSTRATION"
PAYING = {name: tool.payout for name, tool in TOOLS.items() if tool.payout is not None}
SETTLING = {payout.settled_by for payout in PAYING.values()}
NOT_RECONCILED = (
    "the payment's outcome is unknown: its attempts timed out, and this demonstration's worker does not ask the "
    "provider what it recorded"
)


RefundKey = Literal["none", "per_tool_call", "per_order"]
KEYS: dict[str, RefundKey] = {"none": "none", "per_tool_call": "per_tool_call", "per_order": "per_order"}


@dataclass(frozen=True)
class Demonstration:
    refund_key: RefundKey = "per_order"
    reconcile: bool = True
    refund_guard: bool = True

    def __post_init__(self) -> None:
        if self.refund_key != "per_order" and self.reconcile:
            object.__setattr__(self, "reconcile", False)  # the lookup goes by the product's key: nothing to find

    @classmethod
    def from_env(cls) -> Demonstration | None:
        """The demonstration ``DEMONSTRATION`` names (``refund_key=none reconcile=off refund_guard=off``), or None."""
        words = dict(word.split("=", 1) for word in os.environ.get(ENV, "").split())
        if not words:
            return None
        unknown = set(words) - {"refund_key", "reconcile", "refund_guard"}
        if unknown:
            raise ValueError(f"{ENV}: unknown {', '.join(sorted(unknown))}")
        key = words.get("refund_key", "per_order")
        if key not in KEYS:
            raise ValueError(f"{ENV}: refund_key is one of {', '.join(KEYS)}, not {key!r}")
        reconcile, refund_guard = (words.get(name) != "off" for name in ("reconcile", "refund_guard"))
        return cls(refund_key=KEYS[key], reconcile=reconcile, refund_guard=refund_guard)

    def env(self) -> dict[str, str]:
        """This demonstration for a worker process of its own."""
        words = [f"refund_key={self.refund_key}"]
        words += [] if self.reconcile else ["reconcile=off"]
        words += [] if self.refund_guard else ["refund_guard=off"]
        return {ENV: " ".join(words)}

    def plugin(self) -> SimplePlugin:
        return _Plugin(self)

    def guard(self, business: Business) -> Business:
        """``business``, with a provider that pays past the charge in place of the embedded one if this
        demonstration lifts the guard (Stripe keeps its own rule)."""
        if not self.refund_guard and isinstance(business.payments, SqlPayments):
            return replace(business, payments=PaysPastTheCharge(business.payments))
        return business


class PaysPastTheCharge(SqlPayments):
    """The embedded provider as a provider without the rule would be: each refund is checked against the charge
    alone, as if nothing had been paid back of the order before, so refunding an order twice pays twice. What a
    lookup reports of the order is still the product's count, so the model is told what it would be told."""

    def __init__(self, product: SqlPayments) -> None:
        super().__init__(product.database, product.keys, product.unattended, kinds=())
        self.product = product

    def __str__(self) -> str:
        return "embedded, paying past the charge"

    def charge(self, order_id: str) -> Charge:
        return self.product.charge(order_id)


class _Plugin(SimplePlugin):
    def __init__(self, demonstration: Demonstration) -> None:
        super().__init__("tests-demonstration")
        self.demonstration = demonstration

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        config = super().configure_worker(config)
        config["interceptors"] = [*config.get("interceptors", []), _Interceptor(self.demonstration)]
        return config


class _Interceptor(Interceptor):
    def __init__(self, demonstration: Demonstration) -> None:
        self.demonstration = demonstration

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:  # noqa: A002
        return _Inbound(next, self.demonstration)


class _Inbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, demonstration: Demonstration) -> None:  # noqa: A002
        super().__init__(next)
        self.demonstration = demonstration

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:  # noqa: A002
        info = activity.info()
        if info.activity_type in SETTLING and not self.demonstration.reconcile:
            raise ApplicationError(NOT_RECONCILED, type="NotReconciled", non_retryable=True)
        if info.activity_type in PAYING and self.demonstration.refund_key != "per_order":
            (request, *rest) = input.args
            assert isinstance(request, RefundRequest)
            call = f"{info.workflow_id}/{info.workflow_run_id}/{info.activity_id}"
            key = f"{call}/attempt-{info.attempt}" if self.demonstration.refund_key == "none" else call
            input.args = [request.model_copy(update={"idempotency_key": f"demonstration:{key}"}), *rest]
        return await super().execute_activity(input)
