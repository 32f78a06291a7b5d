"""``deploy/alerts.yml``: Prometheus rule groups whose expressions parse and read only metrics and labels that a
real worker exports. ``promtool`` is not on PyPI, so the expressions go through a PromQL parser
(``promql-parser``), and the metrics are checked against a real worker's ``/metrics``, not a list kept beside
the rules."""

from __future__ import annotations

import asyncio
import os
import re
import signal
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
import promql_parser
import pytest
import yaml
from temporalio.api.enums.v1 import TimeoutType
from temporalio.client import Client
from temporalio.worker import Worker

from activities.contracts.ticket import Status
from agent_worker.cli.devserver import free_port
from tests.support.fake_messages_api import FakeMessagesAPI, error, message, text, tool_use
from tests.support.faulty_worker import WORKER_COMMAND
from tests.support.handover import RELAY, NewerWorkerHandsOver, hand_over_unreadable_state
from tests.support.harness import Harness
from tests.support.processes import AGENT_WORKER, spawn_worker
from tests.support.tickets import ticket
from tests.support.waits import poll
from workflows import timeouts

ALERTS = Path(__file__).resolve().parent.parent / "deploy" / "alerts.yml"
STUCK = "agent_tickets_stuck"
GAUGES = {STUCK, "agent_approvals_waiting"}
"""The namespace's gauges, which ``agent-worker metrics`` exports, read from visibility."""
SCRAPE_LABELS = {"job", "instance"}
"""Labels Prometheus adds to every series it scrapes: an expression may group by them."""


def groups() -> list[dict[str, Any]]:
    document = yaml.safe_load(ALERTS.read_text())
    assert set(document) == {"groups"}
    found: list[dict[str, Any]] = document["groups"]
    return found


def rules() -> list[dict[str, Any]]:
    return [rule for group in groups() for rule in group["rules"]]


@dataclass
class Reads:
    """What an expression reads: its selectors (metric name and label matchers) and the labels it groups by."""

    selectors: list[tuple[str, list[promql_parser.Matcher]]]
    grouped_by: set[str]


def reads(expr: str) -> Reads:
    found = Reads([], set())

    def visit(node: promql_parser.Expr) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            assert node.name, f"a selector without a metric name in {expr!r}"
            found.selectors.append((node.name, list(node.matchers.matchers)))
        elif isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
            assert node.modifier.type == promql_parser.AggModifierType.By, f"group by labels, in {expr!r}"
            found.grouped_by.update(node.modifier.labels)

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def test_the_alert_rules_are_prometheus_rule_groups_that_tell_an_on_call_person_what_to_do() -> None:
    names = [group["name"] for group in groups()]
    assert len(names) == len(set(names))
    alerts = [rule["alert"] for rule in rules()]
    assert len(alerts) == len(set(alerts))
    for group in groups():
        assert set(group) <= {"name", "interval", "limit", "rules"}
        assert group["rules"]
    for rule in rules():
        assert set(rule) == {"alert", "expr", "for", "labels", "annotations"}, rule
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", rule["alert"])
        read = reads(rule["expr"])  # raises ValueError with the parser's message on bad PromQL
        assert read.selectors
        assert promql_parser.parse_duration(rule["for"]) > timedelta(0)
        assert rule["labels"]["severity"] in {"critical", "warning"}
        assert set(rule["annotations"]) == {"summary", "description"}
        for annotation in rule["annotations"].values():
            used = set(re.findall(r"\$labels\.(\w+)", annotation))
            assert used <= read.grouped_by, f"{rule['alert']} names labels its expression drops: {used}"

    # What is alerted on: failed workflow tasks, stuck tickets, approvals waiting, model errors, and the activities
    # retried until they succeed failing.
    read_by_alert = {rule["alert"]: reads(rule["expr"]) for rule in rules()}
    assert {alert: sorted({name for name, _ in read.selectors}) for alert, read in read_by_alert.items()} == {
        "AgentWorkflowTasksFailing": ["temporal_workflow_task_execution_failed"],
        "AgentTicketsStuck": ["agent_tickets_stuck"],
        "AgentApprovalsPilingUp": ["agent_approvals_waiting"],
        "AgentModelCallsFailing": ["temporal_activity_execution_failed"],
        "AgentActivitiesRetriedForeverFailing": ["agent_activity_retries"],
    }


