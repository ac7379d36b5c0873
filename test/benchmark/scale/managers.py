"""The two managers on a fresh Tier 1 control plane: ours and upstream's, started by ``support.launcher``; the
TrainJob webhook configurations that point the API server at either."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from benchmark.scale import CONTROLLER, COSCHEDULING_RUNTIME, CRD_DIR, FIELD_MANAGER, NAMESPACE, RUNTIME_FILE
from benchmark.scale.metrics import RequestKey, apiserver_requests, parse_prometheus
from controller.client.client import Client
from controller.client.object import deep_copy
from controller.envtest import ControlPlane, find_binaries
from controller.envtest.process import free_port
from support import launcher, thirdparty, upstream

TRAINJOB_WEBHOOK_PATHS = (
    "/mutate-trainer-kubeflow-org-v1alpha1-trainjob",
    "/validate-trainer-kubeflow-org-v1alpha1-trainjob",
)
"""The TrainJob defaulter's and validator's paths: upstream v2.3.0's
(``manifests/base/webhook/manifests.yaml``, controller-runtime's generated names) and ours
(``config/webhook/``) are the same."""


def trainjob_webhook_configurations(port: int, ca_bundle: bytes) -> list[dict[str, Any]]:
    """The TrainJob defaulting (mutating) and validating webhooks of ``config/webhook/``, as upstream ships
    them too (failure policy Fail, side effects None, ``trainjobs`` CREATE and UPDATE), pointed by URL at a
    manager's webhook server on 127.0.0.1:``port`` with ``ca_bundle`` (PEM): one Mutating and one
    ValidatingWebhookConfiguration, each holding only the TrainJob webhook (the runtimes' validators are
    left out: the benchmark's runtime is installed before any manager runs)."""
    out = []
    for configuration in launcher.webhook_configurations(port, ca_bundle):
        hooks = [
            hook
            for hook in configuration["webhooks"]
            if any(rule.get("resources") == ["trainjobs"] for rule in hook.get("rules", ()))
        ]
        role = "defaulter" if configuration["kind"].startswith("Mutating") else "validator"
        out.append({**configuration, "metadata": {"name": f"bench-trainjob-{role}"}, "webhooks": hooks})
    return out


def start_ours(kubeconfig: Path, workdir: Path, *, qps: float, burst: int, timeout: float = 120.0) -> Any:
    """Our manager, the console script of this Python, configured as upstream's is in ``support.upstream``
    (``support.launcher``); returns its ``ManagerHandle`` once ``/readyz`` (caches synced) is 200."""
    try:
        command = [str(launcher.console_script())]
    except launcher.LaunchError as exc:
        raise SystemExit(str(exc)) from exc
    config = upstream.configuration(
        launcher.shipped_configuration(),
        health_port=free_port(),
        metrics_port=free_port(),
        webhook_port=free_port(),
        qps=qps,
        burst=burst,
    )
    handle = launcher.prepare(
        workdir,
        kubeconfig,
        config,
        command=command,
        cert_dir=workdir / "certs",
        ca_name="trainer-bench-webhook-ca",
    )
    return launcher.launch(handle, timeout=timeout)


def ours_workers_started_at(log: Path, controller: str = CONTROLLER) -> float | None:
    """When our ``controller`` logged ``controller.started`` (workers up, after its caches synced), as a
    Unix time, from the last start in ``log`` (``support.launcher.workers_started_at``)."""
    return launcher.workers_started_at(log, controller)


def start_manager(which: str, kubeconfig: Path, workdir: Path, *, qps: float, burst: int) -> Any:
    if which == "ours":
        return start_ours(kubeconfig, workdir, qps=qps, burst=burst)
    return upstream.start(kubeconfig, workdir, qps=qps, burst=burst)


def workers_started_at(which: str, handle: Any) -> float | None:
    if which == "ours":
        return ours_workers_started_at(handle.log)
    started: float | None = upstream.workers_started_at(handle.log)
    return started


class Session:
    """A fresh control plane with the CRDs and runtimes installed, the benchmark's client, and at most one
    manager at a time. The benchmark's own requests are counted in :attr:`own`."""

    def __init__(self, workdir: Path, *, coscheduling: bool = False, podgroup_crds: bool = True) -> None:
        pinned = thirdparty.read_versions()
        self.workdir = workdir
        self.plane = ControlPlane(
            find_binaries(
                etcd_version=pinned["ETCD_VERSION"], kubernetes_version=pinned["KUBERNETES_VERSION"]
            )
        )
        self.own: Counter[tuple[str, str]] = Counter()
        self._own_lock = threading.Lock()
        self.client: Client | None = None
        self.coscheduling = coscheduling and podgroup_crds
        self.podgroup_crds = podgroup_crds
        self.manager: Any = None

    def __enter__(self) -> Session:
        self.plane.start()
        podgroups = [thirdparty.scheduler_plugins_podgroup_crd()] if self.podgroup_crds else []
        self.plane.install_crds([thirdparty.jobset_crd(), *podgroups, CRD_DIR])
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
