"""The scenarios: burst, idle, steady, scale, admission, ceiling and the micro benchmarks; each returns its
figures."""

from __future__ import annotations

import concurrent.futures
import math
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchmark.scale import (
    CONTROLLER,
    COSCHEDULING_RUNTIME,
    FIELD_MANAGER,
    JOBSET,
    LIFTED_BURST,
    LIFTED_QPS,
    NAMESPACE,
    PODGROUP,
    REPO,
    RUNTIME,
    RUNTIME_FILE,
    SHIPPED_BURST,
    SHIPPED_QPS,
    TRAINJOB,
    cache_sizes,
    say,
)
from benchmark.scale.managers import TRAINJOB_WEBHOOK_PATHS, Session, trainjob_webhook_configurations
from benchmark.scale.metrics import (
    Sample,
    histogram_buckets,
    histogram_quantile,
    managers_requests,
    metric_delta,
    metric_sum,
    parse_prometheus,
    percentile,
    subtract,
    subtract_buckets,
    summarize_requests,
)
from benchmark.scale.proc import cpu_seconds, load_average, profiled, rss_mib
from benchmark.scale.workloads import (
    Arrivals,
    create_all,
    create_paced,
    manager_samples,
    progress,
    trainjob,
    wait_settled,
    wait_workers_started,
)
from controller.client.gvk import GVK
from controller.client.object import deep_copy
from controller.trainer.kinds import CONFIGMAP, SECRET
from runtime.api.constants import LABEL_TRAINJOB_NAME as TRAINJOB_LABEL
from runtime.render import Document, RenderOptions
from runtime.render import render as render_objects


@dataclass(slots=True, kw_only=True)
class Settings:
    burst: int = 1000
    idle_s: float = 60.0
    steady_s: float = 60.0
    rates: tuple[int, ...] = (20, 50)
    admission_rate: int = 20
    admission_s: float = 60.0
    scale: int = 10_000
    restarts: int = 3
    ceiling: int = 2000
    workdir: Path = field(default_factory=lambda: Path("/tmp/bench-scale"))
    profile: Path | None = None


def _latency(trainjobs: Mapping[str, float], jobsets: Mapping[str, float]) -> dict[str, float]:
    return distribution([jobsets[name] - trainjobs[name] for name in jobsets if name in trainjobs])


def distribution(values: Sequence[float]) -> dict[str, float]:
    """Count, p50, p95, p99 and max of ``values`` (NaN for an empty one)."""
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
        outcomes[result] = metric_delta(
            before, after, "controller_runtime_reconcile_total", controller=CONTROLLER, result=result
        )
    return outcomes


def _reconcile_errors(before: Sequence[Sample], after: Sequence[Sample]) -> float:
    return metric_delta(before, after, "controller_runtime_reconcile_errors_total", controller=CONTROLLER)


