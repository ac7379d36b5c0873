"""A real Prometheus for the kind tier: its scrape configuration made from the shipped ServiceMonitor, and the
shipped Grafana dashboard's queries as Grafana would send them.

- :func:`scrape_configs` turns a ``monitoring.coreos.com/v1`` ServiceMonitor into the ``scrape_configs`` the
  Prometheus Operator generates for it (one job per endpoint, ``serviceMonitor/<ns>/<name>/<i>``): the
  EndpointSlices of the selected namespaces (:func:`monitored_namespaces`), kept when the Service's
  labels match ``selector.matchLabels`` and the port's name is the endpoint's ``port``; the target labels
  the operator sets (``namespace``, ``service``, ``pod``, ``container``, ``endpoint``, and ``job``: the
  Service's name);
  ``scheme``, ``path``, ``interval``; ``authorization`` (or the deprecated ``bearerTokenSecret``) and
  ``tlsConfig`` (``ca`` from a Secret, ``serverName``, ``insecureSkipVerify``) with the Secrets they name
  read from files, named as the operator names them in its assets (``secret_<ns>_<name>_<key>``).
  A field it does not model raises :class:`Unsupported`, so a ServiceMonitor that grows one fails the test
  that uses it instead of being scraped as something else. Not modelled: ``namespaceSelector.any``,
  ``matchExpressions``, ``targetPort``, ``jobLabel``, relabelings, client certificates, CAs from
  ConfigMaps, ``basicAuth``, OAuth2.
- Discovery. Debian builds its ``prometheus`` package without Kubernetes service discovery (the Go client it
  needs is not packaged), so where the operator's job has ``kubernetes_sd_configs`` (role
  ``endpointslice``), these jobs read a file (``file_sd_configs``, :data:`TARGETS_FILE`) and
  :func:`endpointslice_targets` writes into it what Kubernetes discovery would have found: one target per
  address and port of each EndpointSlice, with the same ``__meta_kubernetes_*`` labels (of the slice, its
  Service and the Pod it names). The relabelling that selects and names the targets is the operator's, so
  a wrong port name or selector in the ServiceMonitor still leaves Prometheus with nothing to scrape.
  Not reproduced: targets for container ports that no slice lists, annotations, node metadata, and a
  change of the endpoints after the file is written.
- :func:`dashboard_targets` lists every query of a Grafana dashboard (panels inside rows included), and
  :func:`interpolate` substitutes its template variables the way Grafana does before it sends a query:
  the dashboard's own variables (their current value), ``$__interval`` and ``$__interval_ms`` (the time
  range over the panel's data points, rounded as Grafana rounds it, at least the data source's scrape
  interval), ``$__rate_interval`` (``max($__interval + scrape interval, 4 * scrape interval)``) and
  ``$__range``. A variable the dashboard does not define raises :class:`Unsupported`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MONITOR_API_VERSION = "monitoring.coreos.com/v1"
ASSETS_DIR = "/etc/prometheus/assets"
"""Where the Prometheus Pod mounts the copies of the Secrets' keys that the ServiceMonitor names."""
TARGETS_FILE = "/etc/prometheus/config/targets.json"
"""The file the jobs discover their targets from (``file_sd_configs``)."""


class Unsupported(ValueError):
    """The ServiceMonitor or the dashboard uses something this module does not translate."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SecretKey:
    """A key of a Secret that a ServiceMonitor names, and the file Prometheus reads it from."""

    namespace: str
    name: str
    key: str

    @property
    def asset(self) -> str:
        return f"secret_{self.namespace}_{self.name}_{self.key}"

    @property
    def path(self) -> str:
        return f"{ASSETS_DIR}/{self.asset}"


_ENDPOINT_FIELDS = {"port", "path", "scheme", "interval", "authorization", "bearerTokenSecret", "tlsConfig"}
_TLS_FIELDS = {"ca", "serverName", "insecureSkipVerify"}
_SPEC_FIELDS = {"selector", "endpoints", "namespaceSelector"}


def _label_name(label: str) -> str:
    """A Kubernetes label key as Prometheus's service discovery spells it in meta labels."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", label)


def _only(mapping: Mapping[str, Any], allowed: set[str], where: str) -> None:
    extra = sorted(set(mapping) - allowed)
    if extra:
        raise Unsupported(f"{where}: {', '.join(extra)} not modelled (known: {', '.join(sorted(allowed))})")


