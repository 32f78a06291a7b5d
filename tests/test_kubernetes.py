"""``deploy/kubernetes/``, checked offline: no cluster runs on these machines. Every manifest against the Kubernetes
API's own schemas (``kubernetes-validate`` bundles them), the example overlay as kustomize builds it (kubectl's
built-in kustomize), and what no schema knows: that every variable a manifest sets is one the product reads, that
secrets come only from Secrets, that the grace period, probes and ports agree with the code, that the pods run as
the image's user, and that two builds of the workers side by side share no pods."""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]  # the package ships no type information
import pytest
import sqlalchemy as sa
import yaml
from pydantic import SecretStr, ValidationError
from temporalio.client import Client
from temporalio.envconfig import ClientConfig

from activities import migrations
from activities.business import Business
from agent_worker import model_choice, wiring
from agent_worker.cli import main as cli
from agent_worker.cli.devserver import free_port
from agent_worker.config import Settings
from agent_worker.config.concern import Concern
from agent_worker.wiring import check_client_timeouts, grace_period
from tests.support import images
from tests.support.processes import AGENT_WORKER, address, listening, run, spawn_worker, worker_env
from tests.support.stores import postgres_available
from tests.support.waits import poll
from workflows import timeouts

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parent.parent
KUBERNETES = ROOT / "deploy" / "kubernetes"
EXAMPLE = KUBERNETES / "overlays" / "example"
KUBERNETES_VERSIONS = ("1.32", "1.37")
"""The oldest release the manifests are written for (kubectl on these machines is 1.32) and the newest whose
schemas ``kubernetes-validate`` bundles."""
KUBECTL = shutil.which("kubectl")
needs_kustomize = pytest.mark.skipif(KUBECTL is None, reason="kubectl, whose built-in kustomize builds overlays")

OUTSIDE_SETTINGS = {
    "ANTHROPIC_API_KEY": "the anthropic SDK's own",
    "TEMPORAL_ADDRESS": "Temporal's environment configuration (temporalio.envconfig)",
    "TEMPORAL_NAMESPACE": "Temporal's environment configuration",
    "TEMPORAL_API_KEY": "Temporal's environment configuration",
}
"""Variables the manifests may set that no ``Settings`` field reads, and who reads them instead."""
SECRETS = {"ANTHROPIC_API_KEY", "TEMPORAL_API_KEY", "AGENT_DATABASE_URL"}
"""Beside every ``SecretStr`` setting, what must come from a Secret: credentials, and a URL that carries one."""
DOCUMENTED_MIGRATION = "-l 'app.kubernetes.io/component in (config,migrate)'"
"""How docs/kubernetes.md applies the migration Job before anything else: the labels it selects."""

Resource = dict[str, Any]


def documents(path: Path) -> list[Resource]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def manifest_files() -> list[Path]:
    return sorted(path for path in KUBERNETES.rglob("*.yaml") if path.name != "kustomization.yaml")


def sources() -> list[Resource]:
    """Every object as written, before an overlay changes it."""
    return [document for path in manifest_files() for document in documents(path)]


def kustomize(directory: Path) -> list[Resource]:
    assert KUBECTL is not None
    built = subprocess.run(
        [KUBECTL, "kustomize", str(directory)], capture_output=True, text=True, check=False, timeout=60
    )
    assert built.returncode == 0, built.stderr
    return [document for document in yaml.safe_load_all(built.stdout) if document]


def of_kind(resources: list[Resource], kind: str) -> list[Resource]:
    return [resource for resource in resources if resource["kind"] == kind]


def named(resources: list[Resource], kind: str, name: str) -> Resource:
    (found,) = [resource for resource in of_kind(resources, kind) if resource["metadata"]["name"] == name]
    return found


def pod_templates(resources: list[Resource]) -> Iterator[tuple[Resource, Resource]]:
    """Each Deployment or Job with its pod template."""
    for resource in resources:
        if resource["kind"] in {"Deployment", "Job"}:
            yield resource, resource["spec"]["template"]


def containers(resources: list[Resource]) -> Iterator[tuple[Resource, Resource]]:
    for owner, template in pod_templates(resources):
        for container in template["spec"]["containers"]:
            yield owner, container


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return selector.items() <= labels.items()


def setting_variables() -> set[str]:
    """Every environment variable ``Settings`` reads: ``AGENT_<field>`` for its own fields, and each concern's by its
    prefix, or by the full name a field's alias gives."""
    names: set[str] = set()
    for name, field in Settings.model_fields.items():
        concern = field.annotation
        if not (isinstance(concern, type) and issubclass(concern, Concern)):
            names.add(f"AGENT_{name}".upper())
            continue
        prefix = str(concern.model_config.get("env_prefix", ""))
        for inner, inner_field in concern.model_fields.items():
            alias = inner_field.validation_alias
            names.add(alias if isinstance(alias, str) else f"{prefix}{inner}".upper())
    return names


