"""Real tickets into the replay gate: ``agent-worker replay capture`` through an encrypted dev server, redacted
consistently, refused when redaction would change what the workflow decides, and refused cleanly on bad input."""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from activities.business import Business
from activities.contracts.fields import EmailAddress, OrderId
from activities.contracts.limits import INLINE_RECORDS_BYTES, TEXT_CHARS, TOOL_INPUT_BYTES, encoded_bytes
from activities.contracts.names import APPROVE_SIGNAL, CUSTOMER_MESSAGE
from activities.contracts.ticket import Outcome, Status, ToolCallRecord
from agent_worker.capture.payloads import CaptureError, copy_history, open_payloads, seal
from agent_worker.capture.redaction import EMAIL_DOMAIN, Redactor, redact
from agent_worker.cli.replay import HISTORIES, history_files, load_history, replay_history
from agent_worker.codec import ENCODING, EncryptionCodec, with_codec
from agent_worker.config import DATA_CONVERTER
from tests.support.harness import Harness
from tests.support.models import PlaybackModel, calls, says
from tests.support.processes import AGENT_WORKER, address
from tests.support.tickets import answer, ticket
from tests.support.waits import awaiting, waiting_for_customer

KEY = os.urandom(32)
KEYS = json.dumps({"2026-11": base64.b64encode(KEY).decode()})
QUESTION = "My parcel for order A-1001 never arrived, my name is Ann Lovelace"
REPLY = "Ann Lovelace again: please refund order A-1005 too, the second box was crushed"
REASON = "Checked with the courier, Lovelace's box was crushed"
DAYS_3 = 3 * 86_400


@pytest.fixture
async def encrypted(dev_server: WorkflowEnvironment, store: Business, agent: Harness) -> Harness:
    codec = EncryptionCodec({"2026-11": KEY}, "2026-11")
    client = await Client.connect(address(dev_server.client), data_converter=with_codec(DATA_CONVERTER, codec))
    return Harness(client, store, agent.task_queue)


