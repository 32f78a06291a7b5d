"""How the service is put together from its settings: the one place that builds things from ``Settings``.

``Settings`` holds values only. From them this module builds what every client, worker and replayer of the
service must share, the data converter (pydantic, the codec's encryption, large payloads to S3), and what a
worker runs: the outside systems' ports, the model, the activities and the interceptors. It hands them over as
two Temporal plugins (``temporalio.plugin.SimplePlugin``), as Pydantic AI's integration does: ``AgentClientPlugin``,
the converter, which the CLI's commands, the inbox, the demo and the replayer take (``connect`` has no default
converter to fall back on, so none can forget the codec), and ``AgentWorkerPlugin``, what a worker runs, which
a worker adds to its client's. The client's plugin composes with the converter a caller hands it, as the OpenAI
Agents plugin does: it keeps the caller's codec, or refuses, with ``IncompatibleConverterError``, a converter
whose payloads it could not read the same way.

What only a worker needs (the workflow, the activities, the database, boto3, the ``anthropic`` SDK) is imported
where it is used, so a command that only reads visibility does not pay for it (``bench/cold_start.py``).
"""

from __future__ import annotations

import base64
import dataclasses
import functools
from collections.abc import Callable, Sequence
from datetime import timedelta
from email.utils import parseaddr
from typing import TYPE_CHECKING, Any

import structlog
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import DataConverter, DefaultPayloadConverter, ExternalStorage
from temporalio.plugin import SimplePlugin
from temporalio.worker import UnsandboxedWorkflowRunner, WorkerDeploymentConfig, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from activities.business.reply_addresses import ReplyAddresses
from agent_worker.codec import EncryptionCodec, with_codec
from agent_worker.config import DATA_CONVERTER, Settings
from agent_worker.exits import Refused
from agent_worker.model_choice import choose_model

if TYPE_CHECKING:
    from stripe import StripeClient
    from temporalio.runtime import Runtime
    from temporalio.worker import WorkerConfig

    from activities.business import Business
    from activities.business.database import Database
    from activities.business.mail import Relay
    from activities.content_store import BlobBackend
    from activities.contracts.policy import MoneyPolicy, PolicyInForce
    from activities.language_model import LanguageModel
    from activities.tools import Tools
    from agent_worker.codec_server.auth import BearerAuth

log = structlog.get_logger(__name__)


# --- what every client, worker and replayer shares ----------------------------------------------------------


def codec(settings: Settings) -> EncryptionCodec | None:
    """The payload codec for the configured keys; None when no key is set (payloads stay plain JSON)."""
    if not settings.codec.keys:
        return None
    keys = {
        key_id: base64.b64decode(key.get_secret_value(), validate=True) for key_id, key in settings.codec.keys.items()
    }
    return EncryptionCodec(
        keys, settings.codec.key_id or list(keys)[-1], require_encrypted=settings.codec.require_encrypted_input
    )


def payload_storage(settings: Settings) -> ExternalStorage | None:
    """Where payloads too big for history go: the bucket ``AGENT_S3_BUCKET`` names, through its own S3 client with
    botocore's retries on (``agent_worker.s3.s3_client``); None without a bucket, every payload in history."""
    if settings.s3.bucket is None:
        return None
    from agent_worker.s3 import external_storage, s3_client  # noqa: PLC0415 - boto3 takes a second to import

    client = s3_client(settings.s3.endpoint_url, settings.s3.region, retries=True)
    return external_storage(client, settings.s3.bucket, settings.s3.prefix, settings.s3.payload_threshold_bytes)


def converter(codec: EncryptionCodec | None, storage: ExternalStorage | None) -> DataConverter:
    """The converter the worker, every client and the replayer must share: pydantic, then the codec's encryption,
    then large payloads to ``storage``, in the order temporalio applies them."""
    converted = with_codec(DATA_CONVERTER, codec)
    return converted if storage is None else dataclasses.replace(converted, external_storage=storage)


def data_converter(settings: Settings) -> DataConverter:
    """``converter`` from what the settings name, for a program that needs nothing else of them (a command, the
    inbox, the replayer); a worker builds the codec once and hands the same one to its content store."""
    return converter(codec(settings), payload_storage(settings))


