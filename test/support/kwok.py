"""The Tier 2 local cluster: a real Kubernetes control plane on fake (kwok) nodes, with JobSet on the host.

``hack/cluster.py up|down|env`` (``make cluster-up``, ``make cluster-down``, ``make cluster-env``) and the e2e
fixture (``test/e2e/conftest.py``, which calls :func:`up` and :func:`down` itself) use this module.

What :func:`up` starts, every listener on 127.0.0.1:

- ``kwokctl create cluster --runtime binary`` with the binaries ``hack/build-binaries.sh`` built: etcd,
  kube-apiserver, kube-controller-manager (Jobs create Pods, the garbage collector deletes dependants),
  kube-scheduler and kwok-controller, all host processes under ``$KWOK_WORKDIR/clusters/<name>``.
  ``$KWOK_WORKDIR`` is ``<cache>/kwok`` with ``<cache>`` as in build-binaries.sh.
- N Node objects (default 4) that kwok-controller keeps Ready: InternalIP 127.0.0.1, 32 cpu, 256Gi, 110
  pods and 8 ``nvidia.com/gpu`` each, no taints.
- The Stages in ``hack/kwok/stages/``, which replace kwok's defaults: a scheduled pod turns Running after
  the start delay and, if a Job owns it, Succeeded after the run time; a pod labelled
  ``pod-container-running-failed.stage.kwok.x-k8s.io`` turns Failed instead. Both delays have a global
  default (``--pod-start-delay``, ``--pod-run-time``) and a per-pod annotation (see the stage files and
  docs/development.md).
- The JobSet CRD and webhook manifests, read from the Go module cache (``support.thirdparty``), and the
  JobSet controller as a host process (``support.jobset``).

Go origin: none as code. The recipe is kwokctl's binary runtime (kwok ``pkg/kwokctl/runtime/binary``) plus
JobSet's minimal install (``config/components/{crd,webhook}``) rewired for a controller outside the
cluster; docs/development.md describes it for users.

Guarantees:

- No downloads: every binary is a local path, and before each start ``kwokctl --dry-run`` must list no
  ``http(s)`` source (:func:`check_no_downloads`).
- ``up`` is idempotent: a healthy cluster of that name is reused; a stale or broken one is removed first.
  A failed ``up`` copies the component logs to ``<cache>/kwok/failed/<name>/``, names the log tails in its
  error, and tears down what it started.
- ``down`` is idempotent and leaves no process behind: it stops the manager, Kueue and JobSet, runs
  ``kwokctl delete cluster``, then terminates any process whose command line still names the cluster's
  directories, and removes them.
- State (pids, ports, kubeconfig path) is written to ``<cache>/kwok/trainer/<name>/state.json``, so ``down``,
  ``env`` and the demo work from any process.
- Errors a user can act on (binaries missing, a component that died, a timeout) raise
  :class:`~support.process.ClusterError` with the relevant log tail.

Deliberately missing: containers (images are never pulled, commands never run; pod status is whatever the
stages write), kube-proxy, CNI, cluster DNS, Services that route, metrics-server, and JobSet's metrics
endpoint; every container's log is the same fixed text (:data:`CONTAINER_LOG_LINES`). Leader election for
JobSet is off: there is exactly one replica. Linux only for the leftover-process sweep (it reads
``/proc``); elsewhere ``down`` relies on kwokctl and the JobSet pid.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from controller.envtest.binaries import cache_directory
from support import jobset, thirdparty
from support.jobset import JOBSET_CRD
from support.process import (
    HAVE_PROC,
    PORT_RACE,
    ClusterError,
    cmdline,
    names_directory,
    pid_alive,
    processes_using,
    run,
    say,
    tail,
    tail_file,
    terminate,
    wait_for,
    write_yaml,
)

REPO = Path(__file__).resolve().parents[2]

BUILD_SCRIPT = REPO / "hack" / "build-binaries.sh"
KWOK_DIR = REPO / "hack" / "kwok"
STAGES_DIR = KWOK_DIR / "stages"

DEFAULT_NAME = "trainer-e2e"
"""The cluster ``make cluster-up``/``make demo`` manage. The e2e fixture uses its own name."""

FAIL_LABEL = "pod-container-running-failed.stage.kwok.x-k8s.io"
"""Label that makes a pod fail (pod-fail stage); annotations ``FAIL_LABEL + "/exit-code"`` etc. tune it."""
RUN_TIME_ANNOTATION = "pod-complete.stage.kwok.x-k8s.io/delay"
START_DELAY_ANNOTATION = "pod-ready.stage.kwok.x-k8s.io/delay"
NODE_NAME_PREFIX = "kwok-node-"

# Stage name → the ClusterOptions field whose value becomes its default delay.
_STAGE_DELAY_OPTION = {
    "pod-ready": "pod_start_delay",
    "pod-complete": "pod_run_time",
    "pod-fail": "pod_run_time",
}


# ------------------------------------------------------------------------------------------------ locations


def kwok_workdir() -> Path:
    """``$KWOK_WORKDIR`` for every kwokctl call: kwokctl keeps clusters in ``<this>/clusters/<name>``."""
    return cache_directory() / "kwok"


def cluster_dir(name: str) -> Path:
    """kwokctl's directory for cluster ``name``: pids/, logs/, pki/, etcd/, kubeconfig.yaml, kwok.yaml."""
    return kwok_workdir() / "clusters" / name


