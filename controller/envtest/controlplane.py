"""A real etcd + kube-apiserver on loopback, for integration tests (Tier 1).

Go origin: controller-runtime ``pkg/envtest`` (``Environment``: start, stop, install CRDs and wait for
them) on ``pkg/internal/testing/controlplane`` (``ControlPlane``, ``APIServer``, ``Etcd``). Guarantees:

- :meth:`ControlPlane.start` returns a ready control plane: etcd healthy, kube-apiserver's ``/readyz`` 200,
  an admin kubeconfig written (:attr:`ControlPlane.kubeconfig`). Both listen on 127.0.0.1 only, on ports
  chosen at start. If start fails, whatever was started is stopped and the error ends with the log tail.
- :meth:`ControlPlane.stop` stops kube-apiserver then etcd (SIGTERM, then SIGKILL) and removes the working
  directory unless the caller supplied it. It is idempotent. Whatever is still running when the Python
  process exits, or gets SIGTERM, is stopped by the hooks in ``controller.envtest.process``; a runner
  killed outright takes its processes with it, and the next start removes the directory it left behind.
- :meth:`ControlPlane.install_crds` server-side-applies CustomResourceDefinitions and returns only when
  each is Established and every served version is in discovery, so any client can use it at once.
- :meth:`ControlPlane.kubeconfig_for_service_account` gives a kubeconfig that authenticates as a
  ServiceAccount with a bound token from the TokenRequest API; RBAC applies to it as in a real cluster.
- :meth:`ControlPlane.restart_apiserver` breaks every open connection and watch, and brings kube-apiserver
  back on the same URL with the same credentials and data: what clients see when a real apiserver restarts.
- :meth:`ControlPlane.compact_etcd` compacts etcd past every change made so far: a request for an older
  resourceVersion that reaches etcd gets 410 Gone. With the watch cache on (the default, as in real
  clusters) watches and exact lists are served from kube-apiserver's cache, which does not notice the
  compaction at once; there a watch gets 410 only for resourceVersions older than the cache's window, such
  as anything before the last apiserver start (:meth:`ControlPlane.restart_apiserver`). To send every
  request to etcd, start a plane with ``apiserver_flags={"watch-cache": "false"}``.

What Tier 1 does not have (see docs/development.md): no controller-manager, so no namespace finalization
(deleted namespaces stay Terminating), no garbage collection, no Job or Pod controllers, no default
ServiceAccount; no scheduler or nodes. Not thread-safe: one owner starts, uses and stops a plane.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import orjson
import structlog
import yaml

from controller.clock import REAL_CLOCK, Clock
from controller.envtest.apiserver import ADMIN_USER, APIServer, PKIFiles, Response
from controller.envtest.binaries import Binaries, find_binaries
from controller.envtest.errors import EnvtestError, RequestError
from controller.envtest.etcd import Etcd
from controller.envtest.kubeconfig import build_kubeconfig, write_kubeconfig
from controller.envtest.process import register, unregister

_log = structlog.get_logger("controller.envtest")

FIELD_MANAGER = "envtest"
_CRD_API = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
_CRD_KIND = "CustomResourceDefinition"
_CRD_FILE_SUFFIXES = (".yaml", ".yml", ".json")

CRDSource = str | os.PathLike[str] | Mapping[str, Any]

# Working directories we create are <tmp>/envtest-XXXX and hold the creating process's pid, so a later
# start can remove those whose owner died without cleaning up (SIGKILL): each holds ~120 MiB of etcd data.
_DIRECTORY_PREFIX = "envtest-"
_OWNER_FILE = "owner.pid"


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlPlaneStatistics:
    """How long the plane took to come up, and what it has done since."""

    etcd_start_s: float
    apiserver_start_s: float
    apiserver_restarts: int
    crds_installed: int
    crd_install_s: float


class ControlPlane:
    """etcd + kube-apiserver; see the module docstring for the guarantees.

    Use as a context manager, or call :meth:`start` and :meth:`stop`::

        with ControlPlane() as plane:
            plane.install_crds(["config/crd"])
            ...  # connect with plane.kubeconfig
    """

    def __init__(
        self,
        binaries: Binaries | None = None,
        *,
        directory: str | os.PathLike[str] | None = None,
        apiserver_flags: Mapping[str, str] | None = None,
        clock: Clock = REAL_CLOCK,
        start_timeout: float = 120.0,
    ) -> None:
        self._binaries = binaries if binaries is not None else find_binaries()
        self._given_directory = Path(directory) if directory is not None else None
        self._apiserver_flags = dict(apiserver_flags or {})
        self._clock = clock
        self._start_timeout = start_timeout
        self._state = "new"
        self._directory: Path | None = None
        self._etcd: Etcd | None = None
        self._apiserver: APIServer | None = None
        self._kubeconfig: Path | None = None
        self._etcd_start_s = 0.0
        self._apiserver_start_s = 0.0
        self._restarts = 0
        self._crds_installed = 0
        self._crd_install_s = 0.0

    # -- lifecycle --------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start etcd and kube-apiserver, wait until both are ready, and write the admin kubeconfig."""
        if self._state != "new":
            raise RuntimeError(f"a control plane starts once; this one is {self._state}")
        self._state = "starting"
        register(self)
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        self._state = "running"
        _log.info(
            "envtest.started",
            server=self.server,
            etcd_start_s=round(self._etcd_start_s, 3),
            apiserver_start_s=round(self._apiserver_start_s, 3),
        )

    def _start(self) -> None:
        if self._given_directory is not None:
            self._given_directory.mkdir(parents=True, exist_ok=True)
            self._directory = self._given_directory
        else:
            sweep_abandoned_directories(Path(tempfile.gettempdir()))
            self._directory = Path(tempfile.mkdtemp(prefix=_DIRECTORY_PREFIX))
            (self._directory / _OWNER_FILE).write_text(str(os.getpid()))
        directory = self._directory
        began = self._clock.monotonic()
        self._etcd = Etcd(
            self._binaries.etcd,
            directory / "etcd-data",
            directory / "etcd.log",
            clock=self._clock,
            start_timeout=self._start_timeout,
        )
        self._etcd.start()
        etcd_ready = self._clock.monotonic()
        self._etcd_start_s = etcd_ready - began
        pki = PKIFiles.create(directory / "pki")
        self._apiserver = APIServer(
            self._binaries.kube_apiserver,
            self._etcd.client_url,
            pki,
            directory / "kube-apiserver.log",
            extra_flags=self._apiserver_flags,
            clock=self._clock,
            start_timeout=self._start_timeout,
        )
        self._apiserver.start()
        self._apiserver_start_s = self._clock.monotonic() - etcd_ready
        config = build_kubeconfig(
            server=self._apiserver.url,
            ca_pem=pki.ca_cert.read_bytes(),
            user=ADMIN_USER,
            client=pki.admin_keypair(),
            namespace="default",
        )
        self._kubeconfig = write_kubeconfig(directory / "admin.kubeconfig", config)

    def stop(self) -> None:
        """Stop kube-apiserver, then etcd, then remove the working directory if we created it. Idempotent."""
        if self._state in ("new", "stopped"):
            return
        try:
            if self._apiserver is not None:
                self._apiserver.stop()
        finally:
            try:
                if self._etcd is not None:
                    self._etcd.stop()
            finally:
                self._state = "stopped"
                unregister(self)
                if self._directory is not None and self._given_directory is None:
                    shutil.rmtree(self._directory, ignore_errors=True)
        _log.info("envtest.stopped")

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def restart_apiserver(self) -> None:
        """Stop kube-apiserver and start it again on the same port, with the same etcd and credentials."""
        apiserver = self._running_apiserver()
        began = self._clock.monotonic()
        apiserver.restart()
        self._restarts += 1
        _log.info("envtest.apiserver_restarted", duration_s=round(self._clock.monotonic() - began, 3))

    def compact_etcd(self) -> int:
        """Compact etcd past every change so far; return the etcd revision (see the module docstring)."""
        self._running_apiserver()
        if self._etcd is None:
            raise RuntimeError("the control plane has no etcd")
        return self._etcd.compact()

    # -- where things are -------------------------------------------------------------------------------

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig (``CN=admin, O=system:masters``, embedded certificates)."""
        if self._kubeconfig is None:
            raise RuntimeError("the control plane has not been started")
        return self._kubeconfig

    @property
    def server(self) -> str:
        """kube-apiserver's URL, ``https://127.0.0.1:<port>``."""
        return self._running_apiserver().url

    @property
    def pids(self) -> dict[str, int]:
        """The running processes' ids by name (``etcd``, ``kube-apiserver``), for ``/proc`` readers."""
        found = {"etcd": self._etcd, "kube-apiserver": self._apiserver}
        return {name: pid for name, process in found.items() if process and (pid := process.pid) is not None}

    @property
    def etcd_url(self) -> str:
        if self._etcd is None:
            raise RuntimeError("the control plane has not been started")
        return self._etcd.client_url

    @property
    def directory(self) -> Path:
        """The working directory: logs, certificates, kubeconfigs and etcd's data."""
        if self._directory is None:
            raise RuntimeError("the control plane has not been started")
        return self._directory

    @property
    def ca_pem(self) -> bytes:
        """The CA that signed kube-apiserver's serving certificate and every client certificate."""
        return self._running_apiserver().pki.ca_cert.read_bytes()

    def statistics(self) -> ControlPlaneStatistics:
        return ControlPlaneStatistics(
            etcd_start_s=self._etcd_start_s,
            apiserver_start_s=self._apiserver_start_s,
            apiserver_restarts=self._restarts,
            crds_installed=self._crds_installed,
            crd_install_s=self._crd_install_s,
        )

    # -- API operations ---------------------------------------------------------------------------------

    def admin_request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | bytes | None = None,
        *,
        content_type: str = "application/json",
    ) -> Response:
        """One request to kube-apiserver as the admin; returns any status (the caller checks it)."""
        payload = body if isinstance(body, bytes) or body is None else orjson.dumps(body)
        return self._running_apiserver().request(method, path, payload, content_type=content_type)

    def kubeconfig_for_service_account(
        self, namespace: str, name: str, *, expiration_seconds: int = 3600
    ) -> Path:
        """Write a kubeconfig that authenticates as ServiceAccount ``namespace/name``; create it if missing.

        The namespace must exist. The token is a bound token from the TokenRequest API, valid for
        ``expiration_seconds`` (kube-apiserver's minimum is 600).
        """
        accounts = f"/api/v1/namespaces/{quote(namespace)}/serviceaccounts"
        created = self.admin_request(
            "POST", accounts, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}
        )
        if created.status not in (201, 409):  # 409: it already exists, which is fine
            raise RequestError("POST", accounts, created.status, created.body)
        token_path = f"{accounts}/{quote(name)}/token"
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": expiration_seconds},
        }
        answer = self.admin_request("POST", token_path, request)
        if answer.status != 201:
            raise RequestError("POST", token_path, answer.status, answer.body)
        config = build_kubeconfig(
            server=self.server,
            ca_pem=self.ca_pem,
            user=f"system:serviceaccount:{namespace}:{name}",
            token=answer.json()["status"]["token"],
            namespace=namespace,
        )
        return write_kubeconfig(self.directory / f"sa-{namespace}-{name}.kubeconfig", config)

    def install_crds(self, sources: Iterable[CRDSource], *, timeout: float = 60.0) -> list[str]:
        """Server-side-apply the CRDs in ``sources`` and wait until they are served; return their names.

        A source is a CRD dict, a YAML/JSON file (documents of other kinds are skipped, as envtest does) or
        a directory of such files (not recursive).
        """
        crds = load_crds(sources)
        began = self._clock.monotonic()
        names: list[str] = []
        for crd in crds:
            name = crd["metadata"]["name"]
            query = urlencode({"fieldManager": FIELD_MANAGER, "force": "true"})
            path = f"{_CRD_API}/{quote(name)}?{query}"
            applied = self.admin_request("PATCH", path, crd, content_type="application/apply-patch+yaml")
            if applied.status not in (200, 201):
                raise RequestError("PATCH", path, applied.status, applied.body)
            names.append(name)
        self._wait_served(crds, timeout)
        self._crds_installed += len(crds)
        self._crd_install_s += self._clock.monotonic() - began
        return names

    def _wait_served(self, crds: list[dict[str, Any]], timeout: float) -> None:
        deadline = self._clock.monotonic() + timeout
        pending = {crd["metadata"]["name"]: crd for crd in crds}
        never = threading.Event()  # nothing sets it: clock.wait() below is a pause
        while True:
            for name, crd in list(pending.items()):
                if self._crd_served(crd):
                    del pending[name]
            if not pending:
                return
            if self._clock.monotonic() >= deadline:
                raise EnvtestError(
                    f"CRDs not established and discoverable after {timeout:g} s: {sorted(pending)}"
                )
            self._clock.wait(never, 0.1)

    def _crd_served(self, crd: Mapping[str, Any]) -> bool:
        got = self.admin_request("GET", f"{_CRD_API}/{quote(crd['metadata']['name'])}")
        if got.status != 200:
            return False
        conditions = got.json().get("status", {}).get("conditions") or []
        if not any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
            return False
        spec = crd["spec"]
        for version in spec.get("versions", []):
            if not version.get("served", True):
                continue
            discovery = self.admin_request("GET", f"/apis/{spec['group']}/{version['name']}")
            if discovery.status != 200:
                return False
            served = {r.get("name") for r in discovery.json().get("resources", [])}
            if spec["names"]["plural"] not in served:
                return False
        return True

    def _running_apiserver(self) -> APIServer:
        if self._state != "running" or self._apiserver is None:
            raise RuntimeError(f"the control plane is not running (it is {self._state})")
        return self._apiserver

    def __repr__(self) -> str:
        if self._state == "running" and self._apiserver is not None and self._etcd is not None:
            where = f", server={self._apiserver.url!r}, etcd={self._etcd.client_url!r}"
        else:
            where = ""
        return f"ControlPlane({self._state}{where}, directory={str(self._directory)!r})"


