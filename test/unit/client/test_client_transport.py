"""controller.client.transport: config loading, credentials on the wire, refresh hooks, proxies and timeouts.

Run against the HTTP stub (no TLS: what the stub does not model is listed in ``conftest.py``); TLS with
client certificates is exercised by ``test/integration/test_client_integration.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from controller.client import errors
from controller.client.transport import Transport, default_user_agent

CM_PATH = "/api/v1/namespaces/ns/configmaps/a"


def write_kubeconfig(path: Path, server: str, users: dict[str, dict[str, Any]], current: str) -> Path:
    """A kubeconfig with one cluster and one context per user, named after the user."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "stub", "cluster": {"server": server}}],
        "users": [{"name": name, "user": user} for name, user in users.items()],
        "contexts": [{"name": name, "context": {"cluster": "stub", "user": name}} for name in users],
        "current-context": current,
    }
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_kubeconfig_token_and_the_user_agent_go_on_every_request(stub: Any, tmp_path: Path) -> None:
    stub.route("GET", CM_PATH, stub.Response(body={}))
    kubeconfig = write_kubeconfig(tmp_path / "kc", stub.url, {"alice": {"token": "tok-a"}}, "alice")
    transport = Transport.from_kubeconfig(str(kubeconfig))
    try:
        assert transport.request("GET", CM_PATH).status == 200
    finally:
        transport.close()
    sent = stub.requests[-1]
    assert sent.headers["Authorization"] == "Bearer tok-a"
    assert sent.headers["User-Agent"] == default_user_agent()
    assert sent.headers["Accept"] == "application/json"
    assert default_user_agent().startswith("kubeflow-trainer-py/") and default_user_agent().endswith(
        " (python)"
    )


def test_the_context_chooses_the_credentials(stub: Any, tmp_path: Path) -> None:
    stub.route("GET", CM_PATH, stub.Response(body={}))
    users = {"alice": {"token": "tok-a"}, "bob": {"token": "tok-b"}}
    kubeconfig = write_kubeconfig(tmp_path / "kc", stub.url, users, "alice")
    transport = Transport.from_kubeconfig(str(kubeconfig), context="bob")
    try:
        transport.request("GET", CM_PATH)
    finally:
        transport.close()
    assert stub.requests[-1].headers["Authorization"] == "Bearer tok-b"


EXEC_PLUGIN = """
import json, pathlib, sys, datetime
counter = pathlib.Path(sys.argv[1])
n = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(n))
lifetime = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=lifetime)
print(json.dumps({
    "apiVersion": "client.authentication.k8s.io/v1beta1",
    "kind": "ExecCredential",
    "status": {"token": f"exec-{n}", "expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%SZ")},
}))
"""


def exec_plugin_kubeconfig(tmp_path: Path, server: str, token_lifetime: float = 60.0) -> Path:
    """A kubeconfig whose token comes from :data:`EXEC_PLUGIN`; ``tmp_path / "counter"`` counts its runs."""
    script = tmp_path / "plugin.py"
    script.write_text(EXEC_PLUGIN)
    exec_user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": [str(script), str(tmp_path / "counter"), str(token_lifetime)],
        }
    }
    return write_kubeconfig(tmp_path / "kc", server, {"plugin": exec_user}, "plugin")


def test_an_expiring_exec_plugin_token_is_refreshed_between_requests(stub: Any, tmp_path: Path) -> None:
    # The plugin's tokens expire within the client's 5-minute skew, so each request re-runs it: proof
    # that our header path goes through the loader's refresh hook.
    stub.route("GET", CM_PATH, stub.Response(body={}))
    kubeconfig = exec_plugin_kubeconfig(tmp_path, stub.url)
    transport = Transport.from_kubeconfig(str(kubeconfig))
    try:
        transport.request("GET", CM_PATH)
        transport.request("GET", CM_PATH)
    finally:
        transport.close()
    first, second = (r.headers["Authorization"] for r in stub.requests)
    assert first.startswith("Bearer exec-") and second.startswith("Bearer exec-")
    assert first != second


