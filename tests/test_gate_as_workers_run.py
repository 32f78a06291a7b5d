"""The replay gate refuses workflow code that would misbehave on a worker, however the fault is spelled.

Workers run the workflow unsandboxed: one process imports each module once and runs ticket after ticket on it, in
a time zone, under a hash seed, by a clock. Each test here plants one way of depending on any of those, in a copy of
the project (``tests/support/planted.py``), in a module and a spelling of its own (not the ones a review found them
in: the mechanism is under test, not the spot), and runs ``agent-worker replay`` on the copy as CI runs it on the
project. Each shows what the fault does (state left for the next ticket, or commands that differ from one replay,
process or machine to the next) in the gate's own words, and the gate exiting 1.

Without a fault the same histories pass (the first test), so each refusal is the plant's. The static half of the net,
which refuses most of these by name before a history takes them, is ``tests/test_determinism.py``."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from tests.support.planted import Plant, Ran, copy_of_the_project, gate

pytestmark = pytest.mark.slow

HISTORIES = ("approved_refund", "resolved_without_approval", "judged_again_under_the_policy_in_force")
"""A refund a person approved, one that needed nobody, and one whose booking was refused as judged by another policy
and judged again: every piece on the path of one of them."""

AUDIT_WRITE = Plant(
    "workflows/audit_log.py",
    "        self._written += 1\n        key = self.key(str(self._written))\n",
    "        self._written += 1\n        key = self.key(str(self._written))\n{}",
)
"""Where an audit entry is written: on the path of every ticket, and an activity's input the plant can reach."""


def in_audit_write(code: str, *, module_level: str = "") -> list[Plant]:
    """``code`` run as each audit entry is written (indented into ``AuditLog.write``), and ``module_level`` code at the
    end of ``workflows/audit_log.py``."""
    body = "".join(f"        {line}\n" for line in code.splitlines())
    plants = [Plant(AUDIT_WRITE.module, AUDIT_WRITE.old, AUDIT_WRITE.new.format(body))]
    if module_level:
        plants.append(Plant(AUDIT_WRITE.module, "\nclass AuditLog:\n", f"\n{module_level}\n\nclass AuditLog:\n"))
    return plants


async def refused(tmp_path: Path, *plants: Plant) -> str:
    ran = await gate(copy_of_the_project(tmp_path, *plants), *HISTORIES)
    assert ran.code == 1, ran.out
    assert not ran.out.splitlines()[-1].endswith(" 0 failed"), ran.out
    return ran.out


async def test_without_a_fault_the_histories_pass_in_every_condition(tmp_path: Path) -> None:
    ran: Ran = await gate(copy_of_the_project(tmp_path), *HISTORIES)
    assert ran.code == 0, ran.out
    assert ran.out.splitlines()[-1] == f"{len(HISTORIES)} replayed, 0 failed"
    conditions = ran.out.splitlines()[-2]
    assert "twice in one process" in conditions
    assert "unsandboxed" in conditions
    assert "hash seed 0, UTC" in conditions
    assert "hash seed 1, Pacific/Chatham" in conditions
    assert shutil.which("faketime"), "faketime is missing: `./dev system` installs it (./dev test and .ci/run do too)"
    assert "the clock 1000 days ahead" in conditions


# --- state that outlives a run ------------------------------------------------------------------------------------


async def test_state_kept_on_a_class_of_the_workflow_is_refused(tmp_path: Path) -> None:
    """The review's H9, on another class: a list on ``AuditLog`` that every ticket's entries count on."""
    out = await refused(
        tmp_path,
        Plant(
            "workflows/audit_log.py",
            "    def __init__(self, ticket_id: str, notes_from",
            "    _tickets: ClassVar[list[str]] = []\n\n    def __init__(self, ticket_id: str, notes_from",
        ),
        Plant("workflows/audit_log.py", "from typing import Protocol", "from typing import ClassVar, Protocol"),
        *in_audit_write(
            "self._tickets.append(self._ticket_id)\nentry = f'{entry} ({len(self._tickets)} on this worker)'"
        ),
    )
    assert "left state behind for the next ticket: workflows.audit_log.AuditLog._tickets" in out, out
    assert "it issued other commands" in out, out  # the entry counts the other tickets' entries too


