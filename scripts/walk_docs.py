"""Walk the README and docs/operations.md as a newcomer would: in a fresh clone, every shell command their fenced
blocks print, as printed, in order, against real local servers, each with a timeout.

A page that prints a command that does not run as printed loses the reader who trusted it, and nothing else
notices: the tests call the code, not the page. So this reads the pages, and fails naming the page, the line and
the command. It walks a clone of this checkout's HEAD (with its uncommitted changes, so that a page's fix walks
before it is committed), and reaches nothing off the machine: the clone takes this checkout's pinned ``uv`` and
uv's cache offline, every server is on 127.0.0.1, and the model's address is a local port nothing listens on.

What it does not run as printed is in the tables below, each entry with its reason, and an entry that names no
printed command fails the walk, so the tables shrink with the docs:

- ``SKIPPED``: what needs something no machine of this project has (a Docker engine), or is CI's own next step;
- ``Site``: a site's own values, which the pages print as placeholders (``temporal.example.com``, ``db``), given
  this machine's;
- ``SERVES``: commands that run until stopped (a worker, the inbox): started in the background, waited for until
  they say they are up, stopped with SIGTERM at the end of their section, and expected to exit 0 then;
- ``WAITS``: a command that returns once something later in the walk happens, run in the background and checked
  at the end;
- ``SHOWS``: a command whose output the pages show and the next command counts on, run again until it shows it;
- ``SETTLED``: a command that counts on the one before it having taken effect, run once a printed command shows it;
- ``EXITS``: a command whose exit code the pages give as other than 0.

Each section (the text under one heading) runs in one shell of its own, on a terminal, as a reader types its
blocks one after another, after ``eval "$(./dev env)"`` as the README says; ``TYPES`` is what a person types at
the prompts. Before the first section after the Quick start, the walk starts ``./dev run agent-worker dev``, as
README (b) asks, and a ``support`` namespace on it for the pages' cluster.

    ./dev run python scripts/walk_docs.py [--keep DIR]     # .ci/run runs it after ./dev check
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agent_worker.cli.devserver import free_port
from tests.support.stores import postgres_schema, rows_only_role

ROOT = Path(__file__).resolve().parent.parent
DOCS = ("README.md", "docs/operations.md")
SHELL_BLOCKS = {"sh", "bash", "shell", "console"}
PASSWORD = "walk-the-docs-correct-horse"

QUICK_START, TESTS = "README.md Quick start", "README.md Tests"
COMPOSE = "docs/operations.md One machine: the compose cluster"
NO_DOCKER = "no Docker engine on this project's machines: tests/test_compose.py checks the compose file offline"
SKIPPED = {
    (QUICK_START, "./dev test"): "the whole suite (about 11 minutes): .ci/run runs it right after this walk",
    (TESTS, "./dev test"): "the same",
    (COMPOSE, "docker compose up -d --build"): NO_DOCKER,
    (COMPOSE, "docker compose up -d --scale worker=4"): NO_DOCKER,
    (COMPOSE, "docker compose run --rm worker agent-worker orders add"): NO_DOCKER,
    (COMPOSE, "temporal workflow start"): "starts a ticket on the compose cluster the docker lines bring up",
    (COMPOSE, "agent-worker approve T-1"): "answers that ticket, on the compose cluster",
}
"""Commands not run, by their section and first words, and why."""

SERVES = {
    ("agent-worker", "worker"): "worker started",
    ("agent-worker", "web"): "approval inbox on",
    ("agent-worker", "mail-in"): "mail receiver listening",
}
"""Commands that run until stopped, by their words (after any ``NAME=value``), and what they print once up."""

WAITS = {
    "temporal workflow result --workflow-id ticket-T-1": "blocks until the ticket closes: once README (c) answers "
    "its refund (README (b) says to run it after (c), or in another shell)",
}
"""Commands, by their first words, that return on their own once a later section has run: checked at the end."""

EXITS = {
    "agent-worker approve T-1 --amount-cents 4900 --approver ann": (
        1,
        (
            "the alternative ('or') to the signal above, which has answered request R1 already: nothing waits, "
            "and approve says so with exit 1 (operations.md#commands)"
        ),
    ),
}
"""Commands, by their first words, whose exit code the pages give as other than 0, and why."""

SHOWS = {
    "temporal workflow query --workflow-id ticket-T-1 --name awaiting_approval_of": r'"request_id": ?"R1"',
    "temporal workflow list --query 'AwaitingApprovalCents > 0'": "ticket-T-1",
}
"""Commands whose output the pages show, by their first words, and a pattern of it: as a person would, the walk
runs one again (every half second, within its timeout) until its output shows that, and then goes on, since the
next command counts on it (the refund must wait before (c) answers it)."""

SETTLED = {
    "agent-worker approve T-1 --amount-cents 4900 --approver ann": (
        "temporal workflow list --query 'AwaitingApprovalCents > 0'",
        "ticket-T-1",
    ),
}
"""Commands whose exit code counts on what came before having taken effect, by their first words: before each, the
walk runs a command the pages print until its output no longer shows a pattern, as the moments a person takes to
type would let it (the signal above taken by the worker: the ticket no longer waits, so approve finds nothing)."""

TYPES = {
    r"\[y/N\] ": "y",  # the demo's approval, answered at the terminal
    r"press Enter\. ": "",  # the demo's last line
    r"password for \S+: ": PASSWORD,  # agent-worker web-user, twice
    r"the same again: ": PASSWORD,
}
"""What a person types at each prompt, by a pattern of the prompt's end."""

