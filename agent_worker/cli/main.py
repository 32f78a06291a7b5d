"""``agent-worker``: run a worker, the embedded dev stack or the demo, and manage the business data.

This module is only the command line: it parses, and each command's parser names the function that implements it
(``set_defaults(func=Runs(...))``), which is imported only when it runs, so that ``--help`` and a typo cost no
import of Temporal, the workflow or the database (``bench/cold_start.py``). Nothing here is imported by the
commands, nor imports them before one runs.
"""

from __future__ import annotations

import argparse
import getpass
import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from activities.contracts.fields import DEFAULT_CURRENCY
from agent_worker.defaults import DEFAULT_CODEC_PORT, DEFAULT_PORT, DEFAULT_UI_PORT, WAITING_KINDS


class _Version(argparse.Action):
    """``--version``: the installed release, read only when asked for, so that no other command pays for it."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        import importlib.metadata  # noqa: PLC0415 - read only when asked for

        print(f"agent-worker {importlib.metadata.version('agent-worker')}")
        parser.exit()


SHOWN_ARGUMENT = 60
"""How much of an argument that is not a readable file ``start`` quotes back: enough to recognise it."""


def ticket_text(argument: str) -> str:
    """``start``'s argument read as it is parsed: the text of the file it names (``-``: standard input). One that is
    not a readable file is refused with a sentence (an ``argparse`` error: exit 2), never a traceback, saying which
    argument (its head: a long one may be a whole ticket pasted), what the system said, and what ``start`` takes."""
    try:
        return sys.stdin.read() if argument == "-" else Path(argument).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise argparse.ArgumentTypeError(unreadable(argument, error)) from None


def unreadable(argument: str, error: OSError | UnicodeDecodeError) -> str:
    """Why ``start`` cannot read its argument, in a sentence; one that looks like the JSON itself is told how to pass
    that."""
    shown = (
        argument if len(argument) <= SHOWN_ARGUMENT else f"{argument[:SHOWN_ARGUMENT]}... ({len(argument)} characters)"
    )
    if argument.lstrip().startswith(("{", "[")):
        return (
            f"{shown!r} is not a file: start takes a file holding the ticket as JSON, not the JSON itself; to pass it "
            "inline, pipe it in: echo '{...}' | agent-worker start -"
        )
    why = error.strerror if isinstance(error, OSError) and error.strerror else "not UTF-8 text"
    return f"cannot read {shown!r} ({why}): start takes a file holding the ticket as JSON, or - for standard input"


@dataclass(frozen=True)
class Runs:
    """What a command runs: the function ``name`` of ``agent_worker.<module>``, called with the parsed arguments
    and returning the exit code (None for 0). Named rather than imported, so that parsing imports none of it. A
    program besides the worker names its ``extra`` (``agent_worker.extras``): without it installed, the command
    exits 2 saying what to install, before it imports anything."""

    module: str
    name: str
    extra: str | None = None

    def implementation(self) -> Any:
        return getattr(importlib.import_module(f"agent_worker.{self.module}"), self.name)

    def __call__(self, args: argparse.Namespace) -> int | None:
        if self.extra is not None:
            from agent_worker import extras  # noqa: PLC0415 - only when a program's command runs

            try:
                extras.require(self.extra, args.command)
            except extras.MissingExtraError as error:
                print(error, file=sys.stderr)
                return 2
        code: int | None = self.implementation()(args)
        return code


def _eval_command(commands: Any) -> None:
    """``agent-worker eval DIR`` (``agent_worker.evals``): a suite of scenarios as real tickets, judged."""
    parser = commands.add_parser(
        "eval",
        help="run a suite of scenarios as real tickets and judge what they did (agent-worker eval evals/)",
        description="Run every scenario in DIR as a real ticket on a worker and a dev server of its own, and check "
        "what it must do: refunds, approvals, emails, status, steps, cost, the answer's words.",
    )
    parser.add_argument("dir", type=Path, help="the folder of scenario files (YAML or JSON)")
    parser.add_argument(
        "--model",
        choices=("recorded", "script", "claude"),
        default=None,
        help="where the model's responses come from: recorded (the default without --record), script (each "
        "scenario's script:), or claude (Anthropic's API, with ANTHROPIC_API_KEY; the default with --record)",
    )
    parser.add_argument(
        "--record",
        action="store_true",
        help="store every response under DIR/recordings/<configuration>/, for runs without a key to replay",
    )
    parser.add_argument(
        "--compare",
        nargs=2,
        type=Path,
        metavar=("A", "B"),
        help="run the suite under two configurations (files of AGENT_* settings, or the word default) side by side",
    )
    parser.add_argument("--only", action="append", metavar="NAME", help="run only this scenario (repeatable)")
    parser.add_argument("--parallel", type=int, default=4, help="scenarios running at once (default 4)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the results as JSON, for CI")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds a scenario's ticket may take")
    parser.set_defaults(func=Runs("evals.command", "run", extra="evals"))


TICKET_HELP = "the ticket id (T-1) or workflow id (ticket-T-1)"


def _operator_commands(commands: Any) -> None:
    """What a person runs against tickets: each is what a ``temporal`` CLI user would type, made readable."""
    tickets = commands.add_parser("tickets", help="list tickets from Temporal's visibility (no worker needed)")
    which = tickets.add_mutually_exclusive_group()
    which.add_argument(
        "--waiting", dest="waiting_for", action="store_const", const="approval", help="as --waiting-for approval"
    )
    which.add_argument("--waiting-for", choices=WAITING_KINDS, help="only those waiting for this (no worker needed)")
    which.add_argument(
        "--stuck",
        action="store_true",
        help="only those whose workflow task, or an activity retried until it succeeds, keeps failing, and why",
    )
    tickets.add_argument("--limit", type=int, default=50, help="list at most this many tickets (default 50)")
    show = commands.add_parser("show", help="a ticket's transcript, tool calls, approvals and outcome")
    show.add_argument("ticket", help=TICKET_HELP)
    approve = commands.add_parser(
        "approve",
        help="approve (or --decline) the refund a ticket waits for, and say what the ticket and the money made of it",
        epilog="Exit codes: 0 the answer decided the request (approved and the payout booked; declined), 3 one "
        "approval of several recorded (nothing paid yet), 4 the ticket does not count it, with the reason (not sent "
        "where its rules tell beforehand: under roles or two people a signal's approval never counts), 5 sent but not "
        "judged yet (no worker took it), 6 approved but the booking refused the payment (nothing paid; the reason is "
        "printed), 7 approved and the payment still open, 1 nothing of that amount waits or the server refused, "
        "2 bad input.",
    )
    approve.add_argument("ticket", help=TICKET_HELP)
    approve.add_argument("--amount-cents", type=int, required=True, help="the amount you were shown")
    approve.add_argument(
        "--approver", required=True, help="who answers, as the ticket records it (a claim: a signal proves no one)"
    )
    approve.add_argument("--decline", action="store_true", help="decline the refund instead of approving it")
    approve.add_argument("--request-id", help="the request answered (R1, ...); by default the one waiting now")
    start = commands.add_parser(
        "start",
        help="start a ticket as its one run, ticket-<ticket id>; twice is once",
        description="Start the ticket in FILE: a file holding one JSON object, the ticket as temporal workflow start "
        "--input takes it. Not the JSON itself: to pass it inline, pipe it in with - (echo '{...}' | agent-worker "
        "start -).",
    )
    start.add_argument(
        "input",
        metavar="FILE",
        type=ticket_text,
        help="a file holding the ticket as JSON (- reads it from standard input)",
    )
    cancel = commands.add_parser("cancel", help="end a ticket now; a refund in flight finishes first")
    cancel.add_argument("ticket", help=TICKET_HELP)
    cancel.add_argument("--reason", required=True, help="why, for the audit trail")
    cancel.add_argument("--by", default=getpass.getuser(), help="who asks (default: this user)")
    reply = commands.add_parser("reply", help="pass on the customer's reply; it starts the ticket's next turn")
    reply.add_argument("ticket", help=TICKET_HELP)
    reply.add_argument("text", help="what the customer wrote")
    reply.add_argument("--wait", action="store_true", help="wait for the agent's answer to it, and print it")
    retry = commands.add_parser("retry", help="reset a closed ticket to its last model call, to go on from there")
    retry.add_argument("ticket", help=TICKET_HELP)
    retry.add_argument("--by", default=getpass.getuser(), help="who asks (default: this user)")
    patches = commands.add_parser(
        "patches", help="the workflow's patches and the oldest open ticket: when a patch may be retired"
    )
    tickets.set_defaults(func=Runs("cli.operations", "list_tickets"))
    for command in (show, approve, start, cancel, reply, retry, patches):
        command.set_defaults(func=Runs("cli.operations", command.prog.split()[-1]))
    for command in (tickets, show, approve, start, cancel, reply, retry, patches):
        _where(command)


def _web_commands(commands: Any) -> None:
    """The approval inbox, its people's password hashes, and their sessions."""
    web = commands.add_parser("web", help="the approval inbox: a web page where people approve refunds")
    web.add_argument("--host", help="default AGENT_WEB_HOST (127.0.0.1)")
    web.add_argument("--port", type=int, help="default AGENT_WEB_PORT (8088)")
    _where(web)
    web.set_defaults(func=Runs("cli.commands", "web", extra="inbox"))
    web_user = commands.add_parser(
        "web-user",
        help="hash a person's inbox password, for AGENT_WEB_USERS (with --new-keys: the inbox's settings, to start)",
        description="Read NAME's password (asked twice at a terminal, else the first line of standard input, 12 "
        "characters or more) and print its AGENT_WEB_USERS entry; with --new-keys, an environment file with new "
        "approval keys as well.",
    )
    web_user.add_argument("name", help="who signs in: the approver the tickets record")
    web_user.add_argument(
        "--new-keys",
        action="store_true",
        help="also make a new approval key, and print AGENT_WEB_APPROVAL_KEYS and AGENT_WEB_USERS (this person alone) "
        "as an environment file for the inbox and its workers",
    )
    web_user.set_defaults(func=Runs("cli.commands", "web_user", extra="inbox"))
    web_sessions = commands.add_parser("web-sessions", help="the inbox's live sessions: list them, or end a person's")
    web_sessions_commands = web_sessions.add_subparsers(dest="web_sessions_command", required=True)
    listed = web_sessions_commands.add_parser("list", help="who is signed in, since when, last seen, from where")
    listed.add_argument("name", nargs="?", help="only this person's")
    ended = web_sessions_commands.add_parser(
        "end", help="sign a person out everywhere at once, in every inbox process (a lost laptop, someone leaving)"
    )
    ended.add_argument("name", help="whose sessions to end")
    web_sessions.set_defaults(func=Runs("cli.store_commands", "web_sessions"))


