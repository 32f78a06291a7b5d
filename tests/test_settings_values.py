"""Settings are values, read as pydantic-settings reads them: every variable 1.x documented is read under its name,
the operator's contract, and an empty one is a variable left unset (``env_ignore_empty``: compose passes an unset
variable as ``""``), whatever its type; the policy file is read where a program acts on it, not by the settings."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agent_worker import wiring
from agent_worker.config import Settings
from agent_worker.config.concern import Concern
from agent_worker.passwords import hash_password

DOCUMENTED_IN_1_X = [
    "AGENT_ANTHROPIC_MAX_TOKENS",
    "AGENT_ANTHROPIC_MODEL",
    "AGENT_ANTHROPIC_PRICES",
    "AGENT_ANTHROPIC_SYSTEM_PROMPT",
    "AGENT_ANTHROPIC_TEMPERATURE",
    "AGENT_ANTHROPIC_TIMEOUT_SECONDS",
    "AGENT_APPROVERS",
    "AGENT_BLOBS_ACCEPT_PLAINTEXT",
    "AGENT_BUILD_ID",
    "AGENT_CODEC_KEYS",
    "AGENT_CODEC_KEY_ID",
    "AGENT_CODEC_SERVER_ALGORITHMS",
    "AGENT_CODEC_SERVER_AUDIENCE",
    "AGENT_CODEC_SERVER_ISSUER",
    "AGENT_CODEC_SERVER_JWKS_URL",
    "AGENT_CODEC_SERVER_ORIGIN",
    "AGENT_CODEC_SERVER_TOKEN",
    "AGENT_DATABASE_URL",
    "AGENT_DATA_DIR",
    "AGENT_DB_PATH",
    "AGENT_DEPLOYMENT",
    "AGENT_GRACEFUL_SHUTDOWN_SECONDS",
    "AGENT_IDEMPOTENCY_KEY_TTL_HOURS",
    "AGENT_INLINE_RESULT_MAX_BYTES",
    "AGENT_LOG_FORMAT",
    "AGENT_LOG_LEVEL",
    "AGENT_MAIL",
    "AGENT_MAIL_FROM",
    "AGENT_MAIL_IN_ALLOW_NETWORK",
    "AGENT_MAIL_IN_ANSWER_WITHIN_SECONDS",
    "AGENT_MAIL_IN_AUTHSERV_ID",
    "AGENT_MAIL_IN_HOST",
    "AGENT_MAIL_IN_MAX_HEADER_CHARS",
    "AGENT_MAIL_IN_MAX_MESSAGE_BYTES",
    "AGENT_MAIL_IN_MAX_PARTS",
    "AGENT_MAIL_IN_PORT",
    "AGENT_MAIL_IN_PROTOCOL",
    "AGENT_MAIL_IN_REPLY_WINDOW_SECONDS",
    "AGENT_MAIL_REPLY_KEY",
    "AGENT_MAX_CACHED_WORKFLOWS",
    "AGENT_MAX_CONCURRENT_WORKFLOW_TASKS",
    "AGENT_METRICS_BIND",
    "AGENT_MODEL_BACKEND",
    "AGENT_PAYMENTS",
    "AGENT_POLICY_FILE",
    "AGENT_REQUIRE_ENCRYPTED_INPUT",
    "AGENT_S3_BUCKET",
    "AGENT_S3_ENDPOINT_URL",
    "AGENT_S3_PAYLOAD_THRESHOLD_BYTES",
    "AGENT_S3_PREFIX",
    "AGENT_S3_REGION",
    "AGENT_SCRIPTED_THINK_SECONDS",
    "AGENT_SMTP_CA_FILE",
    "AGENT_SMTP_HOST",
    "AGENT_SMTP_PASSWORD",
    "AGENT_SMTP_PORT",
    "AGENT_SMTP_SECURITY",
    "AGENT_SMTP_TIMEOUT_SECONDS",
    "AGENT_SMTP_USERNAME",
    "AGENT_STICKY_QUEUE_TIMEOUT_SECONDS",
    "AGENT_STRIPE_API_BASE",
    "AGENT_STRIPE_TIMEOUT_SECONDS",
    "AGENT_TASK_QUEUE",
    "AGENT_TRACING",
    "AGENT_WEB_APPROVAL_KEYS",
    "AGENT_WEB_AUDITORS",
    "AGENT_WEB_BASE_PATH",
    "AGENT_WEB_CONFIRM_ABOVE_CENTS",
    "AGENT_WEB_HOST",
    "AGENT_WEB_PORT",
    "AGENT_WEB_PROXY_HEADER",
    "AGENT_WEB_PUBLIC_URL",
    "AGENT_WEB_SESSION_HOURS",
    "AGENT_WEB_SESSION_IDLE_MINUTES",
    "AGENT_WEB_TRUSTED_PROXIES",
    "AGENT_WEB_USERS",
    "STRIPE_API_KEY",
]
"""Every setting docs/ and the README of 1.4.0 name (test-only variables aside), frozen here: a name that leaves the
docs stays the operator's contract."""

