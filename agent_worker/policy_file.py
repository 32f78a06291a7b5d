"""The operator's money policy file (``AGENT_POLICY_FILE``): read, checked, summed up and written back.

The policy decides who may release money, so the file is read strictly: with the standard library's ``tomllib``,
then validated by ``MoneyPolicy`` in pydantic's strict mode. Lax mode would read ``limit_cents = true`` as one cent
and ``"2000"`` as a number; an unknown key (``limt_cents``) is refused rather than leaving its default in force
unnoticed. Every refusal is one line naming the file, the field and the reason, which ``agent-worker policy check``
prints and the settings turn into the exit 2 every bad setting takes.

``policy show`` writes the policy back as TOML, each field under its description, so what it prints is itself a
valid policy file stating the same rules (the same digest).
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ValidationError

from activities.contracts.fields import amount, describe_errors
from activities.contracts.policy import MoneyPolicy, Role

__all__ = ["PolicyFileError", "in_each_currency", "read", "summary", "to_toml"]


class PolicyFileError(ValueError):
    """A policy file that cannot be put in force, and why, in one line that names the file."""


def read(path: Path) -> MoneyPolicy:
    """The policy the file at ``path`` states, or ``PolicyFileError`` saying what is wrong with it."""
    try:
        text = path.read_bytes().decode()
    except OSError as error:
        raise PolicyFileError(f"{path}: cannot be read: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise PolicyFileError(f"{path}: not TOML: the file is not UTF-8 text") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise PolicyFileError(f"{path}: not TOML: {error}") from None
    try:
        return MoneyPolicy.model_validate(document, strict=True)
    except ValidationError as error:
        raise PolicyFileError(f"{path}: {describe_errors(error)}") from None


_TWO_BELOW_THE_LIMIT = " (below the approval limit: every payout that takes a ticket's total above it needs two people)"
"""What a two-people threshold below the approval limit means (``approval_rules.decide``: the strictest rule wins,
whatever order the thresholds are in), said where an operator might read the pair as a mistake or as "one person
up to the limit"."""


def summary(policy: MoneyPolicy) -> str:
    """The policy in one line, for ``policy check`` and the worker's start."""
    approval, limits, budget = policy.approval, policy.limits, policy.model.max_cost_usd_per_ticket
    two = approval.two_people_above_cents
    parts = [
        f"refunds above {_units(approval.limit_cents)} wait up to {_duration(approval.timeout_seconds)} for a person"
        + ("" if two is None else f", two people above {_units(two)}")
        + (_TWO_BELOW_THE_LIMIT if two is not None and two < approval.limit_cents else ""),
        "approvers: " + (", ".join(map(_role, approval.roles)) if approval.roles else "AGENT_APPROVERS, else anyone"),
        "without a person, a day: "
        + ", ".join(
            [
                f"a customer {_cap(limits.customer_cents_per_day, _units)}",
                f"in {_cap(limits.customer_refunds_per_day, str)} refunds",
                f"the desk {_cap(limits.desk_cents_per_day, _units)}",
            ]
        ),
        "model calls per ticket: " + ("no budget" if budget is None else f"up to {budget:.2f} USD"),
    ]
    return "; ".join(parts)


def in_each_currency(units: int) -> str:
    """What a policy's figure is on orders in currencies of each number of decimals, since it counts the smallest
    unit of whatever currency the order is in: ``2000 is USD 20.00, JPY 2,000 or KWD 2.000``."""
    return f"{units} is {amount(units, 'USD')}, {amount(units, 'JPY')} or {amount(units, 'KWD')}"


def to_toml(policy: MoneyPolicy) -> str:
    """The policy as a policy file: every field, under its description, an off rule written ``false``."""
    lines: list[str] = []
    _table(policy, "", lines)
    return "\n".join(lines).strip() + "\n"


def _role(role: Role) -> str:
    return f"{role.name} ({', '.join(role.people)}) up to {_units(role.max_cents)}"


def _cap(value: int | None, show: Callable[[int], str]) -> str:
    return "unlimited" if value is None else show(value)


def _duration(seconds: int) -> str:
    for unit, name in ((86_400, "d"), (3600, "h"), (60, "min")):
        if seconds % unit == 0:
            return f"{seconds // unit} {name}"
    return f"{seconds} s"


def _table(model: BaseModel, path: str, lines: list[str], *, described: bool = True) -> None:
    """``model``'s plain fields as keys, then each field that is itself a model as a table of its own, and each
    list of models as an array of tables, as TOML needs them ordered; each described once (``described``)."""
    nested: list[tuple[str, str | None, BaseModel | list[BaseModel]]] = []
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        if isinstance(value, BaseModel) or (value and isinstance(value, list) and isinstance(value[0], BaseModel)):
            nested.append((name, field.description, value))
            continue
        lines.extend(_comment(field.description) if described else [])
        lines.append(f"{name} = {_value(value)}")
    for name, description, value in nested:
        inner = f"{path}.{name}" if path else name
        if isinstance(value, BaseModel):
            lines.extend(["", f"[{inner}]"])
            _table(value, inner, lines, described=described)
            continue
        for index, item in enumerate(value):
            lines.extend(["", *(_comment(description) if described and not index else []), f"[[{inner}]]"])
            _table(item, inner, lines, described=described and not index)


def _comment(description: str | None) -> list[str]:
    return [f"# {line}".rstrip() for line in (description or "").replace("``", "").splitlines()]


def _value(value: object) -> str:
    if value is None or isinstance(value, bool):
        return "true" if value else "false"  # None: an off rule (``activities.contracts.policy.Off``)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    raise TypeError(f"no TOML for {type(value).__name__}")


def _string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped, anything else as it is."""
    escaped = "".join(
        {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t"}.get(c)
        or (f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else c)  # TOML escapes C0 controls and DEL
        for c in text
    )
    return f'"{escaped}"'


def _units(units: int) -> str:
    """A limit as people read it: a count of the smallest unit of whatever currency the order it judges is in, so
    in no currency, and said so (``5,000 (50.00 in a two-decimal currency)``): 5,000 is JPY 5,000 on a yen order."""
    return amount(units, None)
