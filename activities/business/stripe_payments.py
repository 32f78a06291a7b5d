"""Refunds through Stripe (``AGENT_PAYMENTS=stripe``), with the official ``stripe`` SDK, behind the ``Payments`` port.

**Who is the authority for what.** Stripe holds the money and keeps the idempotency rules: a refund is created
on the order's payment (``orders.stripe_payment``, a PaymentIntent or a Charge) with the ticket's key as
Stripe's ``Idempotency-Key``, so a retried attempt gets the first refund back (``Idempotent-Replayed``), a key
reused for another refund is Stripe's ``idempotency_error``, and a refund above what is left of the charge is
Stripe's ``amount_too_large``. What was charged and refunded of an order is read from Stripe too (``charge``),
not from the shop's records. The key also travels in the refund's ``metadata``, so the refund can be found by
its key after Stripe has forgotten the key (24 hours), by listing the payment's refunds.

The worker's own database keeps three things Stripe has no word for. The **key ledger** holds each key's first
request and, once reconciliation settled it as never paid, its closing (``KeyLedger``): a closed key refuses
every later attempt before Stripe is asked. The **refunds table** is the book of what Stripe refunded, one row
per Stripe refund (its ``re_`` id, amount and status), which gives a refund the short number the model and the
customer read ("refund #3") and tests and operators their list. The **count of refunds without a person**
(``UnattendedLedger``) holds Stripe's refunds to the limits across tickets like the embedded provider's: a
refund nobody approved is checked and *reserved* in the transaction that claims its key, before Stripe hears of
it, so two tickets at once cannot both pass under a cap; the reservation is kept when Stripe pays, released
when Stripe refuses for good (``NOT_PAID``; for a retry, only a refusal Stripe gave after looking at the key),
and stays counted while the outcome is unknown, until ``settle_refund`` finds the refund (kept) or closes the
key (released). A repeat under a key taken before reserves nothing again.

**Never past the charge, refunds and store credit together.** Stripe refuses a refund above what is left of its
charge after *its* refunds; store credit is issued from the worker's own database, which Stripe never hears of.
So what was paid back against an order is both books together (``activities.business.paid_back``): ``charge``
(hence ``lookup_order``) reports Stripe's refunds plus the worker's other payouts, and each side checks the sum in
the transaction that books its own payout, with the order's row locked (a row lock on PostgreSQL, the writer's
lock on SQLite) until it is booked. A refund takes that lock in the transaction that holds its key, before Stripe
is asked, and keeps it until Stripe's answer is booked in the refunds table; if the order has other payouts, it
reads Stripe's charge under the lock and refuses past it (a repeat whose key Stripe already paid under is answered
with that refund instead). A store credit, under the same lock, reads Stripe's charge and refunds
(``SqlStoreCredits.charges``), so a refund made in Stripe's dashboard, or one whose answer was lost, counts
against it. What holds, then: no two payouts of one order through this worker's database are checked at once,
and each is checked against Stripe's word on refunds and the database's on everything else. What no lock here
covers is a refund made outside the worker (Stripe's dashboard) at the same moment as a credit; Stripe's own
guard still keeps refunds alone within the charge. Without other payouts a refund asks Stripe nothing more:
Stripe's own guard is then the same rule, kept atomically at Stripe and said in Stripe's words.

**Settling an unknown outcome.** An attempt holds its key's row in the ledger (a row lock on PostgreSQL, the
writer's lock on SQLite) from before it asks Stripe until its answer is booked; ``settle_refund`` takes the
same row first, so it waits for an attempt in flight in any worker, then asks Stripe for a refund under the key
(the payment's refunds, by metadata) and closes the key if there is none, in one transaction. Either the refund
came first and is returned, or the key closed first and no later attempt sends it. What no lock can cover is a
request a killed worker had already sent and that Stripe carries out after the settlement; the settlement
comes after every attempt's timeout, minutes after the last request, and Stripe answers in seconds.

**Every failure is classified here, once**, by what a retry would do (``classify``): a rate limit, a
connection that failed or dropped, and Stripe's 5xx are ``PaymentDeferredError``, retried by Temporal (the
SDK's own retries are off, so every retry is in the history); a reused key, a charge already refunded, an
amount too large, an unknown payment and any other 4xx are refusals the model reads in Stripe's words; bad
credentials are ``PaymentsUnusableError``, which ends the ticket as failed for a person.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

import sqlalchemy as sa
import stripe
from sqlalchemy.engine import Connection
from stripe import RequestOptions
from stripe.params import RefundCreateParams, RefundListParams

from activities.business.audit import record_payout
from activities.business.database import Database
from activities.business.keys import KeyLedger
from activities.business.orders import SqlOrders
from activities.business.paid_back import KINDS, paid_back
from activities.business.payments import RefundFingerprint, booked, receipt
from activities.business.refusals import (
    IdempotencyConflictError,
    KeyClosedError,
    OrderNotFoundError,
    PaymentRefusedError,
    PaymentsUnusableError,
    RefundExceedsChargeError,
)
from activities.business.schema import idempotency_keys, refunds
from activities.business.unattended import UnattendedLedger
from activities.contracts.world import Charge, RefundReceipt, RefundRequest
from activities.tools import REFUND, PayoutKind

T = TypeVar("T")
MAX_KEY_LENGTH = 255
"""The longest ``Idempotency-Key`` Stripe takes."""
KEY_IN_METADATA = "idempotency_key"
"""The metadata field of a Stripe refund that names the key it was made under."""
REPLAYED = "idempotent-replayed"


class PaymentDeferredError(RuntimeError):
    """Stripe could not answer now (rate limited, unreachable, its own error): worth retrying under the key."""


NOT_PAID = (
    IdempotencyConflictError,
    KeyClosedError,
    OrderNotFoundError,
    PaymentRefusedError,
    PaymentsUnusableError,
    RefundExceedsChargeError,
)
"""What a refund attempt ends with when Stripe certainly did not pay it: what the attempt reserved is released.
Anything else (``PaymentDeferredError``, a failure of the worker's own database after Stripe answered) may have
paid, and stays counted."""
NOTHING_PAID_UNDER_THE_KEY = (
    IdempotencyConflictError,
    OrderNotFoundError,
    PaymentRefusedError,
    RefundExceedsChargeError,
)
"""Stripe's refusals once it has looked at the key: had an earlier attempt under the key paid, Stripe would have
answered a retry with that refund instead, so what the key's first attempt reserved is released by the retry's
refusal too. The worker's own refusal past the charge (``_within_charge``) is one of them: it refuses a retry only
once Stripe's list of the payment's refunds has none under the key. Not a refused API key, which Stripe answers
before it looks at the key, nor a closed key, whose settlement released what it had to."""


class StripePayments:
    """The ``Payments`` port on Stripe's API, through ``client`` (one ``stripe.StripeClient`` per worker), on the
    payments the shop's ``orders`` name."""

    def __init__(  # noqa: PLR0913 - the client, the ledgers it books in, and the kinds of payout it counts
        self,
        client: stripe.StripeClient,
        database: Database,
        keys: KeyLedger,
        orders: SqlOrders,
        unattended: UnattendedLedger,
        *,
        kinds: Sequence[PayoutKind] = KINDS,
    ) -> None:
        self.client = client
        self.kinds = kinds
        """Every kind of payout, as the tools declare them: what is counted against the charge besides Stripe's
        refunds."""
        self.database = database
        self.keys = keys
        self.orders = orders
        self.unattended = unattended

    def __str__(self) -> str:
        """Where refunds go, with no secret in it: safe to log."""
        return "stripe"

    def refund(self, request: RefundRequest, in_force: str | None = None) -> RefundReceipt:
        payment = self._payment_of(request.order_id)
        key, asked = request.idempotency_key, RefundFingerprint.of(request)
        reserved = None
        # The request is committed under its key before Stripe hears of it, so a settlement after a crash knows
        # which payment to look at, and reserved against its limits, so no other ticket's check misses it. A key
        # taken before is not refused here (Stripe judges a repeat), nor reserved again.
        with self.database.writer.begin() as db:
            repeat = self.keys.claim(db, key, asked.to_text()) is not None
            if not repeat:
                reserved = self.unattended.count(db, request, in_force)
        try:
            return self._ask(payment, request, repeat=repeat)
        except NOT_PAID as refusal:
            under = key if isinstance(refusal, NOTHING_PAID_UNDER_THE_KEY) else None
            if reserved is not None or under is not None:
                with self.database.writer.begin() as db:
                    # What the key's first attempt reserved is released by a retry of that same request only.
                    earlier = under if under is not None and self._taken_for(db, under) == asked else None
                    self.unattended.release(db, reserved=reserved, key=earlier)
            raise

    def _ask(self, payment: str, request: RefundRequest, *, repeat: bool) -> RefundReceipt:
        """Stripe's refund, booked (with what its key reserved against the limits kept), with the key's row and the
        order's held from before the request until the booking commits; ``repeat``: the key was taken by an earlier
        attempt."""
        key = request.idempotency_key
        with self.database.writer.begin() as db:
            self.keys.lock(db, key, open_only=True)  # held until the refund is booked; closed: refused
            self._within_charge(db, payment, request, repeat=repeat)
            params = _on(payment, RefundCreateParams(amount=request.amount_cents))
            at_stripe = stripe_key(key)
            params["metadata"] = {KEY_IN_METADATA: at_stripe, "order_id": request.order_id}
            options: RequestOptions = {"idempotency_key": at_stripe}
            made = _asking(lambda: self.client.v1.refunds.create(params, options))
            response = made.last_response
            replayed = response is not None and response.headers.get(REPLAYED) == "true"
            paid = self._book(db, request.order_id, made, key, replayed=replayed)
            self.keys.record(db, key, paid.refund_id)
            record_payout(self.database, db, request, REFUND, paid.refund_id)
        return paid

    def _within_charge(self, db: Connection, payment: str, request: RefundRequest, *, repeat: bool) -> None:
        """Refuse a refund that would take what was paid back against the order past Stripe's charge once the
        payouts Stripe knows nothing of (store credit) are counted; the order's row stays locked until the refund
        is booked, so no payout of the order is booked in between, by any worker.

        Without such payouts this is Stripe's own rule, which Stripe keeps atomically and says in its words, so
        Stripe is left to judge and asked nothing more. A repeat under a key an earlier attempt may have paid
        under is refused only if Stripe has no refund under the key: had it one, its amount is in Stripe's
        refunded total already, and Stripe answers the repeat with that refund, paying nothing."""
        book = paid_back(db, request.order_id, self.kinds, lock=True)
        if book.besides_provider == 0:
            return
        book = book.reported_by(self.at_stripe(request.order_id, payment))
        if book.allows(request.amount_cents):
            return
        if repeat and self._find(db, request.idempotency_key) is not None:
            return
        book.refuse_past_charge(request.amount_cents, "to refund")

    def _taken_for(self, db: Connection, key: str) -> RefundFingerprint | None:
        """The refund the key's first request asked for (None: no refund asked under it)."""
        request = db.execute(sa.select(idempotency_keys.c.request).where(idempotency_keys.c.key == key)).scalar()
        return None if request is None else RefundFingerprint.from_text(request)

    def settle_refund(self, key: str) -> RefundReceipt | None:
        """Also settles what the key's request reserved against the limits: kept if Stripe paid (``_book``),
        released with the key's closing if not."""
        with self.database.writer.begin() as db:
            self.keys.hold(db, key)
            self.keys.lock(db, key)  # an attempt in flight under the key, in any worker, finishes first
            found = self._find(db, key)
            if found is None:
                self.keys.close(db, key)
                self.unattended.release(db, key=key)
        return found

    def charge(self, order_id: str) -> Charge:
        """Stripe's charge and its refunds, with what the worker paid back otherwise (store credit) added: every
        kind of payout of the order together."""
        at_stripe = self.at_stripe(order_id)
        with self.database.reader.connect() as db:
            book = paid_back(db, order_id, self.kinds).reported_by(at_stripe)
        return Charge(amount_cents=book.charged_cents, refunded_cents=book.total_cents, currency=at_stripe.currency)

    def at_stripe(self, order_id: str, payment: str | None = None) -> Charge:
        """What Stripe charged for the order (its ``payment``, else the one the order names) and refunded of it,
        by anyone, in Stripe's own words: refunds only, for Stripe knows nothing of store credit."""
        payment = payment or self._payment_of(order_id)
        if payment.startswith("pi_"):
            intent = _asking(lambda: self.client.v1.payment_intents.retrieve(payment, {"expand": ["latest_charge"]}))
            charge = intent.latest_charge
            if not isinstance(charge, stripe.Charge):  # a PaymentIntent never paid has no charge to refund
                return Charge(amount_cents=0, refunded_cents=0, currency=intent.currency)
        else:
            charge = _asking(lambda: self.client.v1.charges.retrieve(payment))
        return Charge(amount_cents=charge.amount, refunded_cents=charge.amount_refunded, currency=charge.currency)

    def refunds(self, order_id: str | None = None) -> list[RefundReceipt]:
        """Every refund booked (of one order, if given), oldest first: for tests and operators."""
        return booked(self.database, order_id)

    def _payment_of(self, order_id: str) -> str:
        payment = self.orders.stripe_payment(order_id)
        if payment is None:
            raise OrderNotFoundError(
                f"Order {order_id} names no Stripe payment, so nothing can be refunded or looked up at Stripe "
                f"(a person can add it: agent-worker orders add {order_id} ... --stripe-payment pi_...)"
            )
        return payment

    def _find(self, db: Connection, key: str) -> RefundReceipt | None:
        """The refund Stripe made under ``key``, booked if it was not yet: found among the refunds of the
        payment the key's first request named (the ledger has it), by the key in their metadata."""
        asked = self._taken_for(db, key)
        if asked is None:  # nothing asked under the key: nothing can have been paid under it
            return None
        payment = self._payment_of(asked.order_id)
        for made in self._refunds_of(payment):
            if made.metadata is not None and made.metadata.to_dict().get(KEY_IN_METADATA) == stripe_key(key):
                return self._book(db, asked.order_id, made, key, replayed=True)
        return None

    def _refunds_of(self, payment: str) -> Iterator[stripe.Refund]:
        listed = _asking(lambda: self.client.v1.refunds.list(_on(payment, RefundListParams(limit=100))))
        try:
            yield from listed.auto_paging_iter()
        except stripe.StripeError as error:
            raise classify(error) from None

    def _book(self, db: Connection, order_id: str, made: stripe.Refund, key: str, *, replayed: bool) -> RefundReceipt:
        """The refunds table's row for Stripe's refund ``made``, written the first time it is seen; what its key's
        request reserved against the limits is kept from then on."""
        row = db.execute(refunds.select().where(refunds.c.provider_refund_id == made.id)).first()
        if row is None:
            row = db.execute(
                refunds.insert().returning(*refunds.c),
                {
                    "order_id": order_id,
                    "amount_cents": made.amount,
                    "idempotency_key": key,
                    "created_at": self.database.clock(),
                    "provider_refund_id": made.id,
                    "status": made.status,
                },
            ).one()
            self.unattended.keep(db, row.id, key=key)
            return receipt(row, replayed=replayed)
        return receipt(row, replayed=True)


Params = TypeVar("Params", RefundCreateParams, RefundListParams)


def stripe_key(key: str) -> str:
    """The key as Stripe is sent it: itself, or for one longer than Stripe takes (255 characters; a ticket's id is
    the caller's, of any length) its SHA-256, the same on every attempt and never another key's."""
    return key if len(key) <= MAX_KEY_LENGTH else f"sha256:{hashlib.sha256(key.encode()).hexdigest()}"


def _on(payment: str, params: Params) -> Params:
    """``params`` of a request about one payment, named by its id: a PaymentIntent (``pi_``) or a Charge."""
    if payment.startswith("pi_"):
        params["payment_intent"] = payment
    else:
        params["charge"] = payment
    return params


def _asking(call: Callable[[], T]) -> T:
    """Call Stripe, with its errors classified."""
    try:
        return call()
    except stripe.StripeError as error:
        raise classify(error) from None  # Stripe's words are in it; its cause would be what the model reads


REFUSED_FOR_GOOD = {
    "charge_already_refunded": RefundExceedsChargeError,
    "amount_too_large": RefundExceedsChargeError,
    "resource_missing": OrderNotFoundError,
}


def classify(error: stripe.StripeError) -> Exception:
    """What a failed request to Stripe means: a refusal that asking again will not change, or worth a retry."""
    words = error.user_message or type(error).__name__  # Stripe's message, without the request id
    if isinstance(error, stripe.RateLimitError | stripe.APIConnectionError):
        return PaymentDeferredError(f"Stripe could not take the request now: {words}")
    if isinstance(error, stripe.AuthenticationError | stripe.PermissionError):
        return PaymentsUnusableError(f"Stripe refused this worker's API key: {words}")
    if isinstance(error, stripe.IdempotencyError):
        return IdempotencyConflictError(f"Stripe refused the idempotency key: {words}")
    status = error.http_status or 0
    if status >= 500 or status in (409, 0):  # 409: another request under the key is still running at Stripe
        return PaymentDeferredError(f"Stripe answered {status or 'nothing'}: {words}")
    refusal = REFUSED_FOR_GOOD.get(error.code or "", PaymentRefusedError)
    return refusal(f"Stripe refused the request: {words}")
