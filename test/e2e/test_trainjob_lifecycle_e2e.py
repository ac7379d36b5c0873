"""TrainJob lifecycles through the running manager on a full cluster: Flux, runtime-patch times, another
controller's TrainJob, the active deadline, suspend and resume, runtime snapshots.

The e2e scenarios of upstream's suite (kubeflow/trainer v2.3.0 ``test/e2e/e2e_test.go``) that
``test_trainjob_e2e.py`` does not cover, run the same way: the manager as the module fixtures both modules
share run it (``support.e2e_trainjobs``, with the manifest builders and readers: on kwok a host process with
its admission webhooks registered by URL, on kind the installed Deployment), the JobSets it applies run on
kwok nodes by kwok's stages (``hack/kwok/stages``) or on kind's kubelet, and every assertion reads the world
back through the API.

- *Flux* (upstream "should create TrainJob with Flux runtime reference"): no Flux runtime is shipped
  (upstream installs ``examples/flux/flux-runtime.yaml`` for its e2e run only), so the test creates a
  namespaced TrainingRuntime with the same Flux policy. The TrainJob runs to Complete, and its objects
  carry what the Flux plugin adds: the ``flux-installer`` init container, the five volumes and mounts,
  the wrapped command, the entrypoint ConfigMap and the CURVE Secret.
- *RuntimePatches keep user times* and *update Time only for the changed patch*: the mutating webhook
  (v2.3.0 ``pkg/webhooks/trainjob_webhook.go``, ``TrainJobDefaulter.Default``) stamps ``time`` on every
  patch created without one and keeps a given one; on update it keeps the old ``time`` of an unchanged
  patch (even one the user edited), stamps a changed patch anew, and treats a new manager as on create.
  Upstream sleeps a second so the re-stamp differs from the first stamp; here the changed patch starts
  with a user time an hour old and the unchanged one gets a user edit that must be reverted, so nothing
  depends on the clock moving on. The patch changed while suspended also reaches the suspended JobSet.
- *External controller*: a TrainJob with ``managedBy: kueue.x-k8s.io/multikueue`` gets no JobSet, no
  snapshot and no status: not a single write (its resourceVersion is the one its creation returned).
  Upstream watches it for 15 s; with no fixed waits here, a TrainJob created after it in the same
  namespace is the barrier: the informer delivers the two creations in order and the work queue hands
  them out first in, first out, so by the time the barrier's reconcile has made its writes (snapshot,
  JobSet, status last) the first TrainJob's reconcile, a cache read for one managed elsewhere, has long
  ended. (Five workers could in principle let it lag behind; a controller that did reconcile it would
  still be caught in practice, its writes starting before the barrier's.)
- *Deadline*: ``spec.activeDeadlineSeconds`` (v2.3.0's field name) over while the pods run ⇒
  ``Failed=True`` with reason ``DeadlineExceeded`` and message ``TrainJob exceeded its active deadline``,
  no sooner than the deadline after creation; the JobSet is deleted and its pods go with it; the JobSet is
  not rebuilt.
- *Suspend and resume* (integration-tier behaviour, shown end to end): a running TrainJob suspended loses
  its pods (the JobSet suspends its Jobs), its runtime patch changed while suspended reaches the pods of
  the resumed run, which then completes: conditions ``[Suspended=False/Resumed, Complete=True]``.
- *Runtime update does not affect a suspended TrainJob*, for a TrainingRuntime and a ClusterTrainingRuntime
  (upstream's table): running, suspended, the runtime's image changed, resumed ⇒ the jobs run again with
  the original image (JobSet's webhook refuses an image change, so reading the edited runtime would stall
  the resume), the snapshot ConfigMap is untouched; deleting the TrainJob garbage-collects the snapshot.

What kwok cannot show, and so is left out: that the containers do what the objects tell them (images are
never pulled, commands never run; ``flux getattr rank`` prints nothing, the brokers never connect, a pod's
end is the kwok stage's); upstream's "runtime status server instrumentation" scenario, whose container
runs a script that calls the status server (no script runs on kwok). Pods run for their stage's time: the
default (2 s), or an hour through the ``pod-complete.stage.kwok.x-k8s.io/delay`` annotation where a test
needs them to keep running.

The Flux test is kwok only (``kwok_only``: its images are not in the kind cluster). The others run on
either path: the runtime-patch and managed-by tests create no pods; the deadline and suspend tests run a
namespaced runtime of ``support.e2e_trainjobs.workload_runtime`` (on kind the workload image, its container
sleeping for the pod's kwok run-time annotation, so one runtime patch times the pods on both paths); the
runtime-update test runs ``/pause`` (on kind the stand-in hack/build-images.sh builds for upstream's suite).
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from controller.client.client import Client
from controller.client.errors import Conflict, Forbidden, NotFound
from controller.client.gvk import GVK
from runtime.api import constants
from support import e2e_trainjobs as e2e
from support import install

HERE = Path(__file__).resolve().parent

# The manifest builders, readers and module fixtures the TrainJob e2e modules share, registered here under
# their names.
client = e2e.client
trainer_api = e2e.trainer_api  # `manager` asks for it by name
manager = e2e.manager
kwok_stages = e2e.kwok_stages
workload_image = e2e.workload_image

pytestmark = pytest.mark.usefixtures("manager")
kwok_only = pytest.mark.usefixtures("kwok_stages")

TRAINJOB = install.TRAINJOB_GVK
CONFIGMAP = GVK("", "v1", "ConfigMap")
JOBSET_NAME_LABEL = e2e.JOBSET_NAME_LABEL
RUN_TIME_ANNOTATION = e2e.RUN_TIME_ANNOTATION
USER_FIELD_MANAGER = "e2e-user"

counters = e2e.counters
jobs_status = e2e.jobs_status
read_jobset = e2e.read_jobset
read_trainjob = e2e.read_trainjob
true_condition = e2e.true_condition


# ------------------------------------------------------------------------------------------------ helpers


def runtime_gvk(kind: str) -> GVK:
    return GVK(constants.GROUP, constants.VERSION, kind)


def rfc3339(moment: datetime) -> str:
    """A ``metav1.Time`` on the wire: whole seconds, UTC."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def node_selector_patch(manager_name: str, zone: str, *, time: str | None = None) -> dict[str, Any]:
    """A runtime patch that puts ``zone: <zone>`` in the node pods' nodeSelector."""
    patch: dict[str, Any] = {
        "manager": manager_name,
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {"spec": {"template": {"spec": {"nodeSelector": {"zone": zone}}}}},
                        }
                    ]
                }
            }
        },
    }
    if time is not None:
        patch["time"] = time
    return patch