KEY = base64.b64encode(bytes(range(32))).decode()
SMTP = {"AGENT_MAIL": "smtp", "AGENT_SMTP_HOST": "mail.example.com", "AGENT_MAIL_FROM": "Support <s@example.com>"}
JWT = {
    "AGENT_CODEC_SERVER_JWKS_URL": "https://login.example.com/jwks.json",
    "AGENT_CODEC_SERVER_AUDIENCE": "temporal-ui",
    "AGENT_CODEC_SERVER_ISSUER": "https://login.example.com/",
}
PROXY = {
    "AGENT_WEB_PROXY_HEADER": "X-Forwarded-Email",
    "AGENT_WEB_TRUSTED_PROXIES": '["127.0.0.1"]',
    "AGENT_WEB_PUBLIC_URL": "https://inbox.example.com",
}

SAMPLES: dict[str, dict[str, str]] = {
    "AGENT_ANTHROPIC_MAX_TOKENS": {"AGENT_ANTHROPIC_MAX_TOKENS": "100"},
    "AGENT_ANTHROPIC_MODEL": {"AGENT_ANTHROPIC_MODEL": "claude-haiku-4-5"},
    "AGENT_ANTHROPIC_PRICES": {
        "AGENT_ANTHROPIC_PRICES": '{"m": {"input": 1, "output": 2, "cache_write": 1, "cache_read": 0.1}}'
    },
    "AGENT_ANTHROPIC_SYSTEM_PROMPT": {"AGENT_ANTHROPIC_SYSTEM_PROMPT": "Be brief."},
    "AGENT_ANTHROPIC_TEMPERATURE": {"AGENT_ANTHROPIC_TEMPERATURE": "0.5"},
    "AGENT_ANTHROPIC_TIMEOUT_SECONDS": {"AGENT_ANTHROPIC_TIMEOUT_SECONDS": "30"},
    "AGENT_APPROVERS": {"AGENT_APPROVERS": '["ann"]'},
    "AGENT_BLOBS_ACCEPT_PLAINTEXT": {"AGENT_BLOBS_ACCEPT_PLAINTEXT": "true"},
    "AGENT_BUILD_ID": {"AGENT_DEPLOYMENT": "support-agent", "AGENT_BUILD_ID": "v2"},
    "AGENT_CODEC_KEYS": {"AGENT_CODEC_KEYS": json.dumps({"k1": KEY})},
    "AGENT_CODEC_KEY_ID": {"AGENT_CODEC_KEY_ID": "k1"},
    "AGENT_CODEC_SERVER_ALGORITHMS": {"AGENT_CODEC_SERVER_ALGORITHMS": '["ES256"]'},
    "AGENT_CODEC_SERVER_AUDIENCE": JWT,
    "AGENT_CODEC_SERVER_ISSUER": JWT,
    "AGENT_CODEC_SERVER_JWKS_URL": JWT,
    "AGENT_CODEC_SERVER_ORIGIN": {"AGENT_CODEC_SERVER_ORIGIN": "http://ui.example"},
    "AGENT_CODEC_SERVER_TOKEN": {"AGENT_CODEC_SERVER_TOKEN": "t" * 32},
    "AGENT_DATABASE_URL": {"AGENT_DATABASE_URL": "postgresql+psycopg://agent@db/business"},
    "AGENT_DATA_DIR": {"AGENT_DATA_DIR": "/var/lib/agent"},
    "AGENT_DB_PATH": {"AGENT_DB_PATH": "/var/lib/agent/b.sqlite3"},
    "AGENT_DEPLOYMENT": {"AGENT_DEPLOYMENT": "support-agent"},
    "AGENT_GRACEFUL_SHUTDOWN_SECONDS": {"AGENT_GRACEFUL_SHUTDOWN_SECONDS": "30"},
    "AGENT_IDEMPOTENCY_KEY_TTL_HOURS": {"AGENT_IDEMPOTENCY_KEY_TTL_HOURS": "48"},
    "AGENT_INLINE_RESULT_MAX_BYTES": {"AGENT_INLINE_RESULT_MAX_BYTES": "1024"},
    "AGENT_LOG_FORMAT": {"AGENT_LOG_FORMAT": "console"},
    "AGENT_LOG_LEVEL": {"AGENT_LOG_LEVEL": "DEBUG"},
    "AGENT_MAIL": SMTP,
    "AGENT_MAIL_FROM": {"AGENT_MAIL_FROM": "Support <s@example.com>"},
    "AGENT_MAIL_IN_ALLOW_NETWORK": {"AGENT_MAIL_IN_ALLOW_NETWORK": "true"},
    "AGENT_MAIL_IN_ANSWER_WITHIN_SECONDS": {"AGENT_MAIL_IN_ANSWER_WITHIN_SECONDS": "60"},
    "AGENT_MAIL_IN_AUTHSERV_ID": {"AGENT_MAIL_IN_AUTHSERV_ID": "mx.desk.example"},
    "AGENT_MAIL_IN_HOST": {"AGENT_MAIL_IN_HOST": "127.0.0.2"},
    "AGENT_MAIL_IN_MAX_HEADER_CHARS": {"AGENT_MAIL_IN_MAX_HEADER_CHARS": "4096"},
    "AGENT_MAIL_IN_MAX_MESSAGE_BYTES": {"AGENT_MAIL_IN_MAX_MESSAGE_BYTES": "1000000"},
    "AGENT_MAIL_IN_MAX_PARTS": {"AGENT_MAIL_IN_MAX_PARTS": "5"},
    "AGENT_MAIL_IN_PORT": {"AGENT_MAIL_IN_PORT": "2424"},
    "AGENT_MAIL_IN_PROTOCOL": {"AGENT_MAIL_IN_PROTOCOL": "smtp"},
    "AGENT_MAIL_IN_REPLY_WINDOW_SECONDS": {"AGENT_MAIL_IN_REPLY_WINDOW_SECONDS": "3600"},
    "AGENT_MAIL_REPLY_KEY": {"AGENT_MAIL_FROM": "s@example.com", "AGENT_MAIL_REPLY_KEY": "r" * 32},
    "AGENT_MAX_CACHED_WORKFLOWS": {"AGENT_MAX_CACHED_WORKFLOWS": "50"},
    "AGENT_MAX_CONCURRENT_WORKFLOW_TASKS": {"AGENT_MAX_CONCURRENT_WORKFLOW_TASKS": "5"},
    "AGENT_METRICS_BIND": {"AGENT_METRICS_BIND": "0.0.0.0:9464"},
    "AGENT_MODEL_BACKEND": {"AGENT_MODEL_BACKEND": "claude"},
    "AGENT_PAYMENTS": {"AGENT_PAYMENTS": "stripe", "STRIPE_API_KEY": "sk_test_1"},
    "AGENT_POLICY_FILE": {"AGENT_POLICY_FILE": "/etc/agent-worker/policy.toml"},
    "AGENT_REQUIRE_ENCRYPTED_INPUT": {"AGENT_REQUIRE_ENCRYPTED_INPUT": "true"},
    "AGENT_S3_BUCKET": {"AGENT_S3_BUCKET": "tickets"},
    "AGENT_S3_ENDPOINT_URL": {"AGENT_S3_ENDPOINT_URL": "http://minio:9000"},
    "AGENT_S3_PAYLOAD_THRESHOLD_BYTES": {"AGENT_S3_PAYLOAD_THRESHOLD_BYTES": "0"},
    "AGENT_S3_PREFIX": {"AGENT_S3_PREFIX": "agent"},
    "AGENT_S3_REGION": {"AGENT_S3_REGION": "eu-west-1"},
    "AGENT_SCRIPTED_THINK_SECONDS": {"AGENT_SCRIPTED_THINK_SECONDS": "1.5"},
    "AGENT_SMTP_CA_FILE": {"AGENT_SMTP_CA_FILE": "/etc/ssl/desk-ca.pem"},
    "AGENT_SMTP_HOST": {"AGENT_SMTP_HOST": "mail.example.com"},
    "AGENT_SMTP_PASSWORD": {"AGENT_SMTP_USERNAME": "desk", "AGENT_SMTP_PASSWORD": "secret"},
    "AGENT_SMTP_PORT": {"AGENT_SMTP_PORT": "2525"},
    "AGENT_SMTP_SECURITY": {"AGENT_SMTP_SECURITY": "tls"},
    "AGENT_SMTP_TIMEOUT_SECONDS": {"AGENT_SMTP_TIMEOUT_SECONDS": "5"},
    "AGENT_SMTP_USERNAME": {"AGENT_SMTP_USERNAME": "desk", "AGENT_SMTP_PASSWORD": "secret"},
    "AGENT_STICKY_QUEUE_TIMEOUT_SECONDS": {"AGENT_STICKY_QUEUE_TIMEOUT_SECONDS": "5"},
    "AGENT_STRIPE_API_BASE": {"AGENT_STRIPE_API_BASE": "https://stripe-proxy.example.com"},
    "AGENT_STRIPE_TIMEOUT_SECONDS": {"AGENT_STRIPE_TIMEOUT_SECONDS": "5"},
    "AGENT_TASK_QUEUE": {"AGENT_TASK_QUEUE": "support-agent-eu"},
    "AGENT_TRACING": {"AGENT_TRACING": "true"},
    "AGENT_WEB_APPROVAL_KEYS": {"AGENT_WEB_APPROVAL_KEYS": json.dumps(["a" * 32])},
    "AGENT_WEB_AUDITORS": {"AGENT_WEB_AUDITORS": '["carol"]'},
    "AGENT_WEB_BASE_PATH": {"AGENT_WEB_BASE_PATH": "/inbox"},
    "AGENT_WEB_CONFIRM_ABOVE_CENTS": {"AGENT_WEB_CONFIRM_ABOVE_CENTS": "100"},
    "AGENT_WEB_HOST": {"AGENT_WEB_HOST": "0.0.0.0"},
    "AGENT_WEB_PORT": {"AGENT_WEB_PORT": "8099"},
    "AGENT_WEB_PROXY_HEADER": PROXY,
    "AGENT_WEB_PUBLIC_URL": {"AGENT_WEB_PUBLIC_URL": "https://inbox.example.com"},
    "AGENT_WEB_SESSION_HOURS": {"AGENT_WEB_SESSION_HOURS": "8"},
    "AGENT_WEB_SESSION_IDLE_MINUTES": {"AGENT_WEB_SESSION_IDLE_MINUTES": "10"},
    "AGENT_WEB_TRUSTED_PROXIES": {"AGENT_WEB_TRUSTED_PROXIES": '["10.0.0.0/8"]'},
    "AGENT_WEB_USERS": {"AGENT_WEB_USERS": json.dumps({"ann": hash_password("correct horse battery")})},
    "STRIPE_API_KEY": {"STRIPE_API_KEY": "sk_test_2"},
}


