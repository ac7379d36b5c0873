"""``kubectl kustomize config/default`` (the pinned kubectl): what it installs, and how the manager's Pod is
set up. The build is checked as kubectl prints it, not the source files, so patches, the namespace and the
image transformer are all in effect.

What the API server makes of it (accepted, restricted Pod Security, the RBAC sufficient and each rule
needed) is checked against a real kube-apiserver in ``test/integration/test_install_manifests.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from trainer_controller_manager.serving import resolve_serving

from controller.serving.webhook import DEFAULT_CERT_DIR
from controller.trainer.config import load_configuration

ROOT = Path(__file__).resolve().parents[3]
NS = "kubeflow-system"
MANAGER = "kubeflow-trainer-controller-manager"
IMAGE = "ghcr.io/example/kubeflow-trainer-py"

EXPECTED = {
    ("Namespace", "", NS),
    ("CustomResourceDefinition", "", "trainjobs.trainer.kubeflow.org"),
    ("CustomResourceDefinition", "", "trainingruntimes.trainer.kubeflow.org"),
    ("CustomResourceDefinition", "", "clustertrainingruntimes.trainer.kubeflow.org"),
    ("ServiceAccount", NS, MANAGER),
    ("ClusterRole", "", MANAGER),
    ("ClusterRoleBinding", "", MANAGER),
    ("Role", NS, "kubeflow-trainer-leader-election"),
    ("RoleBinding", NS, "kubeflow-trainer-leader-election"),
    ("Role", NS, "kubeflow-trainer-webhook-cert"),
    ("RoleBinding", NS, "kubeflow-trainer-webhook-cert"),
    ("Role", NS, "kubeflow-trainer-public"),
    ("RoleBinding", NS, "kubeflow-trainer-public"),
    ("ConfigMap", NS, "kubeflow-trainer-config"),
    ("ConfigMap", NS, "kubeflow-trainer-public"),
    ("Secret", NS, "kubeflow-trainer-webhook-cert"),
    ("Service", NS, MANAGER),
    ("Deployment", NS, MANAGER),
    ("ValidatingWebhookConfiguration", "", "validator.trainer.kubeflow.org"),
    ("MutatingWebhookConfiguration", "", "defaulter.trainer.kubeflow.org"),
}

Objects = list[dict[str, Any]]


def _key(obj: dict[str, Any]) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace", ""), meta["name"])


def _one(objects: Objects, kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


@pytest.fixture(scope="module")
def deployment(default_objects: Objects) -> dict[str, Any]:
    return _one(default_objects, "Deployment", MANAGER)


@pytest.fixture(scope="module")
def pod(deployment: dict[str, Any]) -> dict[str, Any]:
    return dict(deployment["spec"]["template"]["spec"])


@pytest.fixture(scope="module")
def container(pod: dict[str, Any]) -> dict[str, Any]:
    (manager,) = pod["containers"]
    return dict(manager)


@pytest.fixture(scope="module")
def shipped_config(default_objects: Objects, tmp_path_factory: pytest.TempPathFactory) -> Any:
    data = _one(default_objects, "ConfigMap", "kubeflow-trainer-config")["data"]
    path = tmp_path_factory.mktemp("config") / "controller_manager_config.yaml"
    path.write_text(data["controller_manager_config.yaml"])
    return load_configuration(path)


# What is installed ----------------------------------------------------------------------------------------


def test_the_default_overlay_installs_exactly_the_manager_and_its_api(default_objects: Objects) -> None:
    keys = [_key(o) for o in default_objects]
    assert len(keys) == len(set(keys)), "an object is built twice"
    assert set(keys) == EXPECTED


def test_the_namespace_enforces_the_restricted_pod_security_standard(default_objects: Objects) -> None:
    labels = _one(default_objects, "Namespace", NS)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


def test_the_crds_are_the_committed_files(default_objects: Objects) -> None:
    for path in sorted((ROOT / "config" / "crd").glob("trainer.kubeflow.org_*.yaml")):
        crd = yaml.safe_load(path.read_text())
        assert _one(default_objects, "CustomResourceDefinition", crd["metadata"]["name"]) == crd


def test_the_empty_webhook_secret_holds_no_key_material(default_objects: Objects) -> None:
    secret = _one(default_objects, "Secret", "kubeflow-trainer-webhook-cert")
    assert "data" not in secret and "stringData" not in secret


# The Pod ----------------------------------------------------------------------------------------------------


def test_the_pod_runs_as_a_non_root_user_with_the_runtime_default_seccomp(pod: dict[str, Any]) -> None:
    context = pod["securityContext"]
    assert context["runAsNonRoot"] is True
    assert context["runAsUser"] == 65532 and context["runAsGroup"] == 65532
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["serviceAccountName"] == MANAGER
    assert "hostNetwork" not in pod and "hostPID" not in pod and "hostIPC" not in pod


def test_the_container_is_locked_down(container: dict[str, Any]) -> None:
    context = container["securityContext"]
    assert context["allowPrivilegeEscalation"] is False
    assert context["readOnlyRootFilesystem"] is True
    assert context["runAsNonRoot"] is True
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "privileged" not in context


def test_the_container_has_resource_requests_and_limits(container: dict[str, Any]) -> None:
    resources = container["resources"]
    assert set(resources["requests"]) == {"cpu", "memory"}
    assert set(resources["limits"]) == {"cpu", "memory"}


def test_the_probes_ask_healthz_and_readyz_on_the_health_port(container: dict[str, Any]) -> None:
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["health"] == 8081
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}


def test_the_pod_ip_and_namespace_come_from_the_downward_api(container: dict[str, Any]) -> None:
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}


def test_the_image_is_the_placeholder_tagged_with_the_package_version(
    container: dict[str, Any], project_version: str
) -> None:
    assert container["image"] == f"{IMAGE}:{project_version}"
    assert not container["image"].endswith(":latest")


def test_the_configuration_is_the_configmap_mounted_where_config_points(
    pod: dict[str, Any], container: dict[str, Any]
) -> None:
    assert "--config=/controller_manager_config.yaml" in container["args"]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    config = mounts["/controller_manager_config.yaml"]
    assert config["subPath"] == "controller_manager_config.yaml" and config["readOnly"] is True
    assert volumes[config["name"]]["configMap"] == {"name": "kubeflow-trainer-config"}


def test_the_webhook_certificates_are_the_optional_secret_in_the_servers_cert_dir(
    pod: dict[str, Any], container: dict[str, Any]
) -> None:
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    cert = mounts[str(DEFAULT_CERT_DIR)]
    assert cert["readOnly"] is True
    secret = volumes[cert["name"]]["secret"]
    assert secret["secretName"] == "kubeflow-trainer-webhook-cert"
    assert secret["optional"] is True


def test_tmp_is_writable_although_the_root_filesystem_is_not(
    pod: dict[str, Any], container: dict[str, Any]
) -> None:
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]["name"]]
    assert not mounts["/tmp"].get("readOnly", False)


def test_the_servers_bind_the_pod_ip_and_listen_on_the_container_ports(
    container: dict[str, Any], shipped_config: Any
) -> None:
    environ = {"POD_IP": "10.244.1.7", "POD_NAMESPACE": NS}
    serving = resolve_serving(shipped_config, environ, namespace_file=Path("/nonexistent"))
    assert serving.health_probe_bind_address == "10.244.1.7:8081"
    assert serving.metrics_bind_address == "10.244.1.7:8443"
    assert serving.leader_election_namespace == NS
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {
        "health": int(serving.health_probe_bind_address.rsplit(":", 1)[1]),
        "metrics": int(serving.metrics_bind_address.rsplit(":", 1)[1]),
        "webhook": shipped_config.webhook.port,
        "status-server": shipped_config.status_server.port,
    }
    # An empty webhook host is resolved against the Pod IP by the entry point, never every interface.
    assert shipped_config.webhook.host == ""


def test_the_configuration_names_the_shipped_objects(default_objects: Objects, shipped_config: Any) -> None:
    assert (
        shipped_config.cert_management.webhook_service_name
        == _one(default_objects, "Service", MANAGER)["metadata"]["name"]
    )
    secret_name = shipped_config.cert_management.webhook_secret_name
    assert _one(default_objects, "Secret", secret_name)
    cert_role = _one(default_objects, "Role", "kubeflow-trainer-webhook-cert")
    assert cert_role["rules"][0]["resourceNames"] == [secret_name]
    election = shipped_config.leader_election
    assert election is not None and election.leader_elect
    lease_role = _one(default_objects, "Role", "kubeflow-trainer-leader-election")
    named = [r for r in lease_role["rules"] if r.get("resourceNames")]
    assert [r["resourceNames"] for r in named] == [[election.resource_name]]


# The Service and the webhooks ---------------------------------------------------------------------------


def test_the_service_exposes_webhook_metrics_and_status_server_of_the_manager_pod(
    default_objects: Objects, deployment: dict[str, Any]
) -> None:
    service = _one(default_objects, "Service", MANAGER)
    ports = {(p["port"], p["targetPort"]) for p in service["spec"]["ports"]}
    assert ports == {(443, "webhook"), (8443, "metrics"), (10443, "status-server")}
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


WEBHOOK_PATHS = {
    "defaulter.trainjob.trainer.kubeflow.org": (
        "/mutate-trainer-kubeflow-org-v1alpha1-trainjob",
        "trainjobs",
    ),
    "validator.trainjob.trainer.kubeflow.org": (
        "/validate-trainer-kubeflow-org-v1alpha1-trainjob",
        "trainjobs",
    ),
    "validator.trainingruntime.trainer.kubeflow.org": (
        "/validate-trainer-kubeflow-org-v1alpha1-trainingruntime",
        "trainingruntimes",
    ),
    "validator.clustertrainingruntime.trainer.kubeflow.org": (
        "/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime",
        "clustertrainingruntimes",
    ),
}
SKIP_DISABLED = {
    "matchExpressions": [
        {"key": "trainer.kubeflow.org/webhook-validation", "operator": "NotIn", "values": ["disabled"]}
    ]
}


@pytest.mark.parametrize(
    ("kind", "name", "webhooks"),
    [
        ("MutatingWebhookConfiguration", "defaulter.trainer.kubeflow.org", 1),
        ("ValidatingWebhookConfiguration", "validator.trainer.kubeflow.org", 3),
    ],
)
def test_each_webhook_calls_the_managers_service_on_its_path(
    default_objects: Objects, kind: str, name: str, webhooks: int
) -> None:
    configuration = _one(default_objects, kind, name)
    assert len(configuration["webhooks"]) == webhooks
    for webhook in configuration["webhooks"]:
        path, resource = WEBHOOK_PATHS[webhook["name"]]
        assert webhook["clientConfig"]["service"] == {"name": MANAGER, "namespace": NS, "path": path}
        assert "caBundle" not in webhook["clientConfig"]  # injected by the rotator, never shipped
        assert webhook["failurePolicy"] == "Fail"
        assert webhook["sideEffects"] == "None"
        assert webhook["admissionReviewVersions"] == ["v1"]
        assert webhook["rules"] == [
            {
                "apiGroups": ["trainer.kubeflow.org"],
                "apiVersions": ["v1alpha1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": [resource],
            }
        ]
        if resource == "trainjobs":
            assert "objectSelector" not in webhook
        else:
            assert webhook["objectSelector"] == SKIP_DISABLED


# The public ConfigMap ----------------------------------------------------------------------------------


def test_the_public_configmap_carries_the_package_version_and_anyone_authenticated_reads_it(
    default_objects: Objects, project_version: str
) -> None:
    public = _one(default_objects, "ConfigMap", "kubeflow-trainer-public")
    assert public["data"] == {"kubeflow_trainer_version": project_version}
    role = _one(default_objects, "Role", "kubeflow-trainer-public")
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["kubeflow-trainer-public"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    binding = _one(default_objects, "RoleBinding", "kubeflow-trainer-public")
    assert binding["subjects"] == [
        {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:authenticated"}
    ]


# RBAC -----------------------------------------------------------------------------------------------------


def _rules(objects: Objects) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{o['kind']}/{o['metadata']['name']}", rule)
        for o in objects
        if o["kind"] in ("ClusterRole", "Role")
        for rule in o.get("rules", [])
    ]


def test_no_rule_has_a_wildcard(default_objects: Objects, build: Callable[[Path], Objects]) -> None:
    objects = default_objects + build(ROOT / "config" / "components" / "prometheus")
    rules = _rules(objects)
    assert len(rules) > 10
    for owner, rule in rules:
        for field in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
            for value in rule.get(field, []):
                assert "*" not in value, f"{owner}: {field} has a wildcard: {rule}"


def test_no_role_may_escalate_bind_impersonate_or_touch_rbac(default_objects: Objects) -> None:
    for owner, rule in _rules(default_objects):
        assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), owner
        assert "rbac.authorization.k8s.io" not in rule["apiGroups"], owner


def test_the_lease_and_the_webhook_secret_are_granted_only_in_the_managers_namespace(
    default_objects: Objects,
) -> None:
    cluster_role = _one(default_objects, "ClusterRole", MANAGER)
    for rule in cluster_role["rules"]:
        assert "leases" not in rule["resources"]
        if "secrets" in rule["resources"]:
            assert not {"update", "delete", "deletecollection"} & set(rule["verbs"])
    for name in ("kubeflow-trainer-leader-election", "kubeflow-trainer-webhook-cert"):
        assert _one(default_objects, "Role", name)["metadata"]["namespace"] == NS


def test_webhook_configurations_are_granted_by_name_only(default_objects: Objects) -> None:
    cluster_role = _one(default_objects, "ClusterRole", MANAGER)
    for rule in cluster_role["rules"]:
        if "admissionregistration.k8s.io" in rule["apiGroups"]:
            names = rule["resourceNames"]
            assert names in (["validator.trainer.kubeflow.org"], ["defaulter.trainer.kubeflow.org"])


def test_every_binding_grants_its_role_to_the_managers_service_account(default_objects: Objects) -> None:
    for name in (MANAGER, "kubeflow-trainer-leader-election", "kubeflow-trainer-webhook-cert"):
        kind = "ClusterRoleBinding" if name == MANAGER else "RoleBinding"
        binding = _one(default_objects, kind, name)
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole" if name == MANAGER else "Role",
            "name": name,
        }
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": MANAGER, "namespace": NS}]


# The runtimes overlay ---------------------------------------------------------------------------------


def test_the_runtimes_overlay_labels_every_default_runtime_for_the_webhook_to_skip(
    build: Callable[[Path], Objects],
) -> None:
    runtimes = build(ROOT / "config" / "runtimes")
    files = sorted((ROOT / "config" / "runtimes").glob("*.yaml"))
    assert len(runtimes) == len(files) - 1  # every runtime file, not kustomization.yaml
    for runtime in runtimes:
        labels = runtime["metadata"]["labels"]
        assert labels["trainer.kubeflow.org/webhook-validation"] == "disabled", runtime["metadata"]["name"]
        assert labels["trainer.kubeflow.org/framework"]