def own_dir(name: str) -> Path:
    """Our directory for cluster ``name``: state.json, rendered configuration, JobSet config, certs, log."""
    return kwok_workdir() / "trainer" / name


def state_path(name: str) -> Path:
    return own_dir(name) / "state.json"


# ------------------------------------------------------------------------------------------------- binaries


@dataclass(frozen=True, slots=True, kw_only=True)
class Binaries:
    """Every executable the cluster runs, from ``hack/build-binaries.sh --print``."""

    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kubectl: Path
    etcd: Path
    kwok: Path
    kwokctl: Path
    jobset: Path

    def missing(self) -> list[Path]:
        return [p for p in dataclasses.astuple(self) if not (p.is_file() and os.access(p, os.X_OK))]


def binary_dirs() -> dict[str, Path]:
    """The bin directories build-binaries.sh uses: ``KUBERNETES_BIN``, ``ETCD_BIN``, ``KWOK_BIN``, ..."""
    out = run(["bash", str(BUILD_SCRIPT), "--print"], what="hack/build-binaries.sh --print")
    dirs = {}
    for line in out.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            dirs[key.strip()] = Path(value.strip())
    return dirs


def locate_binaries() -> Binaries:
    """The binaries of this checkout's pinned versions; raise ClusterError naming any that are missing."""
    d = binary_dirs()
    try:
        k8s, etcd, kwok, jobset = d["KUBERNETES_BIN"], d["ETCD_BIN"], d["KWOK_BIN"], d["JOBSET_BIN"]
    except KeyError as exc:
        raise ClusterError(f"hack/build-binaries.sh --print did not name {exc.args[0]}") from exc
    binaries = Binaries(
        kube_apiserver=k8s / "kube-apiserver",
        kube_controller_manager=k8s / "kube-controller-manager",
        kube_scheduler=k8s / "kube-scheduler",
        kubectl=k8s / "kubectl",
        etcd=etcd / "etcd",
        kwok=kwok / "kwok",
        kwokctl=kwok / "kwokctl",
        jobset=jobset / "jobset",
    )
    missing = binaries.missing()
    if missing:
        listed = "\n  ".join(str(p) for p in missing)
        raise ClusterError(
            f"control-plane binaries are missing:\n  {listed}\n"
            "build them with `make binaries` (or `bash hack/build-binaries.sh`; about 10 minutes cold, "
            "needs Go >= 1.26 and the Go module proxy; see docs/development.md)"
        )
    return binaries


def build_binaries() -> Binaries:
    """Run hack/build-binaries.sh (builds only what is missing) and return the binaries."""
    if shutil.which("go") is None:
        raise ClusterError(
            "Go is not installed: the Tier 2 binaries are built from Go modules (docs/development.md)"
        )
    result = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise ClusterError(f"hack/build-binaries.sh failed:\n{tail(result.stderr, 30)}")
    return locate_binaries()


