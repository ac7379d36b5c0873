"""The optional kustomize components: ``config/components/prometheus`` (ServiceMonitor and the scraper's
ClusterRole) and ``config/components/grafana`` (the dashboard), added to an overlay of ``config/default``
as a user would; and the dashboard's queries name only metric families the manager exports."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import controller.client.client
import controller.controller.controller
import controller.manager.leaderelection
import controller.serving.certwatcher
import controller.serving.webhook.metrics
import controller.trainer.metrics
import controller.workqueue  # noqa: F401 - each import registers its families
from controller.metrics import REGISTRY

ROOT = Path(__file__).resolve().parents[3]
COMPONENTS = ROOT / "config" / "components"
DASHBOARD = COMPONENTS / "grafana" / "kubeflow-trainer-dashboard.json"
_SUFFIXES = ("", "_total", "_bucket", "_sum", "_count")
_METRIC = re.compile(
    r"\b((?:kubeflow_trainer|controller_runtime|workqueue|certwatcher|rest_client|leader_election|process)_\w+)\{"
)

Objects = list[dict[str, Any]]


def _overlay(tmp_path: Path, *components: str) -> Path:
    """An overlay of config/default with ``components`` (kustomize wants relative paths)."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    rel = os.path.relpath(ROOT / "config", overlay)
    lines = ["resources:", f"  - {rel}/default", "components:"]
    lines += [f"  - {rel}/components/{name}" for name in components]
    (overlay / "kustomization.yaml").write_text("\n".join(lines) + "\n")
    return overlay


def test_the_components_add_a_service_monitor_a_metrics_reader_and_the_dashboard(
    build: Callable[[Path], Objects], default_objects: Objects, tmp_path: Path
) -> None:
    objects = build(_overlay(tmp_path, "prometheus", "grafana"))
    added = {(o["kind"], o["metadata"]["name"]) for o in objects} - {
        (o["kind"], o["metadata"]["name"]) for o in default_objects
    }
    assert added == {
        ("ServiceMonitor", "kubeflow-trainer-controller-manager"),
        ("ClusterRole", "kubeflow-trainer-metrics-reader"),
        ("ClusterRoleBinding", "kubeflow-trainer-metrics-reader"),
        ("ServiceAccount", "kubeflow-trainer-metrics-reader"),
        ("Secret", "kubeflow-trainer-metrics-reader-token"),
        ("ConfigMap", "kubeflow-trainer-grafana-dashboard"),
    }
    (monitor,) = [o for o in objects if o["kind"] == "ServiceMonitor"]
    (service,) = [o for o in objects if o["kind"] == "Service"]
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"] if p["targetPort"] == "metrics"}
    assert endpoint["scheme"] == "https"
    assert endpoint["tlsConfig"]["serverName"] == "kubeflow-trainer-controller-manager.kubeflow-system.svc"
    # The token sent: a ServiceAccount token Secret in the ServiceMonitor's namespace (where the Prometheus
    # Operator reads it), of a ServiceAccount bound to GET /metrics and nothing else.
    assert "bearerTokenFile" not in endpoint and "bearerTokenSecret" not in endpoint  # deprecated
    credentials = endpoint["authorization"]["credentials"]
    assert (endpoint["authorization"]["type"], credentials["key"]) == ("Bearer", "token")
    (token,) = [o for o in objects if o["kind"] == "Secret" and o["metadata"]["name"] == credentials["name"]]
    assert token["type"] == "kubernetes.io/service-account-token"
    assert token["metadata"]["namespace"] == monitor["metadata"]["namespace"]
    account = token["metadata"]["annotations"]["kubernetes.io/service-account.name"]
    (sa,) = [o for o in objects if o["kind"] == "ServiceAccount" and o["metadata"]["name"] == account]
    assert sa["metadata"]["namespace"] == token["metadata"]["namespace"]
    bindings = [
        b
        for b in objects
        if b["kind"] in ("ClusterRoleBinding", "RoleBinding")
        and {"kind": "ServiceAccount", "name": account, "namespace": sa["metadata"]["namespace"]}
        in b["subjects"]
    ]
    assert [b["roleRef"]["name"] for b in bindings] == ["kubeflow-trainer-metrics-reader"]
    (reader,) = [o for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"] == account]
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    (dashboard,) = [o for o in objects if o["metadata"]["name"] == "kubeflow-trainer-grafana-dashboard"]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = json.loads(dashboard["data"]["kubeflow-trainer-dashboard.json"])
    assert shipped == json.loads(DASHBOARD.read_text())


def _exported() -> set[str]:
    names = {family.name for family in REGISTRY.collect()}
    # Registered while the manager runs (a collector over the cache), documented in docs/metrics.md.
    names.add("kubeflow_trainer_trainjobs")
    return {name + suffix for name in names for suffix in _SUFFIXES}


def _queries() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [
        (panel["title"], target["expr"])
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]


def test_the_dashboard_panels_have_unique_ids_and_a_query_each() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["type"] == "row" or panel["targets"], panel["title"]


@pytest.mark.parametrize(("title", "expr"), _queries(), ids=[f"{t}: {e[:40]}" for t, e in _queries()])
def test_every_dashboard_query_names_families_the_manager_exports(title: str, expr: str) -> None:
    used = _METRIC.findall(expr)
    assert used, f"{title}: no metric family recognised in {expr}"
    unknown = set(used) - _exported()
    assert not unknown, f"{title}: {sorted(unknown)} are not exported"


def test_the_dashboard_covers_the_trainer_and_controller_runtime_families() -> None:
    used = {m for _, expr in _queries() for m in _METRIC.findall(expr)}
    for family in (
        "kubeflow_trainer_trainjobs",
        "kubeflow_trainer_trainjob_jobset_creation_seconds_bucket",
        "kubeflow_trainer_reconcile_failures_total",
        "controller_runtime_reconcile_total",
        "controller_runtime_reconcile_errors_total",
        "controller_runtime_reconcile_time_seconds_bucket",
        "workqueue_depth",
        "controller_runtime_webhook_requests_total",
        "rest_client_requests_total",
        "leader_election_master_status",
    ):
        assert family in used, family
