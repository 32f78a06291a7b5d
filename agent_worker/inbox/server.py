"""Running the approval inbox: ``agent-worker web`` on its own, and beside ``agent-worker dev`` and the demo.

It refuses to start where it would be useless or unsafe, and says why: without ``AGENT_WEB_APPROVAL_KEYS`` (it would
sign answers no worker takes), and on an address others can reach without authentication configured (anyone who
reached it could approve refunds). On the loopback with no authentication configured, it makes a one-time sign-in
for the person who started it, printed where they started it: a password that lives as long as the process.

uvicorn serves it inside the caller's event loop, beside a worker (``agent_worker.serving``): the worker (or the CLI)
handles the process's signals and stops the inbox when it stops.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import secrets
import shlex
import socket
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog
from pydantic import SecretStr
from temporalio.client import Client

from activities.business.database import Database
from activities.migrations import SchemaNotCurrentError
from activities.tools import TOOLS, Tools
from agent_worker import serving
from agent_worker.config import Settings
from agent_worker.inbox.app import make_app, ticket_path
from agent_worker.inbox.auth import Authenticator, Keys
from agent_worker.inbox.desk import Desk
from agent_worker.inbox.guard import Site
from agent_worker.inbox.sessions import configured
from agent_worker.inbox.throttle import Throttle
from agent_worker.loopback import loopback_only
from agent_worker.passwords import hash_password
from agent_worker.serving import Serving, serve
from agent_worker.stopping import stop_signals
from agent_worker.wiring import business_database

log = structlog.get_logger(__name__)

if TYPE_CHECKING:
    from activities.business.database import Database

MIN_PASSWORD = 12


class InboxRefusedError(ValueError):
    """The inbox will not start with these settings: the message says why, and what to set."""


@dataclass(frozen=True)
class OneTimeLogin:
    """A sign-in made for the person who started the inbox on this machine, valid while it runs."""

    name: str
    password: str = field(repr=False)


def check(settings: Settings, host: str) -> None:
    """Refuse, before connecting anywhere, settings the inbox must not run with."""
    if not settings.web.approval_keys:
        raise InboxRefusedError(
            "the approval inbox needs AGENT_WEB_APPROVAL_KEYS: it signs every answer it sends with the last of them, "
            "and the workers take an answer only if it is signed with one of theirs. Give the inbox and the workers "
            "the same list: `agent-worker web-user NAME --new-keys` makes one, with a first person to sign in "
            "(docs/operations.md, the inbox beside a worker)"
        )
    if not (settings.web.users or settings.web.proxy_header) and not loopback_only(host):
        raise InboxRefusedError(
            f"refusing to serve the approval inbox on {host or 'every interface'} without authentication: anyone who "
            f"could reach it could approve refunds. Listen on 127.0.0.1 (a one-time sign-in is printed then), or set "
            f"AGENT_WEB_USERS (names and password hashes from `agent-worker web-user NAME`) or, behind single "
            f"sign-on, AGENT_WEB_PROXY_HEADER with AGENT_WEB_TRUSTED_PROXIES and AGENT_WEB_PUBLIC_URL"
        )


def with_key_for_this_process(settings: Settings) -> tuple[Settings, bool]:
    """``settings`` with a signing key made for this process if none is set: for ``dev`` and the demo, whose worker
    runs in the same process as the inbox and so shares it. True if one was made."""
    if settings.web.approval_keys:
        return settings, False
    key = SecretStr(new_approval_key())
    return settings.model_copy(update={"web": settings.web.model_copy(update={"approval_keys": [key]})}), True


@dataclass
class RunningInbox:
    url: str
    login: OneTimeLogin | None
    serving: Serving
    auth: Authenticator
    """Who it signs in, and its sessions and throttle, in the business database."""
    owns_database: bool = True

    async def stop(self) -> None:
        await self.serving.cleanup()
        if self.owns_database:
            self.auth.sessions.database.close()

    def ticket_page(self, workflow_id: str) -> str:
        """The address of a ticket's page, whatever its id holds."""
        return f"{self.url}{ticket_path(workflow_id)}"

    def describe(self) -> str:
        """Where it is and how to sign in, for a person at the terminal."""
        signing_in = (
            f" (sign in as {self.login.name} with password {self.login.password}, made for this run)"
            if self.login
            else ""
        )
        return f"approval inbox on {self.url}{signing_in}"