def secret_settings() -> set[str]:
    """The settings typed as secrets (``SecretStr``, alone or in a list or mapping)."""
    secret = {str(SecretStr), "SecretStr"}
    found: set[str] = set()
    for name, field in Settings.model_fields.items():
        concern = field.annotation
        if isinstance(concern, type) and issubclass(concern, Concern):
            prefix = str(concern.model_config.get("env_prefix", ""))
            for inner, inner_field in concern.model_fields.items():
                if any(kind in str(inner_field.annotation) for kind in secret):
                    alias = inner_field.validation_alias
                    found.add(alias if isinstance(alias, str) else f"{prefix}{inner}".upper())
        elif any(kind in str(field.annotation) for kind in secret):
            found.add(f"AGENT_{name}".upper())
    return found


def config_maps(resources: list[Resource]) -> dict[str, dict[str, str]]:
    return {resource["metadata"]["name"]: resource.get("data", {}) for resource in of_kind(resources, "ConfigMap")}


def environment(container: Resource, resources: list[Resource], secret: str = "secret") -> dict[str, str]:
    """The container's environment as its pod gets it: its ConfigMaps' keys, then its own variables (which win), a
    Secret's key read as ``secret``, or left out where the key is optional."""
    maps = config_maps(resources)
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        env.update(maps[source["configMapRef"]["name"]])
    for variable in container.get("env", []):
        if "value" in variable:
            env[variable["name"]] = variable["value"]
        elif not variable["valueFrom"]["secretKeyRef"].get("optional", False):
            env[variable["name"]] = secret
    return env


def every_variable(container: Resource, resources: list[Resource]) -> dict[str, str]:
    """Each variable the container may get, and where from: ``config``, ``value`` or ``secret``."""
    maps = config_maps(resources)
    found = {key: "config" for source in container.get("envFrom", []) for key in maps[source["configMapRef"]["name"]]}
    for variable in container.get("env", []):
        found[variable["name"]] = "value" if "value" in variable else "secret"
    return found


def mounted_policy(container: Resource, template: Resource, resources: list[Resource], tmp_path: Path) -> Path:
    """The policy file the container reads, written where a test can read it: the ConfigMap key mounted at
    AGENT_POLICY_FILE."""
    wanted = PurePosixPath(environment(container, resources)["AGENT_POLICY_FILE"])
    (mount,) = [m for m in container.get("volumeMounts", []) if PurePosixPath(m["mountPath"]) == wanted.parent]
    (volume,) = [v for v in template["spec"]["volumes"] if v["name"] == mount["name"]]
    data = config_maps(resources)[volume["configMap"]["name"]]
    assert wanted.name in data, f"{volume['configMap']['name']} has no {wanted.name} for AGENT_POLICY_FILE"
    local = tmp_path / f"{uuid.uuid4()}.toml"
    local.write_text(data[wanted.name])
    return local


def settings_of(container: Resource, template: Resource, resources: list[Resource], tmp_path: Path) -> Settings:
    """``Settings`` as the container's process reads them, its policy file mounted, secrets made up."""
    env = environment(container, resources, secret="x" * 40)
    if "AGENT_POLICY_FILE" in env:
        env["AGENT_POLICY_FILE"] = str(mounted_policy(container, template, resources, tmp_path))
    if "AGENT_WEB_APPROVAL_KEYS" in env:
        env["AGENT_WEB_APPROVAL_KEYS"] = f'["{"k" * 40}"]'
    if "AGENT_CODEC_KEYS" in env:
        env["AGENT_CODEC_KEYS"] = '{"k1": "' + "a" * 43 + '="}'
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith(("AGENT_", "ANTHROPIC_", "TEMPORAL_")):
                patch.delenv(name)
        for name, value in env.items():
            patch.setenv(name, value)
        patch.chdir(tmp_path)  # no developer's .env
        return Settings()


def container_of(resources: list[Resource], component: str) -> tuple[Resource, Resource]:
    """The one pod template and its one container of a component (worker, inbox, codec-server, migrate)."""
    (found,) = [
        (template, template["spec"]["containers"][0])
        for _, template in pod_templates(resources)
        if template["metadata"]["labels"]["app.kubernetes.io/component"] == component
    ]
    return found


def port_named(container: Resource, port: str | int) -> int:
    if isinstance(port, int):
        assert port in [p["containerPort"] for p in container["ports"]], (port, container["ports"])
        return port
    (number,) = [p["containerPort"] for p in container["ports"] if p["name"] == port]
    return int(number)


def image_uid() -> int:
    """The uid the project's image creates and runs as (``useradd --uid N``)."""
    (uid,) = re.findall(r"useradd\b[^\n]*--uid (\d+)", (ROOT / "Dockerfile").read_text())
    return int(uid)


def project_version() -> str:
    """This release, as ``agent-worker --version`` says it."""
    return importlib.metadata.version("agent-worker")


