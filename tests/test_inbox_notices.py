"""What the inbox carries across a redirect and a confirmation page, as pure logic: believed only for the person
and ticket it was made for, until it lapses, and never when altered."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

from agent_worker.inbox.auth import Keys
from agent_worker.inbox.notices import (
    CONFIRMATION_LIFETIME,
    NOTICE_LIFETIME,
    Notice,
    confirmation,
    confirmed,
    seal,
    unseal,
)

KEYS = Keys([b"k" * 32])
NOW = datetime(2026, 12, 1, 9, 14, tzinfo=UTC)
NOTICE = Notice("taken", "approved; Refunded 49.00 on order A-1001 (refund #1).")


def test_a_notice_is_read_back_only_by_its_person_for_its_ticket_until_it_lapses() -> None:
    sealed = seal(KEYS, NOTICE, binding="session:a", workflow_id="x/events", now=NOW)

    assert unseal(KEYS, sealed, binding="session:a", workflow_id="x/events", now=NOW) == NOTICE
    assert unseal(KEYS, sealed, binding="session:b", workflow_id="x/events", now=NOW) is None
    assert unseal(KEYS, sealed, binding="session:a", workflow_id="x", now=NOW) is None
    assert unseal(KEYS, sealed, binding="session:a", workflow_id="x/events", now=NOW + NOTICE_LIFETIME) is None
    assert unseal(Keys([b"o" * 32]), sealed, binding="session:a", workflow_id="x/events", now=NOW) is None
    assert "session:a" not in sealed  # the binding, a session's secret, never rides in an address


def test_an_altered_or_made_up_notice_is_not_believed() -> None:
    sealed = seal(KEYS, NOTICE, binding="session:a", workflow_id="t", now=NOW)
    raw = base64.urlsafe_b64decode(sealed + "=" * (-len(sealed) % 4))
    turned = [bytes([*raw[:i], raw[i] ^ 1, *raw[i + 1 :]]) for i in (0, 12, len(raw) - 1)]
    forged = [base64.urlsafe_b64encode(t).decode().rstrip("=") for t in turned]
    plain = base64.urlsafe_b64encode(b'{"k":"taken","t":"approved","e":9999999999}').decode()

    for value in (*forged, sealed[:-4], sealed + "AAAA", plain, "", "taken", "!!not base64!!", "é", "A" * 16):
        assert unseal(KEYS, value, binding="session:a", workflow_id="t", now=NOW) is None, value


def test_a_notice_in_an_address_reads_as_nothing_without_the_inboxs_key() -> None:
    """A decline's reason, the customer's address and the question are in what it says; none is in the address,
    whatever encoding is tried on it."""
    said = Notice("taken", "declined; cleo@example.com asked 'My parcel for order A-1003 never arrived'. Reason: lost")
    sealed = seal(KEYS, said, binding="session:a", workflow_id="t", now=NOW)
    raw = base64.urlsafe_b64decode(sealed + "=" * (-len(sealed) % 4))

    for secret in ("cleo", "example.com", "parcel", "Reason", "lost", "declined", "taken"):
        assert secret not in sealed
        assert secret.encode() not in raw
    assert unseal(KEYS, sealed, binding="session:a", workflow_id="t", now=NOW) == said


def test_a_confirmation_holds_for_exactly_the_answer_it_was_made_for_until_it_lapses() -> None:
    made = confirmation(KEYS, binding="session:a", workflow_id="t", request_id="R1", amount_cents=120_000, now=NOW)

    def holds(
        value: str | None = made,
        *,
        binding: str = "session:a",
        workflow_id: str = "t",
        request_id: str = "R1",
        amount_cents: int = 120_000,
        now: datetime = NOW,
    ) -> bool:
        return confirmed(
            KEYS,
            value,
            binding=binding,
            workflow_id=workflow_id,
            request_id=request_id,
            amount_cents=amount_cents,
            now=now,
        )

    expires, _, mac = made.partition(".")
    assert holds()
    assert not holds(binding="session:b")
    assert not holds(workflow_id="u")
    assert not holds(request_id="R2")
    assert not holds(amount_cents=120_001)
    assert not holds(now=NOW + CONFIRMATION_LIFETIME)
    assert not holds(f"{int(expires) + 3600}.{mac}")  # a later end, claimed
    assert not holds("yes")
    assert not holds(None)
