"""Tier 1 smoke tests: the envtest control plane behaves like a real cluster where our controllers need it.

The smoke test of the Tier 1 control plane: create a namespace, install a CRD, server-side-apply one object
with two field managers and observe the conflict, watch an event; plus the things other tests build on:
ServiceAccount identities under RBAC, apiserver restarts and etcd compaction. The official ``kubernetes``
client is used on purpose: it proves the written kubeconfigs work with a client we did not write."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import urllib3
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from controller.envtest import Binaries, ControlPlane, StartError, namespaced_crd
from controller.envtest.controlplane import sweep_abandoned_directories
from controller.envtest.process import tracked

GROUP = "smoke.envtest.example.com"
VERSION = "v1"
PLURAL = "widgets"
WIDGET_CRD = namespaced_crd(
    GROUP,
    "Widget",
    version=VERSION,
    plural=PLURAL,
    spec={"type": "object", "properties": {"color": {"type": "string"}, "size": {"type": "integer"}}},
    status={"type": "object", "x-kubernetes-preserve-unknown-fields": True},
)


@pytest.fixture(scope="module")
def widgets(control_plane: ControlPlane) -> str:
    (name,) = control_plane.install_crds([WIDGET_CRD])
    return name


@pytest.fixture
def api(kubeconfig: Path) -> Iterator[client.ApiClient]:
    api_client = config.new_client_from_config(config_file=str(kubeconfig))
    yield api_client
    api_client.close()


def _widget(namespace: str, name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def _apply(
    api: client.ApiClient, obj: dict[str, Any], manager: str, *, force: bool = False
) -> dict[str, Any]:
    meta = obj["metadata"]
    result: dict[str, Any] = client.CustomObjectsApi(api).patch_namespaced_custom_object(
        GROUP,
        VERSION,
        meta["namespace"],
        PLURAL,
        meta["name"],
        obj,
        field_manager=manager,
        force=force,
        _content_type="application/apply-patch+yaml",
    )
    return result


def test_a_new_namespace_is_active_for_the_admin_kubeconfig(api: client.ApiClient, namespace: str) -> None:
    ns = client.CoreV1Api(api).read_namespace(namespace)
    assert ns.status.phase == "Active"


def test_the_third_party_crds_are_served(control_plane: ControlPlane) -> None:
    for group_version, plural in [
        ("jobset.x-k8s.io/v1alpha2", "jobsets"),
        ("scheduling.x-k8s.io/v1alpha1", "podgroups"),
        ("scheduling.volcano.sh/v1beta1", "podgroups"),
    ]:
        discovery = control_plane.admin_request("GET", f"/apis/{group_version}")
        assert discovery.status == 200, group_version
        assert plural in {r["name"] for r in discovery.json()["resources"]}, group_version


def test_an_installed_crd_accepts_objects_at_once(
    api: client.ApiClient, widgets: str, namespace: str
) -> None:
    _apply(api, _widget(namespace, "w1", color="red"), "smoke")
    listed = client.CustomObjectsApi(api).list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
    assert [(w["metadata"]["name"], w["spec"]) for w in listed["items"]] == [("w1", {"color": "red"})]


def test_installing_a_crd_again_is_a_no_op(control_plane: ControlPlane, widgets: str) -> None:
    assert control_plane.install_crds([WIDGET_CRD]) == [widgets]


def test_server_side_apply_by_a_second_manager_conflicts_until_forced(
    api: client.ApiClient, widgets: str, namespace: str
) -> None:
    _apply(api, _widget(namespace, "shared", color="red", size=1), "alice")

    with pytest.raises(ApiException) as conflict:
        _apply(api, _widget(namespace, "shared", color="blue"), "bob")
    assert conflict.value.status == 409
    status = orjson.loads(conflict.value.body)
    assert status["reason"] == "Conflict"
    assert [c["field"] for c in status["details"]["causes"]] == [".spec.color"]

    objects = client.CustomObjectsApi(api)
    unchanged = objects.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "shared")
    assert unchanged["spec"] == {"color": "red", "size": 1}

    forced = _apply(api, _widget(namespace, "shared", color="blue"), "bob", force=True)
    assert forced["spec"] == {"color": "blue", "size": 1}
    owners = {m["manager"]: m["fieldsV1"]["f:spec"] for m in forced["metadata"]["managedFields"]}
    assert owners == {"alice": {"f:size": {}}, "bob": {"f:color": {}}}


def test_a_watch_sees_an_object_added_then_modified(
    api: client.ApiClient, widgets: str, namespace: str
) -> None:
    objects = client.CustomObjectsApi(api)
    start = objects.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["metadata"][
        "resourceVersion"
    ]
    _apply(api, _widget(namespace, "watched", color="red"), "smoke")
    seen: list[tuple[str, str]] = []
    w = watch.Watch()
    for event in w.stream(
        objects.list_namespaced_custom_object,
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        resource_version=start,
        timeout_seconds=15,
    ):
        seen.append((event["type"], event["object"]["spec"]["color"]))
        if event["type"] == "ADDED":
            _apply(api, _widget(namespace, "watched", color="green"), "smoke")
        if event["type"] == "MODIFIED":
            w.stop()
    assert seen == [("ADDED", "red"), ("MODIFIED", "green")]


def test_a_service_account_is_authenticated_but_forbidden_without_rbac(
    control_plane: ControlPlane, namespace: str, eventually: Callable[..., Any]
) -> None:
    sa_config = control_plane.kubeconfig_for_service_account(namespace, "robot")
    sa_api = config.new_client_from_config(config_file=str(sa_config))
    try:
        review = client.AuthenticationV1Api(sa_api).create_self_subject_review({})
        assert review.status.user_info.username == f"system:serviceaccount:{namespace}:robot"

        with pytest.raises(ApiException) as forbidden:
            client.CoreV1Api(sa_api).list_namespaced_config_map(namespace)
        assert forbidden.value.status == 403

        rbac = {"apiGroup": "rbac.authorization.k8s.io"}
        role = {
            "metadata": {"name": "read-configmaps"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}],
        }
        binding = {
            "metadata": {"name": "robot-reads-configmaps"},
            "roleRef": {**rbac, "kind": "Role", "name": "read-configmaps"},
            "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": namespace}],
        }
        for kind, body in (("roles", role), ("rolebindings", binding)):
            path = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/{kind}"
            assert control_plane.admin_request("POST", path, body).status == 201

        def allowed() -> None:
            try:
                client.CoreV1Api(sa_api).list_namespaced_config_map(namespace)
            except ApiException as exc:
                raise AssertionError(f"still {exc.status}") from exc

        eventually(allowed)
    finally:
        sa_api.close()


def test_asking_for_a_service_account_kubeconfig_twice_reuses_the_account(
    control_plane: ControlPlane, namespace: str
) -> None:
    first = control_plane.kubeconfig_for_service_account(namespace, "twice")
    second = control_plane.kubeconfig_for_service_account(namespace, "twice")
    assert first == second
    accounts = control_plane.admin_request("GET", f"/api/v1/namespaces/{namespace}/serviceaccounts")
    assert [a["metadata"]["name"] for a in accounts.json()["items"]] == ["twice"]


def test_after_etcd_compaction_a_watch_from_an_older_resource_version_is_expired(
    control_plane_without_watch_cache: ControlPlane,
) -> None:
    plane = control_plane_without_watch_cache
    configmaps = "/api/v1/namespaces/default/configmaps"
    created = plane.admin_request(
        "POST", configmaps, {"metadata": {"generateName": "c-"}, "data": {"v": "1"}}
    )
    obj = created.json()
    old = obj["metadata"]["resourceVersion"]
    updated = plane.admin_request(
        "PUT", f"{configmaps}/{obj['metadata']['name']}", {**obj, "data": {"v": "2"}}
    )
    assert updated.status == 200

    before = plane.admin_request("GET", f"{configmaps}?watch=1&resourceVersion={old}&timeoutSeconds=1")
    assert [orjson.loads(line)["type"] for line in before.body.splitlines()] == ["MODIFIED"]

    revision = plane.compact_etcd()
    assert revision >= int(updated.json()["metadata"]["resourceVersion"])

    after = plane.admin_request("GET", f"{configmaps}?watch=1&resourceVersion={old}&timeoutSeconds=5")
    events = [orjson.loads(line) for line in after.body.splitlines()]
    assert [(e["type"], e["object"]["code"], e["object"]["reason"]) for e in events] == [
        ("ERROR", 410, "Expired")
    ]
    exact = plane.admin_request("GET", f"{configmaps}?resourceVersion={old}&resourceVersionMatch=Exact")
    assert exact.status == 410
    fresh = plane.admin_request("GET", configmaps).json()["metadata"]["resourceVersion"]
    current = plane.admin_request("GET", f"{configmaps}?watch=1&resourceVersion={fresh}&timeoutSeconds=1")
    assert (current.status, current.body) == (200, b"")


def test_restarting_the_apiserver_ends_open_watches_and_keeps_url_and_data(
    control_plane: ControlPlane, api: client.ApiClient, namespace: str
) -> None:
    server = control_plane.server
    core = client.CoreV1Api(api)
    survivor = core.create_namespaced_config_map(namespace, {"metadata": {"name": "survivor"}})
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "later"}})
    stream = core.list_namespaced_config_map(
        namespace,
        watch=True,
        resource_version=survivor.metadata.resource_version,
        timeout_seconds=60,
        _preload_content=False,
    )
    first = orjson.loads(stream.readline())
    assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "later")

    control_plane.restart_apiserver()

    # The restart closes the old connection: the stream ends (cleanly or with a reset) instead of hanging.
    with contextlib.suppress(urllib3.exceptions.HTTPError, OSError):
        while stream.readline():
            pass
    stream.release_conn()
    assert control_plane.server == server
    assert core.read_namespaced_config_map("survivor", namespace).metadata.name == "survivor"
    # The new watch cache starts after "later": resuming from before it is too old, as after a real restart.
    resumed = control_plane.admin_request(
        "GET",
        f"/api/v1/namespaces/{namespace}/configmaps?watch=1&timeoutSeconds=5"
        f"&resourceVersion={survivor.metadata.resource_version}",
    )
    assert [orjson.loads(line)["object"].get("code") for line in resumed.body.splitlines()] == [410]


def test_a_failed_start_shows_the_log_tail_and_leaves_nothing_behind(envtest_binaries: Binaries) -> None:
    plane = ControlPlane(envtest_binaries, apiserver_flags={"no-such-flag": "1"})
    with pytest.raises(
        StartError, match=r"(?s)kube-apiserver exited with code \d+ during start-up.*no-such-flag"
    ):
        plane.start()
    assert "stopped" in repr(plane)
    ours = [
        t for t in tracked() if t is plane or plane.directory in Path(getattr(t, "log_path", "/")).parents
    ]
    assert ours == []
    assert not plane.directory.exists()


# A child Python process starts a control plane, prints what it started, and waits to be signalled.
_CHILD = """
import signal, sys, time
# A shell without job control starts background commands with SIGINT ignored, and Python keeps an ignored
# SIGINT ignored: restore the KeyboardInterrupt an interactive runner has, which is what is tested.
signal.signal(signal.SIGINT, signal.default_int_handler)
from controller.envtest import Binaries, ControlPlane, StartError, namespaced_crd
from controller.envtest.controlplane import sweep_abandoned_directories
from controller.envtest.process import tracked
from controller.envtest.process import ManagedProcess, install_sigterm_handler, tracked
install_sigterm_handler()  # the caller's opt-in, as the integration conftest's
plane = ControlPlane()
plane.start()
pids = [p.pid for p in tracked() if isinstance(p, ManagedProcess)]
print("PLANE", plane.directory, *pids, flush=True)
while True:  # not signal.pause(): a signal that lands just before pause() starts is never seen
    time.sleep(0.1)
