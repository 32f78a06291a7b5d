"""What runs of earlier releases handed the runs that continued them, read from ``tests/handed_over/`` (and this
build's own, from ``replay_histories/``): the contract between releases, as fixtures.

A ticket that continues as new hands its next run two arguments, the ticket and ``ContinuedState``. Every stored
history that ends in continue-as-new (``*_first_run.json``, and any other) holds that hand-over in its last event,
and the history stored beside it of the same workflow id, whose run it continued, holds what that next run did: the
answers it was sent, what it told the model at each step and what the model answered, the payouts and emails it
made, and its outcome. So a release that must take over runs an earlier release handed over proves it does by
starting the continued run itself, from the stored arguments, and comparing what it does with what the stored run
did (``tests/test_handed_over.py``).

Nothing here names a release, a scenario or a field of the snapshot: a history's release is the folder's it is
stored in, this build's for the replay gate's own, or else read from the patch markers it recorded (``release_of``),
the world the first run left (its audit entries, payouts, emails, stored conversation and archive) is rebuilt by
running again, on the test's business, the product's own activities that wrote it, with the inputs the history
recorded (``Seeding``), and the model answers as the history says it answered (``HistoryModel``). A history
recorded by a later release is a fixture of the same contract as soon as it is stored.
"""

from __future__ import annotations

import re
import tomllib
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

from temporalio import activity, workflow
from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHistory, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.plugin import SimplePlugin
from temporalio.testing import ActivityEnvironment

from activities.content_store import ContentStore
from activities.contracts.conversation import Decision, ThinkRequest
from activities.contracts.names import WORKFLOW_NAME
from activities.tools import TOOLS, Rule
from agent_worker import wiring
from agent_worker.cli.replay import HISTORIES, load_history
from agent_worker.config import DATA_CONVERTER
from tests.support.harness import Harness
from tests.support.tickets import Handle
from tests.support.waits import poll

RECORDED_BY_RELEASE = Path(__file__).parent.parent / "handed_over"
"""Hand-overs recorded by a release's own code, in a folder named for it (``1.4.0/``), with the run that continued
each, and the replay gate's histories of the 1.x releases (``gate-1.x/``, their release read from their patch
markers): what earlier releases handed over (``tests/handed_over/README.md`` says how they were recorded)."""

FOLDERS: tuple[Path, ...] = (HISTORIES, RECORDED_BY_RELEASE)
"""Where stored runs are read from: this build's own histories (the replay gate's) and the earlier releases'."""

PROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"

BASELINE = "1.0.0"
"""The release every 1.x history without a patch marker was recorded on (1.0.0 folded every patch before it). A
release that records no marker at all (2.0.0 on, whose tickets move at continue-as-new) is known by where its
histories are stored instead (``release_of``)."""

RELEASE = re.compile(r"^(\d+\.\d+\.\d+)/")
"""A patch's id begins with the release that added it (``workflows.patches.Patch``)."""
RELEASE_FOLDER = re.compile(r"^\d+\.\d+\.\d+$")
"""A folder named for the release whose code recorded the histories in it (``RECORDED_BY_RELEASE``)."""

_INSTANT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


@dataclass(frozen=True)
class Run:
    """One stored run: its file, its history, and what identifies it on the server it was recorded on."""

    path: Path
    history: WorkflowHistory

    @property
    def started(self) -> Any:
        return self.history.events[0].workflow_execution_started_event_attributes

    @property
    def workflow_id(self) -> str:
        return str(self.started.workflow_id)

    @property
    def continued_from(self) -> str:
        """The run id of the run this one continued; empty for a ticket's first run."""
        return str(self.started.continued_execution_run_id)

    @property
    def hands_over(self) -> bool:
        last = self.history.events[-1]
        return last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW

    def events(self, *kinds: EventType.ValueType) -> list[HistoryEvent]:
        return [event for event in self.history.events if event.event_type in kinds]


@dataclass(frozen=True)
class HandedOver:
    """A hand-over a stored run made: the arguments it continued with, as the data converter decodes them, the
    release that wrote them, when, and the stored run that continued it (None if none is stored)."""

    name: str
    release: str
    ticket: Any
    state: Any
    handed_at: datetime
    first: Run
    run_id: str
    """The handing run's id on the server it was recorded on (its continuation names it)."""
    continued: Run | None