def replicated_job_pod(jobset: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The pod template of the JobSet's replicated job ``name``."""
    (job,) = [rj for rj in jobset["spec"]["replicatedJobs"] if rj["name"] == name]
    return dict(job["template"]["spec"]["template"])


def container(pod_spec: Mapping[str, Any], name: str, key: str = "containers") -> dict[str, Any]:
    (found,) = [c for c in pod_spec.get(key) or [] if c["name"] == name]
    return dict(found)


def is_gone(read: Callable[[], Any]) -> bool:
    try:
        read()
    except ApiException as exc:
        if exc.status != 404:
            raise
        return True
    return False


def snapshot_name(trainjob: str) -> str:
    return trainjob + constants.RUNTIME_SNAPSHOT_SUFFIX


def conditions(trainjob: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """(type, status, reason, message) of each condition, in order."""
    return [
        (c["type"], c["status"], c["reason"], c["message"])
        for c in (trainjob.get("status") or {}).get("conditions") or []
    ]


def set_suspend(client: Client, namespace: str, name: str, suspend: bool, **spec: Any) -> None:
    """Merge-patch ``spec.suspend`` (and any other spec fields given) as a user would."""
    client.patch(
        TRAINJOB,
        name,
        {"spec": {"suspend": suspend, **spec}},
        namespace,
        field_manager=USER_FIELD_MANAGER,
    )


# -------------------------------------------------------------------------------------------------- flux


def flux_runtime(namespace: str) -> dict[str, Any]:
    """A namespaced TrainingRuntime with upstream's e2e Flux policy (``examples/flux/flux-runtime.yaml``)."""
    return {
        "apiVersion": constants.API_VERSION,
        "kind": constants.TRAINING_RUNTIME_KIND,
        "metadata": {
            "name": "flux-distributed",
            "namespace": namespace,
            "labels": {constants.LABEL_FRAMEWORK: "flux"},
        },
        "spec": {
            "mlPolicy": {"numNodes": 1, "flux": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {
                                    "labels": {constants.LABEL_TRAINJOB_ANCESTOR: constants.ANCESTOR_TRAINER}
                                },
                                "spec": {
                                    "template": {
                                        "spec": {"containers": [{"name": "node", "image": "ubuntu:jammy"}]}
                                    }
                                },
                            },
                        }
                    ]
                }
            },
        },
    }


