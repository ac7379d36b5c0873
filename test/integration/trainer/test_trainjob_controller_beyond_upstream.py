"""The TrainJob controller against a real kube-apiserver, for what the port adds to upstream's scenarios: a
TrainJob created before its runtime, a burst reconciled without a single error, an unsupported runtime kind
as a persisted failure, no write in steady state, label-narrowed caches, and the Trainer's metrics.

The manager runs in this process exactly as in production (its informers, five TrainJob workers, leader
election). Tier 1 has no JobSet controller and no garbage collector: the tests write JobSet status.
"""

from __future__ import annotations

import re
import urllib.request
from typing import Any

import pytest

from controller.client.client import Client
from controller.controller.reconcile import Request
from controller.envtest import ControlPlane
from support import trainer_objects as _objects

CONFIGMAP = _objects.CONFIGMAP
EVENT = _objects.EVENT
JOBSET = _objects.JOBSET
SECRET = _objects.SECRET
TRAINJOB = _objects.TRAINJOB
USER = _objects.USER
Eventually = _objects.Eventually
absent = _objects.absent
alpha_runtime = _objects.alpha_runtime
alpha_trainjob = _objects.alpha_trainjob
conditions = _objects.conditions
container = _objects.container
get = _objects.get
job = _objects.job
jobs_status = _objects.jobs_status
pod_spec = _objects.pod_spec
replicated_jobs = _objects.replicated_jobs
runtime = _objects.runtime
set_jobset_status = _objects.set_jobset_status
torch_runtime = _objects.torch_runtime
trainjob = _objects.trainjob
_create = _objects.create

pytestmark = pytest.mark.allow_thread_leaks


