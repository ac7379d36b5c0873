"""The event recorder: client-go tools/record (event_test.go, events_cache_test.go's logger), as behaviour.

Events are observed in a fake API (``FakeEventSink``): it stores Event objects, refuses a duplicate name,
applies merge patches of top-level fields, and answers NotFound for a missing Event (``ttl_expired`` removes
an Event when it is first patched). It does not model validation or resourceVersions. ``stop()`` flushes the
queue, so no test waits for the thread.
"""

from __future__ import annotations

from typing import Any

import pytest

from controller.client.errors import AlreadyExists, NotFound, ServerError
from controller.client.gvk import GVK
from controller.clock import FakeClock
from controller.manager.recorder import MAX_MESSAGE_LENGTH, EventBroadcaster


class FakeEventSink:
    def __init__(self) -> None:
        self.events: dict[tuple[str, str], dict[str, Any]] = {}
        self.failing = False
        self.ttl_expired = False

    def create(self, obj: Any) -> dict[str, Any]:
        if self.failing:
            raise ServerError("etcd is unhappy", status=500, reason="InternalError")
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        if key in self.events:
            raise AlreadyExists("exists", status=409, reason="AlreadyExists")
        self.events[key] = dict(obj)
        return self.events[key]

    def patch(
        self, gvk: GVK, name: str, patch: Any, namespace: str | None = None, patch_type: Any = "merge"
    ) -> dict[str, Any]:
        assert gvk == GVK("", "v1", "Event") and patch_type == "merge"
        if self.ttl_expired:
            self.events.pop((namespace or "", name), None)
        event = self.events.get((namespace or "", name))
        if event is None:
            raise NotFound("not found", status=404, reason="NotFound")
        event.update(patch)
        return event

    def only(self) -> dict[str, Any]:
        assert len(self.events) == 1, self.events
        return next(iter(self.events.values()))


JOB = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "metadata": {"name": "job", "namespace": "team", "uid": "u-1", "resourceVersion": "42"},
}
RUNTIME = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "ClusterTrainingRuntime",
    "metadata": {"name": "torch", "uid": "u-2"},
}


@pytest.fixture
def sink() -> FakeEventSink:
    return FakeEventSink()


@pytest.fixture
def broadcaster(sink: FakeEventSink, clock: FakeClock) -> EventBroadcaster:
    return EventBroadcaster(sink, clock=clock, host="node-1")


def test_an_event_becomes_a_core_v1_event_about_the_object(
    broadcaster: EventBroadcaster, sink: FakeEventSink
) -> None:
    broadcaster.start()
    broadcaster.new_recorder("trainer").event(JOB, "Warning", "TrainJobResourcesCreationFailed", "no quota")
    broadcaster.stop()
    event = sink.only()
    assert event["metadata"]["namespace"] == "team"
    assert event["metadata"]["name"].startswith("job.")
    assert event["involvedObject"] == {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "name": "job",
        "namespace": "team",
        "uid": "u-1",
        "resourceVersion": "42",
    }
    assert (event["type"], event["reason"], event["message"]) == (
        "Warning",
        "TrainJobResourcesCreationFailed",
        "no quota",
    )
    assert event["source"] == {"component": "trainer", "host": "node-1"}
    assert event["count"] == 1
    assert event["firstTimestamp"] == event["lastTimestamp"] == "2026-01-01T00:00:00Z"
    assert broadcaster.statistics().created == 1


def test_a_cluster_scoped_objects_events_go_to_the_default_namespace(
    broadcaster: EventBroadcaster, sink: FakeEventSink
) -> None:
    broadcaster.start()
    broadcaster.new_recorder("trainer").eventf(RUNTIME, "Normal", "Validated", "%d plugins", 3)
    broadcaster.stop()
    event = sink.only()
    assert event["metadata"]["namespace"] == "default"
    assert "namespace" not in event["involvedObject"]
    assert event["message"] == "3 plugins"


