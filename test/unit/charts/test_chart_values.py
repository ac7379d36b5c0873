"""The chart's values reach the objects they name, ``helm lint --strict`` accepts them, and the rendered
Configuration is one the manager loads (``controller.trainer.config.parse_configuration``)."""

from __future__ import annotations

import subprocess
import tarfile
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.trainer.config import parse_configuration

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "kubeflow-trainer-py"
Objects = list[dict[str, Any]]
Template = Callable[..., Objects]

CERT_MANAGER = {"manager": {"config": {"certManagement": {"enable": False}}}, "certManager": {"enable": True}}
EXTERNAL_CERT = {
    "manager": {"config": {"certManagement": {"enable": False}}},
    "webhook": {"caBundle": "Q0E="},
}

# Every values file a test below renders: each must pass `helm lint --strict`.
VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "everything optional on": {"runtimes": {"defaultEnabled": True}, "serviceMonitor": {"enabled": True}},
    "cert-manager": CERT_MANAGER,
    "external certificate": EXTERNAL_CERT,
    "metrics off": {
        "manager": {"config": {"metrics": {"bindAddress": "0"}}},
        "serviceMonitor": {"enabled": True},
    },
    "leader election off": {"manager": {"config": {"leaderElection": {"leaderElect": False}}}},
    "metrics auth and tls passed through": {
        "manager": {"config": {"metrics": {"auth": {"enabled": True}}, "tls": {"minVersion": "1.3"}}}
    },
    "a third-party plugin enabled": {"manager": {"config": {"plugins": {"enabled": ["Example"]}}}},
}


def one(objects: Objects, kind: str, name: str | None = None) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    return found


def names(objects: Objects, kind: str) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objects if o["kind"] == kind)


def manager_configuration(objects: Objects) -> dict[str, Any]:
    data = one(objects, "ConfigMap", "kubeflow-trainer-config")["data"]["controller_manager_config.yaml"]
    parse_configuration(data)  # the manager accepts it (raises ConfigurationError otherwise)
    loaded: dict[str, Any] = yaml.safe_load(data)
    return loaded


def container(objects: Objects) -> dict[str, Any]:
    (manager,) = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    return manager


@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=VALUE_SETS.keys())
def test_helm_lint_strict_accepts_the_values(
    values: dict[str, Any], lint: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    done = lint(values)
    assert done.returncode == 0, done.stdout + done.stderr


REFUSED = {
    "a misspelt key": ({"manager": {"replica": 2}}, "additional properties 'replica' not allowed"),
    "a misspelt section": ({"serviceMonitors": {"enabled": True}}, "additional properties 'serviceMonitors'"),
    "an unknown failure policy": (
        {"webhook": {"failurePolicy": "Never"}},
        "value must be one of 'Fail', 'Ignore'",
    ),
    "a string for a count": (
        {"manager": {"config": {"controller": {"groupKindConcurrency": {"trainJob": "5"}}}}},
        "/manager/config/controller/groupKindConcurrency/trainJob",
    ),
    "plugins as a bare list": (
        {"manager": {"config": {"plugins": ["Example"]}}},
        "/manager/config/plugins",
    ),
}


@pytest.mark.parametrize(("values", "message"), REFUSED.values(), ids=REFUSED.keys())
def test_values_schema_refuses(
    values: dict[str, Any], message: str, lint: Callable[..., subprocess.CompletedProcess[str]]
) -> None:
    done = lint(values)
    assert done.returncode != 0
    assert message in done.stdout + done.stderr


@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=VALUE_SETS.keys())
def test_the_manager_loads_the_rendered_configuration(values: dict[str, Any], template: Template) -> None:
    manager_configuration(template(values))


def test_configuration_fields_without_a_value_of_their_own_are_passed_through(template: Template) -> None:
    config = manager_configuration(template(VALUE_SETS["metrics auth and tls passed through"]))
    assert (config["metrics"]["auth"], config["tls"]) == ({"enabled": True}, {"minVersion": "1.3"})