def _store_commands(commands: Any) -> None:
    """The business store's schema and orders, the money policy file, and the answers for auditors."""
    migrate = commands.add_parser(
        "migrate",
        help="upgrade the business store's schema to this version's newest revision, before workers and inbox start",
        description="Upgrade the business store's schema (AGENT_DATABASE_URL, else AGENT_DB_PATH, else "
        "business.sqlite3 in AGENT_DATA_DIR) to this version's newest revision. On PostgreSQL this is the one step "
        "that changes the schema: run it as the role that owns it, before the workers and the inbox start, which "
        "only check the revision and refuse to start on an older one. A SQLite file is also migrated at every start. "
        "With --search-attributes, it then registers the search attributes every ticket sets in the Temporal "
        "namespace (TEMPORAL_* names it), which the workers only check.",
    )
    migrate.add_argument(
        "--search-attributes",
        action="store_true",
        help="also register the workflow's search attributes in the Temporal namespace (needs operator rights)",
    )
    _where(migrate)
    migrate.set_defaults(func=Runs("cli.store_commands", "migrate"))

    policy = commands.add_parser("policy", help="check a money policy file, or show the policy in force")
    policy_commands = policy.add_subparsers(dest="policy_command", required=True)
    check = policy_commands.add_parser(
        "check", help="validate a policy file: its summary and digest (exit 0), or the field and what is wrong (exit 2)"
    )
    check.add_argument("file", type=Path, help="a TOML policy file, as AGENT_POLICY_FILE names one")
    policy_commands.add_parser("show", help="the policy in force (AGENT_POLICY_FILE, else the defaults) as TOML")
    policy.set_defaults(func=Runs("cli.store_commands", "policy"))

    orders = commands.add_parser("orders", help="list orders, add one or an event of one, or add the demo's")
    orders_commands = orders.add_subparsers(dest="orders_command", required=True)
    orders.set_defaults(func=Runs("cli.store_commands", "orders"))
    orders_commands.add_parser("list", help="every order: its id, amount, customer and Stripe payment, if any")
    orders_commands.add_parser(
        "seed-demo", help="add the demo's orders (A-1001 ..., ann@example.com ...): for a store nobody is paid from"
    )
    add = orders_commands.add_parser("add", help="add an order the agent can look up and refund")
    add.add_argument("order_id", help="the shop's order id, as customers quote it (A-1001)")
    add.add_argument("amount_cents", type=int, help="what was charged, in the currency's smallest unit")
    add.add_argument("customer_email", help="whose order it is: only this customer's tickets can see it")
    add.add_argument(
        "--currency",
        type=currency,
        default=DEFAULT_CURRENCY,
        metavar="CODE",
        help=f"the order's currency, ISO 4217 (amount_cents counts its smallest unit; default {DEFAULT_CURRENCY})",
    )
    add.add_argument(
        "--stripe-payment",
        type=stripe_payment,
        metavar="pi_...|ch_...",
        help="the order's payment at Stripe, a PaymentIntent or a Charge (for AGENT_PAYMENTS=stripe)",
    )
    event = orders_commands.add_parser(
        "event", help="add to an order's event log what a carrier or a person reports (order_events reads it)"
    )
    event.add_argument("order_id", help="the order it is about")
    event.add_argument("text", help="what happened, as one line of the log: 'scanned at the Leeds depot'")
    answers_parser(commands.add_parser("answers", help="the answers to approval requests, from the audit trail"))


