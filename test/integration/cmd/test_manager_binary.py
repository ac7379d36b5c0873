"""The manager binary against a real kube-apiserver: it serves its probes and metrics, stops with status 0 on
SIGTERM, and exits with status 3 when its Lease is taken from it; it runs a third-party plugin installed
beside it and enabled by name, and refuses to start on a name no distribution provides. Started by
``support.launcher``, as the demo, the reliability suite and the benchmark start it."""

from __future__ import annotations

import http.client
import os
import signal
import ssl
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from controller.envtest import ControlPlane
from controller.envtest.process import free_port
from support import example_plugin, launcher

BASE_CONFIG = {
    "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
    "kind": "Configuration",
    "controller": {"groupKindConcurrency": {"TrainJob.trainer.kubeflow.org": 5}},
}
REPO = Path(__file__).resolve().parents[3]
LEADER_ELECTION = {"leaderElect": True, "leaseDuration": "3s", "renewDeadline": "2s", "retryPeriod": "500ms"}


class Binary:
    """``python -m trainer_controller_manager`` in a child process (``support.launcher``), its JSON log lines
    in a file; its environment holds only ``POD_NAMESPACE``, a ``PATH``, and ``PYTHONPATH`` when a test
    puts distributions beside it."""

    def __init__(
        self,
        tmp_path: Path,
        kubeconfig: Path,
        namespace: str,
        config: dict[str, Any],
        python_path: list[Path] | None = None,
    ) -> None:
        environ = {"POD_NAMESPACE": namespace, "PATH": "/usr/bin:/bin"}
        if python_path:
            # This checkout's code first (it is what is under test), then the extra distributions.
            paths = [REPO, REPO / "cmd", *python_path]
            environ["PYTHONPATH"] = os.pathsep.join(map(str, paths))
        # The launcher writes the serving certificate the certificate rotator would write.
        self.handle = launcher.prepare(
            tmp_path,
            kubeconfig,
            config,
            ca_name="test-ca",
            log_level=None,
            environ=environ,
            clean_environment=True,
        ).start()
        self.log_path = self.handle.log

    def lines(self) -> list[dict[str, Any]]:
        return self.handle.lines()

    def address(self, server: str) -> str:
        code = self.handle.returncode()
        if code is not None:  # not an AssertionError: eventually() stops retrying at once
            raise RuntimeError(f"the manager exited with {code}: {self.tail()}")
        for line in self.lines():
            if line.get("event") == "http.serving" and line.get("server") == server:
                return str(line["address"])
        raise AssertionError(f"{server} not serving yet: {self.tail()}")

    def tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]

    def get(self, server: str, path: str) -> str:
        if server != "metrics":
            with urllib.request.urlopen(f"http://{self.address(server)}{path}", timeout=5) as response:
                return str(response.read().decode())
        # metrics.secureServing (the default): HTTPS with the rotator's certificate, which names the Service
        # (kubeflow-trainer-controller-manager.<namespace>.svc), not 127.0.0.1: not verified here.
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        url = f"https://{self.address(server)}{path}"
        with urllib.request.urlopen(url, timeout=5, context=context) as response:
            return str(response.read().decode())

    def terminate(self) -> None:
        """SIGTERM to the manager process, as a kubelet stops a container."""
        self.handle.send_signal(signal.SIGTERM)

    def wait(self, timeout: float) -> int | None:
        return self.handle.wait(timeout)

    def kill(self) -> None:
        if self.handle.running():
            self.handle.kill()
        self.handle.stop()


@pytest.fixture
def start(tmp_path: Path, kubeconfig: Path, namespace: str) -> Iterator[Callable[..., Binary]]:
    started: list[Binary] = []

    def run(
        leader_election: dict[str, Any] | None = None,
        overrides: dict[str, Any] | None = None,
        python_path: list[Path] | None = None,
    ) -> Binary:
        config = launcher.configuration(
            BASE_CONFIG,
            webhook_port=free_port(),
            metrics_port=0,  # 127.0.0.1:0, over HTTPS (the default)
            leader_election=leader_election,
            overrides=overrides,
        )
        binary = Binary(tmp_path, kubeconfig, namespace, config, python_path)
        started.append(binary)
        return binary

    yield run
    for binary in started:
        binary.kill()


def test_it_serves_probes_and_metrics_and_stops_with_0_on_sigterm(
    start: Callable[[str], Binary], eventually: Callable[..., Any]
) -> None:
    binary = start()
    assert eventually(lambda: binary.get("health-probe", "/healthz"), timeout=60) == "ok"
    assert eventually(lambda: binary.get("health-probe", "/readyz"), timeout=60, retry_on=(OSError,)) == "ok"
    assert binary.get("health-probe", "/readyz/webhook-server") == "ok"  # certificates read, TLS answers

    def controllers_running() -> str:
        text = binary.get("metrics", "/metrics")
        assert 'controller_runtime_max_concurrent_reconciles{controller="trainjob_controller"} 5.0' in text
        return text

    text = eventually(controllers_running, timeout=60)
    assert 'kubeflow_trainer_trainjobs{state="Created"}' in text
    assert 'kubeflow_trainer_reconcile_failures_total{reason="BuildFailed"} 0.0' in text
    assert binary.address("metrics").startswith("127.0.0.1:")

    binary.terminate()
    assert binary.wait(timeout=60) == 0
    events = [line["event"] for line in binary.lines()]
    assert "setup.not_served_yet" not in events
    assert events[-1] == "setup.stopped"


