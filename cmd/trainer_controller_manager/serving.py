"""Where the manager's servers bind and where its Lease lives, from the configuration and the Pod.

Go origin: none (a deployment rule of this project). Upstream binds ``:8081``/``:8443`` on every interface;
here a server never listens on all interfaces:

- ``host:port`` with a host binds that host (a loopback address, or the Pod IP given explicitly);
- ``:port`` (empty host) binds the Pod IP when ``POD_IP`` is set (the Deployment passes
  ``status.podIP`` through the downward API), else ``127.0.0.1`` (a local run);
- ``0`` turns the server off (not for the webhook server: ``webhook.port`` is 1-65535);
- the status server has a port only (``statusServer.port``): it is served as ``:port`` (the Pod IP, else
  loopback);
- ``0.0.0.0``, ``::`` or ``[::]`` are refused (:class:`ServingError`).

The namespace the manager runs in (the operator namespace: where the status server's Service and the
webhook Secret live) is ``POD_NAMESPACE`` (downward API), else the service account's namespace file (in a
Pod), else unknown (None: the Trainer glue's default, ``kubeflow-system``, as upstream). The Lease's namespace
is ``leaderElection.resourceNamespace``, else the namespace the manager runs in, else empty: then the manager
stops with an error (outside a cluster, name one).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from controller.trainer.config import Configuration

__all__ = [
    "LOOPBACK",
    "SERVICE_ACCOUNT_NAMESPACE_FILE",
    "Serving",
    "ServingError",
    "operator_namespace",
    "resolve_bind_address",
    "resolve_serving",
]

LOOPBACK = "127.0.0.1"
POD_IP_ENV = "POD_IP"
POD_NAMESPACE_ENV = "POD_NAMESPACE"
SERVICE_ACCOUNT_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def _every_interface(host: str) -> bool:
    """``0.0.0.0``, ``::`` and their other spellings (``::0``, ``0``, ``0.0``): the unspecified address."""
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        try:  # inet_aton's short forms, which the socket layer accepts too
            return socket.inet_aton(host) == b"\0\0\0\0"
        except OSError:
            return False


class ServingError(ValueError):
    """A bind address this project will not serve on; ``field`` names the configuration field."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Serving:
    """The resolved addresses (``"0"``: off), the namespace the manager runs in (None: unknown) and the
    Lease's namespace (``""``: unknown, only without leader election or outside a cluster)."""

    metrics_bind_address: str
    health_probe_bind_address: str
    operator_namespace: str | None
    leader_election_namespace: str
    webhook_bind_address: str = ""
    """``webhook.host:webhook.port`` resolved by the same rules (``""``: not resolved; the caller decides)."""
    status_server_bind_address: str = ""
    """``:<statusServer.port>`` resolved by the same rules: the Pod IP, else loopback (upstream listens on
    every interface; ``""``: not resolved; the caller decides)."""


def _host_for(pod_ip: str) -> str:
    try:
        address = ipaddress.ip_address(pod_ip)
    except ValueError as exc:
        raise ServingError(POD_IP_ENV, f"{pod_ip!r} is not an IP address") from exc
    return f"[{address}]" if address.version == 6 else str(address)


def resolve_bind_address(field: str, address: str, environ: Mapping[str, str]) -> str:
    """``address`` (a configuration value, named by ``field`` in errors) resolved by the rules above."""
    if address == "0":
        return address
    host, _, port = address.rpartition(":")
    if _every_interface(host.strip("[]")):
        raise ServingError(field, f"{address!r} would listen on every interface; name the Pod IP or loopback")
    if host:
        return address
    pod_ip = environ.get(POD_IP_ENV, "").strip()
    return f"{_host_for(pod_ip) if pod_ip else LOOPBACK}:{port}"


def operator_namespace(environ: Mapping[str, str], namespace_file: Path) -> str | None:
    """``POD_NAMESPACE``, else the contents of ``namespace_file``, else None."""
    namespace = environ.get(POD_NAMESPACE_ENV, "").strip()
    if namespace:
        return namespace
    try:
        return namespace_file.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None  # not in a Pod


def resolve_serving(
    config: Configuration,
    environ: Mapping[str, str],
    *,
    namespace_file: Path = SERVICE_ACCOUNT_NAMESPACE_FILE,
) -> Serving:
    """The addresses and namespaces the manager gets; raises :class:`ServingError`."""
    own_namespace = operator_namespace(environ, namespace_file)
    lease_namespace = ""
    if config.leader_election is not None:
        lease_namespace = config.leader_election.resource_namespace or own_namespace or ""
    return Serving(
        metrics_bind_address=resolve_bind_address(
            "metrics.bindAddress", config.metrics.bind_address, environ
        ),
        health_probe_bind_address=resolve_bind_address(
            "health.healthProbeBindAddress", config.health.health_probe_bind_address, environ
        ),
        operator_namespace=own_namespace,
        leader_election_namespace=lease_namespace,
        webhook_bind_address=resolve_bind_address("webhook.host", _webhook_address(config), environ),
        status_server_bind_address=resolve_bind_address(
            "statusServer.port", f":{config.status_server.port}", environ
        ),
    )


def _webhook_address(config: Configuration) -> str:
    host = config.webhook.host
    return f"[{host}]:{config.webhook.port}" if ":" in host else f"{host}:{config.webhook.port}"