def test_load_prefers_an_explicit_path_over_kubeconfig_env(
    stub: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stub.route("GET", CM_PATH, stub.Response(body={}))
    explicit = write_kubeconfig(tmp_path / "explicit", stub.url, {"x": {"token": "explicit"}}, "x")
    env = write_kubeconfig(tmp_path / "env", stub.url, {"y": {"token": "from-env"}}, "y")
    monkeypatch.setenv("KUBECONFIG", str(env))
    for transport in (Transport.load(str(explicit)), Transport.load()):
        try:
            transport.request("GET", CM_PATH)
        finally:
            transport.close()
    assert [r.headers["Authorization"] for r in stub.requests] == ["Bearer explicit", "Bearer from-env"]


def test_load_tries_in_cluster_before_the_home_kubeconfig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".kube").mkdir()
    write_kubeconfig(tmp_path / ".kube" / "config", "http://127.0.0.1:1", {"h": {"token": "home"}}, "h")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    # No service-account files exist here, so in-cluster fails, proving it was chosen first.
    with pytest.raises(errors.ConfigError, match="in-cluster"):
        Transport.load()
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    transport = Transport.load()
    try:
        assert transport.server == "http://127.0.0.1:1"
    finally:
        transport.close()


def test_no_configuration_anywhere_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(errors.ConfigError, match="no kubeconfig"):
        Transport.load()
    with pytest.raises(errors.ConfigError, match="missing"):
        Transport.from_kubeconfig(str(tmp_path / "missing"))


