"""The operator's side of the money policy: the policy file and its commands, what a worker answers the workflow
about it, and production defaults that cannot refund by accident (no demo orders, no script unasked)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

from activities.business import Business
from activities.business.orders import DEMO_ORDERS
from activities.contracts.fields import amount
from activities.contracts.policy import MoneyPolicy, PolicyInForce
from agent_worker import policy_file
from tests.support.harness import Harness
from tests.support.processes import AGENT_WORKER, address, spawn_worker, worker_env
from tests.support.tickets import ticket
from tests.support.waits import poll

EXAMPLE = Path(__file__).resolve().parent.parent / "deploy" / "policy.example.toml"

ROLES = """
[[approval.roles]]
name = "agent"
people = ["ann", "bob"]
max_cents = 20000

[[approval.roles]]
name = "lead"
people = ["cleo"]
max_cents = 2000000
"""


def agent_worker(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``agent-worker`` as an operator runs it, with ``env`` over this process's environment."""
    return subprocess.run(
        [AGENT_WORKER, *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=60, check=False
    )


def digest_in(text: str) -> str:
    return next(word.strip(":,.") for word in text.split() if word.startswith("sha256:"))


# --- policy check and policy show --------------------------------------------------------------------------------


def test_policy_check_passes_the_example_file_with_a_summary_and_the_digest_the_worker_will_record() -> None:
    """The one line names the rules and the digest ``MoneyPolicy.digest`` gives for the same file."""
    done = agent_worker("policy", "check", str(EXAMPLE))

    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 1
    assert (
        "refunds above 2,000 (20.00 in a two-decimal currency) wait up to 1 d for a person, "
        "two people above 50,000 (500.00 in a two-decimal currency)"
    ) in done.stdout
    assert "lead (cleo) up to 2,000,000 (20,000.00 in a two-decimal currency)" in done.stdout
    assert digest_in(done.stdout) == policy_file.read(EXAMPLE).digest()


def test_policy_check_says_what_a_two_people_threshold_below_the_approval_limit_means(tmp_path: Path) -> None:
    """Not a mistake to refuse (the one decision reads both, the strictest wins), but one to say: below the limit,
    the threshold makes every payout above it wait for two people, and the limit never asks for one alone."""
    path = tmp_path / "policy.toml"
    path.write_text("[approval]\nlimit_cents = 100000\ntwo_people_above_cents = 50000\n")

    done = agent_worker("policy", "check", str(path))

    assert done.returncode == 0, done.stderr
    assert (
        "refunds above 100,000 (1,000.00 in a two-decimal currency) wait up to 1 d for a person, two people above "
        "50,000 (500.00 in a two-decimal currency) (below the approval limit: every payout that takes a ticket's "
        "total above it needs two people);"
    ) in done.stdout
    example = agent_worker("policy", "check", str(EXAMPLE))
    assert "below the approval limit" not in example.stdout


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[approval\nlimit_cents = 2000\n", "not TOML: Expected ']'"),
        ("[approval]\nlimt_cents = 2000\n", "approval.limt_cents: Extra inputs are not permitted"),
        ("[approval]\nlimit_cents = true\n", "approval.limit_cents: Input should be a valid integer"),
        ('[approval]\nlimit_cents = "2000"\n', "approval.limit_cents: Input should be a valid integer"),
        ("[limits]\ndesk_cents_per_day = -1\n", "limits.desk_cents_per_day: Input should be greater than or equal"),
        ("[[approval.roles]]\nname='x'\npeople=['ann']\nmax_cents=-5\n", "approval.roles.0.max_cents: Input should be"),
        (ROLES.replace('"lead"', '"agent"'), "approval.roles: Value error, two roles share a name: ['agent']"),
        ("[model]\nmax_cost_usd_per_ticket = 0\n", "model.max_cost_usd_per_ticket: Input should be greater than 0"),
    ],
    ids=[
        "bad TOML",
        "unknown field",
        "true for cents",
        "a string for cents",
        "negative amount",
        "negative role reach",
        "duplicate role",
        "zero budget",
    ],
)
def test_policy_check_refuses_a_bad_file_with_exit_2_naming_the_field_and_why(
    tmp_path: Path, text: str, said: str
) -> None:
    """Strict: lax validation would read ``true`` as one cent and ``"2000"`` as a number."""
    path = tmp_path / "policy.toml"
    path.write_text(text)

    done = agent_worker("policy", "check", str(path))

    assert done.returncode == 2
    assert done.stderr.startswith(f"not a valid money policy: {path}: ")
    assert said in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_policy_check_refuses_a_file_it_cannot_read_saying_so(tmp_path: Path) -> None:
    """A missing file, a folder, and a file that is not UTF-8 text."""
    (tmp_path / "binary.toml").write_bytes(b"\xff\xfe[approval]")
    for path, said in (
        (tmp_path / "missing.toml", "cannot be read: No such file or directory"),
        (tmp_path, "cannot be read: Is a directory"),
        (tmp_path / "binary.toml", "not TOML: the file is not UTF-8 text"),
    ):
        done = agent_worker("policy", "check", str(path))

        assert done.returncode == 2
        assert f"{path}: {said}" in done.stderr
        assert "Traceback" not in done.stderr