@functools.cache
def build_id() -> str:
    """What a worker tells the server it runs: the release, then a digest of this service's own source and the SDK's
    version, so it changes when the code does (``agent-worker-2.0.0-<20 hex digits>``). The history keeps it for every
    workflow task, so a ticket stuck on code that did not write it says which release did (``agent_worker.stuck``).
    The SDK's default is a digest of the bytecode of every module the process has loaded, which a worker would
    compute at every start (``bench/cold_start.py``); this one once a process."""
    import hashlib  # noqa: PLC0415
    import importlib.metadata  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    import activities  # noqa: PLC0415
    import agent_worker  # noqa: PLC0415
    import workflows  # noqa: PLC0415

    digest = hashlib.sha256(importlib.metadata.version("temporalio").encode())
    for package in (activities, agent_worker, workflows):
        root = Path(package.__file__ or "").parent
        for source in sorted(root.rglob("*.py")):
            digest.update(str(source.relative_to(root.parent)).encode() + b"\0" + source.read_bytes())
    return f"agent-worker-{importlib.metadata.version('agent-worker')}-{digest.hexdigest()[:20]}"


def deployment_config(settings: Settings) -> WorkerDeploymentConfig | None:
    """The version of a Worker Deployment a worker polls as: ``AGENT_DEPLOYMENT``'s build ``AGENT_BUILD_ID``, else
    ``build_id()``; None for an unversioned worker. Its tickets are PINNED: no build replays a history another wrote,
    and a ticket moves to a new build by continuing as new while it waits (``Continuation.retargeted``). Set here, not
    on the workflow, which unversioned workers run too, and server 1.32 refuses a behaviour from them (rollouts.md)."""
    if settings.versioning.deployment is None:
        return None
    version = WorkerDeploymentVersion(settings.versioning.deployment, settings.versioning.build_id or build_id())
    pinned = VersioningBehavior.PINNED
    return WorkerDeploymentConfig(version=version, use_worker_versioning=True, default_versioning_behavior=pinned)


def codec_server_auth(settings: Settings) -> BearerAuth | None:
    """How the codec server authenticates requests; None is its local mode (loopback only)."""
    from agent_worker.codec_server.auth import BearerAuth, JwtValidator  # noqa: PLC0415 - a JWT library, for this alone

    validator = None
    if settings.codec_server.jwks_url is not None:
        assert settings.codec_server.audience is not None  # the settings' validator sees to these
        assert settings.codec_server.issuer is not None
        validator = JwtValidator(
            settings.codec_server.jwks_url,
            settings.codec_server.audience,
            settings.codec_server.issuer,
            tuple(settings.codec_server.algorithms),
        )
    token = settings.codec_server.token.get_secret_value() if settings.codec_server.token else None
    return None if token is None and validator is None else BearerAuth(token, validator)


# --- what a worker runs ---------------------------------------------------------------------------------


def business(settings: Settings) -> Business:
    """The outside systems the worker acts on: the one place their ports are built from settings. The
    embedded ones, in the shared database at ``database_url`` if it is set, else in the SQLite file; refunds go
    to Stripe when ``payments`` is ``stripe``, and the outbox delivers through the mail server when ``mail`` is
    ``smtp``."""
    from activities.business import Business, Options  # noqa: PLC0415 - SQLAlchemy, for workers and store commands

    key_ttl = timedelta(hours=settings.idempotency_key_ttl_hours)
    options: Options = {
        "key_ttl": key_ttl,
        "mail_relay": mail_relay(settings),
        "stripe": stripe_client(settings),
    }
    if settings.database_url:
        return Business.at(settings.database_url, **options)
    return Business.sqlite(settings.business_db, **options)


class SchemaRefusedError(SystemExit):
    """The business database is not at a revision this version runs on: nothing starts, and the message says what
    to run (a ``SystemExit``, so every entry point stops with the sentence, as ``connect`` refuses)."""


def business_ready(settings: Settings) -> Business:
    """The business a worker and the operator's commands start on: ``business`` with its schema ready
    (``schema_ready``)."""
    store = business(settings)
    try:
        schema_ready(store.database)
    except SchemaRefusedError:
        store.close()
        raise
    return store


def schema_ready(database: Database) -> None:
    """``Database.ready``: a SQLite file migrated, a database server's schema checked and never changed; else
    ``SchemaRefusedError`` naming ``agent-worker migrate``."""
    from activities.migrations import SchemaNotCurrentError  # noqa: PLC0415 - Alembic, for those that need it

    try:
        database.ready()
    except SchemaNotCurrentError as error:
        raise SchemaRefusedError(f"agent-worker cannot start: {error}") from None