def _secret(namespace: str, ref: Mapping[str, Any], where: str) -> SecretKey:
    _only(ref, {"name", "key", "optional"}, where)
    if not ref.get("name") or not ref.get("key"):
        raise Unsupported(f"{where}: a Secret reference needs name and key")
    return SecretKey(namespace=namespace, name=str(ref["name"]), key=str(ref["key"]))


def monitored_namespaces(monitor: Mapping[str, Any]) -> list[str]:
    """The namespaces whose endpoints the ServiceMonitor selects from (its own by default)."""
    spec = monitor["spec"]
    if "namespaceSelector" not in spec:
        return [str(monitor["metadata"]["namespace"])]
    _only(spec["namespaceSelector"], {"matchNames"}, "spec.namespaceSelector")
    return [str(n) for n in spec["namespaceSelector"]["matchNames"]]


def _meta(prefix: str, kind: str, mapping: Mapping[str, str] | None) -> dict[str, str]:
    """``<prefix>_<kind>_<name>`` and ``<prefix>_<kind>present_<name>`` for labels or annotations."""
    out = {}
    for key, value in (mapping or {}).items():
        out[f"{prefix}_{kind}_{_label_name(key)}"] = str(value)
        out[f"{prefix}_{kind}present_{_label_name(key)}"] = "true"
    return out


def endpointslice_targets(
    slices: Sequence[Mapping[str, Any]],
    services: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """File-discovery target groups with the labels Kubernetes discovery (role ``endpointslice``) gives the
    same objects (wire dicts: ``metadata``, ``endpoints``, ``ports``...)."""
    service_by = {(s["metadata"]["namespace"], s["metadata"]["name"]): s for s in services}
    pod_by = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in pods}
    groups: list[dict[str, Any]] = []
    for eps in slices:
        meta = eps["metadata"]
        namespace = meta["namespace"]
        common = {
            "__meta_kubernetes_namespace": namespace,
            "__meta_kubernetes_endpointslice_name": meta["name"],
            "__meta_kubernetes_endpointslice_address_type": eps.get("addressType", ""),
            **_meta("__meta_kubernetes_endpointslice", "label", meta.get("labels")),
        }
        service = service_by.get(
            (namespace, (meta.get("labels") or {}).get("kubernetes.io/service-name", ""))
        )
        if service is not None:
            common["__meta_kubernetes_service_name"] = service["metadata"]["name"]
            common.update(_meta("__meta_kubernetes_service", "label", service["metadata"].get("labels")))
        targets = []
        for endpoint in eps.get("endpoints") or []:
            ref = endpoint.get("targetRef") or {}
            conditions = endpoint.get("conditions") or {}
            pod = pod_by.get((namespace, ref.get("name", ""))) if ref.get("kind") == "Pod" else None
            for address in endpoint.get("addresses") or []:
                for port in eps.get("ports") or []:
                    labels = {
                        **common,
                        "__address__": f"{address}:{port['port']}",
                        "__meta_kubernetes_endpointslice_port": str(port["port"]),
                        "__meta_kubernetes_endpointslice_port_name": port.get("name", ""),
                        "__meta_kubernetes_endpointslice_port_protocol": port.get("protocol", "TCP"),
                        "__meta_kubernetes_endpointslice_endpoint_conditions_ready": str(
                            bool(conditions.get("ready"))
                        ).lower(),
                    }
                    if ref:
                        labels["__meta_kubernetes_endpointslice_address_target_kind"] = ref.get("kind", "")
                        labels["__meta_kubernetes_endpointslice_address_target_name"] = ref.get("name", "")
                    if pod is not None:
                        labels.update(_pod_meta(pod, port.get("port")))
                    targets.append(labels)
        groups.extend({"targets": [t.pop("__address__")], "labels": t} for t in targets)
    return groups