@cache
def stored_runs(folders: tuple[Path, ...] = FOLDERS) -> list[Run]:
    return [Run(path, load_history(path)) for folder in folders for path in sorted(folder.glob("**/*.json"))]


def handing_over(folders: tuple[Path, ...] = FOLDERS) -> list[Path]:
    """Every stored history that ends in continue-as-new: what the tests are parametrised over."""
    return [run.path for run in stored_runs(folders) if run.hands_over]


def label(path: Path) -> str:
    """A stored run's name in a test's id: its file's, after the folder of ``tests/handed_over/`` it is stored in,
    if any (``1.4.0/``, ``gate-1.x/``)."""
    return f"{path.parent.name}/{path.stem}" if path.is_relative_to(RECORDED_BY_RELEASE) else path.stem


def release_of(path: Path) -> str:
    """The release that recorded the history at ``path``: this build's for the replay gate's own
    (``replay_histories/``, which holds no patch marker); the folder's it is stored in, if it is named for one;
    else ``release`` of its patch markers."""
    if path.is_relative_to(HISTORIES):
        return this_release()
    if RELEASE_FOLDER.match(path.parent.name):
        return path.parent.name
    return release(load_history(path))


@cache
def this_release() -> str:
    """The release this build is: the project's version."""
    return str(tomllib.loads(PROJECT.read_text())["project"]["version"])


def release(history: WorkflowHistory) -> str:
    """The oldest release that records ``history`` as it is: the newest release among the patches it recorded, a
    patch being new code that every later release keeps until it retires it; ``BASELINE`` where it recorded none.
    A later release's run that met none of that release's patches reads as the earlier one's, whose code takes
    the same path (a 1.2.0 run that met no 1.2.0 patch reads as 1.1.0), which is why hand-overs recorded by a
    release's own code are stored in a folder named for it (``release_of``)."""
    found = [
        _release_of_marker(event)
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
        and event.marker_recorded_event_attributes.marker_name == "core_patch"
    ]
    releases = [r for r in found if r is not None]
    return max(releases, key=lambda r: tuple(int(n) for n in r.split(".")), default=BASELINE)


def _release_of_marker(event: HistoryEvent) -> str | None:
    details = event.marker_recorded_event_attributes.details
    for payloads in details.values():
        for payload in payloads.payloads:
            decoded = DATA_CONVERTER.payload_converter.from_payload(payload)
            patch_id = decoded.get("id") if isinstance(decoded, dict) else None
            if isinstance(patch_id, str) and (match := RELEASE.match(patch_id)):
                return match.group(1)
    return None


async def decode(payloads: Payloads) -> list[Any]:
    """Payloads as plain JSON values, decoded as the workers decode them (the project's data converter)."""
    return list(await DATA_CONVERTER.decode(payloads.payloads))


async def read(path: Path, folders: tuple[Path, ...] = FOLDERS) -> HandedOver:
    """The hand-over the run stored at ``path`` made, with the stored run that continued it."""
    runs = stored_runs(folders)
    first = next(run for run in runs if run.path == path)
    if not first.hands_over:
        raise ValueError(f"{path} does not end in continue-as-new")
    event = first.history.events[-1]
    ticket, state = await decode(event.workflow_execution_continued_as_new_event_attributes.input)
    run_id = str(first.started.original_execution_run_id)  # the run's own id, unless a reset made it
    continued = [r for r in runs if r.workflow_id == first.workflow_id and r.continued_from == run_id]
    return HandedOver(
        name=label(path),
        release=release_of(path),
        ticket=ticket,
        state=state,
        handed_at=event.event_time.ToDatetime(UTC),
        first=first,
        run_id=run_id,
        continued=continued[0] if continued else None,
    )


def shifted(value: Any, by: timedelta) -> Any:
    """``value`` with every instant in it (an ISO 8601 string with its offset) moved by ``by``: a hand-over taken
    over now as it was then, its deadlines as far ahead of the continued run's start as they were of the stored
    one's. Nothing else changes."""
    if isinstance(value, dict):
        return {key: shifted(item, by) for key, item in value.items()}
    if isinstance(value, list):
        return [shifted(item, by) for item in value]
    if isinstance(value, str) and _INSTANT.match(value):
        moved = datetime.fromisoformat(value) + by
        return moved.isoformat().replace("+00:00", "Z")
    return value


