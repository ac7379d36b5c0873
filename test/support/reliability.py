"""What the reliability scenarios (``test/reliability``) share.

- :class:`Profile`: how long and how often a scenario runs, ``ci`` (the default run) or ``soak``
  (``make soak``).
- :class:`Figures`: each test's figures, printed as the test ends (``-s``) and summed up at session end.
- :class:`TrainerManager`: the real Trainer manager in this process (its informers, workers and, when asked,
  leader election), as ``test/integration/trainer/conftest.py`` runs it, on any kubeconfig (direct, or
  through a :class:`~faultproxy.FaultProxy`).
- :class:`ManagerProcess`: the ``trainer-controller-manager`` binary as a child process (``python -m
  trainer_controller_manager``, started by ``support.launcher``), its JSON log in a file; for the scenarios
  that kill or partition a process.
  :class:`LeaseTimings` sets its leader election timings and computes client-go's worst-case takeover.
- :class:`ApiserverProxies`: fault proxies (``support.faultproxy``) in front of kube-apiserver, with
  kubeconfigs that go through them (the proxy terminates TLS with its own CA; a bearer token passes
  through).
- Object builders (a one-job Torch runtime, TrainJobs) and :func:`inventory`, which reads what the
  manager made of a set of TrainJobs and names every object lost, duplicated or orphaned.
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import ssl
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from controller.client.client import Client
from controller.client.errors import NotFound
from controller.client.gvk import GVK
from controller.envtest import ControlPlane, eventually
from controller.envtest.certs import CertificateAuthority
from controller.envtest.kubeconfig import build_kubeconfig, write_kubeconfig
from controller.envtest.process import free_port
from controller.manager.manager import Manager, ManagerOptions
from controller.trainer.setup import TrainerControllers, cache_by_object, new_registry, setup_with_manager
from support import faultproxy, launcher
from support import install_manifests as install
from support import trainer_objects as objects

TRAINJOB = GVK("trainer.kubeflow.org", "v1alpha1", "TrainJob")
TRAINING_RUNTIME = GVK("trainer.kubeflow.org", "v1alpha1", "TrainingRuntime")
JOBSET = GVK("jobset.x-k8s.io", "v1alpha2", "JobSet")
CONFIGMAP = GVK("", "v1", "ConfigMap")
SECRET = GVK("", "v1", "Secret")
EVENT = GVK("", "v1", "Event")
LEASE = GVK("coordination.k8s.io", "v1", "Lease")

USER = "reliability-test"
LEASE_NAME = "trainer.kubeflow.org"  # the shipped Role grants get/update on this Lease name only
OPERATOR_NAMESPACE = install.NAMESPACE
CONCURRENCY = {
    "TrainJob.trainer.kubeflow.org": 5,
    "TrainingRuntime.trainer.kubeflow.org": 1,
    "ClusterTrainingRuntime.trainer.kubeflow.org": 1,
}


# --- how long, how often ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    """``ci``: one run, short windows (the default run stays within its time budget); ``soak``: repeats and
    the full windows the issue names (``make soak``)."""

    name: str
    runs: int
    idle_window: float
    """Seconds the no-hot-loop scenario watches idle TrainJobs (and the always-failing apply)."""
    fault_window: float
    """Seconds 429/5xx are injected."""


CI = Profile(name="ci", runs=1, idle_window=15.0, fault_window=15.0)
SOAK = Profile(name="soak", runs=5, idle_window=60.0, fault_window=60.0)


def median_max(values: Iterable[float]) -> str:
    data = list(values)
    if not data:
        return "n/a"
    return f"{statistics.median(data):.1f}/{max(data):.1f}"


@dataclass
class Figures:
    """Figures per scenario: printed when reported, listed again at session end."""

    rows: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def report(self, scenario: str, **values: Any) -> None:
        self.rows.append((scenario, values))
        print(f"\n[reliability] {scenario}: " + ", ".join(f"{k}={_show(v)}" for k, v in values.items()))

    def lines(self) -> list[str]:
        return [f"{s}: " + ", ".join(f"{k}={_show(v)}" for k, v in values.items()) for s, values in self.rows]


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


# --- objects ------------------------------------------------------------------------------------------------


def torch_runtime(namespace: str, name: str = "small") -> dict[str, Any]:
    """A TrainingRuntime with one replicated job (``node``) and the Torch policy: a TrainJob of it becomes
    one JobSet and nothing else (no PodGroup, no Secret)."""
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "replicas": 1,
                            "template": {
                                "metadata": {
                                    "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
                                },
                                "spec": {
                                    "template": {
                                        "spec": {"containers": [{"name": "node", "image": "test:runtime"}]}
                                    }
                                },
                            },
                        }
                    ]
                }
            },
        },
    }


def mpi_runtime(namespace: str, name: str = "mpi") -> dict[str, Any]:
    """An MPI TrainingRuntime (launcher + node): its TrainJobs get an SSH-key Secret and a hostfile."""

    def job(job_name: str, ancestor: str | None) -> dict[str, Any]:
        metadata = {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": ancestor}} if ancestor else {}
        return {
            "name": job_name,
            "replicas": 1,
            "template": {
                "metadata": metadata,
                "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "test:runtime"}]}}},
            },
        }

    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "mlPolicy": {"numNodes": 1, "mpi": {}},
            "template": {"spec": {"replicatedJobs": [job("launcher", None), job("node", "trainer")]}},
        },
    }


def trainjob(namespace: str, name: str, runtime: str = "small", *, suspend: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"runtimeRef": {"name": runtime, "kind": "TrainingRuntime"}, "suspend": suspend},
    }


# The Trainer integration tests' reads, one copy: ``get`` raises AssertionError (so ``eventually`` retries)
# while the object does not exist; ``absent`` says whether it is gone.
get = objects.get
absent = objects.absent


def condition_types(obj: Mapping[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}


@dataclass(frozen=True, slots=True, kw_only=True)
class Inventory:
    """What the manager made of a set of TrainJobs; see :func:`inventory`."""

    trainjobs: int
    jobsets: dict[str, str]
    """TrainJob name → the uid of its JobSet."""
    lost: list[str]
    """TrainJobs without their JobSet, or without the status they should have."""
    duplicated: list[str]
    """JobSets owned more than once, or owned by a TrainJob other than their namesake."""
    orphaned: list[str]
    """JobSets whose owner is not one of the TrainJobs."""


def inventory(
    client: Client,
    namespace: str,
    names: Iterable[str],
    *,
    expect_condition: str | None = "Suspended",
) -> Inventory:
    """Every TrainJob of ``names`` should have exactly one JobSet of its name, controlled by it alone, and
    (``expect_condition``) that condition True in its status."""
    wanted = set(names)
    trainjobs = {t["metadata"]["name"]: t for t in client.list(TRAINJOB, namespace).items}
    jobsets = {j["metadata"]["name"]: j for j in client.list(JOBSET, namespace).items}
    lost: list[str] = sorted(wanted - set(trainjobs))
    duplicated: list[str] = []
    orphaned: list[str] = []
    uids: dict[str, str] = {}
    for name in sorted(wanted & set(trainjobs)):
        owner_uid = trainjobs[name]["metadata"]["uid"]
        jobset = jobsets.get(name)
        if jobset is None:
            lost.append(f"{name}: no JobSet")
            continue
        owners = jobset["metadata"].get("ownerReferences") or []
        controllers = [o for o in owners if o.get("controller")]
        if len(controllers) != 1 or controllers[0]["uid"] != owner_uid:
            duplicated.append(f"{name}: owners {[(o['kind'], o['name'], o['uid']) for o in owners]}")
        uids[name] = jobset["metadata"]["uid"]
        if expect_condition and condition_types(trainjobs[name]).get(expect_condition) != "True":
            lost.append(f"{name}: status without {expect_condition}=True")
    known = {t["metadata"]["uid"] for t in trainjobs.values()}
    for name, jobset in jobsets.items():
        owners = {o["uid"] for o in jobset["metadata"].get("ownerReferences") or []}
        if not owners & known:
            orphaned.append(name)
    return Inventory(trainjobs=len(wanted), jobsets=uids, lost=lost, duplicated=duplicated, orphaned=orphaned)


def converged(client: Client, namespace: str, names: Iterable[str], **kwargs: Any) -> Inventory:
    """:func:`inventory`, raising AssertionError (for ``eventually``) until nothing is lost."""
    found = inventory(client, namespace, names, **kwargs)
    assert not found.lost, f"{len(found.lost)} not converged, e.g. {found.lost[:5]}"
    return found


_LEFT_BEHIND = (
    "/apis/trainer.kubeflow.org/v1alpha1/namespaces/{}/trainjobs",
    "/apis/trainer.kubeflow.org/v1alpha1/namespaces/{}/trainingruntimes",
    "/apis/jobset.x-k8s.io/v1alpha2/namespaces/{}/jobsets",
)


def empty_namespace(client: Client, namespace: str) -> None:
    """Delete the TrainJobs, runtimes and JobSets of ``namespace`` (``deletecollection``). Tier 1 never
    finalizes a deleted namespace, so what it held would otherwise live on, and every later manager of the
    session (they watch all namespaces) would reconcile it, its writes refused in a Terminating namespace:
    traffic in the next scenario's figures."""
    for path in _LEFT_BEHIND:
        answer = client.transport.request("DELETE", path.format(namespace))
        assert answer.status in (200, 404), (path, answer.status, answer.body[:300])


