"""What every contract is made of: the base class that refuses unknown fields, the field types with their
bounds (an order id, an email address, an amount in cents), and the few rules about them that more than one
side applies (how money reads, when two addresses are the same mailbox, how a validation error reads)."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
)

ORDER_ID_PATTERN = r"[A-Z]-\d{4,}"
OrderId = Annotated[str, StringConstraints(pattern=rf"^{ORDER_ID_PATTERN}$")]
EmailAddress = Annotated[
    str, StringConstraints(strip_whitespace=True, max_length=254, pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
]
NonEmpty = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
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
    part of recorded entries the audit trail is searched for, so it never changes; it names no currency and
    assumes two decimals, so nothing a person reads is written with it: people read ``amount``."""
    return f"{cents // 100}.{cents % 100:02d}"


MINOR_UNITS = {
    **dict.fromkeys(["BIF", "CLP", "DJF", "GNF", "JPY", "KMF", "KRW", "MGA", "PYG", "RWF", "UGX", "VND", "VUV",
                     "XAF", "XOF", "XPF"], 0),
    **dict.fromkeys(["BHD", "JOD", "KWD", "OMR", "TND"], 3),
}  # fmt: skip
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


def describe_errors(error: ValidationError) -> str:
    """A validation error as one line that names each bad field: ``options.max_steps: Input should be ...``
    (the first ``ERRORS_NAMED`` of them, and how many more)."""
    details = error.errors(include_url=False)
    parts = []
    for detail in details[:ERRORS_NAMED]:
        field = ".".join(str(part) for part in detail["loc"])[:100] or "input"
        parts.append(f"{field}: {detail['msg']}")
    if len(details) > ERRORS_NAMED:
        parts.append(f"and {len(details) - ERRORS_NAMED} more")
    return "; ".join(parts)
