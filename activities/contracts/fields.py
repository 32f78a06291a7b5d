"""What every contract is made of: the base class that refuses unknown fields, the field types with their
bounds (an id, a person's name, an email address, an amount in cents), and the few rules about them that more
than one side applies (how money reads, when two addresses are the same mailbox, how a validation error reads).

One type per kind of field, used wherever a caller, an approver or a relay fills that kind in, each bounded by
its figure in ``activities.contracts.limits``: a field past its bound is refused where it comes in, naming the
field, before any copy of it can outgrow a payload. Records the workflow makes from what it took (the outcome,
audit entries, the request that waits) keep plain ``str``: what they hold was bounded on the way in, and a bound
that refused a record would make a recorded history that holds one unreadable. The one record that quotes what
it did not take, an approval's rejection, is cut to a head and its size instead (``Note``)."""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StringConstraints,
    ValidationError,
    model_serializer,
)
from pydantic_core import PydanticCustomError

from activities.contracts.limits import (
    APPROVERS_BYTES,
    DETAIL_CHARS,
    EMAIL_CHARS,
    LABEL_CHARS,
    MESSAGE_ID_CHARS,
    NAME_CHARS,
    ORDER_ID_CHARS,
    REASON_CHARS,
    RECORD_REASON_BYTES,
    REFERENCES_KEPT,
    REQUEST_ID_CHARS,
    TICKET_ID_CHARS,
    cut,
    encoded_bytes,
)


def _order_id_chars(order_id: str) -> str:
    if len(order_id) > ORDER_ID_CHARS:
        raise PydanticCustomError(
            "string_too_long", "String should have at most {max_length} characters", {"max_length": ORDER_ID_CHARS}
        )
    return order_id


ORDER_ID_PATTERN = r"[A-Z]-\d{4,}"
OrderId = Annotated[str, StringConstraints(pattern=rf"^{ORDER_ID_PATTERN}$"), AfterValidator(_order_id_chars)]
"""An order id (``A-1001``). Its length is checked after the pattern rather than stated in the JSON schema: the
tools' schemas are in every request the model is sent, and the evals look recorded answers up by the request."""
EmailAddress = Annotated[
    str, StringConstraints(strip_whitespace=True, max_length=EMAIL_CHARS, pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
]
MESSAGE_ID_PATTERN = r"<[^<>\s]+>"
"""A ``Message-ID`` as the mail receiver finds one in a header (RFC 5322's ``msg-id``, read loosely)."""


def _printable_ascii(message_id: str) -> str:
    """A ``Message-ID`` the desk will write into a header of its own: nothing but printable ASCII, so no line
    break, control character or encoded word of a stranger's can become a header of the desk's email."""
    if not all("!" <= c <= "~" for c in message_id):
        raise PydanticCustomError("message_id_chars", "a Message-ID must be printable ASCII", {})
    return message_id


MessageId = Annotated[
    str,
    StringConstraints(max_length=MESSAGE_ID_CHARS, pattern=rf"^{MESSAGE_ID_PATTERN}$"),
    AfterValidator(_printable_ascii),
]
"""The ``Message-ID`` of a customer's mail (``<id@host>``), which the desk's email answers under (``In-Reply-To``)."""
MessageIds = Annotated[list[MessageId], Field(max_length=REFERENCES_KEPT)]
"""The ``Message-ID`` s of the conversation a message belongs to, oldest first (its ``References``)."""


def trimmed_chain(ids: list[str]) -> list[str]:
    """The ids of a conversation, oldest first, each once (where it last stands), and at most ``REFERENCES_KEPT``:
    past it, the first (which names the conversation) and the newest, as mail programs trim ``References``."""
    chain = list(dict.fromkeys(reversed(ids)))[::-1]
    if len(chain) <= REFERENCES_KEPT:
        return chain
    return [chain[0], *chain[len(chain) - REFERENCES_KEPT + 1 :]]


NonEmpty = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
"""Any text but blank, with no bound of its own: each use states one (the email tool's subject and body)."""
TicketId = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=TICKET_ID_CHARS)]
"""A ticket's id as its caller names it: the workflow's id (``ticket-<id>``) and every key the ticket makes are
built from it. Any characters: nothing built from it needs fewer, and a ticket already running under an id a
narrower rule refused would be failed by its next continue-as-new, which reads its ticket anew."""
RequestId = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=REQUEST_ID_CHARS)]
"""An approval request's id, as an answer names it (``R1``)."""
PersonName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=NAME_CHARS)]
"""Someone who may approve, or who answered: as the approval inbox signs them in, and as a signal claims."""
Label = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=LABEL_CHARS)]
"""A short name for a kind of thing: a role (``lead``), an order event (``delivered``)."""
Reason = Annotated[str, StringConstraints(strip_whitespace=True, max_length=REASON_CHARS)]
"""Why a person answered as they did, in their words."""
PolicyDigest = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{16}$")]
"""What names a money policy (``MoneyPolicy.digest``): ``sha256:`` and 16 hex digits."""
Detail = Annotated[str, StringConstraints(strip_whitespace=True, max_length=DETAIL_CHARS)]
"""What a relay says of an event besides its kind."""