def create_all(client: Client, objects: Iterable[Mapping[str, Any]]) -> int:
    """Create each object, retrying a refused or broken request (the API server may be restarting) until
    it exists; AlreadyExists means an earlier attempt went through (this loop's, or the client's own retry
    after a 429 or 5xx with Retry-After), so it counts as created. Returns the retries."""
    from controller.client.errors import AlreadyExists, ApiError, TransportError

    retries = 0
    for obj in objects:
        deadline = time.monotonic() + 90
        while True:
            try:
                client.create(dict(obj), field_manager=USER)
                break
            except AlreadyExists:
                # The object exists: either an earlier attempt here went through, or the client itself sent
                # the create again (it retries a request answered 429 or 5xx with Retry-After) after the
                # first one had been stored. Either way the create succeeded.
                break
            except (TransportError, ApiError) as exc:
                if isinstance(exc, ApiError) and exc.status not in (429, 500, 503, 504):
                    raise
                if time.monotonic() > deadline:
                    raise
                retries += 1
                time.sleep(0.2)
    return retries


# --- the manager, in this process ---------------------------------------------------------------------------


class TrainerManager:
    """The Trainer manager running in this process on ``kubeconfig`` (a ServiceAccount's, so the shipped
    RBAC applies); :meth:`stop` stops and joins it. Health and metrics on free loopback ports."""

    def __init__(self, kubeconfig: Path, *, name: str, leader_election: bool = False) -> None:
        registry = new_registry()
        options = ManagerOptions(
            leader_election=leader_election,
            leader_election_id=LEASE_NAME,
            leader_election_namespace=OPERATOR_NAMESPACE,
            health_probe_bind_address="127.0.0.1:0",
            metrics_bind_address="0",
            by_object=cache_by_object(registry),
        )
        self.manager = Manager.from_kubeconfig(str(kubeconfig), options=options, user_agent=name)
        self.controllers: TrainerControllers = setup_with_manager(
            self.manager, registry, group_kind_concurrency=CONCURRENCY
        )
        self.failures: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, name=f"test/manager/{name}")

    def _run(self) -> None:
        try:
            self.manager.run()
        except BaseException as exc:
            self.failures.append(exc)

    def start(self, *, timeout: float = 90.0) -> TrainerManager:
        self._thread.start()

        def elected() -> None:
            assert not self.failures, self.failures
            assert self.manager.elected, "not leading yet"
            assert self.manager.cache.has_synced(), "caches not synced yet"

        try:
            eventually(elected, timeout=timeout, interval=0.1)
        except BaseException:
            # Not elected or not synced in time: do not leave the manager running (and writing) behind.
            self.stop()
            raise
        return self

    def queue_idle(self) -> None:
        """AssertionError unless the TrainJob queue holds nothing, ready or waiting to be retried."""
        queue = self._trainjob_queue()
        assert len(queue) == 0, f"{len(queue)} TrainJob requests still queued: {queue!r}"

    def _trainjob_queue(self) -> Any:
        for runnable in self.manager._runnables:
            if getattr(runnable, "name", None) == "trainjob_controller":
                return runnable.queue
        raise AssertionError("no trainjob_controller in the manager")

    def stop(self) -> None:
        """Stop and join the manager, then close its clients (idempotent; safe if it never started)."""
        self.manager.stop()
        if self._thread.is_alive():
            self._thread.join(60)
        alive = self._thread.is_alive()
        self.manager.client.close()
        # With leader election, Manager.from_kubeconfig builds the Lease client on a transport of its own.
        lease_client = self.manager._leader_election_client
        if lease_client is not None and lease_client is not self.manager.client:
            lease_client.close()
        assert not alive, "the manager did not stop"


