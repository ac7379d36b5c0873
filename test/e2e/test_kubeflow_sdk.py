"""The Kubeflow Python SDK, unmodified, against the local cluster with our manager: docs/sdk.md.

``kubeflow`` (the SDK's ``TrainerClient``, Kubernetes backend) pins a ``kubernetes`` client older than ours,
so it lives in a virtualenv of its own, created once and cached by version outside the repository
(``<cache>/sdk-venv-<version>/``; :func:`sdk_python`). ``kubeflow_sdk_driver.py`` runs in it for the whole
module and answers SDK calls as JSON lines; the tests assert on what the SDK returns and, through our own
client, on the state of the cluster.

Covered (what the SDK needs is in docs/compatibility.md): ``list_runtimes`` shows the shipped runtimes
(the public ConfigMap is read, so the SDK does not warn); ``train`` with a ``CustomTrainer`` on 2 nodes
writes the serialised function into the TrainJob, which our manager turns into a JobSet that runs to
Complete on kwok; ``wait_for_job_status``, ``get_job``, ``list_jobs``, ``get_job_events``, ``get_job_logs``
(kwok serves one fixed log file for every container: ``support.kwok.CONTAINER_LOG_LINES``) and
``delete_job``; our manager's Warning event, a core/v1 Event with ``firstTimestamp``, is one the SDK shows;
a ``BuiltinTrainer`` (TorchTune, LoRA) on ``torchtune-llama3.2-1b`` gets the Torch plugin's torchtune
command in its JobSet.

Not covered: ``get_runtime_packages`` (it prints the logs of a job that must run ``pip list``),
``get_job_logs(follow=True)``. The torchtune job never runs: its initializers wait for a
PersistentVolumeClaim that nothing provisions on kwok, and for images not in the kind cluster. The
``CustomTrainer`` run is kwok only (``kwok_pods``: the fixed logs and the pods' lifecycle are kwok's); the
runtimes, the Warning event and torchtune's command run on kind too, against the installed manager and
public ConfigMap.

On kind (``hack/e2e-setup-kind.sh``, the installed manager, real Pods) two more tests:

- ``train`` with a ``CustomTrainerContainer`` in the workload image on a namespaced Torch runtime that runs
  ``test/e2e/workload/allreduce.py``; the two nodes rendezvous through the env and headless Service the
  controller set up, ``wait_for_job_status`` sees ``Complete``, and ``get_job_logs`` returns each rank's own
  line. (A ``CustomTrainer`` would need ``torchrun`` in the image, or ``python`` for a plain runtime: the
  command the SDK writes names them, and the workload image has only Debian's ``python3``.)
- Progress from a pod, with the ``TrainJobStatus`` gate the Helm install turns on (skipped on an install
  without it, failed on the Helm install): the node runs ``test/e2e/workload/progress.py``, which reports
  as the SDK's in-pod ``update_trainjob_status`` does, with the URL, token and CA the ``TrainJobStatus``
  plugin injected (a standard-library stand-in: the SDK cannot be imported in the workload image).
  ``status.trainerStatus``, absent at creation, holds the report, written by the status server's field
  manager, and the SDK reads it back. ``get_job`` drops ``trainerStatus`` (its ``TrainJob`` has no such
  field), so the driver's ``get_trainer_status`` reads it through the SDK's own client and API model. Then
  a pod of a second TrainJob posts with its own token to the first one's URL (its token's audience is its
  own TrainJob) and to its own URL without a token: both 403, the first TrainJob's status unchanged, while
  the same pod's own report is accepted.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from controller import envtest
from controller.client.client import Client
from controller.client.errors import AlreadyExists, NotFound
from controller.client.gvk import GVK
from runtime.api import constants
from support import allreduce_runtime as allreduce
from support import cluster_manager, install, kwok
from support import e2e_paths as paths
from support.kind_jobs import workload_image

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
DRIVER = HERE / "kubeflow_sdk_driver.py"
PUBLIC_CONFIGMAP = ROOT / "config" / "public" / "configmap.yaml"

SDK_VERSION = "0.5.0"
SDK_REQUIREMENTS = (
    f"kubeflow=={SDK_VERSION}",
    # What kubeflow 0.5.0 resolved to when this test was written, pinned so that a
    # new release of either cannot change what is tested.
    "kubeflow-trainer-api==2.3.0",
    "kubernetes==35.0.0",
)
VENV_INSTALL_TIMEOUT = 600.0
VERSION_WARNING = "Trainer control-plane version info is not available"
"""The SDK's warning when ConfigMap kubeflow-system/kubeflow-trainer-public is missing."""

JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
CREATION_FAILED = "TrainJobResourcesCreationFailed"


# ------------------------------------------------------------------------------------- the SDK's virtualenv


class SdkUnavailable(Exception):
    """The SDK's virtualenv could not be created (no index, no network): a missing prerequisite."""


def sdk_venv_dir() -> Path:
    """``<cache>/sdk-venv-<version>/``, next to the binaries (``TRAINER_CACHE_DIR`` moves both)."""
    return envtest.cache_directory() / f"sdk-venv-{SDK_VERSION}"


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _run(argv: list[str], *, timeout: float, what: str) -> None:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise SdkUnavailable(f"{what}: no result within {timeout:.0f} s") from exc
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
        raise SdkUnavailable(f"{what} failed (exit {result.returncode}):\n{tail}")


def sdk_python(*, timeout: float = VENV_INSTALL_TIMEOUT) -> Path:
    """The Python of the SDK's virtualenv, created with :data:`SDK_REQUIREMENTS` unless already complete.

    A virtualenv is complete when its marker file lists exactly :data:`SDK_REQUIREMENTS` (written last, so
    an interrupted install is redone). Concurrent sessions take turns through a lock file.
    """
    venv = sdk_venv_dir()
    marker = venv / ".requirements"
    wanted = "\n".join(SDK_REQUIREMENTS) + "\n"
    venv.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout
    with (venv.parent / f"{venv.name}.lock").open("w") as lock:
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise SdkUnavailable(
                        f"another session has been creating {venv} for {timeout:.0f} s"
                    ) from None
                time.sleep(1.0)
        if marker.is_file() and marker.read_text() == wanted and _venv_python(venv).exists():
            return _venv_python(venv)
        shutil.rmtree(venv, ignore_errors=True)
        _run([sys.executable, "-m", "venv", str(venv)], timeout=120, what=f"python -m venv {venv}")
        remaining = max(60.0, deadline - time.monotonic())
        pip = [str(_venv_python(venv)), "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
        _run(
            [*pip, "--quiet", *SDK_REQUIREMENTS],
            timeout=remaining,
            what="pip install " + " ".join(SDK_REQUIREMENTS),
        )
        marker.write_text(wanted)
        return _venv_python(venv)


# ------------------------------------------------------------------------------------------------ the driver


class SdkCallError(Exception):
    """The SDK raised: ``type``, ``message`` and ``cause`` (the exception it wrapped), from the driver."""

    def __init__(self, call: str, error: dict[str, Any]) -> None:
        super().__init__(f"{call}: {error['type']}: {error['message']} (cause: {error['cause']})")
        self.type: str = error["type"]
        self.message: str = error["message"]
        self.cause: str | None = error["cause"]


class SdkDriver:
    """``kubeflow_sdk_driver.py`` in the SDK's virtualenv: :meth:`call` sends a request, waits for its answer.

    Every wait is bounded (``answer_within`` seconds per call); the process's stderr (the SDK's warnings)
    goes to a file, read by :meth:`stderr`. :meth:`close` ends it (end of input, then SIGKILL after 10 s).
    """

    def __init__(self, python: Path, kubeconfig: Path, stderr: Path, *, start_timeout: float = 180.0) -> None:
        self._stderr_path = stderr
        self._buffer = b""
        with stderr.open("wb") as err:
            self._proc = subprocess.Popen(
                [str(python), str(DRIVER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env={**os.environ, "KUBECONFIG": str(kubeconfig), "PYTHONUNBUFFERED": "1"},
            )
        try:
            self.versions: dict[str, str] = self._read(start_timeout, "start-up")["ready"]
        except BaseException:
            self.close()
            raise

    def call(self, namespace: str, call: str, *, answer_within: float = 60.0, **args: Any) -> Any:
        assert self._proc.stdin is not None
        request = {"namespace": namespace, "call": call, "args": args}
        self._proc.stdin.write(json.dumps(request).encode() + b"\n")
        self._proc.stdin.flush()
        answer = self._read(answer_within, call)
        if "error" in answer:
            raise SdkCallError(call, answer["error"])
        return answer["result"]

    def stderr(self) -> str:
        return self._stderr_path.read_text(errors="replace")

    def _read(self, timeout: float, what: str) -> dict[str, Any]:
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"the SDK driver gave no answer to {what} within {timeout:.0f} s")
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    tail = "\n".join(self.stderr().strip().splitlines()[-20:])
                    raise AssertionError(f"the SDK driver exited during {what}:\n{tail}")
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        if self._proc.stdin is not None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=10)
        if self._proc.stdout is not None:
            self._proc.stdout.close()


# ------------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def client(e2e_cluster: Any) -> Iterator[Client]:
    c = Client.load(str(e2e_cluster.kubeconfig), user_agent="test_kubeflow_sdk")
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def manager(e2e_cluster: Any, client: Client) -> Iterator[Any]:
    """The Trainer CRDs and shipped runtimes, the public ConfigMap, and ``trainer-controller-manager``: on
    kind all of them as hack/e2e-setup-kind.sh installed them."""
    if e2e_cluster.flavour == "kind":
        yield None
        return
    install.install_trainer(client)
    with contextlib.suppress(AlreadyExists):
        client.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": install.MANAGER_NAMESPACE}}
        )
    # The SDK reads the installed version from it; the install ships it (config/public), `make demo` not.
    configmap = install.read_manifests(PUBLIC_CONFIGMAP, ("ConfigMap",))[0]
    configmap = {**configmap, "metadata": {**configmap["metadata"], "namespace": install.MANAGER_NAMESPACE}}
    created = False
    with contextlib.suppress(AlreadyExists):
        client.create(configmap)
        created = True
    try:
        if not e2e_cluster.owned:
            running = cluster_manager.manager_process(os.environ.get("E2E_CLUSTER_NAME", kwok.DEFAULT_NAME))
            if running is None:
                pytest.skip("an external cluster needs its manager running (`make demo` starts one)")
            yield running
            return
        state = kwok.ClusterState.read(os.environ.get("E2E_CLUSTER_NAME", "trainer-e2e-pytest"))
        assert state is not None, "the e2e cluster has no state file"
        process = cluster_manager.start_manager(state)
        try:
            yield process
        finally:
            cluster_manager.stop_manager(state.name)
    finally:
        if created:
            with contextlib.suppress(NotFound):
                client.delete(
                    GVK("", "v1", "ConfigMap"), "kubeflow-trainer-public", install.MANAGER_NAMESPACE
                )


