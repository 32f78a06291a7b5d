"""Which model a worker runs: Claude when the ``anthropic`` SDK finds credentials, the scripted stand-in only when
asked for (or on the dev stack, for a person trying the agent without a key), and otherwise a refusal to start,
since the script decides refunds for real. The one place Claude's settings reach the ``ClaudeModel``, for workers and
for the evals (``agent_worker.evals``), whose client talks to a local Messages API."""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from activities.pricing import price_of
from agent_worker.config import Settings

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

    from activities.business.model_calls import ModelCalls
    from activities.language_model import LanguageModel

log = structlog.get_logger(__name__)


class NoCredentialsError(RuntimeError):
    pass


NO_CREDENTIALS = (
    "no Anthropic credentials, and without them a script would decide refunds: set ANTHROPIC_API_KEY (or "
    "ANTHROPIC_AUTH_TOKEN, or an Anthropic profile) to run the agent on Claude, or AGENT_MODEL_BACKEND=scripted to "
    "run the scripted stand-in on purpose (tests and demonstrations)"
)


def anthropic_client(
    settings: Settings, *, base_url: str | None = None, api_key: str | None = None
) -> AsyncAnthropic | None:
    """The ``anthropic`` SDK's client, with its retries off (Temporal's retry policy is the only one), on the
    credentials and base URL of the SDK's own environment (``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``) unless
    given (the evals' local Messages API); None when none is configured."""
    # Importing the SDK takes seconds on a small machine; a worker that runs the script never pays for it.
    import anthropic  # noqa: PLC0415

    try:
        client = anthropic.AsyncAnthropic(
            max_retries=0, timeout=settings.claude.timeout_seconds, base_url=base_url, api_key=api_key
        )
    except anthropic.CredentialsError as error:
        # Credentials were configured (a profile, a config directory) but are broken: running the script
        # instead would hide that, and the script refunds for real.
        raise NoCredentialsError(f"Anthropic credentials are configured but cannot be used: {error}") from error
    return client if client.api_key or client.auth_token or client.credentials else None


def choose_model(settings: Settings, model_calls: ModelCalls, *, dev_stack: bool = False) -> LanguageModel:
    """Claude when the ``anthropic`` SDK finds credentials, the scripted stand-in when ``AGENT_MODEL_BACKEND=scripted``
    asks for it, and otherwise a refusal (``NoCredentialsError``), before any I/O: the script refunds for real. The one
    exception is the ``dev_stack`` (``agent-worker dev``, the demo), a person trying the agent on the demo orders,
    where the script stands in for a missing key, as the README's quick start needs. One Anthropic client at most is
    built, and the script only when it runs. The log says which model, and why; a worker on the script outside the
    dev stack warns at start and on every ticket."""
    if settings.claude.backend == "scripted":
        if dev_stack:
            log.info("model: the scripted stand-in", reason="AGENT_MODEL_BACKEND=scripted")
        else:
            log.warning(
                "model: the scripted stand-in, which decides refunds by a script and refunds for real; "
                "AGENT_MODEL_BACKEND=scripted is for tests and demonstrations",
                reason="AGENT_MODEL_BACKEND=scripted",
            )
        return scripted(settings, model_calls, dev_stack=dev_stack)
    client = anthropic_client(settings)
    if client is not None:
        return claude_model(settings, client)
    if settings.claude.backend == "claude":
        raise NoCredentialsError("AGENT_MODEL_BACKEND=claude, but no ANTHROPIC_API_KEY (or other credential)")
    if not dev_stack:
        raise NoCredentialsError(NO_CREDENTIALS)
    log.warning(
        "model: the scripted stand-in, because no Anthropic API key is configured; "
        "set ANTHROPIC_API_KEY to run the agent on Claude"
    )
    return scripted(settings, model_calls, dev_stack=dev_stack)


def scripted(settings: Settings, model_calls: ModelCalls, *, dev_stack: bool) -> LanguageModel:
    """The scripted stand-in, announcing itself on every ticket outside the dev stack."""
    from activities.scripted_model import ScriptedModel  # noqa: PLC0415

    return ScriptedModel(model_calls, think_seconds=settings.claude.scripted_think_seconds, announce=not dev_stack)


def claude_model(settings: Settings, client: AsyncAnthropic) -> LanguageModel:
    """Claude on ``client``, as the settings ask for it: the one place its settings reach it, for a worker and
    for the evals (``agent_worker.evals``), whose client talks to a local Messages API."""
    from activities.claude_model import ClaudeModel  # noqa: PLC0415

    if price_of(settings.claude.model, settings.claude.prices) is None:
        log.warning(
            "no price for this model: its calls are priced at the dearest known model's", model=settings.claude.model
        )
    log.info("model: Claude", model=settings.claude.model, base_url=str(client.base_url))
    return ClaudeModel(
        client,
        model=settings.claude.model,
        max_tokens=settings.claude.max_tokens,
        temperature=settings.claude.temperature,
        system_prompt=settings.claude.system_prompt,
        prices=settings.claude.prices,
    )
