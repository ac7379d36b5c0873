"""The Trainer's own metrics, read back through the exposition the manager serves."""

from __future__ import annotations

import collections
import random
import re
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from prometheus_client import generate_latest

from controller.informers.store import DeletedFinalStateUnknown
from controller.metrics import REGISTRY
from controller.trainer.metrics import (
    JOBSET_CREATION_BUCKETS,
    REASON_APPLY,
    REASON_BUILD,
    REASONS,
    STATES,
    TrainJobStateCounts,
    count_reconcile_failure,
    observe_jobset_created,
    register_state_collector,
    trainjob_state,
    unregister_state_collector,
)

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")


def samples(prefix: str) -> dict[str, float]:
    """Every sample whose name starts with ``prefix``, as ``name{labels}`` → value."""
    out: dict[str, float] = {}
    for line in generate_latest(REGISTRY).decode().splitlines():
        match = _SAMPLE.match(line)
        if match and match.group(1).startswith(prefix):
            out[match.group(1) + (match.group(2) or "")] = float(match.group(3))
    return out


def exposition() -> str:
    return generate_latest(REGISTRY).decode()


def trainjob(*conditions: tuple[str, str], ready: int | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": [{"type": t, "status": s} for t, s in conditions]}
    if ready is not None:
        status["jobsStatus"] = [
            {"name": "node", "ready": ready, "active": 1, "succeeded": 0, "failed": 0, "suspended": 0}
        ]
    return {"metadata": {"name": "tj", "namespace": "ns"}, "status": status}


# --- state gauge -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "state"),
    [
        ({"metadata": {"name": "new"}}, "Created"),
        (trainjob(ready=0), "Created"),
        (trainjob(("Suspended", "True")), "Suspended"),
        (trainjob(("Suspended", "False")), "Created"),
        (trainjob(("Suspended", "False"), ready=2), "Running"),
        (trainjob(("Suspended", "True"), ready=2), "Suspended"),
        (trainjob(("Suspended", "False"), ("Complete", "True")), "Complete"),
        (trainjob(("Failed", "True")), "Failed"),
        (trainjob(("Complete", "True"), ("Failed", "True")), "Failed"),
        (trainjob(("Complete", "False"), ready=1), "Running"),
        ({"status": {"conditions": "garbage", "jobsStatus": [None, {"ready": "2"}]}}, "Created"),
    ],
    ids=[
        "no status yet",
        "jobs without ready pods",
        "suspended",
        "resumed but no pod ready",
        "resumed with ready pods",
        "suspended wins over ready pods",
        "complete after a resume",
        "failed",
        "failed wins over complete",
        "a false condition is ignored",
        "a malformed status reads as absent",
    ],
)
def test_each_trainjob_is_in_exactly_one_state(obj: Mapping[str, Any], state: str) -> None:
    assert trainjob_state(obj) == state


@pytest.fixture
def counts() -> Iterator[dict[str, int]]:
    """A mutable mapping the state collector reads at every scrape; the collector is removed afterwards."""
    current: dict[str, int] = {}
    collector = register_state_collector(lambda: current)
    try:
        yield current
    finally:
        unregister_state_collector(collector)


def test_the_gauge_exports_every_state_at_scrape_time(counts: dict[str, int]) -> None:
    counts.update({"Created": 2, "Suspended": 2, "Running": 1, "Complete": 2})
    assert samples("kubeflow_trainer_trainjobs") == {
        'kubeflow_trainer_trainjobs{state="Created"}': 2.0,
        'kubeflow_trainer_trainjobs{state="Suspended"}': 2.0,
        'kubeflow_trainer_trainjobs{state="Running"}': 1.0,
        'kubeflow_trainer_trainjobs{state="Complete"}': 2.0,
        'kubeflow_trainer_trainjobs{state="Failed"}': 0.0,
    }
    counts.clear()
    assert set(samples("kubeflow_trainer_trainjobs").values()) == {0.0}
    assert "# TYPE kubeflow_trainer_trainjobs gauge" in exposition()


def test_the_counts_follow_the_informers_store_through_every_kind_of_notification() -> None:
    # Random adds, updates (state changed or not), deletes and tombstones, as an informer delivers them for
    # its store; after each one the counts equal a recount of the store.
    rng = random.Random(26)
    shapes = [
        trainjob(),
        trainjob(("Suspended", "True")),
        trainjob(("Suspended", "False"), ready=2),
        trainjob(("Complete", "True")),
        trainjob(("Failed", "True")),
        {"status": "garbage"},
    ]
    handler = TrainJobStateCounts()
    store: dict[str, dict[str, Any]] = {}
    for step in range(2_000):
        name = f"tj-{rng.randrange(40)}"
        obj = {**rng.choice(shapes), "metadata": {"name": name, "namespace": "ns"}}
        old = store.get(name)
        if old is None:
            store[name] = obj
            handler.on_add(obj, is_in_initial_list=step < 20)
        elif rng.random() < 0.7:
            store[name] = obj
            handler.on_update(old, obj)
        else:
            del store[name]
            handler.on_delete(DeletedFinalStateUnknown(f"ns/{name}", old) if rng.random() < 0.5 else old)
        recount = collections.Counter(trainjob_state(o) for o in store.values())
        assert handler.snapshot() == {state: recount.get(state, 0) for state in STATES}


def test_registering_never_reads_and_a_second_collector_is_refused() -> None:
    calls: list[int] = []

    def reading() -> dict[str, int]:
        calls.append(1)
        return {}

    collector = register_state_collector(reading)
    try:
        assert calls == []
        with pytest.raises(ValueError, match="Duplicated timeseries"):
            register_state_collector(reading)
    finally:
        unregister_state_collector(collector)
    assert "kubeflow_trainer_trainjobs" not in exposition()