# --- the schemas and kustomize -----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_manifest_is_valid_against_the_kubernetes_schemas_strictly(version: str) -> None:
    """Strict: a misspelt field (``readinesProbe``) is refused, not ignored as a cluster would ignore it. A kind
    the schemas do not know fails too, rather than pass unchecked as the CLI's warning would let it."""
    for path in manifest_files():
        for resource in documents(path):
            try:
                kubernetes_validate.validate(resource, version, strict=True)
            except (kubernetes_validate.ValidationError, kubernetes_validate.SchemaNotFoundError) as error:
                where = ".".join(str(part) for part in getattr(error, "path", []))
                raise AssertionError(f"{path.relative_to(ROOT)}: {resource['kind']} at {where}: {error}") from None


def test_every_kustomization_lists_every_file_beside_it_and_the_example_overlay_reaches_them_all() -> None:
    reached: set[Path] = set()

    def visit(directory: Path) -> None:
        kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
        listed = [directory / entry for entry in kustomization.get("resources", [])]
        files = {path.resolve() for path in listed if path.is_file()}
        beside = {path.resolve() for path in directory.glob("*.yaml") if path.name != "kustomization.yaml"}
        assert files == beside, f"{directory.relative_to(ROOT)} lists {files ^ beside} wrongly"
        reached.update(files)
        for entry in [*listed, *(directory / c for c in kustomization.get("components", []))]:
            if not entry.is_file():
                assert (entry / "kustomization.yaml").exists(), f"{entry} is neither a file nor a kustomization"
                visit(entry)

    visit(EXAMPLE)
    assert reached == {path.resolve() for path in manifest_files()}


@needs_kustomize
@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_the_example_overlay_builds_and_what_it_builds_is_valid(version: str) -> None:
    built = kustomize(EXAMPLE)
    for resource in built:
        kubernetes_validate.validate(resource, version, strict=True)
        if resource["kind"] != "Namespace":
            assert resource["metadata"]["namespace"] == "support-desk", resource["metadata"]
    assert {r["kind"] for r in built} >= {"Deployment", "Job", "Service", "HorizontalPodAutoscaler", "Ingress"}


# --- settings and secrets -------------------------------------------------------------------------------------------


def test_every_variable_a_manifest_sets_is_a_setting_the_product_reads_or_one_an_sdk_reads() -> None:
    """So a setting renamed in the code fails here, not as a manifest the product silently ignores."""
    known = setting_variables()
    assert {"AGENT_WEB_PUBLIC_URL", "AGENT_SMTP_HOST", "STRIPE_API_KEY", "AGENT_MODEL_BACKEND"} <= known
    assert {"AGENT_MAIL_IN_HOST", "AGENT_MAIL_IN_ALLOW_NETWORK", "AGENT_MAIL_IN_AUTHSERV_ID"} <= known
    resources = sources()
    checked = {
        template["metadata"]["labels"]["app.kubernetes.io/component"] for _, template in pod_templates(resources)
    }
    assert checked == {"worker", "inbox", "migrate", "codec-server", "mail-in", "metrics"}
    for owner, container in containers(resources):
        for name in every_variable(container, resources):
            assert name in known or name in OUTSIDE_SETTINGS, (
                f"{owner['metadata']['name']} sets {name}: no one reads it"
            )
    for name, data in config_maps(resources).items():
        for key in data:
            assert key.endswith(".toml") or key in known or key in OUTSIDE_SETTINGS, f"ConfigMap {name}: {key}"


def test_keys_and_credentials_come_from_secrets_and_never_from_a_manifest() -> None:
    must_be_secret = secret_settings() | SECRETS
    assert {"AGENT_WEB_APPROVAL_KEYS", "AGENT_CODEC_KEYS", "STRIPE_API_KEY", "AGENT_SMTP_PASSWORD"} <= must_be_secret
    assert "AGENT_MAIL_REPLY_KEY" in must_be_secret
    resources = sources()
    for owner, container in containers(resources):
        for name, origin in every_variable(container, resources).items():
            if name in must_be_secret:
                assert origin == "secret", f"{owner['metadata']['name']}: {name} comes from {origin}, not a Secret"
    assert not of_kind(resources, "Secret"), "Secrets are created by the operator (docs/kubernetes.md), never shipped"


def test_as_their_pods_get_it_each_process_reads_valid_settings_and_a_policy_it_accepts(tmp_path: Path) -> None:
    """The pod's environment (ConfigMaps, its own values, made-up secrets) and the mounted policy, read by the
    product's own ``Settings``: a malformed value or policy would stop the process at start with exit 2."""
    resources = sources()
    for component in ("worker", "inbox", "migrate", "codec-server", "mail-in", "metrics"):
        template, container = container_of(resources, component)
        settings = settings_of(container, template, resources, tmp_path)
        if component != "codec-server":
            assert settings.policy_file is not None, f"{component} runs on the default policy"
            assert wiring.money_policy(settings).approval.roles, (
                f"{component}'s policy names no approvers: anyone could approve"
            )
    template, container = container_of(resources, "worker")
    worker = settings_of(container, template, resources, tmp_path)
    check_client_timeouts(worker)
    assert worker.claude.backend == "claude"
    assert worker.versioning.deployment is not None
    assert worker.versioning.build_id is not None


