"""The commands on what the desk keeps outside Temporal: the business database (its schema, the orders, the
inbox's sessions, the answers for auditors) and the money policy file. None of them connects to Temporal but
``migrate --search-attributes``, the release's one step on Temporal's side.

SQLAlchemy and the migrations are imported inside each command, so the others do not load them.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime

from activities.business.refusals import OrderNotFoundError
from activities.contracts.fields import amount
from activities.contracts.world import Order
from agent_worker import policy_file
from agent_worker.cli.commands import settings
from agent_worker.config import Settings


def migrate(args: argparse.Namespace) -> None:
    """``agent-worker migrate``: the business store's schema brought to this version's newest revision, the one step
    that changes the schema of a database server (run it as the role that owns it); everything else checks. With
    ``--search-attributes``, also the release's step on Temporal's side: the search attributes every ticket sets,
    registered in the namespace (the one command here that connects to Temporal, and only when asked)."""
    from agent_worker import logs, wiring  # noqa: PLC0415

    configured = settings()
    store = wiring.business(configured)
    logs.configure(configured.log_level, configured.log_format)  # Alembic logs each revision it runs
    print(f"{store} is at revision {store.database.migrate()}")
    if args.search_attributes:
        asyncio.run(_register_search_attributes(configured, args.address, args.namespace))


async def _register_search_attributes(configured: Settings, address: str | None, namespace: str | None) -> None:
    from agent_worker.client import connect, ensure_search_attributes  # noqa: PLC0415 - Temporal, when asked

    client = await connect(configured, address, namespace)
    created = await ensure_search_attributes(client)
    print(
        f"search attributes in namespace {client.namespace}: "
        + (f"registered {', '.join(created)}" if created else "all there")
    )


def orders(args: argparse.Namespace) -> None:
    """``agent-worker orders list | add | event | seed-demo``: the orders (or an order's event log), after adding
    what was asked."""
    from agent_worker import wiring  # noqa: PLC0415

    store = wiring.business_ready(settings())  # never seeded unasked: a production store must not hold the demo's
    if args.orders_command == "seed-demo":
        store.orders.seed()
    if args.orders_command == "add":
        store.orders.add(
            Order(
                order_id=args.order_id,
                amount_cents=args.amount_cents,
                customer_email=args.customer_email,
                currency=args.currency,
            ),
            stripe_payment=args.stripe_payment,
        )
    if args.orders_command == "event":
        try:
            store.orders.order(args.order_id)
        except OrderNotFoundError as error:
            raise SystemExit(f"not added: {error}") from None
        if not args.text.strip() or "\n" in args.text:
            raise SystemExit("not added: an event is one line of text")
        store.orders.add_event(args.order_id, args.text.strip())
        print("\n".join(store.orders.events(args.order_id)))
        return
    for order, payment in store.orders.all_with_payments():
        shown = amount(order.amount_cents, order.currency)
        print("\t".join([order.order_id, shown, order.customer_email, *filter(None, [payment])]))


def web_sessions(args: argparse.Namespace) -> None:
    """``agent-worker web-sessions list [NAME]`` and ``end NAME``: the inbox's sessions, in the business database
    every inbox process reads, so an ended session ends everywhere at once; no inbox needs to run."""
    from agent_worker import wiring  # noqa: PLC0415
    from agent_worker.inbox.sessions import configured  # noqa: PLC0415

    current = settings()
    database = wiring.business_database(current)
    try:
        wiring.schema_ready(database)
        sessions = configured(current, database)
        if args.web_sessions_command == "end":
            ended = sessions.end_all(args.name)
            print(f"ended {ended} session{'' if ended == 1 else 's'} of {args.name}")
            return
        live = sessions.live(args.name)
        if not live:
            print(f"no live sessions{f' of {args.name}' if args.name else ''}")
        for session in live:
            print(
                "\t".join(
                    [
                        session.person,
                        session.id,
                        f"signed in {utc(session.created_at)}",
                        f"last seen {utc(session.last_seen_at)}",
                        session.address or "-",
                        session.user_agent or "-",
                    ]
                )
            )
    finally:
        database.close()


def utc(moment: datetime) -> str:
    return moment.replace(tzinfo=moment.tzinfo or UTC).astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def export_answers(args: argparse.Namespace) -> int:
    """``agent-worker answers export``: the inbox's export for auditors (``agent_worker.answers``), from the
    configured business database; exit 2, saying why, for a range it does not take."""
    from agent_worker import answers, wiring  # noqa: PLC0415 - SQLAlchemy, for the store's commands alone

    store = wiring.business_ready(settings())
    try:
        lines = answers.export(store.audit, args.start, args.end, personal=args.personal)
    except answers.ExportRefusedError as error:
        print(f"not exported: {error}", file=sys.stderr)
        return 2
    if args.output is None:
        sys.stdout.writelines(lines)
        return 0
    with args.output.open("w", newline="", encoding="utf-8") as out:
        out.writelines(lines)
    return 0


def policy(args: argparse.Namespace) -> int:
    """``agent-worker policy check FILE`` judges the file alone, whatever ``AGENT_POLICY_FILE`` names (or whatever
    else the settings hold), so an operator checks a new policy before pointing the workers at it; ``policy show``
    prints the one these settings put in force, as a policy file that states it (``policy check`` on it gives the
    same digest)."""
    if args.policy_command == "check":
        try:
            checked = policy_file.read(args.file)
        except policy_file.PolicyFileError as error:
            print(f"not a valid money policy: {error}", file=sys.stderr)
            return 2
        print(f"{args.file}: a valid money policy, {checked.digest()}: {policy_file.summary(checked)}")
        return 0
    from agent_worker import wiring  # noqa: PLC0415

    current = settings()
    in_force = wiring.money_policy(current)
    source = f"AGENT_POLICY_FILE={current.policy_file}" if current.policy_file else "defaults (no AGENT_POLICY_FILE)"
    approvers = f"AGENT_APPROVERS: {', '.join(current.approvers)}" if current.approvers else "anyone"
    print(f"# The money policy in force: {source}.")
    print(f"# digest: {in_force.digest()}")
    print(f"# who may approve: {'the roles below' if in_force.approval.roles else approvers}")
    print(f"# amounts (*_cents) count the smallest unit of the order's currency: {policy_file.in_each_currency(2000)}")
    print()
    print(policy_file.to_toml(in_force), end="")
    return 0