def variables() -> dict[str, tuple[str, str]]:
    """Each variable the settings read, by name: the concern (``""`` for ``Settings`` itself) and the field."""
    found: dict[str, tuple[str, str]] = {}
    for name, field in Settings.model_fields.items():
        concern = field.annotation
        if isinstance(concern, type) and issubclass(concern, Concern):
            prefix = str(concern.model_config.get("env_prefix", ""))
            for inner, setting in concern.model_fields.items():
                alias = setting.validation_alias
                found[(alias if isinstance(alias, str) else prefix + inner).upper()] = (name, inner)
        else:
            found[f"AGENT_{name}".upper()] = ("", name)
    return found


def value_of(settings: Settings, where: tuple[str, str]) -> Any:
    concern, name = where
    holder: BaseModel = getattr(settings, concern) if concern else settings
    return getattr(holder, name)


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No AGENT_* or Stripe variable but the test's, and no ``.env`` file."""
    for name in list(os.environ):
        if name.startswith("AGENT_") or name == "STRIPE_API_KEY":
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return monkeypatch


def test_every_variable_1_x_documented_is_still_read_and_every_one_read_is_documented() -> None:
    assert set(DOCUMENTED_IN_1_X) == set(variables())
    assert set(SAMPLES) == set(DOCUMENTED_IN_1_X)