def test_the_mail_receiver_listens_on_its_pods_address_only_because_its_pod_allows_it_explicitly(
    tmp_path: Path,
) -> None:
    """The MTA reaches the pod's address, never its loopback; and the receiver refuses any address beyond the
    loopback unless AGENT_MAIL_IN_ALLOW_NETWORK says the network lets the MTA alone reach it (the network policy)."""
    resources = sources()
    template, container = container_of(resources, "mail-in")
    mail_in = settings_of(container, template, resources, tmp_path).mail_in
    assert (mail_in.host, mail_in.allow_network) == ("0.0.0.0", True)
    without = {**container, "env": [v for v in container["env"] if v["name"] != "AGENT_MAIL_IN_ALLOW_NETWORK"]}
    with pytest.raises(ValidationError, match="AGENT_MAIL_IN_ALLOW_NETWORK=true only where"):
        settings_of(without, template, resources, tmp_path)


def test_a_worker_pod_without_the_model_key_refuses_to_start_rather_than_let_a_script_decide_refunds(
    tmp_path: Path,
) -> None:
    resources = sources()
    template, container = container_of(resources, "worker")
    (key,) = [v for v in container["env"] if v["name"] == "ANTHROPIC_API_KEY"]
    assert not key["valueFrom"]["secretKeyRef"].get("optional", False), "a pod must not start without the key"
    without = {**container, "env": [v for v in container["env"] if v["name"] != "ANTHROPIC_API_KEY"]}
    settings = settings_of(without, template, resources, tmp_path)
    with pytest.MonkeyPatch.context() as patch:
        for name in [name for name in os.environ if name.startswith("ANTHROPIC_")]:
            patch.delenv(name)
        patch.setenv("HOME", str(tmp_path))  # no Anthropic profile either
        with pytest.raises(model_choice.NoCredentialsError, match="no ANTHROPIC_API_KEY"):
            model_choice.choose_model(settings, Business.sqlite(tmp_path / "business.sqlite3").model_calls)


def test_every_process_that_names_a_policy_file_mounts_it_read_only(tmp_path: Path) -> None:
    resources = sources()
    for owner, template in pod_templates(resources):
        for container in template["spec"]["containers"]:
            if "AGENT_POLICY_FILE" in environment(container, resources):
                mounted_policy(container, template, resources, tmp_path)
                assert all(m.get("readOnly") for m in container["volumeMounts"] if m["name"] == "policy"), owner


@needs_kustomize
def test_the_example_overlays_temporal_connection_reads_as_temporal_cloud_through_the_sdks_own_loader() -> None:
    """TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE and TEMPORAL_API_KEY as ``temporalio.envconfig`` reads them, the loader
    the worker connects with: an API key turns TLS on."""
    built = kustomize(EXAMPLE)
    for component in ("worker", "inbox", "mail-in", "metrics", "migrate"):
        _, container = container_of(built, component)
        env = environment(container, built)
        env["TEMPORAL_API_KEY"] = "a key"  # optional in the pod; this desk's Secret holds it
        config = ClientConfig.load_client_connect_config(override_env_vars=env, disable_file=True)
        assert config["target_host"] == env["TEMPORAL_ADDRESS"] == "us-east-1.aws.api.temporal.io:7233"
        assert config["namespace"] == "support.a1b2c"
        assert config.get("tls") is True
        assert config.get("api_key") == "a key"


# --- the workers: grace period, probes, ports, scaling ---------------------------------------------------------------


def test_kubernetes_waits_longer_than_the_workers_grace_period_before_it_kills_one(tmp_path: Path) -> None:
    """A deploy, a scale-down or a drained node is a pause: SIGTERM, the activities in flight finish within the
    worker's grace period (read from the pod's own settings), then the worker exits; SIGKILL must come later."""
    resources = sources()
    template, container = container_of(resources, "worker")
    grace = grace_period(settings_of(container, template, resources, tmp_path)).total_seconds()
    assert template["spec"]["terminationGracePeriodSeconds"] > grace >= timeouts.LONGEST_ATTEMPT.total_seconds()


def test_kubernetes_waits_longer_than_the_mail_receiver_takes_to_answer_the_messages_in_flight(tmp_path: Path) -> None:
    """On SIGTERM (after its preStop pause) the receiver answers each message in flight within the pod's
    AGENT_MAIL_IN_ANSWER_WITHIN_SECONDS before it exits; SIGKILL must come later, or the MTA waits and sends again."""
    resources = sources()
    template, container = container_of(resources, "mail-in")
    answer = settings_of(container, template, resources, tmp_path).mail_in.answer_within_seconds
    pause = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert template["spec"]["terminationGracePeriodSeconds"] > pause + answer