TIMEOUTS = {"./dev demo": 150.0, "./dev run agent-worker eval": 240.0}
"""Seconds a command may take, by its first words, where the default is too short."""
TIMEOUT = 60.0
SETUP_TIMEOUT = 180.0
"""The first ``./dev`` in the clone builds its environment from uv's cache."""


@dataclass(frozen=True)
class Command:
    doc: str
    line: int
    section: str
    text: str
    """As printed: continuation lines and a quoted string's lines joined with their newlines."""

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"

    @property
    def printed(self) -> str:
        return " ".join(self.text.replace("\\\n", " ").split())

    @property
    def bare(self) -> str:
        """As printed, without its comment: what the tables name it by."""
        return " ".join(without_comment(self.text).replace("\\\n", " ").split())


@dataclass
class Site:
    """This machine's values for what the pages print as a site's own."""

    temporal: str
    owner_url: str
    rows_url: str
    policy: Path
    web_port: int
    values: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.values = {
            "temporal.example.com:7233": self.temporal,
            "postgresql+psycopg://agent@db/business": shlex.quote(self.owner_url),
            "postgresql+psycopg://agent_owner@db/business": shlex.quote(self.owner_url),
            "postgresql+psycopg://agent_app@db/business": shlex.quote(self.rows_url),
            "/etc/agent-worker/policy.toml": str(self.policy),
            "<the key the workers hold>": secrets.token_urlsafe(32),
            "--port 8088": f"--port {self.web_port}",  # the machine may be shared: the walk's ports are its own
        }

    def apply(self, text: str) -> str:
        for printed, local in self.values.items():
            text = text.replace(printed, local)
        return text


class WalkFailedError(Exception):
    pass


def commands(root: Path) -> list[Command]:
    """Every command of every shell block of ``DOCS``, in order. In a block that shows prompts (``$ ``), the prompted
    lines alone; a command runs on over a line ending in ``\\`` or an open quote."""
    found: list[Command] = []
    for doc in DOCS:
        lines = (root / doc).read_text().split("\n")
        section, number = "", 0
        while number < len(lines):
            line = lines[number]
            if line.startswith("#"):
                section = f"{doc} {line.lstrip('#').strip()}"
            fence = re.match(r"```(\w*)\s*$", line)
            if not fence:
                number += 1
                continue
            end = next(n for n in range(number + 1, len(lines)) if lines[n].startswith("```"))
            if fence.group(1) in SHELL_BLOCKS:
                found += block_commands(doc, section, lines[number + 1 : end], number + 2)
            number = end + 1
    return found


