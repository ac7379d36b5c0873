#!/usr/bin/env python3
"""``make bench-scale``: our controller and upstream's Go controller, side by side at scale, on one machine.

Usage::

    python hack/bench_scale.py                  # everything, figures into docs/performance/
    python hack/bench_scale.py --quick          # a smoke run with small counts, into build/bench-scale-quick/
    python hack/bench_scale.py --scenarios burst,steady --controllers ours   # re-run a part

Each scenario runs against our manager (the ``trainer-controller-manager`` console script of this Python,
with ``config/manager/controller_manager_config.yaml``) and then against upstream's
(``hack/upstream_trainer.py``: the unmodified v2.3.0 Go binary with upstream's shipped configuration), one
after the other, each on a fresh Tier 1 control plane (``controller.envtest``: etcd + kube-apiserver, no
controller-manager) with our CRDs, the JobSet CRD and scheduler-plugins' PodGroup CRD installed and the
``torch-distributed`` ClusterTrainingRuntime of ``config/runtimes/``. No JobSet controller runs: a JobSet
is a stored object, so every figure is the Trainer controller's. Both managers run out of cluster as the
admin, with leader election off, certificate management off (a throwaway serving certificate), no webhook
configurations, metrics over HTTP on loopback, and the same client rate limit (QPS 50 / burst 100, one
token bucket per resource type in both) unless a scenario lifts it for both. A re-run of some scenarios or
controllers replaces only their entries in ``results.json``.

Scenarios (``--scenarios``, all by default; counts shrink with ``--quick``):

- ``burst``: 1,000 TrainJobs created at once (8 client threads): time from the first create until every
  JobSet exists, API requests per TrainJob by verb and resource (from kube-apiserver's
  ``apiserver_request_total``, less the benchmark's own requests), reconcile errors, manager CPU; then, on
  the same plane, ``idle``: the settled TrainJobs for 60 s, counting the writes made;
- ``burst-lifted``: the same burst with both controllers' limiters lifted (QPS and burst 100,000), so the
  throughput can be set against ``ceiling``;
- ``steady``: 20 then 50 creates/s for 60 s each (open loop): creation → JobSet latency, from the
  benchmark's own watches (TrainJob ADDED → JobSet ADDED), cross-checked with our
  ``kubeflow_trainer_trainjob_jobset_creation_seconds`` histogram (whole-second resolution);
- ``scale``: 10,000 TrainJobs on a CoScheduling runtime (a JobSet, a PodGroup and a snapshot ConfigMap
  each; populated with the limiter lifted to keep the run short): resident memory after settling and
  manager CPU-seconds per TrainJob; then a restart under the shipped limiter: time to caches synced (the
  TrainJob controller's "workers started" log line), until the initial reconciles drained, and the writes
  made (none expected);
- ``ceiling``: no controller; a tight client (8 and 16 threads) server-side applies JobSets as the
  controller renders them: the API server's own SSA throughput;
- ``micro``: ``pytest -m benchmark`` (what ``make bench`` runs), its output saved beside the results.

Output: one table on stdout, ``results.json`` (every figure, the load average before and after each run,
versions) and PNG plots in the output directory. Benchmarks report; they assert nothing: the table's
``target`` column says which targets a run met.

Request accounting: ``apiserver_request_total`` has no user label, so the benchmark counts its own requests
(by verb and resource) and subtracts them; WATCH requests (counted by the API server when they end) and
``leases`` (kube-apiserver's own heartbeats; no manager here holds a Lease) are left out.

Threads: the benchmark's watches and client pools are threads of this script, each named and joined before
the scenario ends (the rule that only ``controller/`` starts threads is about the product).

Deliberately missing: a JobSet controller, kubelets and Pods (nothing runs), admission webhooks, more than
one replica, and any assertion on time.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import json
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from controller.client.client import Client
from controller.client.errors import ApiError, Gone, TransportError, WatchTimeout
from controller.client.gvk import GVK
from controller.client.object import deep_copy
from controller.envtest import ControlPlane, find_binaries, load_script
from controller.envtest.process import install_sigterm_handler
from runtime.render import Document, RenderOptions
from runtime.render import render as render_objects

REPO = Path(__file__).resolve().parent.parent
HACK = REPO / "hack"
OUR_CONFIG = REPO / "config" / "manager" / "controller_manager_config.yaml"
RUNTIME_FILE = REPO / "config" / "runtimes" / "torch-distributed.yaml"
CRD_DIR = REPO / "config" / "crd"

NAMESPACE = "bench"
FIELD_MANAGER = "bench-scale"
RUNTIME = "torch-distributed"
COSCHEDULING_RUNTIME = "torch-distributed-coscheduling"
CONTROLLER = "trainjob_controller"
CONTROLLERS = ("ours", "upstream")
SHIPPED_QPS, SHIPPED_BURST = 50.0, 100
LIFTED_QPS, LIFTED_BURST = 100_000.0, 100_000
CREATE_THREADS = 8

TRAINJOB = GVK("trainer.kubeflow.org", "v1alpha1", "TrainJob")
JOBSET = GVK("jobset.x-k8s.io", "v1alpha2", "JobSet")
PODGROUP = GVK("scheduling.x-k8s.io", "v1alpha1", "PodGroup")

WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"})
READ_VERBS = frozenset({"GET", "LIST"})
IGNORED_RESOURCES = frozenset({"", "leases", "endpoints", "endpointslices"})
"""Not the managers': discovery (no resource) and what kube-apiserver writes for itself (its Lease heartbeats,
the ``kubernetes`` Service's endpoints). Non-resource paths (``/openapi/v3``...) are left out too."""

SCENARIOS = ("burst", "burst-lifted", "steady", "scale", "ceiling", "micro")


# ====================================================================================== pure parts (tested)


