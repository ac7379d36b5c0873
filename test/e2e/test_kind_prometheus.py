"""The manager scraped by a real Prometheus as the shipped ServiceMonitor says, and every query of the shipped
Grafana dashboard answered by it.

kind only (``E2E_CLUSTER=kind``, after ``hack/e2e-setup-kind.sh``, which loads ``PROMETHEUS_IMAGE``: Debian's
``prometheus`` package, built by ``hack/build-images.sh``). No Prometheus Operator runs here; the test does
what it would do for the ServiceMonitor the installation ships:

- the ServiceMonitor and its scraper identity (the ServiceAccount ``kubeflow-trainer-metrics-reader``, its
  token Secret, the ClusterRole allowed ``GET /metrics`` and its binding) come from the installation: the
  chart rendered with the installed release's values and ``serviceMonitor.enabled=true``
  (``E2E_INSTALL=helm``) or ``config/components/prometheus`` (kustomize). The identity objects are applied
  as the chart or the component would install them (not the ServiceMonitor: kind has no ServiceMonitor CRD),
  and deleted afterwards;
- the scrape job is made from the ServiceMonitor by ``support.prometheus.scrape_configs`` (the operator's
  relabelling: the Service's labels, its port by name, the ``job``/``pod``/... target labels; HTTPS, the
  bearer token and the CA read from the Secrets it names, the server name it says), with a 2 s interval;
  the Secrets' keys are copied next to Prometheus as the operator copies them into its assets. Debian's
  Prometheus has no Kubernetes discovery, so the test lists the EndpointSlices, Services and Pods of the
  monitored namespaces and writes the targets Kubernetes discovery would find into the job's target
  file (``support.prometheus.endpointslice_targets``); Prometheus itself reads nothing from the API.

Then: the target must be up; TrainJobs run (one that completes on two nodes, one whose node exits 1, so
the failure panels count something); once Prometheus scraped after both finished, every ``expr`` of
``config/components/grafana/kubeflow-trainer-dashboard.json``, with its variables substituted as Grafana
would for the time range of the test, goes to ``/api/v1/query_range`` (what a Grafana time-series panel
sends). The test fails, naming each panel and expression, on an invalid expression, one that returns no
series or only NaN, and a legend that names a label the series do not have.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.client.client import Client
from controller.client.errors import NotFound
from controller.client.gvk import GVK
from support import allreduce_runtime as allreduce
from support import e2e_paths as paths
from support import helm as helm_binary
from support import prometheus
from support.kind_jobs import create, skip_unless_kind, trainjob, wait_finished

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "config" / "components" / "grafana" / "kubeflow-trainer-dashboard.json"
COMPONENT = ROOT / "config" / "components" / "prometheus"
CHART = ROOT / "charts" / "kubeflow-trainer-py"
RELEASE = "kubeflow-trainer"
FIELD_MANAGER = "test-kind-prometheus"
SCRAPE_INTERVAL_MS = 2000
MAX_DATA_POINTS = 1000
"""A Grafana panel about 1000 pixels wide asks for as many points."""
POD = "prometheus"
PORT = 9090
TARGET_TIMEOUT = 90.0
"""Prometheus starts in seconds and scrapes every 2 s: longer means the target is not going to be up."""


@pytest.fixture(scope="module", autouse=True)
def on_kind(e2e_cluster: Any) -> None:
    skip_unless_kind(e2e_cluster, "real Pods and the installed Deployment")


def _image(variable: str) -> str:
    image = os.environ.get(variable, "")
    if not image:
        pytest.fail(f"{variable} is not set (hack/e2e-setup-kind.sh exports it)", pytrace=False)
    return image


@pytest.fixture(scope="module")
def client(e2e_cluster: Any) -> Iterator[Client]:
    c = Client.load(str(e2e_cluster.kubeconfig), user_agent="test_kind_prometheus")
    try:
        yield c
    finally:
        c.close()


# ------------------------------------------------------------------------------ what the install ships


@pytest.fixture
def shipped(e2e_cluster: Any, prerequisite: Any, tmp_path: Path) -> list[dict[str, Any]]:
    """The ServiceMonitor and its scraper identity, as the installation under test ships them."""
    if os.environ.get("E2E_INSTALL", "helm") == "kustomize":
        return [
            doc
            for path in sorted(COMPONENT.glob("*.yaml"))
            if path.name != "kustomization.yaml"
            for doc in yaml.safe_load_all(path.read_text())
            if doc
        ]
    helm = str(helm_binary.ensure_helm(prerequisite))
    env = {**helm_binary.helm_env(tmp_path / "helm"), "KUBECONFIG": str(e2e_cluster.kubeconfig)}

    def run(*args: str) -> str:
        done = subprocess.run(
            [helm, *args], capture_output=True, text=True, env=env, timeout=120, check=False
        )
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    values = tmp_path / "values.json"
    values.write_text(run("get", "values", RELEASE, "-n", paths.MANAGER_NAMESPACE, "-o", "json"))
    rendered = run(
        "template", RELEASE, str(CHART), "-n", paths.MANAGER_NAMESPACE, "-f", str(values),
        "--set", "serviceMonitor.enabled=true", "--show-only", "templates/prometheus/service_monitor.yaml",
    )  # fmt: skip
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


# ------------------------------------------------------------------------------------------- Prometheus


def prometheus_config(jobs: list[dict[str, Any]]) -> str:
    return yaml.safe_dump({"global": {"evaluation_interval": "1m"}, "scrape_configs": jobs}, sort_keys=False)


def prometheus_pod(image: str) -> dict[str, Any]:
    restricted = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "runAsUser": 65534,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    return {
        "metadata": {"name": POD, "labels": {"app": POD}},
        "spec": {
            "serviceAccountName": POD,
            "automountServiceAccountToken": False,  # it reads no API: discovery is a file (see discovered)
            "containers": [
                {
                    "name": POD,
                    "image": image,
                    "imagePullPolicy": "IfNotPresent",
                    # The Pod IP only: the API server's Pod proxy is the one client.
                    "args": [
                        "--config.file=/etc/prometheus/config/prometheus.yml",
                        "--storage.tsdb.path=/prometheus",
                        f"--web.listen-address=$(POD_IP):{PORT}",
                    ],
                    "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                    "ports": [{"name": "web", "containerPort": PORT}],
                    "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
                    "securityContext": restricted,
                    "volumeMounts": [
                        {"name": "config", "mountPath": "/etc/prometheus/config"},
                        {"name": "assets", "mountPath": prometheus.ASSETS_DIR},
                        {"name": "data", "mountPath": "/prometheus"},
                    ],
                }
            ],
            "volumes": [
                {"name": "config", "configMap": {"name": POD}},
                {"name": "assets", "secret": {"secretName": f"{POD}-assets"}},
                {"name": "data", "emptyDir": {}},
            ],
        },
    }


def api(client: Client, namespace: str, path: str, **params: str) -> dict[str, Any]:
    """GET Prometheus's HTTP API through the API server's Pod proxy; an error answer is returned as is."""
    proxy = f"/api/v1/namespaces/{namespace}/pods/{POD}:{PORT}/proxy{path}"
    response = client.transport.request("GET", proxy, query=list(params.items()))
    if response.status not in {200, 400, 422}:  # Prometheus's answers to a bad query are JSON too
        raise AssertionError(f"GET {path}: {response.status} {response.body[:300]!r}")
    try:
        answer: dict[str, Any] = json.loads(response.body)
    except ValueError as exc:
        raise AssertionError(f"GET {path}: not JSON: {response.body[:300]!r}") from exc
    return answer


def discovered(client: Client, monitor: dict[str, Any]) -> str:
    """What Kubernetes discovery (role endpointslice) finds in the ServiceMonitor's namespaces, as the
    target file of the jobs (Debian's Prometheus has no Kubernetes discovery: ``support.prometheus``)."""
    slices, services, pods = [], [], []
    for watched in prometheus.monitored_namespaces(monitor):
        slices += client.list(GVK("discovery.k8s.io", "v1", "EndpointSlice"), watched).items
        services += client.list(GVK("", "v1", "Service"), watched).items
        pods += client.list(GVK("", "v1", "Pod"), watched).items
    return json.dumps(prometheus.endpointslice_targets(slices, services, pods), indent=1)


# --------------------------------------------------------------------------------------------- TrainJobs


# ------------------------------------------------------------------------------------------------- test


def test_kind_prometheus_scrapes_the_manager_as_the_service_monitor_says_and_answers_every_dashboard_query(
    e2e_cluster: Any,
    client: Client,
    namespace: str,
    shipped: list[dict[str, Any]],
    eventually: Callable[..., Any],
) -> None:
    prometheus_image, workload_image = _image("PROMETHEUS_IMAGE"), _image("WORKLOAD_IMAGE")
    (monitor,) = [o for o in shipped if o["kind"] == "ServiceMonitor"]
    jobs, secrets = prometheus.scrape_configs(monitor, interval=f"{SCRAPE_INTERVAL_MS // 1000}s")
    applied = [o for o in shipped if o["kind"] != "ServiceMonitor"]  # the scraper's identity
    try:
        for obj in applied:
            client.apply(obj, FIELD_MANAGER)

        def secret_data() -> dict[str, bytes]:
            data = {}
            for ref in secrets:
                stored = e2e_cluster.core.read_namespaced_secret(ref.name, ref.namespace).data or {}
                assert stored.get(ref.key), f"Secret {ref.namespace}/{ref.name} has no {ref.key!r} yet"
                data[ref.asset] = stored[ref.key]
            return data

        assets = eventually(secret_data, timeout=60.0)  # the token controller fills the token Secret
        core = e2e_cluster.core
        core.create_namespaced_service_account(namespace, {"metadata": {"name": POD}})
        core.create_namespaced_secret(namespace, {"metadata": {"name": f"{POD}-assets"}, "data": assets})
        config = {"prometheus.yml": prometheus_config(jobs), "targets.json": discovered(client, monitor)}
        core.create_namespaced_config_map(namespace, {"metadata": {"name": POD}, "data": config})
        core.create_namespaced_pod(namespace, prometheus_pod(prometheus_image))

        def targets_up() -> list[dict[str, Any]]:
            targets = api(client, namespace, "/api/v1/targets")
            active = targets.get("data", {}).get("activeTargets", [])
            dropped = len(targets.get("data", {}).get("droppedTargets", []))
            assert active, f"no active target (the relabelling dropped {dropped} discovered): {targets}"
            down = [(t["scrapeUrl"], t["health"], t["lastError"]) for t in active if t["health"] != "up"]
            assert not down, f"targets not up: {down}"
            return list(active)

        started = time.monotonic()
        up = eventually(targets_up, timeout=TARGET_TIMEOUT, interval=1.0)
        urls = [t["scrapeUrl"] for t in up]
        print(f"prometheus: targets {urls} up in {time.monotonic() - started:.1f} s")
        for target in up:
            assert target["labels"]["job"] == paths.MANAGER_NAME, target["labels"]
            assert target["scrapeUrl"].startswith("https://"), target["scrapeUrl"]
        start = time.time()

        # TrainJobs while Prometheus scrapes: one completes, one fails.
        runtimes = {
            "sum": allreduce.allreduce_runtime(
                "allreduce", workload_image, command=["python3", "allreduce.py"]
            ),
            "exits": allreduce.allreduce_runtime(
                "exits", workload_image, command=["python3", "-c", "raise SystemExit(1)"], num_nodes=1
            ),
        }
        failing = runtimes["exits"]["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
        failing["backoffLimit"] = 0
        failing["template"]["spec"]["restartPolicy"] = "Never"
        for runtime in runtimes.values():
            create(e2e_cluster, namespace, runtime)
        for name, runtime in runtimes.items():
            # Right after its runtime: the webhook confirms a runtime its cache lacks with a live read.
            num_nodes = runtime["spec"]["mlPolicy"]["numNodes"]
            create(e2e_cluster, namespace, trainjob(name, runtime["metadata"]["name"], num_nodes=num_nodes))
        outcomes = {
            name: wait_finished(e2e_cluster, namespace, name, eventually)["type"] for name in runtimes
        }
        assert outcomes == {"sum": "Complete", "exits": "Failed"}, outcomes
        both_finished = time.time()

        def scraped_since_finished() -> None:
            # Every replica's target (the Deployment may run several), scraped since both finished.
            active = api(client, namespace, "/api/v1/targets", state="active")["data"]["activeTargets"]
            assert active, "no active target"
            for each in active:
                assert each["health"] == "up", each
                last = each["lastScrape"]
                assert _rfc3339(last) > both_finished + 0.5, (
                    f"{each['scrapeUrl']}: last scrape {last} is not after both TrainJobs finished"
                )

        eventually(scraped_since_finished, timeout=60.0, interval=1.0)
        end = time.time()
        range_ms = int((end - start) * 1000)
        interval_ms = prometheus.grafana_interval_ms(
            range_ms, max_data_points=MAX_DATA_POINTS, min_interval_ms=SCRAPE_INTERVAL_MS
        )

        dashboard = json.loads(DASHBOARD.read_text())
        variables = prometheus.dashboard_variables(dashboard)
        targets = prometheus.dashboard_targets(dashboard)
        assert targets, "the dashboard has no queries"
        failures = []
        for query in targets:
            expr = prometheus.interpolate(
                query.expr,
                variables,
                interval_ms=interval_ms,
                scrape_ms=SCRAPE_INTERVAL_MS,
                range_ms=range_ms,
            )
            answer = api(
                client,
                namespace,
                "/api/v1/query_range",
                query=expr,
                start=f"{start:.3f}",
                end=f"{end:.3f}",
                step=f"{interval_ms / 1000:g}s",
            )
            problem = _problem(answer, query.legend)
            print(f"prometheus: {query.panel} ({query.ref_id}): {problem or _summary(answer)}")
            if problem:
                failures.append(f"panel {query.panel!r} ({query.ref_id}): {problem}\n    {expr}")
        print(f"prometheus: {len(targets)} queries over {range_ms / 1000:.0f} s, step {interval_ms} ms")
        assert not failures, "dashboard queries without data:\n" + "\n".join(failures)
    finally:
        for obj in reversed(applied):
            with contextlib.suppress(NotFound):
                client.delete(GVK.of(obj), obj["metadata"]["name"], obj["metadata"].get("namespace"))


def _rfc3339(text: str) -> float:
    """Seconds since the epoch of Prometheus's RFC 3339 time (nanoseconds, ``Z`` or an offset)."""
    match = re.fullmatch(r"(.+T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", text)
    assert match is not None, text
    offset = "+00:00" if match[3] == "Z" else match[3]
    return datetime.fromisoformat(match[1] + offset).timestamp() + float("0." + (match[2] or "0"))


def _summary(answer: dict[str, Any]) -> str:
    series = answer["data"]["result"]
    values = [float(v) for s in series for _, v in s["values"] if v != "NaN"]
    return f"{len(series)} series, {len(values)} values, max {max(values):g}"


def _problem(answer: dict[str, Any], legend: str) -> str:
    """Why a query's answer is not something a panel can draw, or "" when it is."""
    if answer.get("status") != "success":
        return f"{answer.get('errorType')}: {answer.get('error')}"
    series = answer["data"]["result"]
    if not series:
        return "no series"
    if all(value == "NaN" for s in series for _, value in s["values"]):
        return f"{len(series)} series, every value NaN"
    for label in re.findall(r"\{\{\s*(\w+)\s*\}\}", legend):
        missing = [s["metric"] for s in series if label not in s["metric"]]
        if missing:
            return f"the legend {legend!r} names {label!r}, which series {missing[0]} do not have"
    return ""
