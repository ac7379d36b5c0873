"""The entry point: exit statuses, what it hands the manager, what it logs. The manager is a fake here;
the real one runs in the integration and e2e tiers."""

from __future__ import annotations

import io
import logging
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import structlog
from trainer_controller_manager import main as entry_point
from trainer_controller_manager.main import (
    EXIT_FAILURE,
    EXIT_LEADER_ELECTION_LOST,
    EXIT_OK,
    EXIT_USAGE,
    Settings,
    caches_synced,
    client_rate_limit,
    main,
)

from controller.manager.manager import LeaderElectionLost, ManagerError
from controller.trainer.config import parse_configuration

REPO = Path(__file__).resolve().parents[3]
SHIPPED = REPO / "config" / "manager" / "controller_manager_config.yaml"


@pytest.fixture(autouse=True)
def restore_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """main() configures logging for the process; put the test process's back afterwards. The module's
    logger proxy is replaced per test: structlog caches a proxy's logger (and its stream) on first use."""
    monkeypatch.setattr(entry_point, "_log", structlog.get_logger("trainer_controller_manager"))
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()
    root.handlers[:] = handlers
    root.setLevel(level)


class FakeManager:
    """Records that it ran; ``outcome`` is raised from run_until_signal (None: a clean stop)."""

    def __init__(self, outcome: BaseException | None = None) -> None:
        self.outcome = outcome
        self.ran = False

    def run_until_signal(self) -> None:
        self.ran = True
        if self.outcome is not None:
            raise self.outcome


class Run:
    """One call of main() with a fake manager: its status, the Settings it built, its JSON log lines."""

    def __init__(
        self,
        argv: list[str],
        *,
        environ: dict[str, str] | None = None,
        outcome: BaseException | None = None,
        build: Callable[[Settings], Any] | None = None,
    ) -> None:
        self.manager = FakeManager(outcome)
        self.settings: Settings | None = None
        out = io.StringIO()

        def fake_build(settings: Settings) -> FakeManager:
            self.settings = settings
            return self.manager

        self.status = main(argv, environ=environ or {}, log_stream=out, build=build or fake_build)
        self.lines = [orjson.loads(line) for line in out.getvalue().splitlines()]

    def events(self) -> list[str]:
        return [line["event"] for line in self.lines]

    def event(self, name: str) -> dict[str, Any]:
        return next(line for line in self.lines if line["event"] == name)


def test_a_clean_stop_exits_0_after_running_the_manager() -> None:
    run = Run([f"--config={SHIPPED}"])
    assert run.status == EXIT_OK
    assert run.manager.ran
    assert run.events()[-2:] == ["setup.starting_manager", "setup.stopped"]


def test_the_manager_gets_the_file_the_feature_gates_and_the_pods_addresses() -> None:
    run = Run(
        [f"--config={SHIPPED}", "--feature-gates=TrainJobStatus=true", "--kubeconfig=/k"],
        environ={"POD_IP": "10.0.0.7", "POD_NAMESPACE": "kubeflow-system"},
    )
    assert run.status == EXIT_OK
    assert run.settings is not None
    config = run.settings.config
    assert config.feature_gates.enabled("TrainJobStatus")
    assert config.controller.concurrency("TrainJob.trainer.kubeflow.org") == 5
    assert config.leader_election_enabled
    assert run.settings.kubeconfig == "/k"
    assert run.settings.serving.metrics_bind_address == "10.0.0.7:8443"
    assert run.settings.serving.health_probe_bind_address == "10.0.0.7:8081"
    assert run.settings.serving.leader_election_namespace == "kubeflow-system"
    assert run.settings.serving.webhook_bind_address == "10.0.0.7:9443"
    assert run.settings.serving.status_server_bind_address == "10.0.0.7:10443"
    assert run.event("setup.configuration_loaded")["status_server_bind_address"] == "10.0.0.7:10443"
    assert "setup.not_served_yet" not in run.events()


def test_without_a_file_the_defaults_run_without_leader_election_on_loopback() -> None:
    run = Run([])
    assert run.status == EXIT_OK
    assert run.settings is not None
    assert not run.settings.config.leader_election_enabled
    assert run.settings.serving.metrics_bind_address == "127.0.0.1:8443"
    loaded = run.event("setup.configuration_loaded")
    assert (loaded["qps"], loaded["burst"], loaded["leader_election"]) == (50.0, 100, False)
    assert "setup.metrics_tokens_in_clear" not in run.events()  # HTTPS is served: nothing to warn about


def test_metrics_auth_without_https_is_warned_about(tmp_path: Path) -> None:
    path = tmp_path / "clear.yaml"
    path.write_text(
        "apiVersion: config.trainer.kubeflow.org/v1alpha1\nkind: Configuration\n"
        "metrics: {secureServing: false, auth: {enabled: true}}\n"
    )
    run = Run([f"--config={path}"])
    assert run.status == EXIT_OK
    assert run.event("setup.metrics_tokens_in_clear")["level"] == "warning"


