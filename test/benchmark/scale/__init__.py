"""``make bench-scale``: our controller and upstream's Go controller, side by side at scale, on one machine.

Modules: ``metrics`` (Prometheus text and request accounting, ``prometheus_client``'s parser), ``proc``
(``/proc`` readers, the load average, py-spy), ``managers`` (a fresh control plane, either manager started by
``support.launcher``), ``workloads`` (TrainJobs at a pace, arrivals, progress), ``scenarios`` and ``report``
(targets, the table, plots, ``results.json``); ``__main__`` is the command line.

Usage::

    python hack/bench_scale.py                  # everything, figures into docs/performance/
    python hack/bench_scale.py --quick          # a smoke run with small counts, into build/bench-scale-quick/
    python hack/bench_scale.py --scenarios burst,steady --controllers ours   # re-run a part

Each scenario runs against our manager (the ``trainer-controller-manager`` console script of this Python,
with ``config/manager/controller_manager_config.yaml``) and then against upstream's
(``support.upstream``: the unmodified v2.3.0 Go binary with upstream's shipped configuration), one
after the other, each on a fresh Tier 1 control plane (``controller.envtest``: etcd + kube-apiserver, no
controller-manager) with our CRDs, the JobSet CRD and scheduler-plugins' PodGroup CRD installed and the
``torch-distributed`` ClusterTrainingRuntime of ``config/runtimes/``. No JobSet controller runs: a JobSet
is a stored object, so every figure is the Trainer controller's. Both managers run out of cluster as the
admin, with leader election off, certificate management off (a throwaway serving certificate), no webhook
configurations (except in ``admission``), metrics over HTTP on loopback, and the same client rate limit (QPS
50 / burst 100, one token bucket per resource type in both) unless a scenario lifts it for both. A re-run of
some scenarios or controllers replaces only their entries in ``results.json``.

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
  manager CPU-seconds per TrainJob; then three restarts (``--restarts``) under the shipped limiter, one after
  the other: time to caches synced (the TrainJob controller's "workers started" log line), until the
  initial reconciles drained, and the CPU, each the median of the restarts (one restart's drain moves by a
  third from one to the next), the largest RSS, and the writes made over all of them (none expected);
- ``admission``: the manager's TrainJob defaulting and validating webhooks registered with the API server by
  URL (``https://127.0.0.1:<webhook port>/<upstream's path>``, the throwaway certificate's CA as
  ``caBundle``, failure policy Fail, side effects None, ``trainjobs`` CREATE and UPDATE only), live once a
  dry-run create succeeds through them and the manager's ``controller_runtime_webhook_requests_total`` moved
  for both; then each create request's round trip (client-side p50/p99) open-loop at 20/s
  (``--admission-rate``) for 60 s, and in a burst of 1,000 (8 client threads) with the time from the first
  create until every JobSet exists; per phase also the webhook requests the manager counted and their mean
  time inside its webhook server (``controller_runtime_webhook_latency_seconds``), and the API server's
  mean call to each of the two webhooks (``apiserver_admission_webhook_admission_duration_seconds``: the
  manager's share of a create's latency, connection, TLS and HTTP included);
- ``ceiling``: no controller; a tight client (8 and 16 threads) server-side applies JobSets as the
  controller renders them: the API server's own SSA throughput;
- ``micro``: ``pytest -m benchmark`` (what ``make bench`` runs), its output saved beside the results.

Output: one table on stdout, ``results.json`` (every figure, the load average before and after each run,
versions) and PNG plots in the output directory. Benchmarks report; they assert nothing: the table's
``target`` column says which targets a run met.

Request accounting: ``apiserver_request_total`` has no user label, so the benchmark counts its own requests
(by verb and resource) and subtracts them; WATCH requests (counted by the API server when they end) and
``leases`` (kube-apiserver's own heartbeats; no manager here holds a Lease) are left out.

Threads: the benchmark's watches and client pools are threads of this process, each named and joined before
the scenario ends (the rule that only ``controller/`` starts threads is about the product).

Set-ups (``--setup``): with the PodGroup CRD (the default) or without it (see :data:`SETUPS`).

Deliberately missing: a JobSet controller, kubelets and Pods (nothing runs), the runtimes' webhooks, more than
one replica, and any assertion on time.
"""

from __future__ import annotations

import time
from pathlib import Path

from controller.client.gvk import GVK

REPO = Path(__file__).resolve().parents[3]
OUR_CONFIG = REPO / "config" / "manager" / "controller_manager_config.yaml"
RUNTIME_FILE = REPO / "config" / "runtimes" / "torch-distributed.yaml"
CRD_DIR = REPO / "config" / "crd"

NAMESPACE = "bench"
FIELD_MANAGER = "bench-scale"
RUNTIME = "torch-distributed"
COSCHEDULING_RUNTIME = "torch-distributed-coscheduling"
CONTROLLER = "trainjob_controller"
CONTROLLERS = ("ours", "upstream")
SHIPPED_QPS = 50.0
SHIPPED_BURST = 100
LIFTED_QPS = 100_000.0
LIFTED_BURST = 100_000
THROTTLED_QPS = 20.0
THROTTLED_BURST = 20
"""Both managers' limiter in the ``admission-throttled`` scenario: about the rate at which upstream's one
TrainJob worker, with its cache-lag requeues, applies JobSets while a burst's creates are still arriving. At
that rate neither manager's writes crowd the creates out of the API server's CPU, so the create latencies
compare the webhooks themselves."""
CREATE_THREADS = 8

TRAINJOB = GVK("trainer.kubeflow.org", "v1alpha1", "TrainJob")
JOBSET = GVK("jobset.x-k8s.io", "v1alpha2", "JobSet")
PODGROUP = GVK("scheduling.x-k8s.io", "v1alpha1", "PodGroup")

WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"})
READ_VERBS = frozenset({"GET", "LIST"})
IGNORED_RESOURCES = frozenset({"", "leases", "endpoints", "endpointslices"})
"""Not the managers': discovery (no resource) and what kube-apiserver writes for itself (its Lease heartbeats,
the ``kubernetes`` Service's endpoints). Non-resource paths (``/openapi/v3``...) are left out too."""

SCENARIOS = (
    "burst",
    "burst-lifted",
    "steady",
    "scale",
    "admission",
    "admission-throttled",
    "ceiling",
    "micro",
)
DEFAULT_SETUP = "podgroup-crds"
SETUPS = (DEFAULT_SETUP, "no-podgroup-crds")
"""The control plane's set-up: with scheduler-plugins' PodGroup CRD installed (the default: each manager
then watches PodGroups, and the scale scenario runs a CoScheduling runtime, so each TrainJob also has a
PodGroup), or without it (both managers skip the PodGroup watch; the scale scenario runs the plain torch
runtime). Results of a set-up other than the default are kept as ``<scenario>@<setup>``."""


def stamp() -> str:
    """Local time, to the second: when a figure was measured."""
    return time.strftime("%Y-%m-%d %H:%M:%S")


def say(message: str) -> None:
    """A progress line on stdout, time-stamped."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)