def test_the_probes_and_ports_are_those_each_process_serves(tmp_path: Path) -> None:
    resources = sources()
    template, worker = container_of(resources, "worker")
    metrics = settings_of(worker, template, resources, tmp_path).metrics_bind
    assert metrics is not None, "the worker serves no metrics: nothing for its probes and autoscaler to read"
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert worker[probe]["httpGet"]["path"] == "/metrics"
        assert port_named(worker, worker[probe]["httpGet"]["port"]) == int(metrics.rsplit(":", 1)[1])

    template, gauges = container_of(resources, "metrics")
    bind = settings_of(gauges, template, resources, tmp_path).metrics_bind
    assert bind is not None, "agent-worker metrics refuses to start without an address to serve on"
    for probe in ("readinessProbe", "livenessProbe"):
        assert gauges[probe]["httpGet"]["path"] == "/metrics"
        assert port_named(gauges, gauges[probe]["httpGet"]["port"]) == int(bind.rsplit(":", 1)[1])

    template, inbox = container_of(resources, "inbox")
    web = settings_of(inbox, template, resources, tmp_path).web
    assert cli.parse(inbox["command"][1:]).port is None, "the port comes from AGENT_WEB_PORT"
    assert web.host == "0.0.0.0"
    for probe in ("readinessProbe", "livenessProbe"):
        assert inbox[probe]["httpGet"]["path"] == f"{web.base_path}/healthz"
        assert port_named(inbox, inbox[probe]["httpGet"]["port"]) == web.port

    _, codec = container_of(resources, "codec-server")
    args = cli.parse(codec["command"][1:])
    for probe in ("readinessProbe", "livenessProbe"):
        assert port_named(codec, codec[probe]["tcpSocket"]["port"]) == args.port

    template, mail_in = container_of(resources, "mail-in")
    settings = settings_of(mail_in, template, resources, tmp_path)
    for probe in ("startupProbe", "readinessProbe"):
        assert port_named(mail_in, mail_in[probe]["tcpSocket"]["port"]) == settings.mail_in.port
    assert f"('127.0.0.1', {port_named(mail_in, 'lmtp')})" in greeting_probe(mail_in)
    assert port_named(mail_in, "lmtp") == settings.mail_in.port
    assert settings.metrics_bind is not None
    assert port_named(mail_in, "metrics") == int(settings.metrics_bind.rsplit(":", 1)[1])


def greeting_probe(container: Resource) -> str:
    """The mail receiver's liveness probe: the Python it runs to read the greeting."""
    command = container["livenessProbe"]["exec"]["command"]
    assert command[:2] == ["python", "-c"], command
    return str(command[2])


def test_the_mail_receiver_takes_mail_from_the_mta_alone_and_reaches_nothing_but_temporal_and_dns() -> None:
    """The receiver starts a ticket for whatever it is handed: its LMTP port is open to the MTA's pods alone (a
    namespace and a pod selector both, never a namespace alone), and it reaches Temporal's port and DNS (DKIM keys,
    DMARC records), no database."""
    resources = sources()
    template, container = container_of(resources, "mail-in")
    labels = template["metadata"]["labels"]
    policies = [
        p for p in of_kind(resources, "NetworkPolicy") if selects(p["spec"]["podSelector"]["matchLabels"], labels)
    ]
    lmtp = [
        rule
        for policy in policies
        for rule in policy["spec"].get("ingress", [])
        if any(port_named(container, port["port"]) == port_named(container, "lmtp") for port in rule["ports"])
    ]
    assert lmtp, "no policy names the LMTP port"
    for rule in lmtp:
        for source in rule["from"]:
            assert {"namespaceSelector", "podSelector"} <= set(source) or set(source) == {"ipBlock"}, source
    egress = [p for p in policies if "Egress" in p["spec"]["policyTypes"]]
    assert egress, "the receiver's egress is open"
    reached = {
        (port["port"], port["protocol"]) for p in egress for rule in p["spec"]["egress"] for port in rule["ports"]
    }
    temporal = int(environment(container, resources)["TEMPORAL_ADDRESS"].rsplit(":", 1)[1])
    assert reached == {(temporal, "TCP"), (53, "UDP"), (53, "TCP")}
    assert "AGENT_DATABASE_URL" not in every_variable(container, resources)


def test_every_command_is_one_the_cli_takes() -> None:
    for owner, container in containers(sources()):
        assert container["command"][0] == "agent-worker", owner["metadata"]["name"]
        cli.parse(container["command"][1:])  # exits 2 on what the CLI does not take


def labelled_pods(resources: list[Resource]) -> list[tuple[Resource, dict[str, str], Resource]]:
    """Each Deployment or Job, its pods' labels and its pod template."""
    return [(owner, template["metadata"]["labels"], template) for owner, template in pod_templates(resources)]


