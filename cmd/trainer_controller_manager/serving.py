"""Where the manager's servers bind and where its Lease lives, from the configuration and the Pod.

Go origin: none (a deployment rule of this project). Upstream binds ``:8081``/``:8443`` on every interface;
here a server never listens on all interfaces:

- ``host:port`` with a host binds that host (a loopback address, or the Pod IP given explicitly);
- ``:port`` (empty host) binds the Pod IP when ``POD_IP`` is set (the Deployment passes
  ``status.podIP`` through the downward API), else ``127.0.0.1`` (a local run);
- ``0`` turns the server off;
- ``0.0.0.0``, ``::`` or ``[::]`` are refused (:class:`ServingError`).

The Lease's namespace is ``leaderElection.resourceNamespace``, else ``POD_NAMESPACE`` (downward API), else
left empty for the manager to read the service account's namespace (in a Pod) or fail (elsewhere).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass

from controller.trainer.config import Configuration

__all__ = ["LOOPBACK", "Serving", "ServingError", "resolve_bind_address", "resolve_serving"]

LOOPBACK = "127.0.0.1"
POD_IP_ENV = "POD_IP"
POD_NAMESPACE_ENV = "POD_NAMESPACE"
_ALL_INTERFACES = ("0.0.0.0", "::")


class ServingError(ValueError):
    """A bind address this project will not serve on; ``field`` names the configuration field."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Serving:
    """The resolved addresses (``"0"``: off) and the Lease namespace (``""``: the manager finds it)."""

    metrics_bind_address: str
    health_probe_bind_address: str
    leader_election_namespace: str


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
    if host.strip("[]") in _ALL_INTERFACES:
        raise ServingError(field, f"{address!r} would listen on every interface; name the Pod IP or loopback")
    if host:
        return address
    pod_ip = environ.get(POD_IP_ENV, "").strip()
    return f"{_host_for(pod_ip) if pod_ip else LOOPBACK}:{port}"


def resolve_serving(config: Configuration, environ: Mapping[str, str]) -> Serving:
    """The addresses and Lease namespace the manager gets; raises :class:`ServingError`."""
    namespace = ""
    if config.leader_election is not None:
        namespace = config.leader_election.resource_namespace or environ.get(POD_NAMESPACE_ENV, "").strip()
    return Serving(
        metrics_bind_address=resolve_bind_address(
            "metrics.bindAddress", config.metrics.bind_address, environ
        ),
        health_probe_bind_address=resolve_bind_address(
            "health.healthProbeBindAddress", config.health.health_probe_bind_address, environ
        ),
        leader_election_namespace=namespace,
    )