def versions() -> dict[str, str]:
    """The pinned versions in hack/versions.env (``KUBERNETES_VERSION``, ``ETCD_VERSION``, ...)."""
    return dict(thirdparty.read_versions())


def jobset_manifests() -> tuple[Path, Path]:
    """(the JobSet module's directory in the Go module cache, its CRD file), via ``support.thirdparty``."""
    try:
        crd = thirdparty.jobset_crd()
        module = thirdparty.module_dir(thirdparty.JOBSET.module, versions()[thirdparty.JOBSET.version_key])
    except thirdparty.ThirdPartyError as exc:
        raise ClusterError(f"cannot read the JobSet manifests from the Go module cache: {exc}") from exc
    return module, crd


def scheduler_plugins_podgroup_crd() -> Path:
    """The scheduler-plugins PodGroup CRD (``scheduling.x-k8s.io``; CoScheduling) from the Go module cache."""
    try:
        return Path(thirdparty.scheduler_plugins_podgroup_crd())
    except thirdparty.ThirdPartyError as exc:
        raise ClusterError(f"cannot read the PodGroup CRD from the Go module cache: {exc}") from exc


# ---------------------------------------------------------------------------------------- options and state


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterOptions:
    """What ``up`` builds. Durations are seconds."""

    name: str = DEFAULT_NAME
    nodes: int = 4
    node_cpu: str = "32"
    node_memory: str = "256Gi"
    node_pods: str = "110"
    node_gpus: str = "8"
    pod_start_delay: float = 1.0
    """Pending → Running, unless its annotation ``pod-ready.stage.kwok.x-k8s.io/delay`` says otherwise."""
    pod_run_time: float = 2.0
    """Running → Succeeded (or Failed), unless the pod's stage annotation says otherwise."""
    timeout: float = 180.0
    """Upper bound for each wait during ``up`` (the control plane, nodes, CRD, JobSet)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterState:
    """What ``up`` started; written to :func:`state_path` as JSON."""

    name: str
    kubeconfig: str
    server: str
    cluster_dir: str
    own_dir: str
    nodes: tuple[str, ...]
    jobset_pid: int
    jobset_binary: str
    jobset_health_port: int
    jobset_webhook_port: int
    jobset_log: str
    kubectl: str
    started_at: float
    """Unix time at which ``up`` finished."""
    start_seconds: float
    """How long ``up`` took, from the first kwokctl call to JobSet's webhooks admitting requests."""

    def write(self) -> None:
        path = Path(self.own_dir) / "state.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(dataclasses.asdict(self), indent=2) + "\n")
        tmp.replace(path)

    @classmethod
    def read(cls, name: str) -> ClusterState | None:
        path = state_path(name)
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise ClusterError(f"cannot read {path}: {exc}; remove it or run `hack/cluster.py down`") from exc
        known = {f.name for f in dataclasses.fields(cls)}
        fields = {k: v for k, v in raw.items() if k in known}
        fields["nodes"] = tuple(fields.get("nodes", ()))
        try:
            return cls(**fields)
        except TypeError as exc:
            raise ClusterError(
                f"{path} is from another version of this script; run `hack/cluster.py down`"
            ) from exc

    def kubectl_runner(self) -> Kubectl:
        return Kubectl(Path(self.kubectl), Path(self.kubeconfig))


# -------------------------------------------------------------------------------------------------- kubectl


@dataclass(frozen=True, slots=True)
class Kubectl:
    """Our kubectl against one kubeconfig."""

    binary: Path
    kubeconfig: Path

    def __call__(
        self, *args: str, stdin: str | None = None, timeout: float = 60.0, check: bool = True
    ) -> str:
        argv = [str(self.binary), f"--kubeconfig={self.kubeconfig}", *args]
        return run(argv, what=f"kubectl {' '.join(args[:3])}", stdin=stdin, timeout=timeout, check=check)

    def ok(self, *args: str, timeout: float = 15.0) -> bool:
        argv = [str(self.binary), f"--kubeconfig={self.kubeconfig}", *args]
        try:
            result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return False
        return result.returncode == 0

    def get_json(self, *args: str) -> dict[str, Any]:
        return dict(json.loads(self("get", *args, "-o", "json")))

    def apply(
        self, objects: Sequence[Mapping[str, Any]] | Path, *, field_manager: str = "trainer-e2e"
    ) -> None:
        """Server-side apply (the JobSet CRD is too large for a client-side apply annotation)."""
        args = ["apply", "--server-side", "--force-conflicts", f"--field-manager={field_manager}"]
        if isinstance(objects, Path):
            self(*args, "-f", str(objects))
        else:
            self(
                *args,
                "-f",
                "-",
                stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}),
            )


