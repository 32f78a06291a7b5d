"""Schema migrations: what start-up does to a new store, to one made before migrations, to one a revision
behind, and to one that several workers start on at once."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from activities import migrations
from activities.business import Business
from activities.business.orders import DEMO_ORDERS
from activities.business.schema import metadata
from activities.business.unattended import Totals
from activities.contracts.policy import Limits
from activities.contracts.world import EmailRequest, Order, RefundReceipt, RefundRequest
from tests.support.processes import AGENT_WORKER

BlankStore = Callable[..., Business]


@pytest.fixture(params=["sqlite", "postgresql"])
def blank_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BlankStore]:
    """Makes a store on each backend without creating its schema: the test decides what is there first."""
    url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else None
    made: list[Business] = []

    def make(**settings: Any) -> Business:
        made.append(Business.at(url or f"sqlite:///{tmp_path / 'business.sqlite3'}", **settings))
        return made[-1]

    yield make
    for store in made:
        store.close()


def baseline() -> sa.MetaData:
    """The schema of revision 0001, which is also what ``create_all`` made before migrations existed."""
    module = ScriptDirectory.from_config(migrations.config()).get_revision(migrations.BASELINE).module
    schema: sa.MetaData = module.baseline
    return schema


def differences(store: Business, schema: sa.MetaData = metadata) -> list[Any]:
    """How the database differs from ``schema``: Alembic's autogenerate comparison, which is what
    ``alembic check`` runs, plus the CHECK constraints (the refund guard's) that comparison does not see."""
    with store.database.writer.connect() as db:
        found: list[Any] = compare_metadata(MigrationContext.configure(db), schema)
        inspector = sa.inspect(db)
        for table in schema.sorted_tables:
            constraints = [*table.constraints, *(c for column in table.columns for c in column.constraints)]
            declared = {str(c.sqltext) for c in constraints if isinstance(c, sa.CheckConstraint)}
            present = {c["sqltext"] for c in inspector.get_check_constraints(table.name)}
            if declared != present:
                found.append(("check constraints", table.name, declared, present))
    return found


def revision(store: Business) -> str | None:
    with store.database.writer.connect() as db:
        return migrations.current(db)


def test_a_new_store_migrated_at_start_up_has_exactly_the_schema_the_code_declares(blank_store: BlankStore) -> None:
    """A change to ``metadata`` without a revision that makes it fails here, on both backends."""
    store = blank_store().create()
    assert revision(store) == migrations.head()
    assert differences(store) == []
    assert {o.order_id for o in store.orders.all()} == {o.order_id for o in DEMO_ORDERS}


def old_order(store: Business, schema: sa.MetaData, **row: Any) -> None:
    """An order as the code of ``schema``'s time wrote it: only the columns it had."""
    with store.database.writer.begin() as db:
        db.execute(schema.tables["orders"].insert().values(**row))


def old_refund(store: Business, schema: sa.MetaData, *, order_id: str, amount_cents: int, key: str) -> RefundReceipt:
    """A refund as the embedded provider of ``schema``'s time booked it: its row, and its key's row naming it. Today's
    code reads columns and tables that ``schema`` lacks (an order's currency, store credit), so it cannot write one."""
    with store.database.writer.begin() as db:
        refund_id = db.execute(
            schema.tables["refunds"].insert().returning(schema.tables["refunds"].c.id),
            {
                "order_id": order_id,
                "amount_cents": amount_cents,
                "idempotency_key": key,
                "created_at": datetime.now(UTC),
            },
        ).scalar_one()
        db.execute(
            schema.tables["idempotency_keys"].insert(),
            {
                "key": key,
                "request": f"refund {order_id} {amount_cents}",  # the fingerprint as it was written then
                "result_id": refund_id,
                "created_at": datetime.now(UTC),
            },
        )
    return RefundReceipt(refund_id=refund_id, order_id=order_id, amount_cents=amount_cents)


def test_a_store_made_before_migrations_is_adopted_at_the_baseline_and_keeps_its_orders_and_refunds(
    blank_store: BlankStore,
) -> None:
    store = blank_store()
    schema = baseline()
    schema.create_all(store.database.writer)  # what Business.create did before migrations
    old_order(store, schema, order_id="L-1", amount_cents=2500, customer_email="old@example.com")
    paid = old_refund(store, schema, order_id="L-1", amount_cents=700, key="refund:legacy")

    store.create()

    assert revision(store) == migrations.head()
    assert differences(store) == []
    assert store.orders.order("L-1").customer_email == "old@example.com"
    assert store.payments.refunds("L-1") == [paid]
    again = store.payments.refund(RefundRequest(order_id="L-1", amount_cents=700, idempotency_key="refund:legacy"))
    assert again.replayed  # the idempotency key written before the upgrade still holds


def test_a_store_older_than_the_blob_and_event_tables_gets_them_at_start_up(blank_store: BlankStore) -> None:
    """Stores made before content-addressed blobs existed lack two tables; create_all used to add them."""
    store = blank_store()
    schema = baseline()
    older = [table for table in schema.sorted_tables if table.name not in {"blobs", "order_events"}]
    schema.create_all(store.database.writer, tables=older)
    old_order(store, schema, order_id="L-2", amount_cents=900, customer_email="older@example.com")

    store.create()

    assert differences(store) == []
    store.orders.add_event("L-2", "shipped")
    assert store.orders.events("L-2") == ["shipped"]


ORDER_NOTES = '''
"""A note on each order, written by the test as the next revision a deploy would bring (after ``newest``)."""
import sqlalchemy as sa
from alembic import op

revision = "0099"
down_revision = "{newest}"
branch_labels = None
depends_on = None
# SQLite drops a column by copying the table, which would lose its unnamed CHECK unless it is passed again.
KEEP_CHECKS = (sa.CheckConstraint("amount_cents >= 0"),)


def upgrade() -> None:
    with op.batch_alter_table("orders", table_args=KEEP_CHECKS) as batch:
        batch.add_column(sa.Column("note", sa.Text, nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("orders", table_args=KEEP_CHECKS) as batch:
        batch.drop_column("note")
'''


def with_order_notes() -> sa.MetaData:
    """``metadata`` as the code would declare it alongside revision 0099."""
    schema = sa.MetaData()
    for table in metadata.sorted_tables:
        table.to_metadata(schema)
    schema.tables["orders"].append_column(sa.Column("note", sa.Text, nullable=False, server_default=""))
    return schema


def test_a_revision_added_after_a_store_exists_is_applied_at_the_next_start_and_undone_by_a_downgrade(
    blank_store: BlankStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = blank_store().create()
    paid = store.payments.refund(RefundRequest(order_id="A-1001", amount_cents=100, idempotency_key="refund:1"))
    before = migrations.head()
    versions = tmp_path / "versions"
    versions.mkdir()
    (versions / "0099_order_notes.py").write_text(ORDER_NOTES.format(newest=before))
    monkeypatch.setattr(migrations, "VERSIONS", (*migrations.VERSIONS, versions))

    assert [d[0] for d in differences(store, with_order_notes())] == ["add_column"]  # what CI would report

    store.create()  # the next worker start, on code that brings 0099

    assert revision(store) == "0099"
    assert differences(store, with_order_notes()) == []
    assert store.orders.order("A-1001").amount_cents == 4900
    assert store.payments.refunds() == [paid]

    with store.database.writer.begin() as db:
        assert migrations.downgrade(db, before) == before
    assert differences(store) == []
    assert store.payments.refunds() == [paid]


# A worker process up to the point where it opens the store, then waiting for the word to start it.
WORKER_START = """
import sys
from activities.business import Business
store = Business.at(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
store.create()
"""


def test_eight_workers_starting_at_once_on_a_new_postgresql_store_all_start(postgres_url: str) -> None:
    """Without the advisory lock, two of them run the same CREATE TABLE and one fails to start."""
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER_START, postgres_url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(8)
    ]
    for worker in workers:
        assert worker.stdout is not None
        assert worker.stdout.readline() == "ready\n"
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    errors = [worker.communicate(timeout=60)[1] for worker in workers]

    assert [worker.returncode for worker in workers] == [0] * 8, "\n".join(errors)
    store = Business.at(postgres_url)
    try:
        assert revision(store) == migrations.head()
        assert differences(store) == []
        assert len(store.orders.all()) == len(DEMO_ORDERS)
    finally:
        store.close()


def test_agent_worker_migrate_upgrades_the_configured_store_and_prints_its_revision(postgres_url: str) -> None:
    env = {**os.environ, "AGENT_DATABASE_URL": postgres_url}
    done = subprocess.run([AGENT_WORKER, "migrate"], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith(f"at revision {migrations.head()}")
    store = Business.at(postgres_url)
    try:
        assert differences(store) == []
        assert store.orders.all() == []  # migrating is not starting a worker: no demo orders
    finally:
        store.close()


def test_emails_sent_before_the_outbox_could_deliver_still_count_as_sent_and_are_not_sent_again(
    blank_store: BlankStore,
) -> None:
    """Revision 0003 adds delivery to the emails table; what the embedded outbox recorded before it was sent."""
    store = blank_store().create()
    email = EmailRequest(to="ann@example.com", subject="Refund", body="49.00", idempotency_key="email:old")
    store.mail.send_email(email)
    with store.database.writer.begin() as db:  # the row and key as the code of revision 0002 wrote them
        assert migrations.downgrade(db, "0002") == "0002"

    store.create()

    assert differences(store) == []
    assert store.mail.sent() == [email]
    assert store.mail.send_email(email).replayed
    assert len(store.mail.outbox()) == 1


def test_refunds_made_before_limits_were_counted_stay_paid_and_the_count_starts_at_the_upgrade(
    blank_store: BlankStore,
) -> None:
    """Revision 0005 adds the count of refunds without a person; what was paid before it is not counted."""
    store = blank_store().create()
    paid = store.payments.refund(RefundRequest(order_id="A-1001", amount_cents=4900, idempotency_key="refund:old"))
    with store.database.writer.begin() as db:  # the row and key as the code of revision 0004 wrote them
        assert migrations.downgrade(db, "0004") == "0004"

    store.create()

    assert differences(store) == []
    assert store.payments.refunds() == [paid]
    assert store.unattended.totals() == Totals()
    unattended = RefundRequest(
        order_id="A-1005",
        amount_cents=2500,
        idempotency_key="refund:new",
        customer_email="ann@example.com",
        limits=Limits(customer_cents_per_day=5000),
    )
    store.payments.refund(unattended)
    assert store.unattended.totals("ann@example.com") == Totals(cents=2500, refunds=1)


def test_refunds_counted_before_the_count_kept_currencies_take_their_orders_currency(blank_store: BlankStore) -> None:
    """Revision 0010 keeps each counted refund's currency, for the words of a reason; a refund or store credit
    counted before it takes the currency of the order it names."""
    store = blank_store().create()
    limits = Limits(customer_cents_per_day=100_000)
    for order_id, currency in (("A-0910", "JPY"), ("A-0911", "KWD")):
        store.orders.add(Order(order_id=order_id, amount_cents=1500, customer_email="jo@x.io", currency=currency))
    store.payments.refund(
        RefundRequest(
            order_id="A-0910", amount_cents=1500, idempotency_key="refund:yen", customer_email="jo@x.io", limits=limits
        )
    )
    store.credits.issue(
        RefundRequest(
            order_id="A-0911",
            amount_cents=700,
            idempotency_key="credit:dinars",
            customer_email="jo@x.io",
            limits=limits,
        )
    )
    with store.database.writer.begin() as db:
        assert migrations.downgrade(db, "0009") == "0009"

    store.create()

    assert differences(store) == []
    assert store.unattended.totals("jo@x.io").by_currency == {"JPY": 1500, "KWD": 700}


def test_orders_held_before_orders_had_a_currency_read_as_dollars_and_new_ones_keep_theirs(
    blank_store: BlankStore,
) -> None:
    """Revision 0006 adds the orders' currency; everything before it assumed dollars."""
    store = blank_store().create()
    with store.database.writer.begin() as db:
        assert migrations.downgrade(db, "0005") == "0005"
        db.execute(
            sa.text("INSERT INTO orders (order_id, amount_cents, customer_email) VALUES ('A-0900', 700, 'o@x.io')")
        )

    store.create()

    assert differences(store) == []
    assert store.orders.order("A-0900").currency == "USD"
    store.orders.add(Order(order_id="A-0901", amount_cents=700, customer_email="o@x.io", currency="jpy"))
    assert store.orders.order("A-0901").currency == "JPY"