def _pod_meta(pod: Mapping[str, Any], port: int | None) -> dict[str, str]:
    """The Pod's discovery labels, with its container that exposes ``port``."""
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    labels = {
        "__meta_kubernetes_pod_name": meta["name"],
        "__meta_kubernetes_pod_ip": status.get("podIP", ""),
        "__meta_kubernetes_pod_node_name": spec.get("nodeName", ""),
        "__meta_kubernetes_pod_host_ip": status.get("hostIP", ""),
        "__meta_kubernetes_pod_uid": meta.get("uid", ""),
        "__meta_kubernetes_pod_phase": status.get("phase", ""),
        "__meta_kubernetes_pod_ready": str(
            any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])
        ).lower(),
        **_meta("__meta_kubernetes_pod", "label", meta.get("labels")),
    }
    for owner in meta.get("ownerReferences") or []:
        if owner.get("controller"):
            labels["__meta_kubernetes_pod_controller_kind"] = owner["kind"]
            labels["__meta_kubernetes_pod_controller_name"] = owner["name"]
    for container in spec.get("containers") or []:
        for container_port in container.get("ports") or []:
            if container_port.get("containerPort") == port:
                labels["__meta_kubernetes_pod_container_name"] = container["name"]
                labels["__meta_kubernetes_pod_container_port_name"] = container_port.get("name", "")
                labels["__meta_kubernetes_pod_container_port_number"] = str(port)
                labels["__meta_kubernetes_pod_container_port_protocol"] = container_port.get(
                    "protocol", "TCP"
                )
    return labels