def sweep_abandoned_directories(parent: Path) -> list[Path]:
    """Remove ``parent/envtest-*`` working directories whose owning process is gone; return them.

    Directories without a readable owner file (not ours, or being created) and those whose owner is
    alive, or might be (a pid we may not signal), are left alone.
    """
    removed: list[Path] = []
    for directory in parent.glob(f"{_DIRECTORY_PREFIX}*"):
        try:
            owner = int((directory / _OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue
        try:
            os.kill(owner, 0)
        except ProcessLookupError:
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(directory)
            _log.info("envtest.removed_abandoned_directory", directory=str(directory), owner=owner)
        except PermissionError:
            continue  # the pid exists and belongs to someone else
    return removed


def load_crds(sources: Iterable[CRDSource]) -> list[dict[str, Any]]:
    """Read CustomResourceDefinitions from dicts, files and directories (see :meth:`install_crds`)."""
    if isinstance(sources, str | os.PathLike | Mapping):
        raise TypeError("sources must be an iterable of paths or dicts, not a single one")
    crds: list[dict[str, Any]] = []
    for source in sources:
        if isinstance(source, Mapping):
            if source.get("kind") != _CRD_KIND:
                raise ValueError(f"not a {_CRD_KIND}: kind={source.get('kind')!r}")
            crds.append(dict(source))
            continue
        path = Path(source)
        files = (
            sorted(p for p in path.iterdir() if p.suffix in _CRD_FILE_SUFFIXES and p.is_file())
            if path.is_dir()
            else [path]
        )
        for file in files:
            with file.open("rb") as f:
                try:
                    docs = list(yaml.safe_load_all(f))
                except yaml.YAMLError as exc:
                    raise EnvtestError(f"cannot parse {file}: {exc}") from exc
            crds.extend(d for d in docs if isinstance(d, dict) and d.get("kind") == _CRD_KIND)
    return crds