def test_the_chart_and_app_versions_are_the_package_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert (chart["version"], chart["appVersion"]) == (version, version)


def test_crds_and_runtime_files_link_exactly_the_files_of_config() -> None:
    crds = sorted(p.name for p in (ROOT / "config" / "crd").glob("*.yaml") if p.name != "kustomization.yaml")
    runtimes = yaml.safe_load((ROOT / "config" / "runtimes" / "kustomization.yaml").read_text())["resources"]
    for directory, expected, target in (
        (CHART / "crds", crds, ROOT / "config" / "crd"),
        (CHART / "files" / "runtimes", sorted(runtimes), ROOT / "config" / "runtimes"),
    ):
        assert sorted(p.name for p in directory.iterdir()) == expected
        for link in directory.iterdir():
            assert link.is_symlink() and link.resolve() == (target / link.name).resolve(), link


def test_a_packaged_chart_carries_the_linked_files_and_renders_the_same(
    helm: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    done = helm("package", str(CHART), "--destination", str(tmp_path))
    assert done.returncode == 0, done.stderr
    (archive,) = tmp_path.glob("*.tgz")
    with tarfile.open(archive) as tar:
        members = {m.name: m for m in tar.getmembers()}
        crd = "kubeflow-trainer-py/crds/trainer.kubeflow.org_trainjobs.yaml"
        assert members[crd].isfile()
        packed = tar.extractfile(members[crd])
        assert packed is not None
        assert packed.read() == (ROOT / "config" / "crd" / "trainer.kubeflow.org_trainjobs.yaml").read_bytes()
    args = ("--namespace", "kubeflow-system", "--include-crds", "--set", "runtimes.defaultEnabled=true")
    from_archive = helm("template", "kubeflow-trainer", str(archive), *args)
    from_directory = helm("template", "kubeflow-trainer", str(CHART), *args)
    assert from_archive.returncode == from_directory.returncode == 0, from_archive.stderr
    assert from_archive.stdout == from_directory.stdout


def test_image_replicas_resources_and_scheduling_reach_the_deployment(template: Template) -> None:
    scheduling = {
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [{"key": "infra", "operator": "Exists"}]}}
        ]}},
    }  # fmt: skip
    resources = {"requests": {"cpu": "200m", "memory": "512Mi"}, "limits": {"cpu": "2", "memory": "2Gi"}}
    objects = template({
        "image": {"repository": "registry.example/trainer", "tag": "v9", "pullPolicy": "Always",
                  "pullSecrets": [{"name": "pull"}]},
        "manager": {"replicas": 2, "resources": resources, "logLevel": "debug", **scheduling},
    })  # fmt: skip
    deployment = one(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2
    assert container(objects)["image"] == "registry.example/trainer:v9"
    assert container(objects)["imagePullPolicy"] == "Always"
    assert container(objects)["resources"] == resources
    assert "--zap-log-level=debug" in container(objects)["args"]
    assert pod["imagePullSecrets"] == [{"name": "pull"}]
    assert {k: pod[k] for k in scheduling} == scheduling


def test_the_image_tag_defaults_to_the_app_version(template: Template) -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert container(template())["image"] == f"ghcr.io/example/kubeflow-trainer-py:{chart['appVersion']}"


def test_feature_gates_concurrency_and_client_connection_reach_the_configuration(template: Template) -> None:
    config = manager_configuration(template({"manager": {"config": {
        "featureGates": {"TrainJobStatus": True},
        "controller": {"groupKindConcurrency": {
            "trainJob": 8, "trainingRuntime": 2, "clusterTrainingRuntime": 3,
        }},
        "clientConnection": {"qps": 20, "burst": 40},
    }}}))  # fmt: skip
    assert config["featureGates"] == {"TrainJobStatus": True}
    assert config["controller"]["groupKindConcurrency"] == {
        "TrainJob.trainer.kubeflow.org": 8,
        "TrainingRuntime.trainer.kubeflow.org": 2,
        "ClusterTrainingRuntime.trainer.kubeflow.org": 3,
    }
    assert config["clientConnection"] == {"qps": 20, "burst": 40}


def test_third_party_plugins_reach_the_configuration_only_when_some_are_enabled(template: Template) -> None:
    config = manager_configuration(template(VALUE_SETS["a third-party plugin enabled"]))
    assert config["plugins"] == {"enabled": ["Example"]}
    assert "plugins" not in manager_configuration(template())  # as config/manager ships the file


def test_a_configuration_change_changes_the_pod_template(template: Template) -> None:
    def checksum(values: dict[str, Any]) -> str:
        return str(
            one(template(values), "Deployment")["spec"]["template"]["metadata"]["annotations"][
                "checksum/config"
            ]
        )

    assert checksum({}) != checksum({"manager": {"config": {"featureGates": {"TrainJobStatus": True}}}})


def test_ports_follow_the_bind_addresses(template: Template) -> None:
    objects = template({"manager": {"config": {
        "health": {"healthProbeBindAddress": ":9081"}, "metrics": {"bindAddress": ":9443"},
        "webhook": {"port": 9444}, "statusServer": {"port": 11443},
    }}})  # fmt: skip
    ports = {p["name"]: p["containerPort"] for p in container(objects)["ports"]}
    assert ports == {"health": 9081, "metrics": 9443, "webhook": 9444, "status-server": 11443}
    service = {p["name"]: (p["port"], p["targetPort"]) for p in one(objects, "Service")["spec"]["ports"]}
    assert service == {
        "webhook-server": (443, "webhook"),
        "monitoring-port": (9443, "metrics"),
        "status-server": (11443, "status-server"),
    }


def test_metrics_off_means_no_metrics_port_and_no_service_monitor(template: Template) -> None:
    objects = template(VALUE_SETS["metrics off"])
    assert "metrics" not in {p["name"] for p in container(objects)["ports"]}
    assert "monitoring-port" not in {p["name"] for p in one(objects, "Service")["spec"]["ports"]}
    assert names(objects, "ServiceMonitor") == []
    assert manager_configuration(objects)["metrics"]["bindAddress"] == "0"


def test_plain_http_metrics_are_scraped_over_http(template: Template) -> None:
    objects = template({"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}, "interval": "1m"},
                        "manager": {"config": {"metrics": {"secureServing": False}}}})  # fmt: skip
    monitor = one(objects, "ServiceMonitor")
    (endpoint,) = monitor["spec"]["endpoints"]
    assert (endpoint["scheme"], endpoint["interval"], "tlsConfig" in endpoint) == ("http", "1m", False)
    assert monitor["metadata"]["labels"]["release"] == "prom"


def test_leader_election_off_installs_no_lease_role(template: Template) -> None:
    objects = template(VALUE_SETS["leader election off"])
    assert "kubeflow-trainer-leader-election" not in names(objects, "Role") + names(objects, "RoleBinding")
    assert manager_configuration(objects)["leaderElection"]["leaderElect"] is False


def test_the_lease_role_follows_the_lease_name_and_namespace(template: Template) -> None:
    lease = {"resourceName": "my-lease", "resourceNamespace": "leases"}
    objects = template({"manager": {"config": {"leaderElection": lease}}})
    role = one(objects, "Role", "kubeflow-trainer-leader-election")
    binding = one(objects, "RoleBinding", "kubeflow-trainer-leader-election")
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "leases"
    assert role["rules"][1]["resourceNames"] == ["my-lease"]
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": "kubeflow-trainer-controller-manager",
            "namespace": "kubeflow-system",
        }
    ]


