"""The Tier 2 local cluster: a real Kubernetes control plane on fake (kwok) nodes, with JobSet on the host.

Usage: ``python hack/cluster.py up|down|env|demo|kueue-up|kueue-down`` (``make cluster-up``,
``make cluster-down``, ``make cluster-env``, ``make demo``; the Kueue commands have no make target).
``test/e2e/conftest.py`` imports this module and calls :func:`up` and :func:`down` itself.

What ``up`` starts, every listener on 127.0.0.1:

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
- The JobSet CRD and webhook manifests, read from the Go module cache (``hack/thirdparty.py``), and the
  JobSet controller (the ``jobset`` binary) as a host process: no leader election, metrics off, health
  probe and webhook server on free loopback ports, serving certificate from a throwaway CA
  (``controller.envtest.certs``), and URL-based webhook configurations pointing at it. The pod webhooks
  get the ``jobset.sigs.k8s.io/jobset-name Exists`` object selector that JobSet's kustomize patches add,
  so pods that are not JobSet's never depend on the JobSet process.

What ``demo`` adds on top: the Trainer CRDs and default ClusterTrainingRuntimes, server-side applied
(section "the Trainer API"); the real controller, ``trainer-controller-manager``, as a host process with the
shipped configuration and loopback bind addresses (section "the manager as a host process"); then the sample
TrainJob ``examples/trainjob-torch.yaml`` in namespace ``demo``, which the manager reconciles into a JobSet
that runs on the kwok nodes, while the demo prints its progress until it is Complete.

What ``kueue-up`` adds on top, on request only (neither ``up`` nor ``demo`` starts it; section "Kueue"):
Kueue's CRDs, read from the Go module cache, and the Kueue controller (the ``kueue`` binary) as a host
process with the TrainJob integration enabled, rewired the way JobSet is; its webhook configurations select
only Kueue's own kinds and TrainJobs labelled ``kueue.x-k8s.io/queue-name``. ``kueue-down`` stops it and
removes those configurations.

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
  ``env`` and ``demo`` work from any process.
- ``demo`` is idempotent too: it re-applies the API (unchanged objects stay unchanged), restarts the manager
  (so it runs the current code), and replaces the sample TrainJob and everything it owned.
- Errors a user can act on (binaries missing, a component that died, a timeout) raise :class:`ClusterError`
  with the relevant log tail; the command line prints them, and failed API requests, without a traceback.

Deliberately missing: containers (images are never pulled, commands never run; pod status is whatever the
stages write), kube-proxy, CNI, cluster DNS, Services that route, metrics-server, and JobSet's metrics
endpoint; every container's log is the same fixed text (:data:`CONTAINER_LOG_LINES`). Leader election for
JobSet is off: there is exactly one replica. Linux only for the leftover-process sweep (it reads
``/proc``); elsewhere ``down`` relies on kwokctl and the JobSet pid. The manager runs with the admin
kubeconfig and without its admission webhooks (they come with the installable manifests).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import dataclasses
import io
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import yaml
from cryptography import x509

from controller.client.client import Client
from controller.client.errors import AlreadyExists, ApiError, NoKindMatch, NotFound, TransportError
from controller.client.gvk import GVK
from controller.envtest.binaries import cache_directory
from controller.envtest.certs import CertificateAuthority
from controller.envtest.kubeconfig import write_kubeconfig
from controller.envtest.process import free_port
from controller.envtest.suite import load_script
from controller.trainer.config import parse_duration
from runtime.api import constants
from runtime.api.v1alpha1 import TrainJob
from runtime.api.views import TrainJobView
from runtime.render import BlockDumper, RenderError, load_documents

REPO = Path(__file__).resolve().parent.parent

BUILD_SCRIPT = REPO / "hack" / "build-binaries.sh"
KWOK_DIR = REPO / "hack" / "kwok"
STAGES_DIR = KWOK_DIR / "stages"

DEFAULT_NAME = "trainer-e2e"
"""The cluster ``make cluster-up``/``make demo`` manage. The e2e fixture uses its own name."""

JOBSET_GROUP = "jobset.x-k8s.io"
JOBSET_CRD = f"jobsets.{JOBSET_GROUP}"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
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
_HAVE_PROC = Path("/proc/self").exists()
_PORT_RACE = re.compile(r"address already in use|bind: address|failed to listen", re.IGNORECASE)


class ClusterError(Exception):
    """Something the user can act on went wrong; the message says what and where the logs are."""


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
    out = _run(["bash", str(BUILD_SCRIPT), "--print"], what="hack/build-binaries.sh --print")
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
        raise ClusterError(f"hack/build-binaries.sh failed:\n{_tail(result.stderr, 30)}")
    return locate_binaries()


def _thirdparty() -> ModuleType:
    """hack/thirdparty.py, imported by path (hack/ holds scripts, not a package); one copy per process."""
    try:  # the module name test/integration/conftest.py uses too
        return load_script(REPO / "hack" / "thirdparty.py", "_hack_thirdparty")
    except ImportError as exc:
        raise ClusterError(f"cannot import {REPO / 'hack' / 'thirdparty.py'}: {exc}") from exc


def versions() -> dict[str, str]:
    """The pinned versions in hack/versions.env (``KUBERNETES_VERSION``, ``ETCD_VERSION``, ...)."""
    thirdparty = _thirdparty()
    return dict(thirdparty.read_versions())


def jobset_manifests() -> tuple[Path, Path]:
    """(the JobSet module's directory in the Go module cache, its CRD file), via hack/thirdparty.py."""
    thirdparty = _thirdparty()
    try:
        crd = thirdparty.jobset_crd()
        module = thirdparty.module_dir(thirdparty.JOBSET.module, versions()[thirdparty.JOBSET.version_key])
    except thirdparty.ThirdPartyError as exc:
        raise ClusterError(f"cannot read the JobSet manifests from the Go module cache: {exc}") from exc
    return module, crd


def scheduler_plugins_podgroup_crd() -> Path:
    """The scheduler-plugins PodGroup CRD (``scheduling.x-k8s.io``; CoScheduling) from the Go module cache."""
    thirdparty = _thirdparty()
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


# ------------------------------------------------------------------------------------------------ processes


def _say(message: str) -> None:
    print(f"cluster: {message}", file=sys.stderr, flush=True)


def _tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _tail_file(path: Path, lines: int = 20) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            return _tail(f.read().decode("utf-8", "replace"), lines)
    except FileNotFoundError:
        return "(no log)"


def _run(
    argv: Sequence[str | os.PathLike[str]],
    *,
    what: str,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = 120.0,
    check: bool = True,
) -> str:
    """Run a command to completion; return stdout; raise ClusterError with its stderr tail on failure."""
    try:
        result = subprocess.run(
            [str(a) for a in argv],
            input=stdin,
            capture_output=True,
            text=True,
            env=None if env is None else dict(env),
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError as exc:
        raise ClusterError(f"{what}: {exc.filename} not found") from exc
    except subprocess.TimeoutExpired as exc:
        raise ClusterError(f"{what}: no answer within {timeout:.0f} s") from exc
    if check and result.returncode != 0:
        raise ClusterError(
            f"{what} failed (exit {result.returncode}):\n{_tail(result.stderr or result.stdout)}"
        )
    return result.stdout


def _pid_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as gone; our own zombie children are reaped here)."""
    if pid <= 0:
        return False
    with contextlib.suppress(ChildProcessError):
        reaped, _ = os.waitpid(pid, os.WNOHANG)
        if reaped == pid:
            return False
    if _HAVE_PROC:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            return False
        return state != "Z"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _names_directory(argv: Sequence[str], directory: Path) -> bool:
    """True if an argument is ``directory`` or a path inside it (``.../trainer-e2e-pytest`` is not in
    ``.../trainer-e2e``)."""
    inside, exact = f"{directory}{os.sep}", str(directory)
    return any(inside in arg or arg == exact or arg.endswith(f"={exact}") for arg in argv)


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def _terminate(pids: Sequence[int], *, grace: float = 10.0) -> None:
    """SIGTERM each pid, wait up to ``grace`` seconds, then SIGKILL what is left."""
    live = [p for p in pids if _pid_alive(p)]
    for pid in live:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while live and time.monotonic() < deadline:
        time.sleep(0.1)
        live = [p for p in live if _pid_alive(p)]
    for pid in live:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while live and time.monotonic() < deadline:
        time.sleep(0.05)
        live = [p for p in live if _pid_alive(p)]


def processes_using(*directories: Path) -> list[int]:
    """Pids of processes (other than this one) whose command line names one of ``directories``.

    Every process of a cluster has such an argument: kwokctl starts each component with its data,
    certificate and log paths inside the cluster directory, and JobSet gets its config file from
    :func:`own_dir`. Reads ``/proc``; returns nothing where there is none.
    """
    if not _HAVE_PROC:
        return []
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        argv = _cmdline(int(entry.name))
        if any(_names_directory(argv, d) for d in directories):
            found.append(int(entry.name))
    return sorted(found)


def wait_for(
    check: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    interval: float = 0.25,
    explain: Callable[[], str] | None = None,
) -> None:
    """Call ``check`` until it returns True; after ``timeout`` seconds raise ClusterError.

    ``explain`` is called only then, for text to add to the error (a log tail, say).
    """
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return
        if time.monotonic() > deadline:
            detail = f"\n{explain()}" if explain is not None else ""
            raise ClusterError(f"timed out after {timeout:.0f} s waiting for {what}{detail}")
        time.sleep(interval)


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
        return _run(argv, what=f"kubectl {' '.join(args[:3])}", stdin=stdin, timeout=timeout, check=check)

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


def _write_yaml(path: Path, documents: Sequence[Mapping[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.dump_all(documents, Dumper=BlockDumper, sort_keys=False))
    return path


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
    out = _run([argv[0], "--dry-run", *argv[1:]], what="kwokctl --dry-run create cluster", env=_kwokctl_env())
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


# --------------------------------------------------------------------------------------------------- JobSet


def jobset_webhook_configurations(module_dir: Path, *, port: int, ca_bundle: bytes) -> list[dict[str, Any]]:
    """JobSet's webhook configurations, rewired to a URL on 127.0.0.1.

    Read from ``config/components/webhook/`` in the module: the configurations and each webhook's path and
    rules from ``manifests.yaml``, object selectors from the kustomize patches (``patches/*.yaml``). Names
    get kustomize's ``jobset-`` prefix, as in a release install. A pod webhook that no patch gives a
    selector still gets ``jobset.sigs.k8s.io/jobset-name Exists``.
    """
    webhook_dir = module_dir / "config" / "components" / "webhook"
    manifests = [d for d in yaml.safe_load_all((webhook_dir / "manifests.yaml").read_text()) if d]
    selectors: dict[str, Any] = {}
    for patch_file in sorted((webhook_dir / "patches").glob("*.yaml")):
        for op in yaml.safe_load(patch_file.read_text()) or []:
            value = op.get("value") if isinstance(op, dict) else None
            if isinstance(value, dict) and value.get("name") and value.get("objectSelector"):
                selectors[value["name"]] = value["objectSelector"]
    default_pod_selector = {"matchExpressions": [{"key": JOBSET_NAME_LABEL, "operator": "Exists"}]}
    bundle = base64.b64encode(ca_bundle).decode()
    out = []
    for doc in manifests:
        if doc.get("kind") not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            continue
        webhooks = []
        for original in doc.get("webhooks", []):
            path = original["clientConfig"]["service"]["path"]
            hook = {
                **original,
                "clientConfig": {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle},
            }
            if hook["name"] in selectors:
                hook["objectSelector"] = selectors[hook["name"]]
            elif any("pods" in rule.get("resources", []) for rule in hook.get("rules", [])):
                hook["objectSelector"] = default_pod_selector
            hook.setdefault("timeoutSeconds", 10)
            webhooks.append(hook)
        out.append(
            {
                "apiVersion": doc["apiVersion"],
                "kind": doc["kind"],
                "metadata": {"name": f"jobset-{doc['metadata']['name']}"},
                "webhooks": webhooks,
            }
        )
    if not out:
        raise ClusterError(f"no webhook configurations in {webhook_dir / 'manifests.yaml'}")
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class _JobSetProcess:
    pid: int
    health_port: int
    webhook_port: int
    ca_pem: bytes
    log: Path


def _jobset_ready(health_port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{health_port}/readyz", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _start_jobset(binaries: Binaries, kubeconfig: Path, directory: Path, timeout: float) -> _JobSetProcess:
    """Start the JobSet controller on the host and wait for its /readyz; retry when a port was taken."""
    jobset_dir = directory / "jobset"
    cert_dir = jobset_dir / "certs"
    ca = CertificateAuthority.new("trainer-e2e-jobset-webhook-ca")
    ca_path = jobset_dir / "ca.crt"
    ca.issue_serving(["127.0.0.1", "localhost"]).write(cert_dir, "tls.crt", "tls.key")
    ca_path.write_bytes(ca.cert_pem)
    log = jobset_dir / "jobset.log"
    for attempt in range(1, 4):
        health, webhook = free_port(), free_port()
        config = {
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
            "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"host": "127.0.0.1", "port": webhook, "certDir": str(cert_dir)},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
            "metrics": {"bindAddress": "0"},
        }
        config_path = _write_yaml(jobset_dir / "config.yaml", [config])
        argv = [
            str(binaries.jobset),
            f"--kubeconfig={kubeconfig}",
            f"--config={config_path}",
            "--leader-elect=false",
            "--metrics-bind-address=0",
            f"--health-probe-bind-address=127.0.0.1:{health}",
        ]
        with log.open("ab") as out:
            out.write(f"\n--- start attempt {attempt}: {' '.join(argv)}\n".encode())
            out.flush()
            # A session of its own: the controller outlives `hack/cluster.py up`, and a Ctrl-C in the
            # terminal that ran `up` does not reach it (`down` stops it).
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline and not _jobset_ready(health):
            time.sleep(0.2)
        if proc.poll() is None and _jobset_ready(health):
            return _JobSetProcess(
                pid=proc.pid, health_port=health, webhook_port=webhook, ca_pem=ca.cert_pem, log=log
            )
        if proc.poll() is None:
            _terminate([proc.pid])
            raise ClusterError(f"JobSet was not ready within {timeout:.0f} s; {log}:\n{_tail_file(log)}")
        tail = _tail_file(log)
        if not _PORT_RACE.search(tail):
            raise ClusterError(f"JobSet exited with code {proc.returncode}; {log}:\n{tail}")
        _say(f"JobSet lost a port race (attempt {attempt}); retrying with new ports")
    raise ClusterError(f"JobSet could not bind its ports in 3 attempts; {log}:\n{_tail_file(log)}")


_PROBE_JOBSET = {
    "apiVersion": f"{JOBSET_GROUP}/v1alpha2",
    "kind": "JobSet",
    "metadata": {"name": "webhook-probe", "namespace": "default"},
    "spec": {
        "replicatedJobs": [
            {
                "name": "probe",
                "template": {
                    "spec": {
                        "template": {
                            "spec": {"containers": [{"name": "c", "image": "registry.invalid/none"}]}
                        }
                    }
                },
            }
        ]
    },
}


def _webhooks_serving(kubectl: Kubectl) -> bool:
    """True once kube-apiserver calls JobSet's mutating webhook: a server-side dry run is defaulted."""
    argv = [
        str(kubectl.binary),
        f"--kubeconfig={kubectl.kubeconfig}",
        "create",
        "--dry-run=server",
        "-o",
        "json",
        "-f",
        "-",
    ]
    result = subprocess.run(
        argv, input=json.dumps(_PROBE_JOBSET), capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        return False
    spec = json.loads(result.stdout).get("spec", {})
    return bool(spec.get("successPolicy", {}).get("operator"))


# ------------------------------------------------------------------------------------------ up / down / env


def _component_pids(name: str) -> dict[str, int]:
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
            parts.append(f"--- {log}\n{_tail_file(log, lines)}")
    return "\n".join(parts)


def _dead_components(name: str) -> list[str]:
    return [c for c, pid in _component_pids(name).items() if not _pid_alive(pid)]


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
    if _dead_components(state.name) or not _pid_alive(state.jobset_pid):
        return False
    if not _jobset_ready(state.jobset_health_port):
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
        if attempt < 3 and _PORT_RACE.search(detail):
            _say(f"a component lost a port race (attempt {attempt}); recreating the cluster")
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
    return _tail("\n".join(dict.fromkeys(out)))  # kwokctl repeats the final error; keep each once


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
        _say("kwokctl delete cluster hung; killing the remaining processes")
        return
    if result.returncode != 0:
        _say(f"kwokctl delete cluster failed; killing the remaining processes:\n{_tail(result.stderr, 5)}")


def up(options: ClusterOptions | None = None, *, binaries: Binaries | None = None) -> ClusterState:
    """Bring the cluster up (or reuse a healthy one of the same name) and return its state."""
    options = options or ClusterOptions()
    existing = ClusterState.read(options.name)
    if existing is not None and is_healthy(existing):
        _say(f"cluster {options.name!r} is already up")
        return existing
    binaries = binaries or locate_binaries()
    if existing is not None or cluster_dir(options.name).exists() or own_dir(options.name).exists():
        _say(f"removing the stale cluster {options.name!r} first")
        down(options.name, binaries=binaries)
    started = time.monotonic()
    try:
        return _up(options, binaries, started)
    except BaseException as exc:
        if isinstance(exc, ClusterError):
            kept = _keep_failure_logs(options.name)
            exc.args = (f"{exc.args[0]}\n(logs kept in {kept})",)
        _say(f"bring-up of {options.name!r} failed; tearing down what was started")
        down(options.name, binaries=binaries)
        raise


def _up(options: ClusterOptions, binaries: Binaries, started: float) -> ClusterState:
    name = options.name
    directory = own_dir(name)
    directory.mkdir(parents=True, exist_ok=True)
    configs = [
        _write_yaml(directory / "kwokctl.yaml", [kwokctl_configuration(binaries)]),
        _write_yaml(directory / "stages.yaml", stages(options)),
        _write_yaml(directory / "logs.yaml", [container_logs(directory)]),
    ]
    check_no_downloads(binaries, name, configs)
    module_dir, crd = jobset_manifests()  # fail before starting anything if the manifests are unreadable

    _say(f"starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok-controller ({name})")
    _create_kwok_cluster(binaries, options, configs)
    kubeconfig = cluster_dir(name) / "kubeconfig.yaml"
    kubectl = Kubectl(binaries.kubectl, kubeconfig)
    wait_for(
        lambda: kubectl.ok("get", "--raw=/readyz"),
        timeout=options.timeout,
        what="kube-apiserver /readyz",
        explain=lambda: _component_log_tails(name),
    )

    _say(f"creating {options.nodes} kwok nodes and installing the JobSet CRD")
    nodes = node_manifests(options)
    node_names = [n["metadata"]["name"] for n in nodes]
    kubectl.apply(nodes)
    kubectl.apply(crd)
    wait_for(
        lambda: _nodes_ready(kubectl, node_names),
        timeout=options.timeout,
        what="kwok nodes Ready",
        explain=lambda: _tail_file(cluster_dir(name) / "logs" / "kwok-controller.log"),
    )
    wait_for(
        lambda: _crd_established(kubectl, JOBSET_CRD),
        timeout=options.timeout,
        what=f"{JOBSET_CRD} Established",
    )

    _say("starting the JobSet controller on the host")
    jobset = _start_jobset(binaries, kubeconfig, directory, options.timeout)
    kubectl.apply(
        jobset_webhook_configurations(module_dir, port=jobset.webhook_port, ca_bundle=jobset.ca_pem)
    )
    wait_for(
        lambda: _webhooks_serving(kubectl),
        timeout=options.timeout,
        what="JobSet webhooks to admit requests",
        explain=lambda: _tail_file(jobset.log),
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
        jobset_pid=jobset.pid,
        jobset_binary=str(binaries.jobset),
        jobset_health_port=jobset.health_port,
        jobset_webhook_port=jobset.webhook_port,
        jobset_log=str(jobset.log),
        kubectl=str(binaries.kubectl),
        started_at=time.time(),
        start_seconds=round(time.monotonic() - started, 1),
    )
    state.write()
    _say(f"cluster {name!r} is up in {state.start_seconds:.1f} s; KUBECONFIG={kubeconfig}")
    return state


def _is_our_jobset(state: ClusterState) -> bool:
    """The recorded pid is still JobSet's: alive and naming our directory (pids get reused)."""
    if not _pid_alive(state.jobset_pid):
        return False
    return not _HAVE_PROC or _names_directory(_cmdline(state.jobset_pid), Path(state.own_dir))


def down(name: str = DEFAULT_NAME, *, binaries: Binaries | None = None) -> None:
    """Stop JobSet and every component of cluster ``name`` and remove its directories; idempotent."""
    state = None
    with contextlib.suppress(ClusterError):
        state = ClusterState.read(name)
    stop_manager(name)
    stop_kueue(name)
    if state is not None and _is_our_jobset(state):
        _terminate([state.jobset_pid])
    if binaries is None:
        with contextlib.suppress(ClusterError):
            binaries = locate_binaries()
    _run_kwokctl_delete(binaries, name)
    if _HAVE_PROC:
        leftovers = processes_using(cluster_dir(name), own_dir(name))
    else:
        leftovers = [pid for pid in _component_pids(name).values() if _pid_alive(pid)]
    _terminate(leftovers)
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


# ------------------------------------------------------------------------------------------ the Trainer API
#
# The CRDs and default runtimes, server-side applied by an installer's field manager; the TrainJob a user
# creates; and clearing a TrainJob with everything it owned, for a demo that runs again.

TRAINER_CRD_DIR = REPO / "config" / "crd"
TRAINER_RUNTIMES_DIR = REPO / "config" / "runtimes"
DEMO_TRAINJOB = REPO / "examples" / "trainjob-torch.yaml"
DEMO_NAMESPACE = "demo"
INSTALL_FIELD_MANAGER = "trainer-install"
"""Who server-side applies the CRDs and default runtimes (an installer, not the controller)."""
USER_FIELD_MANAGER = "trainer-demo"
"""Who creates the TrainJob: the user's part, so its fields are not the controller's."""

CRD_GVK = GVK("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
TRAINJOB_GVK = GVK(constants.GROUP, constants.VERSION, constants.TRAINJOB_KIND)
JOBSET_GVK = GVK(constants.JOBSET_GROUP, constants.JOBSET_VERSION, constants.JOBSET_KIND)
JOB_GVK = GVK("batch", "v1", "Job")
POD_GVK = GVK("", "v1", "Pod")
_RUNTIME_KINDS = (constants.CLUSTER_TRAINING_RUNTIME_KIND, constants.TRAINING_RUNTIME_KIND)
# Kinds a TrainJob's plugins create besides its JobSet (the PodGroups only when their CRD is served).
_OWNED_GVKS = (
    GVK("", "v1", "ConfigMap"),
    GVK("", "v1", "Secret"),
    GVK("scheduling.x-k8s.io", "v1alpha1", constants.POD_GROUP_KIND),
    GVK("scheduling.volcano.sh", "v1beta1", constants.POD_GROUP_KIND),
)


def connect(state: ClusterState) -> Client:
    """A `controller.client.client.Client` for the cluster (close it when done)."""
    return Client.load(state.kubeconfig, user_agent="hack/cluster.py")


def read_manifests(path: Path, kinds: Sequence[str]) -> list[dict[str, Any]]:
    """The objects of the given kinds in a YAML file or directory (``kustomization.yaml`` and the like
    are skipped)."""
    try:
        documents = load_documents(path)
    except RenderError as exc:
        raise ClusterError(str(exc)) from exc
    return [d.obj for d in documents if d.kind in kinds]


def install_crds(client: Client, paths: Sequence[Path], *, timeout: float = 60.0) -> list[str]:
    """Server-side apply the CRDs in ``paths`` (files or directories) and wait until each is Established.

    Returns their names. Server-side, so the CRDs' size does not matter (no last-applied annotation);
    idempotent.
    """
    crds = [crd for path in paths for crd in read_manifests(path, ("CustomResourceDefinition",))]
    for crd in crds:
        client.apply(crd, INSTALL_FIELD_MANAGER, force=True)
    names = [crd["metadata"]["name"] for crd in crds]

    def established() -> bool:
        return all(
            any(
                c.get("type") == "Established" and c.get("status") == "True"
                for c in client.get(CRD_GVK, name).get("status", {}).get("conditions") or []
            )
            for name in names
        )

    wait_for(established, timeout=timeout, what=f"CRDs Established: {', '.join(names)}")
    return names


def install_runtimes(client: Client, path: Path = TRAINER_RUNTIMES_DIR) -> list[str]:
    """Server-side apply the (Cluster)TrainingRuntimes in ``path``; returns ``Kind/name`` of each."""
    installed = []
    for runtime in read_manifests(path, _RUNTIME_KINDS):
        client.apply(runtime, INSTALL_FIELD_MANAGER, force=True)
        installed.append(f"{runtime['kind']}/{runtime['metadata']['name']}")
    return installed


def install_trainer(client: Client) -> tuple[list[str], list[str]]:
    """The Trainer CRDs (``config/crd/``) and default ClusterTrainingRuntimes (``config/runtimes/``)."""
    return install_crds(client, [TRAINER_CRD_DIR]), install_runtimes(client)


def _controlled_by_trainjob(obj: Mapping[str, Any], name: str) -> bool:
    return any(
        ref.get("controller") is True
        and ref.get("kind") == constants.TRAINJOB_KIND
        and ref.get("name") == name
        for ref in obj.get("metadata", {}).get("ownerReferences") or ()
    )


def _delete(client: Client, gvk: GVK, name: str, namespace: str) -> None:
    with contextlib.suppress(NotFound):
        client.delete(gvk, name, namespace, propagation_policy="Background")


def clear_trainjob(client: Client, namespace: str, name: str, *, timeout: float = 60.0) -> None:
    """Delete the TrainJob ``name`` and what it owns, and wait until its JobSet's Jobs and Pods are gone.

    The children are deleted here rather than left to the garbage collector, which notices a freshly
    installed CRD's objects only at its next resource rediscovery (every 30 s): a re-run of the demo right
    after the first would otherwise wait for it, or find the old JobSet in its way.
    """
    _delete(client, TRAINJOB_GVK, name, namespace)
    _delete(client, JOBSET_GVK, name, namespace)
    for gvk in _OWNED_GVKS:
        try:
            items = client.list(gvk, namespace).items
        except (NoKindMatch, NotFound):  # a PodGroup kind whose CRD is not installed
            continue
        for obj in items:
            if _controlled_by_trainjob(obj, name):
                _delete(client, gvk, obj["metadata"]["name"], namespace)
    selector = f"{JOBSET_NAME_LABEL}={name}"
    for job in client.list(JOB_GVK, namespace, label_selector=selector).items:
        _delete(client, JOB_GVK, job["metadata"]["name"], namespace)

    def gone() -> bool:
        with contextlib.suppress(NotFound):
            client.get(TRAINJOB_GVK, name, namespace)
            return False
        with contextlib.suppress(NotFound):
            client.get(JOBSET_GVK, name, namespace)
            return False
        return not any(
            client.list(gvk, namespace, label_selector=selector).items for gvk in (JOB_GVK, POD_GVK)
        )

    wait_for(gone, timeout=timeout, what=f"TrainJob {namespace}/{name} and its JobSet, Jobs and Pods to go")


def create_trainjob(client: Client, manifest: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """Create the TrainJob in ``namespace`` (as a user would) and return it as stored, with its UID."""
    trainjob = {**manifest, "metadata": {**manifest["metadata"], "namespace": namespace}}
    return client.create(trainjob, field_manager=USER_FIELD_MANAGER)


def _finished_condition(obj: Mapping[str, Any], types: Sequence[str]) -> str | None:
    for condition in obj.get("status", {}).get("conditions") or []:
        if condition.get("status") == "True" and condition.get("type") in types:
            return str(condition["type"])
    return None


def wait_for_jobset(client: Client, namespace: str, name: str, *, timeout: float = 120.0) -> dict[str, Any]:
    """Wait until the JobSet is Completed or Failed; return it."""
    found: dict[str, dict[str, Any]] = {}

    def finished() -> bool:
        found["jobset"] = client.get(JOBSET_GVK, name, namespace)
        return _finished_condition(found["jobset"], ("Completed", "Failed")) is not None

    wait_for(finished, timeout=timeout, what=f"JobSet {namespace}/{name} to complete or fail")
    return found["jobset"]


# ------------------------------------------------------------------------------ the manager as a host process
#
# `make demo` runs the real controller: `trainer-controller-manager` (this package's console script) as a
# process of its own on the host, with the shipped configuration except for its bind addresses (free
# loopback ports), the Lease's namespace and certificate management (off), authenticated as its
# ServiceAccount. Like the JobSet controller it outlives the command that started it; `down` stops it.

MANAGER_CONFIG = REPO / "config" / "manager" / "controller_manager_config.yaml"
LOCAL_INSTALL = REPO / "config" / "local"
"""The kustomize overlay for a manager outside the cluster: CRDs, RBAC, ServiceAccount, public ConfigMap."""
MANAGER_SERVICE_ACCOUNT = "kubeflow-trainer-controller-manager"
MANAGER_NAMESPACE = "kubeflow-system"
"""Where the manager's Lease lives (and, installed in a cluster, the manager itself)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ManagerProcess:
    """A running `trainer-controller-manager`; written to ``<own dir>/manager.json``."""

    pid: int
    health_port: int
    metrics_port: int
    config: str
    log: str

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False


def _manager_state(name: str) -> Path:
    return own_dir(name) / "manager.json"


def manager_process(name: str = DEFAULT_NAME) -> ManagerProcess | None:
    """The manager ``start_manager`` started for cluster ``name``, if it still runs."""
    try:
        raw = json.loads(_manager_state(name).read_text())
        process = ManagerProcess(**raw)
    except (OSError, ValueError, TypeError):
        return None
    alive = _pid_alive(process.pid)
    if not alive or (_HAVE_PROC and not _names_directory(_cmdline(process.pid), own_dir(name))):
        return None
    return process


def stop_manager(name: str = DEFAULT_NAME) -> None:
    """Stop the manager of cluster ``name`` (SIGTERM: it releases its Lease) and remove the webhook
    configurations that point at it (failurePolicy Fail: left behind, they would refuse every TrainJob and
    runtime); idempotent."""
    process = manager_process(name)
    if process is not None:
        _terminate([process.pid], grace=30.0)
    if _manager_state(name).exists():
        state = ClusterState.read(name)
        if state is not None:
            with contextlib.suppress(ApiError, TransportError, OSError):
                client = connect(state)
                try:
                    for configuration in trainer_webhook_configurations(0, b""):
                        gvk = GVK.of(configuration)
                        with contextlib.suppress(NotFound):
                            client.delete(gvk, configuration["metadata"]["name"])
                finally:
                    client.close()
    _manager_state(name).unlink(missing_ok=True)


def manager_binary() -> Path:
    """The ``trainer-controller-manager`` console script of the Python running this script."""
    binary = Path(sys.executable).parent / "trainer-controller-manager"
    if not binary.exists():
        raise ClusterError(f"{binary} is missing: install the package first (`make venv`)")
    return binary


TRAINER_WEBHOOKS = (
    # (configuration, webhook, path, resource, whether the runtime objectSelector applies)
    ("defaulter.trainer.kubeflow.org", "defaulter.trainjob.trainer.kubeflow.org",
     "/mutate-trainer-kubeflow-org-v1alpha1-trainjob", "trainjobs", False),
    ("validator.trainer.kubeflow.org", "validator.trainjob.trainer.kubeflow.org",
     "/validate-trainer-kubeflow-org-v1alpha1-trainjob", "trainjobs", False),
    ("validator.trainer.kubeflow.org", "validator.trainingruntime.trainer.kubeflow.org",
     "/validate-trainer-kubeflow-org-v1alpha1-trainingruntime", "trainingruntimes", True),
    ("validator.trainer.kubeflow.org", "validator.clustertrainingruntime.trainer.kubeflow.org",
     "/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime", "clustertrainingruntimes", True),
)  # fmt: skip
"""The Trainer's admission webhooks, as the installed manifests register them behind the manager's Service."""


def trainer_webhook_configurations(port: int, ca_bundle: bytes) -> list[dict[str, Any]]:
    """The Trainer's webhook configurations, pointing at a manager on ``127.0.0.1:<port>`` by URL."""
    bundle = base64.b64encode(ca_bundle).decode()
    configurations: dict[str, dict[str, Any]] = {}
    for configuration, name, path, resource, runtime_selector in TRAINER_WEBHOOKS:
        kind = (
            "MutatingWebhookConfiguration"
            if name.startswith("defaulter")
            else "ValidatingWebhookConfiguration"
        )
        hook: dict[str, Any] = {
            "name": name,
            "clientConfig": {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle},
            "rules": [
                {
                    "apiGroups": [constants.GROUP],
                    "apiVersions": [constants.VERSION],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": [resource],
                }
            ],
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 10,
        }
        if runtime_selector:
            hook["objectSelector"] = {
                "matchExpressions": [
                    {"key": constants.LABEL_WEBHOOK_VALIDATION, "operator": "NotIn", "values": ["disabled"]}
                ]
            }
        entry = configurations.setdefault(
            configuration,
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": kind,
                "metadata": {"name": configuration},
                "webhooks": [],
            },
        )
        entry["webhooks"].append(hook)
    return list(configurations.values())


def install_for_local_manager(state: ClusterState, *, timeout: float = 60.0) -> list[str]:
    """``kubectl apply --server-side -k config/local``: the CRDs, the manager's namespace, ServiceAccount and
    RBAC, and the public ConfigMap, as the shipped manifests install them (without the Deployment and the
    Service-addressed webhooks); and scheduler-plugins' PodGroup CRD, so CoScheduling runtimes work (the
    manager watches PodGroups only when their CRD is installed before it starts, as upstream). Waits until
    the CRDs are Established; returns the Trainer CRDs' names."""
    kubectl = state.kubectl_runner()
    apply = ("apply", "--server-side", "--force-conflicts", f"--field-manager={INSTALL_FIELD_MANAGER}")
    kubectl(*apply, "-k", str(LOCAL_INSTALL), timeout=120.0)
    kubectl(*apply, "-f", str(scheduler_plugins_podgroup_crd()), timeout=120.0)
    crds = read_manifests(TRAINER_CRD_DIR, ("CustomResourceDefinition",))
    names = [crd["metadata"]["name"] for crd in crds]
    for name in [*names, "podgroups.scheduling.x-k8s.io"]:
        kubectl("wait", "--for=condition=Established", f"--timeout={timeout:.0f}s", f"crd/{name}",
                timeout=timeout + 10)  # fmt: skip
    return names


def service_account_kubeconfig(state: ClusterState, path: Path, *, hours: int = 24) -> Path:
    """A kubeconfig that authenticates as the manager's ServiceAccount (a TokenRequest token valid for
    ``hours``), on the cluster's server and CA: the manager runs with the shipped RBAC, not as admin."""
    token = state.kubectl_runner()(
        "create", "token", MANAGER_SERVICE_ACCOUNT, "-n", MANAGER_NAMESPACE, f"--duration={hours}h"
    ).strip()
    admin = yaml.safe_load(Path(state.kubeconfig).read_text())
    user = f"system:serviceaccount:{MANAGER_NAMESPACE}:{MANAGER_SERVICE_ACCOUNT}"
    context = admin["contexts"][0]["context"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": admin["clusters"],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": user, "context": {"cluster": context["cluster"], "user": user}}],
        "current-context": user,
    }
    return write_kubeconfig(path, config)


def start_manager(
    state: ClusterState, *, feature_gates: str = "", timeout: float = 60.0, log_level: str = "info"
) -> ManagerProcess:
    """(Re)start the manager for the cluster as its ServiceAccount, wait until it is ready (caches synced,
    webhook server up), and register its admission webhooks with the API server by URL.

    Installs what it needs first (``install_for_local_manager``: the CRDs, the ServiceAccount and its RBAC;
    idempotent). A manager already running for this cluster is stopped first, so the code it runs is the
    current one. Its webhook server gets a
    serving certificate for 127.0.0.1 from a throwaway CA (certificate management is off: the in-cluster
    rotator's certificates name the Service, which a host process does not have).
    """
    install_for_local_manager(state)
    stop_manager(state.name)
    directory = Path(state.own_dir) / "manager"
    directory.mkdir(parents=True, exist_ok=True)
    ca = CertificateAuthority.new("trainer-local-webhook-ca")
    cert_dir = directory / "certs"
    ca.issue_serving(["127.0.0.1", "localhost"]).write(cert_dir, "tls.crt", "tls.key")
    health, metrics, webhook = free_port(), free_port(), free_port()
    config = yaml.safe_load(MANAGER_CONFIG.read_text())
    config["health"]["healthProbeBindAddress"] = f"127.0.0.1:{health}"
    config["metrics"] = {"bindAddress": f"127.0.0.1:{metrics}", "secureServing": False}
    config["webhook"] = {"host": "127.0.0.1", "port": webhook}
    config["certManagement"]["enable"] = False
    config["leaderElection"]["resourceNamespace"] = MANAGER_NAMESPACE
    config_path = _write_yaml(directory / "config.yaml", [config])
    kubeconfig = service_account_kubeconfig(state, directory / "kubeconfig")
    log = directory / "manager.log"
    argv = [
        str(manager_binary()),
        f"--config={config_path}",
        f"--kubeconfig={kubeconfig}",
        f"--webhook-cert-dir={cert_dir}",
        f"--zap-log-level={log_level}",
    ]
    if feature_gates:
        argv.append(f"--feature-gates={feature_gates}")
    with log.open("ab") as out:
        out.write(f"\n--- start: {' '.join(argv)}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    process = ManagerProcess(
        pid=proc.pid, health_port=health, metrics_port=metrics, config=str(config_path), log=str(log)
    )
    _manager_state(state.name).write_text(json.dumps(dataclasses.asdict(process), indent=2) + "\n")
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline and not process.ready():
        time.sleep(0.2)
    if proc.poll() is not None:
        raise ClusterError(f"the manager exited with code {proc.returncode}; {log}:\n{_tail_file(log)}")
    if not process.ready():
        stop_manager(state.name)
        raise ClusterError(f"the manager was not ready within {timeout:.0f} s; {log}:\n{_tail_file(log)}")
    client = connect(state)
    try:
        for configuration in trainer_webhook_configurations(webhook, ca.cert_pem):
            client.apply(configuration, INSTALL_FIELD_MANAGER, force=True)
    finally:
        client.close()
    return process


# ---------------------------------------------------------------------------------------------------- Kueue
#
# Kueue (`sigs.k8s.io/kueue` at KUEUE_VERSION, the `kueue` binary hack/build-binaries.sh builds) as a host
# process against a running cluster, for the e2e tests of its TrainJob integration. Neither `up` nor `demo`
# starts it: `python hack/cluster.py kueue-up|kueue-down`, or start_kueue/stop_kueue; `down` stops it too.
# Rewired for a controller outside the cluster the way JobSet is (section "JobSet"): a serving certificate
# from a throwaway CA, URL webhook configurations pointing at 127.0.0.1, every listener on a free loopback
# port, no leader election. It runs with the cluster's admin kubeconfig (not with the RBAC of Kueue's
# manifests: this is a test cluster, and the ClusterRole would be one more thing to install and keep).

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_API_VERSION = f"{KUEUE_GROUP}/v1beta2"
"""The version Kueue v0.17 stores its objects in and uses (v1beta1 is served too, unconverted here)."""
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_TRAINJOB_FRAMEWORK = "trainer.kubeflow.org/trainjob"
"""Kueue's TrainJob integration in ``integrations.frameworks`` (kueue ``pkg/controller/jobs/trainjob``)."""
KUEUE_FRAMEWORKS = (KUEUE_TRAINJOB_FRAMEWORK,)
"""The integrations enabled here. The TrainJob one declares no dependency: it builds the JobSet it admits
in-process (the Trainer runtime framework, Go) and does not need Kueue's JobSet integration."""
KUEUE_NAMESPACE = "kueue-system"
"""Kueue's own namespace (``namespace`` of its Configuration): MultiKueue's Secrets would live there."""
KUEUE_WEBHOOK_PREFIX = "kueue-"
"""The name prefix of Kueue's webhook configurations, as its kustomize install names them."""
KUEUE_METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
"""Where Kueue v0.17 reads its metrics serving certificate when internal certificate management is off: a
path fixed in ``cmd/kueue/main.go`` (in a pod, a mounted Secret). A host process has to find a certificate
there or exits; :func:`start_kueue` writes a throwaway one if none is there."""

RESOURCE_FLAVOR_GVK = GVK(KUEUE_GROUP, "v1beta2", "ResourceFlavor")
CLUSTER_QUEUE_GVK = GVK(KUEUE_GROUP, "v1beta2", "ClusterQueue")
LOCAL_QUEUE_GVK = GVK(KUEUE_GROUP, "v1beta2", "LocalQueue")
WORKLOAD_GVK = GVK(KUEUE_GROUP, "v1beta2", "Workload")
_WEBHOOK_CONFIGURATION_GVKS = {
    kind: GVK("admissionregistration.k8s.io", "v1", kind)
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
}
# Job kinds of the enabled integrations whose webhooks are registered, each behind the queue-name selector.
_KUEUE_JOB_RESOURCES = {KUEUE_TRAINJOB_FRAMEWORK: (constants.GROUP, "trainjobs")}


def kueue_manifests() -> Any:
    """hack/thirdparty.py's ``KueueManifests`` (CRDs and webhook manifests) for the pinned Kueue."""
    thirdparty = _thirdparty()
    try:
        return thirdparty.kueue_manifests()
    except thirdparty.ThirdPartyError as exc:
        raise ClusterError(f"cannot read Kueue's manifests from the Go module cache: {exc}") from exc


def kueue_binary() -> Path:
    """The ``kueue`` binary of the pinned version; ClusterError naming the build command if it is missing."""
    directory = binary_dirs().get("KUEUE_BIN")
    if directory is None:
        raise ClusterError("hack/build-binaries.sh --print did not name KUEUE_BIN")
    binary = directory / "kueue"
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        raise ClusterError(f"{binary} is missing: build it with `bash hack/build-binaries.sh kueue`")
    return binary


def kueue_webhook_configurations(
    manifests: Path, *, port: int, ca_bundle: bytes, frameworks: Sequence[str] = KUEUE_FRAMEWORKS
) -> list[dict[str, Any]]:
    """Kueue's webhook configurations, narrowed to what this setup needs and rewired to a URL on 127.0.0.1.

    Read from the module's ``config/components/webhook/manifests.yaml``. Kept: the webhooks of Kueue's own
    kinds (ClusterQueue, ResourceFlavor, Cohort, Workload; as installed), and those of the Job kinds of the
    enabled ``frameworks`` with the object selector ``kueue.x-k8s.io/queue-name Exists``. Dropped: every other
    integration's (pods, Jobs, JobSets, Deployments, ...). So only objects meant for Kueue reach the Kueue
    process, and a TrainJob without a queue name never depends on it (upstream's install sends every TrainJob
    to Kueue, which adds an empty runtime patch to those it does not manage, and defaults the queue name from
    a LocalQueue named ``default``: neither happens here). Names get the ``kueue-`` prefix of a release.
    """
    unknown = [f for f in frameworks if f not in _KUEUE_JOB_RESOURCES]
    if unknown:
        raise ClusterError(f"no webhook selection known for the Kueue integrations {unknown}")
    job_resources = {_KUEUE_JOB_RESOURCES[f] for f in frameworks}
    queued = {"matchExpressions": [{"key": KUEUE_QUEUE_LABEL, "operator": "Exists"}]}
    bundle = base64.b64encode(ca_bundle).decode()
    out = []
    for doc in yaml.safe_load_all(manifests.read_text()):
        if not doc or doc.get("kind") not in _WEBHOOK_CONFIGURATION_GVKS:
            continue
        webhooks = []
        for original in doc.get("webhooks", []):
            rules = original.get("rules") or []
            groups = {g for rule in rules for g in rule.get("apiGroups", [])}
            resources = {
                (g, r) for rule in rules for g in rule.get("apiGroups", []) for r in rule["resources"]
            }
            if groups == {KUEUE_GROUP}:
                selector = None
            elif resources and resources <= job_resources:
                selector = queued
            else:
                continue
            path = original["clientConfig"]["service"]["path"]
            hook = {
                **original,
                "clientConfig": {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle},
            }
            if selector is not None:
                hook["objectSelector"] = selector
            hook.setdefault("timeoutSeconds", 10)
            webhooks.append(hook)
        if webhooks:
            out.append(
                {
                    "apiVersion": doc["apiVersion"],
                    "kind": doc["kind"],
                    "metadata": {"name": f"{KUEUE_WEBHOOK_PREFIX}{doc['metadata']['name']}"},
                    "webhooks": webhooks,
                }
            )
    if not out:
        raise ClusterError(f"no Kueue webhook configurations in {manifests}")
    return out


def kueue_configuration(
    *, health_port: int, metrics_port: int, webhook_port: int, cert_dir: Path, frameworks: Sequence[str]
) -> dict[str, Any]:
    """Kueue's Configuration (``config.kueue.x-k8s.io/v1beta2``) for a host process on loopback ports.

    Internal certificate management off (its rotator issues certificates for the in-cluster Service name,
    which a URL on 127.0.0.1 does not match), no leader election (one replica), jobs without a queue name
    left alone, and the visibility server off (it would bind every interface, and nothing here reads it).
    """
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": KUEUE_NAMESPACE,
        "manageJobsWithoutQueueName": False,
        "internalCertManagement": {"enable": False},
        "leaderElection": {"leaderElect": False},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}"},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "integrations": {"frameworks": list(frameworks)},
        "featureGates": {"VisibilityOnDemand": False},
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class KueueProcess:
    """A running Kueue controller; written to ``<own dir>/kueue.json``."""

    pid: int
    health_port: int
    metrics_port: int
    webhook_port: int
    config: str
    log: str
    webhook_configurations: tuple[str, ...]
    """``Kind/name`` of the webhook configurations registered for it (removed by :func:`stop_kueue`)."""

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False


def _kueue_state(name: str) -> Path:
    return own_dir(name) / "kueue.json"


def _read_kueue_state(name: str) -> KueueProcess | None:
    try:
        raw = json.loads(_kueue_state(name).read_text())
        raw["webhook_configurations"] = tuple(raw.get("webhook_configurations", ()))
        return KueueProcess(**raw)
    except (OSError, ValueError, TypeError):
        return None


def kueue_process(name: str = DEFAULT_NAME) -> KueueProcess | None:
    """The Kueue controller ``start_kueue`` started for cluster ``name``, if it still runs."""
    process = _read_kueue_state(name)
    if process is None or not _pid_alive(process.pid):
        return None
    if _HAVE_PROC and not _names_directory(_cmdline(process.pid), own_dir(name)):
        return None  # the pid was reused
    return process


def _ensure_kueue_metrics_certificate(directory: Path = KUEUE_METRICS_CERT_DIR) -> None:
    """A certificate and key where Kueue reads its metrics certificate; kept if present and unexpired."""
    cert_path, key_path = directory / "tls.crt", directory / "tls.key"
    with contextlib.suppress(OSError, ValueError):
        certificate = x509.load_pem_x509_certificate(cert_path.read_bytes())
        if key_path.is_file() and certificate.not_valid_after_utc.timestamp() > time.time() + 86400:
            return
    try:
        ca = CertificateAuthority.new("trainer-local-kueue-metrics-ca")
        ca.issue_serving(["127.0.0.1", "localhost"]).write(directory, "tls.crt", "tls.key")
    except OSError as exc:
        raise ClusterError(
            f"cannot write Kueue's metrics certificate to {directory} ({exc.strerror}): with internal "
            "certificate management off, Kueue v0.17 reads it from that fixed path and exits without it; "
            "create the directory writable for this user, or put a tls.crt/tls.key pair there"
        ) from exc


def _kueue_webhooks_serving(kubectl: Kubectl) -> bool:
    """True once kube-apiserver calls Kueue's mutating webhook: a dry-run ResourceFlavor gets a finalizer."""
    probe = {"apiVersion": KUEUE_API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": "webhook-probe"}}
    argv = [str(kubectl.binary), f"--kubeconfig={kubectl.kubeconfig}", "create", "--dry-run=server"]
    result = subprocess.run(
        [*argv, "-o", "json", "-f", "-"], input=json.dumps(probe), capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        return False
    return bool(json.loads(result.stdout).get("metadata", {}).get("finalizers"))


def start_kueue(
    state: ClusterState,
    *,
    frameworks: Sequence[str] = KUEUE_FRAMEWORKS,
    timeout: float = 90.0,
    log_level: str = "info",
) -> KueueProcess:
    """(Re)start Kueue for the cluster and return once its webhooks answer.

    Installs, idempotently and server-side: Kueue's CRDs as released (without the conversion-webhook
    patches: only ``v1beta2``, the storage version, is converted correctly) and the Trainer CRDs (Kueue
    defers an integration whose kind is not served, and polls for it with back-off). Then: a serving
    certificate for 127.0.0.1 from a throwaway CA, the Configuration of :func:`kueue_configuration`, the
    process (a session of its own; retried when it loses a port race), ``/readyz``, the webhook
    configurations of :func:`kueue_webhook_configurations`, and a probe through kube-apiserver. A Kueue
    already running for this cluster is stopped first.
    """
    manifests = kueue_manifests()
    binary = kueue_binary()
    stop_kueue(state.name)
    client = connect(state)
    try:
        install_crds(client, [*manifests.crds, TRAINER_CRD_DIR], timeout=timeout)
    finally:
        client.close()
    _ensure_kueue_metrics_certificate()
    directory = Path(state.own_dir) / "kueue"
    cert_dir = directory / "certs"
    ca = CertificateAuthority.new("trainer-local-kueue-webhook-ca")
    ca.issue_serving(["127.0.0.1", "localhost"]).write(cert_dir, "tls.crt", "tls.key")
    log = directory / "kueue.log"
    for attempt in range(1, 4):
        health, metrics, webhook = free_port(), free_port(), free_port()
        configuration = kueue_configuration(
            health_port=health,
            metrics_port=metrics,
            webhook_port=webhook,
            cert_dir=cert_dir,
            frameworks=frameworks,
        )
        config_path = _write_yaml(directory / "config.yaml", [configuration])
        argv = [
            str(binary),
            f"--kubeconfig={state.kubeconfig}",
            f"--config={config_path}",
            f"--zap-log-level={log_level}",
        ]
        registered = kueue_webhook_configurations(
            manifests.webhooks, port=webhook, ca_bundle=ca.cert_pem, frameworks=frameworks
        )
        with log.open("ab") as out:
            out.write(f"\n--- start attempt {attempt}: {' '.join(argv)}\n".encode())
            out.flush()
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            process = KueueProcess(
                pid=proc.pid,
                health_port=health,
                metrics_port=metrics,
                webhook_port=webhook,
                config=str(config_path),
                log=str(log),
                webhook_configurations=tuple(f"{c['kind']}/{c['metadata']['name']}" for c in registered),
            )
            _kueue_state(state.name).write_text(json.dumps(dataclasses.asdict(process), indent=2) + "\n")
            deadline = time.monotonic() + timeout
            while proc.poll() is None and time.monotonic() < deadline and not process.ready():
                time.sleep(0.2)
            if proc.poll() is None and process.ready():
                break
            if proc.poll() is None:
                stop_kueue(state.name)
                raise ClusterError(f"Kueue was not ready within {timeout:.0f} s; {log}:\n{_tail_file(log)}")
            tail = _tail_file(log)
            this_attempt = log.read_text(errors="replace").rsplit("\n--- start attempt ", 1)[-1]
            if not _PORT_RACE.search(this_attempt):
                _kueue_state(state.name).unlink(missing_ok=True)
                raise ClusterError(f"Kueue exited with code {proc.returncode}; {log}:\n{tail}")
        except BaseException:  # an error or Ctrl-C here must not leave an untracked Kueue running
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
            _kueue_state(state.name).unlink(missing_ok=True)
            raise
        _say(f"Kueue lost a port race (attempt {attempt}); retrying with new ports")
    else:
        _kueue_state(state.name).unlink(missing_ok=True)
        raise ClusterError(f"Kueue could not bind its ports in 3 attempts; {log}:\n{_tail_file(log)}")
    kubectl = state.kubectl_runner()
    try:
        kubectl.apply(registered, field_manager=INSTALL_FIELD_MANAGER)
        wait_for(
            lambda: _kueue_webhooks_serving(kubectl),
            timeout=timeout,
            what="Kueue's webhooks to admit requests",
            explain=lambda: _tail_file(log),
        )
    except BaseException:
        stop_kueue(state.name)
        raise
    return process


def stop_kueue(name: str = DEFAULT_NAME) -> None:
    """Stop the Kueue controller of cluster ``name`` and remove its webhook configurations; idempotent.

    The configurations go even when the process is already gone: with ``failurePolicy: Fail`` they would
    refuse every ClusterQueue, ResourceFlavor and Workload, and every TrainJob with a queue name. Kueue's
    CRDs and objects stay; ClusterQueues and ResourceFlavors carry Kueue's ``resource-in-use`` finalizer, so
    delete them while Kueue runs.
    """
    recorded = _read_kueue_state(name)
    process = kueue_process(name)
    if process is not None:
        _terminate([process.pid], grace=30.0)
    state = None
    with contextlib.suppress(ClusterError):
        state = ClusterState.read(name)
    if recorded is not None and state is not None:
        with contextlib.suppress(ApiError, TransportError, OSError):
            client = connect(state)
            try:
                for entry in recorded.webhook_configurations:
                    kind, _, configuration = entry.partition("/")
                    with contextlib.suppress(NotFound):
                        client.delete(_WEBHOOK_CONFIGURATION_GVKS[kind], configuration)
            finally:
                client.close()
    _kueue_state(name).unlink(missing_ok=True)


# ----------------------------------------------------------------------------------------------------- demo


def _describe(obj: Mapping[str, Any]) -> str:
    metadata = obj["metadata"]
    where = f"{metadata['namespace']}/" if metadata.get("namespace") else ""
    return f"{obj['kind']} {where}{metadata['name']}"


def _show_health(name: str, state: ClusterState, kubectl: Kubectl, *, reused: bool) -> None:
    if reused:  # a re-run: say so rather than report the old start-up time as if it had just happened
        age = max(0, int(time.time() - state.started_at))
        since = f"{age // 3600} h {age % 3600 // 60} min" if age >= 3600 else f"{age // 60} min {age % 60} s"
        started = f"already running, reused: started {since} ago, not restarted"
    else:
        started = f"started now in {state.start_seconds:.1f} s"
    print(f"\n== Tier 2 cluster {name!r} (API server {state.server}; {started})")
    print(kubectl("get", "nodes", "-o", "wide").rstrip())
    print("\n== Health")
    readyz = kubectl("get", "--raw=/readyz?verbose")
    print(f"kube-apiserver   {readyz.strip().splitlines()[-1]} ({readyz.count('[+]')} checks passed)")
    leases = {
        lease["metadata"]["name"]: lease["spec"].get("holderIdentity", "")
        for lease in kubectl.get_json("leases", "-n", "kube-system").get("items", [])
    }
    for component, pid in _component_pids(name).items():
        holder = leases.get(component)
        leader = f"; leader lease held by {holder.split('_')[0]}" if holder else ""
        print(f"{component:<24} pid {pid:<7} {'running' if _pid_alive(pid) else 'DEAD'}{leader}")
    ready = "ready" if _jobset_ready(state.jobset_health_port) else "NOT READY"
    print(
        f"{'jobset-controller':<24} pid {state.jobset_pid:<7} {ready}; "
        f"webhooks at https://127.0.0.1:{state.jobset_webhook_port}"
    )


def _conditions_line(conditions: Sequence[Mapping[str, Any]]) -> str:
    return (
        "; ".join(
            f"{c['type']}={c['status']} ({c.get('reason', '')}: {c.get('message', '')})" for c in conditions
        )
        or "none"
    )


def _jobs_line(jobs: Sequence[Mapping[str, Any]]) -> str:
    counters = ("active", "ready", "succeeded", "failed", "suspended")
    return (
        "; ".join(f"{j['name']}: " + ", ".join(f"{k} {j.get(k, 0)}" for k in counters) for j in jobs)
        or "none"
    )


def _pods_line(pods: Sequence[Mapping[str, Any]]) -> str:
    phases: dict[str, int] = {}
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        phases[phase] = phases.get(phase, 0) + 1
    return ", ".join(f"{n} {phase}" for phase, n in sorted(phases.items())) or "none"


def _progress_line(client: Client, namespace: str, name: str) -> tuple[str, dict[str, Any]]:
    """One line on where the TrainJob stands: its conditions, its JobSet and its pods."""
    trainjob = client.get(TRAINJOB_GVK, name, namespace)
    view = TrainJobView(cast(TrainJob, trainjob))
    try:
        jobset = client.get(JOBSET_GVK, name, namespace)
        jobset_text = _finished_condition(jobset, ("Completed", "Failed")) or (
            "suspended" if jobset["spec"].get("suspend") else "running"
        )
    except NotFound:
        jobset_text = "not created"
    pods = client.list(POD_GVK, namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}").items
    line = (
        f"conditions: {_conditions_line(view.conditions)} | JobSet: {jobset_text} | pods: {_pods_line(pods)}"
    )
    return line, trainjob


def demo(name: str = DEFAULT_NAME) -> None:
    """Bring the cluster up if needed and show it healthy; install the Trainer API; (re)start the manager;
    submit the sample TrainJob and show its progress until it finishes; leave it all running."""
    requested = time.time()
    state = up(ClusterOptions(name=name))
    kubectl = state.kubectl_runner()
    _show_health(name, state, kubectl, reused=state.started_at < requested)
    manifests = read_manifests(DEMO_TRAINJOB, (constants.TRAINJOB_KIND,))
    if len(manifests) != 1:
        raise ClusterError(f"{DEMO_TRAINJOB} must hold exactly one TrainJob")
    trainjob_name, namespace = manifests[0]["metadata"]["name"], DEMO_NAMESPACE

    client = connect(state)
    try:
        print("\n== Trainer API and the manager's RBAC (kubectl apply --server-side -k config/local)")
        crds = install_for_local_manager(state)
        print(f"CRDs Established: {', '.join(crds)}")
        account = f"{MANAGER_NAMESPACE}/{MANAGER_SERVICE_ACCOUNT}"
        print(f"ServiceAccount {account} with the shipped ClusterRole and Roles")

        print("\n== The Trainer controller manager")
        with contextlib.suppress(AlreadyExists):
            client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        started = time.monotonic()
        manager = start_manager(state)
        print(
            f"trainer-controller-manager pid {manager.pid}: ready in {time.monotonic() - started:.1f} s, "
            f"authenticated as its ServiceAccount (caches synced; leader of Lease "
            f"{MANAGER_NAMESPACE}/trainer.kubeflow.org); its admission webhooks are registered"
        )
        print(f"log: {manager.log}")

        runtimes = install_runtimes(client)  # through the manager's validating webhook
        print(f"ClusterTrainingRuntimes: {', '.join(r.split('/', 1)[1] for r in runtimes)}")

        print(f"\n== TrainJob {namespace}/{trainjob_name} from {DEMO_TRAINJOB.relative_to(REPO)}")
        clear_trainjob(client, namespace, trainjob_name)  # replace the TrainJob a previous run left
        wait_for(
            lambda: bool(client.list(GVK("", "v1", "ServiceAccount"), namespace).items),
            timeout=60,
            what=f"the default ServiceAccount in {namespace}",
        )
        created = create_trainjob(client, manifests[0], namespace)
        print(f"created with uid {created['metadata']['uid']}; the manager takes it from here")
        started = time.monotonic()
        last, trainjob = "", created
        view = TrainJobView(cast(TrainJob, trainjob))
        while time.monotonic() - started < 180:
            line, trainjob = _progress_line(client, namespace, trainjob_name)
            if line != last:
                print(f"{time.monotonic() - started:6.1f} s  {line}")
                last = line
            view = TrainJobView(cast(TrainJob, trainjob))
            if view.is_finished:
                break
            time.sleep(0.5)
        elapsed = time.monotonic() - started
        owned = [
            f"{o['kind']}/{o['metadata']['name']}"
            for gvk in (JOBSET_GVK, *_OWNED_GVKS)
            for o in _list_quietly(client, gvk, namespace)
            if _controlled_by_trainjob(o, trainjob_name)
        ]
    finally:
        client.close()

    print(kubectl("get", "trainjob", trainjob_name, "-n", namespace).rstrip())
    print(f"jobsStatus: {_jobs_line(view.jobs_status)}")
    print(f"owned by the TrainJob: {', '.join(owned)}")
    outcome = "Complete" if view.is_complete else "Failed" if view.is_failed else "not finished"
    print("\n== Summary")
    print(f"TrainJob {namespace}/{trainjob_name}: {outcome} {elapsed:.1f} s after it was created.")
    print("\nThe cluster and the manager keep running. Look around with:")
    for line in env_lines(name):
        print(f"  {line}")
    print(f"  kubectl get trainjobs,jobsets,pods -n {namespace}")
    print(f"  kubectl describe trainjob {trainjob_name} -n {namespace}     # conditions and events")
    print(f"  curl -s {manager.metrics_url} | grep -E '^(kubeflow_trainer|controller_runtime_reconcile)'")
    print(f"  tail -f {manager.log}")
    print("Stop everything with:  make cluster-down")
    if not view.is_complete:
        raise ClusterError(f"the demo TrainJob ended {outcome}, not Complete; see {manager.log}")


def _list_quietly(client: Client, gvk: GVK, namespace: str) -> list[dict[str, Any]]:
    try:
        return list(client.list(gvk, namespace).items)
    except (NoKindMatch, NotFound):
        return []


# --------------------------------------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hack/cluster.py",
        description="The Tier 2 local cluster: kwokctl (binary runtime) and JobSet on 127.0.0.1.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    defaults = ClusterOptions()
    up_cmd = sub.add_parser("up", help="start the cluster (reuse it if it is already up and healthy)")
    up_cmd.add_argument("--nodes", type=int, default=defaults.nodes, help="kwok nodes (default %(default)s)")
    up_cmd.add_argument(
        "--pod-start-delay",
        type=parse_duration,
        default=defaults.pod_start_delay,
        help="Pending → Running for every pod without its own annotation (default 1s)",
    )
    up_cmd.add_argument(
        "--pod-run-time",
        type=parse_duration,
        default=defaults.pod_run_time,
        help="Running → Succeeded/Failed for every Job pod without its own annotation (default 2s)",
    )
    up_cmd.add_argument(
        "--timeout",
        type=parse_duration,
        default=defaults.timeout,
        help="upper bound for each start-up wait (default 180s)",
    )
    sub.add_parser("down", help="stop everything and remove the cluster's directories (idempotent)")
    sub.add_parser("env", help="print the shell exports for KUBECONFIG and E2E_CLUSTER")
    sub.add_parser(
        "demo",
        help="up, show health, install the Trainer API, start the manager, run the sample TrainJob to "
        "Complete, leave everything running",
    )
    sub.add_parser(
        "kueue-up",
        help="(re)start Kueue with the TrainJob integration on the host, against the running cluster",
    )
    sub.add_parser("kueue-down", help="stop Kueue and remove its webhook configurations (idempotent)")
    for command in sub.choices.values():
        command.add_argument("--name", default=DEFAULT_NAME, help="cluster name (default %(default)s)")
    return parser


def _kueue_up(name: str) -> None:
    state = ClusterState.read(name)
    if state is None or not is_healthy(state):
        raise ClusterError(f"cluster {name!r} is not up; start it with `make cluster-up`")
    started = time.monotonic()
    process = start_kueue(state)
    print(
        f"kueue pid {process.pid}: ready in {time.monotonic() - started:.1f} s; webhooks at "
        f"https://127.0.0.1:{process.webhook_port}, health http://127.0.0.1:{process.health_port}/readyz, "
        f"metrics https://127.0.0.1:{process.metrics_port}/metrics"
    )
    print(
        f"integrations: {', '.join(KUEUE_FRAMEWORKS)}; label a TrainJob with {KUEUE_QUEUE_LABEL}=<LocalQueue>"
    )
    print(f"log: {process.log}")


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)  # keep stdout in step with the progress lines on stderr
    # `make` and CI stop jobs with SIGTERM: unwind through the same clean-up path as Ctrl-C.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        if args.command == "up":
            state = up(
                ClusterOptions(
                    name=args.name,
                    nodes=args.nodes,
                    pod_start_delay=args.pod_start_delay,
                    pod_run_time=args.pod_run_time,
                    timeout=args.timeout,
                )
            )
            print(f"export KUBECONFIG={state.kubeconfig}")
        elif args.command == "down":
            down(args.name)
            _say(f"cluster {args.name!r} is down")
        elif args.command == "env":
            print("\n".join(env_lines(args.name)))
        elif args.command == "demo":
            demo(args.name)
        elif args.command == "kueue-up":
            _kueue_up(args.name)
        elif args.command == "kueue-down":
            stop_kueue(args.name)
            _say(f"Kueue of cluster {args.name!r} is stopped")
    except ClusterError as exc:
        print(f"cluster: error: {exc}", file=sys.stderr)
        return 1
    except (ApiError, TransportError) as exc:
        print(f"cluster: error: a request to the API server failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("cluster: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = [
    "CONTAINER_LOG_LINES",
    "DEFAULT_NAME",
    "FAIL_LABEL",
    "JOBSET_NAME_LABEL",
    "KUEUE_FRAMEWORKS",
    "KUEUE_QUEUE_LABEL",
    "KUEUE_TRAINJOB_FRAMEWORK",
    "RUN_TIME_ANNOTATION",
    "START_DELAY_ANNOTATION",
    "Binaries",
    "ClusterError",
    "ClusterOptions",
    "ClusterState",
    "Kubectl",
    "KueueProcess",
    "ManagerProcess",
    "build_binaries",
    "cache_directory",
    "check_no_downloads",
    "clear_trainjob",
    "connect",
    "create_trainjob",
    "demo",
    "down",
    "env_lines",
    "install_crds",
    "install_for_local_manager",
    "install_runtimes",
    "install_trainer",
    "is_healthy",
    "kueue_process",
    "kueue_webhook_configurations",
    "locate_binaries",
    "read_manifests",
    "scheduler_plugins_podgroup_crd",
    "service_account_kubeconfig",
    "start_kueue",
    "start_manager",
    "stop_kueue",
    "stop_manager",
    "up",
    "wait_for",
    "wait_for_jobset",
]