def business_database(settings: Settings) -> Database:
    """The business database alone, where ``business`` finds it: the shared one at ``database_url`` if set, else the
    SQLite file. The approval inbox keeps its sessions there, so every inbox process, and the operator's
    ``agent-worker web-sessions``, read the same ones."""
    from activities.business.database import Database  # noqa: PLC0415 - SQLAlchemy, for those that need it

    return Database(settings.database_url or f"sqlite:///{settings.business_db}")


def mail_relay(settings: Settings) -> Relay | None:
    """The mail server the outbox delivers through (``AGENT_MAIL=smtp``); None for the embedded outbox."""
    smtp = settings.smtp
    if smtp.mail == "embedded":
        return None
    from activities.business.smtp import SmtpRelay, SmtpServer  # noqa: PLC0415 - the SMTP client, for this alone

    assert smtp.host is not None  # the settings' validator sees to these
    assert smtp.mail_from is not None
    server = SmtpServer(
        host=smtp.host,
        sender=smtp.mail_from,
        port=smtp.port,
        security=smtp.security,
        username=smtp.username,
        password=smtp.password,
        ca_file=smtp.ca_file,
        timeout_seconds=smtp.timeout_seconds,
    )
    return SmtpRelay(server, reply_addresses(settings))


def reply_addresses(settings: Settings) -> ReplyAddresses | None:
    """The desk's signed reply addresses (``AGENT_MAIL_REPLY_KEY`` under ``AGENT_MAIL_FROM``'s address), as the
    workers write them and the mail receiver reads them; None without both."""
    smtp = settings.smtp
    if smtp.reply_key is None or smtp.mail_from is None:
        return None
    return ReplyAddresses(smtp.reply_key.get_secret_value().encode(), parseaddr(smtp.mail_from)[1])


def stripe_client(settings: Settings) -> StripeClient | None:
    """Stripe's client (``AGENT_PAYMENTS=stripe``), one per worker; None for the embedded provider. The SDK's own
    retries are off: Temporal's retry policy is the only one, so every attempt is in the ticket's history."""
    if settings.stripe.payments == "embedded":
        return None
    import stripe  # noqa: PLC0415 - the SDK, for a worker that refunds through Stripe alone

    assert settings.stripe.api_key is not None  # the settings' validator sees to it
    return stripe.StripeClient(
        settings.stripe.api_key.get_secret_value(),
        base_addresses={"api": settings.stripe.api_base} if settings.stripe.api_base else None,
        max_network_retries=0,
        http_client=stripe.RequestsClient(timeout=settings.stripe.timeout_seconds),
    )


def blob_backend(settings: Settings, database_blobs: BlobBackend, sealer: EncryptionCodec | None) -> BlobBackend:
    """Where the content store keeps blobs: the bucket if one is set (still reading what the business database held
    before, ``database_blobs``), through an S3 client of its own with botocore's retries off (it runs inside
    activities, whose retry policy is the only one), else the business database; sealed with ``sealer``, the codec
    the worker's payloads are, when the settings give keys."""
    from agent_worker.codec import EncryptedBlobs  # noqa: PLC0415

    backend: BlobBackend = database_blobs
    if settings.s3.bucket is not None:
        from activities.s3_blobs import S3BlobBackend  # noqa: PLC0415 - boto3's import time, as above
        from agent_worker.s3 import s3_client  # noqa: PLC0415

        client = s3_client(settings.s3.endpoint_url, settings.s3.region, retries=False)
        backend = S3BlobBackend(client, settings.s3.bucket, settings.s3.prefix, fallback=database_blobs)
    if sealer is None:
        return backend
    return EncryptedBlobs(backend, sealer, accept_plaintext=settings.codec.blobs_accept_plaintext)


def dev_business_and_model(settings: Settings) -> tuple[Business, LanguageModel]:
    """What a person trying the agent gets (``agent-worker dev`` and the demo): the demo's orders to ask about, and
    the script standing in for the model when no Anthropic key is configured. A worker gets neither unasked."""
    store = business(settings).create(seed_demo_orders=True)
    return store, choose_model(settings, store.model_calls, dev_stack=True)


def policy_in_force(settings: Settings) -> PolicyInForce:
    """What the ``money_policy`` activity answers on every worker the product builds: the settings' policy
    (``money_policy``), its digest and ``AGENT_APPROVERS``."""
    from activities.contracts.policy import PolicyInForce  # noqa: PLC0415

    policy = money_policy(settings)
    return PolicyInForce(policy=policy, digest=policy.digest(), default_approvers=settings.approvers)