def approvers_fit(names: list[str]) -> list[str]:
    """``names`` if they fit ``APPROVERS_BYTES`` encoded; a validation error saying by how much they do not."""
    size = encoded_bytes(names)
    if size > APPROVERS_BYTES:
        raise PydanticCustomError(
            "approvers_too_long",
            "the names take {size} bytes as JSON, more than the {limit} a waiting approval request may carry",
            {"size": size, "limit": APPROVERS_BYTES},
        )
    return names


Approvers = Annotated[list[PersonName], AfterValidator(approvers_fit)]
"""People who may approve, within ``APPROVERS_BYTES`` together. A use that also bounds how many states it before
the check of bytes (``Annotated[list[PersonName], Field(max_length=...), AfterValidator(approvers_fit)]``): a
count stated after a validator reads "Value should have ..." instead of "List should have ..."."""
Note = Annotated[str, AfterValidator(lambda text: cut(text, RECORD_REASON_BYTES))]
"""A reason the workflow writes into a record about an answer: a rejection's may quote what the sender sent, or
list every approver, so past ``RECORD_REASON_BYTES`` it is a head of it and its size. A decline's reason is never
cut (``Reason`` fits), and cutting is idempotent: a record read back reads the same."""
MAX_CENTS = 2**31 - 1
"""The most any order can be charged (the ``orders`` column is a 32-bit integer on PostgreSQL), so the most any
refund or approval can be about: an amount the model, a caller or an approver sends above it is refused where
it is validated, long before it reaches a search attribute or a database column that cannot hold it."""
Cents = Annotated[int, Field(gt=0, le=MAX_CENTS)]
Currency = Annotated[str, StringConstraints(strip_whitespace=True, pattern=r"^[A-Za-z]{3}$", to_upper=True)]
"""An ISO 4217 code, upper case as people read it (Stripe reports ``usd``)."""
DEFAULT_CURRENCY = "USD"
"""An order's currency where the shop's record names none: what the embedded store assumes of orders it held
before it kept currencies, and of orders added without one."""
DAY = 86_400


def bounded(low: int, high: int) -> Any:
    """An integer option with a sane range: past it, a ticket is refused as invalid input naming the field,
    instead of overflowing a date or a search attribute in the middle of its run. Strict, as the docs promise a
    wrong type fails the run: ``"1999"``, ``1999.0`` and ``true`` are not numbers a caller meant, and pydantic's lax
    mode would read them as 1999, 1999 and 1."""
    return Field(ge=low, le=high, strict=True)


class Contract(BaseModel):
    """A message on the wire: unknown fields are refused so that a typo fails loudly instead of being lost."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Snapshot(Contract):
    """What a piece of a run hands the run that continues its ticket. A worker of the release before may take
    that run during a rolling deploy, and it refuses fields it does not know (``UnreadableStateError``: the task
    waits for a newer worker). So the fields a release adds are named in ``newer`` and written only when they
    hold something other than their default: every run that does not need them continues on either release."""

    newer: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _newer_only_when_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        fields: dict[str, Any] = handler(self)
        for name in self.newer:
            if getattr(self, name) == type(self).model_fields[name].default:
                fields.pop(name, None)
        return fields


def find_order_id(text: str) -> str | None:
    """The first order id a customer's words name, if any."""
    match = re.search(ORDER_ID_PATTERN, text)
    return match.group(0) if match else None