def caches_match_server(manager: TrainerManager, client: Client) -> int:
    """AssertionError unless every informer of ``manager`` holds exactly what a fresh LIST with the same
    namespace and selectors returns (by key and resourceVersion); returns how many informers were compared."""
    from controller.informers.store import meta_namespace_key

    informers = manager.manager.cache.informers()  # type: ignore[attr-defined]
    for gvk, informer in informers.items():
        lw = informer._lw  # the informer's own list/watch options: namespace and selectors
        cached = {
            meta_namespace_key(o): o["metadata"]["resourceVersion"] for o in informer.get_store().list()
        }
        fresh = client.list(
            gvk, lw.namespace, label_selector=lw.label_selector, field_selector=lw.field_selector
        )
        listed = {meta_namespace_key(o): o["metadata"]["resourceVersion"] for o in fresh.items}
        assert cached == listed, f"{gvk.kind}.{gvk.group}: cache {len(cached)} objects, LIST {len(listed)}"
    return len(informers)


def reconcile_errors(controller: str = "trainjob_controller") -> float:
    """``controller_runtime_reconcile_errors_total`` for one controller (process-wide counter)."""
    from controller.metrics import REGISTRY

    value = REGISTRY.get_sample_value("controller_runtime_reconcile_errors_total", {"controller": controller})
    return value or 0.0


# --- the manager binary -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseTimings:
    """Leader election timings, in seconds; :data:`DEFAULT_TIMINGS` are client-go's (and the shipped
    configuration's)."""

    lease_duration: float
    renew_deadline: float
    retry_period: float

    def worst_takeover(self, margin: float = 5.0) -> float:
        """client-go's worst case for a standby to take a lease its holder stopped renewing, plus
        ``margin`` for a loaded machine: it sees the last renewal up to one jittered retry period late
        (jitter up to +120 %), then acquires at the first attempt after a lease duration, up to one more
        late (``test/integration/test_manager_integration.py``'s ``worst_takeover``, for any timings)."""
        from controller.manager.leaderelection import JITTER_FACTOR

        return self.lease_duration + 2 * self.retry_period * (1 + JITTER_FACTOR) + margin


DEFAULT_TIMINGS = LeaseTimings(lease_duration=15.0, renew_deadline=10.0, retry_period=2.0)
SHORT_TIMINGS = LeaseTimings(lease_duration=6.0, renew_deadline=4.0, retry_period=1.0)


class ManagerProcess:
    """``python -m trainer_controller_manager`` in its own process group (killed with the test run at the
    latest), logging JSON lines to ``<directory>/manager.log``; started by ``support.launcher``. Leader
    election with client-go's default timings (15 s lease, 10 s renew deadline, 2 s retry) or ``timings``,
    unless ``leader_election`` is False."""

    def __init__(
        self,
        directory: Path,
        kubeconfig: Path,
        *,
        name: str,
        leader_election: bool = True,
        timings: LeaseTimings | None = None,
        cert_management: bool = False,
        log_level: str = "info",
    ) -> None:
        self.name = name
        self.directory = directory
        election: dict[str, Any] | None = None
        if leader_election:
            election = {"leaderElect": True, "resourceName": LEASE_NAME}
            if timings is not None:
                election |= {
                    "leaseDuration": f"{timings.lease_duration:g}s",
                    "renewDeadline": f"{timings.renew_deadline:g}s",
                    "retryPeriod": f"{timings.retry_period:g}s",
                }
        config = launcher.configuration(
            _BASE_CONFIG,
            webhook_port=free_port(),
            cert_management=cert_management,
            leader_election=election,
        )
        # With certificate management off, the launcher writes the files someone else provides (as
        # cert-manager would).
        self.handle = launcher.prepare(
            directory,
            kubeconfig,
            config,
            name=name,
            ca_name=f"{name}-ca",
            log_level=log_level,
            environ={"POD_NAMESPACE": OPERATOR_NAMESPACE},
        )
        self.log_path = self.handle.log
        self.process = self.handle.process

    def start(self) -> ManagerProcess:
        self.handle.start()
        return self

    @property
    def pid(self) -> int:
        pid = self.process.pid
        assert pid is not None, f"{self.name} was not started"
        return pid

    def lines(self) -> list[dict[str, Any]]:
        return self.handle.lines()

    def events(self, name: str) -> list[dict[str, Any]]:
        return self.handle.events(name)

    @property
    def identity(self) -> str:
        """The lease identity it logged at start (AssertionError until then)."""
        starting = self.events("manager.starting")
        assert starting, f"{self.name} has not started its manager yet:\n{self.tail()}"
        return str(starting[0]["identity"])

    def running(self) -> bool:
        return self.handle.running()

    def kill(self) -> None:
        """SIGKILL the whole process group, at once, and reap it."""
        os.killpg(self.pid, signal.SIGKILL)
        self.process.wait_for_exit(30)

    def terminate(self) -> None:
        self.handle.terminate()

    def wait(self, timeout: float) -> int | None:
        return self.handle.wait(timeout)

    def stop(self) -> None:
        self.process.stop(grace=5)

    def tail(self, lines: int = 30) -> str:
        return self.handle.tail(lines)

    def __repr__(self) -> str:
        return f"<ManagerProcess {self.name} {self.process!r}>"


