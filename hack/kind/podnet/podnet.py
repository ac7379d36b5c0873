"""podnet: the Pod network of the kind tier's nodes, one process per node (a DaemonSet of kube-system).

kind's own default CNI daemon, kindnetd, lives in a repository that the Go module proxy does not serve, so
this is the same job done with the standard library, Debian's CNI plugins, iproute2 and iptables. Each node's
Pods sit on a Linux bridge of their own (Debian's ``bridge`` plugin, host-local addresses from the node's
``spec.podCIDR``, which kube-controller-manager allocates from the cluster's Pod subnet); the nodes share
one Docker network, so a Pod on another node is one hop away, through that node's address.

What it keeps true on its node, level-triggered (from the whole list of Nodes, never from one event):

- **The CNI configuration** ``/etc/cni/net.d/10-podnet.conflist``: the bridge ``cni0`` on this node's
  ``spec.podCIDR``, with portmap and loopback. Until the node has a podCIDR nothing is written, and
  until something is written containerd reports the network not ready, so the kubelet keeps the node
  NotReady and no Pod is scheduled there with an address of the wrong subnet. Rewritten (atomically) only
  when its content differs.
- **A route per other node**: ``ip route replace <its podCIDR> via <its InternalIP>``. A route into the Pod
  subnet through a gateway that no Node has any more (a node gone, a podCIDR changed) is deleted.
- **Masquerade only for traffic that leaves the Pod network**: the bridge plugin's own ``ipMasq`` would
  also rewrite Pod-to-Pod traffic between nodes (it exempts only the node's own /24); instead the nat
  chain ``PODNET-MASQ``, jumped to from POSTROUTING for sources in the Pod subnet, returns for
  destinations in the Pod subnet (and multicast) and masquerades the rest. So a Pod on another node sees
  the caller's Pod address, and a node or the Docker host sees the node's address.

The loop: list the Nodes, reconcile, then watch from the list's resourceVersion for at most ``RESYNC_S``
seconds, reconciling after every event from the Nodes as they now are; when the watch ends, list again
(which also repairs a route or rule that someone removed by hand within ``RESYNC_S``). An error of the API
or of a command is logged and retried after ``RETRY_S``; nothing else ever stops the loop.

The API server: ``CONTROL_PLANE_ENDPOINT`` (host:port), which kind adds to the DaemonSet so that this
process does not wait for kube-proxy's Service rules, else the in-cluster ``KUBERNETES_SERVICE_HOST``;
the ServiceAccount's token (read for every request: the kubelet rotates it) and CA.

Environment: ``NODE_NAME`` (this node, from the downward API), ``POD_SUBNET`` (the cluster's Pod subnet, as
kind templates it into its default CNI manifest).

Deliberately missing: IPv6 and dual stack, network policy, MTU discovery (the Docker network's 1500 is the
bridge plugin's default), and any clean-up on exit (a node without this process keeps its last routes).
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import os
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

CNI_DIR = Path("/etc/cni/net.d")
CNI_FILE = CNI_DIR / "10-podnet.conflist"
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
CHAIN = "PODNET-MASQ"
RESYNC_S = 10
"""Longest time between two full lists of the Nodes (each watch asks the server to end after this)."""
RETRY_S = 2.0
"""Pause after a failed list, watch or command, before the next attempt."""
MULTICAST = "224.0.0.0/4"


def log(message: str) -> None:
    print(f"podnet: {message}", flush=True)


class ApiError(Exception):
    """The API server answered with an error status, or not at all."""


# ------------------------------------------------------------------------------------------------- state


@dataclass(frozen=True, slots=True)
class NodeRoute:
    """What this node needs to know of one Node: its name, Pod CIDR and InternalIP (either may be unset
    for a Node that is still joining)."""

    name: str
    pod_cidr: str | None
    internal_ip: str | None


def node_route(node: dict[str, Any]) -> NodeRoute:
    addresses = node.get("status", {}).get("addresses") or []
    internal = next((a["address"] for a in addresses if a.get("type") == "InternalIP"), None)
    return NodeRoute(
        name=node["metadata"]["name"], pod_cidr=node.get("spec", {}).get("podCIDR"), internal_ip=internal
    )


def conflist(pod_cidr: str) -> str:
    """The CNI configuration of a node whose Pods get addresses in ``pod_cidr``."""
    config = {
        "cniVersion": "1.0.0",
        "name": "podnet",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "ipMasq": False,  # PODNET-MASQ does it, sparing Pod-to-Pod traffic between nodes
                "hairpinMode": True,  # a Pod reaches itself through a Service
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": pod_cidr}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
            {"type": "loopback"},
        ],
    }
    return json.dumps(config, indent=2) + "\n"


def wanted_routes(nodes: list[NodeRoute], me: str) -> dict[str, str]:
    """Pod CIDR → gateway: every other Node that has both."""
    return {n.pod_cidr: n.internal_ip for n in nodes if n.name != me and n.pod_cidr and n.internal_ip}


# ---------------------------------------------------------------------------------------------- commands


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise OSError(f"{' '.join(args)} exited {result.returncode}: {result.stderr.strip()}")
    return result


def current_routes(pod_subnet: ipaddress.IPv4Network) -> dict[str, str]:
    """Pod CIDR → gateway of the main table's routes into the Pod subnet through a gateway (the bridge's
    own route, through no gateway, is the kernel's and is left alone)."""
    found = {}
    for route in json.loads(run("ip", "-j", "-4", "route", "show", "table", "main").stdout or "[]"):
        dst, gateway = route.get("dst", ""), route.get("gateway")
        if not gateway or dst == "default":
            continue
        network = ipaddress.ip_network(dst if "/" in dst else f"{dst}/32", strict=False)
        if isinstance(network, ipaddress.IPv4Network) and network.subnet_of(pod_subnet):
            found[str(network)] = gateway
    return found