def test_repeats_of_one_event_become_one_event_with_a_count(
    broadcaster: EventBroadcaster, sink: FakeEventSink, clock: FakeClock
) -> None:
    # events_cache_test.go "TestEventCorrelator": identical events are a series (count, lastTimestamp)
    recorder = broadcaster.new_recorder("trainer")
    broadcaster.start()
    for _ in range(3):
        recorder.event(JOB, "Normal", "Created", "created the JobSet")
        clock.step(60)
    recorder.event(JOB, "Normal", "Created", "a different message")
    broadcaster.stop()
    series = [e for e in sink.events.values() if e["message"] == "created the JobSet"]
    assert len(series) == 1
    assert series[0]["count"] == 3
    assert series[0]["firstTimestamp"] == "2026-01-01T00:00:00Z"
    assert series[0]["lastTimestamp"] == "2026-01-01T00:02:00Z"
    assert len(sink.events) == 2
    stats = broadcaster.statistics()
    assert (stats.recorded, stats.created, stats.patched) == (4, 2, 2)


def test_a_series_whose_event_expired_starts_again(
    broadcaster: EventBroadcaster, sink: FakeEventSink, clock: FakeClock
) -> None:
    sink.ttl_expired = True  # the API server's event TTL removes the Event before its first repeat
    recorder = broadcaster.new_recorder("trainer")
    broadcaster.start()
    recorder.event(JOB, "Normal", "Created", "x")
    clock.step(1)
    recorder.event(JOB, "Normal", "Created", "x")
    broadcaster.stop()
    event = sink.only()
    assert event["count"] == 1
    assert event["firstTimestamp"] == "2026-01-01T00:00:01Z"


def test_long_messages_are_truncated(broadcaster: EventBroadcaster, sink: FakeEventSink) -> None:
    broadcaster.start()
    broadcaster.new_recorder("trainer").event(JOB, "Warning", "Failed", "x" * 5000)
    broadcaster.stop()
    message = sink.only()["message"]
    assert len(message) == MAX_MESSAGE_LENGTH and message.endswith("...")


def test_a_full_queue_drops_and_counts_instead_of_blocking(sink: FakeEventSink, clock: FakeClock) -> None:
    broadcaster = EventBroadcaster(sink, clock=clock, queue_size=2)
    recorder = broadcaster.new_recorder("trainer")
    for i in range(5):  # not started: nothing drains the queue
        recorder.event(JOB, "Normal", "Step", f"step {i}")
    stats = broadcaster.statistics()
    assert (stats.recorded, stats.dropped) == (2, 3)
    broadcaster.start()
    broadcaster.stop()
    assert sorted(e["message"] for e in sink.events.values()) == ["step 0", "step 1"]


def test_a_failed_write_is_counted_not_raised(broadcaster: EventBroadcaster, sink: FakeEventSink) -> None:
    sink.failing = True
    broadcaster.start()
    broadcaster.new_recorder("trainer").event(JOB, "Normal", "Created", "x")
    broadcaster.stop()
    assert sink.events == {}
    assert broadcaster.statistics().failed == 1


def test_events_after_stop_are_dropped(broadcaster: EventBroadcaster, sink: FakeEventSink) -> None:
    broadcaster.start()
    broadcaster.stop()
    broadcaster.new_recorder("trainer").event(JOB, "Normal", "Late", "x")
    assert sink.events == {}
    assert broadcaster.statistics().dropped == 1


@pytest.mark.parametrize(
    ("obj", "type_", "reason"),
    [(JOB, "Error", "X"), (JOB, "Normal", ""), ({"kind": "TrainJob", "metadata": {}}, "Normal", "X")],
    ids=["bad-type", "no-reason", "no-name"],
)
def test_misuse_fails_loudly(broadcaster: EventBroadcaster, obj: Any, type_: str, reason: str) -> None:
    with pytest.raises(ValueError):
        broadcaster.new_recorder("trainer").event(obj, type_, reason, "m")
