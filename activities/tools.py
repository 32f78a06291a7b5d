"""The support agent's tools, each declared once: what the model is told, the rule the workflow runs a call
under, and the name of the activity that does the work.

A tool is a ``Tool`` in ``TOOLS``: its name (what the model calls it, and the name its activity is registered
and scheduled under), its arguments (a pydantic model whose docstring and JSON schema are what the model is
told, and which the workflow validates a call with before anything runs), its ``Rule`` (reads, pays, mails or
waits: what the workflow checks before and after the activity runs) and what its activity returns. The work is
done elsewhere, by a method decorated ``@implements(TOOL)`` (``activities.tool_activities``), which registers
it under the declared name, so the name is written once.

Read from here, not written again: the model's tool list (``claude_model.tool_definitions``), the workflow's
handler for a call (``workflows.toolbox.Toolbox.RULE_HANDLERS``, by rule, scheduling the declared activity by
name), each tool's attempt (``workflows.timeouts``, by rule), and the worker's registration
(``ToolActivities.all``: an implementation of every declaration that runs an activity, or the worker does not
start). A tool that pays also declares its ``PayoutKind``: how people read of it, its keys, the table it is booked
in, and the activity that settles an unknown outcome (``@settles(TOOL)``, ``activities.reconciliation``).

``TOOLS`` (a ``Tools``) is the one registry of tools, and so of payout kinds: every other place that needs to know
which tools pay, what a payout is called, in which table it is booked or which activities call the payment
provider asks it (the ledgers' view of what was paid back, the transcript, the inbox, the approval sentences, the
worker's check of client timeouts), and none names a paying tool. A registry with one more tool
(``TOOLS.with_tools(...)``) is how a test shows that a paying tool declared nowhere in the product reaches all of
them.

Adding a tool is its declaration below and its implementation; a new rule needs a handler in the workflow.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, TypeVar

from pydantic import Field
from temporalio import activity

from activities.contracts.fields import Cents, Contract, EmailAddress, NonEmpty, OrderId
from activities.contracts.world import EmailReceipt, OrderLookup, RefundReceipt, ToolOutput

F = TypeVar("F", bound=Callable[..., Any])

# --- what the model may send: each tool's arguments, whose docstring and schema are what the model is told ------


class LookupOrderArgs(Contract):
    """Look up an order: its amount and the customer's email address. Always do this before refunding."""

    order_id: OrderId = Field(description="The order id, such as A-1001.")


class IssueRefundArgs(Contract):
    """Refund part or all of an order to the customer's original payment method."""

    order_id: OrderId = Field(description="The order id, such as A-1001.")
    amount_cents: Cents = Field(description="The amount to refund, in cents.")


class IssueStoreCreditArgs(Contract):
    """Give the customer store credit on an order instead of a refund: a voucher for the amount, to spend in the
    shop. Use it when the customer asks for credit rather than their money back; never both for the same money."""

    order_id: OrderId = Field(description="The order id, such as A-1001.")
    amount_cents: Cents = Field(description="The amount of store credit, in cents.")


class SendEmailArgs(Contract):
    """Send an email to the customer about their ticket."""

    to: EmailAddress = Field(description="The customer's email address.")
    subject: NonEmpty = Field(max_length=200)
    body: NonEmpty = Field(max_length=20_000)


class OrderEventsArgs(Contract):
    """Read an order's event log: every carrier scan, status change and note about it, oldest first. Long:
    use it when the customer's question is about what happened to the parcel."""

    order_id: OrderId = Field(description="The order id, such as A-1001.")


class ShippingStatusArgs(Contract):
    """Where the order's parcel is now: the latest entry of its event log, in one line. Short: use it first
    when the customer asks where the parcel is, and order_events only if the whole story matters."""

    order_id: OrderId = Field(description="The order id, such as A-1001.")


class WaitForDeliveryScanArgs(Contract):
    """Wait until the carrier reports a scan of the order's parcel (or another event about the order), or until
    the hours run out, and say which. The ticket waits without costing anything; use it when the parcel may
    still be on its way and the customer can be answered once the carrier says where it is."""

    order_id: OrderId = Field(description="The order id, such as A-1001.")
    hours: Annotated[int, Field(ge=1, le=30 * 24)] = Field(description="How many hours to wait at most.")


# --- the rules and the declaration -----------------------------------------------------------------------------


class Rule(StrEnum):
    """What a tool does to the world, and so what the workflow checks around its activity."""

    READS = "reads"
    """Reads about one of the customer's orders (its arguments have an ``order_id``): the order is checked to be
    the ticket's customer's first (``LOOKUP_ORDER`` is what every such check runs), then its activity runs, and
    its result goes to the model. No key, no person; runs at once with other reads."""
    PAYS = "pays"
    """Pays the customer back on one of their orders (``order_id``, ``amount_cents``): the order is checked to
    be theirs; a person approves it above the approval limit, past the ticket's total, for a further part of an
    order paid back before, and past a limit across tickets; its key names the ticket, the order and the part;
    an unknown outcome is settled (``PayoutKind.settled_by``) before the model hears of it. Runs alone."""
    MAILS = "mails"
    """An email: keyed per tool call, sent to the ticket's customer address only. Runs alone."""
    WAITS = "waits"
    """Changes nothing, but parks the ticket (no activity) until an event about the order arrives. Runs alone."""

    @property
    def reads_only(self) -> bool:
        """Changes nothing and waits for nothing, so several calls may run at once."""
        return self is Rule.READS