class PolicyRefusedError(Refused):
    """A policy file that cannot be read, or that contradicts ``AGENT_APPROVERS``: nothing starts, and the sentence
    names the setting (exit 2, as for any bad setting); ``reason`` is what is wrong, without the sentence's start."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"agent-worker cannot start with these settings: {reason}")
        self.reason = reason


def money_policy(settings: Settings) -> MoneyPolicy:
    """The desk's policy, read from ``AGENT_POLICY_FILE`` as the program starts (a changed file takes effect at the
    next start); ``MoneyPolicy()``'s defaults without one. A policy that cannot be read stops the program, as any bad
    setting does (``PolicyRefusedError``): a worker must never run on the defaults because the desk's file has a
    typo."""
    from activities.contracts.policy import MoneyPolicy  # noqa: PLC0415
    from agent_worker import policy_file  # noqa: PLC0415

    policy = MoneyPolicy()
    if settings.policy_file is not None:
        try:
            policy = policy_file.read(settings.policy_file)
        except policy_file.PolicyFileError as error:
            raise PolicyRefusedError(f"AGENT_POLICY_FILE {error}") from None
    if settings.approvers and policy.approval.roles:
        raise PolicyRefusedError(
            "AGENT_POLICY_FILE names approval roles and AGENT_APPROVERS lists approvers: choose one (the roles, which "
            "also say up to how much each person may approve, or AGENT_APPROVERS without roles)"
        )
    return policy


def metrics_runtime(bind_address: str | None, versioned: WorkerDeploymentConfig | None = None) -> Runtime | None:
    """A runtime serving Prometheus metrics on ``bind_address`` (``AGENT_METRICS_BIND``), or None for the default
    (no endpoint). A worker of a Worker Deployment (``versioned``) tags every metric with its deployment and build,
    which the SDK's own metrics do not carry, so a rollout's dashboard compares the two versions side by side
    (``docs/rollouts.md``). The process that makes it hands its meter to whatever counts (the mail receiver)."""
    from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig  # noqa: PLC0415

    if bind_address is None:
        return None
    metrics = PrometheusConfig(bind_address=bind_address)
    return Runtime(telemetry=TelemetryConfig(metrics=metrics, global_tags=deployment_tags(versioned)))


def deployment_tags(versioned: WorkerDeploymentConfig | None) -> dict[str, str]:
    """``worker_deployment_name`` and ``worker_build_id`` for a versioned worker; none for an unversioned one."""
    if versioned is None:
        return {}
    return {"worker_deployment_name": versioned.version.deployment_name, "worker_build_id": versioned.version.build_id}


class IncompatibleConverterError(ValueError):
    """A caller's data converter that ``AgentClientPlugin`` cannot combine with the service's without changing how
    payloads read: stored histories, the workers and the replayer would no longer agree."""


def combined(given: DataConverter | None, ours: DataConverter) -> DataConverter:
    """``ours`` (pydantic, and the codec and bucket the settings name) with what the caller's ``given`` adds: its
    codec, its external storage and anything else it sets, kept. A converter that would read payloads another way
    is refused by name (``IncompatibleConverterError``): another payload or failure converter, or a codec, or a
    bucket, where the settings already name one, since two would have to agree on an order no history records."""
    if given is None:
        return ours
    default = DataConverter.default
    if not issubclass(given.payload_converter_class, PydanticPayloadConverter) and (
        given.payload_converter_class is not DefaultPayloadConverter
    ):
        raise IncompatibleConverterError(
            f"the client's data converter uses {given.payload_converter_class.__qualname__} for payloads; the "
            "service's histories are pydantic's JSON (temporalio.contrib.pydantic): pass a converter with the "
            "default or pydantic payload converter, and keep a codec of your own in it"
        )
    if given.failure_converter_class is not default.failure_converter_class:
        raise IncompatibleConverterError(
            f"the client's data converter uses {given.failure_converter_class.__qualname__} for failures; the "
            "service's histories record failures with the default failure converter"
        )
    if given.payload_codec is not None and ours.payload_codec is not None:
        raise IncompatibleConverterError(
            "the client's data converter has a payload codec of its own, and AGENT_CODEC_KEYS sets the service's: "
            "use one (the service's encrypts payloads; unset AGENT_CODEC_KEYS to keep yours)"
        )
    if given.external_storage is not None and ours.external_storage is not None:
        raise IncompatibleConverterError(
            "the client's data converter stores large payloads externally, and AGENT_S3_BUCKET sets the "
            "service's: use one"
        )
    return dataclasses.replace(
        given,
        payload_converter_class=ours.payload_converter_class,
        payload_codec=given.payload_codec or ours.payload_codec,
        external_storage=given.external_storage or ours.external_storage,
    )


class AgentClientPlugin(SimplePlugin):
    """What every client of the service and its replayer share: the data converter ``ours`` (``data_converter``, or
    a worker's ``converter``), composed with the caller's (``combined``). A worker takes its client's converter, so
    the worker's plugin has none."""

    def __init__(self, ours: DataConverter) -> None:
        super().__init__("agent-worker.client", data_converter=lambda given: combined(given, ours))


class ClientTimeoutError(SystemExit):
    """A client's timeout at or above the attempt of the activity it runs in: the worker does not start, and says
    which (a ``SystemExit``, so every entry point stops with the sentence, as ``connect`` refuses)."""


def check_client_timeouts(settings: Settings, tools: Tools | None = None) -> None:
    """Every outside system's client gives up before the attempt of each activity it runs in: a slow answer then
    ends the attempt with a retryable error the activity reports, not an attempt Temporal gave up on while the call
    went on (a refund or an email that may still land). Every client is checked, in use or not, as any setting is;
    ``ClientTimeoutError`` names the setting, its value, and every activity whose attempt it does not fit, with the
    attempt. Which activities call the payment provider or the mail server is read from the tools' declarations
    (``tools``, the product's ``TOOLS`` unless given: ``Tools.calling``), so a tool declared is checked without being
    named here."""
    from activities.tools import TOOLS, Client  # noqa: PLC0415 - for workers alone
    from workflows import timeouts  # noqa: PLC0415

    tools = TOOLS if tools is None else tools
    clients = (
        ("AGENT_ANTHROPIC_TIMEOUT_SECONDS", settings.claude.timeout_seconds, ("think", "summarize")),
        ("AGENT_STRIPE_TIMEOUT_SECONDS", settings.stripe.timeout_seconds, tools.calling(Client.PAYMENT_PROVIDER)),
        ("AGENT_SMTP_TIMEOUT_SECONDS", settings.smtp.timeout_seconds, tools.calling(Client.MAIL_SERVER)),
    )
    for name, seconds, activities in clients:
        limits = [
            (a, timeouts.attempt(a, tools).get("start_to_close_timeout") or timeouts.LONGEST_ATTEMPT)
            for a in activities
        ]
        outlived = [(a, limit.total_seconds()) for a, limit in limits if seconds >= limit.total_seconds()]
        if outlived:
            (activity, attempt), *others = outlived
            nor = f" (nor below those of {', '.join(f'{a} ({t:g} s)' for a, t in others)})" if others else ""
            raise ClientTimeoutError(
                f"agent-worker cannot start: {name}={seconds:g} is not below the {activity} activity's attempt "
                f"(start_to_close_timeout {attempt:g} s){nor}: a call that slow would outlive the attempt it runs in"
            )


def grace_period(settings: Settings) -> timedelta:
    """How long a worker told to stop gives its activities in flight: ``AGENT_GRACEFUL_SHUTDOWN_SECONDS`` if set, else
    the longest attempt of any activity, so that a deploy never cuts a call short that the next worker would then
    make, and pay for, again."""
    from workflows import timeouts  # noqa: PLC0415 - for workers alone

    if settings.graceful_shutdown_seconds is not None:
        return timedelta(seconds=settings.graceful_shutdown_seconds)
    return timeouts.LONGEST_ATTEMPT


def build_activities(
    settings: Settings, business: Business, model: LanguageModel, *, blobs: BlobBackend, policy: PolicyInForce
) -> list[Callable[..., Any]]:
    """Every activity a worker runs, over the outside systems (``business``), the ``model``, the content store's
    ``blobs`` and the ``policy`` in force, each built once by the caller: ``agent-worker worker`` builds them from
    the settings (``agent_worker.cli.worker.serve``); the dev stack, the demo, the evals and the tests hand in their
    own business and model. No worker is built with a client's timeout that would outlive its activity's attempt
    (``check_client_timeouts``)."""
    from activities.audit_trail import AuditActivities  # noqa: PLC0415 - for workers alone, like all below
    from activities.content_store import ContentActivities, ContentStore  # noqa: PLC0415
    from activities.language_model import ModelActivities  # noqa: PLC0415
    from activities.policy_activities import PolicyActivities  # noqa: PLC0415
    from activities.reconciliation import Reconciliation  # noqa: PLC0415
    from activities.tool_activities import ToolActivities  # noqa: PLC0415

    check_client_timeouts(settings)
    content = ContentStore(blobs)
    tools = ToolActivities.over(
        business, content, in_force=policy.digest, inline_max_bytes=settings.inline_result_max_bytes
    )
    models = ModelActivities(model, business.model_calls, content)
    activities: list[Callable[..., Any]] = [
        models.think,
        models.summarize,
        ContentActivities(content).archive_records,
        *tools.all(),
        *Reconciliation.over(business).all(),
        *AuditActivities(business.audit).all(),
        *PolicyActivities(policy, business.audit, settings.web.approval_key_bytes()).all(),
    ]
    bucket = f"s3://{settings.s3.bucket}/{settings.s3.prefix}" if settings.s3.bucket else None
    log.info(
        "worker configured",
        task_queue=settings.task_queue,
        model=model.name,
        business_db=str(business),
        payments=str(business.payments),
        mail=str(business.mail),
        content_store=str(blobs),
        large_payloads=bucket,
        policy=policy.digest,
        policy_file=str(settings.policy_file) if settings.policy_file else None,
    )
    return activities


def workers_runner() -> WorkflowRunner:
    """How the product's workers run the workflow, and so how the replay gate replays it: outside the SDK's sandbox.
    Every module of ``workflows/`` but the workflow's own was passed through the sandbox already, and the sandbox's
    fresh import of that one module for each run cost a worker a fifth of its CPU a ticket (docs/benchmarks.md).
    What guards determinism instead, and where, is in docs/evals-and-replay.md."""
    return UnsandboxedWorkflowRunner()


PASSED_THROUGH = ("activities", "pydantic", "pydantic_core", "annotated_types")
"""What a sandboxed runner imports once per worker rather than once per run, where a team embedding the plugin
chooses the sandbox: the contracts and declarations the pieces use (deterministic, and guarded by the lint; the
pieces themselves are imported passed through by the workflow's module), and pydantic."""


def with_pass_throughs(runner: WorkflowRunner | None) -> WorkflowRunner:
    """The caller's runner, kept (the SDK's sandbox where none was chosen, as a worker would have): a sandboxed one
    gets ``PASSED_THROUGH`` added to what it passes through."""
    runner = runner or SandboxedWorkflowRunner()
    if isinstance(runner, SandboxedWorkflowRunner):
        restrictions = runner.restrictions.with_passthrough_modules(*PASSED_THROUGH)
        return dataclasses.replace(runner, restrictions=restrictions)
    return runner


class AgentWorkerPlugin(SimplePlugin):
    """What only a worker runs: the workflow, its ``activities`` (``build_activities``), the interceptor that puts
    each task's context in the logs, and its version (``deployment``, built once by the caller, which also tags the
    worker's metrics with it; None: unversioned). It sets no converter: the worker's client has the service's
    (``AgentClientPlugin``).

    It keeps the caller's workflow runner, as Temporal's own plugins do: the product's worker asks for
    ``workers_runner()`` (no sandbox), and a team that embeds the plugin under the SDK's sandbox keeps it, with the
    contracts and pydantic passed through (``with_pass_throughs``)."""

    def __init__(
        self, activities: Sequence[Callable[..., Any]], deployment: WorkerDeploymentConfig | None = None
    ) -> None:
        self.deployment = deployment
        super().__init__(
            "agent-worker.worker",
            workflows=self._workflows,
            activities=lambda given: [*(given or []), *activities],
            workflow_runner=with_pass_throughs,
        )

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        """A worker also gets the interceptor that puts each task's context in the logs, and its build id: as a
        version of the Worker Deployment ``AGENT_DEPLOYMENT`` names, or, unversioned, as a bare build id."""
        from agent_worker.logs import LogContextInterceptor  # noqa: PLC0415 - for workers alone

        config = super().configure_worker(config)
        if not (config.get("build_id") or config.get("deployment_config")):
            if self.deployment is None:
                config["build_id"] = build_id()
            else:
                config["deployment_config"] = self.deployment
        config["interceptors"] = [*config.get("interceptors", []), LogContextInterceptor()]
        return config

    def _workflows(self, given: Sequence[type] | None) -> Sequence[type]:
        from workflows.support_agent import SupportAgent  # noqa: PLC0415

        return [*(given or []), SupportAgent]
