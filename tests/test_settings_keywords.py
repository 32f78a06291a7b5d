"""Code names a concern's settings in its nested model; the environment names them as 1.1.0 did."""

from __future__ import annotations

import re

import pytest

from agent_worker.config import Settings
from agent_worker.config.mail_settings import SmtpSettings


@pytest.mark.parametrize(
    "flat",
    [
        "smtp_host",
        "mail",
        "stripe_api_key",
        "model_backend",
        "anthropic_timeout_seconds",
        "codec_keys",
        "blobs_accept_plaintext",
        "web_users",
        "deployment",
    ],
)
def test_a_concerns_setting_named_flat_in_code_as_1_1_0_took_it_is_refused_not_dropped(flat: str) -> None:
    """Refused since 1.2.0, which named the nested field to give; three releases on, as any keyword no field holds."""
    with pytest.raises(TypeError, match=re.escape(f"{flat}= is no setting")):
        Settings(**{flat: "x"})


def test_a_keyword_no_setting_holds_is_refused_not_dropped() -> None:
    with pytest.raises(TypeError, match="faults_dir= is no setting"):
        Settings(faults_dir="x")


def test_a_nested_concern_reads_its_other_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_SMTP_PORT", "2525")
    settings = Settings(smtp=SmtpSettings(host="mail.example.com"))
    assert (settings.smtp.host, settings.smtp.port) == ("mail.example.com", 2525)


def test_the_environment_names_every_concerns_settings_as_1_1_0_did(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "AGENT_MAIL": "smtp",
        "AGENT_MAIL_FROM": "Support <support@example.com>",
        "AGENT_SMTP_HOST": "mail.example.com",
        "AGENT_PAYMENTS": "stripe",
        "STRIPE_API_KEY": "sk_test_1",
        "AGENT_STRIPE_TIMEOUT_SECONDS": "5",
        "AGENT_MODEL_BACKEND": "scripted",
        "AGENT_ANTHROPIC_MAX_TOKENS": "100",
        "AGENT_BLOBS_ACCEPT_PLAINTEXT": "true",
        "AGENT_CODEC_SERVER_ORIGIN": "http://ui.example",
        "AGENT_WEB_AUDITORS": '["ann"]',
        "AGENT_DEPLOYMENT": "support-agent",
        "AGENT_BUILD_ID": "v2",
        "AGENT_S3_PREFIX": "agent/",
        "AGENT_SMTP__HOST": "not.read.example",  # a name no release reads is ignored, as it always was
    }.items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert (settings.smtp.mail, settings.smtp.host) == ("smtp", "mail.example.com")
    assert settings.stripe.api_key is not None
    assert (settings.stripe.payments, settings.stripe.api_key.get_secret_value()) == ("stripe", "sk_test_1")
    assert settings.stripe.timeout_seconds == 5
    assert (settings.claude.backend, settings.claude.max_tokens) == ("scripted", 100)
    assert settings.codec.blobs_accept_plaintext
    assert settings.codec_server.origin == "http://ui.example"
    assert settings.web.auditors == ["ann"]
    assert (settings.versioning.deployment, settings.versioning.build_id) == ("support-agent", "v2")
    assert settings.s3.prefix == "agent/"