class Client(StrEnum):
    """An outside system whose client a tool's activity calls: the worker checks that the client's timeout ends a
    slow call inside the attempt of every activity that calls it (``agent_worker.wiring.check_client_timeouts``)."""

    PAYMENT_PROVIDER = "payment provider"
    """Stripe, where it is the provider: what an order was charged and refunded is its word."""
    MAIL_SERVER = "mail server"


@dataclass(frozen=True)
class PayoutKind:
    """A kind of payment back to a customer, as the tool that pays it declares it: how people read of it, its keys,
    the table it is booked in, and who settles an unknown outcome. Its activity takes a ``RefundRequest`` and
    returns a ``RefundReceipt``; the activity ``settled_by`` takes a key and returns what was paid under it, or
    None, having closed the key so that nothing pays under it later."""

    noun: str
    """What one payment is called where the model and people read of it: ``refund`` (``refund #3``)."""
    done: str
    """How a payment made is told: ``Refunded`` (``Refunded USD 49.00 on order A-1001 (refund #3).``)."""
    key: str
    """What its idempotency keys start with: ``refund`` (``refund:ticket:T-1/A-1001/1``). Keys already in a
    ledger must keep meaning the same payment, so it never changes once paid under."""
    settled_by: str
    """The activity that settles an unknown outcome under a key."""
    keeper: str
    """Who keeps the money and answers for the key: ``the payment provider``."""
    ledger: str
    """The table of the business database it is booked in, one row per payment, each with its ``order_id`` and
    its ``amount_cents``: what "never past the charge" sums (``activities.business.paid_back``)."""
    plural: str
    """What a sum of them is called, where a refusal lists what was paid back: ``refunds``, ``store credit``."""
    through_provider: bool = False
    """Paid through the payment provider, whose own book then has the word on it: Stripe's refunded total stands
    in for what the worker booked (a refund made in Stripe's dashboard counts too). One kind at most."""


@dataclass(frozen=True)
class Tool:
    """One tool, declared once."""

    name: str
    """What the model calls it, and the name its activity is registered and scheduled under."""
    args: type[Contract]
    rule: Rule
    returns: type[Contract] | None
    """What its activity returns (None: it runs none, as a wait)."""
    payout: PayoutKind | None = None
    """A tool that pays: its kind of payout, how it is read of, booked and settled."""
    calls: frozenset[Client] = frozenset()
    """The outside systems its activity calls besides those its rule implies (``clients``)."""

    def __post_init__(self) -> None:
        fields = self.args.model_fields
        if self.rule is not Rule.MAILS and "order_id" not in fields:
            raise TypeError(f"{self.name}: a tool that {self.rule.value} must take the order_id it is about")
        if (self.returns is None) != (self.rule is Rule.WAITS):
            raise TypeError(f"{self.name}: only a tool that waits runs without an activity")
        if (self.payout is not None) != (self.rule is Rule.PAYS):
            raise TypeError(f"{self.name}: a tool that pays, and only one, declares its payout")
        if self.rule is Rule.PAYS and ("amount_cents" not in fields or self.returns is not RefundReceipt):
            raise TypeError(f"{self.name}: a tool that pays takes an amount_cents and returns a RefundReceipt")

    @property
    def clients(self) -> frozenset[Client]:
        """Every outside system its activity calls: those declared, and the payment provider for a tool that pays
        (what was paid back is checked against the charge, the provider's word), the mail server for one that
        mails."""
        implied = {Rule.PAYS: {Client.PAYMENT_PROVIDER}, Rule.MAILS: {Client.MAIL_SERVER}}.get(self.rule, set())
        return self.calls | implied

    @property
    def description(self) -> str:
        return inspect.cleandoc(self.args.__doc__ or "")

    def input_schema(self) -> dict[str, Any]:
        return self.args.model_json_schema()


def implements(tool: Tool) -> Callable[[F], F]:
    """Make the decorated method the activity of ``tool``, registered under the tool's name."""
    if tool.returns is None:
        raise TypeError(f"{tool.name} runs no activity")
    return _registered_as(tool.name)


def settles(tool: Tool) -> Callable[[F], F]:
    """Make the decorated method the activity that settles an unknown outcome of paying ``tool``."""
    if tool.payout is None:
        raise TypeError(f"{tool.name} pays nothing to settle")
    return _registered_as(tool.payout.settled_by)


_REGISTERED_AS = "__agent_worker_activity_name__"
"""Where ``implements`` and ``settles`` note the name they register a method under: the SDK keeps its own mark
private, so the worker reads this one to find a declared tool's body."""