def translated(value: Any, names: dict[str, str]) -> Any:
    """``value`` with the recorded workflow and run ids replaced by the new run's: an audit entry's key names the
    run that wrote it, which the continued run's check of the trail (``AuditLog.holds``) looks for."""
    if isinstance(value, dict):
        return {key: translated(item, names) for key, item in value.items()}
    if isinstance(value, list):
        return [translated(item, names) for item in value]
    if isinstance(value, str):
        for old, new in names.items():
            value = value.replace(old, new)
    return value


@dataclass
class HistoryModel:
    """The model as the stored runs heard it: at each step, the decision their ``think`` activity returned. A step
    they never asked about fails the run for good, naming it: a continued run that asks the model something the
    stored one did not has already gone another way."""

    decisions: dict[int, Decision]
    name: str = "history"
    asked: list[int] = field(default_factory=list)

    async def decide(self, request: ThinkRequest) -> Decision:
        self.asked.append(request.step)
        if request.step not in self.decisions:
            raise ApplicationError(f"the stored runs made no model call at step {request.step}", non_retryable=True)
        return self.decisions[request.step].model_copy(update={"conversation_ref": None})

    @classmethod
    async def of(cls, runs: Iterable[Run]) -> HistoryModel:
        decisions: dict[int, Decision] = {}
        for run in runs:
            for request, result in await completed(run, "think"):
                decisions[ThinkRequest.model_validate(request[0]).step] = Decision.model_validate(result[0])
        return cls(decisions)


async def completed(run: Run, activity_name: str | None = None) -> list[tuple[list[Any], list[Any]]]:
    """The input and result of every activity (named ``activity_name``, if given) the run completed, in order."""
    scheduled: dict[int, HistoryEvent] = {}
    done = []
    for event in run.history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled[event.event_id] = event
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            attributes = event.activity_task_completed_event_attributes
            start = scheduled[attributes.scheduled_event_id].activity_task_scheduled_event_attributes
            if activity_name is None or start.activity_type.name == activity_name:
                done.append((start.input, attributes.result))
    return [(await decode(given), await decode(result)) for given, result in done]


def world_writers() -> frozenset[str]:
    """The activities whose effects a continued run reads or counts: the audit trail it checks carried answers
    against, the content store its conversation and archive live in, the model's calls it is budgeted by, and
    every payout and email (each declared by the tools' registry). Reads leave nothing to rebuild."""
    effects = {name for name, tool in TOOLS.items() if tool.rule in (Rule.PAYS, Rule.MAILS)}
    return frozenset({"audit", "archive_records", "think", "summarize", *effects})


@dataclass
class Seeding:
    """The world a stored run left, rebuilt on a test's business: each of its completed activities that wrote
    something the next run reads (``world_writers``) run again by the product's own activity, on the inputs the
    history recorded, its ids translated (``translated``). An effect of a local activity is not rebuilt: its
    input is not in the history (none a continued run checks is written by one in the stored hand-overs)."""

    agent: Harness
    model: HistoryModel
    names: dict[str, str]

    def activities(self) -> dict[str, Callable[..., Any]]:
        built = self.agent.settings()
        policy = wiring.policy_in_force(built)
        made = wiring.build_activities(built, self.agent.store, self.model, blobs=self.agent.store.blobs, policy=policy)
        return {_activity_name(fn): fn for fn in made}

    async def rebuild(self, run: Run) -> list[str]:
        """Run again what ``run`` wrote; return where an activity run again answered otherwise than it answered
        the stored run (its receipt, the conversation's key, the archive's key): the world rebuilt is then not the
        one the stored run left, and what the continued run does with it proves nothing."""
        by_name = self.activities()
        writers = world_writers()
        converter = DATA_CONVERTER.payload_converter
        otherwise = []
        scheduled: dict[int, HistoryEvent] = {}
        for event in run.history.events:
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                scheduled[event.event_id] = event
            if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                continue
            done = event.activity_task_completed_event_attributes
            start = scheduled[done.scheduled_event_id].activity_task_scheduled_event_attributes
            name = start.activity_type.name
            if name not in writers:
                continue
            fn = by_name[name]
            given = translated(await decode(start.input), self.names)
            args = converter.from_payloads(
                converter.to_payloads(given), activity._Definition.must_from_callable(fn).arg_types
            )
            answer = await ActivityEnvironment().run(fn, *args)
            again = converter.from_payloads(converter.to_payloads([answer]))
            then = translated(await decode(done.result), self.names) or [None]
            if again != then:
                otherwise.append(f"{name} (event {event.event_id}) answered {again}, where it answered {then}")
        return otherwise


