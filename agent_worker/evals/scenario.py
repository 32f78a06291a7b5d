"""A scenario file, as a desk writes it (YAML or JSON), and the suite of them in a folder.

One validation point: every file is read into ``Scenario`` here, and a file that does not fit is refused with its
path and the field that is wrong, before any ticket runs. Unknown fields are refused too, so a misspelt
expectation (``max_step:``) fails loudly instead of silently checking nothing. The ticket and the orders are
validated by the product's own contracts (``TicketOptions``, ``OrderEvent``, the tools' argument models), so a
scenario cannot hold what a caller could not send.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveFloat, PositiveInt, ValidationError

from activities.contracts.fields import Cents, Currency, EmailAddress, NonEmpty, OrderId
from activities.contracts.ticket import CustomerText, OrderEvent, Status, TicketOptions
from activities.contracts.world import Order
from activities.tools import TOOLS

SUFFIXES = (".yaml", ".yml", ".json")
RECORDINGS = "recordings"
"""The folder of a suite that holds its recorded responses, one folder per configuration (``recordings.py``)."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScenarioOrder(Strict):
    """An order in the shop the scenario's ticket runs against, with its event log (carrier scans, notes)."""

    order_id: OrderId
    amount_cents: Cents
    customer_email: EmailAddress
    currency: Currency = "USD"
    events: list[NonEmpty] = []

    def order(self) -> Order:
        return Order(
            order_id=self.order_id,
            amount_cents=self.amount_cents,
            customer_email=self.customer_email,
            currency=self.currency,
        )


class ScenarioTicket(Strict):
    question: CustomerText
    customer: EmailAddress
    options: TicketOptions = TicketOptions()


class Answer(Strict):
    """How a person answers a refund that waits for one: approve or decline, as whom."""

    approve: bool
    approver: NonEmpty = "eval-approver"
    reason: str | None = None


class ModelTurn(Strict):
    """One response of the scenario's script: words, tool calls, or both (``call: {tool: {input}}``, several
    tools in one mapping run in the order written)."""

    say: str | None = None
    call: dict[str, dict[str, Any]] = {}
    stop: Literal["end_turn", "tool_use", "max_tokens", "refusal"] | None = None
    """The response's ``stop_reason``; by default ``tool_use`` with a call, else ``end_turn``."""

    def model_post_init(self, _context: Any) -> None:
        if self.say is None and not self.call:
            raise ValueError("a script turn says something (say:) or calls a tool (call:), or both")
        for tool in self.call:
            if tool not in TOOLS:
                raise ValueError(f"call: no tool named {tool!r} (the tools: {', '.join(sorted(TOOLS))})")


class Refund(Strict):
    order_id: OrderId
    amount_cents: Cents


class Emails(Strict):
    count: NonNegativeInt | None = None
    only_customer: bool = True
    """Every email went to the ticket's customer, and nobody else."""


class Expect(Strict):
    """What must hold when the ticket ends; each field left out is not checked."""

    refunds: list[Refund] | None = None
    """Exactly these payments, in any order ([]: none at all)."""
    asked_person: bool | None = None
    """Whether a refund waited for a person's answer."""
    emails: Emails | None = None
    status: Status | None = None
    max_steps: PositiveInt | None = None
    """Model calls, at most."""
    max_cost_usd: PositiveFloat | None = None
    answer_contains: list[NonEmpty] = []
    """Words the final answer contains (case does not matter)."""
    answer_excludes: list[NonEmpty] = []


class Scenario(Strict):
    name: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,79}$")]
    about: str = ""
    orders: list[ScenarioOrder] = []
    ticket: ScenarioTicket
    replies: list[CustomerText] = []
    """What the customer writes later, each once the agent has answered the turn before."""
    events: list[OrderEvent] = []
    """What the world reports about an order, each once the ticket waits for one."""
    approval: Answer | None = None
    """How every refund that waits for a person is answered; None: declined, by nobody the scenario names."""
    expect: Expect
    script: list[ModelTurn] = []
    """The scripted model's responses in order (``--model script``), across every turn of the ticket."""

    @property
    def ticket_id(self) -> str:
        """Fixed, so the requests the model is sent are the same on every run and recordings stay fresh."""
        return f"eval-{self.name}"


class ScenarioError(ValueError):
    """A scenario file that cannot be run: it names the file and what is wrong, and nothing has run."""


def load(path: Path) -> Scenario:
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, yaml.YAMLError) as error:
        raise ScenarioError(f"{path}: cannot be read: {error}") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: a scenario is a mapping of fields, not {type(data).__name__}")
    data.setdefault("name", path.stem)
    try:
        return Scenario.model_validate(data)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'the file'}: {e['msg']}" for e in error.errors())
        raise ScenarioError(f"{path}: {problems}") from None


def suite(folder: Path, only: list[str] | None = None) -> list[Scenario]:
    """Every scenario file directly in ``folder`` (the recordings folder is not read), sorted by name; ``only``
    keeps the named ones, and names one that is not there as an error."""
    if not folder.is_dir():
        raise ScenarioError(f"{folder}: no such folder of scenarios")
    scenarios = [load(path) for path in sorted(folder.iterdir()) if path.suffix in SUFFIXES and path.is_file()]
    names = [s.name for s in scenarios]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ScenarioError(f"{folder}: two scenarios share a name: {', '.join(twice)}")
    if only:
        missing = sorted(set(only) - set(names))
        if missing:
            raise ScenarioError(f"{folder}: no scenario named {', '.join(missing)}")
        scenarios = [s for s in scenarios if s.name in only]
    if not scenarios:
        raise ScenarioError(f"{folder}: no scenario files ({', '.join(SUFFIXES)})")
    return scenarios
