"""The chart installs what the kustomize build installs, with the same RBAC.

``helm template`` with default values is compared with ``kubectl kustomize config/default`` object by object:
the same kinds, names and namespaces, and the same content once the chart's deliberate differences are taken
out (each is listed in :data:`DIFFERENCES` and in docs/helm.md). The ClusterRole and Role rules, the bindings
and the webhook configurations are also compared on their own, so a drift names the object. The optional parts
are compared the same way: ``runtimes.defaultEnabled`` with ``config/runtimes``, ``serviceMonitor.enabled``
with ``config/components/prometheus``.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "config"
NAMESPACE = "kubeflow-system"
Objects = list[dict[str, Any]]

HELM_LABELS = (
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "helm.sh/chart",
)
MANAGER_CONFIG = ("ConfigMap", NAMESPACE, "kubeflow-trainer-config")
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")

DIFFERENCES = {
    "Namespace": "the chart installs into the release namespace (`-n kubeflow-system --create-namespace`) "
    "and does not own it; docs/helm.md labels it for the restricted Pod Security Standard",
    "Helm labels": f"every chart object also carries {', '.join(HELM_LABELS)} (never in a selector)",
    "checksum/config": "the manager's pod template carries the Configuration's checksum, so `helm upgrade` "
    "with new values restarts it (kustomize: `kubectl rollout restart`)",
    "imagePullPolicy": "image.pullPolicy is written out (IfNotPresent, the API server's default for a "
    "tagged image other than :latest)",
    "Configuration": "the chart renders the manager's Configuration from values: the same document, "
    "compared parsed (key order and comments differ)",
}

Key = tuple[str, str, str]


def key(obj: dict[str, Any]) -> Key:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace", ""), meta["name"]


def _drop_labels(meta: dict[str, Any]) -> None:
    labels = meta.get("labels") or {}
    for label in HELM_LABELS:
        labels.pop(label, None)
    if "labels" in meta and not labels:
        del meta["labels"]


def normalise(obj: dict[str, Any]) -> dict[str, Any]:
    """The object with the chart's deliberate differences (DIFFERENCES) taken out; kustomize's unchanged."""
    obj = copy.deepcopy(obj)
    _drop_labels(obj["metadata"])
    if obj["kind"] == "Deployment":
        template = obj["spec"]["template"]
        _drop_labels(template["metadata"])
        annotations = template["metadata"].get("annotations") or {}
        annotations.pop("checksum/config", None)
        if "annotations" in template["metadata"] and not annotations:
            del template["metadata"]["annotations"]
        for container in template["spec"]["containers"]:
            if container.get("imagePullPolicy") == "IfNotPresent":
                del container["imagePullPolicy"]
    if key(obj) == MANAGER_CONFIG:
        obj["data"] = {name: yaml.safe_load(text) for name, text in obj["data"].items()}
    return obj


def by_key(objects: Objects) -> dict[Key, dict[str, Any]]:
    keyed = {key(o): normalise(o) for o in objects}
    assert len(keyed) == len(objects), "two objects with one kind, namespace and name"
    return keyed


@pytest.fixture(scope="module")
def kustomized(kustomize: Callable[[Path], Objects]) -> dict[Key, dict[str, Any]]:
    """config/default without its Namespace (DIFFERENCES["Namespace"])."""
    return {k: o for k, o in by_key(kustomize(CONFIG / "default")).items() if k[0] != "Namespace"}


@pytest.fixture(scope="module")
def charted(template: Callable[..., Objects]) -> dict[Key, dict[str, Any]]:
    return by_key(template())


def test_default_values_install_the_same_kinds_names_and_namespaces_as_config_default(
    charted: dict[Key, dict[str, Any]], kustomized: dict[Key, dict[str, Any]]
) -> None:
    assert sorted(charted) == sorted(kustomized)


@pytest.mark.parametrize("kind", RBAC_KINDS)
def test_the_rbac_is_the_same_rule_for_rule(
    kind: str, charted: dict[Key, dict[str, Any]], kustomized: dict[Key, dict[str, Any]]
) -> None:
    ours = {k: o for k, o in charted.items() if k[0] == kind}
    theirs = {k: o for k, o in kustomized.items() if k[0] == kind}
    assert ours.keys() == theirs.keys()
    for k, obj in ours.items():
        for field in ("rules", "roleRef", "subjects"):
            assert obj.get(field) == theirs[k].get(field), f"{k} {field}"


def test_every_object_is_the_same_apart_from_the_listed_differences(
    charted: dict[Key, dict[str, Any]], kustomized: dict[Key, dict[str, Any]]
) -> None:
    different = sorted(k for k in charted.keys() & kustomized.keys() if charted[k] != kustomized[k])
    assert different == [], "\n".join(
        f"{k}:\n  chart:     {charted[k]}\n  kustomize: {kustomized[k]}" for k in different
    )


def test_the_kustomize_build_has_the_objects_the_chart_leaves_out_and_no_other(
    kustomize: Callable[[Path], Objects],
) -> None:
    left_out = [key(o) for o in kustomize(CONFIG / "default") if o["kind"] == "Namespace"]
    assert left_out == [("Namespace", "", NAMESPACE)]


def test_the_default_runtimes_are_the_objects_of_config_runtimes(
    template: Callable[..., Objects], kustomize: Callable[[Path], Objects]
) -> None:
    added = {k: o for k, o in by_key(template({"runtimes": {"defaultEnabled": True}})).items()}
    for k in by_key(template()):
        added.pop(k)
    runtimes = by_key(kustomize(CONFIG / "runtimes"))
    assert sorted(added) == sorted(runtimes)
    assert all(k[0] == "ClusterTrainingRuntime" for k in added)
    assert {k: o for k, o in added.items()} == runtimes


def _overlay(tmp_path: Path, *components: str) -> Path:
    """An overlay of config/default with ``components``, as a user adds them (relative paths)."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    rel = os.path.relpath(CONFIG, overlay)
    lines = [
        "resources:",
        f"  - {rel}/default",
        "components:",
        *[f"  - {rel}/components/{c}" for c in components],
    ]
    (overlay / "kustomization.yaml").write_text("\n".join(lines) + "\n")
    return overlay


def test_the_service_monitor_is_what_the_prometheus_component_adds(
    template: Callable[..., Objects], kustomize: Callable[[Path], Objects], tmp_path: Path
) -> None:
    chart = by_key(template({"serviceMonitor": {"enabled": True}}))
    with_component = {k: o for k, o in by_key(kustomize(_overlay(tmp_path, "prometheus"))).items()}
    default = by_key(kustomize(CONFIG / "default"))
    added_by_chart = {k: chart[k] for k in chart.keys() - by_key(template()).keys()}
    added_by_component = {k: with_component[k] for k in with_component.keys() - default.keys()}
    assert sorted(added_by_chart) == sorted(added_by_component)
    assert added_by_chart == added_by_component


def test_the_crds_are_config_crd(
    template: Callable[..., Objects], kustomize: Callable[[Path], Objects]
) -> None:
    crds = by_key([o for o in template() if o["kind"] == "CustomResourceDefinition"])
    assert crds == by_key(kustomize(CONFIG / "crd"))
