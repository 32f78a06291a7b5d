"""How the tests find an amount a person would misread: a figure with decimals that names no currency, or names one
whose decimals it does not have. On a yen order ``15.00`` is a hundred times too small; on a dinar order ten
times too large; so every amount a person reads is written by ``activities.contracts.fields.amount``, and these
are the forms it writes: ``JPY 1,500``, ``KWD 1.500``, ``USD 15.00``, or with no currency known
``1,500 (15.00 in a two-decimal currency)``. The model's cost, in dollars, reads ``$0.0174`` or ``2.00 USD``."""

from __future__ import annotations

import html
import re

from activities.contracts.fields import MINOR_UNITS

DECIMAL = re.compile(r"(?<![\w.,])(\d[\d,]*)\.(\d+)(?![\w.])")
"""A number with decimals, standing alone: not a part of a version (``1.1.0``), an address (``127.0.0.1``) or a
word."""
CODE_BEFORE = re.compile(r"([A-Z]{3}) $")
AT_TWO_DECIMALS = " in a two-decimal currency)"


def bare_amounts(text: str) -> list[str]:
    """Every figure with decimals in ``text`` that is not written as ``amount`` writes amounts, with some context."""
    found = []
    for match in DECIMAL.finditer(text):
        decimals = len(match.group(2))
        before, after = text[max(match.start() - 4, 0) : match.start()], text[match.end() :]
        code = CODE_BEFORE.search(before)
        if code and decimals == MINOR_UNITS.get(code.group(1), 2):
            continue
        if decimals == 2 and after.startswith(AT_TWO_DECIMALS):
            continue
        if before.endswith("$") or (code is None and after.startswith(" USD")):  # what the model cost, in dollars
            continue
        found.append(text[max(match.start() - 40, 0) : match.end() + 20])
    return found


def page_text(page: str) -> str:
    """A page's words as a person reads them: no tags, entities unescaped."""
    return html.unescape(re.sub(r"<[^>]+>", " ", page))
