"""The cache mutation detector: client-go mutation_detector_test.go, as behaviour."""

from __future__ import annotations

import threading

import pytest

from controller.informers.mutation_detector import (
    CacheMutationError,
    MutationDetector,
    enabled_by_environment,
)
from controller.informers.store import DeletedFinalStateUnknown


def cm(name: str) -> dict:
    return {"metadata": {"name": name, "namespace": "ns"}, "data": {"k": "v"}}


def test_an_unmutated_cache_passes() -> None:
    detector = MutationDetector("cms")
    for name in ("a", "b"):
        detector.add_object(cm(name))
    detector.compare_objects()


def test_a_mutated_object_is_reported_by_key() -> None:
    # mutation_detector_test.go TestMutationDetector
    detector = MutationDetector("cms")
    a, b = cm("a"), cm("b")
    detector.add_object(a)
    detector.add_object(b)
    b["data"]["k"] = "changed"
    with pytest.raises(CacheMutationError) as caught:
        detector.compare_objects()
    assert caught.value.keys == ["ns/b"]
    assert "cms" in str(caught.value)


def test_tombstones_are_not_recorded() -> None:
    detector = MutationDetector("cms")
    detector.add_object(DeletedFinalStateUnknown("ns/a", cm("a")))
    assert "recorded=0" in repr(detector)


def test_the_periodic_check_reports_a_mutation_to_the_failure_function_and_ends(auto_clock) -> None:
    failures: list[CacheMutationError] = []
    detector = MutationDetector("cms", clock=auto_clock, period=1.0, failure_func=failures.append)
    obj = cm("a")
    detector.add_object(obj)
    obj["data"] = {}
    detector.run(threading.Event())  # returns once it has reported
    assert [f.keys for f in failures] == [["ns/a"]]
    assert auto_clock.waited == [1.0]


def test_stop_raises_the_recorded_failure_once() -> None:
    detector = MutationDetector("cms")
    obj = cm("a")
    detector.add_object(obj)
    obj["data"] = {}
    with pytest.raises(CacheMutationError):
        detector.check_on_stop()
    detector.check_on_stop()  # reported already


@pytest.mark.parametrize(
    ("value", "enabled"),
    [("true", True), ("1", True), ("T", True), ("false", False), ("", False), ("yes", False)],
)
def test_the_environment_switch_parses_like_go(monkeypatch, value: str, enabled: bool) -> None:
    monkeypatch.setenv("KUBE_CACHE_MUTATION_DETECTOR", value)
    assert enabled_by_environment() is enabled