# --------------------------------------------------------------------------------------- kwok configuration


def kwokctl_configuration(binaries: Binaries) -> dict[str, Any]:
    """hack/kwok/kwokctl.yaml with this machine's binary paths and the pinned versions filled in."""
    config = yaml.safe_load((KWOK_DIR / "kwokctl.yaml").read_text())
    v = versions()
    config["options"].update(
        kubeVersion=v["KUBERNETES_VERSION"],
        etcdVersion=v["ETCD_VERSION"].removeprefix("v"),
        kubeApiserverBinary=str(binaries.kube_apiserver),
        kubeControllerManagerBinary=str(binaries.kube_controller_manager),
        kubeSchedulerBinary=str(binaries.kube_scheduler),
        kubectlBinary=str(binaries.kubectl),
        etcdBinary=str(binaries.etcd),
        kwokControllerBinary=str(binaries.kwok),
    )
    return dict(config)


def stages(options: ClusterOptions) -> list[dict[str, Any]]:
    """The Stage objects from hack/kwok/stages/, with the global pod delays of ``options`` applied."""
    out = []
    for path in sorted(STAGES_DIR.glob("*.yaml")):
        for stage in yaml.safe_load_all(path.read_text()):
            if not stage:
                continue
            option = _STAGE_DELAY_OPTION.get(stage["metadata"]["name"])
            if option is not None:
                stage["spec"].setdefault("delay", {})["durationMilliseconds"] = round(
                    getattr(options, option) * 1000
                )
            out.append(stage)
    if not out:
        raise ClusterError(f"no Stage files in {STAGES_DIR}")
    return out


CONTAINER_LOG_LINES = (
    "kwok: no container runs on a kwok node; kwok-controller serves this file as every container's log",
    "kwok: (hack/cluster.py writes it and the ClusterLogs object that names it)",
)
"""What ``pods/log`` returns for every container of every pod (kubectl logs, the Kubeflow SDK)."""


def container_logs(directory: Path) -> dict[str, Any]:
    """Write the container log file into ``directory`` and return the ClusterLogs object that serves it.

    kwok-controller answers the kubelet's ``containerLogs`` endpoint from a file named by a ``ClusterLogs``
    (kwok ``pkg/kwok/server/debugging_logs.go``), read as a CRI log (``<RFC 3339 time> stdout F <line>``).
    kube-apiserver reaches it through the node's kubelet endpoint, 127.0.0.1 and kwok-controller's port
    (hack/kwok/kwokctl.yaml makes it dial the InternalIP).
    """
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", time.gmtime())
    log = directory / "container.log"
    log.write_text("".join(f"{stamp} stdout F {line}\n" for line in CONTAINER_LOG_LINES))
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "ClusterLogs",
        "metadata": {"name": "container-logs"},
        # No selector and no container names: every container of every pod.
        "spec": {"logs": [{"logsFile": str(log)}]},
    }


