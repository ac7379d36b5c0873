"""The Trainer manager of a kwok cluster: ``trainer-controller-manager`` as a host process for ``make demo``
and the kwok e2e path.

:func:`start_manager` runs the real controller (this package's console script, through
``support.launcher``) as a process of its own on the host, with the shipped configuration except for its
bind addresses (free loopback ports, metrics over plain HTTP), the Lease's namespace and certificate
management (off: a throwaway CA's serving certificate for 127.0.0.1), authenticated as its ServiceAccount
with the shipped RBAC. It registers the webhook configurations of ``config/webhook/`` by URL
(``launcher.webhook_configurations``). Like the JobSet controller it outlives the command that started it
(its pid and ports are in ``<own dir>/manager.json``); :func:`stop_manager`, or ``support.kwok.down``, stops
it.

Go origin: none. Deliberately missing: the Deployment and Service of an in-cluster install (the kind path
has those), and certificate rotation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from controller.client.errors import ApiError, NotFound, TransportError
from controller.client.gvk import GVK
from controller.envtest.process import free_port
from support import launcher
from support.install import (
    INSTALL_FIELD_MANAGER,
    MANAGER_NAMESPACE,
    connect,
    install_for_local_manager,
    service_account_kubeconfig,
)
from support.kwok import DEFAULT_NAME, ClusterState, own_dir
from support.process import HAVE_PROC, ClusterError, cmdline, http_ok, names_directory, pid_alive, terminate


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
        return http_ok(f"http://127.0.0.1:{self.health_port}/readyz")


def _manager_state(name: str) -> Path:
    return own_dir(name) / "manager.json"


def manager_process(name: str = DEFAULT_NAME) -> ManagerProcess | None:
    """The manager ``start_manager`` started for cluster ``name``, if it still runs."""
    try:
        raw = json.loads(_manager_state(name).read_text())
        process = ManagerProcess(**raw)
    except (OSError, ValueError, TypeError):
        return None
    alive = pid_alive(process.pid)
    if not alive or (HAVE_PROC and not names_directory(cmdline(process.pid), own_dir(name))):
        return None
    return process


def stop_manager(name: str = DEFAULT_NAME) -> None:
    """Stop the manager of cluster ``name`` (SIGTERM: it releases its Lease) and remove the webhook
    configurations that point at it (failurePolicy Fail: left behind, they would refuse every TrainJob and
    runtime); idempotent."""
    process = manager_process(name)
    if process is not None:
        terminate([process.pid], grace=30.0)
    if _manager_state(name).exists():
        state = ClusterState.read(name)
        if state is not None:
            with contextlib.suppress(ApiError, TransportError, OSError):
                client = connect(state)
                try:
                    for configuration in launcher.webhook_configurations(0, b""):
                        gvk = GVK.of(configuration)
                        with contextlib.suppress(NotFound):
                            client.delete(gvk, configuration["metadata"]["name"])
                finally:
                    client.close()
    _manager_state(name).unlink(missing_ok=True)


def start_manager(
    state: ClusterState, *, feature_gates: str = "", timeout: float = 60.0, log_level: str = "info"
) -> ManagerProcess:
    """(Re)start the manager for the cluster as its ServiceAccount, wait until it is ready (caches synced,
    webhook server up), and register its admission webhooks with the API server by URL.

    Installs what it needs first (``install_for_local_manager``: the CRDs, the ServiceAccount and its RBAC;
    idempotent). A manager already running for this cluster is stopped first, so the code it runs is the
    current one.
    """
    install_for_local_manager(state)
    stop_manager(state.name)
    directory = Path(state.own_dir) / "manager"
    directory.mkdir(parents=True, exist_ok=True)
    try:
        command = [str(launcher.console_script())]
    except launcher.LaunchError as exc:
        raise ClusterError(str(exc)) from exc
    config = launcher.configuration(
        launcher.shipped_configuration(),
        health_port=free_port(),
        metrics_port=free_port(),
        secure_metrics=False,
        webhook_port=free_port(),
        cert_management=False,
        leader_election={"resourceNamespace": MANAGER_NAMESPACE},
    )
    handle = launcher.prepare(
        directory,
        service_account_kubeconfig(state, directory / "kubeconfig"),
        config,
        command=command,
        cert_dir=directory / "certs",
        ca_name="trainer-local-webhook-ca",
        log_level=log_level,
        feature_gates=feature_gates,
        detached=True,
    )
    with handle.log.open("ab") as out:
        out.write(f"\n--- start: {' '.join(handle.process.argv)}\n".encode())
    handle.start()
    assert handle.health_port is not None and handle.metrics_port is not None
    assert handle.webhook_port is not None and handle.ca_pem is not None
    process = ManagerProcess(
        pid=handle.pid,
        health_port=handle.health_port,
        metrics_port=handle.metrics_port,
        config=str(handle.config),
        log=str(handle.log),
    )
    _manager_state(state.name).write_text(json.dumps(dataclasses.asdict(process), indent=2) + "\n")
    try:
        handle.wait_ready(timeout)
    except launcher.LaunchError as exc:
        if handle.running():
            stop_manager(state.name)
        raise ClusterError(str(exc)) from exc
    client = connect(state)
    try:
        for configuration in launcher.webhook_configurations(handle.webhook_port, handle.ca_pem):
            client.apply(configuration, INSTALL_FIELD_MANAGER, force=True)
    finally:
        client.close()
    return process
