"""What the inbox carries from one request to the next without keeping anything itself: what became of an answer,
across the redirect to the ticket's page, and a person's confirmation of a large approval.

Both are short-lived values in the page's address or form, bound with the inbox's own keys (``Keys``) to the
person they were made for (their CSRF binding) and the ticket, so one shown to anyone else, for another ticket,
after it lapsed, or made up, is simply not believed: the notice does not render, the confirmation is asked again.
Neither says whom it was made for: the binding (a session's secret) never appears in an address.

A notice is encrypted (AES-GCM, ``Keys.encrypt``), not only signed: it can quote a decline's reason, name the
customer or the question, and an address ends up in browser history, proxy and access logs and shared links. Only
the inbox can read it back. A confirmation carries nothing but its deadline, so a MAC is enough.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, get_args

from agent_worker.inbox.auth import Keys

NOTICE_LIFETIME = timedelta(minutes=10)
"""How long the ticket's address after an answer shows what became of it: a reload soon after still does, a link
kept for later opens the ticket alone."""
CONFIRMATION_LIFETIME = timedelta(minutes=10)
"""How long a confirmation page's button may be pressed: a page left open longer asks again."""

NoticeKind = Literal["taken", "pending", "rejected", "error"]


@dataclass(frozen=True)
class Notice:
    """What became of a person's answer, shown at the top of the ticket's page."""

    kind: NoticeKind
    text: str


def _bound(binding: str, workflow_id: str) -> bytes:
    return json.dumps(["notice", binding, workflow_id]).encode()


def seal(keys: Keys, notice: Notice, *, binding: str, workflow_id: str, now: datetime) -> str:
    """The notice as a value for the ticket's address, encrypted, for this person and this ticket only, until it
    lapses."""
    fields = {"k": notice.kind, "t": notice.text, "e": int((now + NOTICE_LIFETIME).timestamp())}
    return keys.encrypt(json.dumps(fields, separators=(",", ":")).encode(), about=_bound(binding, workflow_id))


def unseal(keys: Keys, sealed: str | None, *, binding: str, workflow_id: str, now: datetime) -> Notice | None:
    """The notice if this inbox sealed it for this person and ticket and it has not lapsed; None otherwise."""
    plain = keys.decrypt(sealed or "", about=_bound(binding, workflow_id)) if sealed else None
    if plain is None:
        return None
    try:
        fields = json.loads(plain)
        kind, text, expires = fields["k"], str(fields["t"]), int(fields["e"])
    except (ValueError, KeyError, TypeError):
        return None
    if kind not in get_args(NoticeKind) or expires <= now.timestamp():
        return None
    return Notice(kind, text)


def _confirmed(binding: str, workflow_id: str, request_id: str, amount_cents: int, expires: int) -> str:
    return json.dumps([binding, workflow_id, request_id, amount_cents, expires])


def confirmation(  # noqa: PLR0913 - what a confirmation is about, all of it
    keys: Keys, *, binding: str, workflow_id: str, request_id: str, amount_cents: int, now: datetime
) -> str:
    """The value the confirmation page's button sends: this person confirms this amount for this request."""
    expires = int((now + CONFIRMATION_LIFETIME).timestamp())
    return f"{expires}.{keys.mac('confirm', _confirmed(binding, workflow_id, request_id, amount_cents, expires))}"


def confirmed(  # noqa: PLR0913 - what a confirmation is about, all of it
    keys: Keys,
    value: str | None,
    *,
    binding: str,
    workflow_id: str,
    request_id: str,
    amount_cents: int,
    now: datetime,
) -> bool:
    """Whether ``value`` is a confirmation this inbox made for exactly this approval, still in time."""
    expires, _, mac = (value or "").partition(".")
    try:
        until = int(expires)
    except ValueError:
        return False
    if until <= now.timestamp():
        return False
    return keys.valid("confirm", _confirmed(binding, workflow_id, request_id, amount_cents, until), mac)