def _where(command: argparse.ArgumentParser) -> None:
    """Which Temporal to talk to, as the ``temporal`` CLI reads it, overridable here."""
    command.add_argument("--address", help="host:port, overriding TEMPORAL_ADDRESS and the config file")
    command.add_argument("--namespace", help="overriding TEMPORAL_NAMESPACE and the config file")


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(prog="agent-worker", description=(__doc__ or "").split("\n\n")[0])
    cli.add_argument(
        "--version", action=_Version, help="print the release this is, as pyproject.toml and the changelog name it"
    )
    commands = cli.add_subparsers(dest="command", required=True)

    worker = commands.add_parser("worker", help="run a worker against the configured Temporal cluster")
    _where(worker)
    worker.set_defaults(func=Runs("cli.commands", "worker"))

    metrics = commands.add_parser(
        "metrics",
        help="serve the namespace's gauges read from visibility (tickets waiting, stuck) on AGENT_METRICS_BIND",
        description="Read from Temporal's visibility, every 15 s, how many tickets wait for a person to approve and, "
        "where the server marks them, how many are stuck, and serve them as Prometheus gauges on "
        "AGENT_METRICS_BIND's /metrics: one such process per namespace (the workers serve their own metrics).",
    )
    _where(metrics)
    metrics.set_defaults(func=Runs("cli.commands", "metrics"))

    dev = commands.add_parser("dev", help="embedded Temporal dev server with its Web UI, and a worker beside it")
    dev.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"the dev server's port (default {DEFAULT_PORT})")
    dev.add_argument(
        "--ui-port", type=int, default=DEFAULT_UI_PORT, help=f"the Web UI's port (default {DEFAULT_UI_PORT})"
    )
    dev.set_defaults(func=Runs("cli.commands", "dev", extra="dev-server"))

    demo = commands.add_parser("demo", help="one support ticket end to end, with the approval asked here")
    answer = demo.add_mutually_exclusive_group()
    answer.add_argument("--approve", dest="decision", action="store_true", default=None, help="approve without asking")
    answer.add_argument("--decline", dest="decision", action="store_false", help="decline without asking")
    demo.add_argument("--question", help="the customer's words (name an order such as A-1001)")
    demo.set_defaults(func=Runs("cli.commands", "demo", extra="dev-server"))

    replay = commands.add_parser(
        "replay",
        help="replay stored histories against the current workflow code (replay capture: add a real ticket's)",
        epilog="agent-worker replay capture TICKET_ID --redact --out replay_histories/NAME.json writes a real "
        "ticket's history for the gate (agent-worker replay capture --help); to replay a file named capture, "
        "write ./capture.",
    )
    replay.add_argument("paths", nargs="*", type=Path, help="history files or folders (default: replay_histories/)")
    replay.add_argument(
        "--order", type=int, metavar="SEED", help="the second pass's order, as a failure printed it (default: drawn)"
    )
    replay.set_defaults(func=Runs("cli.commands", "replay"))

    rollout = commands.add_parser("rollout", help="move tickets between builds of a Worker Deployment")
    rollout_commands = rollout.add_subparsers(dest="rollout_command", required=True)
    move = rollout_commands.add_parser(
        "move",
        help="wake the running tickets of a build the deployment no longer routes to, so each moves to its target",
        description="List the running tickets pinned to BUILD (visibility), wait until the task queue routes them "
        "elsewhere, and send each the wake signal: a waiting ticket continues as new on its target build, one "
        "mid-turn finishes the turn and moves at its next wait. Exit 0 woken (even none), 1 BUILD is still where "
        "every ticket goes or the queue did not learn the routing, 2 no deployment named.",
    )
    move.add_argument("--from", dest="from_build", required=True, metavar="BUILD", help="the build id to move off")
    move.add_argument("--deployment", help="the Worker Deployment's name (default AGENT_DEPLOYMENT)")
    move.set_defaults(func=Runs("cli.rollout", "move"))
    _where(move)
    history = commands.add_parser("history", help="record a run's history for the replayer")
    history_commands = history.add_subparsers(dest="history_command", required=True)
    export = history_commands.add_parser("export", help="write a run's history as JSON")
    export.add_argument("--workflow-id", required=True, help="the run's workflow id (ticket-T-1)")
    export.add_argument("--run-id", help="a particular run (default: the latest)")
    export.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    _where(export)
    export.set_defaults(func=Runs("cli.commands", "export_history"))

    _eval_command(commands)

    _operator_commands(commands)

    _web_commands(commands)

    mail_in = commands.add_parser(
        "mail-in",
        help="the mail receiver: customers' mail in as tickets and replies (LMTP or SMTP, AGENT_MAIL_IN_*)",
        description="Take the desk's mail from its mail server over LMTP (or SMTP) and start a ticket for each new "
        "message, or pass a reply on to its ticket; a message is answered 250 only once Temporal holds it.",
    )
    _where(mail_in)
    mail_in.set_defaults(func=Runs("cli.commands", "mail_in", extra="mail-in"))

    codec = commands.add_parser("codec-server", help="decrypt payloads for the Web UI and temporal --codec-endpoint")
    codec.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to listen on (default 127.0.0.1; any other needs authentication)",
    )
    codec.add_argument(
        "--port", type=int, default=DEFAULT_CODEC_PORT, help=f"the port to listen on (default {DEFAULT_CODEC_PORT})"
    )
    codec.set_defaults(func=Runs("cli.commands", "codec_server", extra="codec-server"))

    _store_commands(commands)
    return cli