def block_commands(doc: str, section: str, lines: list[str], first: int) -> list[Command]:
    prompted = any(line.startswith("$ ") for line in lines)
    found, pending, start = [], "", 0
    for offset, line in enumerate(lines):
        if not pending:
            if prompted and not line.startswith("$ "):
                continue
            line = line.removeprefix("$ ") if prompted else line  # noqa: PLW2901
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            start = first + offset
        pending += line
        if pending.endswith("\\") or not complete(pending):
            pending += "\n"
            continue
        found.append(Command(doc, start, section, pending))
        pending = ""
    if pending:
        raise WalkFailedError(f"{doc}:{start}: a command that never ends: {pending!r}")
    return found


def complete(text: str) -> bool:
    try:
        shlex.split(text, comments=True)
    except ValueError:
        return False
    return True


def without_comment(text: str) -> str:
    """The command without a trailing ``# ...`` (outside quotes), for appending to it."""
    quote = ""
    for index, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or text[index - 1].isspace()):
            return text[:index].rstrip()
    return text.rstrip()


def matching(command: Command, table: Mapping[str, object]) -> str | None:
    return next((key for key in table if command.bare.startswith(key)), None)


def skipped(command: Command) -> str | None:
    """Why the command is not run, if it is not."""
    return next((why for (section, start), why in SKIPPED.items() if is_skipped(command, section, start)), None)


def is_skipped(command: Command, section: str, start: str) -> bool:
    return command.section == section and command.bare.startswith(start)


def serves(command: Command) -> str | None:
    """What the command prints once it is up, if it runs until stopped."""
    words = shlex.split(command.text.replace("\\\n", " "), comments=True)
    while words and re.match(r"^\w+=", words[0]):
        words.pop(0)
    return next((ready for start, ready in SERVES.items() if tuple(words[: len(start)]) == start), None)


def check_tables(found: list[Command]) -> None:
    """Every entry of the tables names a command the pages print: a stale entry would excuse nothing, silently."""
    printed = [command.bare for command in found]
    stale: list[object] = [
        key for key in [*WAITS, *EXITS, *SHOWS, *SETTLED] if not any(text.startswith(key) for text in printed)
    ]
    stale += [key for key in SKIPPED if not any(is_skipped(command, *key) for command in found)]
    stale += [check for check, _ in SETTLED.values() if not any(text.startswith(check) for text in printed)]
    stale += [value for value in Site("", "", "", Path(), 0).values if not any(value in c.text for c in found)]
    if stale:
        raise WalkFailedError(f"the walk's tables name what the pages no longer print: {stale}")