def test_a_failing_source_drops_only_the_gauge_from_the_scrape() -> None:
    def broken() -> dict[str, int]:
        raise RuntimeError("cache stopped")

    collector = register_state_collector(broken)
    try:
        text = exposition()
    finally:
        unregister_state_collector(collector)
    assert "kubeflow_trainer_trainjobs{" not in text
    assert "kubeflow_trainer_reconcile_failures_total" in text


# --- JobSet creation histogram -----------------------------------------------------------------------------

HISTOGRAM = "kubeflow_trainer_trainjob_jobset_creation_seconds"


def test_the_histogram_buckets_run_from_10ms_to_5min() -> None:
    assert JOBSET_CREATION_BUCKETS[0] == 0.01
    assert JOBSET_CREATION_BUCKETS[-1] == 300.0
    assert list(JOBSET_CREATION_BUCKETS) == sorted(JOBSET_CREATION_BUCKETS)
    les = re.findall(rf'^{HISTOGRAM}_bucket{{le="([^"]+)"}}', exposition(), re.MULTILINE)
    assert les == [*(str(float(b)) for b in JOBSET_CREATION_BUCKETS), "+Inf"]


def test_the_time_from_creation_to_the_jobset_is_observed() -> None:
    before = samples(HISTOGRAM)
    created = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    obj = {"metadata": {"creationTimestamp": "2026-01-01T12:00:00Z"}}
    observe_jobset_created(obj, created + timedelta(seconds=3))
    after = samples(HISTOGRAM)
    assert after[f"{HISTOGRAM}_count"] - before[f"{HISTOGRAM}_count"] == 1
    assert after[f"{HISTOGRAM}_sum"] - before[f"{HISTOGRAM}_sum"] == pytest.approx(3.0)
    assert after[f'{HISTOGRAM}_bucket{{le="2.5"}}'] == before[f'{HISTOGRAM}_bucket{{le="2.5"}}']
    assert after[f'{HISTOGRAM}_bucket{{le="5.0"}}'] - before[f'{HISTOGRAM}_bucket{{le="5.0"}}'] == 1


def test_an_offset_now_is_compared_in_absolute_time_and_skew_counts_as_zero() -> None:
    before = samples(HISTOGRAM)
    obj = {"metadata": {"creationTimestamp": "2026-01-01T12:00:00Z"}}
    plus_two = timezone(timedelta(hours=2))
    observe_jobset_created(obj, datetime(2026, 1, 1, 14, 0, 1, tzinfo=plus_two))  # 1 s later
    observe_jobset_created(obj, datetime(2026, 1, 1, 11, 59, 0, tzinfo=UTC))  # before creation: skew
    after = samples(HISTOGRAM)
    assert after[f"{HISTOGRAM}_count"] - before[f"{HISTOGRAM}_count"] == 2
    assert after[f"{HISTOGRAM}_sum"] - before[f"{HISTOGRAM}_sum"] == pytest.approx(1.0)
    assert after[f'{HISTOGRAM}_bucket{{le="0.01"}}'] - before[f'{HISTOGRAM}_bucket{{le="0.01"}}'] == 1


@pytest.mark.parametrize(
    "obj",
    [
        {},
        {"metadata": {}},
        {"metadata": {"creationTimestamp": "yesterday"}},
        {"metadata": {"creationTimestamp": "2026-01-01T12:00:00"}},
    ],
    ids=["no metadata", "no timestamp", "an unreadable timestamp", "a timestamp without a zone"],
)
def test_a_trainjob_without_a_readable_creation_time_is_not_observed(obj: dict[str, Any]) -> None:
    before = samples(HISTOGRAM)[f"{HISTOGRAM}_count"]
    observe_jobset_created(obj, datetime.now(UTC))
    assert samples(HISTOGRAM)[f"{HISTOGRAM}_count"] == before


def test_a_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        observe_jobset_created({"metadata": {"creationTimestamp": "2026-01-01T12:00:00Z"}}, datetime.now())


# --- reconcile failures ------------------------------------------------------------------------------------

FAILURES = "kubeflow_trainer_reconcile_failures_total"


def test_every_reason_is_exported_from_the_start() -> None:
    exported = {k for k in samples(FAILURES) if k.startswith(FAILURES + "{")}
    assert exported == {f'{FAILURES}{{reason="{r}"}}' for r in REASONS}
    assert REASONS == (
        "BuildFailed",
        "ApplyFailed",
        "StatusUpdateFailed",
        "RuntimeNotFound",
        "InvalidSnapshot",
        "UnsupportedRuntime",
        "InvalidTrainJob",
        "JobSetStatusFailed",
        "JobSetDeletionFailed",
        "Other",
    )
    assert f"# TYPE {FAILURES} counter" in exposition()


def test_a_failure_is_counted_under_its_reason_only() -> None:
    before = samples(FAILURES)
    count_reconcile_failure(REASON_APPLY)
    count_reconcile_failure(REASON_APPLY)
    count_reconcile_failure(REASON_BUILD)
    after = samples(FAILURES)
    assert {k: after[k] - before[k] for k in after if after[k] != before[k]} == {
        f'{FAILURES}{{reason="ApplyFailed"}}': 2.0,
        f'{FAILURES}{{reason="BuildFailed"}}': 1.0,
    }


def test_a_reason_outside_the_vocabulary_is_refused_and_counts_nothing() -> None:
    before = samples(FAILURES)
    with pytest.raises(ValueError, match="unknown reconcile failure reason 'Oops'"):
        count_reconcile_failure("Oops")
    assert samples(FAILURES) == before


def test_the_series_stay_bounded() -> None:
    assert len(STATES) == 5
    assert len(REASONS) == len(set(REASONS)) == 10
