"""The manager's command line: upstream's flag names, Go's boolean spellings, zap's levels."""

from __future__ import annotations

from pathlib import Path

import pytest
from trainer_controller_manager.flags import Flags, parse_flags


def test_no_flags_mean_the_defaults_json_logs_at_info() -> None:
    assert parse_flags([]) == Flags(
        config=None, feature_gates="", kubeconfig=None, log_level="info", json_logs=True
    )


def test_the_deployments_flags_are_understood() -> None:
    flags = parse_flags(["--config=/controller_manager_config.yaml", "--zap-log-level=2"])
    assert flags.config == Path("/controller_manager_config.yaml")
    assert flags.log_level == "debug"  # verbosity 2 is below info: debug is our lowest level
    assert flags.json_logs


def test_the_webhook_cert_dir_is_a_flag_for_local_runs() -> None:
    assert parse_flags(["--webhook-cert-dir=/certs"]).webhook_cert_dir == Path("/certs")
    assert parse_flags([]).webhook_cert_dir is None


def test_space_separated_values_work_too() -> None:
    flags = parse_flags(["--config", "c.yaml", "--feature-gates", "TrainJobStatus=true", "--kubeconfig", "k"])
    assert (flags.config, flags.feature_gates, flags.kubeconfig) == (
        Path("c.yaml"),
        "TrainJobStatus=true",
        "k",
    )


@pytest.mark.parametrize(
    ("argv", "level", "json_logs"),
    [
        (["--zap-devel"], "debug", False),
        (["--zap-devel=true"], "debug", False),
        (["--zap-devel=false"], "info", True),
        (["--zap-devel", "--zap-log-level=error"], "error", False),
        (["--zap-devel", "--zap-encoder=json"], "debug", True),
        (["--zap-encoder", "console"], "info", False),
        (["--zap-log-level", "warn"], "warning", True),
        (["--zap-log-level=panic"], "critical", True),
    ],
    ids=[
        "devel alone",
        "devel=true",
        "devel=false",
        "devel with an explicit level",
        "devel with the json encoder",
        "the console encoder",
        "warn",
        "panic",
    ],
)
def test_zap_flags_choose_the_level_and_the_format(argv: list[str], level: str, json_logs: bool) -> None:
    flags = parse_flags(argv)
    assert (flags.log_level, flags.json_logs) == (level, json_logs)


def test_compatibility_flags_are_accepted() -> None:
    parse_flags(["--zap-stacktrace-level=error", "--zap-time-encoding=rfc3339nano"])


@pytest.mark.parametrize(
    "argv",
    [
        ["--bogus"],
        ["--zap-log-level=loud"],
        ["--zap-log-level=0"],
        ["--zap-devel=maybe"],
        ["--zap-encoder=xml"],
        ["--conf=x.yaml"],  # no abbreviations
        ["positional"],
    ],
    ids=[
        "an unknown flag",
        "an unknown level",
        "verbosity 0",
        "a non-boolean",
        "an unknown encoder",
        "an abbreviation",
        "a positional argument",
    ],
)
def test_a_bad_command_line_is_a_usage_error_with_status_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        parse_flags(argv)
    assert info.value.code == 2
    assert "usage: trainer-controller-manager" in capsys.readouterr().err


def test_help_exits_0_and_documents_the_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        parse_flags(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "--feature-gates" in out
    assert "3 leader election lost" in out