def reconcile_routes(wanted: dict[str, str], pod_subnet: ipaddress.IPv4Network) -> None:
    have = current_routes(pod_subnet)
    for cidr, gateway in sorted(wanted.items()):
        if have.get(cidr) != gateway:
            run("ip", "route", "replace", cidr, "via", gateway)
            log(f"route {cidr} via {gateway}")
    for cidr, gateway in sorted(have.items()):
        if cidr not in wanted:
            run("ip", "route", "del", cidr, "via", gateway)
            log(f"route {cidr} via {gateway} deleted: no Node has it any more")


def reconcile_masquerade(pod_subnet: str) -> None:
    wanted = [
        f"-A {CHAIN} -d {pod_subnet} -j RETURN",
        f"-A {CHAIN} -d {MULTICAST} -j RETURN",
        f"-A {CHAIN} -j MASQUERADE",
    ]
    listed = run("iptables", "-w", "-t", "nat", "-S", CHAIN, check=False)
    if listed.returncode != 0:
        run("iptables", "-w", "-t", "nat", "-N", CHAIN)
        have: list[str] = []
    else:
        have = [line for line in listed.stdout.splitlines() if line.startswith(f"-A {CHAIN} ")]
    if have != wanted:
        run("iptables", "-w", "-t", "nat", "-F", CHAIN)
        for rule in wanted:
            run("iptables", "-w", "-t", "nat", *rule.split())
        log(f"nat {CHAIN}: masquerade from {pod_subnet} to anywhere outside it")
    jump = ["POSTROUTING", "-s", pod_subnet, "-m", "comment", "--comment", "podnet: Pod traffic", "-j", CHAIN]
    if run("iptables", "-w", "-t", "nat", "-C", *jump, check=False).returncode != 0:
        run("iptables", "-w", "-t", "nat", "-A", *jump)
        log(f"nat POSTROUTING: -s {pod_subnet} -j {CHAIN}")


def reconcile_conflist(pod_cidr: str | None) -> None:
    if pod_cidr is None:
        return
    content = conflist(pod_cidr)
    try:
        if CNI_FILE.read_text() == content:
            return
    except FileNotFoundError:
        pass
    # A name containerd does not read (no .conf/.conflist/.json ending), then one rename: it never sees
    # half a file.
    partial = CNI_DIR / ".10-podnet.conflist.partial"
    partial.write_text(content)
    partial.replace(CNI_FILE)
    log(f"wrote {CNI_FILE} for {pod_cidr}")