@dataclass(frozen=True, slots=True)
class Sample:
    """One line of the Prometheus text format."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    def label(self, key: str) -> str:
        for name, value in self.labels:
            if name == key:
                return value
        return ""


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_UNESCAPE = {"n": "\n", "\\": "\\", '"': '"'}


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: _UNESCAPE.get(m.group(1), m.group(0)), text)


def parse_prometheus(text: str, prefixes: Sequence[str] = ()) -> list[Sample]:
    """The samples of a Prometheus text exposition (comments skipped); with ``prefixes``, only the
    families whose names start with one of them (cheap on kube-apiserver's multi-megabyte page)."""
    samples: list[Sample] = []
    wanted = tuple(prefixes)
    for line in text.splitlines():
        if not line or line.startswith("#") or (wanted and not line.startswith(wanted)):
            continue
        match = _SAMPLE.match(line.strip())
        if match is None:
            raise ValueError(f"not a Prometheus sample line: {line[:200]!r}")
        name, raw_labels, raw_value = match.groups()
        labels: list[tuple[str, str]] = []
        if raw_labels:
            position = 0
            while position < len(raw_labels):
                label = _LABEL.match(raw_labels, position)
                if label is None:
                    raise ValueError(f"bad labels in Prometheus line: {line[:200]!r}")
                labels.append((label.group(1), _unescape(label.group(2))))
                position = label.end()
        samples.append(Sample(name, tuple(sorted(labels)), float(raw_value)))
    return samples


def metric_sum(samples: Iterable[Sample], family: str, **match: str) -> float:
    """The sum of family ``family``'s samples whose labels include ``match``."""
    return sum(
        s.value for s in samples if s.name == family and all(s.label(k) == v for k, v in match.items())
    )


RequestKey = tuple[str, str, str]
"""(verb, resource[/subresource], HTTP code) as kube-apiserver's ``apiserver_request_total`` labels them."""


def apiserver_requests(samples: Iterable[Sample]) -> Counter[RequestKey]:
    """``apiserver_request_total`` by (verb, resource[/subresource], code), summed over the other labels."""
    counts: Counter[RequestKey] = Counter()
    for s in samples:
        if s.name != "apiserver_request_total":
            continue
        resource = s.label("resource")
        if s.label("subresource"):
            resource = f"{resource}/{s.label('subresource')}"
        counts[(s.label("verb"), resource, s.label("code"))] += int(s.value)
    return counts


def subtract(after: Mapping[RequestKey, int], before: Mapping[RequestKey, int]) -> Counter[RequestKey]:
    """``after - before`` per key, keeping positive differences only."""
    delta: Counter[RequestKey] = Counter()
    for key, value in after.items():
        if value - before.get(key, 0) > 0:
            delta[key] = value - before.get(key, 0)
    return delta


def managers_requests(
    delta: Mapping[RequestKey, int], own: Mapping[tuple[str, str], int]
) -> Counter[RequestKey]:
    """The API server's ``delta`` less the benchmark's ``own`` (verb, resource) requests (all answered 2xx,
    taken from the 2xx codes in order), without WATCH and without :data:`IGNORED_RESOURCES`."""
    remaining = Counter(own)
    result: Counter[RequestKey] = Counter()
    for (verb, resource, code), value in sorted(delta.items()):
        if verb == "WATCH" or resource in IGNORED_RESOURCES or resource.startswith("/"):
            continue
        left = value
        if code.startswith("2") and remaining[(verb, resource)] > 0:
            taken = min(left, remaining[(verb, resource)])
            remaining[(verb, resource)] -= taken
            left -= taken
        if left > 0:
            result[(verb, resource, code)] = left
    return result


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestSummary:
    """A manager's requests over a scenario: writes are 2xx answers to writing verbs."""

    writes: int
    reads: int
    failed: int
    """Requests answered with something other than 2xx (conflicts, NotFound...)."""
    by_verb_resource: dict[str, int]
    """``"VERB resource"`` (codes summed) -> count."""

    def per(self, n: int) -> dict[str, float]:
        return {key: value / n for key, value in sorted(self.by_verb_resource.items())} if n else {}


def summarize_requests(requests: Mapping[RequestKey, int]) -> RequestSummary:
    writes = reads = failed = 0
    by: Counter[str] = Counter()
    for (verb, resource, code), value in requests.items():
        ok = code.startswith("2")
        if verb in WRITE_VERBS and ok:
            writes += value
        if verb in READ_VERBS:
            reads += value
        if not ok:
            failed += value
        by[f"{verb} {resource}"] += value
    return RequestSummary(
        writes=writes, reads=reads, failed=failed, by_verb_resource=dict(sorted(by.items()))
    )


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0..1) by linear interpolation between order statistics (numpy's default);
    NaN for no values."""
    if not 0 <= q <= 1:
        raise ValueError(f"q must be within [0, 1], got {q}")
    if not values:
        return math.nan
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float:
    """Prometheus' ``histogram_quantile``: ``buckets`` are (upper bound, cumulative count), +Inf last;
    linear interpolation inside the bucket; the highest finite bound if the quantile is in +Inf."""
    ordered = sorted(buckets)
    if not ordered or ordered[-1][1] <= 0:
        return math.nan
    rank = q * ordered[-1][1]
    previous_bound, previous_count = 0.0, 0.0
    for bound, count in ordered:
        if count >= rank:
            if math.isinf(bound):
                return previous_bound
            if count == previous_count:
                return bound
            return previous_bound + (bound - previous_bound) * (rank - previous_count) / (
                count - previous_count
            )
        previous_bound, previous_count = bound, count
    return previous_bound


def histogram_buckets(samples: Iterable[Sample], name: str) -> list[tuple[float, float]]:
    """The (le, cumulative count) pairs of histogram ``name`` summed over its other labels."""
    sums: Counter[float] = Counter()
    for s in samples:
        if s.name == f"{name}_bucket":
            sums[float(s.label("le"))] += s.value
    return sorted(sums.items())


def subtract_buckets(
    after: Sequence[tuple[float, float]], before: Sequence[tuple[float, float]]
) -> list[tuple[float, float]]:
    earlier = dict(before)
    return [(bound, count - earlier.get(bound, 0.0)) for bound, count in after]


def proc_cpu_seconds(stat: str, ticks_per_second: int) -> float:
    """User + system CPU seconds from the text of ``/proc/<pid>/stat`` (fields 14 and 15)."""
    # The command name (field 2) is in parentheses and may hold spaces: split after its closing one.
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / ticks_per_second


def proc_rss_bytes(status: str) -> int:
    """``VmRSS`` from the text of ``/proc/<pid>/status``, in bytes."""
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            value, unit = line.split()[1:3]
            if unit != "kB":
                raise ValueError(f"unexpected VmRSS unit {unit!r}")
            return int(value) * 1024
    raise ValueError("no VmRSS line (is the process a zombie?)")


def top_frames(collapsed: str, limit: int = 20) -> list[tuple[str, float]]:
    """The frames where most samples were taken (self time), as (frame, share of all samples), from
    py-spy's ``raw`` output: one line per distinct stack, ``frame;frame;...;leaf count``."""
    leaves: Counter[str] = Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        leaves[stack.rsplit(";", 1)[-1]] += int(count)
        total += int(count)
    return [(frame, n / total) for frame, n in leaves.most_common(limit)] if total else []


def steady_rates(steady: Mapping[str, Any]) -> list[int]:
    """The creation rates measured in the steady scenario's results (each controller's entry maps a rate,
    as text, to its figures, beside ``measured_at``)."""
    return sorted(
        {int(key) for runs in steady.values() if isinstance(runs, Mapping) for key in runs if key.isdigit()}
    )


def ratio(ours: float | None, upstream: float | None) -> float | None:
    if ours is None or upstream is None or upstream == 0 or math.isnan(ours) or math.isnan(upstream):
        return None
    return ours / upstream


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """One target of the scale benchmark (docs/performance/) and whether this run met it."""

    name: str
    wanted: str
    measured: str
    met: bool | None
    """None: not measured in this run."""


def _fmt(value: float | None, unit: str = "", digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f}{unit}"


def evaluate_targets(results: Mapping[str, Any]) -> list[Target]:
    """The issue's targets against ``results`` (the ``scenarios`` part of results.json)."""
    targets: list[Target] = []

    def get(scenario: str, controller: str, *path: str) -> Any:
        node: Any = results.get(scenario, {}).get(controller)
        for key in path:
            if not isinstance(node, Mapping):
                return None
            node = node.get(key)
        return node

    def add_ratio(
        name: str, scenario: str, path: Sequence[str], limit: float, *, higher_is_better: bool = False
    ) -> None:
        ours, upstream = get(scenario, "ours", *path), get(scenario, "upstream", *path)
        r = ratio(ours, upstream)
        if r is None:
            targets.append(
                Target(
                    name=name,
                    wanted=f"{'≥' if higher_is_better else '≤'} {limit:g}x upstream",
                    measured="n/a",
                    met=None,
                )
            )
            return
        met = r >= limit if higher_is_better else r <= limit
        targets.append(
            Target(
                name=name,
                wanted=f"{'≥' if higher_is_better else '≤'} {limit:g}x upstream",
                measured=f"{r:.2f}x",
                met=met,
            )
        )

    def add_value(
        name: str, value: float | None, wanted: str, ok: Callable[[float], bool], unit: str = ""
    ) -> None:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            targets.append(Target(name=name, wanted=wanted, measured="n/a", met=None))
        else:
            targets.append(
                Target(name=name, wanted=wanted, measured=_fmt(float(value), unit), met=ok(float(value)))
            )

    add_ratio("burst wall time (shared limiter)", "burst", ("wall_s",), 1.0)
    add_ratio("API writes per TrainJob (burst)", "burst", ("requests", "writes_per_trainjob"), 1.0)
    add_value(
        "reconcile errors in a burst (ours)", get("burst", "ours", "reconcile_errors"), "0", lambda v: v == 0
    )
    ceiling = results.get("ceiling", {}).get("apply_per_s")
    ours_lifted = get("burst-lifted", "ours", "throughput_per_s")
    add_value(
        "lifted burst throughput ÷ SSA ceiling (ours)",
        None if ours_lifted is None or not ceiling else ours_lifted / ceiling,
        "≥ 0.80",
        lambda v: v >= 0.8,
    )
    add_ratio("lifted burst throughput", "burst-lifted", ("throughput_per_s",), 1.0, higher_is_better=True)
    for rate, limit in (("20", 0.1), ("50", 1.0)):
        add_ratio(f"steady {rate}/s p99 latency", "steady", (rate, "latency_s", "p99"), 1.0)
        add_value(
            f"steady {rate}/s p99 latency (ours)",
            get("steady", "ours", rate, "latency_s", "p99"),
            f"≤ {limit:g} s",
            lambda v, limit=limit: v <= limit,
            " s",
        )
    add_ratio("RSS at scale", "scale", ("rss_mib",), 0.75)
    add_value(
        "caches synced after restart (ours)",
        get("scale", "ours", "restart", "caches_synced_s"),
        "≤ 30 s",
        lambda v: v <= 30,
        " s",
    )
    add_ratio("initial reconciles drained after restart", "scale", ("restart", "drained_s"), 1.0)
    add_value(
        "writes during restart (ours)", get("scale", "ours", "restart", "writes"), "0", lambda v: v == 0
    )
    add_value("idle writes (ours)", get("burst", "ours", "idle", "writes"), "0", lambda v: v == 0)
    add_ratio("manager CPU-s per TrainJob (scale)", "scale", ("cpu_s_per_trainjob",), 1.0)
    return targets


# ============================================================================================= processes


def _thirdparty() -> Any:
    return load_script(HACK / "thirdparty.py", "_hack_thirdparty")


def _upstream() -> Any:
    return load_script(HACK / "upstream_trainer.py", "_hack_upstream_trainer")


CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float:
    return proc_cpu_seconds(Path(f"/proc/{pid}/stat").read_text(), CLOCK_TICKS)


def rss_mib(pid: int) -> float:
    return proc_rss_bytes(Path(f"/proc/{pid}/status").read_text()) / 2**20


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


@contextlib.contextmanager
def profiled(pid: int, output: Path | None) -> Iterator[None]:
    """py-spy sampling ``pid`` (the thread holding the GIL: where Python spends CPU) while the block runs,
    its collapsed stacks written to ``output`` and the top frames printed after; nothing when ``output`` is
    None."""
    if output is None:
        yield
        return
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if spy is None:
        raise SystemExit("bench_scale.py: --profile needs py-spy (pip install py-spy)")
    output.parent.mkdir(parents=True, exist_ok=True)
    argv = [
        spy,
        "record",
        "--pid",
        str(pid),
        "--rate",
        "200",
        "--gil",
        "--format",
        "raw",
        "--output",
        str(output),
    ]
    with open(output.with_suffix(".log"), "wb") as log:
        recorder = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield
    finally:
        recorder.send_signal(signal.SIGINT)  # py-spy writes what it sampled, then exits
        try:
            recorder.wait(timeout=60)
        except subprocess.TimeoutExpired:
            recorder.kill()
            recorder.wait()
    if output.exists():
        _say(f"  profile: {output}")
        for frame, share in top_frames(output.read_text(), 15):
            _say(f"    {share:6.1%}  {frame}")


def start_ours(kubeconfig: Path, workdir: Path, *, qps: float, burst: int, timeout: float = 120.0) -> Any:
    """Our manager, the console script of this Python, configured as upstream's is in
    ``hack/upstream_trainer.py``; returns its ``ManagerHandle`` once ``/readyz`` (caches synced) is 200."""
    upstream = _upstream()
    binary = Path(sys.executable).parent / "trainer-controller-manager"
    if not binary.exists():
        raise SystemExit(f"{binary} is missing: install the package first (`make venv`)")
    workdir.mkdir(parents=True, exist_ok=True)
    cert_dir = workdir / "certs"
    prepared = upstream.prepare(
        workdir, yaml.safe_load(OUR_CONFIG.read_text()), cert_dir, qps=qps, burst=burst
    )
    config_path = prepared.config
    argv = [
        str(binary),
        f"--config={config_path}",
        f"--kubeconfig={kubeconfig}",
        f"--webhook-cert-dir={cert_dir}",
        "--zap-log-level=info",
    ]
    return upstream.launch(
        "trainer-controller-manager",
        argv,
        workdir=workdir,
        health_port=prepared.health_port,
        metrics_port=prepared.metrics_port,
        webhook_port=prepared.webhook_port,
        config=config_path,
        timeout=timeout,
    )


def ours_workers_started_at(log: Path, controller: str = CONTROLLER) -> float | None:
    """When our ``controller`` logged ``controller.started`` (workers up, after its caches synced), as a
    Unix time, from the last start in ``log``."""

    def stamp(entry: dict[str, Any]) -> object:
        matches = entry.get("event") == "controller.started" and entry.get("controller") == controller
        return entry.get("timestamp") if matches else None

    return _upstream().last_logged_at(log, b"controller.started", stamp)


def start_manager(which: str, kubeconfig: Path, workdir: Path, *, qps: float, burst: int) -> Any:
    if which == "ours":
        return start_ours(kubeconfig, workdir, qps=qps, burst=burst)
    return _upstream().start(kubeconfig, workdir, qps=qps, burst=burst)


def workers_started_at(which: str, handle: Any) -> float | None:
    if which == "ours":
        return ours_workers_started_at(handle.log)
    started: float | None = _upstream().workers_started_at(handle.log)
    return started


class Session:
    """A fresh control plane with the CRDs and runtimes installed, the benchmark's client, and at most one
    manager at a time. The benchmark's own requests are counted in :attr:`own`."""

    def __init__(self, workdir: Path, *, coscheduling: bool = False) -> None:
        pinned = _thirdparty().read_versions()
        self.workdir = workdir
        self.plane = ControlPlane(
            find_binaries(
                etcd_version=pinned["ETCD_VERSION"], kubernetes_version=pinned["KUBERNETES_VERSION"]
            )
        )
        self.own: Counter[tuple[str, str]] = Counter()
        self._own_lock = threading.Lock()
        self.client: Client | None = None
        self.coscheduling = coscheduling
        self.manager: Any = None

    def __enter__(self) -> Session:
        self.plane.start()
        thirdparty = _thirdparty()
        self.plane.install_crds(
            [thirdparty.jobset_crd(), thirdparty.scheduler_plugins_podgroup_crd(), CRD_DIR]
        )
        self.client = Client.load(str(self.plane.kubeconfig), qps=0, pool_size=64)
        runtime = yaml.safe_load(RUNTIME_FILE.read_text())
        self.client.apply(runtime, FIELD_MANAGER)
        if self.coscheduling:
            self.client.apply(coscheduling_runtime(runtime), FIELD_MANAGER)
        self.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self.manager is not None:
                self.manager.stop()
        finally:
            if self.client is not None:
                self.client.close()
            self.plane.stop()

    @property
    def api(self) -> Client:
        if self.client is None:
            raise RuntimeError("the session has not started")
        return self.client

    def count(self, verb: str, resource: str, n: int = 1) -> None:
        with self._own_lock:
            self.own[(verb, resource)] += n

    def own_snapshot(self) -> Counter[tuple[str, str]]:
        with self._own_lock:
            return Counter(self.own)

    def apiserver_counts(self) -> Counter[RequestKey]:
        answer = self.plane.admin_request("GET", "/metrics")
        return apiserver_requests(parse_prometheus(answer.body.decode(), ("apiserver_request_total",)))

    def start_manager(self, which: str, *, qps: float, burst: int, tag: str = "") -> Any:
        workdir = self.workdir / f"{which}{tag}"
        self.manager = start_manager(which, self.plane.kubeconfig, workdir, qps=qps, burst=burst)
        return self.manager

    def stop_manager(self) -> int | None:
        code: int | None = None
        if self.manager is not None:
            code = self.manager.stop()
            self.manager = None
        return code


def coscheduling_runtime(runtime: Mapping[str, Any]) -> dict[str, Any]:
    """``runtime`` renamed, with ``podGroupPolicy.coscheduling`` (a PodGroup per TrainJob)."""
    copy: dict[str, Any] = deep_copy(runtime)
    copy["metadata"] = {"name": COSCHEDULING_RUNTIME}
    copy["spec"]["podGroupPolicy"] = {"coscheduling": {"scheduleTimeoutSeconds": 120}}
    return copy


def trainjob(name: str, runtime: str = RUNTIME) -> dict[str, Any]:
    """A small torch TrainJob on ``runtime``: two nodes, one GPU each."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "runtimeRef": {"name": runtime},
            "trainer": {
                "numNodes": 2,
                "command": ["torchrun", "train.py"],
                "resourcesPerNode": {
                    "requests": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": 1},
                    "limits": {"nvidia.com/gpu": 1},
                },
            },
        },
    }


# ============================================================================================= observers


class Arrivals:
    """A watch on one kind in :data:`NAMESPACE` from a known resourceVersion, in a named thread: the
    monotonic time each name was first seen ADDED. Re-watches from the last resourceVersion when a watch
    ends; on 410 Gone it re-lists and stamps the names it had missed with the re-list time."""

    def __init__(self, session: Session, gvk: GVK, resource: str) -> None:
        self._session = session
        self._gvk = gvk
        self._resource = resource
        self.first_seen: dict[str, float] = {}
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._watch: Any = None
        listed = session.api.list(gvk, NAMESPACE)
        session.count("LIST", resource)
        now = time.monotonic()
        for item in listed.items:
            self.first_seen.setdefault(item["metadata"]["name"], now)
        self._rv = listed.resource_version
        self._thread = threading.Thread(target=self._run, name=f"bench/watch-{resource}", daemon=True)

    def __enter__(self) -> Arrivals:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        watch = self._watch
        if watch is not None:
            watch.stop()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._watch = self._session.api.watch(self._gvk, NAMESPACE, resource_version=self._rv)
                for event in self._watch:
                    if event.type == "ERROR":
                        raise event.as_error()
                    if event.type == "ADDED":
                        stamp = time.monotonic()
                        with self._cond:
                            self.first_seen.setdefault(event.object["metadata"]["name"], stamp)
                            self._cond.notify_all()
                    self._rv = event.object.get("metadata", {}).get("resourceVersion") or self._rv
            except Gone:
                if not self._stop.is_set():
                    self._relist()
            except (ApiError, TransportError, WatchTimeout):
                if not self._stop.is_set():
                    self._stop.wait(0.5)  # then watch again from the last resourceVersion
            finally:
                if self._watch is not None:
                    self._watch.stop()

    def _relist(self) -> None:
        listed = self._session.api.list(self._gvk, NAMESPACE)
        self._session.count("LIST", self._resource)
        now = time.monotonic()
        with self._cond:
            for item in listed.items:
                self.first_seen.setdefault(item["metadata"]["name"], now)
            self._cond.notify_all()
        self._rv = listed.resource_version

    def count(self, prefix: str = "") -> int:
        with self._cond:
            return sum(1 for name in self.first_seen if name.startswith(prefix))

    def wait_for(self, names: Sequence[str], timeout: float) -> bool:
        """Until every name in ``names`` was seen, at most ``timeout`` seconds; whether they all were."""
        deadline = time.monotonic() + timeout
        wanted = set(names)
        with self._cond:
            while not wanted <= self.first_seen.keys():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(min(remaining, 1.0))
        return True

    def times(self, names: Iterable[str]) -> dict[str, float]:
        with self._cond:
            return {n: self.first_seen[n] for n in names if n in self.first_seen}


def manager_samples(handle: Any) -> list[Sample]:
    return parse_prometheus(handle.metrics_text())


@dataclass(frozen=True, slots=True, kw_only=True)
class Progress:
    reconciles: float
    errors: float
    depth: float
    active: float


def progress(handle: Any) -> Progress:
    samples = parse_prometheus(
        handle.metrics_text(),
        ("controller_runtime_reconcile_total", "controller_runtime_reconcile_errors_total", "workqueue_depth",
         "controller_runtime_active_workers"),
    )  # fmt: skip
    return Progress(
        reconciles=metric_sum(samples, "controller_runtime_reconcile_total", controller=CONTROLLER),
        errors=metric_sum(samples, "controller_runtime_reconcile_errors_total", controller=CONTROLLER),
        depth=metric_sum(samples, "workqueue_depth", name=CONTROLLER),
        active=metric_sum(samples, "controller_runtime_active_workers", controller=CONTROLLER),
    )


def wait_settled(handle: Any, *, quiet: float = 2.0, timeout: float = 600.0, interval: float = 0.25) -> float:
    """Poll the manager's metrics until its TrainJob queue is empty, no worker is busy and no reconcile
    happened for ``quiet`` seconds; returns the monotonic time the quiet period began."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    last = progress(handle)
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        pause.wait(interval)
        now = progress(handle)
        if now.reconciles != last.reconciles or now.depth or now.active:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= quiet:
            return quiet_since
        last = now
    raise TimeoutError(f"{handle.name} did not settle within {timeout:g} s")


def wait_workers_started(which: str, handle: Any, timeout: float = 120.0) -> float:
    """The Unix time the TrainJob controller's workers started, waiting for the log line."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while time.monotonic() < deadline:
        started = workers_started_at(which, handle)
        if started is not None and started >= handle.started_at:
            return started
        if not handle.running():
            raise RuntimeError(f"{handle.name} exited; see {handle.log}")
        pause.wait(0.1)
    raise TimeoutError(f"{handle.name} did not start its workers within {timeout:g} s; see {handle.log}")


# ============================================================================================= load


def create_all(
    session: Session, objects: Sequence[Mapping[str, Any]], threads: int = CREATE_THREADS
) -> dict[str, float]:
    """Create ``objects`` with ``threads`` client threads as fast as the API server takes them; returns
    the monotonic time each create was answered."""
    answered: dict[str, float] = {}

    def create(obj: Mapping[str, Any]) -> None:
        session.api.create(obj)
        answered[obj["metadata"]["name"]] = time.monotonic()

    with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="bench/create") as pool:
        for future in [pool.submit(create, obj) for obj in objects]:
            future.result()
    session.count("POST", "trainjobs", len(objects))
    return answered


def create_paced(
    session: Session, objects: Sequence[Mapping[str, Any]], rate: float, threads: int = CREATE_THREADS
) -> tuple[dict[str, float], float]:
    """Create ``objects`` open-loop at ``rate`` per second (create i is sent at start + i / rate, however
    long earlier ones take); returns the answer times and the largest lateness of a send, in seconds."""
    answered: dict[str, float] = {}
    late = 0.0
    pause = threading.Event()

    def create(obj: Mapping[str, Any]) -> None:
        session.api.create(obj)
        answered[obj["metadata"]["name"]] = time.monotonic()

    with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="bench/paced") as pool:
        futures = []
        start = time.monotonic()
        for i, obj in enumerate(objects):
            due = start + i / rate
            wait = due - time.monotonic()
            if wait > 0:
                pause.wait(wait)
            late = max(late, time.monotonic() - due)
            futures.append(pool.submit(create, obj))
        for future in futures:
            future.result()
    session.count("POST", "trainjobs", len(objects))
    return answered, late


# ============================================================================================= scenarios


@dataclass(slots=True, kw_only=True)
class Settings:
    burst: int = 1000
    idle_s: float = 60.0
    steady_s: float = 60.0
    rates: tuple[int, ...] = (20, 50)
    scale: int = 10_000
    ceiling: int = 2000
    workdir: Path = field(default_factory=lambda: Path("/tmp/bench-scale"))
    profile: Path | None = None


def _latency(trainjobs: Mapping[str, float], jobsets: Mapping[str, float]) -> dict[str, float]:
    values = [jobsets[name] - trainjobs[name] for name in jobsets if name in trainjobs]
    return {
        "count": len(values),
        "p50": percentile(values, 0.50),
        "p95": percentile(values, 0.95),
        "p99": percentile(values, 0.99),
        "max": max(values) if values else math.nan,
    }


def _reconcile_outcomes(before: Sequence[Sample], after: Sequence[Sample]) -> dict[str, float]:
    outcomes: dict[str, float] = {}
    for result in ("success", "error", "requeue", "requeue_after"):
        outcomes[result] = metric_sum(
            after, "controller_runtime_reconcile_total", controller=CONTROLLER, result=result
        ) - metric_sum(before, "controller_runtime_reconcile_total", controller=CONTROLLER, result=result)
    return outcomes


def _client_requests(before: Sequence[Sample], after: Sequence[Sample]) -> dict[str, float]:
    """The manager's own ``rest_client_requests_total`` by method (all codes): a cross-check."""
    methods = {s.label("method") for s in after if s.name == "rest_client_requests_total"}
    return {
        m: metric_sum(after, "rest_client_requests_total", method=m)
        - metric_sum(before, "rest_client_requests_total", method=m)
        for m in sorted(methods)
    }


def _stamp() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")


def _say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def run_burst(
    session: Session,
    which: str,
    n: int,
    *,
    qps: float,
    burst: int,
    idle_s: float | None,
    profile: Path | None = None,
) -> dict[str, Any]:
    """The burst (and, with ``idle_s``, the idle period after it) against ``which`` on ``session``;
    ``profile``: where to write py-spy's stacks of the manager during the burst."""
    handle = session.start_manager(which, qps=qps, burst=burst)
    wait_workers_started(which, handle)
    wait_settled(handle, quiet=1.0)
    names = [f"burst-{i:05d}" for i in range(n)]
    load_before = load_average()
    with (
        Arrivals(session, TRAINJOB, "trainjobs") as trainjobs,
        Arrivals(session, JOBSET, "jobsets") as jobsets,
    ):
        api_before, own_before = session.apiserver_counts(), session.own_snapshot()
        samples_before = manager_samples(handle)
        cpu_before = cpu_seconds(handle.pid)
        with profiled(handle.pid, profile):
            start = time.monotonic()
            create_all(session, [trainjob(name) for name in names])
            created = time.monotonic()
            complete = jobsets.wait_for(names, timeout=max(600.0, n))
        seen = jobsets.times(names)
        last = max(seen.values()) if seen else math.nan
        wait_settled(handle)
        cpu_after = cpu_seconds(handle.pid)
        samples_after = manager_samples(handle)
        api_after, own_after = session.apiserver_counts(), session.own_snapshot()
        latency = _latency(trainjobs.times(names), seen)
    requests = summarize_requests(managers_requests(subtract(api_after, api_before), own_after - own_before))
    outcomes = _reconcile_outcomes(samples_before, samples_after)
    result: dict[str, Any] = {
        "trainjobs": n,
        "jobsets": len(seen),
        "complete": complete,
        "qps": qps,
        "burst": burst,
        "create_s": created - start,
        "wall_s": last - start,
        "throughput_per_s": len(seen) / (last - start) if seen else math.nan,
        # The API server's write load: the benchmark's TrainJob creates plus the manager's writes (a JobSet
        # takes three writes in all, where the ceiling scenario makes one per JobSet).
        "all_writes_per_s": (n + requests.writes) / (last - start) if seen else math.nan,
        "jobset_seen_s": sorted(t - start for t in seen.values()),
        "latency_s": latency,
        "requests": {
            "writes": requests.writes,
            "reads": requests.reads,
            "failed": requests.failed,
            "writes_per_trainjob": requests.writes / n,
            "reads_per_trainjob": requests.reads / n,
            "per_trainjob": requests.per(n),
        },
        "client_requests": _client_requests(samples_before, samples_after),
        "reconciles": outcomes,
        "reconcile_errors": metric_sum(
            samples_after, "controller_runtime_reconcile_errors_total", controller=CONTROLLER
        )
        - metric_sum(samples_before, "controller_runtime_reconcile_errors_total", controller=CONTROLLER),
        "cpu_s": cpu_after - cpu_before,
        "cpu_s_per_trainjob": (cpu_after - cpu_before) / n,
        "rss_mib": rss_mib(handle.pid),
        "load_before": load_before,
        "load_after": load_average(),
    }
    _say(
        f"  {which}: {len(seen)}/{n} JobSets in {result['wall_s']:.2f} s, "
        f"{requests.writes / n:.2f} writes and {requests.reads / n:.2f} reads per TrainJob, "
        f"{result['reconcile_errors']:.0f} reconcile errors, "
        f"CPU {result['cpu_s']:.2f} s"
    )
    if idle_s:
        result["idle"] = run_idle(session, handle, idle_s)
    session.stop_manager()
    return result


def run_idle(session: Session, handle: Any, seconds: float) -> dict[str, Any]:
    api_before, own_before = session.apiserver_counts(), session.own_snapshot()
    samples_before = manager_samples(handle)
    cpu_before = cpu_seconds(handle.pid)
    load_before = load_average()
    threading.Event().wait(seconds)
    cpu_after = cpu_seconds(handle.pid)
    samples_after = manager_samples(handle)
    api_after, own_after = session.apiserver_counts(), session.own_snapshot()
    requests = summarize_requests(managers_requests(subtract(api_after, api_before), own_after - own_before))
    client = _client_requests(samples_before, samples_after)
    result = {
        "seconds": seconds,
        "writes": requests.writes,
        "reads": requests.reads,
        "requests": requests.by_verb_resource,
        "client_requests": sum(client.values()),
        "cpu_s": cpu_after - cpu_before,
        "load_before": load_before,
        "load_after": load_average(),
    }
    _say(
        f"  idle {seconds:g} s: {requests.writes} writes, {result['client_requests']:.0f} client requests, "
        f"CPU {result['cpu_s']:.2f} s"
    )
    return result


def run_steady(session: Session, which: str, rates: Sequence[int], seconds: float) -> dict[str, Any]:
    handle = session.start_manager(which, qps=SHIPPED_QPS, burst=SHIPPED_BURST)
    wait_workers_started(which, handle)
    wait_settled(handle, quiet=1.0)
    result: dict[str, Any] = {}
    for rate in rates:
        names = [f"steady{rate}-{i:05d}" for i in range(int(rate * seconds))]
        load_before = load_average()
        with (
            Arrivals(session, TRAINJOB, "trainjobs") as trainjobs,
            Arrivals(session, JOBSET, "jobsets") as jobsets,
        ):
            samples_before = manager_samples(handle)
            cpu_before = cpu_seconds(handle.pid)
            answered, late = create_paced(session, [trainjob(name) for name in names], rate)
            complete = jobsets.wait_for(names, timeout=600.0)
            wait_settled(handle)
            samples_after = manager_samples(handle)
            cpu_after = cpu_seconds(handle.pid)
            seen_trainjobs, seen_jobsets = trainjobs.times(names), jobsets.times(names)
        histogram = subtract_buckets(
            histogram_buckets(samples_after, "kubeflow_trainer_trainjob_jobset_creation_seconds"),
            histogram_buckets(samples_before, "kubeflow_trainer_trainjob_jobset_creation_seconds"),
        )
        entry = {
            "rate_per_s": rate,
            "trainjobs": len(names),
            "complete": complete,
            "latency_s": _latency(seen_trainjobs, seen_jobsets),
            "latency_from_create_answer_s": _latency(answered, seen_jobsets),
            "latencies_s": sorted(
                seen_jobsets[n] - seen_trainjobs[n] for n in seen_jobsets if n in seen_trainjobs
            ),
            "max_send_lateness_s": late,
            "reconcile_errors": metric_sum(
                samples_after, "controller_runtime_reconcile_errors_total", controller=CONTROLLER
            )
            - metric_sum(samples_before, "controller_runtime_reconcile_errors_total", controller=CONTROLLER),
            "cpu_s_per_trainjob": (cpu_after - cpu_before) / len(names),
            "load_before": load_before,
            "load_after": load_average(),
        }
        if histogram and histogram[-1][1] > 0:
            entry["histogram_s"] = {
                "p50": histogram_quantile(0.5, histogram),
                "p99": histogram_quantile(0.99, histogram),
            }
        result[str(rate)] = entry
        lat = entry["latency_s"]
        _say(
            f"  {which} {rate}/s: p50 {lat['p50'] * 1000:.0f} ms, p95 {lat['p95'] * 1000:.0f} ms, "
            f"p99 {lat['p99'] * 1000:.0f} ms"
        )
    session.stop_manager()
    return result


def run_scale(session: Session, which: str, n: int, profile: Path | None = None) -> dict[str, Any]:
    """``n`` TrainJobs on a coscheduling runtime, then a restart; ``profile``: where to write py-spy's
    stacks of the restarted manager until its initial reconciles have drained."""
    handle = session.start_manager(which, qps=LIFTED_QPS, burst=LIFTED_BURST)
    wait_workers_started(which, handle)
    wait_settled(handle, quiet=1.0)
    names = [f"scale-{i:05d}" for i in range(n)]
    load_before = load_average()
    cpu_start = cpu_seconds(handle.pid)
    with Arrivals(session, JOBSET, "jobsets") as jobsets:
        api_before, own_before = session.apiserver_counts(), session.own_snapshot()
        start = time.monotonic()
        create_all(session, [trainjob(name, COSCHEDULING_RUNTIME) for name in names])
        complete = jobsets.wait_for(names, timeout=max(900.0, n / 5))
        populated = time.monotonic()
        wait_settled(handle, quiet=3.0, timeout=900.0)
    api_after, own_after = session.apiserver_counts(), session.own_snapshot()
    cpu_end = cpu_seconds(handle.pid)
    podgroups = len(session.api.list(PODGROUP, NAMESPACE).items)
    session.count("LIST", "podgroups")
    rss = rss_mib(handle.pid)
    requests = summarize_requests(managers_requests(subtract(api_after, api_before), own_after - own_before))
    result: dict[str, Any] = {
        "trainjobs": n,
        "complete": complete,
        "podgroups": podgroups,
        "populate_s": populated - start,
        "rss_mib": rss,
        "cpu_s": cpu_end - cpu_start,
        "cpu_s_per_trainjob": (cpu_end - cpu_start) / n,
        "requests": {
            "writes_per_trainjob": requests.writes / n,
            "reads_per_trainjob": requests.reads / n,
            "per_trainjob": requests.per(n),
        },
        "load_before": load_before,
    }
    _say(
        f"  {which}: {n} TrainJobs populated in {result['populate_s']:.1f} s, RSS {rss:.0f} MiB, "
        f"CPU {result['cpu_s_per_trainjob'] * 1000:.2f} ms per TrainJob"
    )
    session.stop_manager()
    # The restart, under the shipped limiter.
    api_before, own_before = session.apiserver_counts(), session.own_snapshot()
    handle = session.start_manager(which, qps=SHIPPED_QPS, burst=SHIPPED_BURST, tag="-restart")
    started = handle.started_at
    pause = threading.Event()
    deadline = time.monotonic() + 900.0
    drained_at: float | None = None
    with profiled(handle.pid, profile):
        while time.monotonic() < deadline:
            now = progress(handle)
            if now.reconciles >= n and not now.depth and not now.active:
                drained_at = time.time()
                break
            # Each poll is a metrics scrape, which costs the manager too (ours counts its TrainJobs by
            # state at scrape time): twice a second keeps that small, for 0.25 s of resolution.
            pause.wait(0.5)
    synced_at = wait_workers_started(which, handle)
    wait_settled(handle, quiet=2.0)
    api_after, own_after = session.apiserver_counts(), session.own_snapshot()
    restart_requests = summarize_requests(
        managers_requests(subtract(api_after, api_before), own_after - own_before)
    )
    final = progress(handle)
    result["restart"] = {
        "caches_synced_s": synced_at - started,
        "drained_s": (drained_at - started) if drained_at is not None else math.nan,
        "writes": restart_requests.writes,
        "reads": restart_requests.reads,
        "requests": restart_requests.by_verb_resource,
        "reconciles": final.reconciles,
        "reconcile_errors": final.errors,
        "cpu_s": cpu_seconds(handle.pid),
        "cpu_s_per_trainjob": cpu_seconds(handle.pid) / n,
        "rss_mib": rss_mib(handle.pid),
        "load_after": load_average(),
    }
    restart = result["restart"]
    _say(
        f"  {which} restart: caches synced {restart['caches_synced_s']:.1f} s, "
        f"drained {restart['drained_s']:.1f} s, {restart['writes']} writes, RSS {restart['rss_mib']:.0f} MiB"
    )
    session.stop_manager()
    return result


def run_ceiling(session: Session, n: int) -> dict[str, Any]:
    """Server-side apply of ``n`` JobSets (as rendered for the benchmark's TrainJob) with 8, then 16
    client threads; no manager runs."""
    runtime = yaml.safe_load(RUNTIME_FILE.read_text())
    rendered = render_objects(
        Document(obj=trainjob("ceiling"), source="bench"),
        [Document(obj=runtime, source=str(RUNTIME_FILE))],
        options=RenderOptions(namespace=NAMESPACE),
    )
    template = next(obj for obj in rendered.objects if obj.get("kind") == "JobSet")
    result: dict[str, Any] = {"runs": []}
    for threads in (8, 16):
        objects = []
        for i in range(n):
            obj: dict[str, Any] = deep_copy(template)
            obj["metadata"]["name"] = f"ceiling{threads}-{i:05d}"
            objects.append(obj)
        own_cpu = time.process_time()
        load_before = load_average()
        start = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="bench/apply") as pool:
            for future in [pool.submit(session.api.apply, obj, FIELD_MANAGER) for obj in objects]:
                future.result()
        elapsed = time.monotonic() - start
        session.count("APPLY", "jobsets", n)
        run = {
            "threads": threads,
            "jobsets": n,
            "seconds": elapsed,
            "apply_per_s": n / elapsed,
            "client_cpu_s": time.process_time() - own_cpu,
            "load_before": load_before,
            "load_after": load_average(),
        }
        result["runs"].append(run)
        _say(f"  ceiling, {threads} threads: {run['apply_per_s']:.0f} JobSet applies/s")
    result["apply_per_s"] = max(run["apply_per_s"] for run in result["runs"])
    return result


