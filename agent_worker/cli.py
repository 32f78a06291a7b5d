"""``agent-worker``: run a worker, the embedded dev stack or the demo, and manage the business data."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import signal
import sys
from pathlib import Path
from typing import Any

import structlog
from pydantic import ValidationError
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.service import RPCError

from activities.contracts.approvals import Approval
from activities.contracts.fields import describe_errors, money
from activities.contracts.ticket import CustomerMessage, TicketInput
from activities.contracts.world import Order
from agent_worker import logs, metrics, operations, tracing
from agent_worker.client import connect
from agent_worker.codec_server import UnsafeBindError, serve
from agent_worker.config import Settings
from agent_worker.devserver import DEFAULT_PORT, DEFAULT_UI_PORT, free_port, start_dev_server
from agent_worker.exits import exit_hard
from agent_worker.replay import HISTORIES, export
from agent_worker.replay import replay as replay_histories
from agent_worker.worker import run_worker

log = structlog.get_logger(__name__)

DEFAULT_CODEC_PORT = 8081


OPERATOR_COMMANDS: set[str] = set()
"""The commands that talk to Temporal as a client (``operate``), filled in as their parsers are made."""


def _operator_commands(commands: Any) -> None:
    """What a person runs against tickets: each is what a ``temporal`` CLI user would type, made readable."""
    tickets = commands.add_parser("tickets", help="list tickets from Temporal's visibility (no worker needed)")
    which = tickets.add_mutually_exclusive_group()
    which.add_argument(
        "--waiting", dest="waiting_for", action="store_const", const="approval", help="as --waiting-for approval"
    )
    which.add_argument(
        "--waiting-for", choices=sorted(operations.WAITING_FOR), help="only those waiting for this (no worker needed)"
    )
    which.add_argument(
        "--stuck", action="store_true", help="only those whose workflow task keeps failing, with the failure"
    )
    tickets.add_argument("--limit", type=int, default=50)
    show = commands.add_parser("show", help="a ticket's transcript, tool calls, approvals and outcome")
    show.add_argument("ticket", help="the ticket id (T-1) or workflow id (ticket-T-1)")
    approve = commands.add_parser("approve", help="approve (or --decline) the refund a ticket waits for")
    approve.add_argument("ticket")
    approve.add_argument("--amount-cents", type=int, required=True, help="the amount you were shown")
    approve.add_argument("--approver", required=True)
    approve.add_argument("--decline", action="store_true")
    approve.add_argument("--request-id", help="the request answered (R1, ...); by default the one waiting now")
    start = commands.add_parser("start", help="start a ticket as its one run, ticket-<ticket id>; twice is once")
    start.add_argument(
        "input", type=Path, help="the ticket as JSON, as temporal workflow start --input takes it; - reads stdin"
    )
    cancel = commands.add_parser("cancel", help="end a ticket now; a refund in flight finishes first")
    cancel.add_argument("ticket")
    cancel.add_argument("--reason", required=True, help="why, for the audit trail")
    cancel.add_argument("--by", default=getpass.getuser(), help="who asks (default: this user)")
    reply = commands.add_parser("reply", help="pass on the customer's reply; it starts the ticket's next turn")
    reply.add_argument("ticket")
    reply.add_argument("text", help="what the customer wrote")
    reply.add_argument("--wait", action="store_true", help="wait for the agent's answer to it, and print it")
    retry = commands.add_parser("retry", help="reset a closed ticket to its last model call, to go on from there")
    retry.add_argument("ticket")
    retry.add_argument("--by", default=getpass.getuser(), help="who asks (default: this user)")
    for command in (tickets, show, approve, start, cancel, reply, retry):
        _where(command)
        OPERATOR_COMMANDS.add(command.prog.split()[-1])


def _where(command: argparse.ArgumentParser) -> None:
    """Which Temporal to talk to, as the ``temporal`` CLI reads it, overridable here."""
    command.add_argument("--address", help="host:port, overriding TEMPORAL_ADDRESS and the config file")
    command.add_argument("--namespace", help="overriding TEMPORAL_NAMESPACE and the config file")


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(prog="agent-worker", description=__doc__)
    commands = cli.add_subparsers(dest="command", required=True)

    worker = commands.add_parser("worker", help="run a worker against the configured Temporal cluster")
    _where(worker)

    dev = commands.add_parser("dev", help="embedded Temporal dev server with its Web UI, and a worker beside it")
    dev.add_argument("--port", type=int, default=DEFAULT_PORT)
    dev.add_argument("--ui-port", type=int, default=DEFAULT_UI_PORT)

    demo = commands.add_parser("demo", help="one support ticket end to end, with the approval asked here")
    answer = demo.add_mutually_exclusive_group()
    answer.add_argument("--approve", dest="decision", action="store_true", default=None, help="approve without asking")
    answer.add_argument("--decline", dest="decision", action="store_false", help="decline without asking")
    demo.add_argument("--question", help="the customer's words (name an order such as A-1001)")

    replay = commands.add_parser("replay", help="replay stored histories against the current workflow code")
    replay.add_argument("paths", nargs="*", type=Path, help="history files or folders (default: replay_histories/)")

    history = commands.add_parser("history", help="record a run's history for the replayer")
    history_commands = history.add_subparsers(dest="history_command", required=True)
    export = history_commands.add_parser("export", help="write a run's history as JSON")
    export.add_argument("--workflow-id", required=True)
    export.add_argument("--run-id", help="a particular run (default: the latest)")
    export.add_argument("--out", type=Path, required=True)
    _where(export)

    _operator_commands(commands)

    web = commands.add_parser("web", help="the approval inbox: a web page where people approve refunds")
    web.add_argument("--host", help="default AGENT_WEB_HOST (127.0.0.1)")
    web.add_argument("--port", type=int, help="default AGENT_WEB_PORT (8088)")
    _where(web)
    web_user = commands.add_parser("web-user", help="hash a person's inbox password, for AGENT_WEB_USERS")
    web_user.add_argument("name", help="who signs in: the approver the tickets record")

    codec = commands.add_parser("codec-server", help="decrypt payloads for the Web UI and temporal --codec-endpoint")
    codec.add_argument("--host", default="127.0.0.1")
    codec.add_argument("--port", type=int, default=DEFAULT_CODEC_PORT)

    commands.add_parser(
        "migrate", help="upgrade the business store's schema to this version's newest revision (workers also do it)"
    )

    orders = commands.add_parser("orders", help="list orders, or add one")
    orders_commands = orders.add_subparsers(dest="orders_command", required=True)
    orders_commands.add_parser("list")
    add = orders_commands.add_parser("add")
    add.add_argument("order_id")
    add.add_argument("amount_cents", type=int)
    add.add_argument("customer_email")
    return cli


async def dev(settings: Settings, port: int, ui_port: int) -> None:
    """The dev server, its Web UI, the approval inbox and a worker; with codec keys set, also the codec server in
    local mode, with the Web UI pointed at it, so the UI shows tickets decrypted rather than as ciphertext."""
    from agent_worker.inbox.server import InboxRefusedError, start_inbox, with_key_for_this_process  # noqa: PLC0415

    settings, made_key = with_key_for_this_process(settings)
    codec, codec_server, ui_args, decrypts = settings.codec(), None, [], ""
    if codec is not None:
        codec_port = free_port(DEFAULT_CODEC_PORT)
        codec_server = await serve(codec, None, f"http://localhost:{ui_port}", "127.0.0.1", codec_port)
        ui_args = ["--ui-codec-endpoint", f"http://127.0.0.1:{codec_port}"]
        decrypts = f", decrypting through the codec server on http://127.0.0.1:{codec_port}"
    env = await start_dev_server(
        settings.data_dir / "temporal.sqlite3", port=port, ui_port=ui_port, data_converter=settings.data_converter(),
        extra_args=ui_args,
    )  # fmt: skip
    inbox = None
    try:
        try:
            inbox = await start_inbox(settings, env.client, port=free_port(settings.web_port))
        except InboxRefusedError as error:
            raise SystemExit(str(error)) from None
        if made_key:
            print(
                "AGENT_WEB_APPROVAL_KEYS is not set: the inbox signs answers with a key made for this run, which only "
                "the worker beside it holds (set the same keys on both to run workers elsewhere).",
                file=sys.stderr,
                flush=True,
            )
        print(  # the last line before the worker's own: what a person (or a test) waits for
            f"Temporal dev server on 127.0.0.1:{port}, Web UI on http://localhost:{ui_port}{decrypts}; "
            f"{inbox.describe()}; history in {settings.data_dir / 'temporal.sqlite3'}. Ctrl-C stops them all.",
            file=sys.stderr,
            flush=True,
        )
        await run_worker(env.client, settings)
    finally:
        if inbox is not None:
            await inbox.stop()
        await env.shutdown()
        if codec_server is not None:
            await codec_server.cleanup()


async def worker(settings: Settings, address: str | None, namespace: str | None) -> None:
    runtime = metrics.runtime(settings.metrics_bind)
    client = await connect(
        address, namespace, settings.data_converter(), runtime, tracing.plugins(enabled=settings.tracing)
    )
    try:
        await run_worker(client, settings)
    finally:
        tracing.flush()


async def replay(settings: Settings, paths: list[Path]) -> int:
    results = await replay_histories(paths or [HISTORIES], data_converter=settings.data_converter())
    for result in results:
        print(result.line(), flush=True)
    failed = sum(not r.ok for r in results)
    print(f"{len(results) - failed} replayed, {failed} failed", flush=True)
    return 1 if failed or not results else 0


async def export_history(settings: Settings, args: argparse.Namespace) -> None:
    client = await connect(args.address, args.namespace, settings.data_converter())
    count = await export(client, args.workflow_id, args.out, args.run_id)
    print(f"wrote {count} events of {args.workflow_id} to {args.out}")


async def codec_server(settings: Settings, host: str, port: int) -> None:
    """Local mode with only ``AGENT_CODEC_KEYS`` set (loopback only), authenticated with a token or JWT
    settings (``agent_worker.codec_server``)."""
    codec = settings.codec()
    if codec is None:
        raise SystemExit("the codec server needs AGENT_CODEC_KEYS: the keys the workers encrypt with")
    auth = settings.codec_server_auth()
    try:
        runner = await serve(codec, auth, settings.codec_server_origin, host, port)
    except UnsafeBindError as error:
        raise SystemExit(str(error)) from None
    log.info(
        "codec server listening",
        url=f"http://{host}:{port}",
        cors_origin=settings.codec_server_origin,
        mode="local (loopback, no authentication)" if auth is None else "authenticated",
        jwt=settings.codec_server_jwks_url is not None,
        static_token=settings.codec_server_token is not None,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await runner.cleanup()


async def web(settings: Settings, args: argparse.Namespace) -> None:
    """The approval inbox on its own, for the configured cluster: refused before connecting anywhere when it must
    not run (no signing key; no authentication on an address others can reach)."""
    from agent_worker.inbox.server import InboxRefusedError, check, serve_until_stopped  # noqa: PLC0415 - see main

    try:
        check(settings, settings.web_host if args.host is None else args.host)
        client = await connect(args.address, args.namespace, settings.data_converter())
        await serve_until_stopped(settings, client, host=args.host, port=args.port)
    except InboxRefusedError as error:
        raise SystemExit(str(error)) from None


async def operate(settings: Settings, args: argparse.Namespace) -> int:
    """Run an operator command; its exit code: 0 done, 1 refused (by the ticket or the server), 2 bad input."""
    client = await connect(args.address, args.namespace, settings.data_converter())
    try:
        return await _operate(client, settings, args)
    except ValidationError as error:
        print(f"not sent: {describe_errors(error)}", file=sys.stderr)
        return 2
    except (operations.NotWaitingError, operations.NotRetryableError) as error:
        print(error, file=sys.stderr)
        return 1
    except WorkflowUpdateFailedError as error:  # the ticket's validator refused it
        print(f"refused: {cause_of(error)}", file=sys.stderr)
        return 1
    except RPCError as error:  # no such ticket, or it is closed
        print(f"refused: {error.message}", file=sys.stderr)
        return 1


async def _operate(client: Client, settings: Settings, args: argparse.Namespace) -> int:
    if args.command == "tickets" and args.stuck:
        await operations.list_stuck(client, limit=args.limit)
    elif args.command == "tickets":
        await operations.list_tickets(client, waiting_for=args.waiting_for, limit=args.limit)
    elif args.command == "start":
        return await start_ticket(client, args.input, settings.task_queue)
    elif args.command == "cancel":
        await operations.cancel(client, args.ticket, reason=args.reason, by=args.by)
    elif args.command == "reply":
        await operations.reply(client, args.ticket, CustomerMessage(text=args.text), wait=args.wait)
    elif args.command == "retry":
        await operations.retry(client, args.ticket, by=args.by)
    elif args.command == "show":
        await operations.show(client, args.ticket)
    else:
        answer = Approval(
            amount_cents=args.amount_cents, approved=not args.decline, approver=args.approver,
            request_id=args.request_id,
        )  # fmt: skip
        await operations.approve(client, args.ticket, answer)
    return 0


def cause_of(error: BaseException) -> str:
    while error.__cause__ is not None:
        error = error.__cause__
    return str(error)


async def start_ticket(client: Client, source: Path, task_queue: str) -> int:
    """``agent-worker start``: a ticket checked here first, so bad input is refused before anything starts."""
    text = await asyncio.to_thread(sys.stdin.read if str(source) == "-" else source.read_text)
    try:
        ticket = TicketInput.model_validate_json(text)
    except ValidationError as error:
        print(f"not started: {describe_errors(error)}", file=sys.stderr)
        return 2
    try:
        await operations.start(client, ticket, task_queue)
    except operations.DuplicateTicketError as error:
        print(error, file=sys.stderr)
        return 1
    return 0


def business(settings: Settings, args: argparse.Namespace) -> None:
    """The business store's commands: they need the database, not Temporal."""
    store = settings.business()
    if args.command == "migrate":
        logs.configure(settings.log_level, settings.log_format)  # Alembic logs each revision it runs
        print(f"{store} is at revision {store.database.migrate()}")
        return
    store.create()
    if args.orders_command == "add":
        store.orders.add(
            Order(order_id=args.order_id, amount_cents=args.amount_cents, customer_email=args.customer_email)
        )
    for order in store.orders.all():
        print(f"{order.order_id}\t{money(order.amount_cents)}\t{order.customer_email}")


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    settings = Settings()
    code = 0
    if args.command in OPERATOR_COMMANDS:
        code = asyncio.run(operate(settings, args))
    elif args.command == "replay":
        code = asyncio.run(replay(settings, args.paths))
    elif args.command == "history":
        asyncio.run(export_history(settings, args))
    elif args.command == "demo":
        logs.configure("WARNING", "console")
        from agent_worker.demo import run_demo  # noqa: PLC0415 - only the demo needs the narrator

        asyncio.run(run_demo(settings, decision=args.decision, question=args.question))
    elif args.command in {"orders", "migrate"}:
        business(settings, args)
    elif args.command == "web-user":
        from agent_worker.inbox.server import web_user  # noqa: PLC0415 - only the inbox needs its web stack

        print(web_user(args.name))
        print("add it to AGENT_WEB_USERS, a JSON object of every approver's name and hash", file=sys.stderr)
    else:
        logs.configure(settings.log_level, settings.log_format)
        if args.command == "worker":
            asyncio.run(worker(settings, args.address, args.namespace))
        elif args.command == "codec-server":
            asyncio.run(codec_server(settings, args.host, args.port))
        elif args.command == "web":
            asyncio.run(web(settings, args))
        else:
            asyncio.run(dev(settings, args.port, args.ui_port))
    exit_hard(code)