def _activity_name(fn: Callable[..., Any]) -> str:
    name = activity._Definition.must_from_callable(fn).name
    assert name is not None
    return name


def content_refs(value: Any) -> list[str]:
    """Every key of the content store ``value`` names (``sha256:`` and 64 hex digits)."""
    if isinstance(value, dict):
        return [ref for item in value.values() for ref in content_refs(item)]
    if isinstance(value, list):
        return [ref for item in value for ref in content_refs(item)]
    return [value] if isinstance(value, str) and re.fullmatch(r"sha256:[0-9a-f]{64}", value) else []


def missing_content(agent: Harness, state: Any) -> list[str]:
    """The keys the state names that the test's content store cannot hand back."""
    store = ContentStore(agent.store.blobs)
    missing = []
    for ref in content_refs(state):
        try:
            store.get(ref)
        except Exception:  # noqa: BLE001 - any refusal is the answer: this key cannot be read
            missing.append(ref)
    return missing


@workflow.defn(name="HandsOverAsStored")
class HandsOverAsStored:
    """A run that does nothing but hand the ticket over, as a stored run did, with the stored arguments: the run
    it continues into is a continued run in every way the server says (``continued_run_id``), which is the only
    way a run takes carried state (``workflows.intake``)."""

    @workflow.run
    async def run(self, arguments: list[Any]) -> None:
        workflow.continue_as_new(args=arguments, workflow=WORKFLOW_NAME)


HANDS_OVER = SimplePlugin("tests-hands-over-as-stored", workflows=[HandsOverAsStored])
"""The worker plugin that registers ``HandsOverAsStored`` beside the product's workflow."""


@dataclass(frozen=True)
class Sent:
    """A signal or an update the stored continued run was sent, as its history holds it."""

    kind: str
    name: str
    args: list[Any]


async def sent_to(run: Run) -> list[Sent]:
    """What the stored run was sent, in order: signals, and updates it accepted (an update its validator refused
    is not in a history, and changed nothing)."""
    found = []
    for event in run.history.events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            signalled = event.workflow_execution_signaled_event_attributes
            found.append(Sent("signal", signalled.signal_name, await decode(signalled.input)))
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            request = event.workflow_execution_update_accepted_event_attributes.accepted_request.input
            found.append(Sent("update", request.name, await decode(request.args)))
    return found


async def settled(client: Client, workflow_id: str) -> bool:
    """Whether the ticket's current run waits on nothing but the outside, or has closed: it is the product's run
    (not the one handing over), it has completed a workflow task, and no workflow task and no activity is in
    flight. Read from one fetch of its history, so that no two reads of a moving run are taken for one moment.
    Every answer a stored continued run got came while it waited so (the recorder sends them so), and a run is
    driven the same way from outside only by waiting for the same: an answer sent earlier (before the run's first
    task, which may start after a backoff the server chooses, or while a step's model call is in flight) is
    taken otherwise."""
    events = [event async for event in client.get_workflow_handle(workflow_id).fetch_history_events()]
    started = events[0].workflow_execution_started_event_attributes
    if started.workflow_type.name != WORKFLOW_NAME:
        return False
    if events[-1].event_type in _CLOSED:
        return True
    kinds = [event.event_type for event in events]
    scheduled = {e.event_id for e in events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED}
    ended = {_scheduled_id(e) for e in events if e.event_type in _ACTIVITY_ENDED}
    busy = {EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED}
    return EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED in kinds and kinds[-1] not in busy and scheduled <= ended


_CLOSED = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
}
_ACTIVITY_ENDED = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED,
}


def _scheduled_id(event: HistoryEvent) -> int:
    attributes = getattr(event, event.WhichOneof("attributes") or "")
    return int(attributes.scheduled_event_id)


async def drive(client: Client, workflow_id: str, answers: Sequence[Sent]) -> list[str]:
    """Send the answers in order, each once the run has settled; return what each update answered."""
    handle: Handle = client.get_workflow_handle(workflow_id)
    replies = []
    for sent in answers:
        await poll(
            lambda: settled(client, workflow_id),
            timeout=60,
            interval=0.05,
            what=f"the run to wait for {sent}",
        )
        if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
            raise AssertionError(f"the run closed before it was sent what the stored run was sent: {sent}")
        if sent.kind == "signal":
            await handle.signal(sent.name, args=sent.args)
            continue
        try:
            replies.append(repr(await handle.execute_update(sent.name, args=sent.args)))
        except WorkflowUpdateFailedError as failed:
            replies.append(f"failed: {failed.cause}")
    return replies