def reconcile(nodes: dict[str, NodeRoute], me: str, pod_subnet: ipaddress.IPv4Network) -> None:
    mine = nodes.get(me)
    reconcile_masquerade(str(pod_subnet))
    reconcile_routes(wanted_routes(list(nodes.values()), me), pod_subnet)
    reconcile_conflist(mine.pod_cidr if mine else None)


# --------------------------------------------------------------------------------------------------- API


class Api:
    """Just enough of a Kubernetes client: list and watch Nodes with the Pod's ServiceAccount."""

    def __init__(self, endpoint: str) -> None:
        host, _, port = endpoint.rpartition(":")
        self.host, self.port = host.strip("[]"), int(port)
        self.context = ssl.create_default_context(cafile=str(SERVICE_ACCOUNT / "ca.crt"))

    def _get(
        self, path: str, query: dict[str, str], timeout: float
    ) -> tuple[http.client.HTTPSConnection, Any]:
        connection = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=timeout)
        token = (SERVICE_ACCOUNT / "token").read_text().strip()
        connection.request("GET", f"{path}?{urlencode(query)}", headers={"Authorization": f"Bearer {token}"})
        response = connection.getresponse()
        if response.status != 200:
            body = response.read(2000).decode(errors="replace")
            connection.close()
            raise ApiError(f"GET {path}: {response.status} {body}")
        return connection, response

    def list_nodes(self) -> tuple[dict[str, NodeRoute], str]:
        connection, response = self._get("/api/v1/nodes", {}, timeout=30)
        try:
            listed = json.loads(response.read())
        finally:
            connection.close()
        nodes = {n.name: n for n in map(node_route, listed["items"])}
        return nodes, str(listed["metadata"]["resourceVersion"])

    def watch_nodes(self, resource_version: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """(type, object) of each event until the server ends the watch (after ``RESYNC_S``)."""
        query = {"watch": "1", "resourceVersion": resource_version, "timeoutSeconds": str(RESYNC_S)}
        connection, response = self._get("/api/v1/nodes", query, timeout=RESYNC_S + 30)
        try:
            for line in response:
                if line.strip():
                    event = json.loads(line)
                    yield event["type"], event["object"]
        finally:
            connection.close()


def endpoint_from_environment() -> str:
    endpoint = os.environ.get("CONTROL_PLANE_ENDPOINT", "")
    if endpoint:
        return endpoint
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        sys.exit("podnet: neither CONTROL_PLANE_ENDPOINT nor KUBERNETES_SERVICE_HOST is set")
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def main() -> None:
    me = os.environ.get("NODE_NAME", "")
    subnet = os.environ.get("POD_SUBNET", "")
    if not me or not subnet:
        sys.exit("podnet: NODE_NAME and POD_SUBNET must be set")
    pod_subnet = ipaddress.ip_network(subnet)
    if not isinstance(pod_subnet, ipaddress.IPv4Network):
        sys.exit(f"podnet: POD_SUBNET {subnet} is not IPv4 (only IPv4 is supported)")
    api = Api(endpoint_from_environment())
    log(f"node {me}, Pod subnet {pod_subnet}, API server {api.host}:{api.port}")
    while True:
        try:
            nodes, resource_version = api.list_nodes()
            reconcile(nodes, me, pod_subnet)
            for kind, obj in api.watch_nodes(resource_version):
                if kind == "ERROR":  # e.g. 410 Gone: the resourceVersion is too old; list again
                    log(f"watch: {obj.get('message', obj)}")
                    break
                if kind == "BOOKMARK":
                    continue
                node = node_route(obj)
                if kind == "DELETED":
                    nodes.pop(node.name, None)
                else:
                    nodes[node.name] = node
                reconcile(nodes, me, pod_subnet)
        except (OSError, ApiError, http.client.HTTPException, ValueError, KeyError) as exc:
            log(f"retrying in {RETRY_S} s: {exc}")
            time.sleep(RETRY_S)


if __name__ == "__main__":
    main()