def _rotator_rules(objects: Objects) -> list[dict[str, Any]]:
    rules = one(objects, "ClusterRole", "kubeflow-trainer-controller-manager")["rules"]
    return [r for r in rules if r["apiGroups"] == ["admissionregistration.k8s.io"]]


@pytest.mark.parametrize(
    "values", [CERT_MANAGER, EXTERNAL_CERT], ids=["cert-manager", "external certificate"]
)
def test_without_the_rotator_nothing_may_write_the_secret_or_the_webhook_configurations(
    values: dict[str, Any], template: Template
) -> None:
    objects = template(values)
    assert manager_configuration(objects)["certManagement"]["enable"] is False
    assert "kubeflow-trainer-webhook-cert" not in names(objects, "Secret")
    assert "kubeflow-trainer-webhook-cert" not in names(objects, "Role") + names(objects, "RoleBinding")
    assert _rotator_rules(objects) == []
    # The Deployment still mounts the Secret that cert-manager or the operator fills.
    volumes = one(objects, "Deployment")["spec"]["template"]["spec"]["volumes"]
    secret = {"secretName": "kubeflow-trainer-webhook-cert", "defaultMode": 292, "optional": True}
    assert {"name": "webhook-cert", "secret": secret} in volumes


def test_cert_manager_issues_the_certificate_the_manager_mounts_and_injects_its_ca(
    template: Template,
) -> None:
    objects = template(CERT_MANAGER)
    certificate = one(objects, "Certificate")
    assert certificate["metadata"]["name"] == "kubeflow-trainer-webhook"  # as docs/certificates.md
    assert certificate["spec"]["secretName"] == "kubeflow-trainer-webhook-cert"
    assert certificate["spec"]["privateKey"] == {"rotationPolicy": "Always"}
    assert "kubeflow-trainer-controller-manager.kubeflow-system.svc" in certificate["spec"]["dnsNames"]
    assert certificate["spec"]["issuerRef"] == {
        "kind": "Issuer",
        "name": one(objects, "Issuer")["metadata"]["name"],
    }
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        annotations = one(objects, kind)["metadata"]["annotations"]
        assert annotations == {
            "cert-manager.io/inject-ca-from": "kubeflow-system/" + certificate["metadata"]["name"]
        }