@dataclass(frozen=True)
class Effects:
    """What a ticket's run did that a customer, an approver or the books can tell: the payouts and the emails it
    made (with their idempotency keys, which say they are made once), and its outcome's verdict, refunds and
    answers to its approval requests."""

    payouts: list[dict[str, Any]]
    emails: list[dict[str, Any]]
    status: str
    steps: int
    refunds: list[dict[str, Any]]
    approvals: list[dict[str, Any]]
    policy: str | None
    """The money policy the run judged by: a run recorded under another than the test's may judge otherwise."""


async def effects(run: Run) -> Effects:
    """``Effects`` as a run's history holds them: the payout and email activities it scheduled, and its result."""
    pays = {name for name, tool in TOOLS.items() if tool.rule is Rule.PAYS}
    mails = {name for name, tool in TOOLS.items() if tool.rule is Rule.MAILS}
    payouts, emails = [], []
    for event in run.events(EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED):
        start = event.activity_task_scheduled_event_attributes
        name = start.activity_type.name
        if name in pays:
            (request,) = await decode(start.input)
            payouts.append(
                {
                    "tool": name,
                    "order_id": request["order_id"],
                    "amount_cents": request["amount_cents"],
                    "idempotency_key": request["idempotency_key"],
                    "unattended": request.get("limits") is not None,
                }
            )
        elif name in mails:
            (request,) = await decode(start.input)
            emails.append({k: request[k] for k in ("to", "subject", "body", "idempotency_key")})
    closing = run.history.events[-1]
    if closing.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
        raise AssertionError(f"{run.path.stem} closed as {EventType.Name(closing.event_type)}, not with an outcome")
    (outcome,) = await decode(closing.workflow_execution_completed_event_attributes.result)
    return Effects(
        payouts=payouts,
        emails=emails,
        status=outcome["status"],
        steps=outcome["steps"],
        refunds=outcome["refunds"],
        approvals=[{k: v for k, v in answer.items() if k != "at"} for answer in outcome["approvals"]],
        policy=outcome.get("policy"),
    )


async def told(run: Run) -> list[dict[str, Any]]:
    """What the run told the model at each step: the turns new since the conversation so far, and the key of that
    conversation in the content store, which names all of it (a chain of hashes, ``activities.content_store``).
    The model's stored answers stand for what it would answer only where it was told the same."""
    return [
        {key: request[key] for key in ("step", "messages", "conversation_ref")}
        for (request,), _ in await completed(run, "think")
    ]


def runs_before(run: Run, folders: tuple[Path, ...] = FOLDERS) -> list[Run]:
    """The stored runs of ``run``'s ticket that handed it over on the way to ``run``, oldest first: a run that took a
    hand-over over and handed over in its turn (on a server that suggested it early) reads what they left too."""
    runs = stored_runs(folders)
    chain: list[Run] = []
    while run.continued_from:
        earlier = [r for r in runs if str(r.started.original_execution_run_id) == run.continued_from]
        if not earlier:
            break
        run = earlier[0]
        chain.insert(0, run)
    return chain


async def fetch(client: Client, workflow_id: str, run_id: str) -> Run:
    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    return Run(Path(f"{workflow_id}.json"), history)


async def wait_closed(client: Client, workflow_id: str, handing_run: str, timeout: float = 60) -> str:
    """Wait until the ticket has closed (in whatever run); return the id of the run that took the hand-over over,
    the one to compare with the stored continued run. A ticket that does not close, where the stored one did,
    fails naming where it stands."""
    handle: Handle = client.get_workflow_handle(workflow_id)

    async def closed() -> bool:
        described = await handle.describe()
        return described.run_id != handing_run and described.status != WorkflowExecutionStatus.RUNNING

    try:
        await poll(closed, timeout=timeout, interval=0.1, what="the continued run to close")
    except TimeoutError:
        described = await handle.describe()
        last = [EventType.Name(event.event_type) async for event in handle.fetch_history_events()][-4:]
        raise AssertionError(
            f"the ticket did not close within {timeout} s, where the stored run did: its run {described.run_id} is "
            f"{described.status.name if described.status else None}, its last events {last}, activities in flight "
            f"{[a.activity_type.name for a in described.raw_description.pending_activities]}"
        ) from None
    handing = await client.get_workflow_handle(workflow_id, run_id=handing_run).fetch_history()
    return str(handing.events[-1].workflow_execution_continued_as_new_event_attributes.new_execution_run_id)


