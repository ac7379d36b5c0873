"""A test-time detector of code that mutates objects it got from an informer's cache.

Go origin: client-go ``tools/cache/mutation_detector.go`` (``KUBE_CACHE_MUTATION_DETECTOR``,
``defaultCacheMutationDetector``).

Cached objects are shared by every reader and read-only by contract; a handler or reconciler that edits one
in place corrupts the cache for everyone, silently. With the detector on, the informer records an orjson
serialisation of every object it hands out (on add and update) and compares each object with its recording
every second and when the informer stops. A difference is a bug in the caller: the detector logs
``informer.cache_mutated`` with the keys involved and calls its failure function, whose default records the
error so that :meth:`~controller.informers.shared_informer.SharedIndexInformer.stop` raises
:class:`CacheMutationError` (client-go panics). Tests call :meth:`MutationDetector.compare_objects` to raise
at once.

Guarantees: enabled by ``KUBE_CACHE_MUTATION_DETECTOR=true`` (any spelling ``strconv.ParseBool`` accepts)
or by the informer's ``mutation_detector=True``; when off it costs nothing. When on, it keeps every object it
ever saw alive (a deliberate leak, as upstream): never enable it in production.

Deliberately missing: client-go's side-by-side diff (we name the keys; compare the objects yourself) and its
2-minute rotation of retained objects (we keep all of them, so no mutation goes unnoticed).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import orjson
import structlog

from controller.clock import REAL_CLOCK, Clock
from controller.informers.store import DeletedFinalStateUnknown, meta_namespace_key

log = structlog.get_logger(__name__)

ENV_VAR = "KUBE_CACHE_MUTATION_DETECTOR"

_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})


def enabled_by_environment() -> bool:
    """Whether ``KUBE_CACHE_MUTATION_DETECTOR`` parses as true (Go ``strconv.ParseBool``)."""
    return os.environ.get(ENV_VAR, "") in _TRUE


class CacheMutationError(AssertionError):
    """An object held by an informer's cache was mutated in place by someone who read it."""

    def __init__(self, name: str, keys: list[str]) -> None:
        super().__init__(f"cache {name} modified: objects {keys} were mutated in place")
        self.name = name
        self.keys = keys


class MutationDetector:
    """Remembers a serialisation of each object added, and checks the objects still match it.

    Thread-safe: :meth:`add_object` is called by the informer's processing thread, :meth:`compare_objects`
    by :meth:`run` and by tests.
    """

    def __init__(
        self,
        name: str,
        *,
        period: float = 1.0,
        clock: Clock = REAL_CLOCK,
        failure_func: Callable[[CacheMutationError], None] | None = None,
    ) -> None:
        self.name = name
        self._period = period
        self._clock = clock
        self._lock = threading.Lock()
        # Every (object, its serialisation when added); grows forever by design.
        self._recorded: list[tuple[Any, bytes]] = []
        self._failure_func = failure_func or self._record_failure
        self._failure: CacheMutationError | None = None
        self._reported = False

    def add_object(self, obj: Any) -> None:
        """Record ``obj`` as it is now. Tombstones are skipped (their object was recorded when added)."""
        if isinstance(obj, DeletedFinalStateUnknown):
            return
        snapshot = orjson.dumps(obj)
        with self._lock:
            self._recorded.append((obj, snapshot))

    def compare_objects(self) -> None:
        """Raise :class:`CacheMutationError` if any recorded object no longer matches its recording."""
        with self._lock:
            recorded = list(self._recorded)
        mutated = [obj for obj, snapshot in recorded if orjson.dumps(obj) != snapshot]
        if mutated:
            keys = sorted({_key_or_repr(obj) for obj in mutated})
            log.error("informer.cache_mutated", informer=self.name, keys=keys)
            raise CacheMutationError(self.name, keys)

    def run(self, stop_event: threading.Event) -> None:
        """Compare every ``period`` seconds until ``stop_event`` is set; report a failure once."""
        while not self._clock.wait(stop_event, self._period):
            if not self._check():
                return

    def check_on_stop(self) -> None:
        """Compare one last time, then raise the first failure seen, if any (once: later calls return)."""
        if self._reported:
            return
        self._check()
        with self._lock:
            failure, self._reported = self._failure, self._failure is not None
        if failure is not None:
            raise failure

    def _check(self) -> bool:
        try:
            self.compare_objects()
        except CacheMutationError as err:
            self._failure_func(err)
            return False
        return True

    def _record_failure(self, err: CacheMutationError) -> None:
        with self._lock:
            if self._failure is None:
                self._failure = err

    def __repr__(self) -> str:
        with self._lock:
            return f"MutationDetector(name={self.name!r}, recorded={len(self._recorded)})"


def _key_or_repr(obj: Any) -> str:
    try:
        return meta_namespace_key(obj)
    except ValueError:
        return repr(obj)[:80]
