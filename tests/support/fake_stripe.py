"""A local stand-in for the Stripe API endpoints the worker uses, for the real ``stripe`` SDK to talk HTTP to.

Endpoints: ``POST /v1/refunds``, ``GET /v1/refunds`` (a payment's refunds, paginated), ``GET
/v1/payment_intents/{id}`` (with ``expand[]=latest_charge``) and ``GET /v1/charges/{id}``. Payments are made
with ``charge()`` on the object, as a shop's checkout would have made them.

It keeps the rules of Stripe's that the worker relies on, as Stripe documents them:

- **Idempotency** (docs.stripe.com/api/idempotent_requests): the status and body of the first request under a
  key are saved once the endpoint starts executing, and a retry with the same key and the same parameters gets
  them back, with the ``Idempotent-Replayed: true`` header, 500s included; the same key with other parameters
  is a 400 ``idempotency_error``; keys are kept 24 hours (the fake's clock can be turned, ``advance``), after
  which the key makes a new request; a key is at most 255 characters. A request refused before the endpoint
  runs (a bad API key, a rate limit, a key too long) saves nothing. Keys belong to the account, here the one API key.
- **Refunds**: never above what is left of the charge (``amount_too_large``; ``charge_already_refunded`` when
  nothing is), of a payment that exists (``resource_missing``); without an amount, the rest of the charge.

Scripted failures (``fail``) happen to the next refund requests in order: a 429 before anything runs, a 500
or a dropped connection after the refund was made (the saved result is the 500, or for a dropped connection
the refund, as Stripe's would be), or a delay before answering.

It runs in a thread (``http.server``) on 127.0.0.1 and a port the system picks, and serialises requests: one
account, one lock, so a test reads a state no request is halfway through.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

from activities.business import Business
from agent_worker import wiring
from agent_worker.config import Settings
from agent_worker.config.payment_settings import StripeSettings

API_KEY = "sk_test_fake_4eC39HqLyjWDarjtT1zdp7dc"
KEY_LIFETIME_SECONDS = 24 * 3600

Failure = Literal["rate_limited", "500_after_refund", "drop_after_refund", "slow"]


@dataclass
class Saved:
    params: dict[str, Any]
    status: int
    body: dict[str, Any]
    at: float


@dataclass
class FakeStripe:
    api_key: str = API_KEY
    slow_seconds: float = 0.0
    """How long a ``slow`` failure waits before answering."""
    on_refund: Callable[[dict[str, Any]], None] | None = None
    """Called with each refund as it is made, before the answer leaves: a test's hook (a kill, say)."""
    requests: list[tuple[str, str, dict[str, Any], dict[str, str]]] = field(default_factory=list)
    """Every request: method, path, parameters, headers (lowercased names)."""
    _charges: dict[str, dict[str, Any]] = field(default_factory=dict)
    _intents: dict[str, dict[str, Any]] = field(default_factory=dict)
    _refunds: list[dict[str, Any]] = field(default_factory=list)
    _keys: dict[str, Saved] = field(default_factory=dict)
    _failures: list[Failure] = field(default_factory=list)
    _offset: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    url: str = ""

    # --- what a test does to the account ---

    def charge(self, amount_cents: int, *, intent: bool = True, currency: str = "usd") -> str:
        """A payment of ``amount_cents`` (of ``currency``'s smallest unit, lower case as Stripe writes it): a
        PaymentIntent's id with its charge, or a bare charge's id."""
        with self._lock:
            n = next(self._ids)
            charge_id, intent_id = f"ch_fake{n:04d}", f"pi_fake{n:04d}" if intent else None
            self._charges[charge_id] = {
                "id": charge_id,
                "object": "charge",
                "amount": amount_cents,
                "amount_refunded": 0,
                "currency": currency,
                "payment_intent": intent_id,
                "refunded": False,
            }
            if intent_id is None:
                return charge_id
            self._intents[intent_id] = {
                "id": intent_id,
                "object": "payment_intent",
                "amount": amount_cents,
                "currency": currency,
                "status": "succeeded",
                "latest_charge": charge_id,
            }
            return intent_id

    def refund_in_dashboard(self, amount_cents: int) -> None:
        """A person refunds ``amount_cents`` of the newest charge in Stripe's dashboard, outside the worker: no key,
        no metadata, and the worker hears of it only from Stripe."""
        with self._lock:
            charge = list(self._charges.values())[-1]
            charge["amount_refunded"] += amount_cents
            charge["refunded"] = charge["amount_refunded"] == charge["amount"]
            self._refunds.append(
                {
                    "id": f"re_fake{next(self._ids):04d}",
                    "object": "refund",
                    "amount": amount_cents,
                    "currency": charge["currency"],
                    "charge": charge["id"],
                    "payment_intent": charge["payment_intent"],
                    "status": "succeeded",
                    "metadata": {},
                    "created": int(time.time()),
                }
            )

    def fail(self, *failures: Failure) -> None:
        """What happens to the next refund requests, one each, in order."""
        with self._lock:
            self._failures.extend(failures)

    def advance(self, seconds: float) -> None:
        """Turn the fake's clock forward, so its idempotency keys age."""
        self._offset += seconds

    def refunds(self) -> list[dict[str, Any]]:
        """Every refund made, oldest first."""
        with self._lock:
            return [dict(refund) for refund in self._refunds]

    def refund_requests(self) -> list[dict[str, str]]:
        """The headers of every ``POST /v1/refunds`` that arrived."""
        return [headers for method, path, _, headers in self.requests if (method, path) == ("POST", "/v1/refunds")]

    # --- the API ---

    def handle(self, method: str, path: str, params: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
        """The status and body of one request, or ``None`` for a connection dropped without an answer."""
        with self._lock:
            self.requests.append((method, path, params, headers))
            if headers.get("authorization") != f"Bearer {self.api_key}":
                shown = headers.get("authorization", "").removeprefix("Bearer ")
                return _error(401, "invalid_request_error", None, f"Invalid API Key provided: {shown[:8]}****")
            if (method, path) == ("POST", "/v1/refunds"):
                return self._post_refund(params, headers.get("idempotency-key"))
            if (method, path) == ("GET", "/v1/refunds"):
                return self._list_refunds(params)
            kind, _, object_id = path.removeprefix("/v1/").partition("/")
            if method == "GET" and kind == "payment_intents" and object_id in self._intents:
                intent = dict(self._intents[object_id])
                if "latest_charge" in params.get("expand", []):
                    intent["latest_charge"] = dict(self._charges[intent["latest_charge"]])
                return 200, intent
            if method == "GET" and kind == "charges" and object_id in self._charges:
                return 200, dict(self._charges[object_id])
            return _error(404, "invalid_request_error", "resource_missing", f"No such {kind[:-1]}: '{object_id}'")

    def _post_refund(self, params: dict[str, Any], key: str | None) -> tuple[int, Any]:
        now = time.monotonic() + self._offset
        failure = self._failures.pop(0) if self._failures else None
        if failure == "rate_limited":
            return _error(429, "invalid_request_error", "rate_limit", "Too many requests hit the API too quickly.")
        if key is not None and len(key) > 255:
            return _error(400, "invalid_request_error", None, "Idempotency-Key must be 255 characters or less.")
        if key is not None:
            saved = self._keys.get(key)
            if saved is not None and now - saved.at < KEY_LIFETIME_SECONDS:
                if saved.params != params:
                    return _error(
                        400,
                        "idempotency_error",
                        None,
                        "Keys for idempotent requests can only be used with the same parameters they were first "
                        f"used with. Try using a key other than '{key}' if you meant to execute a different request.",
                    )
                return saved.status, (saved.body, {"Idempotent-Replayed": "true"})
        status, body = self._refund(params)
        if failure == "500_after_refund" and status == 200:
            status, body = _error(500, "api_error", None, "An unknown error occurred")
        if key is not None:
            self._keys[key] = Saved(params, status, body, now)
        if failure == "slow":
            time.sleep(self.slow_seconds)
        if failure == "drop_after_refund":
            return 0, None
        return status, body

    def _refund(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if "payment_intent" in params:
            intent = self._intents.get(params["payment_intent"])
            if intent is None:
                return _error(
                    404,
                    "invalid_request_error",
                    "resource_missing",
                    f"No such payment_intent: '{params['payment_intent']}'",
                )
            charge = self._charges[intent["latest_charge"]]
        elif params.get("charge") in self._charges:
            charge = self._charges[params["charge"]]
        else:
            return _error(404, "invalid_request_error", "resource_missing", f"No such charge: '{params.get('charge')}'")
        left = charge["amount"] - charge["amount_refunded"]
        amount = int(params.get("amount", left))
        if left == 0:
            return _error(
                400,
                "invalid_request_error",
                "charge_already_refunded",
                f"Charge {charge['id']} has already been refunded.",
            )
        if amount > left:
            return _error(
                400,
                "invalid_request_error",
                "amount_too_large",
                f"Refund amount (${amount / 100:.2f}) is greater than unrefunded amount on charge (${left / 100:.2f})",
            )
        if amount <= 0:
            return _error(400, "invalid_request_error", "parameter_invalid_integer", "Invalid positive integer")
        charge["amount_refunded"] += amount
        charge["refunded"] = charge["amount_refunded"] == charge["amount"]
        refund = {
            "id": f"re_fake{next(self._ids):04d}",
            "object": "refund",
            "amount": amount,
            "currency": charge["currency"],
            "charge": charge["id"],
            "payment_intent": charge["payment_intent"],
            "status": "succeeded",
            "metadata": dict(params.get("metadata", {})),
            "created": int(time.time()),
        }
        self._refunds.append(refund)
        if self.on_refund is not None:
            self.on_refund(dict(refund))
        return 200, dict(refund)

    def _list_refunds(self, params: dict[str, Any]) -> tuple[int, Any]:
        of = [
            r
            for r in reversed(self._refunds)  # newest first, as Stripe lists
            if ("payment_intent" not in params or r["payment_intent"] == params["payment_intent"])
            and ("charge" not in params or r["charge"] == params["charge"])
        ]
        if "starting_after" in params:
            ids = [r["id"] for r in of]
            of = of[ids.index(params["starting_after"]) + 1 :] if params["starting_after"] in ids else []
        limit = int(params.get("limit", 10))
        return 200, {"object": "list", "url": "/v1/refunds", "has_more": len(of) > limit, "data": of[:limit]}

    # --- serving ---

    @contextmanager
    def running(self) -> Iterator[FakeStripe]:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.fake = self  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        thread = threading.Thread(target=server.serve_forever, name="fake-stripe", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()


def stripe_settings(account: FakeStripe, **overrides: Any) -> StripeSettings:
    """The payment settings of a worker that refunds through ``account`` (``Settings.stripe``, ``overrides`` its
    fields)."""
    return StripeSettings(**{"payments": "stripe", "api_key": account.api_key, "api_base": account.url, **overrides})


def pay_at_stripe(account: FakeStripe, store: Business, *order_ids: str) -> dict[str, str]:
    """Charge each of the shop's orders on ``account`` (each a PaymentIntent of the order's amount) and name the
    payment on the order, as a checkout would have; returns the payments by order."""
    payments = {}
    for order_id in order_ids:
        order = store.orders.order(order_id)
        payments[order_id] = account.charge(order.amount_cents, currency=order.currency.lower())
        store.orders.add(order, stripe_payment=payments[order_id])
    return payments


def stripe_env(account: FakeStripe) -> dict[str, str]:
    """The environment of a worker process that refunds through ``account``."""
    return {"AGENT_PAYMENTS": "stripe", "STRIPE_API_KEY": account.api_key, "AGENT_STRIPE_API_BASE": account.url}


def stripe_business(
    account: FakeStripe, folder: Path, settings: Mapping[str, Any] | None = None, **overrides: Any
) -> Business:
    """A business whose refunds go to ``account``, built from settings as a worker builds it (not yet created):
    ``settings`` for its other settings, ``overrides`` for its ``stripe`` concern's fields."""
    stripe = stripe_settings(account, **overrides)
    return wiring.business(Settings(**{"db_path": folder / "business.sqlite3", **(settings or {}), "stripe": stripe}))


def _error(status: int, kind: str, code: str | None, message: str) -> tuple[int, dict[str, Any]]:
    error: dict[str, Any] = {"type": kind, "message": message}
    if code is not None:
        error["code"] = code
    return status, {"error": error}


def _params(text: str) -> dict[str, Any]:
    """Stripe's form encoding, as the SDK writes it: ``metadata[k]=v`` and ``expand[0]=x`` nest."""
    params: dict[str, Any] = {}
    for name, value in parse_qsl(text, keep_blank_values=True):
        outer, _, inner = name.partition("[")
        inner = inner.removesuffix("]")
        if not inner and not name.endswith("[]"):
            params[name] = value
        elif inner.isdigit() or name.endswith("[]"):
            params.setdefault(outer, []).append(value)
        else:
            params.setdefault(outer, {})[inner] = value
    return params


class _Handler(BaseHTTPRequestHandler):
    def _answer(self, method: str) -> None:
        fake: FakeStripe = self.server.fake  # type: ignore[attr-defined]
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length", 0))
        text = self.rfile.read(length).decode() if method == "POST" else url.query
        headers = {name.lower(): value for name, value in self.headers.items()}
        status, answer = fake.handle(method, url.path, _params(text), headers)
        if status == 0:  # the connection dropped: no answer at all
            self.close_connection = True
            self.connection.shutdown(2)
            return
        body, extra = answer if isinstance(answer, tuple) else (answer, {})
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Request-Id", f"req_fake{len(fake.requests):05d}")
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        self._answer("POST")

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass
