"""Watches expired by etcd compaction, and a 410 on the relist that follows: every informer of the Trainer
manager relists, and no change is missed (each cache equals a fresh LIST; the controller converges on what
changed while it was cut off).

On a plane without kube-apiserver's watch cache (every watch and list goes to etcd, as in
``test/integration``'s fixture), the manager talks to kube-apiserver through a fault proxy. The proxy
refuses connections (every watch breaks, every reconnect is refused) while TrainJobs are created, changed
and deleted, a JobSet is deleted under its TrainJob and labelled ConfigMaps come and go; then etcd is
compacted past all of it and the proxy forwards again. Each watch restarted from its last resourceVersion
gets 410 (compacted); the relist at that resourceVersion (a streaming list, ``sendInitialEvents``, or a
list where that is off) is answered 410 ``Expired`` by the proxy (what a watch cache answers for a
resourceVersion it no longer holds), so each informer falls back to a consistent read from etcd
(``resourceVersion=""``): a new stream, or a list.

The informer-level version of the compaction case (one informer, a gated lister-watcher) is in
``test/integration/test_informers_integration.py``; this one runs the whole manager over real sockets.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.client.client import Client
from controller.envtest import ControlPlane
from support import reliability

Fault = reliability.faultproxy.Fault

LABEL = "trainer.kubeflow.org/trainjob-name"


@pytest.fixture(scope="module")
def bare_plane(control_plane_without_watch_cache: ControlPlane, crd_sources: list[Path]) -> ControlPlane:
    control_plane_without_watch_cache.install_crds(crd_sources)
    return control_plane_without_watch_cache


@pytest.fixture
def bare_admin(bare_plane: ControlPlane) -> Iterator[Client]:
    client = Client.load(str(bare_plane.kubeconfig), user_agent=reliability.USER, qps=0)
    yield client
    client.close()


def _is_relist(info: Any) -> bool:
    """A list, or a streaming list (a watch with ``sendInitialEvents``), which is how the reflector fills
    its cache unless the streaming list is off or refused."""
    streaming = info.verb == "watch" and info.query.get("sendInitialEvents", [""])[0] == "true"
    return bool(info.verb == "list" or streaming)


def _relist_at_a_resource_version(info: Any) -> bool:
    return _is_relist(info) and info.query.get("resourceVersion", [""])[0] not in ("", "0")


def test_informers_relist_after_compaction_and_a_410_on_relist_and_miss_no_change(
    bare_plane: ControlPlane, bare_admin: Client, tmp_path: Path, figures: Any, profile: Any
) -> None:
    client = bare_admin
    proxies = reliability.ApiserverProxies(bare_plane, tmp_path / "proxies")
    manager = None
    relists = injected = changes = 0
    try:
        for _ in range(profile.runs):
            ns = f"compaction-{secrets.token_hex(3)}"
            client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            client.create(reliability.torch_runtime(ns), field_manager=reliability.USER)
            first = [f"before-{i}" for i in range(10)]
            reliability.create_all(client, [reliability.trainjob(ns, n) for n in first])
            if manager is None:
                proxy = proxies.new("informers", admin=True)
                kubeconfig = proxies.kubeconfig(proxy, None, "admin-through-proxy")
                manager = reliability.TrainerManager(kubeconfig, name="watch-expiry").start()
            reliability.eventually(
                lambda ns=ns, first=first: reliability.converged(client, ns, first), timeout=60
            )

            proxy.refuse()
            cut = time.monotonic()
            later = [f"during-{i}" for i in range(10)]
            reliability.create_all(client, [reliability.trainjob(ns, n) for n in later])
            for name in first[:3]:
                client.delete(reliability.TRAINJOB, name, ns)
            for name in first[3:6]:
                client.patch(reliability.TRAINJOB, name, {"metadata": {"annotations": {"touched": "1"}}}, ns)
            client.delete(reliability.JOBSET, first[6], ns)  # deleted under its TrainJob: must come back
            for i in range(3):
                client.create(
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"name": f"labelled-{i}", "namespace": ns, "labels": {LABEL: later[i]}},
                    }
                )
            client.delete(reliability.CONFIGMAP, "labelled-0", ns)
            changes += 10 + 3 + 3 + 1 + 3 + 1
            bare_plane.compact_etcd()
            fault = proxy.inject(Fault(status=410, match=_relist_at_a_resource_version))
            proxy.forward()

            # Every informer's watch expires and its relist at the last resourceVersion gets the 410 (each
            # comes back after its own backoff, longer after the outages of earlier runs)...
            informed = {
                (gvk.group, client.resource_for(gvk).plural) for gvk in manager.manager.cache.informers()
            }

            def all_relisted(cut: float = cut, proxy: Any = proxy, informed: set[Any] = informed) -> None:
                refused = {
                    (e.info.group, e.info.resource)
                    for e in proxy.exchanges(since=cut, where=lambda e: e.injected)
                }
                assert refused == informed, f"not relisted yet: {sorted(informed - refused)}"

            reliability.eventually(all_relisted, timeout=120, interval=0.5)
            # ... and then holds what a fresh LIST does; the controller catches up with what changed.
            remaining = first[3:] + later
            reliability.eventually(
                lambda running=manager: reliability.caches_match_server(running, client),
                timeout=90,
                interval=0.5,
            )
            found = reliability.eventually(
                lambda ns=ns, remaining=remaining: reliability.converged(client, ns, remaining), timeout=60
            )
            assert found.duplicated == []
            reliability.eventually(manager.queue_idle, timeout=30)
            relists += len(proxy.exchanges(since=cut, where=lambda e: _is_relist(e.info)))
            injected += fault.injected
            proxy.clear_faults()
        assert manager is not None and manager.failures == []
    finally:
        if manager is not None:
            manager.stop()
        proxies.stop_all()
    figures.report(
        f"watch expiry by compaction + 410 on relist ({profile.name})",
        runs=profile.runs,
        informers=len(manager.manager.cache.informers()) if manager else 0,
        changes_while_cut_off=changes,
        faults_injected=f"{profile.runs} outages+compactions, {injected} x 410",
        relists=relists,
        missed=0,
        lost=0,
        duplicated=0,
    )