def test_the_alert_on_activities_retried_until_they_succeed_watches_each_of_them_and_no_other() -> None:
    """A new activity declared without a maximum of attempts (or one given a maximum) changes what can keep a
    ticket waiting for ever: the rule must follow, or a ticket could sit on it unwatched."""
    (rule,) = [rule for rule in rules() if rule["alert"] == "AgentActivitiesRetriedForeverFailing"]
    ((_, matchers),) = reads(rule["expr"]).selectors
    (matcher,) = [m for m in matchers if m.name == "activity_type"]
    assert matcher.op == promql_parser.MatchOp.Re
    policies = {name: config.get("retry_policy") for name, config in timeouts.ATTEMPTS.items()}
    forever = {name for name, policy in policies.items() if policy is None or policy.maximum_attempts == 0}
    assert set(matcher.value.split("|")) == forever
    assert {"audit", "audited", "find_refund", "find_store_credit", "archive_records"} <= forever


Series = dict[str, list[tuple[dict[str, str], float]]]


def exposition(text_format: str) -> Series:
    """Prometheus's text format: each metric's series, as labels and value."""
    series: Series = {}
    for line in text_format.splitlines():
        if not line or line.startswith("#"):
            continue
        matched = re.fullmatch(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)", line)
        assert matched, line
        name, labels, value = matched.groups()
        pairs = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', labels or ""))
        series.setdefault(name, []).append((pairs, float(value)))
    return series


def matches(labels: dict[str, str], matcher: promql_parser.Matcher) -> bool:
    value = labels.get(matcher.name, "")
    if matcher.op == promql_parser.MatchOp.Equal:
        return value == matcher.value
    if matcher.op == promql_parser.MatchOp.NotEqual:
        return value != matcher.value
    found = re.fullmatch(matcher.value, value) is not None
    return found if matcher.op == promql_parser.MatchOp.Re else not found


def stuck_gauge(exported: Series) -> float:
    return max((value for _, value in exported.get(STUCK, [])), default=0)


async def scrape(bind: str) -> Series:
    async with aiohttp.ClientSession() as http, http.get(f"http://{bind}/metrics") as response:
        return exposition(await response.text())


async def test_every_metric_and_label_the_alerts_read_is_one_a_real_worker_or_agent_worker_metrics_exports(
    agent: Harness, client: Client, tmp_path: Path
) -> None:
    """One worker process, on Claude behind a local fake of the Messages API, does what each alert watches: a model
    call fails once (a 500) and is retried, the ticket hands over after its look-up and the first two attempts to
    archive its records fail (a fault) and are retried until they are stored, and a ticket handed over with state
    it cannot read fails its workflow task until the server marks it stuck, which ``agent-worker metrics``, the
    namespace's gauges, counts."""
    wanted = {name for rule in rules() for name, _ in reads(rule["expr"]).selectors}
    bind, gauges_bind = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    env = {name: value for name, value in os.environ.items() if not name.startswith("ANTHROPIC_")}
    with FakeMessagesAPI().running() as api:
        api.script(
            error(500, "api_error", "Try again later."),
            message(tool_use("lookup_order", order_id="A-1001"), stop_reason="tool_use"),
            message(text("Here is your answer.")),
        )
        claude = {"ANTHROPIC_API_KEY": "sk-ant-test-key", "ANTHROPIC_BASE_URL": api.url, "HOME": str(tmp_path)}
        settings = agent.worker_env(
            AGENT_METRICS_BIND=bind,
            AGENT_MODEL_BACKEND="claude",
            AGENT_FAULTS="before:archive_records=fail*2",
            **claude,
        )
        worker = await spawn_worker(settings, environ=env, command=WORKER_COMMAND)
        gauges = await spawn_worker(
            {"TEMPORAL_ADDRESS": settings["TEMPORAL_ADDRESS"], "AGENT_METRICS_BIND": gauges_bind},
            environ=env,
            command=(AGENT_WORKER, "metrics"),
        )
        try:
            async with Worker(client, task_queue=RELAY, workflows=[NewerWorkerHandsOver]):
                answered = await agent.start(ticket(continue_as_new_after_steps=1))
                assert (await asyncio.wait_for(answered.result(), 60)).status is Status.RESOLVED
                stuck = await hand_over_unreadable_state(client, agent.task_queue)

                async def counted_stuck() -> Series | None:
                    exported = await scrape(gauges_bind)
                    return exported if stuck_gauge(exported) >= 1 else None

                # the server marks it, then the gauges read visibility
                namespace = await poll(counted_stuck, timeout=90, interval=1, what="the stuck gauge to count it")
                await stuck.terminate("test over")
                exported = await scrape(bind)
                assert not exported.keys() & GAUGES, "a worker reads no visibility"
                exported.update({name: namespace[name] for name in GAUGES})
        finally:
            for process in (worker, gauges):
                process.send_signal(signal.SIGTERM)
                await asyncio.wait_for(process.wait(), 60)

    assert wanted <= exported.keys(), f"alerts on metrics nothing exports: {wanted - exported.keys()}"
    for rule in rules():
        read = reads(rule["expr"])
        for name, matchers in read.selectors:
            selected = [labels for labels, _ in exported[name] if all(matches(labels, m) for m in matchers)]
            assert selected, f"{rule['alert']}: no series of {name} matches {matchers}: {exported[name]}"
            for labels in selected:
                assert read.grouped_by - SCRAPE_LABELS <= labels.keys(), f"{rule['alert']}: {name} has {labels}"
    failed = sorted(labels["activity_type"] for labels, _ in exported["temporal_activity_execution_failed"])
    assert failed == ["archive_records", "think"]
    assert [labels["workflow_type"] for labels, _ in exported["temporal_workflow_task_execution_failed"]] == [
        "SupportAgent"
    ]