@kwok_only
def test_a_trainjob_on_a_flux_runtime_runs_to_complete_with_what_the_flux_plugin_adds(
    e2e_cluster: Any, client: Client, namespace: str, eventually: Callable[..., Any]
) -> None:
    client.apply(flux_runtime(namespace), "e2e", force=True)
    name = "flux"
    job = e2e.trainjob(name, "flux-distributed", kind=constants.TRAINING_RUNTIME_KIND, num_nodes=2)
    job["spec"]["trainer"] |= {"image": "ubuntu:22.04", "command": ["flux", "getattr", "rank"]}
    created = install.create_trainjob(client, job, namespace)
    stored = e2e.finished(e2e_cluster, namespace, name, eventually)

    assert conditions(stored) == [
        (constants.CONDITION_COMPLETE, "True", "AllJobsCompleted", "jobset completed successfully")
    ]
    assert e2e.owned_by(e2e_cluster, namespace, created) == {
        ("ConfigMap", snapshot_name(name)),
        ("ConfigMap", f"{name}-flux-entrypoint"),
        ("Secret", f"{name}-flux-curve"),
        ("JobSet", name),
    }

    # The JobSet: two node pods, each installing Flux in an init container and running the TrainJob's command
    # through the entrypoint script.
    jobset = read_jobset(e2e_cluster, namespace, name)
    (node_job,) = [rj for rj in jobset["spec"]["replicatedJobs"] if rj["name"] == "node"]
    assert (node_job["replicas"], node_job["template"]["spec"]["parallelism"]) == (1, 2)
    assert node_job["template"]["spec"]["completions"] == 2
    pod = replicated_job_pod(jobset, "node")["spec"]
    entrypoint = f"{name}-flux-entrypoint"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes == {
        "spack-install": {"name": "spack-install", "emptyDir": {}},
        "flux-install": {"name": "flux-install", "emptyDir": {}},
        entrypoint: {"name": entrypoint, "configMap": {"name": entrypoint, "defaultMode": 0o755}},
        "shared-memory": {"name": "shared-memory", "emptyDir": {"medium": "Memory"}},
        "flux-curve": {
            "name": "flux-curve",
            "secret": {"secretName": f"{name}-flux-curve", "defaultMode": 0o400},
        },
    }
    assert [c["name"] for c in pod["initContainers"]] == ["flux-installer"]
    installer = container(pod, "flux-installer", "initContainers")
    assert installer["image"] == "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy"
    assert installer["command"] == ["/bin/bash", "/etc/flux-config/init.sh"]
    assert {(m["name"], m["mountPath"], m.get("readOnly", False)) for m in installer["volumeMounts"]} == {
        ("flux-install", "/mnt/flux", False),
        (entrypoint, "/etc/flux-config", True),
    }
    node = container(pod, "node")
    assert node["image"] == "ubuntu:22.04"
    assert node["command"] == ["/bin/bash", "/etc/flux-config/entrypoint.sh", "flux getattr rank"]
    assert not node.get("args")
    assert {(m["name"], m["mountPath"], m.get("readOnly", False)) for m in node["volumeMounts"]} == {
        ("flux-install", "/mnt/flux", False),
        ("spack-install", "/opt/software", False),
        (entrypoint, "/etc/flux-config", True),
        ("flux-curve", "/curve", True),
        ("shared-memory", "/dev/shm", True),
    }

    # The scripts and the CURVE certificate the pods mount; the hosts are the two node pods.
    scripts = e2e_cluster.core.read_namespaced_config_map(entrypoint, namespace)
    assert set(scripts.data) == {"entrypoint.sh", "init.sh"}
    assert f"{name}-node-0-[0-1]" in scripts.data["init.sh"]
    assert "flux getattr rank" not in scripts.data["init.sh"]
    curve = e2e_cluster.core.read_namespaced_secret(f"{name}-flux-curve", namespace)
    certificate = base64.b64decode(curve.data["curve.cert"]).decode()
    assert "public-key" in certificate and "secret-key" in certificate

    # The pods ran (kwok played the init container too) and the status followed.
    pods = e2e.jobset_pods(e2e_cluster, namespace, name)
    assert len(pods) == 2 and {p.status.phase for p in pods} == {"Succeeded"}
    assert all([c.name for c in p.spec.init_containers] == ["flux-installer"] for p in pods)

    def counted() -> None:
        assert jobs_status(read_trainjob(e2e_cluster, namespace, name)) == {"node": counters(succeeded=1)}

    eventually(counted, timeout=30)