async def differences(agent: Harness, handed: HandedOver, state: Any = None) -> list[str]:
    """Take the hand-over over on ``agent``'s worker and business as the stored continued run took it (``state``, if
    given, instead of the one handed over), and say every way this release's run went otherwise; none, if it went
    the same way.

    The stored arguments are handed to ``SupportAgent`` by a run that continues as new into it at once
    (``HandsOverAsStored``), so the run that takes them is a continued run as the server knows one; the business is
    what the handing run left (``Seeding``); every instant of the hand-over is moved by as long as has passed since
    it was made (``shifted``); the model answers each step as the stored runs heard it (``HistoryModel``); and each
    answer the stored continued run was sent is sent once the run waits as that one did (``drive``). Then the run
    must tell the model the same at each step (``told``), make the same payouts and emails with the same idempotency
    keys, close with the same verdict, refunds, answers (their moment aside) and policy (``Effects``), and leave the
    payments the handing run made and its own, each once."""
    if handed.continued is None:
        return [f"{handed.name}: the run it continued into is not stored, so there is nothing to compare with"]
    found: list[str] = []
    earlier = runs_before(handed.first)
    model = await HistoryModel.of([*earlier, handed.first, handed.continued])
    moved = datetime.now(UTC) - handed.handed_at
    arguments = [shifted(handed.ticket, moved), shifted(handed.state if state is None else state, moved)]
    workflow_id = f"handed-over-{uuid.uuid4()}"
    handing = await agent.client.start_workflow(
        HandsOverAsStored.run, arguments, id=workflow_id, task_queue=agent.task_queue
    )
    handing_run = str(handing.result_run_id)
    names = {handed.first.workflow_id: workflow_id, handed.run_id: handing_run}
    names |= {str(run.started.original_execution_run_id): handing_run for run in earlier}  # one run stands for all
    for run in [*earlier, handed.first]:
        found += [f"rebuilt otherwise: {line}" for line in await Seeding(agent, model, names).rebuild(run)]
    found += [f"not in the content store: {ref}" for ref in missing_content(agent, arguments[1])]
    model.asked.clear()
    async with agent.worker(model, plugins=[HANDS_OVER]):
        try:
            await drive(agent.client, workflow_id, await sent_to(handed.continued))
            taking_run = await wait_closed(agent.client, workflow_id, handing_run)
        except AssertionError as went_otherwise:
            return [*found, str(went_otherwise)]
    ours = await fetch(agent.client, workflow_id, taking_run)
    if ours.continued_from != handing_run:
        found.append(f"the run compared is not the one the hand-over went to ({ours.continued_from})")
    ours_told, stored_told = await told(ours), await told(handed.continued)
    if ours_told != stored_told:
        found.append(f"told the model otherwise: {ours_told}, where the stored run told it {stored_told}")
    steps = sorted(step for step in model.decisions if step > handed.state["steps_taken"])
    if model.asked != steps:
        found.append(f"asked the model at steps {model.asked}, where the stored run asked at {steps}")
    try:
        ours_did = await effects(ours)
    except AssertionError as went_otherwise:
        return [*found, str(went_otherwise)]
    stored_did = await effects(handed.continued)
    found += [
        f"{part.name}: {getattr(ours_did, part.name)}, where the stored run's were {getattr(stored_did, part.name)}"
        for part in fields(Effects)
        if getattr(ours_did, part.name) != getattr(stored_did, part.name)
    ]
    before = [
        (request["order_id"], request["amount_cents"])
        for run in [*earlier, handed.first]
        for (request,), _ in await completed(run, "issue_refund")
    ]
    made = [(p["order_id"], p["amount_cents"]) for p in ours_did.payouts if p["tool"] == "issue_refund"]
    paid = [(refund.order_id, refund.amount_cents) for refund in agent.store.payments.refunds()]
    if paid != before + made:
        found.append(f"the payments are {paid}, where the handing run paid {before} and this run scheduled {made}")
    return found