def _registered_as(name: str) -> Callable[[F], F]:
    def mark(fn: F) -> F:
        setattr(fn, _REGISTERED_AS, name)
        return activity.defn(name=name)(fn)

    return mark


def activity_name(fn: Callable[..., Any]) -> str | None:
    """The name ``implements`` or ``settles`` registered an activity function or method under (None: neither)."""
    name = getattr(fn, _REGISTERED_AS, None)
    return name if isinstance(name, str) else None


# --- the declarations ------------------------------------------------------------------------------------------

LOOKUP_ORDER = Tool(
    "lookup_order", LookupOrderArgs, Rule.READS, OrderLookup, calls=frozenset({Client.PAYMENT_PROVIDER})
)
"""The order as the shop and the payment provider have it: what every check that an order is the customer's runs."""

REFUND = PayoutKind(
    noun="refund",
    done="Refunded",
    key="refund",
    settled_by="find_refund",
    keeper="the payment provider",
    ledger="refunds",
    plural="refunds",
    through_provider=True,
)
ISSUE_REFUND = Tool("issue_refund", IssueRefundArgs, Rule.PAYS, RefundReceipt, REFUND)

STORE_CREDIT = PayoutKind(
    noun="store credit",
    done="Credited",
    key="store_credit",
    settled_by="find_store_credit",
    keeper="the store credit ledger",
    ledger="store_credits",
    plural="store credit",
)
ISSUE_STORE_CREDIT = Tool("issue_store_credit", IssueStoreCreditArgs, Rule.PAYS, RefundReceipt, STORE_CREDIT)

SEND_EMAIL = Tool("send_email", SendEmailArgs, Rule.MAILS, EmailReceipt)
ORDER_EVENTS = Tool("order_events", OrderEventsArgs, Rule.READS, ToolOutput)
WAIT_FOR_DELIVERY_SCAN = Tool("wait_for_delivery_scan", WaitForDeliveryScanArgs, Rule.WAITS, None)
SHIPPING_STATUS = Tool("shipping_status", ShippingStatusArgs, Rule.READS, ToolOutput)


class Tools(Mapping[str, Tool]):
    """A registry of tools, by name, in the order the model is told of them; immutable. What pays, what it is
    called and booked in, and what calls which outside system are read from it, never written beside it."""

    def __init__(self, *tools: Tool) -> None:
        self._by_name = {tool.name: tool for tool in tools}
        kinds = [tool.payout for tool in tools if tool.payout is not None]
        for what, values in (
            ("name", [tool.name for tool in tools]),
            ("payout noun", [kind.noun for kind in kinds]),
            ("key prefix", [kind.key for kind in kinds]),
            ("ledger", [kind.ledger for kind in kinds]),
            ("settling activity", [kind.settled_by for kind in kinds]),
        ):
            if twice := sorted({value for value in values if values.count(value) > 1}):
                raise TypeError(f"two tools declare the same {what}: {', '.join(twice)}")
        if sum(kind.through_provider for kind in kinds) > 1:
            raise TypeError("the payment provider's book has one refunded total: one payout kind at most is paid by it")

    def __getitem__(self, name: str) -> Tool:
        return self._by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def with_tools(self, *tools: Tool) -> Tools:
        """These tools and ``tools`` after them: a registry for a test's tool, which the product never names."""
        return Tools(*self.values(), *tools)

    def payout_kinds(self) -> tuple[PayoutKind, ...]:
        """Every kind of payment back to a customer, in declaration order: what "never past the charge" counts."""
        return tuple(tool.payout for tool in self.values() if tool.payout is not None)

    def payout_of(self, name: str) -> PayoutKind | None:
        """The kind of payout the tool ``name`` pays; None for a tool that pays nothing, or a name no tool here has
        (a record older than the tools this worker has)."""
        tool = self.get(name)
        return tool.payout if tool is not None else None

    def payout_called(self, noun: str) -> PayoutKind | None:
        """The kind of payout declared as ``noun`` (what a request for a person names it), or None."""
        return next((kind for kind in self.payout_kinds() if kind.noun == noun), None)

    def payout_noun(self, name: str) -> str:
        """What a payment the tool ``name`` made is called where people read of it (``store credit #2``): its declared
        noun; ``payout`` for a name no tool declares as paying."""
        kind = self.payout_of(name)
        return kind.noun if kind is not None else "payout"

    def calling(self, client: Client) -> tuple[str, ...]:
        """Every activity that calls ``client``: each tool whose activity does, and for a tool that pays, the
        activity that settles it too (it asks the ledger that keeps the money, kept by that system or beside it)."""
        names: list[str] = []
        for tool in self.values():
            if client in tool.clients:
                names += [tool.name] + ([tool.payout.settled_by] if tool.payout is not None else [])
        return tuple(names)


TOOLS = Tools(
    LOOKUP_ORDER,
    ISSUE_REFUND,
    ISSUE_STORE_CREDIT,
    SEND_EMAIL,
    ORDER_EVENTS,
    WAIT_FOR_DELIVERY_SCAN,
    SHIPPING_STATUS,
)
"""Every tool, in the order the model is told of them."""