def _kwokctl_env() -> dict[str, str]:
    """The environment for kwokctl: ours, minus any KWOK_* setting that would override the config file."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KWOK_")}
    env["KWOK_WORKDIR"] = str(kwok_workdir())
    return env


def _kwokctl_create_args(binaries: Binaries, name: str, configs: Sequence[Path]) -> list[str]:
    args = [str(binaries.kwokctl), "create", "cluster", f"--name={name}", "--kubeconfig="]
    for c in configs:
        args += ["--config", str(c)]
    return args


def check_no_downloads(binaries: Binaries, name: str, configs: Sequence[Path]) -> None:
    """Raise ClusterError if ``kwokctl --dry-run create cluster`` would fetch anything from the network."""
    argv = _kwokctl_create_args(binaries, name, configs)
    out = run([argv[0], "--dry-run", *argv[1:]], what="kwokctl --dry-run create cluster", env=_kwokctl_env())
    sources = re.findall(r"^# Download (\S+) to ", out, flags=re.MULTILINE)
    remote = [s for s in sources if "://" in s]
    if remote or not sources:
        raise ClusterError(
            "kwokctl would download instead of using the local binaries:\n  "
            + ("\n  ".join(remote) if remote else "(dry run listed no binaries at all)")
        )


# ---------------------------------------------------------------------------------------------------- nodes


def node_manifests(options: ClusterOptions) -> list[dict[str, Any]]:
    """N Node objects for kwok to manage: loopback address, room for tests, GPUs, no taints."""
    resources = {
        "cpu": options.node_cpu,
        "memory": options.node_memory,
        "pods": options.node_pods,
        "nvidia.com/gpu": options.node_gpus,
    }
    nodes = []
    for i in range(options.nodes):
        name = f"{NODE_NAME_PREFIX}{i}"
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {
                        "kubernetes.io/hostname": name,
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64",
                        "type": "kwok",
                    },
                    # Marks the node as fake for people and tools; kwok-controller manages all nodes anyway.
                    "annotations": {"kwok.x-k8s.io/node": "fake"},
                },
                "spec": {"podCIDR": f"10.244.{i}.0/24", "podCIDRs": [f"10.244.{i}.0/24"]},
                "status": {
                    "addresses": [
                        {"type": "InternalIP", "address": "127.0.0.1"},
                        {"type": "Hostname", "address": name},
                    ],
                    "allocatable": resources,
                    "capacity": resources,
                },
            }
        )
    return nodes


def _crd_established(kubectl: Kubectl, name: str) -> bool:
    # Not `kubectl wait`: it errors out instead of waiting while the CRD has no conditions yet.
    try:
        crd = kubectl.get_json(f"crd/{name}")
    except ClusterError:
        return False
    conditions = crd.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def _nodes_ready(kubectl: Kubectl, names: Sequence[str]) -> bool:
    try:
        listed = kubectl.get_json("nodes")
    except ClusterError:
        return False
    ready = {
        n["metadata"]["name"]
        for n in listed.get("items", [])
        if any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in n.get("status", {}).get("conditions", [])
        )
    }
    return set(names) <= ready


def component_pids(name: str) -> dict[str, int]:
    pids = {}
    for pid_file in sorted((cluster_dir(name) / "pids").glob("*.pid")):
        with contextlib.suppress(OSError, ValueError):
            pids[pid_file.stem] = int(pid_file.read_text().strip())
    return pids


def _component_log_tails(name: str, components: Sequence[str] = (), lines: int = 10) -> str:
    """The last lines of each component's log (of ``components`` only, if given)."""
    parts = []
    for log in sorted((cluster_dir(name) / "logs").glob("*.log")):
        if not components or log.stem in components:
            parts.append(f"--- {log}\n{tail_file(log, lines)}")
    return "\n".join(parts)


def _dead_components(name: str) -> list[str]:
    return [c for c, pid in component_pids(name).items() if not pid_alive(pid)]


def _keep_failure_logs(name: str) -> Path:
    target = kwok_workdir() / "failed" / name
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True, exist_ok=True)
    for source in (cluster_dir(name) / "logs", own_dir(name) / "jobset"):
        if source.is_dir():
            for log in source.glob("*.log"):
                shutil.copy2(log, target / log.name)
    return target


def is_healthy(state: ClusterState) -> bool:
    """All components and JobSet are running and the API server is ready."""
    if _dead_components(state.name) or not pid_alive(state.jobset_pid):
        return False
    if not jobset.ready(state.jobset_health_port):
        return False
    return state.kubectl_runner().ok("get", "--raw=/readyz")