# ------------------------------------------------------------------------------- runtime patches' `time`


def test_a_runtime_patch_created_without_a_time_is_stamped_and_a_user_given_time_is_kept(
    client: Client, namespace: str
) -> None:
    user_time = rfc3339(datetime.now(UTC) - timedelta(hours=1))
    name = "stamped"
    job = e2e.trainjob(
        name,
        "torch-distributed",
        runtime_patches=[
            node_selector_patch("test.io/manager-one", "one", time=user_time),
            node_selector_patch("kueue.k8s.io/manager", "two"),
        ],
    )
    job["spec"]["suspend"] = True  # no pods: nothing here depends on the nodes
    before = datetime.now(UTC).replace(microsecond=0)
    created = install.create_trainjob(client, job, namespace)
    after = datetime.now(UTC)

    # The mutating webhook answers within the create: what it stamped is in the object as stored.
    stored = client.get(TRAINJOB, name, namespace)
    assert stored["spec"]["runtimePatches"] == created["spec"]["runtimePatches"]
    patches = stored["spec"]["runtimePatches"]
    assert [p["manager"] for p in patches] == ["test.io/manager-one", "kueue.k8s.io/manager"]
    assert patches[0]["time"] == user_time
    assert before <= parse_time(patches[1]["time"]) <= after


def test_on_update_only_a_changed_or_new_runtime_patch_gets_a_new_time(
    e2e_cluster: Any, client: Client, namespace: str, eventually: Callable[..., Any]
) -> None:
    user_time = rfc3339(datetime.now(UTC) - timedelta(hours=1))
    new_patch_time = rfc3339(datetime.now(UTC) - timedelta(minutes=30))
    edited_time = rfc3339(datetime.now(UTC) - timedelta(hours=2))
    name = "restamped"
    job = e2e.trainjob(
        name,
        "torch-distributed",
        runtime_patches=[
            node_selector_patch("test.io/unchanged", "keep"),
            node_selector_patch("test.io/will-change", "old", time=user_time),
        ],
    )
    job["spec"]["suspend"] = True
    created = install.create_trainjob(client, job, namespace)
    unchanged_time = created["spec"]["runtimePatches"][0]["time"]
    assert created["spec"]["runtimePatches"][1]["time"] == user_time

    # The suspended JobSet has the patches applied in order: the later patch's zone wins.
    def jobset_zone(zone: str) -> None:
        jobset = read_jobset(e2e_cluster, namespace, name)
        assert replicated_job_pod(jobset, "node")["spec"].get("nodeSelector") == {"zone": zone}

    eventually(lambda: jobset_zone("old"), retry_on=(AssertionError, ApiException))

    # Change the second patch, edit only the time of the first, add two patches (with and without a time).
    updated_at = datetime.now(UTC).replace(microsecond=0)

    def update() -> None:
        current = client.get(TRAINJOB, name, namespace)
        patches = current["spec"]["runtimePatches"]
        patches[0]["time"] = edited_time
        patches[1] = node_selector_patch("test.io/will-change", "new", time=patches[1]["time"])
        patches += [
            {"manager": "test.io/new-no-time"},
            {"manager": "test.io/new-with-time", "time": new_patch_time},
        ]
        client.update(current, field_manager=USER_FIELD_MANAGER)

    eventually(update, retry_on=(Conflict,))
    patches = client.get(TRAINJOB, name, namespace)["spec"]["runtimePatches"]
    assert [p["manager"] for p in patches] == [
        "test.io/unchanged",
        "test.io/will-change",
        "test.io/new-no-time",
        "test.io/new-with-time",
    ]
    assert patches[0]["time"] == unchanged_time  # unchanged entry: the user's edit of `time` is reverted
    assert patches[1]["time"] != user_time and parse_time(patches[1]["time"]) >= updated_at
    assert parse_time(patches[2]["time"]) >= updated_at
    assert patches[3]["time"] == new_patch_time

    # The change made while suspended reaches the (still suspended) JobSet.
    eventually(lambda: jobset_zone("new"))
    assert read_jobset(e2e_cluster, namespace, name)["spec"]["suspend"] is True


# ----------------------------------------------------------------------------------- external managedBy


def test_a_trainjob_managed_by_another_controller_is_left_alone(
    e2e_cluster: Any, client: Client, namespace: str, eventually: Callable[..., Any]
) -> None:
    name = "elsewhere"
    job = e2e.trainjob(name, "torch-distributed")
    job["spec"]["managedBy"] = constants.MANAGED_BY_MULTIKUEUE
    created = install.create_trainjob(client, job, namespace)
    assert created["spec"]["managedBy"] == constants.MANAGED_BY_MULTIKUEUE

    # The barrier: a TrainJob created afterwards, reconciled to its last step (the status write).
    barrier = e2e.trainjob("barrier", "torch-distributed")
    barrier["spec"]["suspend"] = True
    install.create_trainjob(client, barrier, namespace)
    eventually(
        lambda: true_condition(
            read_trainjob(e2e_cluster, namespace, "barrier"), constants.CONDITION_SUSPENDED
        )
    )

    stored = read_trainjob(e2e_cluster, namespace, name)
    assert not stored.get("status"), stored.get("status")
    assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert is_gone(lambda: read_jobset(e2e_cluster, namespace, name))
    assert is_gone(lambda: e2e_cluster.core.read_namespaced_config_map(snapshot_name(name), namespace))


# ----------------------------------------------------------------------------------------------- deadline


def test_a_trainjob_past_its_active_deadline_fails_and_its_jobset_is_deleted(
    e2e_cluster: Any, client: Client, namespace: str, workload_image: str, eventually: Callable[..., Any]
) -> None:
    # Long enough for the pods to be Running before it passes on a loaded machine: once it has passed, the
    # JobSet is deleted and the pods can never be seen Running.
    deadline = 25
    name = "overdue"
    client.apply(e2e.workload_runtime(namespace, workload_image), "e2e", force=True)
    job = e2e.trainjob(
        name,
        "workload",
        kind=constants.TRAINING_RUNTIME_KIND,
        runtime_patches=[e2e.run_for_an_hour_patch(("node",))],
    )
    job["spec"]["activeDeadlineSeconds"] = deadline
    created = install.create_trainjob(client, job, namespace)

    def running() -> None:
        pods = e2e.jobset_pods(e2e_cluster, namespace, name)
        assert pods and {p.status.phase for p in pods} == {"Running"}, [p.status.phase for p in pods]

    eventually(running, timeout=deadline)  # the pods would run for an hour
    # Seen Running, so the JobSet was not cut short before the deadline; nor was the TrainJob finished.
    early = conditions(read_trainjob(e2e_cluster, namespace, name))
    finished_types = (constants.CONDITION_FAILED, constants.CONDITION_COMPLETE)
    assert not [c for c in early if c[0] in finished_types and c[1] == "True"], early

    stored = e2e.finished(e2e_cluster, namespace, name, eventually)
    assert conditions(stored) == [
        (
            constants.CONDITION_FAILED,
            "True",
            constants.REASON_DEADLINE_EXCEEDED,
            constants.MESSAGE_DEADLINE_EXCEEDED,
        )
    ]
    failed_at = parse_time(true_condition(stored, constants.CONDITION_FAILED)["lastTransitionTime"])
    assert failed_at - parse_time(created["metadata"]["creationTimestamp"]) >= timedelta(seconds=deadline)

    # The JobSet is deleted, and the garbage collector takes its Jobs and pods.
    def cut_short() -> None:
        assert is_gone(lambda: read_jobset(e2e_cluster, namespace, name))
        assert not e2e.jobset_pods(e2e_cluster, namespace, name)
        jobs = e2e_cluster.batch.list_namespaced_job(namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}")
        assert not jobs.items

    eventually(cut_short, timeout=60)
    # A finished TrainJob is not rebuilt; it stays Failed with the deadline's reason.
    assert is_gone(lambda: read_jobset(e2e_cluster, namespace, name))
    assert conditions(read_trainjob(e2e_cluster, namespace, name)) == conditions(stored)


# ---------------------------------------------------------------------------------------- suspend, resume


def test_a_suspended_trainjob_loses_its_pods_and_resumed_runs_again_to_complete(
    e2e_cluster: Any, client: Client, namespace: str, workload_image: str, eventually: Callable[..., Any]
) -> None:
    name = "paused"
    client.apply(e2e.workload_runtime(namespace, workload_image), "e2e", force=True)
    long_run = e2e.run_for_an_hour_patch(("node",))
    job = e2e.trainjob(
        name, "workload", kind=constants.TRAINING_RUNTIME_KIND, num_nodes=2, runtime_patches=[long_run]
    )
    install.create_trainjob(client, job, namespace)

    def running() -> set[str]:
        assert jobs_status(read_trainjob(e2e_cluster, namespace, name)) == {
            "node": counters(active=1, ready=1)
        }
        pods = e2e.jobset_pods(e2e_cluster, namespace, name)
        assert len(pods) == 2 and {p.status.phase for p in pods} == {"Running"}
        return {p.metadata.uid for p in pods}

    first_run = eventually(running)

    set_suspend(client, namespace, name, True)

    def suspended() -> None:
        stored = read_trainjob(e2e_cluster, namespace, name)
        assert conditions(stored) == [
            (constants.CONDITION_SUSPENDED, "True", constants.REASON_SUSPENDED, constants.MESSAGE_SUSPENDED)
        ]
        assert jobs_status(stored) == {"node": counters(suspended=1)}
        assert read_jobset(e2e_cluster, namespace, name)["spec"]["suspend"] is True
        assert not e2e.jobset_pods(e2e_cluster, namespace, name)

    eventually(suspended)

    # Resume with the pods' run time cut to a second (runtime-patch metadata may change while suspended;
    # the webhook refuses it while the JobSet still counts an active job, so retry until its cache agrees).
    short_run = e2e.pod_metadata_patch(
        long_run["manager"], ("node",), annotations={RUN_TIME_ANNOTATION: "1s"}
    )
    eventually(
        lambda: set_suspend(client, namespace, name, False, runtimePatches=[short_run]), retry_on=(Forbidden,)
    )

    def resumed() -> None:
        pods = e2e.jobset_pods(e2e_cluster, namespace, name)
        assert len(pods) == 2 and not {p.metadata.uid for p in pods} & first_run
        assert {p.metadata.annotations[RUN_TIME_ANNOTATION] for p in pods} == {"1s"}

    eventually(resumed)
    stored = e2e.finished(e2e_cluster, namespace, name, eventually)
    assert conditions(stored) == [
        (constants.CONDITION_SUSPENDED, "False", constants.REASON_RESUMED, constants.MESSAGE_RESUMED),
        (constants.CONDITION_COMPLETE, "True", "AllJobsCompleted", "jobset completed successfully"),
    ]
    assert {p.status.phase for p in e2e.jobset_pods(e2e_cluster, namespace, name)} == {"Succeeded"}


# --------------------------------------------------------------------------------- runtime snapshots


INITIAL_IMAGE = "registry.k8s.io/pause:3.9"
UPDATED_IMAGE = "registry.k8s.io/pause:3.10"


def pause_runtime(kind: str, name: str, namespace: str) -> dict[str, Any]:
    """Upstream's "Updating a runtime" runtime: one node job running ``/pause``; here an hour long."""
    metadata: dict[str, Any] = {"name": name}
    if kind == constants.TRAINING_RUNTIME_KIND:
        metadata["namespace"] = namespace
    return {
        "apiVersion": constants.API_VERSION,
        "kind": kind,
        "metadata": metadata,
        "spec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {
                                    "labels": {constants.LABEL_TRAINJOB_ANCESTOR: constants.ANCESTOR_TRAINER}
                                },
                                "spec": {
                                    "template": {
                                        "metadata": {"annotations": {RUN_TIME_ANNOTATION: "1h"}},
                                        "spec": {
                                            "containers": [
                                                {
                                                    "name": "node",
                                                    "image": INITIAL_IMAGE,
                                                    "command": ["/pause"],
                                                }
                                            ]
                                        },
                                    }
                                },
                            },
                        }
                    ]
                }
            }
        },
    }


