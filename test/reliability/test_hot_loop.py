"""No hot loop: 100 idle TrainJobs make no write at all for a whole window, and a TrainJob whose JobSet apply
always fails is retried with exponential backoff, not in a loop.

Both scenarios share one window (the module's fixture, run once per profile): the manager runs in this
process as the ServiceAccount with leader election (as shipped), through a pass-through fault proxy that
records every request. 100 suspended TrainJobs converge, plus one, ``always-failing``, whose JobSet apply the
proxy answers 422 every time (as an admission webhook refusing it would). Then the proxy's record is read
over the window: ``ci`` 15 s, ``soak`` 60 s.

- Idle: no write but the Lease renewals (leader election, reported separately) and what the failing
  TrainJob causes (its apply attempts and its Warning event); the other reads and writes are counted.
- Backoff: the failing apply's attempts, from the TrainJob's creation to the end of the window, follow the
  work queue's per-item exponential backoff (5 ms doubling): at most ``log2(elapsed / 5 ms) + 2`` of them,
  the n-th no sooner than 5 ms x (2^n - 1) after the first, and once the gaps pass a second (the
  reconcile's own duration no longer matters) each at least 1.5 times the previous one.
"""

from __future__ import annotations

import itertools
import math
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from controller.client.client import Client
from controller.envtest import ControlPlane
from support import reliability

Fault = reliability.faultproxy.Fault

IDLE = 100
FAILING = "always-failing"
BASE_DELAY = 0.005  # the work queue's per-item backoff starts at 5 ms and doubles


@dataclass(frozen=True)
class Window:
    profile: Any
    began: float
    ended: float
    failing_created: float
    exchanges: list[Any]
    failing_attempts: list[float]
    namespace: str


def _about_failing(info: Any) -> bool:
    return info.name == FAILING or info.name.startswith(f"{FAILING}.")


@pytest.fixture(
    scope="module",
    params=[reliability.CI, pytest.param(reliability.SOAK, marks=pytest.mark.soak)],
    ids=["ci", "soak"],
)
def window(
    request: pytest.FixtureRequest,
    admin: Client,
    control_plane: ControlPlane,
    service_account_kubeconfig: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Window]:
    profile = request.param
    ns = f"hot-loop-{profile.name}-{secrets.token_hex(3)}"
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    admin.create(reliability.torch_runtime(ns), field_manager=reliability.USER)
    proxies = reliability.ApiserverProxies(control_plane, tmp_path_factory.mktemp("hot-loop-proxies"))
    proxy = proxies.new("hot-loop")
    proxy.inject(
        Fault(
            status=422,
            match=lambda i: i.verb == "apply" and i.resource == "jobsets" and i.name == FAILING,
            message=f'JobSet.jobset.x-k8s.io "{FAILING}" is invalid: refused (injected by faultproxy)',
        )
    )
    reliability.delete_lease(admin)
    manager = reliability.TrainerManager(
        proxies.kubeconfig(proxy, service_account_kubeconfig, "hot-loop"),
        name="hot-loop",
        leader_election=True,
    ).start()
    try:
        names = [f"idle-{i:03d}" for i in range(IDLE)]
        reliability.create_all(admin, [reliability.trainjob(ns, n) for n in names])
        admin.create(reliability.trainjob(ns, FAILING), field_manager=reliability.USER)
        failing_created = time.monotonic()
        reliability.eventually(lambda: reliability.converged(admin, ns, names), timeout=120, interval=0.5)
        time.sleep(1.0)  # the last status writes of the burst land before the window opens
        began = time.monotonic()
        time.sleep(profile.idle_window)
        ended = time.monotonic()
        exchanges = proxy.exchanges(since=began, where=lambda e: e.at < ended)
        attempts = [
            e.at
            for e in proxy.exchanges(where=lambda e: e.at < ended)
            if e.info.verb == "apply" and e.info.resource == "jobsets" and e.info.name == FAILING
        ]
        assert manager.failures == []
    finally:
        manager.stop()
        proxies.stop_all()
        reliability.delete_lease(admin)
        reliability.empty_namespace(admin, ns)
    yield Window(profile, began, ended, failing_created, exchanges, attempts, ns)


def test_100_idle_trainjobs_make_no_write_for_a_whole_window(window: Window, figures: Any) -> None:
    leases = [e for e in window.exchanges if e.info.resource == "leases"]
    others = [e for e in window.exchanges if e.info.resource != "leases" and not _about_failing(e.info)]
    # The failing TrainJob's Warning event: created once, then its count patched (the name carries the
    # involved object's), so only a create leaves the object's name out of the path.
    event_creates = [e for e in others if e.info.resource == "events" and e.info.verb == "create"]
    writes = [e for e in others if e.info.is_write and e not in event_creates]
    assert writes == [], [(e.info.verb, e.info.path) for e in writes[:10]]
    assert len(event_creates) <= 1
    reads = [e for e in others if not e.info.is_write]
    seconds = window.ended - window.began
    figures.report(
        f"no hot loop: {IDLE} idle TrainJobs ({window.profile.name})",
        runs=1,
        window_s=seconds,
        writes=0,
        reads=len(reads),
        lease_renewals=len([e for e in leases if e.info.is_write]),
        requests_about_the_failing_trainjob=len(window.exchanges) - len(others) - len(leases),
    )


def test_an_apply_that_always_fails_backs_off_exponentially(window: Window, figures: Any) -> None:
    attempts = window.failing_attempts
    elapsed = window.ended - window.failing_created
    assert len(attempts) >= 3, "the failing TrainJob was hardly tried"
    ceiling = math.floor(math.log2(elapsed / BASE_DELAY + 1)) + 2
    assert len(attempts) <= ceiling, f"{len(attempts)} attempts in {elapsed:.0f} s (at most {ceiling})"
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    shown = [round(g, 2) for g in gaps]
    # Never sooner than the backoff allows: the n-th retry waits at least 5 ms x (2^n - 1) in all.
    for n, at in enumerate(attempts):
        assert at - attempts[0] >= BASE_DELAY * (2**n - 1) * 0.9, f"attempt {n} too early: gaps {shown}"
    # And the waits keep doubling once they are long enough for a reconcile's own duration not to matter.
    for before, after in itertools.pairwise(gaps):
        if before >= 1.0:
            assert after >= 1.5 * before, f"the backoff did not grow: gaps {shown}"
    in_window = [t for t in attempts if t >= window.began]
    figures.report(
        f"apply that always fails backs off ({window.profile.name})",
        runs=1,
        seconds_since_creation=elapsed,
        attempts=len(attempts),
        attempts_ceiling=ceiling,
        requests_during_backoff_window=len(in_window),
        gaps_s=[round(g, 2) for g in gaps],
    )