def _create_kwok_cluster(binaries: Binaries, options: ClusterOptions, configs: Sequence[Path]) -> None:
    """``kwokctl create cluster``, retried after a port race; ClusterError with the log tails on failure."""
    for attempt in range(1, 4):
        argv = [*_kwokctl_create_args(binaries, options.name, configs), f"--timeout={int(options.timeout)}s"]
        result = subprocess.run(argv, env=_kwokctl_env(), capture_output=True, text=True, check=False)
        dead = _dead_components(options.name)
        if result.returncode == 0 and not dead:
            return
        logs = _component_log_tails(options.name, dead)  # the dead ones' logs, or all if none died
        detail = _kwokctl_errors(result.stderr) + ("\n" + logs if logs else "")
        _run_kwokctl_delete(binaries, options.name)
        if attempt < 3 and PORT_RACE.search(detail):
            say(f"a component lost a port race (attempt {attempt}); recreating the cluster")
            continue
        what = f"components exited: {', '.join(dead)}" if dead else f"exit {result.returncode}"
        raise ClusterError(f"kwokctl create cluster failed ({what}):\n{detail}")


def _kwokctl_errors(stderr: str) -> str:
    """kwokctl logs JSON lines; keep the error ones as ``message: error`` (other output as it is)."""
    out = []
    for line in stderr.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        if isinstance(record, dict) and record.get("level") == "ERROR":
            out.append(f"{record.get('msg', '')}: {record.get('err', '')}".strip())
    return tail("\n".join(dict.fromkeys(out)))  # kwokctl repeats the final error; keep each once


def _run_kwokctl_delete(binaries: Binaries | None, name: str) -> None:
    if binaries is None or not binaries.kwokctl.is_file() or not cluster_dir(name).is_dir():
        return
    # --kubeconfig names the file to remove the cluster's context from; the default is ~/.kube/config and
    # an empty value is an error, so name the cluster's own kubeconfig, which the delete removes anyway.
    argv = [
        str(binaries.kwokctl),
        "delete",
        "cluster",
        f"--name={name}",
        f"--kubeconfig={cluster_dir(name) / 'kubeconfig.yaml'}",
    ]
    try:
        result = subprocess.run(
            argv, env=_kwokctl_env(), capture_output=True, text=True, check=False, timeout=120
        )
    except subprocess.TimeoutExpired:
        say("kwokctl delete cluster hung; killing the remaining processes")
        return
    if result.returncode != 0:
        say(f"kwokctl delete cluster failed; killing the remaining processes:\n{tail(result.stderr, 5)}")


def up(options: ClusterOptions | None = None, *, binaries: Binaries | None = None) -> ClusterState:
    """Bring the cluster up (or reuse a healthy one of the same name) and return its state."""
    options = options or ClusterOptions()
    existing = ClusterState.read(options.name)
    if existing is not None and is_healthy(existing):
        say(f"cluster {options.name!r} is already up")
        return existing
    binaries = binaries or locate_binaries()
    if existing is not None or cluster_dir(options.name).exists() or own_dir(options.name).exists():
        say(f"removing the stale cluster {options.name!r} first")
        down(options.name, binaries=binaries)
    started = time.monotonic()
    try:
        return _up(options, binaries, started)
    except BaseException as exc:
        if isinstance(exc, ClusterError):
            kept = _keep_failure_logs(options.name)
            exc.args = (f"{exc.args[0]}\n(logs kept in {kept})",)
        say(f"bring-up of {options.name!r} failed; tearing down what was started")
        down(options.name, binaries=binaries)
        raise


