"""The controller's worker loop: controller-runtime pkg/internal/controller/controller_test.go, as behaviour.

Most tests run one worker turn at a time on the test thread (``warmup`` then ``process_next_work_item``)
against the real priority queue on a fake clock, and assert on the queue's state and the metrics.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from controller import metrics
from controller.clock import FakeClock
from controller.controller.controller import CacheSyncTimeout, Controller
from controller.controller.handler import EnqueueRequestForObject
from controller.controller.reconcile import Func, Request, Result, TerminalError, reconcile_id
from controller.controller.source import Kind

REQ = Request("ns", "a")
SENTINEL = Request("ns", "sentinel")


def sample(name: str, metric: str, **labels: str) -> float | None:
    return metrics.REGISTRY.get_sample_value(metric, {"controller": name, **labels})


def total(name: str, result: str) -> float | None:
    return sample(name, "controller_runtime_reconcile_total", result=result)


class Script:
    """A reconciler that plays a list of outcomes (a Result or an exception to raise), then succeeds."""

    def __init__(self, *outcomes: Result | BaseException) -> None:
        self.outcomes = list(outcomes)
        self.seen: list[Request] = []

    def reconcile(self, request: Request) -> Result:
        self.seen.append(request)
        outcome = self.outcomes.pop(0) if self.outcomes else Result()
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


@pytest.fixture
def make(clock: FakeClock, fresh_name: str) -> Iterator[Callable[..., Controller]]:
    made: list[Controller] = []

    def factory(reconciler: Any, **kwargs: Any) -> Controller:
        ctrl = Controller(kwargs.pop("name", fresh_name), reconciler, clock=clock, **kwargs)
        made.append(ctrl)
        return ctrl

    yield factory
    for ctrl in made:
        ctrl.stop()


def ready_after(ctrl: Controller, clock: FakeClock, seconds: float) -> tuple[Request, int]:
    """Steps the clock by ``seconds`` and returns what the queue then hands out (blocks until it is ready)."""
    clock.step(seconds)
    item, priority, shutdown = ctrl.queue.get_with_priority()
    assert not shutdown and item is not None
    ctrl.queue.done(item)
    return item, priority


def nothing_due_within(ctrl: Controller, clock: FakeClock, seconds: float) -> bool:
    """True if no request becomes ready within ``seconds``: a sentinel due then is handed out alone."""
    ctrl.queue.add_with_opts(SENTINEL, after=seconds)
    item, _ = ready_after(ctrl, clock, seconds)
    return item == SENTINEL and len(ctrl.queue) == 0


# --- the result table (reconcileHandler) ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "result_label", "requeues", "ready_in"),
    [
        # "should call Reconciler if an item is enqueued" / "prometheus metric reconcile_total: should get
        # updated on successful reconciliation"
        pytest.param(Result(), "success", 0, None, id="success-forgets"),
        # "should requeue a Request if there is an error and continue processing items"; also stands for
        # "should perform error behavior if error is not nil, regardless of RequeueAfter": in Python a raise
        # carries no result, so error behaviour is all there is.
        pytest.param(RuntimeError("boom"), "error", 1, 0.005, id="error-rate-limited"),
        # "should not requeue a Request if there is a terminal error"
        pytest.param(TerminalError(ValueError("bad spec")), "error", 0, None, id="terminal-not-requeued"),
        # "should requeue a Request with rate limiting if the Result sets Requeue:true and continue
        # processing items"
        pytest.param(Result(requeue=True), "requeue", 1, 0.005, id="requeue-rate-limited"),
        # "should requeue a Request after a duration (but not rate-limited) if the Result sets RequeueAfter
        # (regardless of Requeue)"
        pytest.param(Result(requeue_after=30.0, requeue=True), "requeue_after", 0, 30.0, id="requeue-after"),
    ],
)
def test_result_table(  # noqa: PLR0917 - fixtures plus the table's columns
    make: Callable[..., Controller],
    clock: FakeClock,
    outcome: Result | BaseException,
    result_label: str,
    requeues: int,
    ready_in: float | None,
) -> None:
    ctrl = make(Script(outcome))
    assert ctrl.warmup()
    ctrl.queue.add(REQ)

    assert ctrl.process_next_work_item()

    assert ctrl.queue.num_requeues(REQ) == requeues
    assert len(ctrl.queue) == 0, "nothing is ready right after the reconcile"
    assert total(ctrl.name, result_label) == 1
    errors = 1.0 if result_label == "error" else 0.0
    assert sample(ctrl.name, "controller_runtime_reconcile_errors_total") == errors
    terminal = 1.0 if isinstance(outcome, TerminalError) else 0.0
    assert sample(ctrl.name, "controller_runtime_terminal_reconcile_errors_total") == terminal
    if ready_in is None:
        assert nothing_due_within(ctrl, clock, 2000.0)
    else:
        assert nothing_due_within(ctrl, clock, ready_in * 0.5)
        assert ready_after(ctrl, clock, ready_in * 0.5) == (REQ, 0)


def test_requeue_after_forgets_earlier_backoff(make: Callable[..., Controller], clock: FakeClock) -> None:
    ctrl = make(Script(RuntimeError("1"), Result(requeue_after=5.0)))
    assert ctrl.warmup()
    ctrl.queue.add(REQ)
    assert ctrl.process_next_work_item()
    assert ctrl.queue.num_requeues(REQ) == 1
    assert ready_after(ctrl, clock, 0.005) == (REQ, 0)
    ctrl.queue.add(REQ)
    assert ctrl.process_next_work_item()
    assert ctrl.queue.num_requeues(REQ) == 0


@pytest.mark.parametrize(
    ("outcome", "priority_back"),
    [
        # "should retain the priority when the reconciler requests a requeue"
        pytest.param(Result(requeue=True), 7, id="requeue-retains"),
        # "should use the priority from Result when the reconciler requests a requeue"
        pytest.param(Result(requeue=True, priority=3), 3, id="requeue-uses-result"),
        # "should retain the priority with RequeueAfter"
        pytest.param(Result(requeue_after=1.0), 7, id="requeue-after-retains"),
        # "should use the priority from Result with RequeueAfter"
        pytest.param(Result(requeue_after=1.0, priority=3), 3, id="requeue-after-uses-result"),
        # "should retain the priority when there was an error"
        pytest.param(RuntimeError("x"), 7, id="error-retains"),
    ],
)
def test_requeue_priority(
    make: Callable[..., Controller], clock: FakeClock, outcome: Result | BaseException, priority_back: int
) -> None:
    ctrl = make(Script(outcome))
    assert ctrl.warmup()
    ctrl.queue.add_with_opts(REQ, priority=7)
    assert ctrl.process_next_work_item()
    assert ready_after(ctrl, clock, 1.0) == (REQ, priority_back)


def test_failures_back_off_exponentially_per_key_until_a_success_forgets(
    make: Callable[..., Controller], clock: FakeClock
) -> None:
    # "should not reset backoff until there's a non-error result"
    ctrl = make(Script(RuntimeError("1"), RuntimeError("2"), RuntimeError("3"), Result()))
    assert ctrl.warmup()
    ctrl.queue.add(REQ)
    delay = 0.005
    for failures in (1, 2, 3):
        assert ctrl.process_next_work_item()
        assert ctrl.queue.num_requeues(REQ) == failures
        # Not due before its backoff (which doubles each time), due right at it.
        assert nothing_due_within(ctrl, clock, delay / 2)
        assert ready_after(ctrl, clock, delay / 2) == (REQ, 0)
        ctrl.queue.add(REQ)
        delay *= 2
    assert ctrl.process_next_work_item()
    assert ctrl.queue.num_requeues(REQ) == 0
    assert total(ctrl.name, "error") == 3
    assert total(ctrl.name, "success") == 1


def test_one_keys_failures_do_not_slow_another_key(make: Callable[..., Controller]) -> None:
    other = Request("ns", "b")
    ctrl = make(Func(lambda r: (_ for _ in ()).throw(RuntimeError("x")) if r == REQ else Result()))
    assert ctrl.warmup()
    ctrl.queue.add(REQ)
    assert ctrl.process_next_work_item()
    ctrl.queue.add(other)
    assert ctrl.queue.num_requeues(other) == 0
    assert len(ctrl.queue) == 1


# --- metrics ----------------------------------------------------------------------------------------------


def test_start_preinitialises_every_series(make: Callable[..., Controller], informer: Any) -> None:
    ctrl = make(Script(), max_concurrent_reconciles=3)
    ctrl.watch(Kind(informer, EnqueueRequestForObject()))
    ctrl.start()
    for result in ("success", "error", "requeue", "requeue_after"):
        assert total(ctrl.name, result) == 0
    for metric in (
        "controller_runtime_reconcile_errors_total",
        "controller_runtime_terminal_reconcile_errors_total",
        "controller_runtime_reconcile_panics_total",
        "controller_runtime_reconcile_timeouts_total",
        "controller_runtime_active_workers",
    ):
        assert sample(ctrl.name, metric) == 0, metric
    assert sample(ctrl.name, "controller_runtime_max_concurrent_reconciles") == 3


def test_active_workers_counts_a_running_reconcile_and_reconcile_time_observes_it(
    make: Callable[..., Controller], clock: FakeClock
) -> None:
    # "should add a reconcile time to the reconcile time histogram"
    during: list[float | None] = []

    def reconcile(request: Request) -> Result:
        during.append(sample(name, "controller_runtime_active_workers"))
        clock.step(0.3)  # the reconcile "takes" 0.3 s of fake time
        return Result()

    ctrl = make(Func(reconcile))
    name = ctrl.name
    assert ctrl.warmup()
    ctrl.queue.add(REQ)
    assert ctrl.process_next_work_item()
    assert during == [1]
    assert sample(name, "controller_runtime_active_workers") == 0
    assert sample(name, "controller_runtime_reconcile_time_seconds_count") == 1
    assert sample(name, "controller_runtime_reconcile_time_seconds_sum") == pytest.approx(0.3)
    assert sample(name, "controller_runtime_reconcile_time_seconds_bucket", le="0.25") == 0
    assert sample(name, "controller_runtime_reconcile_time_seconds_bucket", le="0.3") == 1


# --- reconcile ID and logging -----------------------------------------------------------------------------


def test_each_reconcile_has_its_own_id_bound_into_the_log_context(make: Callable[..., Controller]) -> None:
    contexts: list[dict[str, Any]] = []

    def reconcile(request: Request) -> Result:
        contexts.append({**structlog.contextvars.get_contextvars(), "var": reconcile_id.get()})
        return Result()

    ctrl = make(Func(reconcile))
    assert ctrl.warmup()
    for name in ("a", "b"):
        ctrl.queue.add(Request("ns", name))
        assert ctrl.process_next_work_item()
    first, second = contexts
    assert first["controller"] == ctrl.name and first["namespace"] == "ns" and first["name"] == "a"
    assert first["reconcile_id"] == first["var"] and len(first["reconcile_id"]) == 36
    assert second["reconcile_id"] != first["reconcile_id"]
    assert reconcile_id.get() == "" and "reconcile_id" not in structlog.contextvars.get_contextvars()


@pytest.mark.parametrize(
    "error", [RuntimeError("boom"), TerminalError("bad spec")], ids=["error", "terminal"]
)
def test_a_failed_reconcile_is_logged_once_with_its_keys(
    make: Callable[..., Controller], error: Exception
) -> None:
    ctrl = make(Script(error))
    assert ctrl.warmup()
    ctrl.queue.add(REQ)
    with capture_logs() as logs:
        assert ctrl.process_next_work_item()
    failed = [entry for entry in logs if entry["event"] == "reconcile.failed"]
    assert len(failed) == 1
    entry = failed[0]
    assert (entry["controller"], entry["namespace"], entry["name"]) == (ctrl.name, "ns", "a")
    assert len(entry["reconcile_id"]) == 36
    assert entry["log_level"] == "error"
    assert entry["exc_info"] is error
    assert entry["terminal"] is isinstance(error, TerminalError)


def test_terminal_error_raised_from_a_cause_is_terminal(
    make: Callable[..., Controller], clock: FakeClock
) -> None:
    def reconcile(request: Request) -> Result:
        try:
            raise KeyError("spec.runtimeRef")
        except KeyError as exc:
            raise TerminalError(exc) from exc

    ctrl = make(Func(reconcile))
    assert ctrl.warmup()
    ctrl.queue.add(REQ)
    assert ctrl.process_next_work_item()
    assert sample(ctrl.name, "controller_runtime_terminal_reconcile_errors_total") == 1
    assert nothing_due_within(ctrl, clock, 2000.0)


# --- workers, start and stop ------------------------------------------------------------------------------


def test_two_workers_never_reconcile_one_key_at_once(make: Callable[..., Controller]) -> None:
    # The workqueue's stingy property seen from the controller: "never two workers on one key".
    lock = threading.Condition()
    running: set[Request] = set()
    overlaps: list[Request] = []
    done: list[Request] = []
    release_a = threading.Event()
    a_started = threading.Event()
    other = Request("ns", "b")

    def reconcile(request: Request) -> Result:
        with lock:
            if request in running:
                overlaps.append(request)
            running.add(request)
        if request == REQ and not release_a.is_set():
            a_started.set()
            release_a.wait(10)
        with lock:
            running.discard(request)
            done.append(request)
            lock.notify_all()
        return Result()

    ctrl = make(Func(reconcile), max_concurrent_reconciles=2)
    ctrl.start()
    ctrl.queue.add(REQ)
    assert a_started.wait(10)
    ctrl.queue.add(REQ)  # while worker 1 holds it: must wait, not go to worker 2
    ctrl.queue.add(other)
    with lock:
        assert lock.wait_for(lambda: other in done, 10)
        assert done == [other], "the second worker took the other key, not the one in progress"
    release_a.set()
    with lock:
        assert lock.wait_for(lambda: done.count(REQ) == 2, 10)
    assert overlaps == []
    assert ctrl.stop(5)


def test_workers_are_named_after_the_controller_and_joined_on_stop(
    make: Callable[..., Controller], informer: Any
) -> None:
    ctrl = make(Script(), max_concurrent_reconciles=2)
    ctrl.watch(Kind(informer, EnqueueRequestForObject()))
    ctrl.start()
    names = {t.name for t in threading.enumerate()}
    assert {f"controller/{ctrl.name}/worker-0", f"controller/{ctrl.name}/worker-1"} <= names
    assert ctrl.stop(5) is True
    names = {t.name for t in threading.enumerate()}
    assert not any(n.startswith(f"controller/{ctrl.name}/") for n in names)


def test_no_reconcile_starts_before_every_worker_exists(
    make: Callable[..., Controller], informer: Any
) -> None:
    # With a full queue at start (a restart), the first worker must not reconcile while the others are
    # still being created: under the GIL it would starve the thread creating them.
    seen: list[set[str]] = []
    done = threading.Event()

    class Record:
        def reconcile(self, request: Request) -> Result:
            if not seen:
                seen.append({t.name for t in threading.enumerate()})
                done.set()
            return Result()

    ctrl = make(Record(), max_concurrent_reconciles=4)
    ctrl.watch(Kind(informer, EnqueueRequestForObject()))
    assert ctrl.warmup() is True
    for i in range(50):
        ctrl.queue.add(Request("ns", f"r{i}"))
    ctrl.start()
    assert done.wait(5)
    workers = {f"controller/{ctrl.name}/worker-{i}" for i in range(4)}
    assert workers <= seen[0]


def test_no_reconcile_starts_before_sources_sync_and_a_timeout_fails_start(
    make: Callable[..., Controller],
    clock: FakeClock,
    new_informer: Any,
    in_thread: Any,
    step_until: Any,
) -> None:
    # "should error when cache sync timeout occurs"
    script = Script()
    ctrl = make(script, cache_sync_timeout=10.0)
    unsynced = new_informer(synced=False)
    ctrl.watch(Kind(unsynced, EnqueueRequestForObject()))
    started_at = clock.monotonic()
    thread, out = in_thread(ctrl.start)
    step_until(clock, thread, 0.5, 60.0)
    assert isinstance(out[0], CacheSyncTimeout)
    assert clock.monotonic() - started_at >= 10.0
    assert script.seen == []
    assert not any(t.name.startswith(f"controller/{ctrl.name}/worker") for t in threading.enumerate())


def test_sources_that_sync_late_start_the_workers_then(
    make: Callable[..., Controller],
    clock: FakeClock,
    new_informer: Any,
    in_thread: Any,
    mkobj: Any,
) -> None:
    # "should not error when cache sync timeout is of sufficiently high"
    seen = threading.Event()
    ctrl = make(Func(lambda r: (seen.set(), Result())[1]), cache_sync_timeout=10.0)
    late = new_informer(synced=False)
    ctrl.watch(Kind(late, EnqueueRequestForObject()))
    thread, out = in_thread(ctrl.start)
    while not late.handlers:  # the controller registers its handler on the starting thread
        thread.join(0.001)
    clock.step(1.0)
    late.add(mkobj("a"), initial=True)
    assert not seen.is_set()
    late.synced = True
    while thread.is_alive():
        clock.step(0.1)
        thread.join(0.005)
    assert out == [None]
    assert seen.wait(10)


def test_stop_while_waiting_for_sync_returns_without_workers(
    make: Callable[..., Controller], clock: FakeClock, new_informer: Any, in_thread: Any
) -> None:
    # "should not error when controller Start context is cancelled during Sources WaitForSync"
    ctrl = make(Script())
    ctrl.watch(Kind(new_informer(synced=False), EnqueueRequestForObject()))
    stop = threading.Event()
    thread, out = in_thread(lambda: ctrl.start(stop))
    stop.set()
    clock.wake()
    thread.join(10)
    assert out == [None]
    assert not any(t.name.startswith(f"controller/{ctrl.name}/worker") for t in threading.enumerate())


def test_starting_twice_is_an_error(make: Callable[..., Controller]) -> None:
    # "should return an error if it gets started more than once"
    ctrl = make(Script())
    ctrl.start()
    with pytest.raises(RuntimeError, match="more than once"):
        ctrl.start()


def test_events_reach_the_reconciler_through_watch(
    make: Callable[..., Controller], informer: Any, mkobj: Any
) -> None:
    # "should process events from source.Channel" (with an in-memory informer)
    cond = threading.Condition()
    seen: list[Request] = []

    def reconcile(request: Request) -> Result:
        with cond:
            seen.append(request)
            cond.notify_all()
        return Result()

    ctrl = make(Func(reconcile))
    ctrl.watch(Kind(informer, EnqueueRequestForObject()))
    ctrl.start()
    informer.add(mkobj("x"))
    with cond:
        assert cond.wait_for(lambda: seen == [Request("ns", "x")], 10)


def test_after_stop_no_new_reconcile_starts_even_with_requests_queued(
    make: Callable[..., Controller],
) -> None:
    ctrl = make(Script())
    assert ctrl.warmup()
    ctrl.queue.add(REQ)
    ctrl.stop()
    assert ctrl.process_next_work_item() is False


def test_constructor_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        Controller("", Script())
    with pytest.raises(ValueError):
        Controller("x", Script(), max_concurrent_reconciles=0)