def scrape_configs(
    monitor: Mapping[str, Any], *, interval: str | None = None
) -> tuple[list[dict[str, Any]], list[SecretKey]]:
    """The scrape jobs for ``monitor`` and the Secret keys they read; ``interval`` overrides every
    endpoint's ``interval`` (the kind tier scrapes every few seconds)."""
    if monitor.get("apiVersion") != MONITOR_API_VERSION or monitor.get("kind") != "ServiceMonitor":
        raise Unsupported(f"not a {MONITOR_API_VERSION} ServiceMonitor: {monitor.get('kind')!r}")
    meta, spec = monitor["metadata"], monitor["spec"]
    namespace, name = meta["namespace"], meta["name"]
    _only(spec, _SPEC_FIELDS, "spec")
    selector = spec.get("selector") or {}
    _only(selector, {"matchLabels"}, "spec.selector")
    monitored_namespaces(monitor)  # the selector is one this module models

    keep_service = [
        {
            "action": "keep",
            "source_labels": [
                f"__meta_kubernetes_service_label_{_label_name(k)}",
                f"__meta_kubernetes_service_labelpresent_{_label_name(k)}",
            ],
            "regex": f"({re.escape(str(v))});true",
        }
        for k, v in sorted((selector.get("matchLabels") or {}).items())
    ]
    jobs: list[dict[str, Any]] = []
    secrets: list[SecretKey] = []
    for i, endpoint in enumerate(spec["endpoints"]):
        where = f"spec.endpoints[{i}]"
        _only(endpoint, _ENDPOINT_FIELDS, where)
        if "port" not in endpoint:
            raise Unsupported(f"{where}: only endpoints that name the Service's port are modelled")
        port = str(endpoint["port"])
        job: dict[str, Any] = {
            "job_name": f"serviceMonitor/{namespace}/{name}/{i}",
            "honor_labels": False,
            "file_sd_configs": [{"files": [TARGETS_FILE]}],
            "scrape_interval": interval or endpoint.get("interval", "30s"),
            "metrics_path": endpoint.get("path", "/metrics"),
            "scheme": endpoint.get("scheme", "http"),
            "relabel_configs": [
                *keep_service,
                {
                    "action": "keep",
                    "source_labels": ["__meta_kubernetes_endpointslice_port_name"],
                    "regex": port,
                },
                {
                    "source_labels": [
                        "__meta_kubernetes_endpointslice_address_target_kind",
                        "__meta_kubernetes_endpointslice_address_target_name",
                    ],
                    "separator": ";",
                    "regex": "Pod;(.*)",
                    "replacement": "${1}",
                    "target_label": "pod",
                },
                {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
                {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
                {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
                {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
                {
                    "action": "drop",
                    "source_labels": ["__meta_kubernetes_pod_phase"],
                    "regex": "(Failed|Succeeded)",
                },
                {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job"},
                {"target_label": "endpoint", "replacement": port},
            ],
        }
        token: SecretKey | None = None
        if "authorization" in endpoint:
            authorization = endpoint["authorization"]
            _only(authorization, {"type", "credentials"}, f"{where}.authorization")
            token = _secret(namespace, authorization["credentials"], f"{where}.authorization.credentials")
            kind = authorization.get("type", "Bearer")
        elif "bearerTokenSecret" in endpoint:
            token = _secret(namespace, endpoint["bearerTokenSecret"], f"{where}.bearerTokenSecret")
            kind = "Bearer"
        if token is not None:
            job["authorization"] = {"type": kind, "credentials_file": token.path}
            secrets.append(token)
        if "tlsConfig" in endpoint:
            tls = endpoint["tlsConfig"]
            _only(tls, _TLS_FIELDS, f"{where}.tlsConfig")
            config: dict[str, Any] = {"insecure_skip_verify": bool(tls.get("insecureSkipVerify", False))}
            if "serverName" in tls:
                config["server_name"] = tls["serverName"]
            if "ca" in tls:
                _only(tls["ca"], {"secret"}, f"{where}.tlsConfig.ca")
                ca = _secret(namespace, tls["ca"]["secret"], f"{where}.tlsConfig.ca.secret")
                config["ca_file"] = ca.path
                secrets.append(ca)
            job["tls_config"] = config
        jobs.append(job)
    return jobs, secrets


# --------------------------------------------------------------------------------------------- Grafana


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """One query of a dashboard panel."""

    panel: str
    ref_id: str
    expr: str
    legend: str


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels") or [])  # a collapsed row keeps its panels inside


def dashboard_targets(dashboard: Mapping[str, Any]) -> list[Target]:
    """Every Prometheus query of the dashboard, in panel order."""
    return [
        Target(
            panel=str(panel.get("title", "")),
            ref_id=str(target.get("refId", "")),
            expr=str(target["expr"]),
            legend=str(target.get("legendFormat", "")),
        )
        for panel in _panels(list(dashboard.get("panels") or []))
        for target in panel.get("targets") or []
        if target.get("expr")
    ]


def dashboard_variables(dashboard: Mapping[str, Any]) -> dict[str, str]:
    """The current value of each of the dashboard's template variables (data source variables excluded:
    they choose where a query goes, not what it says)."""
    values = {}
    for variable in (dashboard.get("templating") or {}).get("list") or []:
        if variable.get("type") == "datasource":
            continue
        current = (variable.get("current") or {}).get("value")
        if current is None:
            options = str(variable.get("query", "")).split(",")
            current = options[0].strip() if options else ""
        if isinstance(current, list):
            if len(current) != 1:
                raise Unsupported(f"variable {variable['name']}: multi-value selections are not modelled")
            current = current[0]
        values[str(variable["name"])] = str(current)
    return values


# Grafana's rounding of a computed interval (``roundInterval``): each bound in ms and what it rounds to.
_ROUNDING_MS = (
    (10, 1),
    (15, 10),
    (35, 20),
    (75, 50),
    (150, 100),
    (350, 200),
    (750, 500),
    (1_500, 1_000),
    (3_500, 2_000),
    (7_500, 5_000),
    (12_500, 10_000),
    (17_500, 15_000),
    (25_000, 20_000),
    (45_000, 30_000),
    (90_000, 60_000),
    (210_000, 120_000),
    (450_000, 300_000),
    (1_050_000, 600_000),
    (2_100_000, 1_200_000),
    (6_300_000, 3_600_000),
)


def grafana_interval_ms(range_ms: int, *, max_data_points: int, min_interval_ms: int) -> int:
    """``$__interval`` in ms: the range over the data points, rounded, at least the minimum interval."""
    raw = range_ms / max(max_data_points, 1)
    rounded = next((to for bound, to in _ROUNDING_MS if raw <= bound), 3_600_000 * round(raw / 3_600_000))
    return max(rounded, min_interval_ms)


def _duration(ms: int) -> str:
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


_VARIABLE = re.compile(r"\$\{(\w+)(?::(\w+))?\}|\[\[(\w+)\]\]|\$(\w+)")


def interpolate(
    expr: str, variables: Mapping[str, str], *, interval_ms: int, scrape_ms: int, range_ms: int
) -> str:
    """``expr`` with every template variable replaced, as Grafana sends it to Prometheus."""
    builtins = {
        "__interval": _duration(interval_ms),
        "__interval_ms": str(interval_ms),
        "__rate_interval": _duration(max(interval_ms + scrape_ms, 4 * scrape_ms)),
        "__range": _duration(range_ms - range_ms % 1000),
        "__range_s": str(range_ms // 1000),
        "__range_ms": str(range_ms),
    }

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(3) or match.group(4)
        if match.group(2):
            raise Unsupported(f"{match.group(0)}: variable formats are not modelled")
        if name in builtins:
            return builtins[name]
        if name in variables:
            return variables[name]
        raise Unsupported(f"{match.group(0)}: the dashboard defines no such variable")

    return _VARIABLE.sub(value, expr)