def start_sdk(e2e_cluster: Any, prerequisite: Any, tmp_path_factory: pytest.TempPathFactory) -> SdkDriver:
    try:
        python = sdk_python()
    except SdkUnavailable as exc:
        prerequisite.missing(f"the Kubeflow SDK {SDK_VERSION} virtualenv: {exc}")
    driver = SdkDriver(python, e2e_cluster.kubeconfig, tmp_path_factory.mktemp("kubeflow-sdk") / "stderr.log")
    if driver.versions != {"kubeflow": SDK_VERSION, "kubernetes": "35.0.0"}:
        driver.close()
        pytest.fail(f"the SDK's virtualenv has {driver.versions}", pytrace=False)
    return driver


@pytest.fixture(scope="module")
def sdk(
    e2e_cluster: Any, manager: Any, prerequisite: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SdkDriver]:
    driver = start_sdk(e2e_cluster, prerequisite, tmp_path_factory)
    try:
        yield driver
    finally:
        driver.close()


@pytest.fixture
def kwok_pods(e2e_cluster: Any) -> None:
    if e2e_cluster.flavour != "kwok":
        pytest.skip("kwok only: the pods' lifecycle from stages, the fixed container log")


@pytest.fixture(scope="module")
def kind_sdk(
    e2e_cluster: Any, prerequisite: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SdkDriver]:
    """The SDK against kind, where the manager is the installed Deployment and the Pods are real."""
    if e2e_cluster.flavour != "kind":
        pytest.skip("kind only: real Pods and their logs (hack/e2e-setup-kind.sh)")
    driver = start_sdk(e2e_cluster, prerequisite, tmp_path_factory)
    try:
        yield driver
    finally:
        driver.close()


# -------------------------------------------------------------------------------------------- reading back


def read_trainjob(cluster: Any, namespace: str, name: str) -> dict[str, Any]:
    return dict(
        cluster.custom.get_namespaced_custom_object(
            constants.GROUP, constants.VERSION, namespace, "trainjobs", name
        )
    )


def read_jobset(cluster: Any, namespace: str, name: str) -> dict[str, Any]:
    return dict(
        cluster.custom.get_namespaced_custom_object(
            constants.JOBSET_GROUP, constants.JOBSET_VERSION, namespace, "jobsets", name
        )
    )


def node_container(jobset: dict[str, Any]) -> dict[str, Any]:
    (node,) = [rj for rj in jobset["spec"]["replicatedJobs"] if rj["name"] == "node"]
    (container,) = [
        c for c in node["template"]["spec"]["template"]["spec"]["containers"] if c["name"] == "node"
    ]
    return dict(container)


def jobset_of(cluster: Any, namespace: str, name: str, eventually: Callable[..., Any]) -> dict[str, Any]:
    def applied() -> dict[str, Any]:
        try:
            return read_jobset(cluster, namespace, name)
        except ApiException as exc:
            raise AssertionError(f"no JobSet {namespace}/{name} yet: {exc.status}") from exc

    result: dict[str, Any] = eventually(applied, timeout=30)
    return result


def events_the_sdk_keeps(cluster: Any, namespace: str, names: set[str]) -> set[tuple[str, str, str]]:
    """(kind, name, reason) of the core/v1 Events ``get_job_events`` keeps (docs/sdk.md, "Events")."""
    return {
        (e.involved_object.kind, e.involved_object.name, e.reason)
        for e in cluster.core.list_namespaced_event(namespace).items
        if e.first_timestamp is not None
        and e.involved_object.kind in {"TrainJob", "JobSet", "Job", "Pod"}
        and e.involved_object.name in names
    }


def sdk_events(events: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(e["involved_object_kind"], e["involved_object_name"], e["reason"]) for e in events}


def absent(read: Callable[[], Any]) -> None:
    """Assert that ``read()`` finds nothing (a 404), for :func:`eventually` to retry."""
    try:
        found = read()
    except ApiException as exc:
        assert exc.status == 404, exc
        return
    raise AssertionError(f"still there: {found['kind']} {found['metadata']['name']}")


def assert_gone(cluster: Any, namespace: str, name: str, eventually: Callable[..., Any]) -> None:
    def gone() -> None:
        absent(lambda: read_trainjob(cluster, namespace, name))

    eventually(gone, timeout=30)


# -------------------------------------------------------------------------------------------------- tests


def test_the_sdk_lists_the_shipped_runtimes_and_reads_the_installed_version(
    sdk: SdkDriver, namespace: str
) -> None:
    runtimes = {r["name"]: r for r in sdk.call(namespace, "list_runtimes")}

    shipped = install.read_manifests(install.TRAINER_RUNTIMES_DIR, (constants.CLUSTER_TRAINING_RUNTIME_KIND,))
    assert len(shipped) >= 8
    for manifest in shipped:
        name = manifest["metadata"]["name"]
        framework = manifest["metadata"]["labels"]["trainer.kubeflow.org/framework"]
        assert name in runtimes, sorted(runtimes)
        runtime = runtimes[name]
        assert runtime["kind"] == constants.CLUSTER_TRAINING_RUNTIME_KIND
        assert runtime["trainer"]["framework"] == framework
        assert runtime["trainer"]["trainer_type"] == (
            "BuiltinTrainer" if framework == "torchtune" else "CustomTrainer"
        )
        assert runtime["trainer"]["num_nodes"] == manifest["spec"]["mlPolicy"].get("numNodes", 1)
    # The entry point the SDK infers from each mlPolicy: torchrun, mpirun, python; tune for torchtune.
    assert runtimes["torch-distributed"]["trainer"]["command"][-1].endswith('torchrun "{func_file}"')
    assert runtimes["deepspeed-distributed"]["trainer"]["command"][0] == "mpirun"
    assert runtimes["xgboost-distributed"]["trainer"]["command"][-1].endswith('python "{func_file}"')
    assert runtimes["torchtune-llama3.2-1b"]["trainer"]["command"] == ["tune", "run"]
    # TrainerClient() read ConfigMap kubeflow-system/kubeflow-trainer-public without complaint.
    assert VERSION_WARNING not in sdk.stderr()


@pytest.mark.usefixtures("kwok_pods")
def test_a_custom_trainer_on_two_nodes_runs_to_complete_and_the_sdk_follows_it_to_deletion(
    sdk: SdkDriver, namespace: str, e2e_cluster: Any, eventually: Callable[..., Any]
) -> None:
    name = "sdk-torch"
    assert sdk.call(namespace, "train_custom", name=name, runtime="torch-distributed", num_nodes=2) == name

    # What the SDK wrote: the runtime it resolved, 2 nodes, 1 CPU each, the function in the command.
    trainjob = read_trainjob(e2e_cluster, namespace, name)
    assert trainjob["spec"]["runtimeRef"] == {
        "apiGroup": constants.GROUP,
        "kind": constants.CLUSTER_TRAINING_RUNTIME_KIND,
        "name": "torch-distributed",
    }
    trainer = trainjob["spec"]["trainer"]
    assert trainer["numNodes"] == 2
    assert trainer["resourcesPerNode"] == {"requests": {"cpu": 1}, "limits": {"cpu": 1}}  # as sent: an int
    bash, dash_c, script = trainer["command"]
    assert (bash, dash_c) == ("bash", "-c")
    assert "def train_fn() -> None:" in script
    assert script.rstrip().endswith('torchrun "kubeflow_sdk_driver.py"')
    # ... which our manager put into the JobSet's node container unchanged.
    jobset = jobset_of(e2e_cluster, namespace, name, eventually)
    assert node_container(jobset)["command"] == trainer["command"]
    assert jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 2

    done = sdk.call(
        namespace, "wait_for_job_status", name=name, status=["Complete"], timeout=120, answer_within=150
    )
    pods = {
        p.metadata.name: p
        for p in e2e_cluster.core.list_namespaced_pod(
            namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}"
        ).items
    }
    assert done["status"] == "Complete"
    assert done["num_nodes"] == 2
    assert sorted((s["name"], s["status"]) for s in done["steps"]) == [
        ("node-0", "Succeeded"),
        ("node-1", "Succeeded"),
    ]
    assert {s["pod_name"] for s in done["steps"]} == set(pods)
    stored = read_trainjob(e2e_cluster, namespace, name)
    assert [c["type"] for c in stored["status"]["conditions"] if c["status"] == "True"] == ["Complete"]

    assert sdk.call(namespace, "get_job", name=name) == done
    assert [job["name"] for job in sdk.call(namespace, "list_jobs")] == [name]

    # Events: what the SDK keeps (core/v1 with firstTimestamp, about the TrainJob, its steps or pods) is what
    # the cluster has. The Job controller's events name the Job (`<name>-node-0`), which the SDK does not
    # look for; JobSet and the scheduler write events.k8s.io Events, which have no firstTimestamp.
    events = sdk.call(namespace, "get_job_events", name=name)
    names = {name, "node-0", "node-1", *pods}
    assert sdk_events(events) == events_the_sdk_keeps(e2e_cluster, namespace, names)
    job_events = events_the_sdk_keeps(e2e_cluster, namespace, {f"{name}-node-0"})
    assert ("Job", f"{name}-node-0", "SuccessfulCreate") in job_events

    # Logs: kwok-controller serves the same file for every container, through kube-apiserver's pods/log.
    assert sdk.call(namespace, "get_job_logs", name=name) == list(kwok.CONTAINER_LOG_LINES)
    node_0 = next(s["pod_name"] for s in done["steps"] if s["name"] == "node-0")
    log = e2e_cluster.core.read_namespaced_pod_log(node_0, namespace, container="node")
    assert log.splitlines() == list(kwok.CONTAINER_LOG_LINES)

    assert sdk.call(namespace, "delete_job", name=name) is None
    assert_gone(e2e_cluster, namespace, name, eventually)

    def collected() -> None:
        absent(lambda: read_jobset(e2e_cluster, namespace, name))
        assert not e2e_cluster.core.list_namespaced_pod(
            namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}"
        ).items

    # The garbage collector finds a new CRD's objects at its next rediscovery (every 30 s).
    eventually(collected, timeout=120, interval=1.0)
    assert sdk.call(namespace, "list_jobs") == []


def test_the_sdk_shows_the_managers_warning_event(
    sdk: SdkDriver, namespace: str, e2e_cluster: Any, eventually: Callable[..., Any]
) -> None:
    # A valid TrainJob name too long for the JobSet's pod names: JobSet's webhook refuses the JobSet, and the
    # manager says so in a Warning event on the TrainJob (a core/v1 Event with firstTimestamp).
    name = "sdk-events-" + "x" * 45
    assert sdk.call(namespace, "train_custom", name=name, runtime="torch-distributed", num_nodes=1) == name

    def recorded() -> Any:
        found = [
            e
            for e in e2e_cluster.core.list_namespaced_event(namespace).items
            if e.involved_object.kind == "TrainJob"
            and e.involved_object.name == name
            and e.reason == CREATION_FAILED
        ]
        assert found, "no TrainJobResourcesCreationFailed event yet"
        return found[0]

    event = eventually(recorded, timeout=60)
    assert event.type == "Warning" and event.first_timestamp is not None
    assert "JobSet name is too long" in event.message

    shown = [e for e in sdk.call(namespace, "get_job_events", name=name) if e["reason"] == CREATION_FAILED]
    assert [(e["involved_object_kind"], e["involved_object_name"], e["message"]) for e in shown] == [
        ("TrainJob", name, event.message)
    ]
    job = sdk.call(namespace, "get_job", name=name)
    assert (job["status"], job["steps"]) == ("Created", [])

    sdk.call(namespace, "delete_job", name=name)
    assert_gone(e2e_cluster, namespace, name, eventually)


def test_a_builtin_torchtune_trainer_gets_the_torch_plugins_tune_run_command(
    sdk: SdkDriver, namespace: str, e2e_cluster: Any, eventually: Callable[..., Any]
) -> None:
    name = "sdk-torchtune"
    assert sdk.call(namespace, "train_builtin", name=name, runtime="torchtune-llama3.2-1b") == name

    # The SDK sends the runtime's entry point and the TorchTune overrides as key=value args ...
    trainer = read_trainjob(e2e_cluster, namespace, name)["spec"]["trainer"]
    assert trainer["command"] == ["tune", "run"]
    assert trainer["args"] == [
        "batch_size=2",
        "epochs=1",
        "model.lora_rank=4",
        "model.lora_attn_modules=[q_proj,v_proj]",
    ]
    assert trainer["numNodes"] == 1
    # ... and the Torch plugin completes the command (runtime/plugins/torch.py, torchtune): the runtime asks
    # for 2 GPUs, so a rendezvous endpoint; one node with LoRA args, so the distributed LoRA recipe and the
    # model's _lora config; then the runtime's immutable configs (output_dir, tokenizer.path,
    # checkpointer.checkpoint_dir).
    container = node_container(jobset_of(e2e_cluster, namespace, name, eventually))
    assert container["command"] == [
        "tune",
        "run",
        f"--rdzv_endpoint={name}-node-0-0.{name}:29500",
        "lora_finetune_distributed",
        "--config",
        "llama3_2/1B_lora",
        "output_dir=/workspace/output",
        "tokenizer.path=/workspace/model/original/tokenizer.model",
        "checkpointer.checkpoint_dir=/workspace/model",
    ]
    assert container["args"] == trainer["args"]

    # The SDK sees the initializer steps, Pending: on kwok their volume claim is never provisioned, on kind
    # their images are not in the cluster.
    def initializers_pending() -> Any:
        job = sdk.call(namespace, "get_job", name=name)
        assert sorted((s["name"], s["status"]) for s in job["steps"]) == [
            ("dataset-initializer", "Pending"),
            ("model-initializer", "Pending"),
        ], job["steps"]
        return job

    job = eventually(initializers_pending, timeout=60, interval=1.0)
    assert job["status"] == "Created"
    assert job["runtime"]["trainer"]["trainer_type"] == "BuiltinTrainer"

    sdk.call(namespace, "delete_job", name=name)
    assert_gone(e2e_cluster, namespace, name, eventually)


# ----------------------------------------------------------------------------------------- kind: real Pods


def test_on_kind_the_sdk_trains_on_real_pods_that_rendezvous_and_reads_their_logs(
    kind_sdk: SdkDriver, namespace: str, e2e_cluster: Any, eventually: Callable[..., Any]
) -> None:
    # A namespaced runtime (the SDK prefers it to a cluster one of the same name) with the Torch policy whose
    # node runs the all-reduce of test/e2e/workload; the SDK names the image, the runtime keeps its command.
    image = workload_image()
    runtime = allreduce.allreduce_runtime(
        "sdk-allreduce",
        "trainer-e2e/not-this-one:0",
        command=["python3", "allreduce.py"],
        num_nodes=1,
        labels={"trainer.kubeflow.org/framework": "torch"},
    )
    e2e_cluster.custom.create_namespaced_custom_object(
        constants.GROUP, constants.VERSION, namespace, "trainingruntimes", runtime
    )
    name = "sdk-sum"
    assert (
        kind_sdk.call(
            namespace, "train_container", name=name, runtime="sdk-allreduce", image=image, num_nodes=2
        )
        == name
    )
    trainer = read_trainjob(e2e_cluster, namespace, name)["spec"]["trainer"]
    assert (trainer["image"], trainer["numNodes"]) == (image, 2)

    try:
        done = kind_sdk.call(
            namespace,
            "wait_for_job_status",
            name=name,
            status=["Complete"],
            timeout=240,
            answer_within=300.0,
        )
    except SdkCallError as exc:
        pods = e2e_cluster.core.list_namespaced_pod(namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}")
        pytest.fail(f"{exc}; pods: {[(p.metadata.name, p.status.phase) for p in pods.items]}", pytrace=False)
    assert done["status"] == "Complete" and done["num_nodes"] == 2
    assert sorted((s["name"], s["status"]) for s in done["steps"]) == [
        ("node-0", "Succeeded"),
        ("node-1", "Succeeded"),
    ]

    # The logs the SDK reads are the Pods' own: each rank got [1, 1] + [2, 4] from rank 0, reached at the
    # master address the Torch plugin set (node 0's Pod under the JobSet's headless Service).
    master = f"{name}-{constants.NODE}-0-0.{name}:{constants.CONTAINER_TRAINER_PORT}"
    for rank in range(2):
        assert kind_sdk.call(namespace, "get_job_logs", name=name, step=f"node-{rank}") == [
            f"allreduce: rank {rank} of 2 via {master}: sum [3, 5]"
        ]

    assert kind_sdk.call(namespace, "delete_job", name=name) is None
    assert_gone(e2e_cluster, namespace, name, eventually)


# Progress from a pod (test/e2e/workload/progress.py): what it reports, as the SDK's in-pod helper sends it.
PROGRESS_REPORTED = {
    "progressPercentage": 42,
    "estimatedRemainingSeconds": 120,
    "metrics": [{"name": "loss", "value": "0.125"}, {"name": "accuracy", "value": "0.95"}],
}
STATUS_FIELD_MANAGER = "trainer-status"
"""The field manager of the status server's writes (controller/trainer/statusserver)."""


def require_trainjob_status_gate(e2e_cluster: Any) -> None:
    """Fail (the Helm install) or skip (another) unless the installed manager has the TrainJobStatus gate."""
    client = Client.load(str(e2e_cluster.kubeconfig), user_agent="test_kubeflow_sdk")
    try:
        installed = paths.installed_manager(client)
        on = paths.feature_gate_on(client, "TrainJobStatus")
    finally:
        client.close()
    if on:
        return
    message = f"the installed manager ({installed.image}) runs without the TrainJobStatus feature gate"
    if os.environ.get("E2E_INSTALL") == "helm":
        pytest.fail(f"{message}, which hack/e2e-setup-kind.sh's Helm install turns on", pytrace=False)
    pytest.skip(f"{message}: the Helm install of hack/e2e-setup-kind.sh turns it on")


def wait_complete(sdk: SdkDriver, e2e_cluster: Any, namespace: str, name: str) -> dict[str, Any]:
    try:
        done: dict[str, Any] = sdk.call(
            namespace, "wait_for_job_status", name=name, status=["Complete"], timeout=240, answer_within=300.0
        )
    except SdkCallError as exc:
        pods = e2e_cluster.core.list_namespaced_pod(namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}")
        logs = {
            p.metadata.name: e2e_cluster.core.read_namespaced_pod_log(p.metadata.name, namespace)
            for p in pods.items
            if p.status.phase in {"Succeeded", "Failed"}
        }
        pytest.fail(f"{exc}; logs of the ended pods: {logs}", pytrace=False)
    return done


def test_on_kind_a_pod_reports_progress_the_sdk_reads_and_another_trainjobs_pod_or_no_token_is_refused(
    kind_sdk: SdkDriver, namespace: str, e2e_cluster: Any, eventually: Callable[..., Any]
) -> None:
    require_trainjob_status_gate(e2e_cluster)
    image = workload_image()
    # One node runs progress.py, with only what the TrainJobStatus plugin gave it; a refused report fails
    # the Pod at once (no restarts), so the TrainJob fails instead of completing.
    runtime = allreduce.allreduce_runtime(
        "sdk-progress",
        "trainer-e2e/not-this-one:0",
        command=["python3", "progress.py"],
        num_nodes=1,
        labels={"trainer.kubeflow.org/framework": "torch"},
    )
    job = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    job["backoffLimit"] = 0
    job["template"]["spec"]["restartPolicy"] = "Never"
    e2e_cluster.custom.create_namespaced_custom_object(
        constants.GROUP, constants.VERSION, namespace, "trainingruntimes", runtime
    )

    name = "sdk-progress"
    train: dict[str, Any] = {"runtime": "sdk-progress", "image": image, "num_nodes": 1}
    assert kind_sdk.call(namespace, "train_container", name=name, **train) == name
    created = read_trainjob(e2e_cluster, namespace, name)
    assert "trainerStatus" not in created.get("status", {}), created["status"]

    done = wait_complete(kind_sdk, e2e_cluster, namespace, name)
    assert [(s["name"], s["status"]) for s in done["steps"]] == [("node-0", "Succeeded")]
    assert kind_sdk.call(namespace, "get_job_logs", name=name, step="node-0") == ["progress: report: 200"]

    # status.trainerStatus changed, written by the status server (its field manager, on the subresource),
    # and the SDK reads it back.
    stored = read_trainjob(e2e_cluster, namespace, name)
    status = stored["status"]["trainerStatus"]
    assert {k: v for k, v in status.items() if k != "lastUpdatedTime"} == PROGRESS_REPORTED, status
    writers = {
        (m["manager"], m["operation"], m.get("subresource"))
        for m in stored["metadata"]["managedFields"]
        if "f:trainerStatus" in m.get("fieldsV1", {}).get("f:status", {})
    }
    assert writers == {(STATUS_FIELD_MANAGER, "Apply", "status")}, writers
    read_back = kind_sdk.call(namespace, "get_trainer_status", name=name)
    assert {k: v for k, v in read_back.items() if k != "lastUpdatedTime"} == PROGRESS_REPORTED, read_back
    assert read_back["lastUpdatedTime"].replace("+00:00", "Z") == status["lastUpdatedTime"], read_back

    # A pod of another TrainJob of the namespace (its token's audience is its own TrainJob) posts to this
    # TrainJob's address, and without a token to its own: both refused; its own report, with its own token,
    # is accepted (so the refusals are not a broken server's).
    other = "sdk-progress-other"
    assert (
        kind_sdk.call(namespace, "train_container", name=other, env={"PROGRESS_REFUSALS": name}, **train)
        == other
    )
    wait_complete(kind_sdk, e2e_cluster, namespace, other)
    assert kind_sdk.call(namespace, "get_job_logs", name=other, step="node-0") == [
        "progress: own: 200",
        "progress: other: 403",
        "progress: no-token: 403",
    ]
    assert read_trainjob(e2e_cluster, namespace, name)["status"]["trainerStatus"] == status
    other_status = kind_sdk.call(namespace, "get_trainer_status", name=other)
    assert {k: v for k, v in other_status.items() if k != "lastUpdatedTime"} == PROGRESS_REPORTED

    for trainjob in (name, other):
        assert kind_sdk.call(namespace, "delete_job", name=trainjob) is None
        assert_gone(e2e_cluster, namespace, trainjob, eventually)
