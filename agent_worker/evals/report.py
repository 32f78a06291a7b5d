"""The suite's results as a person reads them (a Markdown table, or two configurations side by side) and as CI
reads them (JSON)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent_worker.evals.judging import Check, judge
from agent_worker.evals.runner import Ran


@dataclass(frozen=True)
class Judged:
    ran: Ran
    checks: list[Check]

    @classmethod
    def of(cls, ran: Ran) -> Judged:
        return cls(ran, judge(ran))

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    @property
    def steps(self) -> int:
        return self.ran.outcome.model_calls if self.ran.outcome else 0

    @property
    def tokens(self) -> int:
        if self.ran.outcome is None:
            return 0
        total = self.ran.outcome.usage.total
        return (
            total.input_tokens + total.output_tokens + total.cache_read_input_tokens + total.cache_creation_input_tokens
        )

    @property
    def cost(self) -> float:
        return self.ran.outcome.usage.total.cost_usd if self.ran.outcome else 0.0

    @property
    def failures(self) -> str:
        return "; ".join(f"{c.name}: {c.detail}" if c.detail else c.name for c in self.checks if not c.passed)

    def as_json(self) -> dict[str, Any]:
        outcome = self.ran.outcome
        return {
            "scenario": self.ran.scenario.name,
            "configuration": self.ran.config,
            "passed": self.passed,
            "checks": [{"name": c.name, "passed": c.passed, "detail": c.detail} for c in self.checks],
            "status": outcome.status.value if outcome else None,
            "steps": self.steps,
            "tokens": self.tokens,
            "cost_usd": round(self.cost, 6),
            "seconds": round(self.ran.seconds, 2),
            "refused": self.ran.refused,
            "error": self.ran.error,
        }


def table(results: Sequence[Judged], wall_seconds: float) -> str:
    lines = [
        "| scenario | result | checks | steps | tokens | cost | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        verdict = "pass" if r.passed else f"FAIL: {r.failures}"
        passed = sum(c.passed for c in r.checks)
        lines.append(
            f"| {r.ran.scenario.name} | {verdict} | {passed}/{len(r.checks)} | {r.steps} | {r.tokens:,} | "
            f"${r.cost:.4f} | {r.ran.seconds:.1f} |"
        )
    passed = sum(r.passed for r in results)
    lines.append(
        f"| **{len(results)} scenarios** | **{passed} passed, {len(results) - passed} failed** | "
        f"{sum(sum(c.passed for c in r.checks) for r in results)}/{sum(len(r.checks) for r in results)} | "
        f"{sum(r.steps for r in results)} | {sum(r.tokens for r in results):,} | ${sum(r.cost for r in results):.4f} | "
        f"{wall_seconds:.1f} wall |"
    )
    return "\n".join(lines)


def side_by_side(a: Sequence[Judged], b: Sequence[Judged], wall_seconds: float) -> str:
    """Two configurations' results per scenario, then the difference in pass rate, cost and steps."""
    name_a, name_b = a[0].ran.config, b[0].ran.config
    by_b = {r.ran.scenario.name: r for r in b}
    lines = [
        f"| scenario | {name_a} | {name_b} | steps | cost |",
        "|---|---|---|---|---|",
    ]
    for ra in a:
        rb = by_b[ra.ran.scenario.name]
        lines.append(
            f"| {ra.ran.scenario.name} | {_verdict(ra)} | {_verdict(rb)} | {ra.steps} / {rb.steps} | "
            f"${ra.cost:.4f} / ${rb.cost:.4f} |"
        )
    lines.append("")
    lines.append(f"| | {name_a} | {name_b} | difference |")
    lines.append("|---|---|---|---|")
    rate_a, rate_b = _rate(a), _rate(b)
    lines.append(f"| pass rate | {rate_a:.0%} | {rate_b:.0%} | {(rate_b - rate_a) * 100:+.0f} points |")
    cost_a, cost_b = sum(r.cost for r in a), sum(r.cost for r in b)
    lines.append(f"| cost | ${cost_a:.4f} | ${cost_b:.4f} | {_change(cost_a, cost_b, '${:+.4f}')} |")
    steps_a, steps_b = sum(r.steps for r in a), sum(r.steps for r in b)
    lines.append(f"| steps | {steps_a} | {steps_b} | {_change(steps_a, steps_b, '{:+g}')} |")
    lines.append(f"| time | | | {wall_seconds:.1f} s wall for both |")
    return "\n".join(lines)


def _verdict(r: Judged) -> str:
    return "pass" if r.passed else f"FAIL: {r.failures}"


def _rate(results: Sequence[Judged]) -> float:
    return sum(r.passed for r in results) / len(results) if results else 0.0


def _change(before: float, after: float, form: str) -> str:
    difference = form.format(after - before)
    return difference if before == 0 else f"{difference} ({(after - before) / before:+.0%})"