@dataclass
class Section:
    """One shell, on a terminal, running a section's commands as a reader types them, with a file per command
    saying when it started and how it ended, for the walk to time it and name it."""

    name: str
    steps: list[Command]
    site: Site
    clone: Path
    work: Path
    env: dict[str, str]
    shell: subprocess.Popen[bytes] | None = None
    output: bytearray = field(default_factory=bytearray)

    def file(self, index: int, kind: str) -> Path:
        return self.work / f"{index}.{kind}"

    def script(self) -> str:
        # What runs on in the background must outlive the shell, whose end hangs its terminal up
        lines = ["trap '' HUP", f"cd {shlex.quote(str(self.clone))}", 'eval "$(./dev env)"']
        for index, command in enumerate(self.steps):
            start, done = shlex.quote(str(self.file(index, "start"))), shlex.quote(str(self.file(index, "exit")))
            pid = shlex.quote(str(self.file(index, "pid")))
            text = self.site.apply(command.text)
            lines.append(f": > {start}")
            if (ready := serves(command)) is not None:
                bare = without_comment(text).removesuffix("&").rstrip()
                log = self.log(index, command)
                redirect = "" if command.text.rstrip().endswith("&") else f" > {shlex.quote(str(log))} 2>&1"
                lines += [
                    f"( {bare}{redirect} & echo $! > {pid}; wait $!; echo $? > {done} ) &",
                    f"until grep -q {shlex.quote(ready)} {shlex.quote(str(log))} 2>/dev/null; do",
                    f"  [ -e {done} ] && exit 1; sleep 0.2",
                    "done",
                ]
            elif matching(command, WAITS):
                output = shlex.quote(str(self.file(index, "log")))
                lines.append(f"( {without_comment(text)} > {output} 2>&1; echo $? > {done} ) &")
            elif key := matching(command, SHOWS):
                lines += [
                    f"until out=$({without_comment(text)}\n) ; rc=$?; printf '%s\\n' \"$out\"; [ $rc = 0 ] &&",
                    f"  printf '%s' \"$out\" | grep -Eq {shlex.quote(SHOWS[key])}; do sleep 0.5; done",
                    f"echo $rc > {done}",
                ]
            else:
                if key := matching(command, SETTLED):
                    check, shown = SETTLED[key]
                    lines.append(f"while {check} | grep -q {shlex.quote(shown)}; do sleep 0.2; done")
                lines += [text, f"echo $? > {done}", f'[ "$(cat {done})" = {expected_exit(command)} ] || exit 1']
        return "\n".join(lines) + "\n"

    def log(self, index: int, command: Command) -> Path:
        """Where a command that serves writes: where the page sends it, else a file of the walk's."""
        printed = re.search(r">\s*(\S+)\s+2>&1\s*&\s*$", without_comment(command.text))
        return self.clone / printed.group(1) if printed else self.file(index, "log")

    def run(self) -> None:
        script = self.work / "section.sh"
        script.write_text(self.script())
        main, terminal = os.openpty()
        try:
            # setsid -c: the terminal is the shell's controlling one, so getpass prompts on it as for a person
            self.shell = subprocess.Popen(
                ["setsid", "-c", "bash", str(script)],
                stdin=terminal,
                stdout=terminal,
                stderr=terminal,
                env=self.env,
                cwd=self.clone,
            )
        finally:
            os.close(terminal)
        try:
            self.follow(main)
        finally:
            os.close(main)
            (self.work / "terminal.txt").write_bytes(self.output)

    def follow(self, main: int) -> None:
        """Read the terminal, type at its prompts, and time the command running, until the shell ends."""
        answered, began = 0, time.monotonic()
        assert self.shell is not None
        while True:
            heard = self.hear(main)
            text = self.output.decode(errors="replace")
            for prompt, typed in TYPES.items():
                if said := re.search(prompt, text[answered:]):
                    answered += said.end()
                    os.write(main, f"{typed}\n".encode())
            if self.shell.poll() is not None and not heard:
                break
            index, command = self.current()
            limit = timeout_of(command) if command else SETUP_TIMEOUT
            since = time.time() - self.file(index, "start").stat().st_mtime if command else time.monotonic() - began
            if since > limit:
                self.stop()
                raise WalkFailedError(self.failure(command, f"did not finish within {limit:.0f} s"))
        if self.shell.returncode != 0:
            raise WalkFailedError(self.failure(self.current()[1], self.what_happened(*self.current())))
        for index, command in enumerate(self.steps):
            if not self.file(index, "start").exists():
                raise WalkFailedError(self.failure(command, "never ran: the shell ended before it"))

    def hear(self, main: int) -> bool:
        """What the terminal says within a tenth of a second, if anything."""
        readable, _, _ = select.select([main], [], [], 0.1)
        if not readable:
            return False
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO: no process has the terminal open any more
            return False
        self.output += chunk
        return bool(chunk)

    def current(self) -> tuple[int, Command | None]:
        started = [i for i in range(len(self.steps)) if self.file(i, "start").exists()]
        return (started[-1], self.steps[started[-1]]) if started else (-1, None)

    def what_happened(self, index: int, command: Command | None) -> str:
        if command is None:
            return 'the shell\'s setup (cd, eval "$(./dev env)") failed'
        if serves(command):
            code = self.file(index, "exit").read_text().strip() if self.file(index, "exit").exists() else "?"
            log = self.log(index, command)
            tail = log.read_text()[-3000:] if log.exists() else ""
            return f"exited {code} before it said it was up; its output ends:\n{tail}"
        code = self.file(index, "exit").read_text().strip() if self.file(index, "exit").exists() else "?"
        return f"exited {code}, not {expected_exit(command)}"

    def failure(self, command: Command | None, what: str) -> str:
        shown = self.output.decode(errors="replace")[-4000:]
        where = f"{command.where}: `{command.printed}`" if command else self.name
        return f"{where} {what}\n--- the terminal's last lines ---\n{shown}"

    def stop(self) -> None:
        if self.shell is not None and self.shell.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.shell.pid, signal.SIGTERM)
            self.shell.wait(30)

    def stop_servers(self) -> None:
        """SIGTERM each command that serves, as a deploy stops it; each must end, and exit 0, within 30 s."""
        running = [(i, c) for i, c in enumerate(self.steps) if serves(c) and self.file(i, "pid").exists()]
        for index, _ in running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(self.file(index, "pid").read_text()), signal.SIGTERM)
        for index, command in running:
            done = self.file(index, "exit")
            deadline = time.monotonic() + 30
            while not done.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            code = done.read_text().strip() if done.exists() else "nothing: still running"
            if code != "0":
                raise WalkFailedError(f"{command.where}: `{command.printed}` stopped with SIGTERM exited {code}")

    def check_waits(self) -> None:
        for index, command in enumerate(self.steps):
            if not matching(command, WAITS):
                continue
            done, deadline = self.file(index, "exit"), time.monotonic() + TIMEOUT
            while not done.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            code = done.read_text().strip() if done.exists() else "nothing: still waiting"
            if code != "0":
                log = self.file(index, "log")
                raise WalkFailedError(
                    f"{command.where}: `{command.printed}` exited {code} by the end of the walk\n"
                    f"{log.read_text()[-3000:] if log.exists() else ''}"
                )

    def end(self) -> None:
        if self.shell is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.shell.pid, signal.SIGKILL)


