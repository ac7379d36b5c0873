"""Switching controllers: TrainJobs made and running under upstream's v2.3.0 manager, that manager stopped
and ours started (and back again). Every TrainJob continues and completes, no JobSet is made again, the
``trainer`` field manager keeps its fields, and the first reconcile of each writes nothing beyond the
differences ``docs/compatibility.md`` explains.

Upstream's unmodified binary (``hack/upstream_trainer.py``) and our manager (in this process, as the binary
builds it) both run as the manager's ServiceAccount with the shipped RBAC, each behind a pass-through
:class:`~faultproxy.FaultProxy` that writes down every request it makes: the writes of each manager are
its proxy's record. Tier 1 runs no JobSet controller: the test writes the JobSets' status.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.client.client import Client
from support import reliability, upstream

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

RUNTIME = "torch-distributed"
FIRST = [f"up-{i:02d}" for i in range(10)]  # made under upstream; the last stays suspended
SECOND = [f"ours-{i:02d}" for i in range(3)]  # made under ours; the last stays suspended
SNAPSHOT = "-runtime-snapshot"
QUIET = 1.5
"""Seconds without a write through a manager's proxy after which it counts as settled."""

# The writes a manager may make on taking over a settled TrainJob, by (verb, resource): each is explained.
EXPLAINED = {
    # A suspended TrainJob's JobSet is applied on every reconcile, by upstream as by us
    # (docs/reliability.md, "Someone else's hands on the JobSet"); the body is the same bytes
    # (docs/compatibility.md, "Objects as written"), so the apply changes nothing: asserted below.
    ("apply", "jobsets"),
}

COMPLETED = {
    "type": "Completed",
    "status": "True",
    "reason": "AllJobsCompleted",
    "message": "jobset completed successfully",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
}


def _runtime(namespace: str) -> dict[str, Any]:
    """The shipped ``torch-distributed`` runtime, as a TrainingRuntime of the test's namespace."""
    shipped = yaml.safe_load((ROOT / "config" / "runtimes" / f"{RUNTIME}.yaml").read_text())
    shipped["kind"] = "TrainingRuntime"
    shipped["metadata"] = {"name": RUNTIME, "namespace": namespace}
    return dict(shipped)


def _trainjob(namespace: str, name: str, *, suspend: bool) -> dict[str, Any]:
    return reliability.trainjob(namespace, name, RUNTIME, suspend=suspend)


def _writes(proxy: Any, since: float | None = None) -> list[Any]:
    return proxy.exchanges(
        since=since,
        where=lambda e: e.info.is_write and e.status is not None and 200 <= e.status < 300,
    )


def _settle(proxy: Any, *, timeout: float = 45.0) -> None:
    """Wait until ``proxy`` has seen no successful write for :data:`QUIET` seconds."""

    def quiet() -> None:
        last = _writes(proxy)
        assert not last or time.monotonic() - last[-1].at >= QUIET, "still writing"

    reliability.eventually(quiet, timeout=timeout, interval=0.2)


