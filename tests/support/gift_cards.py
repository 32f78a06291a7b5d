"""A paying tool the product does not have: gift cards, declared here and nowhere else, with a ledger of their own.

It shows that a kind of payout is declared once, by its tool, and that every place that reads payouts reads it from
the registry of tools it is given: the ledgers' view of what was paid back (a gift card counts against the charge
and is named in a refusal), the transcript and the inbox (the model asking for one is told as "a gift card"), the
approval sentences, and the check that the payment provider's client gives up inside every activity that calls it.
Nothing in the product names it: the product's registry (``TOOLS``) does not have it, and a test hands
``WITH_GIFT_CARDS`` to what it exercises.
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from pydantic import Field

from activities.business import Business
from activities.contracts.fields import Cents, Contract, OrderId
from activities.contracts.world import RefundReceipt
from activities.tools import TOOLS, PayoutKind, Rule, Tool


class IssueGiftCardArgs(Contract):
    """Send the customer a gift card for an amount of an order, to spend in any of the group's shops."""

    order_id: OrderId = Field(description="The order id, such as A-1001.")
    amount_cents: Cents = Field(description="The gift card's value, in cents.")


GIFT_CARD = PayoutKind(
    noun="gift card",
    done="Sent a gift card of",
    key="gift_card",
    settled_by="find_gift_card",
    keeper="the gift card ledger",
    ledger="gift_cards",
    plural="gift cards",
)

ISSUE_GIFT_CARD = Tool("issue_gift_card", IssueGiftCardArgs, Rule.PAYS, RefundReceipt, GIFT_CARD)

WITH_GIFT_CARDS = TOOLS.with_tools(ISSUE_GIFT_CARD)
"""The product's tools and the gift card after them."""

gift_cards = sa.Table(
    GIFT_CARD.ledger,
    sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("order_id", sa.String(64), nullable=False),
    sa.Column("amount_cents", sa.BigInteger, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
"""The gift card ledger: one row per card, with the order it pays back and its amount, as a ledger is declared."""


def with_gift_card_ledger(business: Business) -> Business:
    """``business`` with the gift card ledger's table, for a business made to count gift cards among its payouts
    (``Business.at(..., kinds=WITH_GIFT_CARDS.payout_kinds())``)."""
    gift_cards.create(business.database.writer, checkfirst=True)
    return business


def send_gift_card(business: Business, order_id: str, amount_cents: int) -> None:
    """Book a gift card against ``order_id``, as a gift card ledger would."""
    with business.database.writer.begin() as db:
        db.execute(
            gift_cards.insert(),
            {"order_id": order_id, "amount_cents": amount_cents, "created_at": datetime.now(UTC)},
        )