def _up(options: ClusterOptions, binaries: Binaries, started: float) -> ClusterState:
    name = options.name
    directory = own_dir(name)
    directory.mkdir(parents=True, exist_ok=True)
    configs = [
        write_yaml(directory / "kwokctl.yaml", [kwokctl_configuration(binaries)]),
        write_yaml(directory / "stages.yaml", stages(options)),
        write_yaml(directory / "logs.yaml", [container_logs(directory)]),
    ]
    check_no_downloads(binaries, name, configs)
    module_dir, crd = jobset_manifests()  # fail before starting anything if the manifests are unreadable

    say(f"starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok-controller ({name})")
    _create_kwok_cluster(binaries, options, configs)
    kubeconfig = cluster_dir(name) / "kubeconfig.yaml"
    kubectl = Kubectl(binaries.kubectl, kubeconfig)
    wait_for(
        lambda: kubectl.ok("get", "--raw=/readyz"),
        timeout=options.timeout,
        what="kube-apiserver /readyz",
        explain=lambda: _component_log_tails(name),
    )

    say(f"creating {options.nodes} kwok nodes and installing the JobSet CRD")
    nodes = node_manifests(options)
    node_names = [n["metadata"]["name"] for n in nodes]
    kubectl.apply(nodes)
    kubectl.apply(crd)
    wait_for(
        lambda: _nodes_ready(kubectl, node_names),
        timeout=options.timeout,
        what="kwok nodes Ready",
        explain=lambda: tail_file(cluster_dir(name) / "logs" / "kwok-controller.log"),
    )
    wait_for(
        lambda: _crd_established(kubectl, JOBSET_CRD),
        timeout=options.timeout,
        what=f"{JOBSET_CRD} Established",
    )

    say("starting the JobSet controller on the host")
    started_jobset = jobset.start(binaries.jobset, kubeconfig, directory, options.timeout)
    kubectl.apply(
        jobset.webhook_configurations(
            module_dir, port=started_jobset.webhook_port, ca_bundle=started_jobset.ca_pem
        )
    )
    wait_for(
        lambda: jobset.webhooks_serving(kubectl),
        timeout=options.timeout,
        what="JobSet webhooks to admit requests",
        explain=lambda: tail_file(started_jobset.log),
    )
    dead = _dead_components(name)
    if dead:
        raise ClusterError(
            f"components exited during start-up: {', '.join(dead)}\n{_component_log_tails(name, dead)}"
        )

    server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    state = ClusterState(
        name=name,
        kubeconfig=str(kubeconfig),
        server=server,
        cluster_dir=str(cluster_dir(name)),
        own_dir=str(directory),
        nodes=tuple(node_names),
        jobset_pid=started_jobset.pid,
        jobset_binary=str(binaries.jobset),
        jobset_health_port=started_jobset.health_port,
        jobset_webhook_port=started_jobset.webhook_port,
        jobset_log=str(started_jobset.log),
        kubectl=str(binaries.kubectl),
        started_at=time.time(),
        start_seconds=round(time.monotonic() - started, 1),
    )
    state.write()
    say(f"cluster {name!r} is up in {state.start_seconds:.1f} s; KUBECONFIG={kubeconfig}")
    return state


def _is_our_jobset(state: ClusterState) -> bool:
    """The recorded pid is still JobSet's: alive and naming our directory (pids get reused)."""
    if not pid_alive(state.jobset_pid):
        return False
    return not HAVE_PROC or names_directory(cmdline(state.jobset_pid), Path(state.own_dir))


def down(name: str = DEFAULT_NAME, *, binaries: Binaries | None = None) -> None:
    """Stop JobSet and every component of cluster ``name`` and remove its directories; idempotent."""
    state = None
    with contextlib.suppress(ClusterError):
        state = ClusterState.read(name)
    # The manager and Kueue of the cluster build on this module, so they are imported here, not at the top.
    from support import cluster_manager, kueue

    cluster_manager.stop_manager(name)
    kueue.stop_kueue(name)
    if state is not None and _is_our_jobset(state):
        terminate([state.jobset_pid])
    if binaries is None:
        with contextlib.suppress(ClusterError):
            binaries = locate_binaries()
    _run_kwokctl_delete(binaries, name)
    if HAVE_PROC:
        leftovers = processes_using(cluster_dir(name), own_dir(name))
    else:
        leftovers = [pid for pid in component_pids(name).values() if pid_alive(pid)]
    terminate(leftovers)
    shutil.rmtree(cluster_dir(name), ignore_errors=True)
    shutil.rmtree(own_dir(name), ignore_errors=True)


def env_lines(name: str = DEFAULT_NAME) -> list[str]:
    """The shell lines that point tools and test/e2e at the running cluster ``name``.

    ``PATH`` starts with the directory of the pinned kubectl, so ``kubectl`` is the one built for this
    cluster: a kubectl of the machine's own may be outside the version skew Kubernetes supports (±1 minor).
    """
    state = ClusterState.read(name)
    if state is None:
        raise ClusterError(f"cluster {name!r} is not up; start it with `make cluster-up`")
    kubectl_dir = shlex.quote(str(Path(state.kubectl).parent))
    return [
        f"export KUBECONFIG={shlex.quote(state.kubeconfig)}",
        f'export PATH={kubectl_dir}:"$PATH"',
        "export E2E_CLUSTER=kwok",
    ]
