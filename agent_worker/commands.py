"""The commands of ``agent-worker`` (``agent_worker.cli`` parses them): each imports what it alone needs, so
that a command that reads visibility does not load the workflow, the database or a model's SDK."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import structlog
from pydantic import ValidationError
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.service import RPCError

from activities.contracts.approvals import Approval
from activities.contracts.fields import amount, describe_errors
from activities.contracts.ticket import CustomerMessage, TicketInput
from activities.contracts.world import Order
from agent_worker import operations, policy_file
from agent_worker.cli import OPERATOR_COMMANDS
from agent_worker.client import connect
from agent_worker.config import Settings
from agent_worker.defaults import DEFAULT_CODEC_PORT
from agent_worker.exits import exit_hard

log = structlog.get_logger(__name__)


async def dev(settings: Settings, port: int, ui_port: int) -> None:
    """The dev server, its Web UI, the approval inbox and a worker; with codec keys set, also the codec server in
    local mode, with the Web UI pointed at it, so the UI shows tickets decrypted rather than as ciphertext."""
    from agent_worker import wiring  # noqa: PLC0415 - imports in commands: see the module's docstring
    from agent_worker.codec_server import serve  # noqa: PLC0415
    from agent_worker.devserver import dev_stack, free_port  # noqa: PLC0415
    from agent_worker.inbox.server import with_key_for_this_process  # noqa: PLC0415
    from agent_worker.worker import build_worker, run_worker  # noqa: PLC0415

    settings, made_key = with_key_for_this_process(settings)
    store, model = wiring.dev_business_and_model(settings)
    codec, codec_server, ui_args, decrypts = wiring.codec(settings), None, [], ""
    if codec is not None:
        codec_port = free_port(DEFAULT_CODEC_PORT)
        codec_server = await serve(codec, None, f"http://localhost:{ui_port}", "127.0.0.1", codec_port)
        ui_args = ["--ui-codec-endpoint", f"http://127.0.0.1:{codec_port}"]
        decrypts = f", decrypting through the codec server on http://127.0.0.1:{codec_port}"
    try:
        async with dev_stack(settings, port=port, ui_port=ui_port, extra_args=ui_args) as (env, inbox):
            if made_key:
                print(
                    "AGENT_WEB_APPROVAL_KEYS is not set: the inbox signs answers with a key made for this run, which "
                    "only the worker beside it holds (set the same keys on both to run workers elsewhere).",
                    file=sys.stderr,
                    flush=True,
                )
            print(  # the last line before the worker's own: what a person (or a test) waits for
                f"Temporal dev server on 127.0.0.1:{port}, Web UI on http://localhost:{ui_port}{decrypts}; "
                f"{inbox.describe()}; history in {settings.data_dir / 'temporal.sqlite3'}. Ctrl-C stops them all.",
                file=sys.stderr,
                flush=True,
            )
            await run_worker(env.client, settings, worker=build_worker(env.client, settings, store, model))
    finally:
        if codec_server is not None:
            await codec_server.cleanup()


async def worker(settings: Settings, address: str | None, namespace: str | None) -> None:
    """A worker on the configured cluster and business store, as production runs it: no demo orders seeded, and
    no scripted model unless ``AGENT_MODEL_BACKEND=scripted`` asks for it (exit 2 before connecting, saying what to
    set), since the script refunds for real."""
    from agent_worker import metrics, tracing, wiring  # noqa: PLC0415
    from agent_worker.worker import run_worker  # noqa: PLC0415

    try:
        wiring.require_model(settings)
    except wiring.NoCredentialsError as error:
        print(f"agent-worker worker cannot start: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    runtime = metrics.runtime(settings.metrics_bind)
    client = await connect(settings, address, namespace, runtime, tracing.plugins(enabled=settings.tracing))
    try:
        await run_worker(client, settings)
    finally:
        tracing.flush()


async def replay(settings: Settings, paths: list[Path]) -> int:
    from agent_worker import wiring  # noqa: PLC0415
    from agent_worker.replay import HISTORIES  # noqa: PLC0415
    from agent_worker.replay import replay as replay_histories  # noqa: PLC0415

    results = await replay_histories(paths or [HISTORIES], data_converter=wiring.data_converter(settings))
    for result in results:
        print(result.line(), flush=True)
    failed = sum(not r.ok for r in results)
    print(f"{len(results) - failed} replayed, {failed} failed", flush=True)
    return 1 if failed or not results else 0


async def capture_history(settings: Settings, args: argparse.Namespace) -> int:
    """``agent-worker replay capture``: 0 written, 1 the history refused (it does not replay, before or after
    redaction; the keys do not open it; no such ticket), 2 the request refused (``--out``, the options)."""
    from agent_worker import wiring  # noqa: PLC0415
    from agent_worker.capture import CaptureError, Redactor, Request, capture, check_out  # noqa: PLC0415

    codec = wiring.codec(settings)
    if args.encrypt and codec is None:
        print(
            "not captured: --encrypt needs AGENT_CODEC_KEYS, the key to seal the redacted payloads with",
            file=sys.stderr,
        )
        return 2
    request = Request(
        operations.workflow_id(args.ticket), args.out, run_id=args.run_id,
        redactor=Redactor(order_ids=args.redact_order_ids) if args.redact else None,
        encrypt=args.encrypt, force=args.force,
    )  # fmt: skip
    try:
        check_out(args.out, force=args.force)  # before connecting: a typo costs nothing
        client = await connect(settings, args.address, args.namespace)
        captured = await capture(client, request, converter=wiring.data_converter(settings), codec=codec)
    except CaptureError as error:
        print(f"not captured: {error}", file=sys.stderr)
        return error.code
    how = (
        f"{captured.payloads} payloads redacted, written {'encrypted' if args.encrypt else 'plain'}"
        if args.redact
        else "payloads as stored"
    )
    print(f"wrote {captured.events} events of {operations.workflow_id(args.ticket)} to {args.out} ({how}); it replays")
    return 0


async def export_history(settings: Settings, args: argparse.Namespace) -> None:
    from agent_worker.replay import export  # noqa: PLC0415

    client = await connect(settings, args.address, args.namespace)
    count = await export(client, args.workflow_id, args.out, args.run_id)
    print(f"wrote {count} events of {args.workflow_id} to {args.out}")


async def codec_server(settings: Settings, host: str, port: int) -> None:
    """Local mode with only ``AGENT_CODEC_KEYS`` set (loopback only), authenticated with a token or JWT
    settings (``agent_worker.codec_server``)."""
    from agent_worker import wiring  # noqa: PLC0415
    from agent_worker.codec_server import UnsafeBindError, serve  # noqa: PLC0415

    codec = wiring.codec(settings)
    if codec is None:
        raise SystemExit("the codec server needs AGENT_CODEC_KEYS: the keys the workers encrypt with")
    auth = wiring.codec_server_auth(settings)
    try:
        runner = await serve(codec, auth, settings.codec_server.origin, host, port)
    except UnsafeBindError as error:
        raise SystemExit(str(error)) from None
    log.info(
        "codec server listening",
        url=f"http://{host}:{port}",
        cors_origin=settings.codec_server.origin,
        mode="local (loopback, no authentication)" if auth is None else "authenticated",
        jwt=settings.codec_server.jwks_url is not None,
        static_token=settings.codec_server.token is not None,
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
        check(settings, settings.web.host if args.host is None else args.host)
        client = await connect(settings, args.address, args.namespace)
        await serve_until_stopped(settings, client, host=args.host, port=args.port)
    except InboxRefusedError as error:
        raise SystemExit(str(error)) from None


async def operate(settings: Settings, args: argparse.Namespace) -> int:
    """Run an operator command; its exit code: 0 done, 1 refused (by the ticket or the server), 2 bad input."""
    client = await connect(settings, args.address, args.namespace)
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
    from agent_worker import logs, wiring  # noqa: PLC0415

    store = wiring.business(settings)
    if args.command == "migrate":
        logs.configure(settings.log_level, settings.log_format)  # Alembic logs each revision it runs
        print(f"{store} is at revision {store.database.migrate()}")
        return
    store.create(seed_demo_orders=False)  # only when asked: a production store must never hold them
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
    for order, payment in store.orders.all_with_payments():
        shown = amount(order.amount_cents, order.currency)
        print("\t".join([order.order_id, shown, order.customer_email, *filter(None, [payment])]))


def web_sessions(settings: Settings, args: argparse.Namespace) -> None:
    """``agent-worker web-sessions list [NAME]`` and ``end NAME``: the inbox's sessions, in the business database
    every inbox process reads, so an ended session ends everywhere at once; no inbox needs to run."""
    from agent_worker import wiring  # noqa: PLC0415
    from agent_worker.inbox.sessions import configured  # noqa: PLC0415

    database = wiring.business_database(settings)
    database.migrate()
    try:
        sessions = configured(settings, database)
        if args.web_sessions_command == "end":
            ended = sessions.end_all(args.name)
            print(f"ended {ended} session{'' if ended == 1 else 's'} of {args.name}")
            return
        live = sessions.live(args.name)
        if not live:
            print(f"no live sessions{f' of {args.name}' if args.name else ''}")
        for session in live:
            print("\t".join([
                session.person, session.id, f"signed in {utc(session.created_at)}",
                f"last seen {utc(session.last_seen_at)}", session.address or "-", session.user_agent or "-",
            ]))  # fmt: skip
    finally:
        database.close()


def utc(moment: datetime) -> str:
    return moment.replace(tzinfo=moment.tzinfo or UTC).astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def run(args: argparse.Namespace) -> None:
    """Run the parsed command, and exit with its code, through ``exit_hard`` whatever way the command ended: a
    refusal raised as ``SystemExit("why")`` (no server at that address, a setting missing) included, which would
    otherwise leave through the interpreter's teardown, where temporalio can crash (sdk-python #300)."""
    try:
        code = _run(args)
    except SystemExit as stop:
        if isinstance(stop.code, str):
            print(stop.code, file=sys.stderr)
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    exit_hard(code)


def export_answers(settings: Settings, args: argparse.Namespace) -> int:
    """``agent-worker answers export``: the inbox's export for auditors (``agent_worker.answers``), from the
    configured business database; exit 2, saying why, for a range it does not take."""
    from agent_worker import answers, wiring  # noqa: PLC0415 - SQLAlchemy, for the store's commands alone

    store = wiring.business(settings)
    store.create(seed_demo_orders=False)
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


def _settings() -> Settings:
    """The settings, or exit 2 saying what is wrong with them. Pydantic's own text would quote the environment
    it read, secrets included, cut to their first and last characters."""
    try:
        return Settings()
    except ValidationError as error:
        print(f"agent-worker cannot start with these settings: {describe_errors(error)}", file=sys.stderr)
        raise SystemExit(2) from None


def policy(args: argparse.Namespace) -> int:
    """``agent-worker policy check FILE`` judges the file alone, whatever ``AGENT_POLICY_FILE`` names, so an operator
    checks a new policy before pointing the workers at it; ``policy show`` prints the one these settings put in
    force, as a policy file that states it (``policy check`` on it gives the same digest)."""
    if args.policy_command == "check":
        try:
            checked = policy_file.read(args.file)
        except policy_file.PolicyFileError as error:
            print(f"not a valid money policy: {error}", file=sys.stderr)
            return 2
        print(f"{args.file}: a valid money policy, {checked.digest()}: {policy_file.summary(checked)}")
        return 0
    settings = _settings()
    in_force = settings.money_policy
    source = f"AGENT_POLICY_FILE={settings.policy_file}" if settings.policy_file else "defaults (no AGENT_POLICY_FILE)"
    approvers = f"AGENT_APPROVERS: {', '.join(settings.approvers)}" if settings.approvers else "anyone"
    print(f"# The money policy in force: {source}.")
    print(f"# digest: {in_force.digest()}")
    print(f"# who may approve: {'the roles below' if in_force.approval.roles else approvers}")
    print()
    print(policy_file.to_toml(in_force), end="")
    return 0