async def test_a_mutable_class_attribute_reached_through_self_is_refused(tmp_path: Path) -> None:
    """The review's H3, on another piece: ``Replies.turns`` made a class attribute, so every ticket's turns are one
    list (the ``__init__`` assignment gone), reached only through ``self``."""
    out = await refused(
        tmp_path,
        Plant(
            "workflows/waits.py",
            "        self.turns: list[Turn] = []\n",
            "",
        ),
        Plant("workflows/waits.py", "class Replies:\n", "class Replies:\n    turns: list[Turn] = []  # noqa: RUF012\n"),
    )
    assert "left state behind for the next ticket: workflows.waits.Replies.turns" in out, out


async def test_another_modules_table_changed_through_its_name_is_refused(tmp_path: Path) -> None:
    """The review's H4, from another piece: the audit log lengthens the audit activity's attempt in ``timeouts``."""
    out = await refused(
        tmp_path,
        *in_audit_write(
            "timeouts.ATTEMPTS['audit'] = {**timeouts.ATTEMPTS['audit'], "
            "'start_to_close_timeout': timeouts.ATTEMPTS['audit']['start_to_close_timeout'] * 2}"
        ),
    )
    assert "left state behind for the next ticket: workflows.timeouts.ATTEMPTS['audit']" in out, out
    assert "it issued other commands" in out, out  # each ticket's audit attempts are longer than the last's


async def test_a_cache_decorator_is_refused(tmp_path: Path) -> None:
    """A cached function of the run's id gives every later ticket the first one's."""
    out = await refused(
        tmp_path,
        *in_audit_write(
            "key = f'{key}/{_first_workflow()}'",
            module_level="import functools\n\n\n@functools.cache\ndef _first_workflow() -> str:\n"
            "    return workflow.info().workflow_id\n",
        ),
    )
    assert (
        "workflows.audit_log._first_workflow changed from <cached function holding 0> to <cached function hold" in out
    )


async def test_next_on_a_module_level_iterator_is_refused(tmp_path: Path) -> None:
    out = await refused(
        tmp_path,
        *in_audit_write("key = f'{key}/{next(_SERIALS)}'", module_level="_SERIALS = iter(range(1_000_000))\n"),
    )
    assert "left state behind for the next ticket: workflows.audit_log._SERIALS changed" in out, out


async def test_reversing_a_module_level_list_in_place_is_refused(tmp_path: Path) -> None:
    """Each ticket flips the order of a module's list, so which comes first depends on the tickets before."""
    out = await refused(
        tmp_path,
        Plant(
            "workflows/audit_log.py",
            "        self._written = 0\n",
            "        self._written = 0\n        _ORDER.reverse()\n",
        ),
        Plant(
            "workflows/audit_log.py", "\nclass AuditLog:\n", '\n_ORDER = ["refunds", "credit"]\n\n\nclass AuditLog:\n'
        ),
    )
    assert "left state behind for the next ticket: workflows.audit_log._ORDER[0] changed from 'refunds'" in out, out


async def test_setattr_on_a_class_and_globals_are_refused(tmp_path: Path) -> None:
    out = await refused(
        tmp_path,
        *in_audit_write("setattr(Notes, 'last_ticket', self._ticket_id)\nglobals()['_LAST_ENTRY'] = entry"),
    )
    assert "workflows.audit_log.Notes.last_ticket appeared" in out, out
    assert "workflows.audit_log._LAST_ENTRY appeared" in out, out


async def test_a_change_through_a_local_alias_is_refused(tmp_path: Path) -> None:
    out = await refused(
        tmp_path,
        *in_audit_write("seen = _SEEN\nseen[self._ticket_id] = entry", module_level="_SEEN: dict[str, str] = {}\n"),
    )
    assert "left state behind for the next ticket: workflows.audit_log._SEEN" in out, out


# --- values read from the machine ---------------------------------------------------------------------------------


