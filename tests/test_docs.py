"""What the README and the docs say about the code, held true where a machine can check it: the pictures they show
are the ones ``scripts/screenshots.py`` takes, of the current pages under the default policy; a count of scenarios or
stored histories is the tree's; and every call the programs make to a ticket goes through ``agent_worker/tickets.py``
but the two ``docs/architecture.md`` names."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import screenshots

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MEASURED = {ROOT / "docs" / "benchmarks.md"}
"""Pages whose figures are measurements, each given with its date, machine and command: a count there is the count
of its day."""


def shown_pictures() -> dict[Path, set[str]]:
    """Each page, and the pictures of ``docs/screenshots/`` it shows."""
    found = {}
    for page in PAGES:
        names = set(re.findall(r"!\[[^\]]*\]\((?:docs/)?screenshots/([^)]+)\)", page.read_text()))
        if names:
            found[page] = names
    return found


def test_the_docs_show_the_pictures_the_script_takes_and_no_other() -> None:
    shown = shown_pictures()
    assert shown.get(ROOT / "README.md"), "the README shows the inbox"
    assert set().union(*shown.values()) == set(screenshots.SHOTS)
    kept = {path.name for path in screenshots.FOLDER.iterdir()}
    assert kept == set(screenshots.SHOTS), "docs/screenshots/ holds exactly what the script takes"


def test_the_pictures_are_of_these_pages_under_the_default_policy() -> None:
    """Stamped by the script with the default policy's digest and the inbox's pages: a picture of another policy, of
    pages changed since, or taken by hand, is refused."""
    stale = {
        name: screenshots.stamp_of((screenshots.FOLDER / name).read_bytes())
        for name in screenshots.SHOTS
        if screenshots.stamp_of((screenshots.FOLDER / name).read_bytes()) != screenshots.stamp()
    }
    assert stale == {}, f"take them again: {screenshots.RETAKE} (they show {stale}, not {screenshots.stamp()})"


@pytest.mark.browser
@pytest.mark.timeout(240)
def test_the_script_takes_every_picture_anew(tmp_path: Path) -> None:
    """As CI runs it: the dev stack, tickets under the default policy, Chromium; each picture written and stamped."""
    taken = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "screenshots.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=200,
    )
    assert taken.returncode == 0, taken.stdout[-2000:] + taken.stderr[-4000:]
    for name in screenshots.SHOTS:
        assert screenshots.stamp_of((tmp_path / name).read_bytes()) == screenshots.stamp(), name


COUNTED = {
    "scenarios": lambda: len([*(ROOT / "evals").glob("*.yaml"), *(ROOT / "evals").glob("*.json")]),
    "stored histories": lambda: len(list((ROOT / "replay_histories").glob("*.json"))),
}
"""What the docs may count, and the count today (``agent-worker eval`` and ``agent-worker replay`` print them)."""


def test_a_count_of_scenarios_or_stored_histories_in_the_docs_is_todays() -> None:
    wrong = []
    for page in set(PAGES) - MEASURED:
        for number, what in re.findall(r"\b(\d+) (scenarios|stored histories)\b", page.read_text()):
            if int(number) != COUNTED[what]():
                wrong.append(f"{page.relative_to(ROOT)}: {number} {what}, today {COUNTED[what]()}")
    assert wrong == []


TICKET_CALLS = {
    "get_workflow_handle",
    "get_workflow_handle_for",
    "start_workflow",
    "execute_workflow",
    "list_workflows",
    "count_workflows",
}
"""The client's calls that reach a ticket's workflow: a handle on it, a start, a search of them."""
ELSEWHERE = {
    ("agent_worker/evals/runner.py", "start_workflow"),
    ("agent_worker/stuck.py", "list_workflows"),
}
"""The two calls made outside ``tickets.py``, as ``docs/architecture.md`` names them."""


def test_every_call_the_programs_make_to_a_ticket_goes_through_tickets_but_the_two_the_architecture_names() -> None:
    made = set()
    for path in sorted((ROOT / "agent_worker").rglob("*.py")):
        module = path.relative_to(ROOT).as_posix()
        if module == "agent_worker/tickets.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in TICKET_CALLS:
                made.add((module, node.func.attr))
    assert made == ELSEWHERE
    architecture = (ROOT / "docs" / "architecture.md").read_text()
    for module, _ in ELSEWHERE:
        assert f"`{module.removeprefix('agent_worker/')}`" in architecture, module
