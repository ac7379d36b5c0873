"""Workqueue metrics as scraped: client-go's metrics_test.go and controller-runtime's workqueue metrics,
asserted on the Prometheus exposition (queue names are unique: the registry is process-global)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from prometheus_client import generate_latest

from controller.clock import FakeClock
from controller.metrics import REGISTRY
from controller.workqueue import (
    UNFINISHED_WORK_UPDATE_PERIOD,
    DelayingQueue,
    NoopMetricsProvider,
    PriorityQueue,
    PrometheusMetricsProvider,
    Queue,
    SettableGaugeMetric,
)


class SignallingGauge:
    """Delegates ``set`` and signals each call, so a test can wait for the updater thread."""

    def __init__(self, inner: SettableGaugeMetric) -> None:
        self.inner = inner
        self.calls = 0
        self.updated = threading.Event()

    def set(self, value: float) -> None:
        self.inner.set(value)
        self.calls += 1
        self.updated.set()


class SignallingProvider(PrometheusMetricsProvider):
    """The Prometheus provider, with the unfinished-work gauges wrapped in :class:`SignallingGauge`."""

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        self.unfinished = SignallingGauge(super().new_unfinished_work_seconds_metric(name))
        return self.unfinished

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        self.longest = SignallingGauge(super().new_longest_running_processor_seconds_metric(name))
        return self.longest


def exposition_lines(name: str) -> list[str]:
    return [
        line
        for line in generate_latest(REGISTRY).decode().splitlines()
        if f'name="{name}"' in line and "_bucket" not in line
    ]


def test_adds_depth_latency_and_work_duration_follow_the_items(unique_name: Any, sample: Any) -> None:
    # upstream: TestMetrics
    name = unique_name()
    clock = FakeClock(start=0.0)
    provider = SignallingProvider()
    with Queue[str](name=name, clock=clock, metrics_provider=provider) as q:
        q.add("foo")
        assert sample("workqueue_adds_total", name) == 1
        assert sample("workqueue_depth", name, priority="") == 1

        clock.step(50e-6)
        assert q.get() == ("foo", False)
        assert sample("workqueue_queue_duration_seconds_count", name) == 1
        assert sample("workqueue_queue_duration_seconds_sum", name) == pytest.approx(50e-6)

        # added back while processing; the duplicate adds are collapsed
        for _ in range(5):
            q.add("foo")
        assert sample("workqueue_adds_total", name) == 2
        assert sample("workqueue_depth", name, priority="") == 1

        clock.step(25e-6)
        q.done("foo")
        assert sample("workqueue_work_duration_seconds_count", name) == 1
        assert sample("workqueue_work_duration_seconds_sum", name) == pytest.approx(25e-6)
        assert sample("workqueue_depth", name, priority="") == 1

        assert q.get() == ("foo", False)
        assert sample("workqueue_queue_duration_seconds_count", name) == 2
        assert sample("workqueue_queue_duration_seconds_sum", name) == pytest.approx(75e-6)
        assert sample("workqueue_depth", name, priority="") == 0

        # the updater refreshes the unfinished-work gauges every 500 ms of the queue's clock
        clock.step(UNFINISHED_WORK_UPDATE_PERIOD)
        assert provider.longest.updated.wait(5)
        assert sample("workqueue_unfinished_work_seconds", name) == pytest.approx(0.5)
        assert sample("workqueue_longest_running_processor_seconds", name) == pytest.approx(0.5)

        clock.step(1e-3)
        q.done("foo")
        assert sample("workqueue_work_duration_seconds_count", name) == 2
        assert sample("workqueue_work_duration_seconds_sum", name) == pytest.approx(25e-6 + 0.501)


def test_the_unfinished_work_updater_stops_at_shut_down(unique_name: Any) -> None:
    # upstream: TestMetricShutdown
    name = unique_name()
    clock = FakeClock()
    provider = SignallingProvider()
    q = Queue[str](name=name, clock=clock, metrics_provider=provider)
    clock.step(UNFINISHED_WORK_UPDATE_PERIOD)
    assert provider.unfinished.updated.wait(5)
    q.shut_down()
    assert f"workqueue/{name}/metrics" not in {t.name for t in threading.enumerate()}
    calls = provider.unfinished.calls
    clock.step(3600.0)
    assert provider.unfinished.calls == calls


def test_the_exposition_labels_name_and_controller_with_the_queue_name(unique_name: Any) -> None:
    name = unique_name()
    # A fake clock: the metrics thread's periodic update of the unfinished-work gauges must not run between
    # get() and the scrape (on a loaded machine the real clock lets it, and the gauge is then above 0).
    with Queue[str](name=name, clock=FakeClock()) as q:
        q.add("a")
        q.add("b")
        q.get()
        lines = exposition_lines(name)
    assert f'workqueue_depth{{controller="{name}",name="{name}",priority=""}} 1.0' in lines
    assert f'workqueue_adds_total{{controller="{name}",name="{name}"}} 2.0' in lines
    assert f'workqueue_queue_duration_seconds_count{{controller="{name}",name="{name}"}} 1.0' in lines
    assert f'workqueue_work_duration_seconds_count{{controller="{name}",name="{name}"}} 0.0' in lines
    assert f'workqueue_unfinished_work_seconds{{controller="{name}",name="{name}"}} 0.0' in lines
    assert f'workqueue_longest_running_processor_seconds{{controller="{name}",name="{name}"}} 0.0' in lines
    # a plain queue has no retries series (client-go creates it with the delaying queue)
    assert not [line for line in lines if line.startswith("workqueue_retries_total")]


def test_an_unnamed_queue_records_nothing_and_starts_no_thread() -> None:
    before = generate_latest(REGISTRY)
    threads_before = {t.name for t in threading.enumerate()}
    with Queue[str]() as q:
        q.add("a")
        assert {t.name for t in threading.enumerate()} == threads_before
        q.get()
        q.done("a")
    assert REGISTRY.get_sample_value("workqueue_adds_total", {"name": "", "controller": ""}) is None
    assert generate_latest(REGISTRY).count(b"workqueue_adds_total{") == before.count(b"workqueue_adds_total{")


def test_the_noop_provider_records_nothing_for_a_named_queue(unique_name: Any) -> None:
    name = unique_name()
    with Queue[str](name=name, metrics_provider=NoopMetricsProvider()) as q:
        assert f"workqueue/{name}/metrics" not in {t.name for t in threading.enumerate()}
        q.add("a")
    assert exposition_lines(name) == []


def test_every_add_after_counts_a_retry_as_client_go_does(
    unique_name: Any, sample: Any, clock: FakeClock
) -> None:
    name = unique_name()
    q = DelayingQueue[str](name=name, clock=clock)
    assert sample("workqueue_retries_total", name) == 0
    q.add_after("a", 0)
    q.add_after("b", 1.0)
    q.add_after("b", 2.0)  # collapsed, still counted
    assert sample("workqueue_retries_total", name) == 3
    q.shut_down()
    q.add_after("c", 1.0)  # ignored, not counted
    assert sample("workqueue_retries_total", name) == 3


def test_a_delayed_item_counts_as_an_add_when_it_is_added(
    unique_name: Any, sample: Any, clock: FakeClock, wait_until: Any
) -> None:
    name = unique_name()
    with DelayingQueue[str](name=name, clock=clock) as q:
        q.add_after("a", 1.0)
        assert sample("workqueue_adds_total", name) == 0
        assert sample("workqueue_depth", name, priority="") == 0
        clock.step(1.0)
        wait_until(lambda: len(q) == 1)
        assert sample("workqueue_adds_total", name) == 1
        assert sample("workqueue_depth", name, priority="") == 1


# --- the priority queue -------------------------------------------------------------------------------------


def test_priority_queue_labels_depth_by_priority(unique_name: Any, sample: Any, clock: FakeClock) -> None:
    name = unique_name()
    with PriorityQueue[str](name=name, clock=clock) as q:
        q.add_with_opts("low", priority=-100)
        q.add_with_opts("high", priority=10)
        q.add_with_opts("later", priority=10, after=5.0)  # not ready: not in depth
        assert sample("workqueue_depth", name, priority="-100") == 1
        assert sample("workqueue_depth", name, priority="10") == 1
        assert sample("workqueue_adds_total", name) == 2
        assert sample("workqueue_retries_total", name) == 1
        assert q.get_with_priority() == ("high", 10, False)
        assert sample("workqueue_depth", name, priority="10") == 0
        lines = exposition_lines(name)
    assert f'workqueue_depth{{controller="{name}",name="{name}",priority="-100"}} 1.0' in lines
    assert not [line for line in lines if 'priority=""' in line]


def test_priority_queue_depth_switches_to_a_placeholder_after_25_distinct_priorities(
    unique_name: Any, sample: Any, clock: FakeClock
) -> None:
    name = unique_name()
    with PriorityQueue[str](name=name, clock=clock) as q:
        for priority in range(25):
            q.add_with_opts(f"item-{priority}", priority=priority)
        assert sample("workqueue_depth", name, priority="24") == 1
        q.add_with_opts("item-25", priority=25)  # the 26th distinct priority
        assert sample("workqueue_depth", name, priority="25") == 0
        assert sample("workqueue_depth", name, priority="exceeded_cardinality_limit") == 1
        # from now on every change goes to the placeholder, known priorities included
        assert q.get_with_priority() == ("item-25", 25, False)
        assert q.get_with_priority() == ("item-24", 24, False)
        assert sample("workqueue_depth", name, priority="exceeded_cardinality_limit") == -1
        assert sample("workqueue_depth", name, priority="24") == 1


def test_priority_queue_retries_count_only_positive_delays(
    unique_name: Any, sample: Any, clock: FakeClock
) -> None:
    name = unique_name()
    with PriorityQueue[str](name=name, clock=clock) as q:
        q.add_with_opts("a")
        q.add_after("a", 0)
        q.add_after("b", 1.0)
        q.add_after("b", 1.0)  # collapsed, still counted
        q.add_rate_limited("c")  # 5 ms from the rate limiter
        assert sample("workqueue_retries_total", name) == 3