async def agent_worker(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run ``agent-worker``; its exit code, stdout and stderr (a refusal is an outcome here, not a failure)."""
    process = await asyncio.create_subprocess_exec(
        AGENT_WORKER,
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def capture(client: Client, workflow_id: str, out: Path, *options: str) -> list[str]:
    return ["replay", "capture", workflow_id, "--out", str(out), "--address", address(client), *options]


def payload_documents(path: Path) -> Iterator[tuple[int, Any]]:
    """Every payload of a history file, opened: the event it is in, and its JSON (or its raw text)."""
    for event in json.loads(path.read_text())["events"]:
        stack: list[Any] = [event]
        while stack:
            value = stack.pop()
            if isinstance(value, dict):
                if "metadata" in value and "encoding" in value["metadata"]:
                    data = base64.b64decode(value.get("data", "")).decode(errors="replace")
                    try:
                        yield int(event["eventId"]), json.loads(data)
                    except ValueError:
                        yield int(event["eventId"]), data
                else:
                    stack.extend(value.values())
            elif isinstance(value, list):
                stack.extend(value)


def strings(value: Any, key: str | None = None) -> Iterator[tuple[str | None, str]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from strings(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v, key)
    elif isinstance(value, str):
        yield key, value


async def finished(agent: Harness, raw: dict[str, Any], model: PlaybackModel | None = None) -> tuple[str, Outcome]:
    """Run a ticket to its end; its workflow id (what ``capture`` is given) and its outcome."""
    async with agent.worker(model):
        handle = await agent.start(raw)
        return handle.id, await handle.result()


async def a_ticket_with_a_reply_an_approval_and_a_cancel(agent: Harness) -> str:
    """A ticket as a desk's real one runs: a question naming the customer, a refund and the email about it, a reply
    asking for another order's, which takes the ticket's total past its limit, a person's decline with a reason, and a
    cancel. Returns its workflow id."""
    async with agent.worker():
        handle = await agent.start(ticket(QUESTION, reply_window_seconds=DAYS_3, approval_limit_cents=5000))
        await waiting_for_customer(handle, turns=1)
        await handle.execute_update(CUSTOMER_MESSAGE, {"text": REPLY})
        request = await awaiting(handle, 2500)
        assert request is not None
        decline = answer(2500, approved=False, request_id=request.request_id, reason=REASON)
        await handle.signal(APPROVE_SIGNAL, decline)
        await waiting_for_customer(handle, turns=2)
        await handle.cancel()
        outcome: Outcome = await handle.result()
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    assert outcome.turns[1].status is Status.DECLINED
    return handle.id


async def test_a_ticket_captured_from_an_encrypted_server_and_redacted_holds_none_of_the_customers_words_and_replays(
    encrypted: Harness, tmp_path: Path
) -> None:
    workflow_id = await a_ticket_with_a_reply_an_approval_and_a_cancel(encrypted)
    plain, sealed = tmp_path / "plain.json", tmp_path / "sealed.json"

    code, out, err = await agent_worker(
        *capture(encrypted.client, workflow_id, plain, "--redact"), env={"AGENT_CODEC_KEYS": KEYS}
    )
    assert code == 0, err
    assert f"to {plain}" in out
    assert "written plain); it replays" in out

    raw = plain.read_text()
    opened = "\n".join(json.dumps(doc, ensure_ascii=False) for _, doc in payload_documents(plain))
    secrets = ["ann@example.com", "Lovelace", "never arrived", "crushed", "courier", "We have refunded"]
    for secret in secrets:
        assert secret not in raw
        assert base64.b64encode(secret.encode()).decode()[:12] not in raw
        assert secret not in opened, secret
    assert f"@{EMAIL_DOMAIN}" in opened
    assert ENCODING.decode() not in raw  # plain: a CI without the desk's keys replays it
    assert "A-1001" in opened  # order ids stay unless asked

    code, out, err = await agent_worker("replay", str(plain), env={"AGENT_CODEC_KEYS": "{}"})
    assert code == 0, out + err
    assert out.splitlines()[-1] == "1 replayed, 0 failed"

    options = ("--redact", "--redact-order-ids", "--encrypt")
    code, out, err = await agent_worker(
        *capture(encrypted.client, workflow_id, sealed, *options), env={"AGENT_CODEC_KEYS": KEYS}
    )
    assert code == 0, err
    assert "written encrypted" in out
    assert '"encryption-key-id"' in sealed.read_text()
    for secret in [*secrets, "A-1001"]:
        assert secret not in sealed.read_text()
    (with_key,) = await replay_with(sealed, encrypted.client)
    assert with_key is None, with_key
    code, out, _ = await agent_worker("replay", str(sealed), env={"AGENT_CODEC_KEYS": "{}"})
    assert code == 1, "an encrypted capture replays only with the desk's key"
    code, out, err = await agent_worker("replay", str(sealed), env={"AGENT_CODEC_KEYS": KEYS})
    assert code == 0, out + err


async def replay_with(path: Path, client: Client) -> list[str | None]:
    return [await replay_history(load_history(path), client.data_converter)]


async def test_the_same_address_gets_the_same_placeholder_in_every_event_and_one_mailbox_in_two_spellings_stays_one(
    agent: Harness, tmp_path: Path
) -> None:
    """The ticket's customer writes ``Ann@Example.COM``; the shop holds ``ann@example.com``: ``same_address`` says they
    are one mailbox, so the refund goes ahead, and after redaction they must still be one for it to replay."""
    workflow_id, outcome = await finished(agent, ticket(QUESTION, email="Ann@Example.COM", approval_limit_cents=10_000))
    assert outcome.status is Status.RESOLVED
    assert [r.amount_cents for r in agent.store.payments.refunds()] == [4900]
    out = tmp_path / "consistent.json"

    code, _, err = await agent_worker(*capture(agent.client, workflow_id, out, "--redact"))
    assert code == 0, err

    addresses: dict[str | None, set[str]] = {}
    questions: set[str] = set()
    for _, document in payload_documents(out):
        for key, value in strings(document):
            if "@" in value and key in {"customer_email", "to"}:
                addresses.setdefault(key, set()).add(value)
            if key == "question":
                questions.add(value)
    (placeholder,) = set().union(*addresses.values())
    assert set(addresses) == {"customer_email", "to"}  # the ticket, the order looked up, the email sent
    TypeAdapter(EmailAddress).validate_python(placeholder)
    assert placeholder.endswith(f"@{EMAIL_DOMAIN}")
    (question,) = questions
    assert len(question) == len(QUESTION)
    texts = {value for _, doc in payload_documents(out) for key, value in strings(doc) if key == "text"}
    assert question in texts  # the question as the model was asked it: the same placeholder text


@pytest.mark.slow
async def test_a_redaction_that_would_change_a_decision_fails_naming_the_mismatch_and_writes_nothing(
    agent: Harness, tmp_path: Path
) -> None:
    """A ticket's tool calls and usage just under ``INLINE_RECORDS_BYTES``, each call naming the customer's
    address: a placeholder address is longer than ``ann@example.com``, so redacted, the records pass the bound, and
    the workflow would archive them (an activity the ticket never ran). No placeholder can be both a valid address
    and as short as every real one, so the capture must refuse it rather than store a history that replays another
    way. Unredacted, the same ticket captures."""
    email = "ann@example.com"
    probe = await agent.run(ticket(email=email), PlaybackModel([calls(("note", {"to": email, "pad": ""})), says("ok")]))
    (result,) = probe.tool_calls  # what the workflow answers a call to no tool, recorded with the call

    def records(pads: list[int]) -> int:
        made = [
            ToolCallRecord(
                step=1,
                tool_use_id=f"toolu_0_{n}",
                name="note",
                input={"to": email, "pad": "x" * pad},
                result=result.result,
                is_error=result.is_error,
            )
            for n, pad in enumerate(pads)
        ]
        return encoded_bytes(made) + encoded_bytes(probe.usage.steps)

    count = (INLINE_RECORDS_BYTES - records([])) // (records([7_000]) - records([]))
    growth = len(Redactor().email(email)) - len(email)  # per call
    short = INLINE_RECORDS_BYTES - records([7_000] * count) - count * growth // 2
    pads = [7_000 + short // count] * count
    assert records(pads) <= INLINE_RECORDS_BYTES < records(pads) + count * growth
    assert encoded_bytes({"to": email, "pad": "x" * pads[0]}) + growth < TOOL_INPUT_BYTES  # none is cut, either way
    model = PlaybackModel([calls(*(("note", {"to": email, "pad": "x" * pad}) for pad in pads)), says("ok")])
    workflow_id, outcome = await finished(agent, ticket(email=email), model)
    assert outcome.archive_ref is None
    assert encoded_bytes(outcome.tool_calls) + encoded_bytes(outcome.usage.steps) == records(pads)
    out = tmp_path / "out" / "refused.json"
    out.parent.mkdir()

    code, out_text, err = await agent_worker(*capture(agent.client, workflow_id, out, "--redact"))
    assert code == 1, out_text
    assert "changed what the workflow decides" in err
    assert "Nondeterminism" in err
    assert list(out.parent.iterdir()) == []

    code, _, err = await agent_worker(*capture(agent.client, workflow_id, out))
    assert code == 0, err


async def test_bad_requests_are_refused_clearly_and_lose_nothing(agent: Harness, tmp_path: Path) -> None:
    workflow_id, _ = await finished(agent, ticket(approval_limit_cents=10_000))
    tmp_path = tmp_path / "out"
    tmp_path.mkdir()
    kept = tmp_path / "kept.json"
    kept.write_text("a history someone already reviewed")

    code, _, err = await agent_worker(*capture(agent.client, workflow_id, kept, "--redact"))
    assert (code, kept.read_text()) == (2, "a history someone already reviewed")
    assert f"{kept} exists: pass --force to replace it" in err

    missing = tmp_path / "no-such-folder" / "x.json"
    code, _, err = await agent_worker(*capture(agent.client, workflow_id, missing, "--redact"))
    assert code == 2
    assert "is not a folder" in err
    assert not missing.parent.exists()

    code, _, err = await agent_worker(*capture(agent.client, "T-no-such-ticket", tmp_path / "x.json", "--redact"))
    assert code == 1
    assert "cannot read the history of ticket-T-no-such-ticket" in err

    code, _, err = await agent_worker(*capture(agent.client, workflow_id, tmp_path / "x.json", "--redact-order-ids"))
    assert code == 2
    assert "--redact-order-ids goes with --redact" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.json"]

    code, _, err = await agent_worker(*capture(agent.client, workflow_id, kept, "--redact", "--force"))
    assert code == 0, err
    assert json.loads(kept.read_text())["events"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.json"]  # no temporary file left behind


async def test_a_capture_without_the_desks_key_is_refused_and_writes_nothing(
    encrypted: Harness, tmp_path: Path
) -> None:
    async with encrypted.worker():
        handle = await encrypted.start(ticket(QUESTION, approval_limit_cents=10_000))
        await handle.result()
    tmp_path = tmp_path / "out"
    tmp_path.mkdir()
    out = tmp_path / "x.json"
    wrong = json.dumps({"2026-11": base64.b64encode(os.urandom(32)).decode()})

    code, _, err = await agent_worker(
        *capture(encrypted.client, handle.id, out, "--redact"), env={"AGENT_CODEC_KEYS": wrong}
    )
    assert code == 1
    assert "does not open: authentication failed under key '2026-11'" in err
    code, _, err = await agent_worker(
        *capture(encrypted.client, handle.id, out, "--redact"), env={"AGENT_CODEC_KEYS": "{}"}
    )
    assert code == 1
    assert "is encrypted, and no key is configured: set AGENT_CODEC_KEYS" in err
    code, _, err = await agent_worker(*capture(encrypted.client, handle.id, out, "--redact", "--encrypt"))
    assert code == 2
    assert "--encrypt needs AGENT_CODEC_KEYS" in err
    assert list(tmp_path.iterdir()) == []


# --- the redaction itself, without a server ------------------------------------------------------------------


def test_placeholders_are_consistent_shaped_like_their_values_and_never_equal_to_another_value() -> None:
    redactor = Redactor(order_ids=True)
    redactor.collect("A-1001 A-1002 ann@example.com")
    ann = redactor.email("ann@example.com")
    assert redactor.email(" Ann@EXAMPLE.com") == ann
    assert redactor.email("bob@example.com") != ann
    assert redactor.json({"to": " ann@example.com "}) == {"to": f" {ann} "}
    assert redactor.json({"to": "Ann Lovelace <ann@example.com>"})["to"] == redactor.text(
        "Ann Lovelace <ann@example.com>"
    )
    TypeAdapter(EmailAddress).validate_python(ann)

    first, second = redactor.order_id("A-1001"), redactor.order_id("A-1002")
    assert first == redactor.order_id("A-1001") != second
    assert {first, second}.isdisjoint({"A-1001", "A-1002"})
    for placeholder in (first, second, redactor.order_id("B-0000123")):
        TypeAdapter(OrderId).validate_python(placeholder)
    assert len(redactor.order_id("B-0000123")) == len("B-0000123")
    assert Redactor().order_id("A-1001") == "A-1001"  # only when asked

    key = "sha256:" + "ab" * 32
    assert redactor.identifier(key) == redactor.identifier(key) != key
    assert redactor.json({"conversation_ref": key})["conversation_ref"].startswith("sha256:")


def test_free_text_keeps_its_length_in_characters_and_bytes_and_loses_its_words() -> None:
    redactor = Redactor(order_ids=True)
    text = '  Bonjour, je suis Zoë Müller 😀 — 東京 order A-1001\n\t"quoted" \\ end\u200b  '
    redacted = redactor.text(text)
    assert redacted == redactor.text(text)
    assert len(redacted) == len(text)
    assert len(redacted.encode()) == len(text.encode())
    assert encoded_bytes(redacted) == encoded_bytes(text)
    assert redacted.strip() != text.strip()
    assert len(redacted.strip()) == len(text.strip())
    for word in ("Bonjour", "Zoë", "Müller", "東京", "quoted", "A-1001"):
        assert word not in redacted
    assert redactor.order_id("A-1001") in redacted
    assert redactor.text("x" * TEXT_CHARS) != "x" * TEXT_CHARS

    assert redactor.json("customer_cents_per_day") == "customer_cents_per_day"  # a bare identifier
    assert redactor.json({"status": "resolved", "question": "resolved"}) == {
        "status": "resolved",
        "question": redactor.text("resolved"),
    }


def test_a_history_pointing_to_payloads_in_external_storage_is_refused_not_mangled() -> None:
    history = copy_history(load_history(HISTORIES / "approved_refund.json"))
    scheduled = [e.activity_task_scheduled_event_attributes for e in history.events]
    first = next(s for s in scheduled if s.input.payloads)  # the first activity with an input: the policy has none
    (payload,) = first.input.payloads
    payload.metadata["encoding"] = b"json/external-storage-reference"
    with pytest.raises(CaptureError, match="external storage"):
        open_payloads(history, None)


@pytest.mark.parametrize("path", history_files([HISTORIES]), ids=lambda p: p.stem)
async def test_every_stored_history_replays_after_redaction(path: Path) -> None:
    """The scenarios' histories cover every path worth guarding: redacted, with order ids, each still replays."""
    history = load_history(path)
    working = copy_history(history)
    opened = open_payloads(working, None)
    redact(working, opened, Redactor(order_ids=True))
    seal(opened, None)
    assert await replay_history(working) is None
    assert not any("ann@example.com" in item.slot.data.decode(errors="replace") for item in opened)