def run_micro(output: Path) -> dict[str, Any]:
    """``pytest -m benchmark`` (``make bench``), its output saved to ``output``."""
    argv = [sys.executable, "-m", "pytest", "test", "-m", "benchmark", "-s", "-p", "no:cacheprovider", "-q"]
    began = time.monotonic()
    with output.open("w") as log:
        log.write(
            f"# {' '.join(argv[1:])}  (started {time.strftime('%Y-%m-%d %H:%M:%S')}, load {load_average()})\n"
        )
        log.flush()
        done = subprocess.run(argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, check=False)
    _say(f"  micro benchmarks: exit status {done.returncode}, output in {output}")
    return {
        "exit_status": done.returncode,
        "seconds": time.monotonic() - began,
        "output": str(output.relative_to(REPO) if output.is_relative_to(REPO) else output),
    }


# ============================================================================================= report


def environment() -> dict[str, Any]:
    pinned = _thirdparty().read_versions()
    try:
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        cpu = platform.processor()
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "cpus": os.cpu_count(),
        "cpu_model": cpu,
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "kubernetes": pinned.get("KUBERNETES_VERSION"),
        "etcd": pinned.get("ETCD_VERSION"),
        "upstream_trainer": pinned.get("TRAINER_VERSION"),
        "load_at_start": load_average(),
    }


