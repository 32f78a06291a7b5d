"""How the inbox's pages write amounts and moments (the templates' ``money``, ``ago`` and ``utc`` filters), and the
clock they are told against."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from activities.contracts.fields import amount


def shown(units: int, currency: str | None = None) -> str:
    """The ``money`` filter: ``{{ cents|money(currency) }}`` reads ``USD 2,147,483.64``."""
    return amount(units, currency)


def now() -> datetime:
    return datetime.now(UTC)


def ago(moment: datetime | None) -> str:
    """How long ago, as a person says it: "3 min", "2 h 5 min", "4 days"."""
    if moment is None:
        return "-"
    return duration(now() - moment)


def duration(span: timedelta) -> str:
    seconds = max(int(span.total_seconds()), 0)
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86_400
    if days >= 2:
        return f"{days} days"
    if hours:
        return f"{hours} h {minutes % 60} min"
    if minutes:
        return f"{minutes} min"
    return f"{seconds} s"


def utc(moment: datetime | None) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC") if moment else "-"