def test_every_deployment_service_and_budget_finds_its_own_pods_and_the_ports_it_names() -> None:
    resources = sources()
    pods = labelled_pods(resources)
    for owner, labels, _ in pods:
        if owner["kind"] == "Deployment":
            assert selects(owner["spec"]["selector"]["matchLabels"], labels), owner["metadata"]["name"]
    for service in of_kind(resources, "Service"):
        chosen = [t for _, labels, t in pods if selects(service["spec"]["selector"], labels)]
        assert len(chosen) == 1, service["metadata"]["name"]
        for port in service["spec"]["ports"]:
            port_named(chosen[0]["spec"]["containers"][0], port["targetPort"])
    for budget in of_kind(resources, "PodDisruptionBudget"):
        assert len([1 for _, labels, _ in pods if selects(budget["spec"]["selector"]["matchLabels"], labels)]) == 1


def test_every_network_policy_and_autoscaler_finds_the_pods_and_ports_it_names() -> None:
    resources = sources()
    pods = labelled_pods(resources)
    for policy in of_kind(resources, "NetworkPolicy"):
        chosen = [t for _, labels, t in pods if selects(policy["spec"]["podSelector"]["matchLabels"], labels)]
        assert chosen, policy["metadata"]["name"]
        for rule in policy["spec"].get("ingress", []):
            for port in rule["ports"]:
                for template in chosen:
                    port_named(template["spec"]["containers"][0], port["port"])
    for autoscaler in of_kind(resources, "HorizontalPodAutoscaler"):
        target = autoscaler["spec"]["scaleTargetRef"]
        deployment = named(resources, target["kind"], target["name"])
        assert "replicas" not in deployment["spec"], "the autoscaler owns the count: an apply would reset it"
        assert autoscaler["spec"]["minReplicas"] >= 2


# --- the pods: security and images -----------------------------------------------------------------------------------


def test_every_pod_runs_as_the_images_user_read_only_with_no_privileges_and_no_api_token() -> None:
    for owner, template in pod_templates(sources()):
        name, pod = owner["metadata"]["name"], template["spec"]
        assert pod["automountServiceAccountToken"] is False, name
        security = pod["securityContext"]
        # The image's USER is a name: the kubelet cannot check a name is not root, so the uid must be given.
        assert security["runAsNonRoot"] is True, name
        assert security["runAsUser"] == image_uid(), name
        assert security["seccompProfile"] == {"type": "RuntimeDefault"}, name
        for container in pod["containers"]:
            assert container["securityContext"] == {
                "allowPrivilegeEscalation": False,
                "readOnlyRootFilesystem": True,
                "capabilities": {"drop": ["ALL"]},
            }, name
            assert any(m["mountPath"] == "/tmp" for m in container["volumeMounts"]), f"{name}: nowhere to write"
            requests, limits = container["resources"]["requests"], container["resources"]["limits"]
            assert {"cpu", "memory"} <= set(requests), name
            assert "memory" in limits, name


def test_every_container_runs_this_releases_image_of_the_project_that_carries_its_command() -> None:
    """The workers and the migration the worker's image, which carries the worker alone; each other program its own
    image (the Dockerfile's target of that name), whose environment holds the extra its command needs."""
    for owner, container in containers(sources()):
        name = owner["metadata"]["name"]
        target = images.target_of(container["image"])
        assert container["image"] == f"{images.image_name(target)}:{project_version()}", name
        needs = cli.parse(container["command"][1:]).func.extra
        assert images.extras(target) == ({needs} if needs else set()), (name, target, needs)
        if container["command"][1] in {"worker", "migrate"}:
            assert target == images.WORKER, name


@needs_kustomize
def test_the_migration_job_runs_alone_first_as_the_schema_owner_with_everything_it_reads() -> None:
    """docs/kubernetes.md applies only the objects labelled config or migrate before the release's workers, so
    everything the Job reads must carry one of those labels; and only the Job gets the schema owner's credentials."""
    assert DOCUMENTED_MIGRATION in (ROOT / "docs" / "kubernetes.md").read_text()
    built = kustomize(EXAMPLE)
    (job,) = of_kind(built, "Job")
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == [
        "agent-worker",
        "migrate",
        "--search-attributes",
    ]
    selected = {"config", "migrate"}
    referenced = {"agent-worker-config", "agent-worker-policy"}
    for resource in built:
        if resource["metadata"]["name"] in referenced and resource["kind"] == "ConfigMap":
            assert resource["metadata"]["labels"]["app.kubernetes.io/component"] in selected
    owners = {
        variable["valueFrom"]["secretKeyRef"]["name"]
        for owner, container in containers(built)
        for variable in container.get("env", [])
        if variable["name"] == "AGENT_DATABASE_URL" and owner["kind"] != "Job"
    }
    (job_secret,) = {
        v["valueFrom"]["secretKeyRef"]["name"]
        for v in job["spec"]["template"]["spec"]["containers"][0]["env"]
        if v["name"] == "AGENT_DATABASE_URL"
    }
    assert job_secret not in owners, "the workers and the inbox must not hold the role that changes the schema"


# --- builds side by side ---------------------------------------------------------------------------------------------


