"""The workers and the inbox on PostgreSQL run as a role that may read and write rows and change no table: the
schema is changed by ``agent-worker migrate`` alone, run as the role that owns it, and every other start checks the
revision and refuses an older one, naming the command. A SQLite file (the dev stack, the demo) is still migrated
by whoever opens it. Each role here is a real PostgreSQL role, made by the test with exactly those rights."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.script import ScriptDirectory
from temporalio.client import Client

from activities import migrations
from activities.business import Business
from activities.business.database import Database
from activities.contracts.ticket import Outcome
from activities.contracts.world import Order
from agent_worker.config import Settings
from agent_worker.inbox.server import InboxRefusedError, start_inbox
from tests.support.desk import LOOSE_FILE
from tests.support.harness import Harness
from tests.support.inbox import KEY, inbox_web, person, waiting_request
from tests.support.processes import AGENT_WORKER, address, exited, run, spawn_worker, worker_env
from tests.support.stores import rows_only_role
from tests.support.tickets import ticket

pytestmark = pytest.mark.timeout(180)


def inbox_settings(database_url: str, task_queue: str) -> Settings:
    """The inbox's settings on that database, with the tests' people and the key the worker holds."""
    return Settings(
        task_queue=task_queue,
        database_url=database_url,
        policy_file=LOOSE_FILE,
        web=inbox_web(),
    )


def one_revision_back() -> str:
    """The revision before this code's newest: a database the last release migrated."""
    script = ScriptDirectory.from_config(migrations.config()).get_revision(migrations.head())
    assert isinstance(script.down_revision, str)
    return script.down_revision


async def test_a_worker_and_the_inbox_pay_an_approved_refund_as_a_role_that_can_change_no_table(
    client: Client, postgres_url: str
) -> None:
    await run(AGENT_WORKER, "migrate", env={"AGENT_DATABASE_URL": postgres_url})
    owner = Business.at(postgres_url)
    owner.orders.add(Order(order_id="A-1001", amount_cents=4900, customer_email="ann@example.com"))
    task_queue = f"support-agent-{uuid.uuid4()}"
    try:
        with rows_only_role(postgres_url) as rows_only:
            refused = sa.create_engine(rows_only)
            with pytest.raises(sa.exc.ProgrammingError, match="permission denied"), refused.begin() as db:
                db.exec_driver_sql("CREATE TABLE scratch (id int)")  # the role can change no table: so no migration
            refused.dispose()
            env = worker_env(
                address(client),
                task_queue,
                None,
                AGENT_DATABASE_URL=rows_only,
                AGENT_WEB_APPROVAL_KEYS=json.dumps([KEY]),
            )
            worker = await spawn_worker(env)
            try:
                inbox = await start_inbox(inbox_settings(rows_only, task_queue), client, host="127.0.0.1", port=0)
                try:
                    handle = await Harness(client, owner, task_queue).start(ticket())
                    async with person(inbox) as ann:
                        assert await ann.sign_in("ann") == 303  # a session and the throttle's count: rows written
                        status, _ = await ann.answer(handle.id, await waiting_request(client, handle.id))
                    outcome: Outcome = await handle.result()
                finally:
                    await inbox.stop()
            finally:
                worker.terminate()
                await worker.wait()
        assert status == 303
        assert outcome.status == "resolved"
        assert [refund.amount_cents for refund in owner.payments.refunds()] == [4900]
        with owner.database.reader.connect() as db:
            assert migrations.current(db) == migrations.head()
    finally:
        owner.close()


async def test_on_a_schema_one_revision_behind_the_worker_the_inbox_and_the_commands_refuse_naming_agent_worker_migrate(
    client: Client, postgres_url: str
) -> None:
    await run(AGENT_WORKER, "migrate", env={"AGENT_DATABASE_URL": postgres_url})
    behind = one_revision_back()
    owner = Database(postgres_url)
    with owner.writer.begin() as db:
        migrations.downgrade(db, behind)
    task_queue = f"support-agent-{uuid.uuid4()}"
    try:
        with rows_only_role(postgres_url) as rows_only:
            env = worker_env(
                address(client),
                task_queue,
                None,
                AGENT_DATABASE_URL=rows_only,
                AGENT_WEB_APPROVAL_KEYS=json.dumps([KEY]),
            )
            worker = await exited(AGENT_WORKER, "worker", env=env)
            web = await exited(AGENT_WORKER, "web", "--port", "0", env=env)
            orders = await exited(AGENT_WORKER, "orders", "list", env=env)
            with pytest.raises(InboxRefusedError) as inbox:
                await start_inbox(inbox_settings(rows_only, task_queue), client, host="127.0.0.1", port=0)
            with owner.reader.connect() as db:
                untouched = migrations.current(db)
            await run(AGENT_WORKER, "migrate", env={"AGENT_DATABASE_URL": postgres_url})  # the owner's one step
            listed = await exited(AGENT_WORKER, "orders", "list", env=env)
    finally:
        owner.close()

    said = f"the business database is at revision {behind}, and this version needs revision {migrations.head()}"
    for code, _, err in (worker, web, orders):
        assert code != 0
        assert said in err
        assert "run `agent-worker migrate`" in err
        assert "Traceback" not in err
    assert said in str(inbox.value)
    assert untouched == behind  # none of them tried to migrate
    assert listed[0] == 0, listed[2]


def test_a_start_on_postgresql_checks_and_never_migrates_and_a_sqlite_file_is_migrated_for_the_demo(
    postgres_url: str, tmp_path: Path
) -> None:
    blank = Database(postgres_url)
    try:
        with pytest.raises(
            migrations.SchemaNotCurrentError, match=r"without the business schema.*agent-worker migrate"
        ):
            blank.ready()
        with blank.reader.connect() as db:
            assert migrations.current(db) is None
            assert sa.inspect(db).get_table_names() == []  # not a table made
        blank.migrate()
        assert blank.ready() == migrations.head()
        with blank.writer.begin() as db:  # a later release migrated first: this one drains on its schema
            db.execute(sa.text("UPDATE alembic_version SET version_num = '9999'"))
        assert blank.ready() == "9999"
    finally:
        blank.close()
    on_file = Database(f"sqlite:///{tmp_path / 'business.sqlite3'}")
    try:
        assert on_file.ready() == migrations.head()
    finally:
        on_file.close()