def test_a_trainjob_created_before_its_runtime_is_reconciled_when_the_runtime_appears(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    _create(client, alpha_trainjob(namespace))

    def failed_often() -> None:
        # The Warning event's count is the number of failed reconciles. After 12, the per-item backoff
        # (5 ms doubling) is past 10 s: a JobSet within 5 s of the runtime's creation is not the retry.
        events = [
            e for e in client.list(EVENT, namespace).items if e["reason"] == "TrainJobResourcesCreationFailed"
        ]
        assert events and events[0].get("count", 1) >= 12, [e.get("count") for e in events]

    # 12 failures take about 10 s of backoff; the rest is a loaded machine's slack.
    eventually(failed_often, timeout=120, interval=0.5)
    _create(client, alpha_runtime(namespace))
    eventually(lambda: get(client, JOBSET, "alpha", namespace), timeout=5)


def test_a_burst_of_trainjobs_is_reconciled_without_a_single_error(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    # Upstream reads the JobSet it has just applied from its cache, which has not seen it: about a third of
    # its reconciles in a burst fail with NotFound. Here the status step reads what the apply returned. The
    # metric has no namespace, so count the reason only a burst could produce (other modules' TrainJobs fail
    # for their own reasons meanwhile), and the Warning events of this namespace.
    from controller.metrics import REGISTRY

    def status_failures() -> float:
        value = REGISTRY.get_sample_value(
            "kubeflow_trainer_reconcile_failures_total", {"reason": "JobSetStatusFailed"}
        )
        return value or 0.0

    _create(client, torch_runtime(namespace))
    before = status_failures()
    names = [f"burst-{i}" for i in range(30)]
    for name in names:
        _create(client, trainjob(namespace, name, "alpha", trainer={"numNodes": 2}))

    def all_jobsets() -> None:
        have = {j["metadata"]["name"] for j in client.list(JOBSET, namespace).items}
        assert set(names) <= have, sorted(set(names) - have)

    eventually(all_jobsets, timeout=60, interval=0.5)
    assert status_failures() == before
    warnings = [e["message"] for e in client.list(EVENT, namespace).items if e["type"] == "Warning"]
    assert warnings == []


def test_an_unsupported_runtime_kind_is_a_persisted_failure(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    odd = trainjob(namespace, "odd", "whatever", kind="SomethingElse")

    def failed() -> None:
        assert conditions(get(client, TRAINJOB, "odd", namespace)) == [
            (
                "Failed",
                "True",
                "TrainingRuntimeNotSupported",
                "unsupported runtime: SomethingElse.trainer.kubeflow.org",
            )
        ]

    _create(client, odd)
    eventually(failed, timeout=20)
    assert absent(client, JOBSET, "odd", namespace)


def _apiserver_writes(control_plane: ControlPlane) -> dict[str, float]:
    """The API server's own count of successful writes, by resource (`apiserver_request_total`)."""
    body = control_plane.admin_request("GET", "/metrics").body
    text = body.decode() if isinstance(body, bytes) else str(body)
    writes: dict[str, float] = {}
    pattern = re.compile(r"^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$")
    for line in text.splitlines():
        match = pattern.match(line)
        if not match:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
        # Successful writes only: TrainJobs of earlier tests live on in namespaces that Tier 1 (no namespace
        # controller) leaves Terminating, and their retried applies are refused there (403) meanwhile.
        successful = labels.get("code", "").startswith("2")
        if successful and labels.get("verb") in _WRITE_VERBS:
            key = labels.get("resource", "") + (
                "/" + labels["subresource"] if labels.get("subresource") else ""
            )
            writes[key] = writes.get(key, 0.0) + float(match.group(2))
    return writes


@pytest.mark.parametrize("suspend", [True, False], ids=["suspended", "running"])
def test_a_steady_state_reconcile_makes_no_write(  # noqa: PLR0917 - fixtures and parameters
    trainer: Any,
    client: Client,
    namespace: str,
    eventually: Eventually,
    control_plane: ControlPlane,
    suspend: bool,
) -> None:
    launcher = job("launcher", container(image="test:runtime"))
    node = job("node", container(image="test:runtime"), ancestor="trainer")
    _create(client, runtime(namespace, "mpi", launcher, node, ml_policy={"numNodes": 1, "mpi": {}}))
    _create(client, trainjob(namespace, "alpha", "mpi", suspend=suspend, trainer={"numNodes": 2}))
    eventually(lambda: get(client, CONFIGMAP, "alpha-mpi-hostfile", namespace), timeout=20)

    def settled() -> None:
        got = get(client, TRAINJOB, "alpha", namespace)
        if suspend:
            assert conditions(got)
        trainer.controllers.trainjob.reconcile(Request(namespace=namespace, name="alpha"))
        events_before = _events(client, namespace)
        before = _apiserver_writes(control_plane)
        for _ in range(3):
            trainer.controllers.trainjob.reconcile(Request(namespace=namespace, name="alpha"))
        after = _apiserver_writes(control_plane)
        ours = {
            k: after[k] - before.get(k, 0) for k in after if k in _WATCHED and after[k] != before.get(k, 0)
        }
        assert ours == {}
        assert _events(client, namespace) == events_before

    eventually(settled, timeout=20)


_WRITE_VERBS = ("POST", "PUT", "PATCH", "APPLY", "DELETE", "CREATE", "UPDATE")
_WATCHED = {"jobsets", "configmaps", "secrets", "trainjobs", "trainjobs/status", "podgroups"}
# Not "events": earlier tests' TrainJobs keep failing in Terminating namespaces, and the recorder's patches of
# their existing events succeed there. This test's own events are compared in its namespace instead.


def _events(client: Client, namespace: str) -> dict[str, int]:
    return {e["metadata"]["name"]: e.get("count", 1) for e in client.list(EVENT, namespace).items}


def test_no_configmap_or_secret_without_our_label_enters_the_cache(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    client.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "foreign", "namespace": namespace}},
        field_manager=USER,
    )
    client.create(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "foreign", "namespace": namespace}},
        field_manager=USER,
    )
    _create(client, alpha_runtime(namespace))
    _create(client, alpha_trainjob(namespace))
    eventually(lambda: get(client, JOBSET, "alpha", namespace), timeout=20)
    informers = trainer.manager.cache.informers()  # type: ignore[attr-defined]
    label = "trainer.kubeflow.org/trainjob-name"
    for gvk in (CONFIGMAP, SECRET):
        cached = informers[gvk].get_store().list()
        assert all(label in (o["metadata"].get("labels") or {}) for o in cached), gvk
    snapshots = [o["metadata"]["name"] for o in informers[CONFIGMAP].get_store().list()]
    assert "foreign" not in snapshots


def _metrics(trainer: Any) -> str:
    host, port = trainer.manager.metrics_address
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as response:
        body: str = response.read().decode()
    return body


def _state_counts(trainer: Any) -> dict[str, float]:
    found = re.findall(r'^kubeflow_trainer_trainjobs\{state="(\w+)"\} (\S+)$', _metrics(trainer), re.M)
    return {state: float(value) for state, value in found}


