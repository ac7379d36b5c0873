"""``support.prometheus``: the shipped ServiceMonitor as Prometheus scrape jobs, EndpointSlices labelled as
Kubernetes discovery labels them, and the dashboard's queries with Grafana's variables substituted.

The kind tier (``test/e2e/test_kind_prometheus.py``) runs these against a real Prometheus; here each piece is
checked on its own, without a cluster.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from support import prometheus

ROOT = Path(__file__).resolve().parents[3]
MONITOR = ROOT / "config" / "components" / "prometheus" / "service_monitor.yaml"
DASHBOARD = ROOT / "config" / "components" / "grafana" / "kubeflow-trainer-dashboard.json"


@pytest.fixture
def monitor() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(MONITOR.read_text())
    return loaded


def test_the_shipped_service_monitor_is_one_https_job_with_the_token_and_the_ca_it_names(
    monitor: dict[str, Any],
) -> None:
    (job,), secrets = prometheus.scrape_configs(monitor, interval="2s")
    assert job["job_name"] == "serviceMonitor/kubeflow-system/kubeflow-trainer-controller-manager/0"
    assert (job["scheme"], job["metrics_path"], job["scrape_interval"]) == ("https", "/metrics", "2s")
    token, ca = secrets
    assert (token.namespace, token.name, token.key) == (
        "kubeflow-system",
        "kubeflow-trainer-metrics-reader-token",
        "token",
    )
    assert (ca.name, ca.key) == ("kubeflow-trainer-webhook-cert", "ca.crt")
    assert job["authorization"] == {"type": "Bearer", "credentials_file": token.path}
    assert job["tls_config"] == {
        "insecure_skip_verify": False,
        "server_name": "kubeflow-trainer-controller-manager.kubeflow-system.svc",
        "ca_file": ca.path,
    }
    keep = [r for r in job["relabel_configs"] if r.get("action") == "keep"]
    port = ["__meta_kubernetes_endpointslice_port_name"]
    assert {"action": "keep", "source_labels": port, "regex": "monitoring-port"} in keep
    assert {r["target_label"] for r in job["relabel_configs"] if "target_label" in r} >= {
        "job", "pod", "namespace", "service", "container", "endpoint",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("change", "named"),
    [
        pytest.param(lambda e: e.update(targetPort=8443), "targetPort", id="a target port"),
        pytest.param(lambda e: e.update(relabelings=[]), "relabelings", id="relabelings"),
        pytest.param(lambda e: e["tlsConfig"].update(certFile="/x"), "certFile", id="a client certificate"),
        pytest.param(
            lambda e: e["tlsConfig"].update(ca={"configMap": {}}), "configMap", id="a CA from a ConfigMap"
        ),
    ],
)
def test_a_field_the_translation_does_not_model_fails_loudly(
    monitor: dict[str, Any], change: Any, named: str
) -> None:
    change(monitor["spec"]["endpoints"][0])
    with pytest.raises(prometheus.Unsupported, match=named):
        prometheus.scrape_configs(monitor)


def _slice(port_name: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "manager-abcde",
            "namespace": "kubeflow-system",
            "labels": {"kubernetes.io/service-name": "kubeflow-trainer-controller-manager"},
        },
        "addressType": "IPv4",
        "endpoints": [
            {
                "addresses": ["10.0.0.7"],
                "conditions": {"ready": True},
                "targetRef": {"kind": "Pod", "name": "manager-0", "namespace": "kubeflow-system"},
            }
        ],
        "ports": [{"name": port_name, "port": 8443, "protocol": "TCP"}],
    }


SERVICE: dict[str, Any] = {
    "metadata": {
        "name": "kubeflow-trainer-controller-manager",
        "namespace": "kubeflow-system",
        "labels": {"app.kubernetes.io/name": "trainer", "app.kubernetes.io/component": "manager"},
    }
}
POD: dict[str, Any] = {
    "metadata": {"name": "manager-0", "namespace": "kubeflow-system", "uid": "u"},
    "spec": {
        "nodeName": "n",
        "containers": [{"name": "manager", "ports": [{"name": "metrics", "containerPort": 8443}]}],
    },
    "status": {"phase": "Running", "podIP": "10.0.0.7", "conditions": [{"type": "Ready", "status": "True"}]},
}


def test_an_endpoint_slice_is_labelled_as_kubernetes_discovery_labels_it() -> None:
    (group,) = prometheus.endpointslice_targets([_slice("monitoring-port")], [SERVICE], [POD])
    assert group["targets"] == ["10.0.0.7:8443"]
    labels = group["labels"]
    assert labels["__meta_kubernetes_service_name"] == "kubeflow-trainer-controller-manager"
    assert labels["__meta_kubernetes_service_label_app_kubernetes_io_name"] == "trainer"
    assert labels["__meta_kubernetes_service_labelpresent_app_kubernetes_io_name"] == "true"
    assert labels["__meta_kubernetes_endpointslice_port_name"] == "monitoring-port"
    assert labels["__meta_kubernetes_endpointslice_address_target_kind"] == "Pod"
    assert labels["__meta_kubernetes_pod_name"] == "manager-0"
    assert labels["__meta_kubernetes_pod_container_name"] == "manager"
    assert labels["__meta_kubernetes_pod_phase"] == "Running"


def _relabel(labels: dict[str, str], rules: list[dict[str, Any]]) -> dict[str, str] | None:
    """The part of Prometheus's relabelling the jobs use (keep, drop, replace with ${1}), to check them."""
    out = dict(labels)
    for rule in rules:
        value = rule.get("separator", ";").join(out.get(s, "") for s in rule.get("source_labels", []))
        match = re.fullmatch(rule.get("regex", "(.*)"), value)
        action = rule.get("action", "replace")
        if action == "keep" and not match:
            return None
        if action == "drop" and match:
            return None
        if action == "replace" and match:
            out[rule["target_label"]] = match.expand(
                rule.get("replacement", "${1}").replace("${1}", r"\g<1>")
            )
    return {k: v for k, v in out.items() if not k.startswith("__")}