def test_the_digest_stays_the_same_however_the_file_orders_its_tables_keys_and_roles(tmp_path: Path) -> None:
    """Only the rules name a policy: reordering the file, or the roles and their people, states the same ones."""
    one, other, changed = tmp_path / "one.toml", tmp_path / "other.toml", tmp_path / "changed.toml"
    approval = "[approval]\nlimit_cents = 1500\ntimeout_seconds = 3600\n"
    one.write_text(approval + ROLES + "\n[limits]\ncustomer_refunds_per_day = 2\n")
    other.write_text(
        "[limits]\ncustomer_refunds_per_day = 2\n\n[approval]\ntimeout_seconds = 3600\nlimit_cents = 1500\n"
        '\n[[approval.roles]]\nmax_cents = 2000000\npeople = ["cleo"]\nname = "lead"\n'
        '\n[[approval.roles]]\nname = "agent"\nmax_cents = 20000\npeople = ["bob", "ann"]\n'
    )
    changed.write_text(one.read_text().replace("limit_cents = 1500", "limit_cents = 1400"))

    digests = [digest_in(agent_worker("policy", "check", str(path)).stdout) for path in (one, other, changed)]

    assert digests[0] == digests[1]
    assert digests[2] != digests[0]


def test_policy_show_without_a_file_prints_the_defaults_as_a_file_that_checks_to_the_same_digest(
    tmp_path: Path,
) -> None:
    """What it prints is itself a policy file: an operator can start from it."""
    env = {name: value for name, value in os.environ.items() if name not in {"AGENT_POLICY_FILE", "AGENT_APPROVERS"}}
    done = subprocess.run(
        [AGENT_WORKER, "policy", "show"], env=env, capture_output=True, text=True, timeout=60, check=False
    )

    assert done.returncode == 0, done.stderr
    assert "# The money policy in force: defaults (no AGENT_POLICY_FILE)." in done.stdout
    assert "# who may approve: anyone" in done.stdout
    assert f"# digest: {MoneyPolicy().digest()}" in done.stdout
    assert "limit_cents = 2000\n" in done.stdout
    shown = tmp_path / "shown.toml"
    shown.write_text(done.stdout)
    assert digest_in(agent_worker("policy", "check", str(shown)).stdout) == MoneyPolicy().digest()


