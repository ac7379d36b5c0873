"""``support.upstream``: the configuration upstream's Go manager is started with, its log line that dates
"caches synced", and a missing binary. The process itself is exercised by ``make bench-scale`` and the
reliability takeover test, not here."""

from __future__ import annotations

from pathlib import Path

import pytest

from support import upstream


def test_upstreams_workers_started_line_dates_caches_synced(tmp_path: Path) -> None:
    log = tmp_path / "manager.log"
    log.write_text(
        '{"level":"info","ts":"2026-01-02T03:04:05.5Z","msg":"Starting workers","controller":"other"}\n'
        "not json, Starting workers\n"
        '{"level":"info","ts":"2026-01-02T03:04:06.25Z","msg":"Starting workers",'
        '"controller":"trainjob_controller","worker count":1}\n'
    )
    assert upstream.workers_started_at(log) == pytest.approx(1767323046.25)
    assert upstream.workers_started_at(log, "missing") is None
    assert upstream.workers_started_at(tmp_path / "absent.log") is None


# --- upstream's configuration -------------------------------------------------------------------------


SHIPPED = {
    "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
    "kind": "Configuration",
    "health": {"healthProbeBindAddress": ":8081", "readinessEndpointName": "readyz"},
    "metrics": {"bindAddress": ":8443", "secureServing": True},
    "webhook": {"port": 9443, "host": ""},
    "leaderElection": {"leaderElect": True, "resourceName": "trainer.kubeflow.org"},
    "controller": {"groupKindConcurrency": {"TrainJob.trainer.kubeflow.org": 5}},
    "certManagement": {"enable": True, "webhookServiceName": "svc"},
    "clientConnection": {"qps": 50, "burst": 100},
}


def test_upstream_runs_out_of_cluster_on_loopback_without_leader_election_or_rotator() -> None:
    config = upstream.configuration(SHIPPED, health_port=1, metrics_port=2, webhook_port=3, qps=7.5, burst=9)
    assert config["health"] == {"healthProbeBindAddress": "127.0.0.1:1", "readinessEndpointName": "readyz"}
    assert config["metrics"] == {"bindAddress": "127.0.0.1:2", "secureServing": False}
    assert config["webhook"] == {"host": "127.0.0.1", "port": 3}
    assert config["leaderElection"] == {"leaderElect": False, "resourceName": "trainer.kubeflow.org"}
    assert config["certManagement"] == {"enable": False, "webhookServiceName": "svc"}
    assert config["clientConnection"] == {"qps": 7.5, "burst": 9}
    assert config["controller"] == SHIPPED["controller"]
    assert SHIPPED["leaderElection"]["leaderElect"] is True  # the shipped configuration is not changed


def test_overrides_replace_top_level_fields() -> None:
    config = upstream.configuration(
        SHIPPED, health_port=1, metrics_port=2, webhook_port=3, overrides={"featureGates": {"X": True}}
    )
    assert config["featureGates"] == {"X": True}


@pytest.mark.parametrize(("qps", "burst", "field"), [(0, 100, "qps"), (-1, 100, "qps"), (50, 0, "burst")])
def test_a_limiter_that_is_not_positive_is_refused_naming_the_field(
    qps: float, burst: int, field: str
) -> None:
    with pytest.raises(ValueError, match=field):
        upstream.configuration(SHIPPED, health_port=1, metrics_port=2, webhook_port=3, qps=qps, burst=burst)


def test_a_missing_binary_names_the_build_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINER_CACHE_DIR", str(tmp_path))
    with pytest.raises(upstream.UpstreamError, match=r"hack/build-binaries\.sh trainer"):
        upstream.binary_path("v0.0.0")