def expected_exit(command: Command) -> int:
    return EXITS[key][0] if (key := matching(command, EXITS)) else 0


def timeout_of(command: Command) -> float:
    return next((seconds for start, seconds in TIMEOUTS.items() if command.bare.startswith(start)), TIMEOUT)


def environment(site: Site, web_port: int) -> dict[str, str]:
    """The reader's shell: this machine's, without the project's settings or this checkout's environment, with the
    walk's dev server as the local Temporal, ports of the walk's own, and nothing to reach off the machine."""
    here = str(ROOT)
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("AGENT_", "ANTHROPIC_", "TEMPORAL_", "STRIPE_", "UV_", "VIRTUAL_ENV"))
    }
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(here))
    return env | {
        "TERM": "dumb",
        "UV_OFFLINE": "1",  # the clone's environment from uv's cache, as this checkout's was built moments ago
        "PIP_NO_INDEX": "1",
        "TEMPORAL_ADDRESS": site.temporal,  # `agent-worker dev`'s server, as the pages' commands default to it
        "AGENT_WEB_PORT": str(web_port),
        "AGENT_MAIL_IN_PORT": str(free_port()),
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{free_port()}",  # the placeholder key reaches no one
    }


@contextlib.contextmanager
def dev_server(clone: Path, env: dict[str, str], temporal: str, log: Path) -> Iterator[None]:
    """``./dev run agent-worker dev``, as README (b) says to keep running, on the walk's ports; and the ``support``
    namespace the pages' cluster has."""
    port = temporal.rsplit(":", 1)[1]
    with log.open("wb") as out:
        dev = subprocess.Popen(
            ["./dev", "run", "agent-worker", "dev", "--port", port, "--ui-port", str(free_port())],
            cwd=clone,
            env=env | {"AGENT_WEB_PORT": str(free_port())},
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + SETUP_TIMEOUT
        while "Ctrl-C stops them all" not in log.read_text(errors="replace"):
            if dev.poll() is not None or time.monotonic() > deadline:
                raise WalkFailedError(f"./dev run agent-worker dev did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        temporal_cli = str(clone / ".venv" / "bin" / "temporal")
        subprocess.run(
            [temporal_cli, "operator", "namespace", "create", "--namespace", "support", "--address", temporal],
            check=True,
            capture_output=True,
            timeout=30,
        )
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(dev.pid, signal.SIGTERM)
        try:
            dev.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(dev.pid, signal.SIGKILL)


def with_uncommitted_changes(clone: Path) -> None:
    """This checkout's uncommitted changes and new files, carried into the clone, so that a page's fix walks before
    it is committed; in CI there are none."""
    diff = subprocess.run(["git", "diff", "HEAD", "--binary"], cwd=ROOT, capture_output=True, check=True).stdout
    if diff:
        subprocess.run(["git", "apply", "--whitespace=nowarn"], cwd=clone, input=diff, check=True)
    new = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    for name in filter(None, (part.decode() for part in new)):
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, clone / name)
    if diff or any(new):
        print("walk: with this checkout's uncommitted changes", file=sys.stderr)


def sections(found: list[Command]) -> list[tuple[str, list[Command]]]:
    grouped: list[tuple[str, list[Command]]] = []
    for command in found:
        if grouped and grouped[-1][0] == command.section:
            grouped[-1][1].append(command)
        else:
            grouped.append((command.section, [command]))
    return grouped


def end_all(sections: list[Section]) -> None:
    """Whatever a section left running (a command that waits, should its check have failed first)."""
    for section in sections:
        section.end()


def walk(work: Path) -> None:
    found = commands(ROOT)
    check_tables(found)
    clone = work / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=60)
    with_uncommitted_changes(clone)
    shutil.copytree(ROOT / ".tools", clone / ".tools", symlinks=True)  # the pinned uv `./dev` installed here
    with postgres_schema("walk") as owner_url, rows_only_role(owner_url) as rows_url:
        site = Site(
            temporal=f"127.0.0.1:{free_port()}",
            owner_url=owner_url,
            rows_url=rows_url,
            policy=clone / "deploy" / "policy.example.toml",
            web_port=free_port(),
        )
        env = environment(site, free_port())
        with contextlib.ExitStack() as stack:
            done: list[Section] = []
            stack.callback(end_all, done)
            for number, (name, steps) in enumerate(sections(found)):
                if number == 1:
                    stack.enter_context(dev_server(clone, env, site.temporal, work / "dev.log"))
                run = [c for c in steps if not skipped(c)]
                for command in (c for c in steps if c not in run):
                    print(f"skip {command.where}  {command.bare[:90]}: {skipped(command)}")
                if not run:
                    continue
                (work / str(number)).mkdir(parents=True)
                section = Section(name, run, site, clone, work / str(number), env)
                done.append(section)
                began = time.monotonic()
                section.run()  # on a failure, end_all stops what it left running
                section.stop_servers()
                for command in run:
                    print(f"ok   {command.where}  {command.printed[:100]}")
                print(f"     {name}: {time.monotonic() - began:.1f} s")
            for section in done:
                section.check_waits()


def main() -> int:
    """``--keep DIR``: walk in DIR and leave it (the clone, each section's script, the logs) for a look."""
    began = time.monotonic()
    kept = sys.argv[2] if sys.argv[1:2] == ["--keep"] else None
    with contextlib.nullcontext(kept) if kept else tempfile.TemporaryDirectory(prefix="walk-docs-") as work:
        try:
            walk(Path(work))
        except WalkFailedError as failed:
            print(f"\nwalk failed: {failed}", file=sys.stderr)
            return 1
    print(f"walked {', '.join(DOCS)} in {time.monotonic() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
