"""Settings for the worker and the CLI, from the environment (prefix ``AGENT_``) or a ``.env`` file.

The Anthropic connection is not here either: the ``anthropic`` SDK reads its own ``ANTHROPIC_API_KEY`` (or
``ANTHROPIC_AUTH_TOKEN``, or a profile) and ``ANTHROPIC_BASE_URL`` (a gateway or proxy) as it documents
them, so a worker is pointed at Claude exactly as any other program using the SDK would be.

The Temporal connection is not here: it comes from Temporal's own environment configuration
(``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``, ``TEMPORAL_API_KEY``, TLS settings, ``TEMPORAL_PROFILE`` and
the TOML config file), read by ``temporalio.envconfig`` in ``agent_worker.client``, so a worker connects to
a cluster exactly as the ``temporal`` CLI on the same machine would.
"""

from __future__ import annotations

import ipaddress
from email.utils import parseaddr
from pathlib import Path
from typing import Annotated, Literal, Self
from urllib.parse import urlsplit

from pydantic import (
    AliasChoices,
    Field,
    IPvAnyNetwork,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    PrivateAttr,
    SecretStr,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter

from activities.contracts.names import TASK_QUEUE
from activities.contracts.policy import MoneyPolicy
from activities.pricing import DEFAULT_PRICES, ModelPrice
from activities.prompt import SUPPORT_POLICY
from agent_worker import policy_file
from agent_worker.defaults import ASYMMETRIC_ALGORITHMS
from agent_worker.inbox.auth import check_hash, origin_of

DATA_CONVERTER: DataConverter = pydantic_data_converter
"""Part of the contract with stored histories: worker, clients and replayer must all decode the same way."""

DEFAULT_MODEL = "claude-sonnet-5-5"
"""The current Sonnet in the SDK's own model list (``anthropic.types.Model``): fast, capable and a fifth
of Opus's price per token, which suits a support agent's short tool-using turns."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AGENT_", env_file=".env", extra="ignore")

    task_queue: str = TASK_QUEUE
    data_dir: Path = Path(".agent-worker")
    """Where the embedded defaults keep their files: the business database and the dev server's history."""
    db_path: Path | None = None
    """The business database (orders, refunds, emails, model calls); default ``<data_dir>/business.sqlite3``."""
    database_url: str | None = None
    """A SQLAlchemy URL for a shared business database, e.g. ``postgresql+psycopg://user@host/db``; when set,
    it is used instead of the SQLite file, so several workers on several machines share one provider."""

    refund_guard: bool = True
    """Refuse a refund that would take an order's refunded total above its charge, as Stripe does."""
    idempotency_key_ttl_hours: PositiveFloat = 24.0

    payments: Literal["embedded", "stripe"] = "embedded"
    """Who refunds. ``embedded``: the business database's provider, with Stripe's rules. ``stripe``: Stripe's API,
    on each order's Stripe payment (``agent-worker orders add ... --stripe-payment``)."""
    stripe_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("STRIPE_API_KEY", "stripe_api_key")
    )
    """``STRIPE_API_KEY`` (unprefixed, as Stripe's own tools read it): a secret key (``sk_``) or a restricted key
    (``rk_``) with write access to refunds and read access to charges and payment intents. Never logged."""
    stripe_api_base: str | None = None
    """Where Stripe's API is: Stripe's own (``https://api.stripe.com``) unless set, for a proxy or tests. Plain
    ``http://`` only to this machine: the API key travels in every request."""
    stripe_timeout_seconds: float = Field(default=20.0, gt=0, lt=30.0)
    """One request to Stripe; below the ``issue_refund`` activity's start-to-close timeout, so a slow answer ends
    an attempt with a retryable error rather than an attempt Temporal gave up on."""

    mail: Literal["embedded", "smtp"] = "embedded"
    """Where ``send_email`` sends. ``embedded``: into the outbox table, and nowhere else. ``smtp``: to the mail
    server below, the outbox recording each email under its key first (``activities.business.mail``)."""
    smtp_host: str | None = None
    smtp_port: int | None = Field(default=None, ge=1, le=65535)
    """Default by ``smtp_security``: 25 for ``none``, 587 for ``starttls``, 465 for ``tls``."""
    smtp_security: Literal["none", "starttls", "tls"] = "starttls"
    """``starttls``: plain connection upgraded to TLS, required; ``tls``: TLS from the first byte; ``none``: no
    encryption (a relay on the same machine). The server's certificate is always checked."""
    smtp_username: str | None = None
    smtp_password: SecretStr | None = None
    """A secret: never logged, never shown; with ``none`` only to a server on a loopback address."""
    smtp_ca_file: Path | None = None
    """A certificate authority to trust for the server's certificate besides the system's (a private CA)."""
    smtp_timeout_seconds: float = Field(default=20.0, gt=0, lt=30.0)
    """One delivery, connecting to quitting; below the ``send_email`` activity's start-to-close timeout, so a
    slow server ends an attempt with a retryable answer rather than an attempt Temporal gave up on."""
    mail_from: str | None = None
    """The From of every email, ``Support <support@example.com>`` or an address; its address is also the
    envelope sender, and its domain that of the Message-IDs."""

    scripted_think_seconds: float = Field(default=0.0, ge=0)
    """How long the scripted model pretends to think: zero for tests and benchmarks."""

    model_backend: Literal["auto", "claude", "scripted"] = "auto"
    """Which model the ``think`` activity asks. ``auto``: Claude when the ``anthropic`` SDK finds credentials
    (``ANTHROPIC_API_KEY`` and the like), otherwise the scripted stand-in; ``claude`` refuses to start without
    credentials instead of falling back."""
    anthropic_model: str = DEFAULT_MODEL
    anthropic_max_tokens: PositiveInt = 8192
    """Room for the answer and any thinking before it; a reply cut off here is handled, not fatal."""
    anthropic_temperature: float | None = Field(default=None, ge=0, le=1)
    """Unset by default: the model's own default. Claude's 5-series models refuse (400) any other value."""
    anthropic_timeout_seconds: PositiveFloat = 90.0
    """One HTTP request to the API; below the ``think`` activity's start-to-close timeout, so a slow call
    fails as a retryable timeout in the activity rather than as a timed-out attempt."""
    anthropic_system_prompt: str = SUPPORT_POLICY
    anthropic_prices: dict[str, ModelPrice] = DEFAULT_PRICES
    """Dollars per million tokens per model, for the cost estimate in the ``usage`` query and the outcome."""

    inline_result_max_bytes: PositiveInt = 8192
    """Tool results larger than this (UTF-8 bytes) are kept in the content store (the business database's
    ``blobs`` table, or the S3 bucket) and the history carries only a preview and their ``sha256:`` key."""

    s3_bucket: str | None = None
    """An existing S3 bucket for what is too big for history: the content store's blobs, and every Temporal
    payload of at least ``s3_payload_threshold_bytes`` (temporalio's experimental ``ExternalStorage``).
    Unset (the default): blobs in the business database, every payload in history. Credentials come from
    boto3's standard chain (``AWS_ACCESS_KEY_ID``, ``AWS_PROFILE``, a role), never from here. Worker,
    clients and replayer must all be given the same bucket, prefix and codec keys."""
    s3_prefix: str = ""
    """Put every object under this folder of the bucket, e.g. ``agent-worker`` (a ``/`` is added)."""
    s3_endpoint_url: str | None = None
    """Another S3 API than AWS's (MinIO, localstack, a test server), e.g. ``http://minio:9000``."""
    s3_region: str | None = None
    """Default: boto3's own (``AWS_REGION``, ``AWS_DEFAULT_REGION``, the profile)."""
    s3_payload_threshold_bytes: NonNegativeInt = 256 * 1024
    """Temporal payloads this size or larger (after encryption) go to the bucket and history keeps a
    reference; the server refuses a payload above 2 MB and warns from 512 KB. 0 sends every payload."""

    log_format: Literal["json", "console"] = "json"
    log_level: str = "INFO"

    graceful_shutdown_seconds: PositiveFloat = 120.0
    """On SIGTERM, how long in-flight activities get to finish before the worker exits anyway: by default the
    longest an attempt may run (``workflows.timeouts.LONGEST_ATTEMPT``, which ``tests/test_compose.py`` holds this
    to; not imported here, so that reading settings costs no import of the workflow), so that a deploy is a pause,
    never a model call cut short and paid for twice.
    The orchestrator must wait longer before it kills (compose's ``stop_grace_period``, Kubernetes'
    ``terminationGracePeriodSeconds``)."""
    sticky_queue_timeout_seconds: PositiveFloat = 2.0
    """How long the server keeps a ticket on a worker's own queue before offering it to any worker: a killed
    worker's tickets move elsewhere after this, not after the SDK's default of 10 s."""
    max_cached_workflows: PositiveInt = 300
    """How many tickets the worker keeps in memory between their steps. Each cached ticket costs memory (mostly
    the workflow sandbox's own copy of the workflow's module), and an evicted one replays its whole history at its
    next step: the cache should hold the tickets in flight, and no more. The SDK's default of 1000 let a worker
    full of parked tickets grow far past what they need (figures in the README, "Throughput and cost per
    ticket", from ``bench/throughput.py``)."""
    max_concurrent_workflow_tasks: PositiveInt = 20
    """Workflow tasks the worker takes on at once. They share one Python thread, so what the worker takes on
    beyond what it can run waits inside it, on the server's 10 s clock, where a burst (a thousand approvals at
    once) can time tasks out; kept fewer, the rest wait on the server, where a workflow task's timeout has not
    started yet (figures in the README, from ``bench/throughput.py --only parked``)."""

    codec_keys: dict[str, SecretStr] = {}
    """Payload encryption keys by id, base64 (16, 24 or 32 bytes): ``AGENT_CODEC_KEYS='{"2026-11": "..."}'``.
    Empty: payloads are not encrypted (the embedded demo's default)."""
    codec_key_id: str | None = None
    """The key new payloads are encrypted with; default the last one listed. Keep old keys listed after a
    rotation so what they encrypted still decrypts."""
    blobs_accept_plaintext: bool = False
    """With codec keys set, also read content-store blobs that are not sealed: only while blobs written before
    encryption was switched on are still in use (a migration). Off, such a blob is refused, so a worker left
    without keys, writing customers' words in plain text, is noticed rather than trusted."""
    require_encrypted_input: bool = False
    """With codec keys set, refuse inputs and signals that arrive unencrypted (sent by a client without the
    codec, such as ``temporal workflow start`` without ``--codec-endpoint``) instead of only logging a
    warning: a ticket fails as ``InvalidTicketInput``, an approval is recorded as rejected. It changes how
    histories read, like a key: switch it on only once no open ticket has received a plain payload."""
    codec_server_origin: str = "http://localhost:8233"
    """The one origin (the Web UI) the codec server answers CORS requests from."""
    codec_server_token: SecretStr | None = None
    """A static bearer token the codec server accepts, for the ``temporal`` CLI's ``--codec-auth`` and scripts.
    A secret every holder shares: people in a browser should come with the identity provider's JWT instead."""
    codec_server_jwks_url: str | None = None
    """The identity provider's JWKS (its published signing keys), e.g.
    ``https://login.example.com/.well-known/jwks.json``: the codec server then takes the Web UI's single-sign-on
    access token, a JWT, checked against these keys, ``codec_server_audience`` and ``codec_server_issuer``."""
    codec_server_audience: str | None = None
    """The ``aud`` the access tokens must carry (what the identity provider issues the Web UI's tokens for)."""
    codec_server_issuer: str | None = None
    """The ``iss`` the access tokens must carry, e.g. ``https://login.example.com/``."""
    codec_server_algorithms: list[str] = ["RS256"]
    """What the tokens may be signed with: asymmetric algorithms only (``none`` and ``HS*`` are refused)."""

    metrics_bind: str | None = None
    """host:port for the Prometheus endpoint (``/metrics``), e.g. ``0.0.0.0:9464``; off when unset."""

    tracing: bool = False
    """Trace tickets through Temporal's OpenTelemetry plugin, exporting over OTLP/HTTP to
    ``OTEL_EXPORTER_OTLP_ENDPOINT``."""

    approvers: list[str] = []
    """Who may approve refunds on tickets that name nobody in ``options.approvers``, when the policy file names no
    roles; empty: anyone. Set with roles, the worker does not start: one list of approvers, not two."""

    policy_file: Path | None = None
    """The desk's money policy (``agent_worker.policy_file``, ``agent-worker policy check``): approval limits, roles,
    limits across tickets, the model budget. Read and checked when the settings are; unset, ``MoneyPolicy()``'s
    defaults are in force."""
    _money_policy: MoneyPolicy = PrivateAttr(default_factory=MoneyPolicy)

    @property
    def money_policy(self) -> MoneyPolicy:
        """The policy ``policy_file`` states, as read when these settings were (a changed file takes effect at
        the worker's next start); the defaults without one."""
        return self._money_policy

    @model_validator(mode="after")
    def _read_the_policy_file(self) -> Self:
        """A policy that cannot be read stops every command, as any bad setting does: a worker must never run on
        the defaults because the desk's file has a typo."""
        if self.policy_file is not None:
            try:
                self._money_policy = policy_file.read(self.policy_file)
            except policy_file.PolicyFileError as error:
                raise ValueError(f"AGENT_POLICY_FILE {error}") from None
        if self.approvers and self._money_policy.approval.roles:
            raise ValueError(
                "AGENT_POLICY_FILE names approval roles and AGENT_APPROVERS lists approvers: choose one (the roles, "
                "which also say up to how much each person may approve, or AGENT_APPROVERS without roles)"
            )
        return self

    web_approval_keys: list[Annotated[SecretStr, Field(min_length=32)]] = []
    """The keys the approval inbox signs the answers it vouches for with (``activities.vouching``), at least 32
    characters each, shared by the inbox and the workers: ``AGENT_WEB_APPROVAL_KEYS='["..."]'``. The inbox signs
    with the last; workers accept any, so a key is rotated by adding the new one last, then dropping the old.
    None: the workers take no answer as vouched for (signals still work, as claims)."""

    def web_approval_key_bytes(self) -> list[bytes]:
        return [key.get_secret_value().encode() for key in self.web_approval_keys]

    web_host: str = "127.0.0.1"
    """Where ``agent-worker web`` listens. Anything but a loopback address needs authentication configured
    (``web_users`` or ``web_proxy_header``): the inbox refuses to start otherwise."""
    web_port: int = Field(default=8088, ge=0, le=65535)
    web_base_path: str = ""
    """A path the inbox is served under, e.g. ``/inbox`` behind a proxy that serves other things too."""
    web_public_url: str | None = None
    """The address people open, e.g. ``https://inbox.example.com/inbox``. Set, the inbox answers only requests for
    that host and takes forms only from that origin; needed behind a single-sign-on proxy. Unset, the origin is
    the request's own, and on a loopback address only loopback host names are served (no DNS rebinding)."""
    web_confirm_above_cents: NonNegativeInt = 50_000
    """An approval in the inbox above this amount (in the smallest unit of the order's currency: 500.00) is asked
    once more, on a page of its own that states the amount, the order and the customer, before it is sent; the
    inbox refuses to send one without that confirmation. 0: every approval is confirmed."""
    web_users: dict[str, SecretStr] = {}
    """Standalone sign-in: each approver's name and password hash (``agent-worker web-user NAME`` makes one,
    argon2id; a legacy ``scrypt$...`` hash from an earlier version still verifies):
    ``AGENT_WEB_USERS='{"ann": "$argon2id$v=19$m=65536,t=3,p=4$..."}'``. The name is the approver the workflow
    sees, so it is what ``options.approvers`` and ``AGENT_APPROVERS`` must list."""
    web_proxy_header: str | None = None
    """Behind single sign-on: the header the proxy names the signed-in person in, e.g. ``X-Forwarded-Email``
    (oauth2-proxy's). Believed only from ``web_trusted_proxies``."""
    web_trusted_proxies: list[IPvAnyNetwork] = []
    """The single-sign-on proxy's addresses (or networks), e.g. ``["127.0.0.1"]`` for a proxy on the same machine:
    the only connections whose ``web_proxy_header`` (and ``X-Forwarded-Proto``) the inbox believes."""
    web_session_hours: PositiveFloat = 12.0
    """How long a standalone sign-in lasts at most, however busy: its maximum age."""
    web_session_idle_minutes: PositiveFloat = 30.0
    """How long a standalone sign-in lasts without a request (counted to the minute): a browser left open on an
    unattended desk is signed out by then."""

    def web_user_hashes(self) -> dict[str, str]:
        return {name: stored.get_secret_value() for name, stored in self.web_users.items()}

    @field_validator("web_base_path")
    @classmethod
    def _base_path(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if value and (not value.startswith("/") or "//" in value or any(c in value for c in "?#'\"\\")):
            raise ValueError("a path such as /inbox")
        return value

    @field_validator("web_users")
    @classmethod
    def _password_hashes(cls, value: dict[str, SecretStr]) -> dict[str, SecretStr]:
        for name, stored in value.items():
            if not name.strip() or name != name.strip():
                raise ValueError(f"an approver's name without surrounding spaces, not {name!r}")
            try:
                check_hash(stored.get_secret_value())
            except ValueError as error:
                raise ValueError(f"{name}: {error}") from None
        return value

    @field_validator("web_public_url")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        if value and (origin_of(value) is None or not value.lower().startswith(("http://", "https://"))):
            raise ValueError("an address such as https://inbox.example.com")
        return value or None

    @model_validator(mode="after")
    def _proxy_settings_come_together(self) -> Self:
        """A header believed from nobody would lock everyone out, and one believed without knowing the inbox's own
        address would let a page that re-points a host name at the proxy's machine (DNS rebinding) send it."""
        if self.web_proxy_header and not (self.web_trusted_proxies and self.web_public_url):
            raise ValueError(
                "AGENT_WEB_PROXY_HEADER needs AGENT_WEB_TRUSTED_PROXIES (the proxy's addresses, the only ones whose "
                "header is believed) and AGENT_WEB_PUBLIC_URL (the address people open through it)"
            )
        return self

    @field_validator(
        "s3_bucket", "s3_endpoint_url", "s3_region", "codec_server_jwks_url", "codec_server_audience",
        "codec_server_issuer", "web_proxy_header", "web_public_url", "smtp_host", "smtp_username", "mail_from",
        "stripe_api_base",
    )  # fmt: skip
    @classmethod
    def _empty_is_unset(cls, value: str | None) -> str | None:
        return value or None  # compose passes an unset variable through as ""

    @field_validator("smtp_port", "smtp_password", "smtp_ca_file", "stripe_api_key", "policy_file", mode="before")
    @classmethod
    def _empty_is_unset_before_parsing(cls, value: object) -> object:
        return None if value == "" else value  # "" is no port, no password, no file, and not the current directory

    @model_validator(mode="after")
    def _smtp_settings_come_together(self) -> Self:
        """A worker that would send mail to nowhere, or a password in clear over a network, does not start."""
        if self.mail != "smtp":
            return self
        needed = {"AGENT_SMTP_HOST": self.smtp_host, "AGENT_MAIL_FROM": self.mail_from}
        missing = [name for name, value in needed.items() if value is None]
        if missing:
            raise ValueError(
                f"AGENT_MAIL=smtp needs {' and '.join(missing)}: the mail server to hand emails to, and the address "
                "they come from"
            )
        assert self.mail_from is not None
        if "@" not in parseaddr(self.mail_from)[1]:
            raise ValueError(
                f"AGENT_MAIL_FROM must name an address, e.g. Support <support@example.com>, not {self.mail_from!r}"
            )
        if (self.smtp_username is None) != (self.smtp_password is None):
            raise ValueError("AGENT_SMTP_USERNAME and AGENT_SMTP_PASSWORD go together: set both, or neither")
        if self.smtp_password is not None and self.smtp_security == "none" and not _loopback(self.smtp_host or ""):
            raise ValueError(
                "AGENT_SMTP_SECURITY=none would send AGENT_SMTP_PASSWORD in clear to a server on the network: "
                "use starttls or tls"
            )
        return self

    @model_validator(mode="after")
    def _stripe_settings_come_together(self) -> Self:
        """A worker that would refund through Stripe without a key, with a key that cannot refund, or with the key
        in clear over a network, does not start."""
        if self.payments != "stripe":
            return self
        if self.stripe_api_key is None:
            raise ValueError("AGENT_PAYMENTS=stripe needs STRIPE_API_KEY: a secret (sk_) or restricted (rk_) key")
        if not self.stripe_api_key.get_secret_value().startswith(("sk_", "rk_")):
            raise ValueError(
                "STRIPE_API_KEY must be a secret (sk_) or restricted (rk_) key; a publishable key (pk_) cannot refund"
            )
        base = urlsplit(self.stripe_api_base or "https://api.stripe.com")
        if base.scheme not in {"https", "http"} or not base.hostname:
            raise ValueError(f"AGENT_STRIPE_API_BASE must be an http(s) address, not {self.stripe_api_base!r}")
        if base.scheme == "http" and not _loopback(base.hostname):
            raise ValueError(
                "AGENT_STRIPE_API_BASE over plain http would send STRIPE_API_KEY in clear to another machine: use https"
            )
        return self

    @field_validator("codec_server_algorithms")
    @classmethod
    def _asymmetric_only(cls, value: list[str]) -> list[str]:
        if not value or not set(value) <= ASYMMETRIC_ALGORITHMS:
            raise ValueError(f"only asymmetric algorithms: {', '.join(sorted(ASYMMETRIC_ALGORITHMS))}")
        return value

    @model_validator(mode="after")
    def _jwt_settings_come_together(self) -> Self:
        named = {
            "AGENT_CODEC_SERVER_JWKS_URL": self.codec_server_jwks_url,
            "AGENT_CODEC_SERVER_AUDIENCE": self.codec_server_audience,
            "AGENT_CODEC_SERVER_ISSUER": self.codec_server_issuer,
        }
        missing = [name for name, value in named.items() if value is None]
        if 0 < len(missing) < len(named):  # a token checked without its audience or issuer is half checked
            raise ValueError(f"the codec server's JWT settings go together: set {' and '.join(missing)} too")
        return self

    @field_validator("s3_prefix")
    @classmethod
    def _prefix_is_a_folder(cls, value: str) -> str:
        value = value.strip("/")
        return f"{value}/" if value else ""

    faults: str = ""
    """Crash tests only: kill or hang this worker at activity boundaries (``agent_worker/faults.py``). Empty,
    the default, injects nothing; anything else is logged as a warning on every start."""
    faults_dir: Path | None = None
    """Where faults count how often each point was reached, across worker processes; default beside the
    business database (``<db>.faults``)."""

    @field_validator("faults")
    @classmethod
    def _faults_must_parse(cls, value: str) -> str:
        from agent_worker.faults import parse  # noqa: PLC0415 - only when faults are set: it loads Temporal's worker

        parse(value)  # a typo must stop the worker, not leave a crash test silently crash-free
        return value

    @property
    def business_db(self) -> Path:
        return self.db_path or self.data_dir / "business.sqlite3"


def _loopback(host: str) -> bool:
    """Whether ``host`` is this machine: an address in the loopback range, or ``localhost``."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