DATABASE_COMMANDS: dict[str, Callable[[Settings, argparse.Namespace], int | None]] = {
    "orders": business, "migrate": business, "web-sessions": web_sessions, "answers": export_answers,
}  # fmt: skip
"""The commands that need the business database, not Temporal."""


def _run(args: argparse.Namespace) -> int:
    from agent_worker import logs  # noqa: PLC0415 - its interceptor imports Temporal's worker

    if args.command == "policy":
        return policy(args)
    settings = _settings()
    code = 0
    if args.command in OPERATOR_COMMANDS:
        code = asyncio.run(operate(settings, args))
    elif args.command == "replay-capture":
        code = asyncio.run(capture_history(settings, args))
    elif args.command == "replay":
        code = asyncio.run(replay(settings, args.paths))
    elif args.command == "history":
        asyncio.run(export_history(settings, args))
    elif args.command == "demo":
        logs.configure("WARNING", "console")
        from agent_worker.demo import run_demo  # noqa: PLC0415 - only the demo needs the narrator

        asyncio.run(run_demo(settings, decision=args.decision, question=args.question))
    elif args.command in DATABASE_COMMANDS:
        code = DATABASE_COMMANDS[args.command](settings, args) or 0
    elif args.command == "web-user":
        from agent_worker.inbox.server import web_user  # noqa: PLC0415 - only the inbox needs its web stack

        print(web_user(args.name))
        print("add it to AGENT_WEB_USERS, a JSON object of every approver's name and hash", file=sys.stderr)
    else:
        logs.configure(settings.log_level, settings.log_format)
        asyncio.run(serve(settings, args))
    return code


async def serve(settings: Settings, args: argparse.Namespace) -> None:
    """The commands that run until stopped."""
    if args.command == "worker":
        await worker(settings, args.address, args.namespace)
    elif args.command == "codec-server":
        await codec_server(settings, args.host, args.port)
    elif args.command == "web":
        await web(settings, args)
    else:
        await dev(settings, args.port, args.ui_port)