def test_policy_show_prints_the_policy_of_agent_policy_file_with_its_digest_and_an_off_rule_as_false(
    tmp_path: Path,
) -> None:
    path = tmp_path / "policy.toml"
    path.write_text("[approval]\nlimit_cents = 1000\ntwo_people_above_cents = false\n" + ROLES)
    checked = digest_in(agent_worker("policy", "check", str(path)).stdout)

    done = agent_worker("policy", "show", AGENT_POLICY_FILE=str(path))

    assert done.returncode == 0, done.stderr
    assert f"# The money policy in force: AGENT_POLICY_FILE={path}." in done.stdout
    assert f"# digest: {checked}" in done.stdout
    assert "# who may approve: the roles below" in done.stdout
    assert "limit_cents = 1000\n" in done.stdout
    assert "two_people_above_cents = false\n" in done.stdout
    assert 'name = "lead"\npeople = ["cleo"]\nmax_cents = 2000000\n' in done.stdout


def test_a_bad_policy_file_stops_the_worker_with_exit_2_before_it_connects_anywhere(tmp_path: Path) -> None:
    """A worker must never run on the defaults because the desk's file has a typo."""
    path = tmp_path / "policy.toml"
    path.write_text("[limits]\ncustomer_cents_per_day = -100\n")

    done = agent_worker("worker", AGENT_POLICY_FILE=str(path), TEMPORAL_ADDRESS="127.0.0.1:1")

    assert done.returncode == 2
    assert "AGENT_POLICY_FILE" in done.stderr
    assert "limits.customer_cents_per_day: Input should be greater than or equal to 0" in done.stderr
    assert "Traceback" not in done.stderr