def test_metrics_show_the_trainer_families(trainer: Any, client: Client, namespace: str) -> None:
    body = _metrics(trainer)
    assert 'controller_runtime_max_concurrent_reconciles{controller="trainjob_controller"} 5.0' in body
    assert "kubeflow_trainer_trainjobs" in body
    assert "kubeflow_trainer_trainjob_jobset_creation_seconds" in body


def test_the_state_gauge_follows_trainjobs_through_the_informer(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    # The counts come from the TrainJob informer's notifications: a create, a change of state and a
    # delete each move them (other tests' TrainJobs may be counted too, hence the differences).
    before = eventually(lambda: _state_counts(trainer), timeout=10)
    _create(client, alpha_runtime(namespace))
    _create(client, trainjob(namespace, "alpha", "alpha", suspend=True, trainer={"numNodes": 2}))

    def moved(state: str, by: float) -> None:
        now = _state_counts(trainer)
        assert now[state] - before[state] == by, now

    eventually(lambda: moved("Suspended", 1), timeout=20)
    client.patch(TRAINJOB, "alpha", {"spec": {"suspend": False}}, namespace)
    eventually(lambda: (moved("Suspended", 0), moved("Created", 1)), timeout=20)
    client.delete(TRAINJOB, "alpha", namespace)
    eventually(lambda: (moved("Suspended", 0), moved("Created", 0)), timeout=20)


def test_a_running_jobset_is_cached_without_its_pod_templates_and_drift_is_still_repaired(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    # The cache keeps a running JobSet's metadata, status and spec.suspend only (see
    # controller.trainer.cache_transforms); the controller must still repair a suspended JobSet someone
    # else changed, follow a running one's status, and suspend it again.
    _create(client, torch_runtime(namespace))
    _create(client, trainjob(namespace, "alpha", "alpha", suspend=True, trainer={"numNodes": 2}))
    store = trainer.manager.cache.informers()[JOBSET].get_store()  # type: ignore[attr-defined]

    def cached() -> dict[str, Any]:
        found: dict[str, Any] | None = store.get_by_key(f"{namespace}/alpha")
        assert found is not None, "the JobSet is not in the cache yet"
        return found

    eventually(lambda: get(client, JOBSET, "alpha", namespace), timeout=20)
    image = pod_spec(get(client, JOBSET, "alpha", namespace), "node")["containers"][0]["image"]
    eventually(lambda: replicated_jobs(cached()), timeout=10)  # suspended: kept whole

    # Drift while suspended: another writer changes a field the controller owns; it is re-applied.
    path = "/spec/replicatedJobs/0/template/spec/template/spec/containers/0/image"
    client.patch(JOBSET, "alpha", [{"op": "replace", "path": path, "value": "drifted:1"}], namespace, "json")

    def repaired() -> None:
        assert pod_spec(get(client, JOBSET, "alpha", namespace), "node")["containers"][0]["image"] == image

    eventually(repaired, timeout=20)

    # Running: the cache holds no replicated jobs, and the JobSet's status still reaches the TrainJob.
    client.patch(TRAINJOB, "alpha", {"spec": {"suspend": False}}, namespace)
    eventually(lambda: get(client, JOBSET, "alpha", namespace)["spec"].get("suspend") is False, timeout=20)

    def slim() -> None:
        assert "replicatedJobs" not in cached()["spec"], sorted(cached()["spec"])

    eventually(slim, timeout=10)
    set_jobset_status(
        client, namespace, "alpha", {"replicatedJobsStatus": jobs_status(("node", 2, 0, 0, 2, 0))}
    )

    def followed() -> None:
        status = get(client, TRAINJOB, "alpha", namespace).get("status") or {}
        assert status.get("jobsStatus") == jobs_status(("node", 2, 0, 0, 2, 0)), status

    eventually(followed, timeout=20)

    # Suspended again: re-applied from the runtime, whole, though the cache held only the slim form.
    client.patch(TRAINJOB, "alpha", {"spec": {"suspend": True}}, namespace)

    def suspended_whole() -> None:
        jobset = get(client, JOBSET, "alpha", namespace)
        assert jobset["spec"].get("suspend") is True
        assert pod_spec(jobset, "node")["containers"][0]["image"] == image

    eventually(suspended_whole, timeout=20)
    eventually(lambda: replicated_jobs(cached()), timeout=10)