def _snapshot(admin: Client, namespace: str, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Per TrainJob: its own, its JobSet's and its runtime snapshot ConfigMap's uid, resourceVersion,
    generation, managedFields and status."""
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        trainjob = reliability.get(admin, reliability.TRAINJOB, name, namespace)
        jobset = reliability.get(admin, reliability.JOBSET, name, namespace)
        snapshot = reliability.get(admin, reliability.CONFIGMAP, f"{name}{SNAPSHOT}", namespace)
        out[name] = {
            kind: {
                "uid": obj["metadata"]["uid"],
                "resourceVersion": obj["metadata"]["resourceVersion"],
                "generation": obj["metadata"].get("generation"),
                "managedFields": _fields(obj),
                "status": obj.get("status"),
            }
            for kind, obj in (("trainjob", trainjob), ("jobset", jobset), ("configmap", snapshot))
        }
    return out


def _fields(obj: dict[str, Any]) -> dict[tuple[str, str, str], Any]:
    """managedFields by (manager, operation, subresource), without the timestamps."""
    return {
        (e["manager"], e["operation"], e.get("subresource", "")): e.get("fieldsV1")
        for e in obj["metadata"].get("managedFields") or []
    }


def _running(admin: Client, namespace: str, names: Iterable[str]) -> None:
    """What the JobSet controller would write for a JobSet whose one pod runs."""
    for name in names:
        node = {"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}
        admin.patch_status(reliability.JOBSET, name, {"status": {"replicatedJobsStatus": [node]}}, namespace)


def _complete(admin: Client, namespace: str, names: Iterable[str]) -> None:
    for name in names:
        node = {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
        admin.patch_status(
            reliability.JOBSET,
            name,
            {"status": {"conditions": [COMPLETED], "replicatedJobsStatus": [node]}},
            namespace,
        )


def _all_complete(admin: Client, namespace: str, names: Iterable[str]) -> None:
    for name in names:
        got = reliability.get(admin, reliability.TRAINJOB, name, namespace)
        assert reliability.condition_types(got).get("Complete") == "True", (name, got.get("status"))


def _jobsets_made(admin: Client, namespace: str, names: Iterable[str]) -> None:
    for name in names:
        reliability.get(admin, reliability.JOBSET, name, namespace)
        reliability.get(
            admin, reliability.CONFIGMAP, f"{name}{SNAPSHOT}", namespace
        )  # upstream v2.3.0 makes it too


def _judge(
    who: str,
    writes: list[Any],
    before: dict[str, dict[str, Any]],
    after: dict[str, dict[str, Any]],
) -> dict[str, int]:
    """Print the writes per TrainJob and assert what must hold across the switch; returns the counts of
    writes that changed an object (resourceVersion moved) and of no-op writes."""
    per_object: dict[str, list[str]] = {}
    for exchange in writes:
        info = exchange.info
        per_object.setdefault(info.name or "<collection>", []).append(
            f"{info.verb} {info.qualified_resource} -> {exchange.status}"
        )
    print(f"\n[takeover] {who}: {len(writes)} writes")
    for name in sorted(set(before) | set(per_object)):
        print(f"  {name}: {per_object.get(name, [])}")
    unexplained = [
        f"{e.info.verb} {e.info.qualified_resource} {e.info.name}"
        for e in writes
        if (e.info.verb, e.info.qualified_resource) not in EXPLAINED
    ]
    changed: list[str] = []
    for name, was in before.items():
        now = after[name]
        for kind in ("trainjob", "jobset", "configmap"):
            assert now[kind]["uid"] == was[kind]["uid"], f"{who}: the {kind} of {name} was made again"
            assert now[kind]["generation"] == was[kind]["generation"], (
                f"{who}: the {kind} of {name} changed spec: generation {was[kind]['generation']} -> "
                f"{now[kind]['generation']}"
            )
            if now[kind]["resourceVersion"] != was[kind]["resourceVersion"]:
                changed.append(f"{kind} {name}")
                print(f"  changed: {kind} {name}")
                for key in sorted(set(was[kind]["managedFields"]) | set(now[kind]["managedFields"])):
                    if was[kind]["managedFields"].get(key) != now[kind]["managedFields"].get(key):
                        print(f"    managedFields {key}: differs")
                if was[kind]["status"] != now[kind]["status"]:
                    print(f"    status: {was[kind]['status']} -> {now[kind]['status']}")
            owners = sorted(m for (m, op, sub) in now[kind]["managedFields"] if op == "Apply" and not sub)
            if kind != "trainjob":
                assert owners == ["trainer"], f"{who}: {kind} of {name} applied by {owners}"
                assert now[kind]["managedFields"] == was[kind]["managedFields"], (
                    f"{who}: the managed fields of the {kind} of {name} changed"
                )
    assert unexplained == [], f"{who}: writes not explained by docs/compatibility.md: {unexplained}"
    assert changed == [], f"{who}: objects changed by the first reconcile: {changed}"
    return {"writes": len(writes), "changed": len(changed)}


def _reconciles(text: str) -> float:
    """upstream's controller_runtime_reconcile_total for the TrainJob controller, summed over results."""
    total = 0.0
    for line in text.splitlines():
        if (
            line.startswith("controller_runtime_reconcile_total{")
            and 'controller="trainjob_controller"' in line
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _reconciler_errors(log: Path) -> list[str]:
    """The ``Reconciler error`` lines of upstream's log."""
    return [line for line in log.read_text().splitlines() if '"msg":"Reconciler error"' in line]


def _our_reconciles() -> float:
    from controller.metrics import REGISTRY

    return sum(
        REGISTRY.get_sample_value(
            "controller_runtime_reconcile_total", {"controller": "trainjob_controller", "result": result}
        )
        or 0.0
        for result in ("success", "error", "requeue", "requeue_after")
    )


@pytest.mark.allow_thread_leaks
def test_taking_over_from_upstream_and_handing_back(  # noqa: PLR0917
    admin: Client,
    service_account_kubeconfig: Path,
    namespace: str,
    proxies: Any,
    tmp_path: Path,
    figures: Any,
) -> None:
    try:
        upstream.binary_path()
    except upstream.UpstreamError as exc:
        pytest.skip(str(exc))
    admin.create(_runtime(namespace), field_manager=reliability.USER)

    # --- 1. upstream makes and runs the TrainJobs ---------------------------------------------------------
    up_proxy = proxies.new("upstream-1")
    theirs = upstream.start(
        proxies.kubeconfig(up_proxy, service_account_kubeconfig, "upstream-1"), tmp_path / "upstream-1"
    )
    ours: Any = None
    try:
        reliability.eventually(
            lambda: upstream.workers_started_at(theirs.log) or _raise("upstream's workers not started"),
            timeout=60,
            interval=0.2,
        )
        reliability.create_all(admin, [_trainjob(namespace, n, suspend=n == FIRST[-1]) for n in FIRST])
        reliability.eventually(lambda: _jobsets_made(admin, namespace, FIRST), timeout=60, interval=0.2)
        _running(admin, namespace, FIRST[:-1])
        _settle(up_proxy)
        before = _snapshot(admin, namespace, FIRST)
        assert _reconciler_errors(theirs.log) == [], theirs.log
        theirs.stop()

        # --- 2. ours takes over ---------------------------------------------------------------------------
        our_proxy = proxies.new("ours")
        reconciled, errors = _our_reconciles(), reliability.reconcile_errors()
        began = time.monotonic()
        ours = reliability.TrainerManager(
            proxies.kubeconfig(our_proxy, service_account_kubeconfig, "ours"), name="takeover"
        ).start()
        reliability.wait_for(lambda: _our_reconciles() - reconciled >= len(FIRST), timeout=60)
        reliability.eventually(ours.queue_idle, timeout=30, interval=0.1)
        took_over = time.monotonic() - began
        _settle(our_proxy)
        judged = _judge("ours taking over", _writes(our_proxy), before, _snapshot(admin, namespace, FIRST))
        reads = Counter(
            f"{e.info.verb} {e.info.qualified_resource}" for e in our_proxy.exchanges() if not e.info.is_write
        )

        # --- 3. they finish under ours ------------------------------------------------------------------
        _complete(admin, namespace, FIRST[:-1])
        reliability.eventually(lambda: _all_complete(admin, namespace, FIRST[:-1]), timeout=60, interval=0.2)
        assert reliability.inventory(admin, namespace, FIRST, expect_condition=None).duplicated == []
        assert reliability.reconcile_errors() == errors, "our reconciles of upstream's TrainJobs failed"

        # --- 4. and back: ours makes more, upstream takes over ---------------------------------------------
        reliability.create_all(admin, [_trainjob(namespace, n, suspend=n == SECOND[-1]) for n in SECOND])
        reliability.eventually(lambda: _jobsets_made(admin, namespace, SECOND), timeout=60, interval=0.2)
        _running(admin, namespace, SECOND[:-1])
        _settle(our_proxy)
        everything = FIRST + SECOND
        back_before = _snapshot(admin, namespace, everything)
        ours.stop()
        ours = None

        back_proxy = proxies.new("upstream-2")
        began = time.monotonic()
        theirs = upstream.start(
            proxies.kubeconfig(back_proxy, service_account_kubeconfig, "upstream-2"), tmp_path / "upstream-2"
        )
        reliability.wait_for(lambda: _reconciles(theirs.metrics_text()) >= len(everything), timeout=60)
        handed_back = time.monotonic() - began
        _settle(back_proxy)
        back = _judge(
            "upstream taking back", _writes(back_proxy), back_before, _snapshot(admin, namespace, everything)
        )
        _complete(admin, namespace, SECOND[:-1])
        reliability.eventually(lambda: _all_complete(admin, namespace, SECOND[:-1]), timeout=60, interval=0.2)
        assert reliability.inventory(admin, namespace, everything, expect_condition=None).duplicated == []
        assert _reconciler_errors(theirs.log) == [], theirs.log  # it reads our snapshots
    finally:
        theirs.stop()
        if ours is not None:
            ours.stop()

    by_kind = Counter(f"{e.info.verb} {e.info.qualified_resource}" for e in _writes(our_proxy))
    figures.report(
        "taking over from upstream v2.3.0",
        trainjobs=len(FIRST),
        writes_on_takeover=judged["writes"],
        writes_per_trainjob=round(judged["writes"] / len(FIRST), 2),
        objects_changed=judged["changed"],
        jobsets_recreated=0,
        all_reconciled_s=took_over,
        ours_reads_on_takeover=dict(reads),
        ours_writes_whole_run=dict(by_kind),
    )
    figures.report(
        "handing back to upstream v2.3.0",
        trainjobs=len(everything),
        writes_on_takeover=back["writes"],
        objects_changed=back["changed"],
        jobsets_recreated=0,
        all_reconciled_s=handed_back,
    )


def _raise(message: str) -> bool:
    raise AssertionError(message)
