"""The commands of ``agent-worker`` that run Temporal's side of the desk: a worker, the dev stack and the demo,
the approval inbox, the codec server, the replayer and its histories; and ``run``, how every command runs and
exits.

``agent_worker.cli.main`` parses, and each parser names the function that implements it (``set_defaults(func=...)``,
imported only when it runs); the operator commands are ``agent_worker.cli.operations``'s, those on the business
database and the policy file ``agent_worker.cli.store_commands``'s. Each command imports what it alone needs, so that a
command that reads visibility does not load the workflow, the database or a model's SDK.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import signal
import sys
from pathlib import Path

import structlog
from pydantic import ValidationError

from activities.contracts.fields import describe_errors
from agent_worker import tickets
from agent_worker.client import connect
from agent_worker.config import Settings
from agent_worker.defaults import DEFAULT_CODEC_PORT
from agent_worker.exits import Refused, exit_hard

log = structlog.get_logger(__name__)


def run(args: argparse.Namespace) -> None:
    """Run the parsed command (``args.func``), and exit with its code, through ``exit_hard`` whatever way the command
    ended: a refusal raised as ``SystemExit("why")`` (no server at that address, a setting missing) included, which
    would otherwise leave through the interpreter's teardown, where temporalio can crash (sdk-python #300), and an
    output whose reader has gone, as Python's note on SIGPIPE advises (the ``signal`` module's documentation)."""
    try:
        code = args.func(args) or 0
    except SystemExit as stop:
        if isinstance(stop.code, str):
            print(stop.code, file=sys.stderr)
        if isinstance(stop, Refused):
            code = stop.exit_code
        else:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BrokenPipeError:  # the reader stopped early (``| head``): it has what it wanted, so no traceback
        code = READER_GONE
    exit_hard(code)


READER_GONE = 128 + signal.SIGPIPE
"""The exit code of a command whose reader closed its output: a tool killed by SIGPIPE ends with it in a shell."""


def settings() -> Settings:
    """The settings, or exit 2 saying what is wrong with them. Pydantic's own text would quote the environment
    it read, secrets included, cut to their first and last characters."""
    try:
        return Settings()
    except ValidationError as error:
        print(f"agent-worker cannot start with these settings: {describe_errors(error)}", file=sys.stderr)
        raise SystemExit(2) from None


def logged() -> Settings:
    """The settings of a command that runs until stopped, its logs configured as they say."""
    from agent_worker import logs  # noqa: PLC0415 - its interceptor imports Temporal's worker

    current = settings()
    logs.configure(current.log_level, current.log_format)
    return current


# --- the commands that run until stopped -------------------------------------------------------------------------


def dev(args: argparse.Namespace) -> None:
    """The dev server, its Web UI, the approval inbox and a worker; with codec keys set, also the codec server in
    local mode, with the Web UI pointed at it, so the UI shows tickets decrypted rather than as ciphertext."""
    asyncio.run(_dev(logged(), args.port, args.ui_port))


async def _dev(settings: Settings, port: int, ui_port: int) -> None:
    from agent_worker import wiring  # noqa: PLC0415 - imports in commands: see the module's docstring
    from agent_worker.cli.devserver import dev_stack, free_port  # noqa: PLC0415
    from agent_worker.cli.worker import local_worker, run_worker  # noqa: PLC0415
    from agent_worker.codec_server.app import serve  # noqa: PLC0415
    from agent_worker.inbox.server import with_key_for_this_process  # noqa: PLC0415

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
            await run_worker(local_worker(env.client, settings, store, model))
    finally:
        if codec_server is not None:
            await codec_server.cleanup()


def worker(args: argparse.Namespace) -> None:
    """A worker on the configured cluster and business store, as production runs it: no demo orders seeded, and
    no scripted model unless ``AGENT_MODEL_BACKEND=scripted`` asks for it (exit 2 before connecting, saying what to
    set), since the script refunds for real."""
    asyncio.run(_worker(logged(), args.address, args.namespace))


async def _worker(settings: Settings, address: str | None, namespace: str | None) -> None:
    from agent_worker import model_choice  # noqa: PLC0415
    from agent_worker.cli import tracing  # noqa: PLC0415
    from agent_worker.cli.worker import serve  # noqa: PLC0415

    try:
        await serve(settings, address, namespace, plugins=tracing.plugins(enabled=settings.tracing))
    except model_choice.NoCredentialsError as error:
        print(f"agent-worker worker cannot start: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    finally:
        tracing.flush()


def metrics(args: argparse.Namespace) -> None:
    """``agent-worker metrics``: the gauges of the whole namespace read from visibility (``agent_worker.cli.metrics``)
    on ``AGENT_METRICS_BIND``, until SIGTERM or SIGINT: one such process, where every worker once read them."""
    asyncio.run(_metrics(logged(), args.address, args.namespace))


async def _metrics(settings: Settings, address: str | None, namespace: str | None) -> None:
    from agent_worker import wiring  # noqa: PLC0415
    from agent_worker.cli.metrics import report_from_visibility  # noqa: PLC0415
    from agent_worker.stopping import stop_signals  # noqa: PLC0415

    runtime = wiring.metrics_runtime(settings.metrics_bind)
    if runtime is None:
        raise Refused("agent-worker metrics needs AGENT_METRICS_BIND: the host:port to serve /metrics on")
    client = await connect(settings, address, namespace, runtime)
    with stop_signals() as stopping:
        gauges = asyncio.create_task(report_from_visibility(client, runtime.metric_meter))
        log.info("metrics from visibility", url=f"http://{settings.metrics_bind}/metrics", namespace=client.namespace)
        try:
            why = await stopping.wait()
        finally:
            gauges.cancel()
        log.info("metrics stopped", reason=why)


def codec_server(args: argparse.Namespace) -> None:
    """Local mode with only ``AGENT_CODEC_KEYS`` set (loopback only), authenticated with a token or JWT
    settings (``agent_worker.codec_server.app``); until SIGTERM or SIGINT."""
    asyncio.run(_codec_server(logged(), args.host, args.port))


async def _codec_server(settings: Settings, host: str, port: int) -> None:
    from agent_worker import wiring  # noqa: PLC0415
    from agent_worker.codec_server.app import UnsafeBindError, serve  # noqa: PLC0415
    from agent_worker.stopping import stop_signals  # noqa: PLC0415

    codec = wiring.codec(settings)
    if codec is None:
        raise SystemExit("the codec server needs AGENT_CODEC_KEYS: the keys the workers encrypt with")
    auth = wiring.codec_server_auth(settings)
    with stop_signals() as stopping:
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
        await stopping.wait()
        await runner.cleanup()


def mail_in(args: argparse.Namespace) -> None:
    """``agent-worker mail-in``: the mail receiver (``agent_worker.mail_in``), until SIGTERM or SIGINT, after which
    it takes no new message and answers those in flight (within ``AGENT_MAIL_IN_ANSWER_WITHIN_SECONDS``)."""
    asyncio.run(_mail_in(logged(), args.address, args.namespace))


async def _mail_in(settings: Settings, address: str | None, namespace: str | None) -> None:
    from temporalio.common import MetricMeter  # noqa: PLC0415

    from agent_worker import wiring  # noqa: PLC0415
    from agent_worker.mail_in import listening  # noqa: PLC0415 - only the receiver needs its mail stack
    from agent_worker.stopping import stop_signals  # noqa: PLC0415

    runtime = wiring.metrics_runtime(settings.metrics_bind)
    client = await connect(settings, address, namespace, runtime)
    meter = runtime.metric_meter if runtime is not None else MetricMeter.noop
    with stop_signals() as stopping:
        async with listening(client, settings, meter=meter):
            limits = settings.mail_in
            log.info("mail receiver listening", protocol=limits.protocol, address=f"{limits.host}:{limits.port}")
            why = await stopping.wait()
            log.info("mail receiver stopping: answering the messages in flight", reason=why)


def web(args: argparse.Namespace) -> None:
    """The approval inbox on its own, for the configured cluster: refused before connecting anywhere when it must
    not run (no signing key; no authentication on an address others can reach)."""
    asyncio.run(_web(logged(), args))


async def _web(settings: Settings, args: argparse.Namespace) -> None:
    from agent_worker.inbox.server import InboxRefusedError, check, serve_until_stopped  # noqa: PLC0415 - see main

    try:
        check(settings, settings.web.host if args.host is None else args.host)
        client = await connect(settings, args.address, args.namespace)
        await serve_until_stopped(settings, client, host=args.host, port=args.port)
    except InboxRefusedError as error:
        raise SystemExit(str(error)) from None


def web_user(args: argparse.Namespace) -> None:
    """``agent-worker web-user NAME [--new-keys]``: a person's ``AGENT_WEB_USERS`` entry, their password hashed; with
    ``--new-keys``, the environment file an inbox and its workers start from."""
    from agent_worker.inbox.server import web_user as hashed  # noqa: PLC0415 - only the inbox needs its web stack

    settings()  # refused, saying why, with settings no inbox would start with
    print(hashed(args.name, new_keys=args.new_keys))
    if args.new_keys:
        print(
            "the inbox and every worker take these settings (the workers need only AGENT_WEB_APPROVAL_KEYS); keep "
            "them secret: the key signs approvals",
            file=sys.stderr,
        )
        return
    print("add it to AGENT_WEB_USERS, a JSON object of every approver's name and hash", file=sys.stderr)


def demo(args: argparse.Namespace) -> None:
    """``agent-worker demo``: one ticket end to end on an embedded stack, narrated."""
    from agent_worker import logs  # noqa: PLC0415
    from agent_worker.cli.demo import run_demo  # noqa: PLC0415 - only the demo needs the narrator

    current = settings()
    logs.configure("WARNING", "console")
    asyncio.run(run_demo(current, decision=args.decision, question=args.question))


# --- the replayer and histories ----------------------------------------------------------------------------------


def replay(args: argparse.Namespace) -> int:
    """``agent-worker replay [paths]``: 0 every history replays, 1 one does not (or there were none)."""
    settings()  # a setting the replays would refuse is refused here, once, before they start
    return asyncio.run(_replay(args.paths, args.order))


async def _replay(paths: list[Path], order_seed: int | None) -> int:
    from agent_worker.cli.replay import HISTORIES, gate  # noqa: PLC0415

    seed = random.SystemRandom().randrange(10_000) if order_seed is None else order_seed
    verdict = await gate(paths or [HISTORIES], seed)
    for result in verdict.results:
        print(result.line(), flush=True)
    print(
        f"each replayed twice in one process (the second time in order {seed}), unsandboxed as the workers run it, "
        f"under {' and under '.join(verdict.conditions)}",
        flush=True,
    )
    failed = sum(not r.ok for r in verdict.results)
    print(f"{len(verdict.results) - failed} replayed, {failed} failed", flush=True)
    return 1 if failed or not verdict.results else 0


def capture_history(args: argparse.Namespace) -> int:
    """``agent-worker replay capture``: 0 written, 1 the history refused (it does not replay, before or after
    redaction; the keys do not open it; no such ticket), 2 the request refused (``--out``, the options)."""
    return asyncio.run(_capture_history(settings(), args))


async def _capture_history(settings: Settings, args: argparse.Namespace) -> int:
    from agent_worker import wiring  # noqa: PLC0415
    from agent_worker.capture.history import CaptureError, Redactor, Request, capture, check_out  # noqa: PLC0415

    codec = wiring.codec(settings)
    if args.encrypt and codec is None:
        print(
            "not captured: --encrypt needs AGENT_CODEC_KEYS, the key to seal the redacted payloads with",
            file=sys.stderr,
        )
        return 2
    workflow_id = tickets.workflow_id_of(args.ticket)
    request = Request(
        workflow_id,
        args.out,
        run_id=args.run_id,
        redactor=Redactor(order_ids=args.redact_order_ids) if args.redact else None,
        encrypt=args.encrypt,
        force=args.force,
    )
    try:
        check_out(args.out, force=args.force)  # before connecting: a typo costs nothing
        client = await connect(settings, args.address, args.namespace)
        captured = await capture(client, request, converter=client.data_converter, codec=codec)
    except CaptureError as error:
        print(f"not captured: {error}", file=sys.stderr)
        return error.code
    how = (
        f"{captured.payloads} payloads redacted, written {'encrypted' if args.encrypt else 'plain'}"
        if args.redact
        else "payloads as stored"
    )
    print(f"wrote {captured.events} events of {workflow_id} to {args.out} ({how}); it replays")
    return 0


def export_history(args: argparse.Namespace) -> None:
    """``agent-worker history export``: a run's history as JSON, for the replayer."""
    asyncio.run(_export_history(settings(), args))


async def _export_history(settings: Settings, args: argparse.Namespace) -> None:
    from agent_worker.cli.replay import export  # noqa: PLC0415

    client = await connect(settings, args.address, args.namespace)
    count = await export(client, args.workflow_id, args.out, args.run_id)
    print(f"wrote {count} events of {args.workflow_id} to {args.out}")