def test_roles_in_the_policy_and_agent_approvers_together_are_refused_saying_to_choose_one(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(ROLES)

    done = agent_worker("policy", "show", AGENT_POLICY_FILE=str(path), AGENT_APPROVERS='["dan"]')

    assert done.returncode == 2
    assert "names approval roles and AGENT_APPROVERS lists approvers: choose one" in done.stderr
    assert "Traceback" not in done.stderr


# --- the money_policy activity, on the workers the product and the tests build ------------------------------------


@workflow.defn(sandboxed=False)
class AsksForThePolicy:
    """Asks the worker on another task queue for its policy, as the support workflow does on its own."""

    @workflow.run
    async def run(self, task_queue: str) -> PolicyInForce:
        answer: PolicyInForce = await workflow.execute_activity(
            "money_policy",
            task_queue=task_queue,
            result_type=PolicyInForce,
            start_to_close_timeout=timedelta(seconds=30),
        )
        return answer


async def policy_answered_on(client: Client, task_queue: str) -> PolicyInForce:
    """What the worker serving ``task_queue`` answers ``money_policy``, asked from a workflow."""
    asking = f"asks-{uuid.uuid4()}"
    async with Worker(client, task_queue=asking, workflows=[AsksForThePolicy]):
        answer: PolicyInForce = await client.execute_workflow(
            AsksForThePolicy.run,
            task_queue,
            id=f"asks-{uuid.uuid4()}",
            task_queue=asking,
            execution_timeout=timedelta(seconds=60),
        )
    return answer


async def test_a_worker_process_answers_the_files_policy_its_digest_and_agent_approvers(
    agent: Harness, client: Client, tmp_path: Path
) -> None:
    path = tmp_path / "policy.toml"
    path.write_text("[approval]\nlimit_cents = 1200\n[limits]\ndesk_cents_per_day = false\n")
    worker = await spawn_worker(agent.worker_env(AGENT_POLICY_FILE=str(path), AGENT_APPROVERS='["ann", "bob"]'))
    try:
        answer = await asyncio.wait_for(policy_answered_on(client, agent.task_queue), 60)
    finally:
        worker.send_signal(signal.SIGTERM)
        await asyncio.wait_for(worker.wait(), 60)

    assert answer.policy.approval.limit_cents == 1200
    assert answer.policy.limits.desk_cents_per_day is None
    assert answer.digest == answer.policy.digest()
    assert answer.default_approvers == ["ann", "bob"]


# --- production defaults -------------------------------------------------------------------------------------------


def test_a_worker_without_model_credentials_refuses_to_start_saying_what_to_set(tmp_path: Path) -> None:
    """The script it used to fall back to refunds for real."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("ANTHROPIC_")}
    env |= {"HOME": str(tmp_path), "AGENT_MODEL_BACKEND": "auto", "AGENT_DATA_DIR": str(tmp_path)}
    env |= {"TEMPORAL_ADDRESS": "127.0.0.1:1"}  # never reached: it refuses first
    done = subprocess.run([AGENT_WORKER, "worker"], env=env, capture_output=True, text=True, timeout=60, check=False)

    assert done.returncode == 2, done.stderr
    assert "agent-worker worker cannot start: no Anthropic credentials" in done.stderr
    assert "set ANTHROPIC_API_KEY" in done.stderr
    assert "AGENT_MODEL_BACKEND=scripted" in done.stderr
    assert "Traceback" not in done.stderr
    assert "Cannot reach Temporal" not in done.stderr


async def test_a_worker_told_to_run_the_script_warns_at_start_and_once_on_every_ticket(
    agent: Harness, tmp_path: Path
) -> None:
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log_file:
        worker = await spawn_worker(agent.worker_env(AGENT_LOG_FORMAT="json"), stdout=log_file, stderr=log_file)
    try:
        tickets = [
            ticket("My parcel for order A-1001 never arrived", approval_limit_cents=10_000),
            ticket("My parcel for order A-1002 never arrived", email="bob@example.com", approval_limit_cents=10_000),
        ]
        handles = [await agent.start(raw) for raw in tickets]
        await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 120)
    finally:
        worker.send_signal(signal.SIGTERM)
        await asyncio.wait_for(worker.wait(), 60)
    lines: list[dict[str, Any]] = [json.loads(line) for line in log_path.read_text().splitlines() if line[:1] == "{"]

    at_start = [line for line in lines if line["event"].startswith("model: the scripted stand-in")]
    assert [line["level"] for line in at_start] == ["warning"]
    assert "decides refunds by a script" in at_start[0]["event"]
    per_ticket = [line for line in lines if line["event"].startswith("a script, not a model, is deciding")]
    assert sorted(line["ticket_id"] for line in per_ticket) == sorted(raw["ticket_id"] for raw in tickets)
    assert {line["level"] for line in per_ticket} == {"warning"}


async def test_a_worker_on_a_fresh_database_seeds_no_demo_orders(client: Client, tmp_path: Path) -> None:
    """Before, every start wrote A-1001 ... for ann@example.com ... into whatever database it was given."""
    database = tmp_path / "business.sqlite3"
    log_path = tmp_path / "worker.log"
    env = worker_env(address(client), f"fresh-{uuid.uuid4()}", database, AGENT_LOG_FORMAT="json")
    with log_path.open("wb") as log_file:
        worker = await spawn_worker(env, stdout=log_file, stderr=log_file)
    try:

        async def polling() -> bool:
            return '"worker started"' in log_path.read_text()

        await poll(polling, timeout=60, what="the worker to start polling")
    finally:
        worker.send_signal(signal.SIGTERM)
        await asyncio.wait_for(worker.wait(), 60)

    store = Business.sqlite(database)
    try:
        assert store.orders.all() == []
    finally:
        store.close()


def test_orders_seed_demo_adds_the_demo_orders_which_orders_list_alone_never_does(tmp_path: Path) -> None:
    env = {"AGENT_DB_PATH": str(tmp_path / "business.sqlite3")}

    listed = agent_worker("orders", "list", **env)
    seeded = agent_worker("orders", "seed-demo", **env)
    again = agent_worker("orders", "seed-demo", **env)

    assert (listed.returncode, listed.stdout) == (0, "")
    assert seeded.returncode == 0, seeded.stderr
    expected = [f"{o.order_id}\t{amount(o.amount_cents, o.currency)}\t{o.customer_email}" for o in DEMO_ORDERS]
    assert sorted(seeded.stdout.splitlines()) == sorted(expected)
    assert again.stdout == seeded.stdout  # seeding twice adds nothing