async def test_a_clock_read_in_the_tools_declarations_is_refused(tmp_path: Path) -> None:
    """The review's H2 in the gate: ``activities/tools.py`` runs in the workflow (the toolbox validates every call's
    arguments with its models), so an argument model that reads the clock decides otherwise on another day."""
    out = await refused(
        tmp_path,
        Plant(
            "activities/tools.py",
            "import inspect\n",
            "import inspect\nfrom datetime import UTC, datetime\n\nfrom pydantic import model_validator\n",
        ),
        Plant(
            "activities/tools.py",
            '    amount_cents: Cents = Field(description="The amount to refund, in cents.")\n',
            '    amount_cents: Cents = Field(description="The amount to refund, in cents.")\n\n'
            '    @model_validator(mode="after")\n'
            "    def _not_once_the_books_close(self) -> IssueRefundArgs:\n"
            "        if datetime.now(UTC).year >= 2029:  # a year only the gate's clock ahead reaches yet\n"
            "            raise ValueError('the books are closed')\n"
            "        return self\n",
        ),
    )
    assert "the clock 1000 days ahead" in out, out


async def test_a_suppressed_clock_read_is_refused(tmp_path: Path) -> None:
    """The review's H1 in the gate: a clock read behind ``# noqa: TID251`` reads another time in every process."""
    out = await refused(
        tmp_path,
        *in_audit_write("entry = f'{entry} (at {datetime.now(UTC):%Y-%m-%d %H:%M:%S.%f})'  # noqa: TID251 - a label"),
        Plant(
            "workflows/audit_log.py",
            "from collections.abc import",
            "from datetime import UTC, datetime\nfrom collections.abc import",
        ),
    )
    assert "it issued other commands" in out, out


async def test_a_read_of_the_machines_time_zone_is_refused(tmp_path: Path) -> None:
    """``astimezone()`` with no zone: UTC on one worker, Chatham on another."""
    out = await refused(
        tmp_path,
        *in_audit_write("entry = f'{entry} ({workflow.now().astimezone():%H:%M %Z} local)'"),
    )
    assert "it issued other commands under hash seed 1, Pacific/Chatham" in out, out


async def test_a_pydantic_type_that_reads_the_clock_is_refused(tmp_path: Path) -> None:
    """``FutureDatetime`` validated in workflow code: a deadline in the future today is in the past on the day a
    worker replays the ticket."""
    out = await refused(
        tmp_path,
        *in_audit_write("TypeAdapter(FutureDatetime).validate_python(workflow.now() + timedelta(days=30))"),
        Plant(
            "workflows/audit_log.py",
            "from collections.abc import",
            "from datetime import timedelta\n\nfrom pydantic import FutureDatetime, TypeAdapter\n"
            "from collections.abc import",
        ),
    )
    assert "Input should be in the future" in out, out


async def test_iterating_a_set_of_strings_is_refused_under_another_hash_seed(tmp_path: Path) -> None:
    """The order of a set of strings is the process's hash seed's: two workers write the entry two ways."""
    out = await refused(
        tmp_path,
        *in_audit_write('entry = f\'{entry} (checked: {", ".join({"owner", "amount", "limit", "currency"})})\''),
    )
    assert "it issued other commands under hash seed 1" in out, out


def test_the_worker_image_pins_the_hash_seed() -> None:
    """Two workers iterate a set of strings in one order only where the seed is pinned: the image pins it."""
    dockerfile = (Path(__file__).resolve().parent.parent / "Dockerfile").read_text()
    final_stage = dockerfile.rsplit("\nFROM ", 1)[1]
    assert "PYTHONHASHSEED=0" in final_stage


async def test_asyncio_wait_orders_what_it_returns_by_address_which_no_history_holds() -> None:
    """Why ``asyncio.wait`` is banned (``tests/test_determinism.py`` shows the ban): the tasks it returns come in a
    set, iterated by their hashes, which are their addresses in one process, not anything a history records; two
    that finish in one activation may come out in either order on a replaying worker. ``workflow.wait`` keeps the
    order they were given in."""

    async def done() -> None:
        return None

    tasks = [asyncio.ensure_future(done()) for _ in range(8)]
    finished, _ = await asyncio.wait(tasks)
    assert isinstance(finished, set)
    assert [hash(task) for task in finished] == [object.__hash__(task) for task in finished]  # by address
    assert sorted(finished, key=tasks.index) == tasks  # what a history could hold: the order given