def test_with_the_train_job_status_gate_it_serves_the_status_server(
    start: Callable[[str], Binary],
    eventually: Callable[..., Any],
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    port = free_port()
    binary = start(overrides={"featureGates": {"TrainJobStatus": True}, "statusServer": {"port": port}})
    ready = eventually(
        lambda: binary.get("health-probe", "/readyz/status-server-readyz"),
        timeout=120,
        retry_on=(AssertionError, OSError),
    )
    assert ready == "ok"
    assert binary.get("health-probe", "/healthz/status-server-healthz") == "ok"
    account = "trainer-pod"
    accounts = f"/api/v1/namespaces/{namespace}/serviceaccounts"
    created = control_plane.admin_request(
        "POST", accounts, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}}
    )
    assert created.status == 201, created.body
    audience = f"trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/missing/status"
    issued = control_plane.admin_request(
        "POST",
        f"{accounts}/{account}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"audiences": [audience]}},
    )
    assert issued.status == 201, issued.body
    token = issued.json()["status"]["token"]
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the wiring is under test here, not the trust (unit tests check it)
    path = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/missing/status"
    body = b'{"trainerStatus": {"progressPercentage": 1, "lastUpdatedTime": "2026-01-02T03:04:05Z"}}'
    answers = []
    for headers in ({}, {"Authorization": f"Bearer {token}"}):
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)
        try:
            conn.request("POST", path, body, headers)
            response = conn.getresponse()
            answers.append((response.status, orjson.loads(response.read())["message"]))
        finally:
            conn.close()
    # No token: forbidden; the TrainJob's token: a real TokenReview passes, the apply finds no TrainJob.
    assert answers == [(403, "Forbidden"), (404, "Train job not found")]
    binary.terminate()
    assert binary.wait(timeout=60) == 0


def test_a_lease_taken_away_ends_the_process_with_3(
    start: Callable[[str], Binary],
    eventually: Callable[..., Any],
    control_plane: ControlPlane,
    namespace: str,
) -> None:
    lease_name = "trainer-binary-test"
    binary = start(leader_election={**LEADER_ELECTION, "resourceName": lease_name})
    path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{lease_name}"

    def held() -> dict[str, Any]:
        response = control_plane.admin_request("GET", path)
        assert response.status == 200, response.body
        lease: dict[str, Any] = response.json()
        assert lease["spec"].get("holderIdentity"), lease
        return lease

    def taken_away() -> None:
        # A read-modify-write racing the holder's renewals: a 409 means it renewed in between; read again.
        lease = held()
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        lease["spec"].update(
            holderIdentity="someone-else", leaseDurationSeconds=3600, renewTime=now, acquireTime=now
        )
        response = control_plane.admin_request("PUT", path, lease)
        assert response.status == 200, response.body

    eventually(taken_away, timeout=60)

    assert binary.wait(timeout=60) == 3
    assert "setup.leader_election_lost" in [line["event"] for line in binary.lines()]


def test_a_plugin_installed_beside_it_and_enabled_by_name_runs(
    start: Callable[..., Binary], eventually: Callable[..., Any], tmp_path: Path
) -> None:
    site = example_plugin.pip_install(tmp_path)
    binary = start(overrides={"plugins": {"enabled": ["Example"]}}, python_path=[site])
    assert eventually(lambda: binary.get("health-probe", "/healthz"), timeout=60) == "ok"
    assert eventually(lambda: binary.get("health-probe", "/readyz"), timeout=60, retry_on=(OSError,)) == "ok"
    loaded = next(line for line in binary.lines() if line.get("event") == "setup.configuration_loaded")
    assert loaded["plugins"] == ["Example"]
    binary.terminate()
    assert binary.wait(timeout=60) == 0


def test_a_plugin_no_installed_distribution_provides_stops_it_with_2_before_it_serves(
    start: Callable[..., Binary], tmp_path: Path
) -> None:
    site = example_plugin.pip_install(tmp_path)
    binary = start(overrides={"plugins": {"enabled": ["Example", "acme"]}}, python_path=[site])
    assert binary.wait(timeout=60) == 2
    lines = binary.lines()
    (invalid,) = [line for line in lines if line.get("event") == "setup.invalid_configuration"]
    assert invalid["field"] == "plugins.enabled[1]"
    assert invalid["error"].endswith(
        'plugins.enabled[1]: Not found: "acme": no installed distribution provides a '
        'kubeflow_trainer.plugins entry point named "acme" (installed: Example)'
    )
    assert not [line for line in lines if line.get("event") == "http.serving"]