def test_an_invalid_configuration_exits_2_naming_the_field_and_never_builds(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "apiVersion: config.trainer.kubeflow.org/v1alpha1\nkind: Configuration\nwebhook: {prt: 1}\n"
    )
    run = Run([f"--config={path}"])
    assert run.status == EXIT_USAGE
    assert run.settings is None
    invalid = run.event("setup.invalid_configuration")
    assert invalid["field"] == "webhook.prt"
    assert invalid["level"] == "error"


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["--feature-gates=NoSuchGate=true"], "--feature-gates"),
        (["--feature-gates=TrainJobStatus"], "--feature-gates"),
        ([f"--config={REPO / 'no-such-file.yaml'}"], ""),
    ],
    ids=["an unknown gate", "a gate without a value", "a missing file"],
)
def test_other_bad_settings_exit_2(argv: list[str], field: str) -> None:
    run = Run(argv)
    assert run.status == EXIT_USAGE
    assert run.event("setup.invalid_configuration")["field"] == field


def test_a_bind_address_on_every_interface_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "all.yaml"
    path.write_text(
        "apiVersion: config.trainer.kubeflow.org/v1alpha1\nkind: Configuration\n"
        "metrics: {bindAddress: '0.0.0.0:8443'}\n"
    )
    run = Run([f"--config={path}"])
    assert run.status == EXIT_USAGE
    assert run.event("setup.invalid_configuration")["field"] == "metrics.bindAddress"


def test_a_plugin_no_distribution_provides_exits_2_naming_its_entry_before_connecting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime.framework import registry

    monkeypatch.setattr(registry, "installed_entry_points", lambda: ())
    path = tmp_path / "plugins.yaml"
    path.write_text(
        "apiVersion: config.trainer.kubeflow.org/v1alpha1\nkind: Configuration\nplugins: {enabled: [acme]}\n"
    )
    # The real build: it stops at the plugins, before it looks for a kubeconfig (there is none here).
    run = Run([f"--config={path}", "--kubeconfig=/nonexistent"], build=entry_point.build_manager)
    assert run.status == EXIT_USAGE
    invalid = run.event("setup.invalid_configuration")
    assert invalid["field"] == "plugins.enabled[0]"
    assert invalid["error"] == (
        'invalid configuration: plugins.enabled[0]: Not found: "acme": no installed distribution provides a '
        'kubeflow_trainer.plugins entry point named "acme" (installed: none)'
    )
    assert run.event("setup.configuration_loaded")["plugins"] == ["acme"]
    assert "setup.starting_manager" not in run.events()


def test_bad_flags_exit_2_before_logging_is_configured(capsys: pytest.CaptureFixture[str]) -> None:
    run = Run(["--no-such-flag"])
    assert run.status == EXIT_USAGE
    assert run.lines == []
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err


def test_help_exits_0() -> None:
    assert Run(["--help"]).status == EXIT_OK


def test_a_lost_lease_exits_3() -> None:
    run = Run([], outcome=LeaderElectionLost("leader election lost (lease trainer.kubeflow.org)"))
    assert run.status == EXIT_LEADER_ELECTION_LOST
    assert run.event("setup.leader_election_lost")["exit_status"] == 3


@pytest.mark.parametrize(
    "outcome",
    [ManagerError("caches did not sync within 120.0s"), OSError("address in use")],
    ids=["a manager error", "any other error"],
)
def test_a_runtime_failure_exits_1_with_the_traceback_logged(outcome: Exception) -> None:
    run = Run([], outcome=outcome)
    assert run.status == EXIT_FAILURE
    failed = run.event("setup.failed")
    assert failed["error"] == str(outcome)
    assert failed["exception"]  # structured traceback


def test_a_failure_while_building_exits_1() -> None:
    def broken(settings: Settings) -> FakeManager:
        raise RuntimeError("no kubeconfig")

    run = Run([], build=broken)
    assert run.status == EXIT_FAILURE
    assert run.event("setup.failed")["error"] == "no kubeconfig"


def test_an_interrupt_before_the_signal_handlers_exits_0() -> None:
    assert Run([], outcome=KeyboardInterrupt()).status == EXIT_OK


def test_zap_devel_switches_to_console_lines() -> None:
    out = io.StringIO()
    status = main(["--zap-devel"], environ={}, log_stream=out, build=lambda settings: FakeManager())
    assert status == EXIT_OK
    assert "setup.stopped" in out.getvalue()
    assert not out.getvalue().lstrip().startswith("{")


def test_loading_flags_and_configuration_does_not_import_the_runtime() -> None:
    """The Trainer glue is imported when the manager is built, so a bad config fails fast and alone.
    (The configuration shares the feature gates and field errors of `runtime`, not its pipeline.)"""
    pipeline = ("runtime.core", "runtime.info", "runtime.plugins", "controller.trainer.setup")
    code = (
        "import sys, trainer_controller_manager.main as m;"
        f"print(sorted(n for n in sys.modules if n in {pipeline!r}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("section", "rate"),
    [
        ("", (50.0, 100)),
        ("clientConnection: {qps: 7.5, burst: 3}\n", (7.5, 3)),
        ("clientConnection: {qps: 0, burst: 0}\n", (5.0, 10)),
    ],
    ids=["upstream's defaults", "configured values", "zeros are client-go's defaults, as upstream"],
)
def test_the_client_rate_limit_is_applied_as_the_go_manager_applies_it(
    section: str, rate: tuple[float, int]
) -> None:
    config = parse_configuration(
        "apiVersion: config.trainer.kubeflow.org/v1alpha1\nkind: Configuration\n" + section
    )
    assert client_rate_limit(config) == rate


class FakeCache:
    def __init__(self) -> None:
        self.synced = False

    def has_synced(self) -> bool:
        return self.synced


def test_readiness_waits_for_the_caches() -> None:
    cache = FakeCache()
    check = caches_synced(cache)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="caches are not synced yet"):
        check()
    cache.synced = True
    check()
