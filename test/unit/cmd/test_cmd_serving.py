"""Where the servers bind: loopback outside a Pod, the Pod IP inside, never every interface."""

from __future__ import annotations

from pathlib import Path

import pytest
from trainer_controller_manager.serving import ServingError, resolve_bind_address, resolve_serving

from controller.trainer.config import parse_configuration

HEADER = "apiVersion: config.trainer.kubeflow.org/v1alpha1\nkind: Configuration\n"


@pytest.mark.parametrize(
    ("address", "environ", "resolved"),
    [
        (":8081", {}, "127.0.0.1:8081"),
        (":8081", {"POD_IP": "10.1.2.3"}, "10.1.2.3:8081"),
        (":8081", {"POD_IP": "fd00::7"}, "[fd00::7]:8081"),
        (":8081", {"POD_IP": "  "}, "127.0.0.1:8081"),
        ("127.0.0.1:9000", {"POD_IP": "10.1.2.3"}, "127.0.0.1:9000"),
        ("10.1.2.3:8443", {}, "10.1.2.3:8443"),
        ("0", {"POD_IP": "10.1.2.3"}, "0"),
    ],
    ids=[
        "an empty host outside a Pod is loopback",
        "an empty host in a Pod is the Pod IP",
        "an IPv6 Pod IP is bracketed",
        "a blank POD_IP counts as unset",
        "an explicit host is kept",
        "an explicit Pod IP is kept",
        "0 stays off",
    ],
)
def test_bind_addresses_resolve(address: str, environ: dict[str, str], resolved: str) -> None:
    assert resolve_bind_address("metrics.bindAddress", address, environ) == resolved


@pytest.mark.parametrize(
    "address", ["0.0.0.0:8443", "[::]:8443", ":::8443", "[::0]:8443", "0:8443", "0.0:8443"]
)
def test_every_interface_is_refused_naming_the_field(address: str) -> None:
    with pytest.raises(ServingError) as info:
        resolve_bind_address("metrics.bindAddress", address, {})
    assert info.value.field == "metrics.bindAddress"
    assert "every interface" in str(info.value)


def test_a_pod_ip_that_is_not_an_address_is_refused() -> None:
    with pytest.raises(ServingError, match="POD_IP: 'pod-ip' is not an IP address"):
        resolve_bind_address("health.healthProbeBindAddress", ":8081", {"POD_IP": "pod-ip"})


def test_the_defaults_bind_loopback_outside_a_pod(tmp_path: Path) -> None:
    serving = resolve_serving(parse_configuration(HEADER), {}, namespace_file=tmp_path / "absent")
    assert serving.metrics_bind_address == "127.0.0.1:8443"
    assert serving.health_probe_bind_address == "127.0.0.1:8081"
    assert serving.operator_namespace is None
    assert serving.leader_election_namespace == ""
    assert serving.status_server_bind_address == "127.0.0.1:10443"


def test_the_status_server_binds_the_pod_ip_on_its_port(tmp_path: Path) -> None:
    config = parse_configuration(HEADER + "statusServer: {port: 12000}\n")
    serving = resolve_serving(config, {"POD_IP": "10.0.0.7"}, namespace_file=tmp_path / "absent")
    assert serving.status_server_bind_address == "10.0.0.7:12000"


@pytest.mark.parametrize(
    ("section", "environ", "file", "operator", "lease"),
    [
        (
            "leaderElection: {leaderElect: true, resourceNamespace: ns1}\n",
            {"POD_NAMESPACE": "ns2"},
            "ns3",
            "ns2",
            "ns1",
        ),
        ("leaderElection: {leaderElect: true}\n", {"POD_NAMESPACE": "ns2"}, "ns3", "ns2", "ns2"),
        ("leaderElection: {leaderElect: true}\n", {}, "ns3\n", "ns3", "ns3"),
        ("leaderElection: {leaderElect: true}\n", {"POD_NAMESPACE": " "}, None, None, ""),
        ("", {"POD_NAMESPACE": "ns2"}, None, "ns2", ""),
    ],
    ids=[
        "the configured Lease namespace wins",
        "else the Pod's namespace from the downward API",
        "else the service account's namespace",
        "else none: the manager will say so",
        "no leader election, no Lease namespace",
    ],
)
def test_the_namespaces(  # noqa: PLR0917 - one parameter per table column
    tmp_path: Path,
    section: str,
    environ: dict[str, str],
    file: str | None,
    operator: str | None,
    lease: str,
) -> None:
    namespace_file = tmp_path / "namespace"
    if file is not None:
        namespace_file.write_text(file)
    serving = resolve_serving(parse_configuration(HEADER + section), environ, namespace_file=namespace_file)
    assert (serving.operator_namespace, serving.leader_election_namespace) == (operator, lease)