def same_address(a: str, b: str) -> bool:
    """Whether two email addresses are the same mailbox, as far as code may assume: identical but for the case
    of ASCII letters. Nothing Unicode folds is equal (``straße`` is not ``strasse``, the Kelvin sign is not
    ``k``), so a look-alike the model writes never matches the customer's address."""
    return normalised_address(a) == normalised_address(b)


def normalised_address(address: str) -> str:
    """The one spelling of a mailbox that ``same_address`` compares: what a ledger stores an address as, so that
    ``Ann@Example.com`` and ``ann@example.com`` are one customer there too."""
    return address.strip().translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def money(cents: int) -> str:
    """An amount as the workflow writes it into what it records and tells the model ("4900" -> "49.00"). It is
    part of recorded entries the audit trail is searched for, so it never changes; it names no currency and
    assumes two decimals, so nothing a person reads is written with it: people read ``amount``."""
    return f"{cents // 100}.{cents % 100:02d}"


MINOR_UNITS = {
    **dict.fromkeys(
        [
            "BIF",
            "CLP",
            "DJF",
            "GNF",
            "JPY",
            "KMF",
            "KRW",
            "MGA",
            "PYG",
            "RWF",
            "UGX",
            "VND",
            "VUV",
            "XAF",
            "XOF",
            "XPF",
        ],
        0,
    ),
    **dict.fromkeys(["BHD", "JOD", "KWD", "OMR", "TND"], 3),
}
"""Currencies whose smallest unit is not a hundredth (ISO 4217, as Stripe counts them); every other has two
decimals. An amount is always a count of the smallest unit, as Stripe's are."""


def amount(units: int, currency: str | None) -> str:
    """An amount as people read it, the one way every amount a person reads is written: its currency's code,
    then thousands separated and the currency's own decimals (``amount(214748364, "usd")`` is
    ``USD 2,147,483.64``, ``amount(4900, "JPY")`` is ``JPY 4,900``, ``amount(1500, "KWD")`` is ``KWD 1.500``).

    With no currency known (a policy's limit, which judges orders in any currency; a record from before amounts
    named theirs), the count of the smallest unit, and what it is in a currency of two decimals:
    ``amount(2000, None)`` is ``2,000 (20.00 in a two-decimal currency)``. Never a bare ``20.00``: on a yen
    order that is a hundred times too small, and on a dinar order ten times too large."""
    if currency:
        return f"{currency.upper()} {number(units, currency)}"
    return f"{units:,} ({number(units, None)} in a two-decimal currency)"


def number(units: int, currency: str | None, *, thousands: str = ",") -> str:
    """An amount's number in its currency's decimals, thousands separated by ``thousands``: ``2,147,483.64``, or
    with ``thousands=""`` ``2147483.64``, as a spreadsheet reads a number."""
    decimals = MINOR_UNITS.get((currency or "").upper(), 2)
    whole, part = divmod(abs(units), 10**decimals)
    sign = "-" if units < 0 else ""
    return f"{sign}{whole:,}".replace(",", thousands) + (f".{part:0{decimals}d}" if decimals else "")


ERRORS_NAMED = 10
"""Bad fields a validation error names; the rest are counted. A payload with ten thousand unknown fields would
otherwise make a reason of a megabyte, recorded in the outcome and the audit trail."""
ERROR_CHARS = 400
"""The most of one field's message a validation error's line keeps. Pydantic's own words never quote the value,
but a message may (the codec's reason for a payload it could not open, which a caller can forge): a failure must
never echo a caller's megabytes back into the history."""


def describe_errors(error: ValidationError) -> str:
    """A validation error as one line that names each bad field: ``options.max_steps: Input should be ...``
    (the first ``ERRORS_NAMED`` of them, and how many more), and never more than ``ERROR_CHARS`` of what is
    said about one field."""
    details = error.errors(include_url=False)
    parts = []
    for detail in details[:ERRORS_NAMED]:
        field = ".".join(str(part) for part in detail["loc"])[:100] or "input"
        message = detail["msg"]
        if len(message) > ERROR_CHARS:
            message = f"{message[:ERROR_CHARS]}… [{len(message)} characters in all]"
        parts.append(f"{field}: {message}")
    if len(details) > ERRORS_NAMED:
        parts.append(f"and {len(details) - ERRORS_NAMED} more")
    return "; ".join(parts)
