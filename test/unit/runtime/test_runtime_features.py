"""Feature gates: the table, the command-line syntax, overrides, and errors for unknown gates."""

from __future__ import annotations

import pytest

from runtime.features import (
    ALPHA,
    KNOWN_FEATURES,
    TRAIN_JOB_STATUS,
    FeatureGateError,
    FeatureGates,
    parse_feature_gates,
)


def test_the_only_gate_is_train_job_status_alpha_and_off() -> None:
    assert list(KNOWN_FEATURES) == ["TrainJobStatus"]
    assert KNOWN_FEATURES[TRAIN_JOB_STATUS].default is False
    assert KNOWN_FEATURES[TRAIN_JOB_STATUS].pre_release == ALPHA
    assert FeatureGates().enabled(TRAIN_JOB_STATUS) is False
    assert FeatureGates().enabled_set() == frozenset()


def test_the_gate_name_is_the_one_the_runtime_plugin_registry_uses() -> None:
    plugins = pytest.importorskip("runtime.plugins")  # importing every plugin; spelled apart on purpose
    assert plugins.TRAINJOB_STATUS_GATE == TRAIN_JOB_STATUS


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("TrainJobStatus=true", {"TrainJobStatus": True}),
        ("TrainJobStatus=false", {"TrainJobStatus": False}),
        (" TrainJobStatus = 1 ,", {"TrainJobStatus": True}),
        ("TrainJobStatus=T", {"TrainJobStatus": True}),
        ("TrainJobStatus=FALSE", {"TrainJobStatus": False}),
        ("TrainJobStatus=true,TrainJobStatus=false", {"TrainJobStatus": False}),
        ("", {}),
    ],
    ids=[
        "true",
        "false",
        "blanks and a trailing comma",
        "Go's T",
        "Go's FALSE",
        "the last one wins",
        "empty",
    ],
)
def test_the_command_line_syntax_is_component_bases(text: str, expected: dict[str, bool]) -> None:
    assert parse_feature_gates(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("NoSuchGate=true", "unrecognized feature gate: 'NoSuchGate'"),
        ("TrainJobStatus", "missing bool value"),
        ("TrainJobStatus=yes", "invalid value of TrainJobStatus=yes"),
        ("=true", "missing bool value"),
    ],
    ids=["an unknown gate", "no value", "a value Go does not read as a boolean", "no name"],
)
def test_bad_command_line_settings_are_errors(text: str, message: str) -> None:
    with pytest.raises(FeatureGateError, match=message):
        parse_feature_gates(text)


def test_overrides_apply_over_the_files_settings_without_changing_them() -> None:
    from_file = FeatureGates({"TrainJobStatus": True})
    from_flags = from_file.with_overrides(parse_feature_gates("TrainJobStatus=false"))
    assert from_file.enabled(TRAIN_JOB_STATUS) is True
    assert from_flags.enabled(TRAIN_JOB_STATUS) is False
    assert from_flags[TRAIN_JOB_STATUS] is False
    assert list(from_flags) == ["TrainJobStatus"]


def test_asking_for_an_unknown_gate_is_an_error_not_off() -> None:
    with pytest.raises(FeatureGateError, match="unrecognized feature gate"):
        FeatureGates().enabled("TrainJobStatuss")


def test_unknown_gates_and_non_booleans_are_refused_at_construction() -> None:
    with pytest.raises(FeatureGateError, match="unrecognized"):
        FeatureGates({"Nope": True})
    with pytest.raises(FeatureGateError, match="expected true or false"):
        FeatureGates({"TrainJobStatus": "true"})  # type: ignore[dict-item]


def test_the_value_is_frozen_and_its_repr_shows_every_gate() -> None:
    gates = FeatureGates({"TrainJobStatus": True})
    with pytest.raises(TypeError):
        gates.overrides["TrainJobStatus"] = False  # type: ignore[index]
    assert repr(gates) == "FeatureGates(TrainJobStatus=True)"
    assert gates == FeatureGates({"TrainJobStatus": True})