def test_the_jobs_relabelling_keeps_the_monitored_port_and_names_the_target_as_the_operator_does(
    monitor: dict[str, Any],
) -> None:
    (job,), _ = prometheus.scrape_configs(monitor)
    (kept,) = prometheus.endpointslice_targets([_slice("monitoring-port")], [SERVICE], [POD])
    assert _relabel(kept["labels"], job["relabel_configs"]) == {
        "job": "kubeflow-trainer-controller-manager",
        "service": "kubeflow-trainer-controller-manager",
        "namespace": "kubeflow-system",
        "pod": "manager-0",
        "container": "manager",
        "endpoint": "monitoring-port",
    }
    (other_port,) = prometheus.endpointslice_targets([_slice("webhook-server")], [SERVICE], [POD])
    assert _relabel(other_port["labels"], job["relabel_configs"]) is None
    other_service = copy.deepcopy(SERVICE)
    other_service["metadata"]["labels"]["app.kubernetes.io/name"] = "jobset"
    (unselected,) = prometheus.endpointslice_targets([_slice("monitoring-port")], [other_service], [POD])
    assert _relabel(unselected["labels"], job["relabel_configs"]) is None


def test_grafana_intervals_round_as_grafana_and_never_go_under_the_scrape_interval() -> None:
    assert prometheus.grafana_interval_ms(300_000, max_data_points=1000, min_interval_ms=2000) == 2000
    assert prometheus.grafana_interval_ms(3_600_000, max_data_points=1000, min_interval_ms=2000) == 5000
    assert prometheus.grafana_interval_ms(86_400_000, max_data_points=1000, min_interval_ms=15_000) == 60_000


def test_variables_are_substituted_as_grafana_sends_them_and_an_unknown_one_fails() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = prometheus.dashboard_variables(dashboard)
    assert variables == {"job": "kubeflow-trainer-controller-manager"}
    expr = 'rate(x{job="$job"}[$__rate_interval]) / ${job} [[job]] $__interval $__interval_ms $__range'
    assert prometheus.interpolate(expr, variables, interval_ms=2000, scrape_ms=2000, range_ms=60_500) == (
        'rate(x{job="kubeflow-trainer-controller-manager"}[8s]) / kubeflow-trainer-controller-manager '
        "kubeflow-trainer-controller-manager 2s 2000 60s"
    )
    with pytest.raises(prometheus.Unsupported, match=r"\$namespace"):
        prometheus.interpolate(
            "x{namespace=~'$namespace'}", variables, interval_ms=1, scrape_ms=1, range_ms=1
        )


def test_every_panel_query_of_the_dashboard_is_listed_rows_included() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    targets = prometheus.dashboard_targets(dashboard)
    expected = sum(len(p.get("targets", [])) for p in dashboard["panels"])
    expected += sum(len(q.get("targets", [])) for p in dashboard["panels"] for q in p.get("panels", []))
    assert len(targets) == expected > 0
    assert all(t.expr and t.panel for t in targets)
