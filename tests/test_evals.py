"""``agent-worker eval``: scenarios as data, run as real tickets on the dev server, judged by what they did.

What must not happen: a scenario that passes on responses recorded for another prompt (stale), a broken expectation
reported as a pass, a misspelt or malformed scenario file that runs and checks nothing, two configurations mixed up.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio.client import Client

from activities.contracts.ticket import Status
from agent_worker import wiring
from agent_worker.evals import recordings
from agent_worker.evals.judging import judge
from agent_worker.evals.messages_api import MessagesAPI, Recorded, Scripted
from agent_worker.evals.report import Judged, side_by_side, table
from agent_worker.evals.runner import Configuration, Runner
from agent_worker.evals.scenario import Scenario, ScenarioError, load, suite
from tests.support.processes import AGENT_WORKER

ROOT = Path(__file__).resolve().parent.parent
STARTER = ROOT / "evals"

LOST_PARCEL: dict[str, Any] = {
    "orders": [{"order_id": "A-1001", "amount_cents": 1900, "customer_email": "ann@example.com"}],
    "ticket": {"customer": "ann@example.com", "question": "Order A-1001 never arrived."},
    "expect": {
        "refunds": [{"order_id": "A-1001", "amount_cents": 1900}],
        "asked_person": False,
        "emails": {"count": 1},
        "status": "resolved",
        "max_steps": 4,
        "answer_contains": ["19.00"],
    },
    "script": [
        {"call": {"lookup_order": {"order_id": "A-1001"}}},
        {"call": {"issue_refund": {"order_id": "A-1001", "amount_cents": 1900}}},
        {"call": {"send_email": {"to": "ann@example.com", "subject": "Refund", "body": "19.00 back."}}},
        {"say": "I've refunded 19.00 for order A-1001."},
    ],
}


def scenario(name: str = "lost", **changes: Any) -> Scenario:
    data = {**LOST_PARCEL, **changes, "name": name}
    return Scenario.model_validate(data)


def write(folder: Path, name: str, data: Any, suffix: str = ".yaml") -> Path:
    path = folder / f"{name}{suffix}"
    path.write_text(json.dumps(data) if suffix == ".json" else yaml.safe_dump(data, allow_unicode=True))
    return path


# --- scenario files: one validation point, nothing runs on a file that does not read ------------------------


def test_the_starter_suite_reads_and_covers_a_desks_week() -> None:
    scenarios = suite(STARTER)
    assert len(scenarios) >= 25
    statuses = {s.expect.status for s in scenarios}
    assert {Status.RESOLVED, Status.DECLINED, Status.HANDED_OVER, Status.GAVE_UP} <= statuses
    assert any(s.replies for s in scenarios)
    assert any(s.events for s in scenarios)
    assert any(s.approval and s.approval.approve for s in scenarios)
    assert any(s.approval and not s.approval.approve for s in scenarios)
    assert any(not s.ticket.question.isascii() for s in scenarios), "non-English tickets"
    every_recorded = {p.stem for p in recordings.folder(STARTER, "default").glob("*.json")}
    assert every_recorded == {s.name for s in scenarios}, "each starter scenario has its recorded responses"


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"expect": {"max_step": 3}}, "expect.max_step: Extra inputs are not permitted"),
        ({"expect": {"refunds": [{"order_id": "A-1001", "amount_cents": -5}]}}, "expect.refunds.0.amount_cents"),
        ({"expect": {"status": "fine"}}, "expect.status"),
        ({"orders": [{"order_id": "not an id", "amount_cents": 100, "customer_email": "a@b.example"}]}, "order_id"),
        ({"ticket": {"customer": "not-an-address", "question": "hi"}}, "ticket.customer"),
        ({"ticket": {"customer": "a@b.example", "question": "hi", "options": {"refund_key": "none!"}}}, "refund_key"),
        ({"script": [{"call": {"refund_everything": {}}}]}, "no tool named 'refund_everything'"),
        ({"script": [{}]}, "a script turn says something"),
        ({"approval": {"approve": "perhaps"}}, "approval.approve"),
        ({"events": [{"order_id": "A-1001"}]}, "events.0.event"),
    ],
)
def test_a_scenario_that_does_not_read_is_refused_with_its_file_and_field(
    tmp_path: Path, change: dict[str, Any], named: str
) -> None:
    path = write(tmp_path, "broken", {**LOST_PARCEL, **change})
    with pytest.raises(ScenarioError) as refused:
        load(path)
    assert str(path) in str(refused.value)
    assert named in str(refused.value)


def test_a_suite_is_refused_whole_before_anything_runs(tmp_path: Path) -> None:
    write(tmp_path, "good", LOST_PARCEL)
    (tmp_path / "bad.yaml").write_text("orders: [unclosed\n")
    with pytest.raises(ScenarioError, match=r"bad\.yaml: cannot be read"):
        suite(tmp_path)
    (tmp_path / "bad.yaml").write_text("- a list, not a scenario\n")
    with pytest.raises(ScenarioError, match="a scenario is a mapping"):
        suite(tmp_path)
    (tmp_path / "bad.yaml").unlink()
    write(tmp_path, "again", {**LOST_PARCEL, "name": "good"}, ".json")
    with pytest.raises(ScenarioError, match="two scenarios share a name: good"):
        suite(tmp_path)
    (tmp_path / "again.json").unlink()
    with pytest.raises(ScenarioError, match="no scenario named nope"):
        suite(tmp_path, only=["nope"])
    with pytest.raises(ScenarioError, match="no such folder"):
        suite(tmp_path / "missing")
    assert [s.name for s in suite(tmp_path)] == ["good"]


def test_a_configuration_sets_only_agent_settings(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text("PATH: /tmp\n")
    with pytest.raises(ValueError, match="mapping of AGENT_"):
        Configuration.read(tmp_path / "x.yaml")
    (tmp_path / "y.yaml").write_text("AGENT_POLICY_FILE: desk.toml\nAGENT_ANTHROPIC_MODEL: claude-haiku-4-5\n")
    (tmp_path / "desk.toml").write_text("[approval]\nlimit_cents = 1000\n")
    config = Configuration.read(tmp_path / "y.yaml")
    assert config.environment["AGENT_POLICY_FILE"] == str(tmp_path / "desk.toml"), "read from its own folder"
    settings = config.settings()
    assert settings.claude.model == "claude-haiku-4-5"
    assert wiring.money_policy(settings).approval.limit_cents == 1000


# --- judging: what the ticket did, against what was expected -------------------------------------------------


async def run_one(
    client: Client, tmp_path: Path, case: Scenario, source: Any, config: Configuration | None = None
) -> tuple[Judged, MessagesAPI]:
    api = await MessagesAPI(source).start()
    try:
        ran = await Runner(client, api, tmp_path, timeout_seconds=60).run(case, config or Configuration("default"))
    finally:
        await api.stop()
    return Judged.of(ran), api


async def test_a_scripted_ticket_passes_what_it_did(client: Client, tmp_path: Path) -> None:
    case = scenario()
    judged, api = await run_one(client, tmp_path, case, Scripted({case.name: case}))
    assert judged.passed, judged.failures
    assert [c.name for c in judged.checks] == [
        "refunds",
        "asked a person",
        "emails",
        "emails only to the customer",
        "status",
        "steps",
        "answer says '19.00'",
    ]
    assert judged.steps == 4
    assert judged.tokens > 0
    assert judged.cost > 0
    assert len(api.exchanges["default", case.name]) == 4


async def test_every_broken_expectation_is_reported_not_passed(client: Client, tmp_path: Path) -> None:
    """The same ticket, judged against expectations it breaks, one of each kind."""
    case = scenario(
        expect={
            "refunds": [],
            "asked_person": True,
            "emails": {"count": 0},
            "status": "declined",
            "max_steps": 3,
            "max_cost_usd": 0.0001,
            "answer_contains": ["sorry"],
            "answer_excludes": ["refunded"],
        },
        script=[
            *LOST_PARCEL["script"][:2],
            {"call": {"send_email": {"to": "ann@example.com", "subject": "Refund", "body": "19.00 back."}}},
            {"call": {"send_email": {"to": "eve@example.com", "subject": "Copy", "body": "19.00 back."}}},
            {"say": "I've refunded 19.00 for order A-1001."},
        ],
    )
    judged, _ = await run_one(client, tmp_path, case, Scripted({case.name: case}))
    failed = {c.name: c.detail for c in judged.checks if not c.passed}
    assert failed == {
        "refunds": "paid USD 19.00 on A-1001, expected nothing",
        "asked a person": "no, expected yes",
        "emails": "1 sent, expected 0",
        "status": "resolved, expected declined",
        "steps": "5 of at most 3",
        "cost": failed["cost"],
        "answer says 'sorry'": "",
        "answer never says 'refunded'": "",
    }
    assert failed["cost"].endswith("of at most $0.0001")
    assert "emails only to the customer" not in failed, "the rule refused eve's copy: only ann was mailed"
    assert not judged.passed


async def test_a_recording_replays_and_goes_stale_when_the_prompt_changes(client: Client, tmp_path: Path) -> None:
    case = scenario()
    _, scripted = await run_one(client, tmp_path / "a", case, Scripted({case.name: case}))
    recordings.write(tmp_path, "default", case.name, "script", scripted.exchanges["default", case.name])
    stored = recordings.read(tmp_path, "default")

    replayed, _ = await run_one(client, tmp_path / "b", case, Recorded(stored))
    assert replayed.passed, replayed.failures

    other_prompt = Configuration("default", {"AGENT_ANTHROPIC_SYSTEM_PROMPT": "You are a pirate. Refund everything."})
    stale, _ = await run_one(client, tmp_path / "c", case, Recorded(stored), other_prompt)
    assert not stale.passed
    assert [c.name for c in stale.checks] == ["model answered"]
    assert stale.checks[0].detail.startswith("stale: request 1 is not the one recorded")

    unrecorded, _ = await run_one(client, tmp_path / "d", scenario("never-recorded"), Recorded(stored))
    assert unrecorded.checks[0].detail.startswith("not recorded")


async def test_a_changed_tool_result_is_stale_too(client: Client, tmp_path: Path) -> None:
    """The recording answered a conversation in which the order cost 19.00; the shop now says 25.00, so the
    conversation the model would be answering is another one, from the second request on."""
    case = scenario()
    _, scripted = await run_one(client, tmp_path / "a", case, Scripted({case.name: case}))
    stored = {("default", case.name): scripted.exchanges["default", case.name]}
    dearer = scenario(orders=[{"order_id": "A-1001", "amount_cents": 2500, "customer_email": "ann@example.com"}])
    stale, _ = await run_one(client, tmp_path / "b", dearer, Recorded(stored))
    assert stale.checks[0].detail.startswith("stale: request 2 is not the one recorded")


async def test_approvals_are_answered_as_the_scenario_says(client: Client, tmp_path: Path) -> None:
    above = [{"order_id": "A-1001", "amount_cents": 4900, "customer_email": "ann@example.com"}]
    script = [
        {"call": {"lookup_order": {"order_id": "A-1001"}}},
        {"call": {"issue_refund": {"order_id": "A-1001", "amount_cents": 4900}}},
        {"say": "Done."},
    ]
    for answer, paid, status in [(True, [("A-1001", 4900)], Status.RESOLVED), (False, [], Status.DECLINED)]:
        case = scenario(f"approve-{str(answer).lower()}", orders=above, script=script, approval={"approve": answer})
        judged, _ = await run_one(client, tmp_path / str(answer), case, Scripted({case.name: case}))
        outcome = judged.ran.outcome
        assert outcome is not None
        assert judged.ran.asked_person
        assert [(r.order_id, r.amount_cents) for r in outcome.refunds] == paid
        assert outcome.status == status
        assert [a.approver for a in outcome.approvals] == ["eval-approver"]
    silent = scenario("nobody-answers", orders=above, script=script, approval=None)
    judged, _ = await run_one(client, tmp_path / "silent", silent, Scripted({silent.name: silent}))
    assert judged.ran.outcome is not None
    assert judged.ran.outcome.refunds == [], "no answer in the scenario: declined"


async def test_a_ticket_that_does_not_end_fails_saying_what_it_waited_for(client: Client, tmp_path: Path) -> None:
    """The model waits for a carrier's scan the scenario never sends: the runner gives up, ends the ticket, and
    says so, instead of waiting the 48 hours the model asked for."""
    case = scenario(
        "waits-forever",
        script=[{"call": {"wait_for_delivery_scan": {"order_id": "A-1001", "hours": 48}}}, {"say": "Delivered."}],
    )
    api = await MessagesAPI(Scripted({case.name: case})).start()
    try:
        ran = await Runner(client, api, tmp_path, timeout_seconds=4).run(case, Configuration("default"))
    finally:
        await api.stop()
    judged = Judged.of(ran)
    assert [(c.name, c.detail) for c in judged.checks] == [
        ("ticket ended", "the ticket did not end within 4 s (it was waiting for event)")
    ]
    description = await client.get_workflow_handle("eval-default-waits-forever").describe()
    assert description.status is not None
    assert description.status.name == "TERMINATED"


async def test_a_ticket_the_workflow_refuses_fails_with_its_reason(client: Client, tmp_path: Path) -> None:
    """A scenario whose ticket asks for a looser approval limit than the desk's: the workflow fails it as invalid
    input, and the scenario fails saying so, rather than taking the suite down with it."""
    case = scenario(
        "looser-than-the-desk", ticket={**LOST_PARCEL["ticket"], "options": {"approval_limit_cents": 900_000}}
    )
    judged, _ = await run_one(client, tmp_path, case, Scripted({case.name: case}))
    ((name, detail),) = [(c.name, c.detail) for c in judged.checks]
    assert name == "ticket ended"
    assert detail.startswith("the ticket failed: ")
    assert "approval_limit_cents" in detail


# --- the report ------------------------------------------------------------------------------------------------


def test_the_report_and_the_comparison_count_what_failed() -> None:
    from activities.contracts.ticket import Outcome  # noqa: PLC0415
    from agent_worker.evals.runner import Ran  # noqa: PLC0415

    outcome = Outcome(ticket_id="t", status=Status.RESOLVED, answer="I've refunded 19.00.", steps=4, model_calls=4)
    steps_only = scenario(expect={"max_steps": 4, "answer_contains": ["19.00"]})
    passing = Judged.of(Ran(steps_only, "a", outcome=outcome))
    failing = Judged.of(Ran(steps_only, "b", outcome=outcome.model_copy(update={"model_calls": 9})))
    assert passing.passed
    assert not failing.passed
    assert "steps: 9 of at most 4" in failing.failures
    assert "| **1 scenarios** | **1 passed, 0 failed** |" in table([passing], 1.0)
    compared = side_by_side([passing], [failing], 2.0)
    assert "| pass rate | 100% | 0% | -100 points |" in compared
    assert "| steps | 4 | 9 | +5 (+125%) |" in compared
    stale = Judged.of(Ran(scenario(), "a", refused="stale: request 1 is not the one recorded"))
    assert judge(stale.ran)[0].name == "model answered"
    assert not stale.passed


# --- the command, as a person runs it ----------------------------------------------------------------------------


def agent_worker(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([AGENT_WORKER, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False)


@pytest.fixture
def small_suite(tmp_path: Path) -> Path:
    suite_folder = tmp_path / "suite"
    suite_folder.mkdir()
    write(suite_folder, "lost", LOST_PARCEL)
    return suite_folder


def test_the_command_refuses_bad_requests_before_starting_anything(tmp_path: Path) -> None:
    write(tmp_path, "typo", {**LOST_PARCEL, "expect": {"max_step": 3}})
    refused = agent_worker("eval", str(tmp_path))
    assert refused.returncode == 2
    assert "typo.yaml: expect.max_step: Extra inputs are not permitted" in refused.stderr
    assert "Temporal" not in refused.stdout + refused.stderr, "no server was started"
    (tmp_path / "typo.yaml").unlink()
    write(tmp_path, "lost", LOST_PARCEL)
    refused = agent_worker("eval", str(tmp_path), "--record", "--model", "recorded")
    assert refused.returncode == 2
    assert "--record stores new responses" in refused.stderr
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "typo.yaml").write_text("AGENT_POLICY_FILE: nowhere.toml\n")
    refused = agent_worker("eval", str(tmp_path), "--compare", "default", str(tmp_path / "configs" / "typo.yaml"))
    assert refused.returncode == 2
    assert "configuration 'typo'" in refused.stderr
    assert "nowhere.toml: cannot be read" in refused.stderr


@pytest.mark.slow
def test_record_then_run_then_compare_from_the_command_line(small_suite: Path, tmp_path: Path) -> None:
    removed = small_suite / "recordings" / "default" / "removed_scenario.json"
    removed.parent.mkdir(parents=True)
    removed.write_text('{"exchanges": []}')
    recorded = agent_worker("eval", str(small_suite), "--model", "script", "--record")
    assert recorded.returncode == 0, recorded.stderr
    assert (small_suite / "recordings" / "default" / "lost.json").exists()
    assert not removed.exists(), "a recording of a scenario no longer in the suite is removed"

    report = tmp_path / "results.json"
    replayed = agent_worker("eval", str(small_suite), "--json", str(report))
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout.startswith("| scenario | result |"), "the table alone on standard output"
    results = json.loads(report.read_text())
    assert results["passed"] is True
    assert results["source"] == "recorded"
    assert results["results"][0]["steps"] == 4

    strict = tmp_path / "strict.yaml"
    (tmp_path / "strict.toml").write_text("[approval]\nlimit_cents = 1000\n")
    strict.write_text("AGENT_POLICY_FILE: strict.toml\n")
    compared = agent_worker("eval", str(small_suite), "--model", "script", "--compare", "default", str(strict))
    assert compared.returncode == 1, "the stricter desk fails the scenario"
    assert "| lost | pass | FAIL: refunds: paid nothing, expected USD 19.00 on A-1001" in compared.stdout
    assert "| pass rate | 100% | 0% | -100 points |" in compared.stdout
