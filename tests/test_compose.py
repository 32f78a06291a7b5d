"""The compose cluster, checked offline: no Docker engine runs on these machines, so CI validates the file
against the compose specification and checks what the schema cannot (references, pins, the image's user)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio.client import Client

from activities.contracts.names import SEARCH_ATTRIBUTES
from agent_worker import model_choice, wiring
from agent_worker.config import Settings
from agent_worker.worker import grace_period
from tests.support.processes import address, listening, spawn_worker, worker_env
from workflows import timeouts

ROOT = Path(__file__).resolve().parent.parent
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def test_the_compose_file_is_valid_against_the_compose_specification() -> None:
    check = Path(sys.executable).parent / "check-jsonschema"
    result = subprocess.run(
        [str(check), "--builtin-schema", "vendor.compose-spec", str(ROOT / "docker-compose.yml")],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_dependency_names_a_service_and_every_mounted_file_exists() -> None:
    for name, service in SERVICES.items():
        depends = service.get("depends_on", [])
        for target in depends if isinstance(depends, list) else depends.keys():
            assert target in SERVICES, f"{name} depends on missing service {target}"
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{name} mounts missing {source}"
            else:
                assert source in COMPOSE.get("volumes", {}), f"{name} uses undeclared volume {source}"


def test_every_variable_has_a_default_or_comes_from_the_env_file() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    for variable in re.findall(r"\$\{([^}]+)\}", text):
        assert ":-" in variable, f"${{{variable}}} has no default; secrets belong in .env, read by env_file"


def test_images_are_pinned_and_the_cluster_has_every_part() -> None:
    for name, service in SERVICES.items():
        image = service.get("image", "")
        assert ":" in image, f"{name} image {image!r} has no tag"
        assert not image.endswith(":latest"), f"{name} image {image!r} is not pinned"
    assert {"postgresql", "temporal", "temporal-ui", "register-search-attributes", "worker"} <= set(SERVICES)
    assert SERVICES["worker"]["deploy"]["replicas"] == 2
    assert "postgresql+psycopg://" in SERVICES["worker"]["environment"]["AGENT_DATABASE_URL"]
    assert SERVICES["worker"]["depends_on"]["register-search-attributes"] == {
        "condition": "service_completed_successfully"
    }


def instructions(dockerfile: str) -> list[tuple[str, str]]:
    """The Dockerfile's instructions of its last stage, continuation lines joined: (instruction, arguments)."""
    joined = re.sub(r"\\\n\s*", " ", dockerfile)
    lines = [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    parsed = [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "") for line in lines]
    last_stage = max(n for n, (kind, _) in enumerate(parsed) if kind == "FROM")
    return parsed[last_stage:]


def test_the_worker_image_runs_as_the_user_it_creates_and_holds_no_secrets() -> None:
    final = instructions(DOCKERFILE)
    (user,) = [args for kind, args in final if kind == "USER"]
    created = [args for kind, args in final if kind == "RUN" and "useradd" in args]
    assert user != "root"
    assert any(args.split()[-1] == user for args in created), (user, created)
    assert all(kind not in {"RUN", "COPY", "ADD"} for kind, _ in final[[k for k, _ in final].index("USER") :])
    environment = " ".join(args for kind, args in final if kind in {"ENV", "ARG"})
    assert not re.search(r"API_KEY|CODEC_KEYS|SECRET|PASSWORD", environment), environment
    assert ".env" in (ROOT / ".dockerignore").read_text().split()


async def test_the_images_health_check_passes_against_a_running_worker_and_fails_without_one(
    client: Client, tmp_path: Path
) -> None:
    """The image's HEALTHCHECK command, run as Docker would run it, against ``agent-worker worker`` on the metrics
    address the image sets (moved to a free port): healthy while the worker serves, unhealthy when it is gone."""
    final = instructions(DOCKERFILE)
    (check,) = [args for kind, args in final if kind == "HEALTHCHECK"]
    command: list[str] = json.loads(check[check.index("CMD") + 3 :])
    (bind,) = re.findall(r"AGENT_METRICS_BIND=(\S+)", " ".join(args for kind, args in final if kind == "ENV"))
    image_port = bind.rsplit(":", 1)[1]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    command = [part.replace(f":{image_port}", f":{port}") for part in command]
    command[0] = sys.executable if command[0] == "python" else command[0]

    def healthy() -> bool:
        return subprocess.run(command, capture_output=True, timeout=10, check=False).returncode == 0

    assert not healthy()
    settings = worker_env(address(client), f"health-{uuid.uuid4()}", tmp_path / "business.sqlite3",
                          AGENT_METRICS_BIND=f"127.0.0.1:{port}")  # fmt: skip
    worker = await spawn_worker(settings)
    try:
        await listening("127.0.0.1", int(port))
        assert await asyncio.to_thread(healthy)
    finally:
        worker.terminate()
        await worker.wait()
    assert not await asyncio.to_thread(healthy)