async def start_inbox(  # noqa: PLR0913 - keyword-only, each defaulting to the settings' or this machine's
    settings: Settings,
    client: Client,
    *,
    host: str | None = None,
    port: int | None = None,
    login_name: str | None = None,
    database: Database | None = None,
    tools: Tools = TOOLS,
) -> RunningInbox:
    """Serve the inbox for ``client``'s namespace and ``settings.task_queue``; ``InboxRefusedError`` if it must not.
    ``login_name`` names the one-time sign-in (default: this OS user), made only when no authentication is set.
    Sessions and the sign-in throttle live in ``database``, by default the business database the settings name (the
    worker's), its schema checked first (``schema_ready``); one given is the caller's to close (a test's, with a
    clock it turns). Payouts are told as ``tools`` declare them (the product's tools unless given others)."""
    host = settings.web.host if host is None else host
    port = settings.web.port if port is None else port
    check(settings, host)
    users = settings.web.user_hashes()
    login = None
    if not users and not settings.web.proxy_header:
        login = OneTimeLogin(login_name or this_user(), secrets.token_urlsafe(9))
        users = {login.name: await asyncio.to_thread(hash_password, login.password)}
    sock = bind(host, port)
    owns_database = database is None
    database = database or business_database(settings)
    try:
        if owns_database:
            await asyncio.to_thread(schema_ready, database)
        keys = settings.web.approval_key_bytes()
        auth = Authenticator(
            Keys(keys),
            users,
            configured(settings, database),
            Throttle(database),
            proxy_header=settings.web.proxy_header,
            trusted_proxies=[*settings.web.trusted_proxies],
        )
        site = Site(settings.web.base_path, settings.web.public_url, loopback=loopback_only(host))
        app = make_app(
            Desk(client, settings.task_queue, tools),
            auth,
            keys[-1],
            site,
            database,
            confirm_above_cents=settings.web.confirm_above_cents,
            auditors=frozenset(settings.web.auditors),
        )
        served = await serve(app, sock, "approval inbox")
    except BaseException:
        sock.close()  # serve closes it too; twice is harmless
        if owns_database:
            database.close()
        raise
    bound = sock.getsockname()
    shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    return RunningInbox(f"http://{shown}:{bound[1]}{settings.web.base_path}/", login, served, auth, owns_database)


def schema_ready(database: Database) -> None:
    """The business database as the inbox starts on it (``Database.ready``: a SQLite file migrated, a database
    server's schema checked and never changed), else ``InboxRefusedError`` naming ``agent-worker migrate``."""
    try:
        database.ready()
    except SchemaNotCurrentError as error:
        raise InboxRefusedError(f"the approval inbox cannot start: {error}") from None


def this_user() -> str:
    """Who started the process, for the one-time sign-in's name (and so the approver the ticket records)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # a container's user with no name
        return "operator"


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``, or ``InboxRefusedError`` saying why not."""
    try:
        return serving.bind(host, port)
    except OSError as error:
        raise InboxRefusedError(f"the approval inbox cannot listen on {host}:{port}: {error.strerror}") from None


async def serve_until_stopped(settings: Settings, client: Client, *, host: str | None, port: int | None) -> None:
    """``agent-worker web``: serve until SIGTERM or SIGINT, saying where (and how to sign in) on stderr."""
    with stop_signals() as stopping:
        inbox = await start_inbox(settings, client, host=host, port=port)
        print(f"{inbox.describe()}; Ctrl-C stops it.", file=sys.stderr, flush=True)
        await stopping.wait()
        await inbox.stop()


def read_password(name: str) -> str:
    """A new password for ``name``: asked twice at a terminal, else the first line of standard input (scripts)."""
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\n")
    password = getpass.getpass(f"password for {name}: ")
    if getpass.getpass("the same again: ") != password:
        raise SystemExit("the two passwords differ; nothing was made")
    return password


def web_user(name: str, *, new_keys: bool = False) -> str:
    """``agent-worker web-user NAME``: the ``AGENT_WEB_USERS`` entry for a person, their password hashed. With
    ``new_keys``, what an inbox beside its workers needs to start, as the lines of an environment file (a shell's
    ``set -a; . FILE`` and a ``.env`` file read them alike): ``AGENT_WEB_APPROVAL_KEYS`` with one new key, and
    ``AGENT_WEB_USERS`` with this person alone. Nothing is printed unless the password is taken."""
    if not name.strip() or name != name.strip():
        raise SystemExit("a name without surrounding spaces: it is the approver the tickets record")
    password = read_password(name)
    if len(password) < MIN_PASSWORD:
        raise SystemExit(f"a password of at least {MIN_PASSWORD} characters; nothing was made")
    entry = json.dumps({name: hash_password(password)})
    if not new_keys:
        return entry
    keys = json.dumps([new_approval_key()])
    return f"AGENT_WEB_APPROVAL_KEYS={env_value(keys)}\nAGENT_WEB_USERS={env_value(entry)}"


def env_value(json_text: str) -> str:
    """JSON as a value a shell's ``.`` and a ``.env`` file (python-dotenv, which pydantic-settings reads) both take
    as written: single-quoted, with no quote or backslash of its own inside (a name such as o'brien), spelled
    ``\\u0027`` and ``\\u005c`` instead, which JSON reads back the same (python-dotenv unescapes ``\\\\`` and
    ``\\'`` in single quotes, a shell does not). The JSON is ASCII already (``json.dumps``)."""
    safe = json_text.replace("\\\\", "\\u005c").replace("'", "\\u0027")
    return shlex.quote(safe)


def new_approval_key() -> str:
    """A new signing key for answers: 32 random bytes, URL-safe base64 (43 characters, above the 32 the settings
    ask for)."""
    return secrets.token_urlsafe(32)
