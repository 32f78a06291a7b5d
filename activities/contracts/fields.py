"""What every contract is made of: the base class that refuses unknown fields, the field types with their
bounds (an order id, an email address, an amount in cents), and the few rules about them that more than one
side applies (how money reads, when two addresses are the same mailbox, how a validation error reads). Records the
workflow makes keep plain ``str``, except the one that quotes what it did not take, an approval's rejection,
which is cut to a head and its size (``Note``)."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
)

from activities.contracts.limits import RECORD_REASON_BYTES, cut

ORDER_ID_PATTERN = r"[A-Z]-\d{4,}"
OrderId = Annotated[str, StringConstraints(pattern=rf"^{ORDER_ID_PATTERN}$")]
EmailAddress = Annotated[
    str, StringConstraints(strip_whitespace=True, max_length=254, pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
]
NonEmpty = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Note = Annotated[str, AfterValidator(lambda text: cut(text, RECORD_REASON_BYTES))]
"""A reason the workflow writes into a record about an answer: a rejection's may quote what the sender sent, or
list every approver, so past ``RECORD_REASON_BYTES`` it is a head of it and its size. A decline's reason is never
cut (500 characters, ``Approval.reason``), and cutting is idempotent: a record read back reads the same."""
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
    instead of overflowing a date or a search attribute in the middle of its run."""
    return Field(ge=low, le=high)


class Contract(BaseModel):
    """A message on the wire: unknown fields are refused so that a typo fails loudly instead of being lost."""

    model_config = ConfigDict(extra="forbid", frozen=True)


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
    part of recorded entries the audit trail is searched for, so it never changes; people read ``amount``."""
    return f"{cents // 100}.{cents % 100:02d}"


MINOR_UNITS = {
    **dict.fromkeys(["BIF", "CLP", "DJF", "GNF", "JPY", "KMF", "KRW", "MGA", "PYG", "RWF", "UGX", "VND", "VUV",
                     "XAF", "XOF", "XPF"], 0),
    **dict.fromkeys(["BHD", "JOD", "KWD", "OMR", "TND"], 3),
}  # fmt: skip
"""Currencies whose smallest unit is not a hundredth (ISO 4217, as Stripe counts them); every other has two
decimals. An amount is always a count of the smallest unit, as Stripe's are."""


def amount(units: int, currency: str | None) -> str:
    """An amount as people read it: its currency's code, then thousands separated and the currency's own
    decimals (``amount(214748364, "usd")`` is ``USD 2,147,483.64``, ``amount(4900, "JPY")`` is ``JPY 4,900``).
    With no currency known, the number alone, still separated."""
    shown = number(units, currency)
    return f"{currency.upper()} {shown}" if currency else shown


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