@pytest.mark.parametrize("name", DOCUMENTED_IN_1_X)
def test_each_documented_variable_sets_its_setting(name: str, clean_environment: pytest.MonkeyPatch) -> None:
    where = variables()[name]
    default = value_of(Settings(), where)
    for variable, value in SAMPLES[name].items():
        clean_environment.setenv(variable, value)
    assert value_of(Settings(), where) != default, f"{name}={SAMPLES[name][name]} changed nothing"


@pytest.mark.parametrize("name", DOCUMENTED_IN_1_X)
def test_an_empty_variable_is_one_left_unset_whatever_its_type(
    name: str, clean_environment: pytest.MonkeyPatch
) -> None:
    """As compose passes ``${AGENT_SMTP_PORT:-}`` for a variable the operator left out: a number, a list, a secret
    or a path read from ``""`` is the default, not a refusal nor a setting of nothing."""
    unset = Settings().model_dump()
    clean_environment.setenv(name, "")
    assert Settings().model_dump() == unset


def test_settings_hold_the_policy_files_name_and_the_program_that_acts_on_it_reads_it(
    clean_environment: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Reading settings reads no file: the worker, the dev stack, the demo and ``policy show`` read the policy where
    they start (``wiring.money_policy``), and refuse a bad one there, naming the variable (exit 2)."""
    broken = tmp_path / "policy.toml"
    broken.write_text("[limits]\ncustomer_cents_per_day = -100\n")
    clean_environment.setenv("AGENT_POLICY_FILE", str(broken))

    settings = Settings()

    assert settings.policy_file == broken
    with pytest.raises(wiring.PolicyRefusedError, match=r"AGENT_POLICY_FILE .*customer_cents_per_day") as refused:
        wiring.money_policy(settings)
    assert refused.value.exit_code == 2
    broken.write_text("[approval]\nlimit_cents = 1000\n")
    assert wiring.money_policy(settings).approval.limit_cents == 1000, "read as the program starts, not before"
