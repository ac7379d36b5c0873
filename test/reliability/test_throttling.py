"""429 with Retry-After, and 5xx, injected in front of kube-apiserver: the manager's retries back off,
Retry-After is honoured, there is no hot loop, and every TrainJob converges.

The manager runs in this process as the ServiceAccount, through a fault proxy that answers a share of all
requests (reads, writes, list, watch) with 429 ``Retry-After: 1``, 503 or 500 while a burst of TrainJobs is
reconciled. Measured from the proxy's record of every request:

- a request answered 429 is sent again no sooner than its Retry-After: the client itself retries a GET, and
  a write too, after the Retry-After (``controller/client/client.py``). The GETs are those of TrainJobs
  settled before the faults whose snapshots are then deleted: a cache miss for a TrainJob already built is
  confirmed
  live (a new TrainJob's is not: it reads nothing);
- once every TrainJob has converged (faults still on), nothing but Events is written any more: failing
  requests do not keep a loop spinning; the request rate over the window is reported;
- after the faults stop, the caches equal a fresh LIST (no watch event was lost to a failed watch).
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from controller.client.client import Client
from controller.client.errors import NotFound
from support import reliability

Fault = reliability.faultproxy.Fault

BURST = 30
WARM = 10  # TrainJobs settled before the faults; their snapshots are deleted under the faults
RETRY_AFTER = 1
SLACK = 0.05  # seconds: the proxy stamps a request when it has read it, a little after the client sent it
IDLE_WITH_FAULTS = 5.0  # seconds the converged TrainJobs are watched, faults still on
# What the window may cost: a clean reconcile of one TrainJob is about three requests (the snapshot apply,
# the JobSet apply, the status patch; a warm one's live read and snapshot apply); faults add retries, each
# failure once. Informers relist after a failed list or watch, backing off from 0.8 s. A hot loop would be
# far above either.
REQUESTS_PER_TRAINJOB = 12
INFORMER_REQUESTS = 100


def _key(exchange: Any) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    info = exchange.info
    query = tuple(sorted((k, v[0]) for k, v in info.query.items() if k != "timeoutSeconds"))
    return info.method, info.path, query


def retry_gaps(exchanges: list[Any]) -> dict[str, list[float]]:
    """Seconds from each injected 429 to the next identical request, for reads and for writes."""
    later: dict[Any, list[Any]] = defaultdict(list)
    for e in exchanges:
        later[_key(e)].append(e)
    gaps: dict[str, list[float]] = {"read": [], "write": []}
    for e in exchanges:
        if not (e.injected and e.status == 429):
            continue
        following = [f for f in later[_key(e)] if f.at > e.at]
        if following:
            gaps["write" if e.info.is_write else "read"].append(following[0].at - e.at)
    return gaps


def test_429_and_5xx_are_retried_with_backoff_honouring_retry_after(  # noqa: PLR0917 - fixtures
    admin: Client,
    service_account_kubeconfig: Path,
    namespace: str,
    proxies: Any,
    figures: Any,
    profile: Any,
) -> None:
    admin.create(reliability.torch_runtime(namespace), field_manager=reliability.USER)
    proxy = proxies.new("throttled", seed=12)
    kubeconfig = proxies.kubeconfig(proxy, service_account_kubeconfig, "throttled")
    manager = reliability.TrainerManager(kubeconfig, name="throttled").start()
    try:
        warm = [f"warm-{i:02d}" for i in range(WARM)]
        reliability.create_all(admin, [reliability.trainjob(namespace, n) for n in warm])
        reliability.eventually(
            lambda: reliability.converged(admin, namespace, warm), timeout=60, interval=0.5
        )
        began = time.monotonic()
        faults = [
            proxy.inject(Fault(status=429, retry_after=RETRY_AFTER, fraction=0.2)),
            proxy.inject(Fault(status=503, fraction=0.05)),
            proxy.inject(Fault(status=500, fraction=0.03)),
        ]
        for name in warm:
            admin.delete(reliability.CONFIGMAP, f"{name}-runtime-snapshot", namespace)
        names = [f"throttled-{i:02d}" for i in range(BURST)]
        reliability.create_all(admin, [reliability.trainjob(namespace, n) for n in names])

        def settled_with_snapshots() -> None:
            reliability.converged(admin, namespace, [*warm, *names])
            for name in warm:
                try:
                    admin.get(reliability.CONFIGMAP, f"{name}-runtime-snapshot", namespace)
                except NotFound as exc:
                    raise AssertionError(f"{name}'s snapshot not rebuilt yet") from exc

        reliability.eventually(settled_with_snapshots, timeout=120, interval=0.5)
        settled = time.monotonic()
        converged_s = settled - began
        # Faults still on: nothing is left to do, so nothing may be written while they last.
        time.sleep(max(IDLE_WITH_FAULTS, began + profile.fault_window - settled))
        proxy.clear_faults()
        ended = time.monotonic()
        window = proxy.exchanges(since=began)
        # Events are left out: the one event broadcaster thread sends them in order, and each 429 makes it
        # sleep for the Retry-After, so Events recorded before convergence may still be on their way. They
        # are not reconcile writes, and a hot reconcile loop would show in the other resources' writes.
        written_after = [
            e for e in proxy.exchanges(since=settled + 1.0) if e.info.is_write and e.info.resource != "events"
        ]
        budget = (BURST + WARM) * REQUESTS_PER_TRAINJOB + INFORMER_REQUESTS
        assert len(window) <= budget, f"{len(window)} requests in {ended - began:.0f} s (budget {budget})"
        assert written_after == [], [(e.info.verb, e.info.path, e.status) for e in written_after[:5]]

        gaps = retry_gaps(window)
        assert gaps["read"], "no GET was answered 429: the scenario did not exercise the client's retry"
        assert min(gaps["read"]) >= RETRY_AFTER - SLACK, sorted(gaps["read"])[:5]
        assert gaps["write"], "no write was answered 429"
        early_writes = [g for g in gaps["write"] if g < RETRY_AFTER - SLACK]

        found = reliability.inventory(admin, namespace, [*warm, *names])
        assert found.lost == [] and found.duplicated == []
        reliability.eventually(manager.queue_idle, timeout=30)
        reliability.eventually(
            lambda: reliability.caches_match_server(manager, admin), timeout=60, interval=0.5
        )
        injected = sum(f.injected for f in faults)
        per_minute = len(window) / ((ended - began) / 60.0)
    finally:
        manager.stop()
    figures.report(
        f"429/5xx injected ({profile.name})",
        runs=1,
        trainjobs=BURST,
        window_s=ended - began,
        requests=len(window),
        request_budget=budget,
        faults_injected=injected,
        requests_per_minute=per_minute,
        converged_s=converged_s,
        writes_after_convergence=0,
        read_retry_after_gap_min_s=min(gaps["read"]),
        write_retry_after_gap_min_s=min(gaps["write"]),
        writes_retried_before_retry_after=len(early_writes),
        lost=0,
        duplicated=0,
    )
    assert early_writes == [], (
        f"{len(early_writes)} writes retried before their Retry-After: {sorted(early_writes)[:5]}"
    )