def capture_parser() -> argparse.ArgumentParser:
    """``agent-worker replay capture``: a subcommand of ``replay`` that ``replay [paths...]`` cannot declare (a
    path may be any word), so ``parse`` routes to it on its first word, and ``replay`` keeps its arguments as they
    were."""
    capture = argparse.ArgumentParser(
        prog="agent-worker replay capture",
        description="Write a real ticket's history for the replay gate, its personal data redacted if asked; only if "
        "it replays on this code, before and after redaction.",
    )
    capture.add_argument("ticket", help="the ticket id (T-1) or workflow id (ticket-T-1)")
    capture.add_argument(
        "--out",
        type=Path,
        required=True,
        help="the file to write, e.g. replay_histories/NAME.json (its folder must exist)",
    )
    capture.add_argument("--run", dest="run_id", help="a particular run of the ticket (default: its latest)")
    capture.add_argument(
        "--redact",
        action="store_true",
        help="replace addresses, names and the words of questions, replies and answers with consistent placeholders, "
        "and write the payloads plain (default: every payload as stored, encrypted if the desk encrypts)",
    )
    capture.add_argument("--redact-order-ids", action="store_true", help="with --redact: order ids too")
    capture.add_argument(
        "--encrypt",
        action="store_true",
        help="with --redact: seal the redacted payloads again under the current AGENT_CODEC_KEYS key, not plain",
    )
    capture.add_argument("--force", action="store_true", help="replace --out if it exists")
    _where(capture)
    capture.set_defaults(command="replay-capture", func=Runs("cli.commands", "capture_history"))
    return capture