def _client_requests(before: Sequence[Sample], after: Sequence[Sample]) -> dict[str, float]:
    """The manager's own ``rest_client_requests_total`` by method (all codes): a cross-check."""
    methods = {s.label("method") for s in after if s.name == "rest_client_requests_total"}
    return {m: metric_delta(before, after, "rest_client_requests_total", method=m) for m in sorted(methods)}


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
        plane_before = {name: cpu_seconds(pid) for name, pid in session.plane.pids.items()}
        with profiled(handle.pid, profile):
            start = time.monotonic()
            create_all(session, [trainjob(name) for name in names])
            created = time.monotonic()
            complete = jobsets.wait_for(names, timeout=max(600.0, n))
            window = time.monotonic() - start
            cpu_done = cpu_seconds(handle.pid)
            plane_after = {name: cpu_seconds(pid) for name, pid in session.plane.pids.items()}
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
        # The manager's applies compete with the creates for the API server's CPU while both run.
        "jobsets_while_creating": sum(1 for t in seen.values() if t <= created),
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
        "reconcile_errors": _reconcile_errors(samples_before, samples_after),
        "cpu_s": cpu_after - cpu_before,
        "cpu_s_per_trainjob": (cpu_after - cpu_before) / n,
        # Cores each process kept busy from the first create until the last JobSet was seen: on a 2-core
        # machine a sum near 2 means the machine, not a limiter, bounded the burst.
        "cores": {
            "manager": (cpu_done - cpu_before) / window,
            **{name: (plane_after[name] - plane_before[name]) / window for name in plane_before},
        },
        "rss_mib": rss_mib(handle.pid),
        "load_before": load_before,
        "load_after": load_average(),
    }
    say(
        f"  {which}: {len(seen)}/{n} JobSets in {result['wall_s']:.2f} s, "
        f"{requests.writes / n:.2f} writes and {requests.reads / n:.2f} reads per TrainJob, "
        f"{result['reconcile_errors']:.0f} reconcile errors, "
        f"CPU {result['cpu_s']:.2f} s; cores busy: "
        + ", ".join(f"{name} {cores:.2f}" for name, cores in result["cores"].items())
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
    say(
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
            "reconcile_errors": _reconcile_errors(samples_before, samples_after),
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
        say(
            f"  {which} {rate}/s: p50 {lat['p50'] * 1000:.0f} ms, p95 {lat['p95'] * 1000:.0f} ms, "
            f"p99 {lat['p99'] * 1000:.0f} ms"
        )
    session.stop_manager()
    return result


def run_scale(
    session: Session, which: str, n: int, profile: Path | None = None, *, restarts: int = 1
) -> dict[str, Any]:
    """``n`` TrainJobs on a coscheduling runtime, then ``restarts`` restarts, one after the other (their
    medians, `_restart_summary`); ``profile``: where to write py-spy's stacks of the first restarted manager
    until its initial reconciles have drained."""
    handle = session.start_manager(which, qps=LIFTED_QPS, burst=LIFTED_BURST)
    wait_workers_started(which, handle)
    wait_settled(handle, quiet=1.0)
    names = [f"scale-{i:05d}" for i in range(n)]
    load_before = load_average()
    cpu_start = cpu_seconds(handle.pid)
    with Arrivals(session, JOBSET, "jobsets") as jobsets:
        api_before, own_before = session.apiserver_counts(), session.own_snapshot()
        start = time.monotonic()
        runtime = COSCHEDULING_RUNTIME if session.coscheduling else RUNTIME
        create_all(session, [trainjob(name, runtime) for name in names])
        complete = jobsets.wait_for(names, timeout=max(900.0, n / 5))
        populated = time.monotonic()
        wait_settled(handle, quiet=3.0, timeout=900.0)
    api_after, own_after = session.apiserver_counts(), session.own_snapshot()
    cpu_end = cpu_seconds(handle.pid)
    podgroups = 0
    if session.podgroup_crds:
        podgroups = len(session.api.list(PODGROUP, NAMESPACE).items)
        session.count("LIST", "podgroups")
    rss = rss_mib(handle.pid)
    settled_at = time.monotonic()
    cache = cache_sizes.measure(cached_objects(session), session.workdir / f"{which}-cache")
    rss_idle = rss_after_idle(handle, settled_at)
    requests = summarize_requests(managers_requests(subtract(api_after, api_before), own_after - own_before))
    result: dict[str, Any] = {
        "trainjobs": n,
        "complete": complete,
        "podgroups": podgroups,
        "populate_s": populated - start,
        "rss_mib": rss,
        "rss_idle_mib": rss_idle,
        "cpu_s": cpu_end - cpu_start,
        "cpu_s_per_trainjob": (cpu_end - cpu_start) / n,
        "requests": {
            "writes_per_trainjob": requests.writes / n,
            "reads_per_trainjob": requests.reads / n,
            "per_trainjob": requests.per(n),
        },
        "load_before": load_before,
        "cache": cache,
    }
    say(
        f"  {which}: {n} TrainJobs populated in {result['populate_s']:.1f} s, RSS {rss:.0f} MiB "
        f"({rss_idle:.0f} MiB after {IDLE_RSS_S:.0f} s idle), "
        f"CPU {result['cpu_s_per_trainjob'] * 1000:.2f} ms per TrainJob"
    )
    for kind, row in cache.items():
        say(
            f"    cache, {kind} ({row['objects']}, {row['json_bytes']:.0f} B of JSON): "
            f"{row['stripped_bytes']:.0f} B stripped of managedFields, {row['transformed_bytes']:.0f} B "
            f"transformed ({row['saved']:.0%} less)"
        )
    runs = [
        _restart(session, which, n, profile if i == 0 else None, tag=f"-restart{i + 1}")
        for i in range(restarts)
    ]
    result["restart"] = _restart_summary(runs)
    restart = result["restart"]
    # The manager of the last restart still runs: its memory once idle.
    restart["rss_idle_mib"] = rss_after_idle(session.manager, time.monotonic())
    drains = ", ".join(f"{run['drained_s']:.1f}" for run in runs)
    say(
        f"  {which}, {len(runs)} restarts (medians): caches synced {restart['caches_synced_s']:.1f} s, "
        f"drained {restart['drained_s']:.1f} s (each: {drains}), {restart['writes']} writes, "
        f"RSS at most {restart['rss_mib']:.0f} MiB "
        f"({restart['rss_idle_mib']:.0f} MiB after {IDLE_RSS_S:.0f} s idle)"
    )
    session.stop_manager()
    return result


def _restart(session: Session, which: str, n: int, profile: Path | None, *, tag: str) -> dict[str, Any]:
    """One restart of the manager over the ``n`` settled TrainJobs, under the shipped limiter, until its
    initial reconciles have drained; the manager is left running (stopped by the next restart)."""
    session.stop_manager()
    api_before, own_before = session.apiserver_counts(), session.own_snapshot()
    handle = session.start_manager(which, qps=SHIPPED_QPS, burst=SHIPPED_BURST, tag=tag)
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
            # Each poll is a metrics scrape, which costs the manager a little: twice a second keeps that
            # small, for 0.25 s of resolution.
            pause.wait(0.5)
    synced_at = wait_workers_started(which, handle)
    wait_settled(handle, quiet=2.0)
    api_after, own_after = session.apiserver_counts(), session.own_snapshot()
    restart_requests = summarize_requests(
        managers_requests(subtract(api_after, api_before), own_after - own_before)
    )
    final = progress(handle)
    cpu = cpu_seconds(handle.pid)
    return {
        "caches_synced_s": synced_at - started,
        "drained_s": (drained_at - started) if drained_at is not None else math.nan,
        "writes": restart_requests.writes,
        "reads": restart_requests.reads,
        "requests": restart_requests.by_verb_resource,
        "reconciles": final.reconciles,
        "reconcile_errors": final.errors,
        "cpu_s": cpu,
        "cpu_s_per_trainjob": cpu / n,
        "rss_mib": rss_mib(handle.pid),
        "load_after": load_average(),
    }


def _restart_summary(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The restarts as one figure set: the median of each time and CPU figure (one restart's drain moves by
    a third between restarts of the same build on two cores), the largest RSS (a spike must show), the sum
    of writes, reads and errors (each must be 0 in every restart); every restart's own figures in ``runs``."""

    def median(key: str) -> float:
        return statistics.median(float(run[key]) for run in runs)

    return {
        "caches_synced_s": median("caches_synced_s"),
        "drained_s": median("drained_s"),
        "writes": sum(run["writes"] for run in runs),
        "reads": sum(run["reads"] for run in runs),
        "requests": runs[-1]["requests"],
        "reconciles": runs[-1]["reconciles"],
        "reconcile_errors": sum(run["reconcile_errors"] for run in runs),
        "cpu_s": median("cpu_s"),
        "cpu_s_per_trainjob": median("cpu_s_per_trainjob"),
        "rss_mib": max(run["rss_mib"] for run in runs),
        "load_after": runs[-1]["load_after"],
        "runs": [dict(run) for run in runs],
    }


IDLE_RSS_S = 130.0
"""How long a manager idles before its resident set is read again: past Go's forced collection (every two
minutes without one; its scavenger then returns the freed pages) and one memory-scavenger period of ours
(60 s). A figure read right after settling is each allocator's high-water mark, which depends on when each
runtime last collected: a set-up detail, not a footprint."""


def rss_after_idle(handle: Any, since: float, idle_s: float = IDLE_RSS_S) -> float:
    """The manager's RSS once ``idle_s`` seconds have passed since ``since`` (monotonic), doing nothing."""
    threading.Event().wait(max(0.0, since + idle_s - time.monotonic()))
    return rss_mib(handle.pid)


def cached_objects(session: Session) -> dict[GVK, list[Any]]:
    """What our manager caches in the benchmark's namespace, as the API server serves it: TrainJobs,
    JobSets, PodGroups (when their CRD is installed) and the labelled ConfigMaps and Secrets."""
    objects: dict[GVK, list[Any]] = {}
    kinds = [TRAINJOB, JOBSET, *([PODGROUP] if session.podgroup_crds else [])]
    for gvk in kinds:
        objects[gvk] = session.api.list(gvk, NAMESPACE).items
        session.count("LIST", f"{gvk.kind.lower()}s")
    for gvk in (CONFIGMAP, SECRET):
        objects[gvk] = session.api.list(gvk, NAMESPACE, label_selector=TRAINJOB_LABEL).items
        session.count("LIST", f"{gvk.kind.lower()}s")
    return objects


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
        say(f"  ceiling, {threads} threads: {run['apply_per_s']:.0f} JobSet applies/s")
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
    say(f"  micro benchmarks: exit status {done.returncode}, output in {output}")
    return {
        "exit_status": done.returncode,
        "seconds": time.monotonic() - began,
        "output": str(output.relative_to(REPO) if output.is_relative_to(REPO) else output),
    }


# ============================================================================================= admission

WEBHOOK_REQUESTS = "controller_runtime_webhook_requests_total"


def webhook_requests(samples: Sequence[Sample]) -> dict[str, float]:
    """``controller_runtime_webhook_requests_total`` (both managers expose it) per TrainJob webhook path."""
    return {path: metric_sum(samples, WEBHOOK_REQUESTS, webhook=path) for path in TRAINJOB_WEBHOOK_PATHS}


def _webhook_figures(before: Sequence[Sample], after: Sequence[Sample]) -> dict[str, Any]:
    """What the manager's webhook server counted between two scrapes: requests per TrainJob webhook path,
    and the mean seconds a request took inside the server (``controller_runtime_webhook_latency_seconds``'
    sum over count, both paths; its decade buckets are too coarse for quantiles)."""
    requests = {
        path: metric_delta(before, after, WEBHOOK_REQUESTS, webhook=path) for path in TRAINJOB_WEBHOOK_PATHS
    }
    seconds, count = (
        sum(metric_delta(before, after, family, webhook=path) for path in TRAINJOB_WEBHOOK_PATHS)
        for family in (
            "controller_runtime_webhook_latency_seconds_sum",
            "controller_runtime_webhook_latency_seconds_count",
        )
    )
    return {"webhook_requests": requests, "webhook_mean_s": seconds / count if count else math.nan}


APISERVER_WEBHOOK_DURATION = "apiserver_admission_webhook_admission_duration_seconds"
TRAINJOB_WEBHOOK_NAMES = {
    "defaulter": "defaulter.trainjob.trainer.kubeflow.org",
    "validator": "validator.trainjob.trainer.kubeflow.org",
}
"""The names the benchmark registers the TrainJob webhooks under (`trainjob_webhook_configurations`)."""


def apiserver_webhook_samples(session: Session) -> list[Sample]:
    """kube-apiserver's ``apiserver_admission_webhook_admission_duration_seconds`` samples."""
    answer = session.plane.admin_request("GET", "/metrics")
    return parse_prometheus(answer.body.decode(), (APISERVER_WEBHOOK_DURATION,))


def _apiserver_webhook_figures(before: Sequence[Sample], after: Sequence[Sample]) -> dict[str, Any]:
    """The API server's own view of each TrainJob webhook call between two scrapes: its mean duration (the
    histogram's sum over count), from the moment the API server starts the call until it has the answer;
    so the manager's share of a create's latency, TLS and HTTP included."""
    means: dict[str, float] = {}
    for short, name in TRAINJOB_WEBHOOK_NAMES.items():
        seconds, count = (
            metric_delta(before, after, f"{APISERVER_WEBHOOK_DURATION}_{part}", name=name)
            for part in ("sum", "count")
        )
        means[short] = seconds / count if count else math.nan
    return {"apiserver_webhook_mean_s": means}


def wait_webhooks_live(
    session: Session, handle: Any, before: Mapping[str, float], timeout: float = 120.0
) -> float:
    """Until a dry-run TrainJob create succeeds through the API server and every TrainJob webhook of the
    manager counted a request since ``before`` (its counters when the configurations were created): the API
    server has loaded the configurations and reaches the manager. Returns the seconds it took."""
    path = f"/apis/{TRAINJOB.group}/{TRAINJOB.version}/namespaces/{NAMESPACE}/trainjobs?dryRun=All"
    began = time.monotonic()
    pause = threading.Event()
    last = ""
    while time.monotonic() - began < timeout:
        answer = session.plane.admin_request("POST", path, trainjob("admission-probe"))
        if answer.status == 201:
            now = webhook_requests(manager_samples(handle))
            if all(now[p] > before.get(p, 0.0) for p in TRAINJOB_WEBHOOK_PATHS):
                return time.monotonic() - began
            last = f"webhook requests {now}"
        else:
            last = f"dry run answered {answer.status}: {answer.body[:300]!r}"
        pause.wait(0.2)
    raise TimeoutError(f"{handle.name}'s webhooks were not live within {timeout:g} s ({last})")


def run_admission(
    session: Session,
    which: str,
    *,
    rate: int,
    seconds: float,
    n: int,
    qps: float = SHIPPED_QPS,
    burst: int = SHIPPED_BURST,
) -> dict[str, Any]:
    """Both TrainJob webhooks of ``which`` registered with the API server (failure policy Fail): each create
    request's round trip, open-loop at ``rate``/s for ``seconds``, then in a burst of ``n`` (8 client
    threads), and the burst's time from the first create until every JobSet exists; the manager's client
    limited to ``qps``/``burst`` (the shipped limiter unless the ``admission-throttled`` scenario)."""
    handle = session.start_manager(which, qps=qps, burst=burst)
    wait_workers_started(which, handle)
    wait_settled(handle, quiet=1.0)
    if handle.webhook_port is None or handle.ca_pem is None:
        raise RuntimeError(f"{handle.name} has no webhook port or throwaway CA to register")
    configurations = trainjob_webhook_configurations(handle.webhook_port, handle.ca_pem)
    before = webhook_requests(manager_samples(handle))
    for configuration in configurations:
        session.api.create(configuration)
        session.count("POST", configuration["kind"].lower() + "s")
    try:
        live_s = wait_webhooks_live(session, handle, before)
        say(f"  {which}: webhooks live after {live_s:.1f} s")
        result: dict[str, Any] = {"webhooks_live_s": live_s, "limiter": {"qps": qps, "burst": burst}}
        result["paced"] = _admission_paced(session, handle, rate, seconds)
        result["burst"] = _admission_burst(session, handle, n)
    finally:
        for configuration in configurations:
            gvk = GVK.from_api_version(configuration["apiVersion"], configuration["kind"])
            session.api.delete(gvk, configuration["metadata"]["name"])
    paced, bursted = result["paced"]["create_latency_s"], result["burst"]
    latency = bursted["create_latency_s"]
    say(
        f"  {which} (limiter {qps:g}/{burst}): creates at {rate}/s "
        f"p50 {paced['p50'] * 1000:.1f} ms, p99 {paced['p99'] * 1000:.1f} ms; burst of {n}: "
        f"p50 {latency['p50'] * 1000:.1f} ms, p99 {latency['p99'] * 1000:.1f} ms, "
        f"{bursted['jobsets_while_creating']} JobSets by the last create's answer, "
        f"all JobSets in {bursted['wall_s']:.2f} s"
    )
    session.stop_manager()
    return result


def _admission_paced(session: Session, handle: Any, rate: int, seconds: float) -> dict[str, Any]:
    names = [f"admission{rate}-{i:05d}" for i in range(int(rate * seconds))]
    load_before = load_average()
    samples_before = manager_samples(handle)
    apiserver_before = apiserver_webhook_samples(session)
    latencies: dict[str, float] = {}
    with Arrivals(session, JOBSET, "jobsets") as jobsets:
        _, late = create_paced(session, [trainjob(name) for name in names], rate, latencies=latencies)
        complete = jobsets.wait_for(names, timeout=600.0)
    wait_settled(handle)
    samples_after = manager_samples(handle)
    apiserver_after = apiserver_webhook_samples(session)
    return {
        "rate_per_s": rate,
        "trainjobs": len(names),
        "complete": complete,
        "create_latency_s": distribution(list(latencies.values())),
        "create_latencies_s": sorted(latencies.values()),
        "max_send_lateness_s": late,
        **_webhook_figures(samples_before, samples_after),
        **_apiserver_webhook_figures(apiserver_before, apiserver_after),
        "load_before": load_before,
        "load_after": load_average(),
    }


def _admission_burst(session: Session, handle: Any, n: int) -> dict[str, Any]:
    names = [f"admission-burst-{i:05d}" for i in range(n)]
    load_before = load_average()
    samples_before = manager_samples(handle)
    apiserver_before = apiserver_webhook_samples(session)
    latencies: dict[str, float] = {}
    with Arrivals(session, JOBSET, "jobsets") as jobsets:
        start = time.monotonic()
        create_all(session, [trainjob(name) for name in names], latencies=latencies)
        created = time.monotonic()
        complete = jobsets.wait_for(names, timeout=max(600.0, n))
        seen = jobsets.times(names)
    wait_settled(handle)
    samples_after = manager_samples(handle)
    apiserver_after = apiserver_webhook_samples(session)
    last = max(seen.values()) if seen else math.nan
    return {
        "trainjobs": n,
        "jobsets": len(seen),
        "complete": complete,
        "create_s": created - start,
        # The manager's applies compete with the creates for the API server's CPU while both run.
        "jobsets_while_creating": sum(1 for t in seen.values() if t <= created),
        "wall_s": last - start,
        "create_latency_s": distribution(list(latencies.values())),
        "create_latencies_s": sorted(latencies.values()),
        "jobset_seen_s": sorted(t - start for t in seen.values()),
        **_webhook_figures(samples_before, samples_after),
        **_apiserver_webhook_figures(apiserver_before, apiserver_after),
        "reconcile_errors": _reconcile_errors(samples_before, samples_after),
        "load_before": load_before,
        "load_after": load_average(),
    }