def table_rows(scenarios: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """(figure, ours, upstream, ours ÷ upstream) rows for the printed table and the docs."""
    rows: list[tuple[str, str, str, str]] = []

    def row(
        label: str, path: Sequence[str], scenario: str, *, unit: str = "", digits: int = 2, scale: float = 1.0
    ) -> None:
        values = []
        for controller in CONTROLLERS:
            node: Any = scenarios.get(scenario, {}).get(controller)
            for key in path:
                node = node.get(key) if isinstance(node, Mapping) else None
            values.append(None if node is None else float(node) * scale)
        if all(v is None for v in values):
            return
        r = ratio(values[0], values[1])
        rows.append((label, _fmt(values[0], unit, digits), _fmt(values[1], unit, digits), _fmt(r, "x")))

    burst = scenarios.get("burst", {})
    n = next((burst[c]["trainjobs"] for c in CONTROLLERS if c in burst), None)
    row(f"burst of {n}: all JobSets (s)", ("wall_s",), "burst")
    row("burst: API writes per TrainJob", ("requests", "writes_per_trainjob"), "burst")
    row("burst: API reads per TrainJob", ("requests", "reads_per_trainjob"), "burst")
    row("burst: failed requests", ("requests", "failed"), "burst", digits=0)
    row("burst: reconcile errors", ("reconcile_errors",), "burst", digits=0)
    row("burst: manager CPU per TrainJob (ms)", ("cpu_s_per_trainjob",), "burst", scale=1000)
    row("idle: writes", ("idle", "writes"), "burst", digits=0)
    row("idle: client requests", ("idle", "client_requests"), "burst", digits=0)
    row("idle: manager CPU (s)", ("idle", "cpu_s"), "burst")
    row("burst, limiters lifted: all JobSets (s)", ("wall_s",), "burst-lifted")
    row("burst, limiters lifted: JobSets/s", ("throughput_per_s",), "burst-lifted", digits=0)
    row("burst, limiters lifted: reconcile errors", ("reconcile_errors",), "burst-lifted", digits=0)
    row(
        "burst, limiters lifted: all API writes/s",
        ("all_writes_per_s",),
        "burst-lifted",
        digits=0,
    )
    for rate in map(str, steady_rates(scenarios.get("steady", {}))):
        for q in ("p50", "p95", "p99"):
            row(f"steady {rate}/s: latency {q} (ms)", (rate, "latency_s", q), "steady", digits=0, scale=1000)
    scale = scenarios.get("scale", {})
    n = next((scale[c]["trainjobs"] for c in CONTROLLERS if c in scale), None)
    row(f"scale {n}: RSS after settle (MiB)", ("rss_mib",), "scale", digits=0)
    row(f"scale {n}: manager CPU per TrainJob (ms)", ("cpu_s_per_trainjob",), "scale", scale=1000)
    row(f"scale {n}: API writes per TrainJob", ("requests", "writes_per_trainjob"), "scale")
    row("restart: caches synced (s)", ("restart", "caches_synced_s"), "scale", digits=1)
    row("restart: initial reconciles drained (s)", ("restart", "drained_s"), "scale", digits=1)
    row("restart: writes", ("restart", "writes"), "scale", digits=0)
    row("restart: RSS after drain (MiB)", ("restart", "rss_mib"), "scale", digits=0)
    row("restart: manager CPU per TrainJob (ms)", ("restart", "cpu_s_per_trainjob"), "scale", scale=1000)
    ceiling = scenarios.get("ceiling", {}).get("apply_per_s")
    if ceiling:
        rows.append(("ceiling: JobSet SSA/s, tight client", _fmt(ceiling, "", 0), "", ""))
    return rows


def format_table(rows: Sequence[tuple[str, str, str, str]], targets: Sequence[Target]) -> str:
    header = ("figure", "ours", "upstream", "ours ÷ upstream")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.append("")
    lines.append("targets:")
    for t in targets:
        mark = {True: "met", False: "NOT met", None: "not measured"}[t.met]
        lines.append(f"  {t.name}: wanted {t.wanted}, measured {t.measured}: {mark}")
    return "\n".join(lines)


def plot(scenarios: Mapping[str, Any], directory: Path) -> list[Path]:
    """PNG plots of the runs; none (with a note) without matplotlib (``pip install -e '.[bench]'``)."""
    try:
        import matplotlib  # noqa: PLC0415 - optional (the `bench` extra): plots only

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        _say("matplotlib is not installed (pip install -e '.[bench]'): no plots")
        return []
    colours = {"ours": "tab:blue", "upstream": "tab:orange"}
    written: list[Path] = []
    bursts = [(name, scenarios[name]) for name in ("burst", "burst-lifted") if name in scenarios]
    if bursts:
        fig, axes = plt.subplots(1, len(bursts), figsize=(6 * len(bursts), 4), squeeze=False)
        for ax, (name, runs) in zip(axes[0], bursts, strict=True):
            for controller, run in runs.items():
                times = run["jobset_seen_s"]
                ax.step(
                    times,
                    range(1, len(times) + 1),
                    where="post",
                    label=f"{controller} ({run['wall_s']:.1f} s)",
                    color=colours.get(controller),
                )
            limit = "QPS 50 / burst 100" if name == "burst" else "limiters lifted"
            ax.set_title(f"{name}: JobSets existing ({limit})")
            ax.set_xlabel("seconds since the first TrainJob create")
            ax.set_ylabel("JobSets")
            ax.legend()
            ax.grid(alpha=0.3)
        fig.tight_layout()
        written.append(directory / "burst.png")
        fig.savefig(written[-1], dpi=100)
        plt.close(fig)
    steady = scenarios.get("steady")
    if steady:
        rates = steady_rates(steady)
        fig, axes = plt.subplots(1, len(rates), figsize=(6 * len(rates), 4), squeeze=False)
        for ax, rate in zip(axes[0], rates, strict=True):
            for controller, runs in steady.items():
                values = runs.get(str(rate), {}).get("latencies_s") or []
                if values:
                    ax.plot(
                        [v * 1000 for v in values],
                        [i / len(values) for i in range(1, len(values) + 1)],
                        label=controller,
                        color=colours.get(controller),
                    )
            ax.set_xscale("log")
            ax.set_title(f"steady {rate} creates/s: TrainJob → JobSet latency")
            ax.set_xlabel("ms (log scale)")
            ax.set_ylabel("fraction of TrainJobs")
            ax.legend()
            ax.grid(alpha=0.3)
        fig.tight_layout()
        written.append(directory / "steady.png")
        fig.savefig(written[-1], dpi=100)
        plt.close(fig)
    scale = scenarios.get("scale")
    if scale:
        figures = [
            ("RSS after settle (MiB)", ("rss_mib",)),
            ("CPU per TrainJob, populate (ms)", ("cpu_s_per_trainjob",)),
            ("restart: caches synced (s)", ("restart", "caches_synced_s")),
            ("restart: reconciles drained (s)", ("restart", "drained_s")),
        ]
        fig, axes = plt.subplots(1, len(figures), figsize=(4 * len(figures), 3.5), squeeze=False)
        for ax, (title, path) in zip(axes[0], figures, strict=True):
            labels, values = [], []
            for controller, run in scale.items():
                node: Any = run
                for key in path:
                    node = node.get(key) if isinstance(node, Mapping) else None
                if node is not None:
                    labels.append(controller)
                    values.append(float(node) * (1000 if "ms" in title else 1))
            ax.bar(labels, values, color=[colours.get(c) for c in labels])
            ax.set_title(title, fontsize=10)
            ax.grid(alpha=0.3, axis="y")
        n = next(iter(scale.values()))["trainjobs"]
        fig.suptitle(f"{n} TrainJobs with JobSets and PodGroups")
        fig.tight_layout()
        written.append(directory / "scale.png")
        fig.savefig(written[-1], dpi=100)
        plt.close(fig)
    return written


# ============================================================================================= main


def _jsonable(value: Any) -> Any:
    """Plain JSON: NaN and infinities as null, floats to 5 significant decimals, paths as strings."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else round(value, 5)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonable(dataclasses.asdict(value))
    if isinstance(value, Path):
        return str(value)
    return value


_NUMBER_LIST = re.compile(r"\[\s*((?:-?[0-9.e+-]+|null)(?:,\s*(?:-?[0-9.e+-]+|null))*)\s*\]")


def dump_json(value: Any) -> str:
    """``value`` as indented JSON (via :func:`_jsonable`), with lists of numbers kept on one line."""
    text = json.dumps(_jsonable(value), indent=1)
    return (
        _NUMBER_LIST.sub(lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text)
        + "\n"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bench_scale.py", description="Our controller and upstream's, side by side at scale."
    )
    parser.add_argument("--quick", action="store_true", help="small counts and short periods: a smoke run")
    parser.add_argument(
        "--scenarios", default=",".join(SCENARIOS), help=f"comma-separated subset of {','.join(SCENARIOS)}"
    )
    parser.add_argument("--controllers", default=",".join(CONTROLLERS), help="ours, upstream or both")
    parser.add_argument("--burst", type=int, help="TrainJobs in a burst (1000; quick 100)")
    parser.add_argument("--idle-seconds", type=float, help="the idle period (60; quick 10)")
    parser.add_argument("--steady-seconds", type=float, help="each steady rate's duration (60; quick 10)")
    parser.add_argument("--rates", help="steady creates/s, comma-separated (20,50)")
    parser.add_argument("--scale", type=int, help="TrainJobs in the scale scenario (10000; quick 500)")
    parser.add_argument("--ceiling", type=int, help="JobSets per ceiling run (2000; quick 300)")
    parser.add_argument(
        "--output-dir", type=Path, help="default docs/performance (quick: build/bench-scale-quick)"
    )
    parser.add_argument(
        "--workdir", type=Path, default=Path("/tmp/bench-scale"), help="logs and configurations"
    )
    parser.add_argument(
        "--report",
        action="store_true",
        help="measure nothing: print the table and redraw the plots from the results.json already there",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="a directory: py-spy samples our manager during each burst and the restart into "
        "<scenario>-<controller>.txt there",
    )
    return parser


def _split(text: str, allowed: Sequence[str], what: str) -> list[str]:
    chosen = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [part for part in chosen if part not in allowed]
    if unknown:
        raise SystemExit(f"bench_scale.py: error: --{what}: unknown {unknown}; choose from {list(allowed)}")
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    scenarios = [] if args.report else _split(args.scenarios, SCENARIOS, "scenarios")
    controllers = _split(args.controllers, CONTROLLERS, "controllers")
    quick = args.quick
    settings = Settings(
        burst=args.burst or (100 if quick else 1000),
        idle_s=args.idle_seconds if args.idle_seconds is not None else (10.0 if quick else 60.0),
        steady_s=args.steady_seconds or (10.0 if quick else 60.0),
        rates=tuple(int(r) for r in (args.rates or "20,50").split(",")),
        scale=args.scale or (500 if quick else 10_000),
        ceiling=args.ceiling or (300 if quick else 2000),
        workdir=args.workdir,
        profile=args.profile,
    )
    output = args.output_dir or (
        REPO / "build" / "bench-scale-quick" if quick else REPO / "docs" / "performance"
    )
    output.mkdir(parents=True, exist_ok=True)
    if "upstream" in controllers and scenarios:
        _upstream().binary_path()  # fail early with the build command
    install_sigterm_handler()
    results_path = output / "results.json"
    previous: dict[str, Any] = {}
    if results_path.exists():
        with contextlib.suppress(ValueError, OSError):
            previous = json.loads(results_path.read_text())
    command = "python hack/bench_scale.py " + " ".join(argv if argv is not None else sys.argv[1:])
    this_run = {
        "command": command.strip(),
        "scenarios": scenarios,
        "controllers": controllers,
        "environment": environment(),
        "settings": _jsonable(dataclasses.asdict(settings)),
    }
    report: dict[str, Any] = {
        # Every invocation that wrote into this file, oldest first; a scenario's entries come from the last
        # run that named it (each entry has its own `measured_at` and load averages).
        "runs": [*previous.get("runs", []), *([this_run] if scenarios else [])],
        "scenarios": previous.get("scenarios", {}),
    }
    results: dict[str, Any] = report["scenarios"]

    def save() -> None:
        results_path.write_text(dump_json(report))

    def profile_path(scenario: str, which: str) -> Path | None:
        if settings.profile is None or which != "ours":
            return None  # py-spy reads Python processes only
        return settings.profile / f"{scenario}-{which}.txt"

    for scenario in scenarios:
        _say(f"scenario {scenario}")
        if scenario == "micro":
            results["micro"] = {**run_micro(output / "micro-benchmarks.txt"), "measured_at": _stamp()}
            save()
            continue
        if scenario == "ceiling":
            with Session(settings.workdir / "ceiling") as session:
                results["ceiling"] = {**run_ceiling(session, settings.ceiling), "measured_at": _stamp()}
            save()
            continue
        runs: dict[str, Any] = dict(results.get(scenario, {}))
        for which in controllers:
            workdir = settings.workdir / scenario / which
            with Session(workdir, coscheduling=scenario == "scale") as session:
                if scenario == "burst":
                    runs[which] = run_burst(
                        session,
                        which,
                        settings.burst,
                        qps=SHIPPED_QPS,
                        burst=SHIPPED_BURST,
                        idle_s=settings.idle_s,
                        profile=profile_path(scenario, which),
                    )
                elif scenario == "burst-lifted":
                    runs[which] = run_burst(
                        session,
                        which,
                        settings.burst,
                        qps=LIFTED_QPS,
                        burst=LIFTED_BURST,
                        idle_s=None,
                        profile=profile_path(scenario, which),
                    )
                elif scenario == "steady":
                    runs[which] = run_steady(session, which, settings.rates, settings.steady_s)
                elif scenario == "scale":
                    runs[which] = run_scale(
                        session, which, settings.scale, profile=profile_path("restart", which)
                    )
            runs[which]["measured_at"] = _stamp()
            results[scenario] = runs
            save()
    this_run["environment"]["load_at_end"] = load_average()
    targets = evaluate_targets(results)
    report["targets"] = [dataclasses.asdict(t) for t in targets]
    report["plots"] = [str(p.name) for p in plot(results, output)]
    save()
    print()
    print(format_table(table_rows(results), targets))
    print(f"\nresults: {results_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