def parse(argv: list[str]) -> argparse.Namespace:
    if argv[:2] != ["replay", "capture"]:
        return parser().parse_args(argv)
    capture = capture_parser()
    args = capture.parse_args(argv[2:])
    for option, given in (("--redact-order-ids", args.redact_order_ids), ("--encrypt", args.encrypt)):
        if given and not args.redact:
            capture.error(f"{option} goes with --redact: without it every payload is written as stored")
    return args


def currency(text: str) -> str:
    """An ISO 4217 code (``EUR``, ``jpy``), upper-cased."""
    if len(text) != 3 or not text.isascii() or not text.isalpha():
        raise argparse.ArgumentTypeError(f"{text!r} is not a currency: three letters, such as USD, EUR or JPY")
    return text.upper()


def answers_parser(answers: argparse.ArgumentParser) -> None:
    """``agent-worker answers export``: the approval inbox's export for auditors, from the command line."""
    answers_commands = answers.add_subparsers(dest="answers_command", required=True)
    answers.set_defaults(func=Runs("cli.store_commands", "export_answers"))
    export = answers_commands.add_parser(
        "export", help="the answers given over a range of UTC days as CSV, for auditors (what the inbox's export gives)"
    )
    export.add_argument("--from", dest="start", required=True, metavar="YYYY-MM-DD", help="the first day")
    export.add_argument("--to", dest="end", required=True, metavar="YYYY-MM-DD", help="the last day, included")
    export.add_argument("--personal", action="store_true", help="with the customer's email and decline reasons")
    export.add_argument("--output", "-o", type=Path, help="a file to write (default: standard output)")


def stripe_payment(text: str) -> str:
    """A Stripe payment's id, as the dashboard shows it: a PaymentIntent (``pi_``) or a Charge (``ch_``)."""
    if not text.startswith(("pi_", "ch_")) or not text[3:].isalnum():
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a Stripe payment: a PaymentIntent (pi_...) or a Charge (ch_...) id"
        )
    return text


def main(argv: list[str] | None = None) -> None:
    args = parse(sys.argv[1:] if argv is None else argv)
    from agent_worker.cli.commands import run  # noqa: PLC0415 - only now: see the module's docstring

    run(args)