def test_a_loopback_server_is_never_reached_through_an_environment_proxy(
    stub: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Go's ProxyFromEnvironment never proxies loopback; a proxy here would be a dead port.
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:1")
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:1")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    stub.route("GET", CM_PATH, stub.Response(body={"ok": True}))
    transport = Transport.for_url(stub.url)
    try:
        response = transport.request("GET", CM_PATH)
    finally:
        transport.close()
    assert orjson.loads(response.body) == {"ok": True}


def test_a_request_without_an_answer_raises_request_timeout(stub: Any) -> None:
    stub.route("GET", CM_PATH, lambda _r: (stub.release.wait(10), stub.Response(body={}))[1])
    transport = Transport.for_url(stub.url, read_timeout=0.1)
    try:
        with pytest.raises(errors.RequestTimeout) as info:
            transport.request("GET", CM_PATH)
        assert info.value.__cause__ is not None
        # Not retried: the server may have carried the request out (client-go does not retry it either).
        assert len(stub.requests) == 1
    finally:
        transport.close()


def test_failure_statuses_are_returned_not_raised(stub: Any) -> None:
    stub.route("GET", CM_PATH, stub.Response(status=404, body=stub.status(404, "NotFound", "gone")))
    transport = Transport.for_url(stub.url)
    try:
        response = transport.request("GET", CM_PATH, query={"watch": False, "limit": 3})
    finally:
        transport.close()
    assert response.status == 404
    assert orjson.loads(response.body)["reason"] == "NotFound"
    assert stub.requests[-1].query == {"watch": ["false"], "limit": ["3"]}


def test_a_bearer_token_given_directly_is_sent(stub: Any) -> None:
    stub.route("GET", CM_PATH, stub.Response(body={}))
    transport = Transport.for_url(stub.url, token="direct")
    try:
        transport.request("GET", CM_PATH)
    finally:
        transport.close()
    assert stub.requests[-1].headers["Authorization"] == "Bearer direct"
    assert repr(transport) == f"Transport(server={stub.url!r}, pool_size=32)"


def test_the_pool_size_must_be_positive(stub: Any) -> None:
    with pytest.raises(ValueError, match="pool_size"):
        Transport.for_url(stub.url, pool_size=0)


def test_a_static_token_is_sent_unchanged_on_every_request(stub: Any, tmp_path: Path) -> None:
    # A static token has no refresh: two requests, the same header (guards against a hook that mutates it).
    stub.route("GET", CM_PATH, stub.Response(body={}))
    kubeconfig = write_kubeconfig(tmp_path / "kc", stub.url, {"s": {"token": "static"}}, "s")
    transport = Transport.from_kubeconfig(str(kubeconfig))
    try:
        transport.request("GET", CM_PATH)
        transport.request("GET", CM_PATH)
    finally:
        transport.close()
    assert {r.headers["Authorization"] for r in stub.requests} == {"Bearer static"}


def test_client_load_builds_the_transport_and_throttle_from_options(stub: Any, tmp_path: Path) -> None:
    from controller.client.client import Client
    from controller.client.gvk import GVK

    stub.route("GET", CM_PATH, stub.Response(body={"kind": "ConfigMap"}))
    kubeconfig = write_kubeconfig(tmp_path / "kc", stub.url, {"u": {"token": "t"}}, "u")
    client = Client.load(str(kubeconfig), pool_size=2, user_agent="custom/1.0", qps=5, burst=7)
    try:
        assert client.get(GVK("", "v1", "ConfigMap"), "a", "ns") == {"kind": "ConfigMap"}
        assert client.transport.pool_size == 2
        assert repr(client) == f"Client(server={stub.url!r}, qps=5, burst=7)"
    finally:
        client.close()
    assert stub.requests[-1].headers["User-Agent"] == "custom/1.0"


def test_a_derived_transport_shares_the_loaded_credentials_and_has_its_own_timeouts_and_pool(
    stub: Any, tmp_path: Path
) -> None:
    # An hour-long token is never refreshed here: one run of the plugin serves both transports, where a
    # second load of the kubeconfig would run it again (and send "exec-2").
    slow = "/api/v1/namespaces/ns/configmaps/slow"
    stub.route("GET", CM_PATH, stub.Response(body={}))
    stub.route("GET", slow, lambda _r: (stub.release.wait(10), stub.Response(body={}))[1])
    transport = Transport.from_kubeconfig(str(exec_plugin_kubeconfig(tmp_path, stub.url, 3600.0)))
    derived = transport.with_options(read_timeout=0.1, connect_timeout=0.1)
    try:
        assert (derived.server, derived.pool_size, derived.user_agent) == (
            transport.server,
            transport.pool_size,
            transport.user_agent,
        )
        assert (derived.connect_timeout, derived.read_timeout) == (0.1, 0.1)
        assert (transport.connect_timeout, transport.read_timeout) == (30.0, 70.0)
        derived.request("GET", CM_PATH)
        with pytest.raises(errors.RequestTimeout):
            derived.request("GET", slow)
        derived.close()
        transport.request("GET", CM_PATH)  # closing the derived transport left this one's pool open
    finally:
        transport.close()
    assert [r.headers["Authorization"] for r in stub.requests if r.path == CM_PATH] == ["Bearer exec-1"] * 2
    assert (tmp_path / "counter").read_text() == "1"


def test_manager_from_kubeconfig_loads_the_kubeconfig_once_for_the_leader_election_client(
    stub: Any, tmp_path: Path
) -> None:
    from controller.manager.manager import Manager, ManagerOptions

    kubeconfig = exec_plugin_kubeconfig(tmp_path, stub.url, 3600.0)
    manager = Manager.from_kubeconfig(
        str(kubeconfig),
        options=ManagerOptions(
            leader_election=True,
            leader_election_id="lock",
            leader_election_namespace="ns",
            lease_duration=6.0,
            renew_deadline=4.0,
            retry_period=1.0,
        ),
    )
    election_client = manager._leader_election_client
    try:
        assert election_client is not manager.client
        assert election_client.transport.server == manager.client.transport.server
        # max(renew_deadline / 2, 1 s) per request, so one hung request cannot cost the lease
        assert (election_client.transport.connect_timeout, election_client.transport.read_timeout) == (
            2.0,
            2.0,
        )
        assert (manager.client.transport.connect_timeout, manager.client.transport.read_timeout) == (
            30.0,
            70.0,
        )
    finally:
        election_client.close()
        manager.client.close()
    assert (tmp_path / "counter").read_text() == "1"