"""


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie is dead, just not reaped yet
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=lambda s: s.name)
def test_no_process_outlives_an_interrupted_test_run(
    envtest_binaries: Binaries, sig: signal.Signals, eventually: Callable[..., Any]
) -> None:
    env = {
        **os.environ,
        "TEST_ASSET_ETCD": str(envtest_binaries.etcd),
        "TEST_ASSET_KUBE_APISERVER": str(envtest_binaries.kube_apiserver),
    }
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert child.stdout is not None
        line = next(line for line in child.stdout if line.startswith("PLANE "))  # structlog shares stdout
        _, directory, *pids = line.split()
        assert len(pids) == 2, "expected etcd and kube-apiserver"
        child.send_signal(sig)
        child.wait(timeout=60)
    finally:
        child.kill()
        child.wait()

    def all_gone() -> None:
        assert [pid for pid in pids if not _gone(int(pid))] == []

    eventually(all_gone, timeout=30)
    if sig == signal.SIGKILL:
        # A killed runner cannot clean up after itself; the next plane to start removes what it left.
        assert Path(directory) in sweep_abandoned_directories(Path(directory).parent)
    assert not Path(directory).exists()


@pytest.mark.benchmark
def test_benchmark_tier1_start_crd_install_restart_and_stop(
    envtest_binaries: Binaries, crd_sources: list[Path]
) -> None:
    rows = []
    for _ in range(3):
        began = time.monotonic()
        plane = ControlPlane(envtest_binaries)
        plane.start()
        try:
            started = time.monotonic()
            plane.install_crds(crd_sources)
            installed = time.monotonic()
            plane.restart_apiserver()
            restarted = time.monotonic()
            disk = sum(f.stat().st_size for f in plane.directory.rglob("*") if f.is_file())
        finally:
            plane.stop()
        stopped = time.monotonic()
        stats = plane.statistics()
        rows.append(
            (
                stats.etcd_start_s,
                stats.apiserver_start_s,
                started - began,
                installed - started,
                restarted - installed,
                stopped - restarted,
                disk / 2**20,
            )
        )
    print(f"\nTier 1 control plane, {len(crd_sources)} CRD files, {os.cpu_count()} CPUs")
    print("etcd_s  apiserver_s  start_total_s  crd_install_s  restart_s  stop_s  disk_MiB")
    for row in rows:
        print("  ".join(f"{value:8.2f}" for value in row))