def test_docker_waits_for_the_workers_grace_period_before_it_kills_one() -> None:
    """A deploy is a pause: SIGTERM, the model call in flight finishes (up to the worker's grace period, the
    longest attempt), then the worker exits. Docker's SIGKILL must come later than that."""
    grace = grace_period(Settings()).total_seconds()
    stop = SERVICES["worker"]["stop_grace_period"]
    assert re.fullmatch(r"\d+s", stop), stop
    assert int(stop[:-1]) > grace >= timeouts.LONGEST_ATTEMPT.total_seconds()
    assert "AGENT_GRACEFUL_SHUTDOWN_SECONDS" not in SERVICES["worker"]["environment"]


def test_the_cluster_registers_every_search_attribute_the_workflow_sets() -> None:
    command = " ".join(SERVICES["register-search-attributes"]["command"])
    for name, kind in SEARCH_ATTRIBUTES.items():
        assert f"--name {name} --type {kind}" in command, f"{name} ({kind}) is not registered by the compose cluster"


def test_the_workers_mail_settings_come_from_the_environment_and_its_password_from_env_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Left unset, they are empty strings, which the settings read as unset: the embedded outbox, as before."""
    environment = SERVICES["worker"]["environment"]
    assert environment["AGENT_MAIL"] == "${AGENT_MAIL:-embedded}"
    assert {"AGENT_SMTP_HOST", "AGENT_SMTP_PORT", "AGENT_SMTP_SECURITY", "AGENT_MAIL_FROM"} <= set(environment)
    assert "AGENT_SMTP_PASSWORD" not in environment
    for name, value in environment.items():
        if "MAIL" in name or "SMTP" in name:
            monkeypatch.setenv(name, re.sub(r"\$\{[^:}]+:-([^}]*)\}", r"\1", value))  # as compose fills it in, unset

    assert wiring.mail_relay(Settings()) is None


def test_the_workers_stripe_settings_come_from_the_environment_and_its_key_from_env_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Left unset, they are empty strings, which the settings read as unset: the embedded provider, as before."""
    environment = SERVICES["worker"]["environment"]
    assert environment["AGENT_PAYMENTS"] == "${AGENT_PAYMENTS:-embedded}"
    assert "AGENT_STRIPE_API_BASE" in environment
    assert not {"STRIPE_API_KEY", "AGENT_STRIPE_API_KEY"} & set(environment)
    for name, value in environment.items():
        if "STRIPE" in name or "PAYMENTS" in name:
            monkeypatch.setenv(name, re.sub(r"\$\{[^:}]+:-([^}]*)\}", r"\1", value))  # as compose fills it in, unset

    assert wiring.stripe_client(Settings()) is None


def test_the_workers_run_claude_and_as_compose_fills_it_in_refuse_to_start_without_a_key(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Never the scripted stand-in by accident: it decides refunds by a script. The key goes in .env only."""
    environment = SERVICES["worker"]["environment"]
    assert environment["AGENT_MODEL_BACKEND"] == "${AGENT_MODEL_BACKEND:-claude}"
    assert not any(name.startswith("ANTHROPIC_") for name in environment)
    for name in list(os.environ):
        if name.startswith("ANTHROPIC_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))  # no Anthropic profile either
    for name in ("AGENT_MODEL_BACKEND", "AGENT_POLICY_FILE"):
        monkeypatch.setenv(name, re.sub(r"\$\{[^:}]+:-([^}]*)\}", r"\1", environment[name]))  # as compose fills it in

    settings = Settings()

    assert settings.policy_file is None  # left unset, the defaults
    with pytest.raises(model_choice.NoCredentialsError, match="AGENT_MODEL_BACKEND=claude, but no ANTHROPIC_API_KEY"):
        model_choice.require_model(settings)
