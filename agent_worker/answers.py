"""The export for auditors: every answer to an approval request over a range of days, as CSV, from the business
database's audit trail (``answers``), which outlives Temporal's histories (they go after the namespace's retention).

One function makes the file for both the approval inbox (``GET /export.csv``) and the command line (``agent-worker
answers export``). Its bounds: a range of at most ``MAX_DAYS`` days (``from`` and ``to`` are UTC days, both
included) and at most ``MAX_ROWS`` answers, refused with a count before anything is written rather than cut short;
the rows are read from the database ``READ_AT_ONCE`` at a time and written as they come.

The customer's personal data is left out unless asked for (``personal``): the customer's email address, and a
decline's reason, which a person typed freely about the customer and may name them, their address or their
circumstances. Approvers' names stay: they are who the audit is about. Every cell that a spreadsheet would read as
a formula (it begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return) is written with a leading
apostrophe, since ticket ids, order ids and reasons come from outside.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING

from activities.contracts.approvals import AnsweredRequest, ApprovalDecision
from activities.contracts.fields import number

if TYPE_CHECKING:  # SQLAlchemy: imported by whoever hands the trail in
    from activities.business.audit import SqlAuditTrail

MAX_DAYS = 366
"""The longest range one export covers: a year, an audit's usual period."""
MAX_ROWS = 200_000
"""The most answers one export holds; a range with more is refused, saying how many, so nobody mistakes a cut file
for a whole one."""
COLUMNS = (
    "ticket",
    "request",
    "decision",
    "approver",
    "channel",
    "answered_at",
    "amount",
    "currency",
    "order",
    "reason",
    "policy",
    "workflow_id",
)
PERSONAL_COLUMNS = ("customer_email",)
DECISIONS = {
    ApprovalDecision.APPROVED: "approved",
    ApprovalDecision.DECLINED: "declined",
    ApprovalDecision.TIMED_OUT: "timed out",
    ApprovalDecision.PARTLY_APPROVED: "partly approved",
}
CHANNELS = {"web": "inbox, signed in", "signal": "signal, as claimed", None: ""}
WITHHELD = "(withheld: personal data)"
NO_CURRENCY = "(not recorded: the amount counts its smallest unit)"
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


class ExportRefusedError(ValueError):
    """An export that will not be made: the message says why, and what to ask for instead."""


def days(start: str, end: str) -> tuple[datetime, datetime]:
    """The moments a range of UTC days spans, ``start``'s midnight to the midnight after ``end``; refused unless
    both are dates (``YYYY-MM-DD``), ``start`` is not after ``end``, and the range is at most ``MAX_DAYS``."""
    try:
        first, last = date.fromisoformat(start), date.fromisoformat(end)
    except (TypeError, ValueError):
        raise ExportRefusedError("from and to are dates, YYYY-MM-DD (UTC days, both included)") from None
    if len(start) != len("YYYY-MM-DD") or len(end) != len("YYYY-MM-DD"):
        raise ExportRefusedError("from and to are dates, YYYY-MM-DD (UTC days, both included)")
    if last < first:
        raise ExportRefusedError(f"from ({first}) is after to ({last})")
    if (last - first).days + 1 > MAX_DAYS:
        raise ExportRefusedError(f"a range of at most {MAX_DAYS} days; export a longer one in parts")
    midnight = datetime.min.time()
    return datetime.combine(first, midnight, UTC), datetime.combine(last + timedelta(days=1), midnight, UTC)


def filename(start: str, end: str, *, personal: bool) -> str:
    return f"answers-{start}-to-{end}{'-personal' if personal else ''}.csv"


def export(audit: SqlAuditTrail, start: str, end: str, *, personal: bool) -> Iterator[str]:
    """The CSV, line by line, of every answer given on the UTC days ``start`` to ``end``, in the order given;
    ``ExportRefusedError`` before the first line for a range it does not take or one holding too many answers."""
    since, until = days(start, end)
    count = audit.count_answered(since, until)
    if count > MAX_ROWS:
        raise ExportRefusedError(
            f"{count:,} answers from {start} to {end}, more than one export holds ({MAX_ROWS:,}): "
            "export a shorter range"
        )
    return _lines(audit, since, until, personal=personal)


def _lines(audit: SqlAuditTrail, since: datetime, until: datetime, *, personal: bool) -> Iterator[str]:
    yield line([*COLUMNS, *(PERSONAL_COLUMNS if personal else ())])
    for ticket_id, answer in audit.answered(since, until, limit=MAX_ROWS):
        yield line(row(ticket_id, answer, personal=personal))


def row(ticket_id: str, answer: AnsweredRequest, *, personal: bool) -> list[str]:
    """One answer's cells, in ``COLUMNS``' order (then ``PERSONAL_COLUMNS``' with ``personal``)."""
    reason = answer.reason
    if answer.decision is ApprovalDecision.DECLINED and reason and not personal:
        reason = WITHHELD
    cells = [
        ticket_id,
        answer.request_id,
        DECISIONS[answer.decision],
        answer.approver or "",
        CHANNELS[answer.channel],
        answer.at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        *_amount(answer),
        answer.order_id,
        reason,
        answer.policy_digest or "",
        answer.workflow_id,
    ]
    return [*cells, answer.customer_email] if personal else cells


def _amount(answer: AnsweredRequest) -> tuple[str, str]:
    """The amount and currency cells: a number in the currency's own decimals beside its code, as a spreadsheet
    reads a number. An answer recorded before answers kept their currency has its count of the smallest unit,
    and says so in the currency cell, rather than a figure read as two decimals that may be yen."""
    if answer.amount_cents is None:
        return "", (answer.currency or "").upper()
    if answer.currency is None:
        return str(answer.amount_cents), NO_CURRENCY
    return number(answer.amount_cents, answer.currency, thousands=""), answer.currency.upper()


def line(cells: list[str]) -> str:
    """One CSV record, every cell that would start a formula neutralised."""
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerow([neutral(cell) for cell in cells])
    return out.getvalue()


def neutral(cell: str) -> str:
    """A cell a spreadsheet shows as text: one that would start a formula gets a leading apostrophe."""
    return f"'{cell}" if cell.startswith(FORMULA_STARTS) else cell