@needs_kustomize
def test_a_second_build_runs_beside_the_first_as_its_own_deployment_budget_and_autoscaler(tmp_path: Path) -> None:
    """A rollout by Worker Deployment Versioning: the next build is a copy of the build folder with its version
    changed. Its pods must be its own (no selector of one build takes the other's pods), and each build's pods
    must say the build they run: its image's tag, its AGENT_BUILD_ID and its version label agree."""
    tree = tmp_path / "kubernetes"
    shutil.copytree(KUBERNETES, tree)
    example = tree / "overlays" / "example"
    shutil.copytree(example / "build-2.0.0", example / "build-2.1.0")
    build = example / "build-2.1.0" / "kustomization.yaml"
    build.write_text(build.read_text().replace("2.0.0", "2.1.0").replace("-2-0-0", "-2-1-0"))
    overlay = example / "kustomization.yaml"
    overlay.write_text(overlay.read_text().replace("  - build-2.0.0\n", "  - build-2.0.0\n  - build-2.1.0\n"))

    built = kustomize(example)
    workers = [
        d for d in of_kind(built, "Deployment") if d["metadata"]["labels"]["app.kubernetes.io/component"] == "worker"
    ]
    assert sorted(d["metadata"]["name"] for d in workers) == ["agent-worker-2-0-0", "agent-worker-2-1-0"]
    for deployment in workers:
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        version = labels["app.kubernetes.io/version"]
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container["image"].rsplit(":", 1)[1] == version
        assert environment(container, built)["AGENT_BUILD_ID"] == version
        others = [d for d in workers if d is not deployment]
        for other in others:
            assert not selects(other["spec"]["selector"]["matchLabels"], labels)
        for kind in ("PodDisruptionBudget", "HorizontalPodAutoscaler"):
            mine = named(built, kind, deployment["metadata"]["name"])
            if kind == "HorizontalPodAutoscaler":
                assert mine["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
            else:
                assert selects(mine["spec"]["selector"]["matchLabels"], labels)
                assert not any(
                    selects(mine["spec"]["selector"]["matchLabels"], o["spec"]["template"]["metadata"]["labels"])
                    for o in others
                )
    for owner, container in containers(built):
        if owner not in workers:
            image = f"registry.example.com/support/{images.image_name(images.target_of(container['image']))}:2.0.0"
            assert container["image"] == image, f"{owner['metadata']['name']} runs {container['image']}"


# --- against the real processes -----------------------------------------------------------------------------------


def get(url: str, host: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, ""
    except OSError:
        return 0, ""


async def test_a_running_worker_answers_its_probes_and_exports_the_metric_its_autoscaler_reads(
    client: Client, tmp_path: Path
) -> None:
    """``agent-worker worker`` with the metrics address its pod sets (moved to a free port): the probes' path
    answers, and the autoscaler's metric is there with the label it selects, its target below the slots a worker
    has, so the autoscaler adds pods before the workers are full."""
    resources = sources()
    _, container = container_of(resources, "worker")
    (autoscaler,) = of_kind(resources, "HorizontalPodAutoscaler")
    metric = autoscaler["spec"]["metrics"][0]["pods"]
    labels = metric["metric"]["selector"]["matchLabels"]
    port = free_port()
    settings = worker_env(
        address(client), f"probes-{uuid.uuid4()}", tmp_path / "business.sqlite3", AGENT_METRICS_BIND=f"127.0.0.1:{port}"
    )
    worker = await spawn_worker(settings)
    try:
        await listening("127.0.0.1", port)
        path = container["livenessProbe"]["httpGet"]["path"]
        wanted = re.compile(
            rf"^{metric['metric']['name']}\{{[^}}]*"
            + "".join(rf'(?=[^}}]*\b{k}="{v}")' for k, v in labels.items())
            + r"[^}]*\}\s+(\S+)$",
            re.MULTILINE,
        )
        available = re.compile(
            r'^temporal_worker_task_slots_available\{[^}]*worker_type="ActivityWorker"[^}]*\}\s+(\S+)$', re.MULTILINE
        )

        async def scraped() -> str | None:
            status, text = await asyncio.to_thread(get, f"http://127.0.0.1:{port}{path}")
            return text if status == 200 and wanted.search(text) and available.search(text) else None

        text = await poll(scraped, timeout=30, what=f"{metric['metric']['name']} {labels} on {path}")
    finally:
        worker.terminate()
        await worker.wait()
    slots = float(available.findall(text)[0]) + float(wanted.findall(text)[0])
    assert 0 < float(metric["target"]["averageValue"]) < slots


async def test_a_running_inbox_answers_its_probes_whatever_host_the_kubelet_names(
    client: Client, tmp_path: Path
) -> None:
    """The inbox serves only the host of AGENT_WEB_PUBLIC_URL; the kubelet's probe comes to the pod's address, so
    its path must be the one the inbox answers for any host: ``agent-worker web`` with the pod's settings (on the
    loopback, a free port) answers the probe for the pod's address, and refuses a page for it."""
    resources = sources()
    template, container = container_of(resources, "inbox")
    port = free_port()
    env = {
        **{k: v for k, v in environment(container, resources).items() if not k.startswith("TEMPORAL_")},
        "TEMPORAL_ADDRESS": address(client),
        "AGENT_WEB_HOST": "127.0.0.1",
        "AGENT_WEB_PORT": str(port),
        "AGENT_WEB_APPROVAL_KEYS": f'["{"k" * 40}"]',
        "AGENT_DB_PATH": str(tmp_path / "business.sqlite3"),
        "AGENT_POLICY_FILE": str(mounted_policy(container, template, resources, tmp_path)),
    }
    env.pop("AGENT_DATABASE_URL")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "TEMPORAL_"))}
    inbox = await spawn_worker(env, environ=clean, command=(AGENT_WORKER, "web"))
    try:
        await listening("127.0.0.1", port)
        probe = container["readinessProbe"]["httpGet"]["path"]
        pod = f"10.1.2.3:{port}"
        assert await asyncio.to_thread(get, f"http://127.0.0.1:{port}{probe}", pod) == (200, "ok")
        status, _ = await asyncio.to_thread(get, f"http://127.0.0.1:{port}/", pod)
        assert status == 421
    finally:
        inbox.terminate()
        await inbox.wait()


