"""The kind cluster's nodes and Pod network, checked on their own: what every test of Pods on two nodes needs.

kind only (``E2E_CLUSTER=kind``, after ``hack/e2e-setup-kind.sh``); on kwok every test here skips. The
cluster is a control plane and at least two workers; the Pod network is podnet
(``hack/kind/podnet/podnet.py``): on each node, Debian's bridge plugin on that node's ``spec.podCIDR``, a
route to every other node's podCIDR through that node's address, and masquerade only for traffic that
leaves the Pod network.

- **The nodes.** The control plane keeps its ``NoSchedule`` taint, so the suite's Pods run on the workers;
  at least two workers are Ready; every node has a podCIDR of its own inside the cluster's Pod subnet
  (kubeadm's ``networking.podSubnet``); podnet runs on every node.
- **Between nodes.** An echo server (it answers each connection with the address the connection came from)
  runs in a Pod on one worker, under a headless Service, and on that worker's host network; a client Pod on
  another worker connects to the Pod by its IP, to the Pod by the Service's name (CoreDNS, itself reached
  across nodes or not, wherever it runs), and to the node by its InternalIP. The Pods' addresses must be
  in their nodes' podCIDRs; the echo Pod must see the client's Pod IP both times (no masquerade inside
  the Pod network, which a Pod on another node needs to see who called); the node must see the client's
  node address (masquerade for what leaves the Pod network, which the Docker host needs to answer).

Without podnet's routes the client cannot reach the other node's Pod, and the test says which connection
failed and how.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any

import kubernetes
import pytest
import yaml

from support.kind_jobs import HOSTNAME_KEY, TIMEOUT, skip_unless_kind, workload_image

CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
ECHO_PORT = 7000
CONNECT_DEADLINE = 20
"""Seconds the client retries each connection (the Service's name resolves once the echo Pod is Ready)."""

# Listens on its Pod's (or node's) own address, given as argv[1], on port argv[2] (0: any; the log says
# which), and answers each connection with the peer's address.
ECHO = """
import socket, sys
server = socket.create_server((sys.argv[1], int(sys.argv[2])))
print("listening", server.getsockname()[1], flush=True)
while True:
    connection, (peer, _) = server.accept()
    with connection:
        connection.sendall(peer.encode() + b"\\n")
    print("peer", peer, flush=True)
"""

# For each LABEL=HOST:PORT argument: connect, retrying until the deadline, and print what the server saw.
CLIENT = f"""
import socket, sys, time
for target in sys.argv[1:]:
    label, address = target.split("=", 1)
    host, port = address.rsplit(":", 1)
    deadline = time.monotonic() + {CONNECT_DEADLINE}
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=5) as connection:
                print(label, "saw", connection.makefile().readline().strip(), flush=True)
                break
        except OSError as exc:
            if time.monotonic() > deadline:
                print(label, "failed:", exc, flush=True)
                break
            time.sleep(0.5)
"""


@pytest.fixture(scope="module", autouse=True)
def on_kind(e2e_cluster: Any) -> None:
    skip_unless_kind(e2e_cluster, "a multi-node kind cluster and its Pod network")


def pod_subnet(e2e_cluster: Any) -> ipaddress.IPv4Network:
    """The cluster's Pod subnet, as kubeadm was configured (its ClusterConfiguration in kube-system)."""
    config = e2e_cluster.core.read_namespaced_config_map("kubeadm-config", "kube-system")
    subnet = ipaddress.ip_network(
        yaml.safe_load(config.data["ClusterConfiguration"])["networking"]["podSubnet"]
    )
    assert isinstance(subnet, ipaddress.IPv4Network), subnet
    return subnet


def ready(obj: Any) -> bool:
    """A Node or a Pod whose Ready condition is True."""
    return any(c.type == "Ready" and c.status == "True" for c in obj.status.conditions or [])


def internal_ip(node: Any) -> str:
    return str(next(a.address for a in node.status.addresses if a.type == "InternalIP"))


def workers(e2e_cluster: Any) -> list[Any]:
    """The Ready nodes without a NoSchedule or NoExecute taint, by name; fails unless the control plane
    keeps its taint and there are two such nodes at least."""
    nodes = e2e_cluster.core.list_node().items
    control_planes = [n for n in nodes if CONTROL_PLANE_LABEL in (n.metadata.labels or {})]
    assert control_planes, [n.metadata.name for n in nodes]
    for node in control_planes:
        taints = {(t.key, t.effect) for t in node.spec.taints or []}
        assert (CONTROL_PLANE_LABEL, "NoSchedule") in taints, (
            f"{node.metadata.name} lost its NoSchedule taint ({taints}): Pods could land on the control plane"
        )
    schedulable = [
        n
        for n in nodes
        if ready(n) and not any(t.effect in {"NoSchedule", "NoExecute"} for t in n.spec.taints or [])
    ]
    assert len(schedulable) >= 2, (
        f"{len(schedulable)} Ready worker(s) of {[n.metadata.name for n in nodes]}: hack/e2e-setup-kind.sh "
        "makes two (KIND_WORKERS)"
    )
    return sorted(schedulable, key=lambda n: n.metadata.name)


def test_kind_nodes_have_disjoint_pod_cidrs_in_the_pod_subnet_and_podnet_runs_on_each(
    e2e_cluster: Any,
) -> None:
    workers(e2e_cluster)
    subnet = pod_subnet(e2e_cluster)
    nodes = e2e_cluster.core.list_node().items
    cidrs = {n.metadata.name: ipaddress.ip_network(n.spec.pod_cidr) for n in nodes}
    assert all(isinstance(c, ipaddress.IPv4Network) and c.subnet_of(subnet) for c in cidrs.values()), (
        subnet,
        cidrs,
    )
    names = sorted(cidrs)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not cidrs[a].overlaps(cidrs[b]), (a, cidrs[a], b, cidrs[b])
    podnet = kubernetes.client.AppsV1Api(e2e_cluster.api).read_namespaced_daemon_set("podnet", "kube-system")
    number_ready = podnet.status.number_ready if podnet.status else 0
    assert number_ready == len(nodes), (
        f"podnet is Ready on {number_ready} of {len(nodes)} nodes "
        "(kubectl -n kube-system logs daemonset/podnet)"
    )


def echo_pod(name: str, node: str, *, host_network: bool, image: str) -> dict[str, Any]:
    """The echo server on ``node``: in a Pod of its own (port ``ECHO_PORT``, label ``app: echo``) or on the
    node's network (any free port)."""
    field = "status.hostIP" if host_network else "status.podIP"
    port = 0 if host_network else ECHO_PORT
    container: dict[str, Any] = {
        "name": "echo",
        "image": image,
        "command": ["sh", "-c", 'exec python3 -c "$0" "$ADDRESS" "$1"', ECHO, str(port)],
        "env": [{"name": "ADDRESS", "valueFrom": {"fieldRef": {"fieldPath": field}}}],
        "resources": {"requests": {"cpu": "5m", "memory": "16Mi"}},
    }
    if not host_network:
        container["readinessProbe"] = {"tcpSocket": {"port": ECHO_PORT}, "periodSeconds": 1}
    return {
        "metadata": {"name": name, "labels": {} if host_network else {"app": "echo"}},
        "spec": {
            "hostNetwork": host_network,
            "nodeSelector": {HOSTNAME_KEY: node},
            "terminationGracePeriodSeconds": 0,
            "containers": [container],
        },
    }


def test_kind_pods_on_two_nodes_reach_each_other_by_ip_and_headless_name_without_masquerade(
    e2e_cluster: Any, namespace: str, eventually: Callable[..., Any]
) -> None:
    image = workload_image()
    server_node, client_node = workers(e2e_cluster)[:2]
    a, b = server_node.metadata.name, client_node.metadata.name
    core = e2e_cluster.core
    core.create_namespaced_service(
        namespace,
        {
            "metadata": {"name": "echo"},
            "spec": {"clusterIP": "None", "selector": {"app": "echo"}, "ports": [{"port": ECHO_PORT}]},
        },
    )
    core.create_namespaced_pod(namespace, echo_pod("echo", a, host_network=False, image=image))
    core.create_namespaced_pod(namespace, echo_pod("host-echo", a, host_network=True, image=image))

    def listening(name: str) -> Any:
        def check() -> tuple[Any, str]:
            pod = core.read_namespaced_pod(name, namespace)
            assert pod.status.phase == "Running", (name, pod.status.phase)
            log = str(core.read_namespaced_pod_log(name, namespace))
            assert log.startswith("listening "), (name, log)
            return pod, log.split()[1]

        return eventually(check, timeout=TIMEOUT)

    echo, _ = listening("echo")
    host_echo, host_port = listening("host-echo")

    def echo_ready() -> None:  # so the headless Service's name resolves to it
        assert ready(core.read_namespaced_pod("echo", namespace)), "the echo Pod is not Ready"

    eventually(echo_ready, timeout=TIMEOUT)
    targets = {
        "pod-ip": f"{echo.status.pod_ip}:{ECHO_PORT}",
        "headless": f"echo.{namespace}.svc.cluster.local:{ECHO_PORT}",
        "node-ip": f"{internal_ip(server_node)}:{host_port}",
    }
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "client"},
            "spec": {
                "restartPolicy": "Never",
                "nodeSelector": {HOSTNAME_KEY: b},
                "containers": [
                    {
                        "name": "client",
                        "image": image,
                        "command": ["python3", "-c", CLIENT, *(f"{k}={v}" for k, v in targets.items())],
                        "resources": {"requests": {"cpu": "5m", "memory": "16Mi"}},
                    }
                ],
            },
        },
    )

    def client_finished() -> Any:
        pod = core.read_namespaced_pod("client", namespace)
        assert pod.status.phase in {"Succeeded", "Failed"}, f"client Pod {pod.status.phase}"
        return pod

    client = eventually(client_finished, timeout=TIMEOUT)
    log = str(core.read_namespaced_pod_log("client", namespace))
    saw = dict(line.split(" ", 1) for line in log.splitlines() if line)

    subnet_of = {n.metadata.name: ipaddress.ip_network(n.spec.pod_cidr) for n in (server_node, client_node)}
    assert (echo.spec.node_name, client.spec.node_name, host_echo.spec.node_name) == (a, b, a)
    assert ipaddress.ip_address(echo.status.pod_ip) in subnet_of[a], (echo.status.pod_ip, subnet_of)
    assert ipaddress.ip_address(client.status.pod_ip) in subnet_of[b], (client.status.pod_ip, subnet_of)
    for label, target in targets.items():
        assert saw.get(label, "").startswith("saw "), (
            f"the client Pod on {b} could not reach {target} ({label}) on {a}: {saw.get(label)}; "
            "are podnet's routes on every node (kubectl -n kube-system logs daemonset/podnet)?"
        )
    # Inside the Pod network the caller keeps its Pod IP; leaving it, the caller's node address.
    assert saw["pod-ip"] == saw["headless"] == f"saw {client.status.pod_ip}", (saw, client.status.pod_ip)
    assert saw["node-ip"] == f"saw {internal_ip(client_node)}", (saw, internal_ip(client_node))
