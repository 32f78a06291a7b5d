"""Settings for the worker and the CLI, from the environment (prefix ``AGENT_``) or a ``.env`` file.

``Settings`` holds what the whole service shares (the task queue, the business database, logging, how the worker
polls and stops, the money policy) and one nested model per concern, each read from the variables it always was,
each with its own checks: ``smtp`` (``agent_worker.config.mail_settings``), ``mail_in`` (``.mail_in``), ``stripe``
(``.payments``), ``claude`` (``.model``), ``s3`` (``.storage``), ``codec`` and ``codec_server`` (``.codec``), ``web``
(``.web``) and ``versioning``, the Worker Deployment a worker joins (``.deployment``). Whether a provider's client
gives up before its activity's attempt does is checked where the worker is built, against the activities' own
timeouts (``agent_worker.wiring``), so reading settings costs no import of the workflow.

The Temporal connection is not here: it comes from Temporal's own environment configuration
(``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``, ``TEMPORAL_API_KEY``, TLS settings, ``TEMPORAL_PROFILE`` and
the TOML config file), read by ``temporalio.envconfig`` in ``agent_worker.client``, so a worker connects to
a cluster exactly as the ``temporal`` CLI on the same machine would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PositiveFloat, PositiveInt
from pydantic_settings import BaseSettings, SettingsConfigDict
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter

from activities.contracts.fields import Approvers
from activities.contracts.names import TASK_QUEUE
from agent_worker.config.codec_settings import CodecServerSettings, CodecSettings
from agent_worker.config.deployment import DeploymentSettings
from agent_worker.config.mail_in import MailInSettings
from agent_worker.config.mail_settings import SmtpSettings
from agent_worker.config.model_settings import ClaudeSettings
from agent_worker.config.payment_settings import StripeSettings
from agent_worker.config.storage import S3Settings
from agent_worker.config.web import WebSettings

DATA_CONVERTER: DataConverter = pydantic_data_converter
"""Part of the contract with stored histories: worker, clients and replayer must all decode the same way."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AGENT_", env_file=".env", extra="ignore", env_ignore_empty=True)

    def __init__(self, **values: Any) -> None:
        """Code names a concern's settings in its nested model, ``Settings(smtp=SmtpSettings(host=...))``, the
        concern's other settings read from the environment as ever. A keyword no field holds is a ``TypeError``, not
        a setting quietly dropped (the settings ignore what else the environment and ``.env`` hold)."""
        unknown = [key for key in values if key not in type(self).model_fields and not key.startswith("_")]
        if unknown:
            raise TypeError(f"Settings: {'; '.join(f'{key}= is no setting' for key in unknown)}")
        super().__init__(**values)

    task_queue: str = TASK_QUEUE
    data_dir: Path = Path(".agent-worker")
    """Where the embedded defaults keep their files: the business database and the dev server's history."""
    db_path: Path | None = None
    """The business database (orders, refunds, emails, model calls); default ``<data_dir>/business.sqlite3``."""
    database_url: str | None = None
    """A SQLAlchemy URL for a shared business database, e.g. ``postgresql+psycopg://user@host/db``; when set,
    it is used instead of the SQLite file, so several workers on several machines share one provider."""

    idempotency_key_ttl_hours: PositiveFloat = 24.0

    inline_result_max_bytes: PositiveInt = 8192
    """Tool results larger than this (UTF-8 bytes) are kept in the content store (the business database's
    ``blobs`` table, or the S3 bucket) and the history carries only a preview and their ``sha256:`` key."""

    log_format: Literal["json", "console"] = "json"
    log_level: str = "INFO"

    graceful_shutdown_seconds: PositiveFloat | None = None
    """On SIGTERM, how long in-flight activities get to finish before the worker exits anyway. Unset (the default):
    the longest an attempt of any activity may run, read from the activities' own timeouts where the worker is built
    (``agent_worker.wiring.grace_period``), so that a deploy is a pause, never a model call cut short and paid for
    twice. The orchestrator must wait longer before it kills (compose's ``stop_grace_period``, Kubernetes'
    ``terminationGracePeriodSeconds``)."""
    sticky_queue_timeout_seconds: PositiveFloat = 2.0
    """How long the server keeps a ticket on a worker's own queue before offering it to any worker: a killed
    worker's tickets move elsewhere after this, not after the SDK's default of 10 s."""
    max_cached_workflows: PositiveInt = 300
    """How many tickets the worker keeps in memory between their steps. Each cached ticket costs memory (its pieces'
    state and the history's payloads; docs/benchmarks.md), and an evicted one replays its whole history at its
    next step: the cache should hold the tickets in flight, and no more. The SDK's default of 1000 let a worker
    full of parked tickets grow far past what they need (``bench/throughput.py`` measures it)."""
    max_concurrent_workflow_tasks: PositiveInt = 20
    """Workflow tasks the worker takes on at once. They share one Python thread, so what the worker takes on
    beyond what it can run waits inside it, on the server's 10 s clock, where a burst (a thousand approvals at
    once) can time tasks out; kept fewer, the rest wait on the server, where a workflow task's timeout has not
    started yet (``bench/throughput.py --only parked`` measures it)."""

    metrics_bind: str | None = None
    """host:port for the Prometheus endpoint (``/metrics``), e.g. ``0.0.0.0:9464``; off when unset."""
    tracing: bool = False
    """Trace tickets through Temporal's OpenTelemetry plugin, exporting over OTLP/HTTP to
    ``OTEL_EXPORTER_OTLP_ENDPOINT``."""

    smtp: SmtpSettings = Field(default_factory=SmtpSettings)
    mail_in: MailInSettings = Field(default_factory=MailInSettings)
    stripe: StripeSettings = Field(default_factory=StripeSettings)
    claude: ClaudeSettings = Field(default_factory=ClaudeSettings)
    s3: S3Settings = Field(default_factory=S3Settings)
    codec: CodecSettings = Field(default_factory=CodecSettings)
    codec_server: CodecServerSettings = Field(default_factory=CodecServerSettings)
    web: WebSettings = Field(default_factory=WebSettings)
    versioning: DeploymentSettings = Field(default_factory=DeploymentSettings)

    approvers: Approvers = []
    """Who may approve refunds on tickets that name nobody in ``options.approvers``, when the policy file names no
    roles; empty: anyone. Set with roles, the worker does not start: one list of approvers, not two. Within
    ``APPROVERS_BYTES``, as the roles' people are: every request that waits carries them."""

    policy_file: Path | None = None
    """The desk's money policy (``agent_worker.policy_file``, ``agent-worker policy check``): approval limits, roles,
    limits across tickets, the model budget. Read and checked where a program starts that acts on it
    (``agent_worker.wiring.money_policy``); unset, ``MoneyPolicy()``'s defaults are in force."""

    @property
    def business_db(self) -> Path:
        return self.db_path or self.data_dir / "business.sqlite3"