def test_cert_manager_with_an_issuer_of_your_own_creates_no_issuer(template: Template) -> None:
    issuer = {"kind": "ClusterIssuer", "name": "corp-ca"}
    objects = template({**CERT_MANAGER, "certManager": {"enable": True, "issuerRef": issuer}})
    assert names(objects, "Issuer") == []
    assert one(objects, "Certificate")["spec"]["issuerRef"] == issuer


def test_an_external_certificate_puts_the_ca_bundle_into_every_webhook(template: Template) -> None:
    objects = template(EXTERNAL_CERT)
    webhooks = [w for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
                for w in one(objects, kind)["webhooks"]]  # fmt: skip
    assert len(webhooks) == 4
    assert {w["clientConfig"]["caBundle"] for w in webhooks} == {"Q0E="}
    assert names(objects, "Certificate") == []


def test_the_rotator_mode_injects_nothing_itself(template: Template) -> None:
    objects = template()
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        config = one(objects, kind)
        assert "annotations" not in config["metadata"]
        assert all("caBundle" not in w["clientConfig"] for w in config["webhooks"])
    assert len(_rotator_rules(objects)) == 2


def test_webhook_failure_policy(template: Template) -> None:
    objects = template({"webhook": {"failurePolicy": "Ignore"}})
    kinds = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
    policies = {w["failurePolicy"] for kind in kinds for w in one(objects, kind)["webhooks"]}
    assert policies == {"Ignore"}


def test_another_release_namespace_moves_every_namespaced_object_and_every_reference(
    template: Template,
) -> None:
    objects = template(None, namespace="ml-platform")
    namespaced = [o for o in objects if "namespace" in o["metadata"]]
    assert {o["metadata"]["namespace"] for o in namespaced} == {"ml-platform"}
    subjects = [s for o in objects for s in o.get("subjects", []) if s["kind"] == "ServiceAccount"]
    assert subjects and {s["namespace"] for s in subjects} == {"ml-platform"}
    services = {w["clientConfig"]["service"]["namespace"]
                for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
                for w in one(objects, kind)["webhooks"]}  # fmt: skip
    assert services == {"ml-platform"}