async def test_a_running_mail_receiver_answers_its_probes_and_a_stopped_one_fails_the_liveness_probe(
    client: Client, tmp_path: Path
) -> None:
    """``agent-worker mail-in`` with the pod's settings (its port moved to a free one on the loopback): the liveness
    probe's Python, run as the kubelet runs it in the container, reads the receiver's greeting and exits 0; once the
    receiver has stopped, it fails."""
    resources = sources()
    template, container = container_of(resources, "mail-in")
    port = free_port()
    env = {
        **{k: v for k, v in environment(container, resources).items() if not k.startswith("TEMPORAL_")},
        "TEMPORAL_ADDRESS": address(client),
        "AGENT_MAIL_IN_HOST": "127.0.0.1",
        "AGENT_MAIL_IN_PORT": str(port),
        "AGENT_METRICS_BIND": f"127.0.0.1:{free_port()}",
        "AGENT_POLICY_FILE": str(mounted_policy(container, template, resources, tmp_path)),
    }
    probe = greeting_probe(container).replace(
        f"('127.0.0.1', {port_named(container, 'lmtp')})", f"('127.0.0.1', {port})"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "TEMPORAL_"))}

    async def liveness() -> int:
        checked = await asyncio.create_subprocess_exec(
            sys.executable, "-c", probe, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
        )
        return await asyncio.wait_for(checked.wait(), container["livenessProbe"]["timeoutSeconds"])

    receiving = await spawn_worker(env, environ=clean, command=(AGENT_WORKER, "mail-in"))
    try:
        await listening("127.0.0.1", port)
        assert await liveness() == 0
    finally:
        receiving.terminate()
        assert await asyncio.wait_for(receiving.wait(), 30) == 0
    assert await liveness() != 0


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql, the client the database script is written for")
async def test_the_database_script_gives_the_workers_a_role_that_starts_them_and_can_change_no_table() -> None:
    """``deploy/kubernetes/business-database.sql`` on the machine's PostgreSQL, as docs/kubernetes.md runs it: the
    owner's migration makes every table, a start as the other role (``agent-worker migrate`` finds nothing to do,
    as a worker's and the inbox's start does) and its writes work, and it can neither alter nor create a table."""
    if not postgres_available():
        pytest.skip("no PostgreSQL on 127.0.0.1:5432 (CI and every machine of this project have one)")
    suffix = uuid.uuid4().hex[:12]
    owner, app, database = f"agent_owner_{suffix}", f"agent_app_{suffix}", f"business_{suffix}"
    admin = ("psql", "-h", "127.0.0.1", "-U", "postgres", "-d", "postgres", "-q")
    script = KUBERNETES / "business-database.sql"
    try:
        await run(*admin, "-v", f"owner={owner}", "-v", f"app={app}", "-v", f"database={database}", "-f", str(script))
        url = f"postgresql+psycopg://{{}}@127.0.0.1:5432/{database}"
        await run(AGENT_WORKER, "migrate", env={"AGENT_DATABASE_URL": url.format(owner)})
        started = await run(AGENT_WORKER, "migrate", env={"AGENT_DATABASE_URL": url.format(app)})
        assert started.strip().endswith(f"is at revision {migrations.head()}")
        await run(
            AGENT_WORKER, "orders", "add", "A-1", "4900", "ann@example.com", env={"AGENT_DATABASE_URL": url.format(app)}
        )
        engine = sa.create_engine(url.format(app))
        try:
            for ddl, refusal in (
                ("ALTER TABLE orders ADD COLUMN note text", "must be owner"),
                ("CREATE TABLE scratch (id int)", "permission denied for schema public"),
            ):
                with pytest.raises(sa.exc.ProgrammingError, match=refusal), engine.begin() as db:
                    db.execute(sa.text(ddl))
        finally:
            engine.dispose()
    finally:
        await run(*admin, "-c", f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        await run(*admin, "-c", f'DROP ROLE IF EXISTS "{owner}", "{app}"')