@pytest.fixture(params=[constants.TRAINING_RUNTIME_KIND, constants.CLUSTER_TRAINING_RUNTIME_KIND])
def pause_runtime_ref(
    request: pytest.FixtureRequest, client: Client, namespace: str
) -> Iterator[tuple[str, str]]:
    """(kind, name) of a new pause runtime; a ClusterTrainingRuntime is deleted afterwards."""
    kind = request.param
    name = "pause" if kind == constants.TRAINING_RUNTIME_KIND else f"{namespace}-pause"
    client.create(pause_runtime(kind, name, namespace), field_manager=USER_FIELD_MANAGER)
    try:
        yield kind, name
    finally:
        if kind == constants.CLUSTER_TRAINING_RUNTIME_KIND:
            with contextlib.suppress(NotFound):
                client.delete(runtime_gvk(kind), name)


def test_a_runtime_update_does_not_reach_a_suspended_trainjob_and_its_snapshot_goes_with_it(
    e2e_cluster: Any,
    client: Client,
    namespace: str,
    eventually: Callable[..., Any],
    pause_runtime_ref: tuple[str, str],
) -> None:
    kind, runtime = pause_runtime_ref
    name = "snapshotted"
    created = install.create_trainjob(client, e2e.trainjob(name, runtime, kind=kind), namespace)

    def jobs(**expected: int) -> None:
        assert jobs_status(read_trainjob(e2e_cluster, namespace, name)) == {"node": counters(**expected)}

    eventually(lambda: jobs(active=1, ready=1))
    set_suspend(client, namespace, name, True)
    eventually(lambda: jobs(suspended=1))
    snapshot = client.get(CONFIGMAP, snapshot_name(name), namespace)
    e2e.assert_controlled_by(snapshot, created)
    assert INITIAL_IMAGE in snapshot["data"][constants.RUNTIME_SNAPSHOT_KEY]

    # The runtime's image changes (JobSet's webhook refuses that change on an existing JobSet).
    def update_runtime() -> None:
        current = client.get(
            runtime_gvk(kind), runtime, namespace if kind == constants.TRAINING_RUNTIME_KIND else None
        )
        current["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
            "containers"
        ][0]["image"] = UPDATED_IMAGE
        client.update(current, field_manager=USER_FIELD_MANAGER)

    eventually(update_runtime, retry_on=(Conflict,))

    set_suspend(client, namespace, name, False)

    def running_again() -> None:
        jobs(active=1, ready=1)
        pods = e2e.jobset_pods(e2e_cluster, namespace, name)
        assert pods and {p.status.phase for p in pods} == {"Running"}
        assert {c.image for p in pods for c in p.spec.containers} == {INITIAL_IMAGE}

    eventually(running_again)
    jobset = read_jobset(e2e_cluster, namespace, name)
    assert jobset["spec"]["suspend"] is False
    assert container(replicated_job_pod(jobset, "node")["spec"], "node")["image"] == INITIAL_IMAGE
    kept = client.get(CONFIGMAP, snapshot_name(name), namespace)
    assert kept["metadata"]["resourceVersion"] == snapshot["metadata"]["resourceVersion"]
    assert kept["data"] == snapshot["data"]

    # Deleting the TrainJob garbage-collects the snapshot (owner reference; kube-controller-manager's GC).
    e2e_cluster.custom.delete_namespaced_custom_object(
        constants.GROUP, constants.VERSION, namespace, "trainjobs", name, propagation_policy="Background"
    )

    def collected() -> None:
        assert is_gone(lambda: e2e_cluster.core.read_namespaced_config_map(snapshot_name(name), namespace))

    # The garbage collector knows a new CRD's objects only from its next rediscovery (every 30 s).
    eventually(collected, timeout=120, interval=1.0)