_BASE_CONFIG = {
    "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
    "kind": "Configuration",
    "controller": {"groupKindConcurrency": {"TrainJob.trainer.kubeflow.org": 5}},
}
"""What the scenarios' managers run with, besides :func:`support.launcher.configuration`'s loopback
addresses (metrics off): everything else at its default."""


def lease_holder(client: Client) -> str:
    try:
        lease = client.get(LEASE, LEASE_NAME, OPERATOR_NAMESPACE)
    except NotFound:
        return ""
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def delete_lease(client: Client) -> None:
    with contextlib.suppress(NotFound):
        client.delete(LEASE, LEASE_NAME, OPERATOR_NAMESPACE)


# --- proxies in front of kube-apiserver ---------------------------------------------------------------------


class ApiserverProxies:
    """Makes :class:`~faultproxy.FaultProxy` instances in front of one control plane's kube-apiserver.

    Each proxy serves TLS with a certificate from this object's own CA; :meth:`kubeconfig` writes a copy of
    a token kubeconfig that points at a proxy and trusts that CA (the token passes through). With
    ``admin=True`` the proxy presents the plane's admin client certificate upstream instead, for a client
    that has no token. Every proxy made is stopped by :meth:`stop_all`.
    """

    def __init__(self, plane: ControlPlane, directory: Path) -> None:
        self.plane = plane
        self.directory = directory
        self.ca = CertificateAuthority.new("faultproxy-ca")
        cert, key = self.ca.issue_serving(["127.0.0.1"]).write(directory, "proxy.crt", "proxy.key")
        self._server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._server_tls.load_cert_chain(cert, key)
        self._server_tls.set_alpn_protocols(["http/1.1"])
        self.proxies: list[Any] = []

    def _upstream_tls(self, admin: bool) -> ssl.SSLContext:
        context = ssl.create_default_context(cadata=self.plane.ca_pem.decode())
        context.set_alpn_protocols(["http/1.1"])
        if admin:
            config = yaml.safe_load(self.plane.kubeconfig.read_text())
            user = config["users"][0]["user"]
            cert = self.directory / "admin.crt"
            key = self.directory / "admin.key"
            cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
            key.write_bytes(base64.b64decode(user["client-key-data"]))
            os.chmod(key, 0o600)
            context.load_cert_chain(cert, key)
        return context

    def new(self, name: str, *, admin: bool = False, seed: int = 0) -> Any:
        host_port = self.plane.server.removeprefix("https://")
        host, port = host_port.rsplit(":", 1)
        proxy = faultproxy.FaultProxy(
            (host, int(port)),
            name=name,
            server_tls=self._server_tls,
            upstream_tls=self._upstream_tls(admin),
            seed=seed,
        ).start()
        self.proxies.append(proxy)
        return proxy

    def kubeconfig(self, proxy: Any, token_kubeconfig: Path | None, name: str) -> Path:
        """A kubeconfig to ``proxy`` with the token of ``token_kubeconfig`` (None: the admin, whose client
        certificate the proxy itself presents; make the proxy with ``admin=True``)."""
        if token_kubeconfig is None:
            placeholder = CertificateAuthority.new("unused").issue_client("unused")
            config = build_kubeconfig(
                server=proxy.url, ca_pem=self.ca.cert_pem, user="admin", client=placeholder
            )
        else:
            token = yaml.safe_load(token_kubeconfig.read_text())["users"][0]["user"]["token"]
            config = build_kubeconfig(server=proxy.url, ca_pem=self.ca.cert_pem, user=name, token=token)
        return write_kubeconfig(self.directory / f"{name}.kubeconfig", config)

    def stop_all(self) -> None:
        """Stop every proxy, even if stopping one fails; then raise the first failure."""
        failures: list[BaseException] = []
        for proxy in self.proxies:
            try:
                proxy.stop()
            except Exception as exc:  # collected; the first is raised below
                failures.append(exc)
        self.proxies.clear()
        if failures:
            raise failures[0]


def wait_for(predicate: Callable[[], bool], *, timeout: float, interval: float = 0.1) -> float:
    """Seconds until ``predicate()`` held (AssertionError after ``timeout``)."""
    began = time.monotonic()

    def holds() -> None:
        assert predicate(), f"not within {timeout} s"

    eventually(holds, timeout=timeout, interval=interval)
    return time.monotonic() - began