KINDS = {
    "error": ("before:audit=fail*2", "application_failure_info"),
    "start-to-close timeout": ("before:audit=block*2", "TIMEOUT_TYPE_START_TO_CLOSE"),
    "heartbeat timeout": ("before:audit=freeze*2", "TIMEOUT_TYPE_HEARTBEAT"),
}
"""Each way an attempt of an activity retried until it succeeds can fail, and how the server records it: the
store refusing the write, a store that hangs while the attempt heartbeats (its thread waits on a lock), and a
worker that stops heartbeating. Each fails the first two attempts of the ticket's first ``audit``."""


async def kind_seen(client: Client, workflow_id: str) -> str:
    """How the server recorded the last failed attempt of the ticket's ``audit``: its failure info, or timeout type."""
    (activity,) = [
        a
        for a in (await client.get_workflow_handle(workflow_id).describe()).raw_description.pending_activities
        if a.activity_type.name == "audit"
    ]
    if not activity.HasField("last_failure"):
        raise ValueError("no attempt of audit has failed yet")
    failure = activity.last_failure
    if failure.HasField("timeout_failure_info"):
        return TimeoutType.Name(failure.timeout_failure_info.timeout_type)
    return str(failure.WhichOneof("failure_info"))


@pytest.mark.parametrize("kind", list(KINDS))
async def test_the_alert_on_activities_retried_until_they_succeed_counts_every_way_an_attempt_fails(
    agent: Harness, client: Client, tmp_path: Path, kind: str
) -> None:
    """A real worker process whose ``audit`` attempts fail in one way: the series the rule's expression selects count
    both failures, retried, whatever the way. The SDK's failure counter sees only the error: a timeout is the
    server's verdict, and nothing fails in the worker."""
    (rule,) = [rule for rule in rules() if rule["alert"] == "AgentActivitiesRetriedForeverFailing"]
    ((name, matchers),) = reads(rule["expr"]).selectors
    faults, recorded = KINDS[kind]
    bind = f"127.0.0.1:{free_port()}"
    worker = await spawn_worker(agent.worker_env(AGENT_METRICS_BIND=bind, AGENT_FAULTS=faults), command=WORKER_COMMAND)
    try:
        handle = await agent.start(ticket())

        async def retried_twice() -> Series | None:
            exported = await scrape(bind)
            counted = sum(
                value
                for labels, value in exported.get(name, [])
                if all(matches(labels, m) for m in matchers) and labels.get("activity_type") == "audit"
            )
            return exported if counted >= 2 else None

        seen = await kind_seen_once(client, handle.id)
        exported = await poll(retried_twice, timeout=90, interval=1, what=f"the rule's series to count two {kind}s")
        await handle.terminate("test over")
    finally:
        worker.send_signal(signal.SIGTERM)
        await asyncio.wait_for(worker.wait(), 60)

    assert seen == recorded
    (series,) = [labels for labels, _ in exported[name] if labels.get("activity_type") == "audit"]
    assert reads(rule["expr"]).grouped_by - SCRAPE_LABELS <= series.keys()


async def kind_seen_once(client: Client, workflow_id: str) -> str:
    """How the server recorded the first failed attempt of ``audit``, once it has one."""

    async def failed() -> str | None:
        try:
            return await kind_seen(client, workflow_id)
        except ValueError:  # no audit pending yet
            return None

    return await poll(failed, timeout=90, interval=0.5, what="an attempt of audit to fail")
