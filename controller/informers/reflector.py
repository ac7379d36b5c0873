"""The reflector: lists a resource, then watches it, and mirrors every change into a store.

Go origin: client-go ``tools/cache/reflector.go`` (``Reflector``, ``ListAndWatchWithContext``, ``watchList``,
``handleAnyWatch``, ``relistResourceVersion``, ``rewatchResourceVersion``, ``isWatchErrorRetriable``,
``VeryShortWatchError``), ``tools/pager/pager.go`` (pagination and the full-list fallback) and apimachinery
``wait.Backoff.DelayWithReset`` (the backoff). The behaviour is client-go's, decision for decision:

- **Run loop.** :meth:`Reflector.run` calls :meth:`Reflector.list_and_watch` at once, then again after each
  return, waiting a backoff delay in between (sliding: the delay starts when the iteration ends). The backoff
  starts at 0.8 s, doubles up to a 30 s cap, and each delay gets up to +100 % random jitter (so 30-60 s at the
  cap, about 0.22 requests/s against a sick API server); it resets to 0.8 s when 2 minutes have passed since
  its last reset.
- **Streaming list** (``WatchList``, KEP-3157; ``use_watch_list``, on by default as in client-go 1.35, off
  with ``KUBE_FEATURE_WatchListClient=false``). Each :meth:`~Reflector.list_and_watch` first opens a watch
  with ``sendInitialEvents=true``, ``resourceVersionMatch=NotOlderThan`` and bookmarks, from the last synced
  RV (``""`` at first and after an unavailable RV: a consistent read). The server sends the state as ``ADDED``
  events, then a ``BOOKMARK`` annotated ``k8s.io/initial-events-end: "true"``. The events go, transformed one
  by one as they arrive, into a temporary store; at that bookmark the store is replaced with them at the
  bookmark's RV (handlers see ``on_add(obj, is_in_initial_list=True)`` as after a list), and the *same* watch
  goes on as the watch below. Why: a list is one response decoded whole before the transform runs (RV
  ``"0"`` is served from the watch cache, which ignores ``limit``: every object, ``managedFields`` and all,
  at once), and CPython's allocator keeps that high-water mark; a stream is decoded and transformed one
  object at a time, so the peak of a restart is one object, not the whole list. A stream that ends before
  the bookmark is opened again at once; a 429 or a refused connection opens it again after a backoff; an
  expired or too large RV (at the start, or as an ``ERROR`` event during the stream) opens it again at once
  from ``""``. Any other failure (a server that refuses the parameters, 422/400/403; a stream that closed
  within a second with nothing) makes *this* run fall back to the list+watch below; the next run tries the
  stream again (client-go remembers no fallback: a refusal costs one request per run).
- **Which resourceVersion each list asks for.** The first list asks for RV ``"0"`` (any freshness, served from
  the API server's watch cache); a relist asks for the last RV synced, read as "at least this fresh"; after a
  list failed because that RV is unavailable (410 ``Expired``/``Gone``, or "too large resource version"),
  the list is retried at once with RV ``""``, a consistent read from etcd, and later relists keep using
  ``""`` until a list succeeds.
- **Pagination.** Pages of 500 (or ``watch_list_page_size``, which sizes only these pages). Paging is turned
  off for an RV other than ``""``/``"0"`` so the list is served from the watch cache, unless the first RV
  ``"0"`` list came back in pages (the watch cache is off: keep paging). Continuation pages are requested with
  RV ``""``. When a continuation token expires (reason ``Expired`` on page 2 or later), the list is redone in
  full, unpaged, at the originally requested RV.
- **Watch.** Each watch asks for a random server timeout in [5, 10] minutes and for bookmarks, starting at the
  last synced RV. ``ADDED``/``MODIFIED``/``DELETED`` are applied to the store in order; a ``BOOKMARK`` only
  advances the RV (bookmarks are optional: nothing depends on receiving one); an ``ERROR`` event becomes the
  :class:`~controller.client.errors.ApiError` its Status describes. The RV advances after every event, except
  on a watch started from RV ``""``/``"0"``, whose synthetic ``ADDED`` events are not in RV order: there it
  advances from the first event of any other type (during a streaming list, only the bookmark's RV counts).
- **How a watch ends.** The server closing the stream, a client read timeout (:class:`WatchTimeout`) or a
  broken connection (:class:`ConnectionFailed` mid-stream) are a normal close: a new watch starts from the
  last RV, with no relist. A watch that closes in under a second with no event at all is an error
  (:class:`VeryShortWatchError`). Errors end :meth:`list_and_watch` (so the next iteration relists, after a
  backoff), except: a 429 (at watch start or as an ``ERROR`` event) and a connection refused at watch start
  back off and retry the *watch*; 410 ``Expired`` on the watch relists from the last RV (not from ``""``:
  a list at an RV already means "at least this fresh").
- **GC** (opt-in, ``gc_tuning=True``; the manager binary turns it on). Each list, and each streaming list up
  to its store replace, runs with raised cyclic-GC thresholds, and the objects alive after an informer's first
  list or stream are frozen out of the collector's reach (``_ListGcGuard``): Python-specific, see its
  docstring.
- **Resync.** With ``resync_period > 0``, while a watch runs, a thread calls ``store.resync()`` every period
  if ``should_resync()`` (or always, when it is None). Resync makes no API call.

Threads: :meth:`run` runs in its caller's thread; a resync thread ``informer/<name>/resync`` lives only
while a watch runs. :meth:`interrupt` stops the watch in flight (a streaming list's too) so that :meth:`run`
notices its stop event at once; a list in flight cannot be interrupted and finishes within the client's
request timeout.

Deliberately missing: retrying internal errors on the watch (``MaxInternalErrorRetryDuration``, off by default
upstream), the expected-type/GVK checks on watch events (the client decodes one kind per watch), Table
objects, tracing and reflector metrics; of the streaming list, the 10-second "still waiting for the
initial-events-end bookmark" warning and the ``KUBE_WATCHLIST_INCONSISTENCY_DETECTOR`` check against a list.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import math
import os
import random
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from controller.client import errors
from controller.clock import REAL_CLOCK, Clock
from controller.informers.store import deletion_handling_meta_namespace_key

log = structlog.get_logger(__name__)

DEFAULT_PAGE_SIZE = 500
"""tools/pager ``defaultPageSize``."""

MIN_WATCH_TIMEOUT = 300.0
"""Each watch asks the server to end it after a random time in [MIN_WATCH_TIMEOUT, 2 * MIN_WATCH_TIMEOUT]."""

BACKOFF_RESET = 120.0
"""The backoff returns to its initial delay once this many seconds passed since its last reset."""

VERY_SHORT_WATCH = 1.0
"""A watch that ends within this many seconds having delivered no event is an error."""

INITIAL_EVENTS_ANNOTATION_KEY = "k8s.io/initial-events-end"
"""metav1 ``InitialEventsAnnotationKey``: set to ``"true"`` on the bookmark that ends a streaming list's
initial events."""

RESOURCE_VERSION_MATCH_NOT_OLDER_THAN = "NotOlderThan"
"""metav1 ``ResourceVersionMatchNotOlderThan``: what a streaming list asks for (the server requires it)."""

WATCH_LIST_CLIENT_ENV = "KUBE_FEATURE_WatchListClient"
"""Turns the streaming list off when set to a false value (``false``, ``0``...), as it does in client-go,
whose feature gates read ``KUBE_FEATURE_<name>``; on when unset, as client-go 1.35's ``WatchListClient``."""

_PARSE_BOOL = {
    **dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), True),
    **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), False),
}  # Go strconv.ParseBool


def watch_list_client_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """client-go's ``WatchListClient`` feature gate: on, unless :data:`WATCH_LIST_CLIENT_ENV` says false.

    An unparsable value is logged and ignored (the default stays), as client-go's environment feature gates
    do.
    """
    env = os.environ if environ is None else environ
    raw = env.get(WATCH_LIST_CLIENT_ENV, "")
    if raw == "":
        return True
    value = _PARSE_BOOL.get(raw)
    if value is None:
        log.warning("informer.feature_gate_invalid", variable=WATCH_LIST_CLIENT_ENV, value=raw)
        return True
    return value


ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"
BOOKMARK = "BOOKMARK"
ERROR = "ERROR"


# --- the seam to the API client ---------------------------------------------------------------------------
#
# Structural: ``controller.client.listerwatcher.KindListerWatcher`` returns its own ``ListResult``/``Watch``/
# ``WatchEvent``, which satisfy these protocols; :class:`ListPage` and :class:`WatchEvent` are the plain
# values fakes use.


class ListPageLike(Protocol):
    """One page of a list, as the reflector reads it."""

    @property
    def items(self) -> list[dict[str, Any]]: ...

    @property
    def resource_version(self) -> str: ...

    @property
    def continue_(self) -> str | None:
        """The token for the next page; empty or None on the last page."""
        ...


class WatchEventLike(Protocol):
    """One watch event, as the reflector reads it."""

    @property
    def type(self) -> str: ...

    @property
    def object(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class ListPage:
    """One page of a list: its items, the list's resourceVersion and the continue token (None on the last)."""

    items: list[dict[str, Any]]
    resource_version: str
    continue_: str | None = None


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One watch event: ``type`` is ADDED, MODIFIED, DELETED, BOOKMARK or ERROR (``object`` a Status)."""

    type: str
    object: dict[str, Any]


class Watch(Protocol):
    """An open watch stream: iterate for events; iteration ends when the stream closes or :meth:`stop` is
    called. Iteration may raise :class:`~controller.client.errors.WatchTimeout` or ``ConnectionFailed``."""

    def __iter__(self) -> Iterator[WatchEventLike]: ...

    def stop(self) -> None:
        """Close the stream; safe from any thread, idempotent."""
        ...


class ListerWatcher(Protocol):
    """Lists and watches one kind (with its selectors). ``controller.client.client`` supplies one per kind."""

    def list(self, resource_version: str, limit: int, continue_: str | None) -> ListPageLike:
        """One page: ``limit`` 0 means unpaged; RV ``""`` is a consistent read, ``"0"`` any freshness."""
        ...

    def watch(
        self,
        resource_version: str,
        timeout_seconds: int,
        allow_bookmarks: bool,
        *,
        send_initial_events: bool = False,
        resource_version_match: str = "",
    ) -> Watch:
        """Open a watch from ``resource_version``; raise on failure to start it. With
        ``send_initial_events`` (and ``resource_version_match`` ``"NotOlderThan"``) a streaming list: the
        state as ``ADDED`` events, a bookmark annotated :data:`INITIAL_EVENTS_ANNOTATION_KEY`, the changes."""
        ...


class WatchFunc(Protocol):
    """The watch half of a :class:`ListWatch`: :meth:`ListerWatcher.watch` as a function."""

    def __call__(
        self,
        resource_version: str,
        timeout_seconds: int,
        allow_bookmarks: bool,
        *,
        send_initial_events: bool = False,
        resource_version_match: str = "",
    ) -> Watch: ...


@dataclass(frozen=True, slots=True)
class ListWatch:
    """A :class:`ListerWatcher` made of two functions (client-go ``cache.ListWatch``)."""

    list_func: Callable[[str, int, str | None], ListPageLike]
    watch_func: WatchFunc

    def list(self, resource_version: str, limit: int, continue_: str | None) -> ListPageLike:
        return self.list_func(resource_version, limit, continue_)

    def watch(
        self,
        resource_version: str,
        timeout_seconds: int,
        allow_bookmarks: bool,
        *,
        send_initial_events: bool = False,
        resource_version_match: str = "",
    ) -> Watch:
        return self.watch_func(
            resource_version,
            timeout_seconds,
            allow_bookmarks,
            send_initial_events=send_initial_events,
            resource_version_match=resource_version_match,
        )


class ReflectorStore(Protocol):
    """What the reflector writes to (client-go ``ReflectorStore`` plus the optional bookmark hook)."""

    def add(self, obj: Any) -> None: ...

    def update(self, obj: Any) -> None: ...

    def delete(self, obj: Any) -> None: ...

    def replace(self, items: list[Any], resource_version: str) -> None: ...

    def resync(self) -> None: ...

    def bookmark(self, resource_version: str) -> None: ...


# --- backoff ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Backoff:
    """apimachinery ``wait.Backoff``: delays start at ``duration`` and are multiplied by ``factor`` for
    ``steps`` steps or until ``cap``; each delay gets ``jitter * delay * random()`` added. The defaults are
    the reflector's (0.8 s doubling to 30 s, jitter 1.0)."""

    duration: float = 0.8
    factor: float = 2.0
    jitter: float = 1.0
    steps: int = math.ceil(30.0 / 0.8)
    cap: float = 30.0


class BackoffManager:
    """``Backoff.DelayWithReset``: :meth:`step` returns the next delay; the sequence restarts when more than
    ``reset_interval`` seconds passed since it last restarted. Thread-safe."""

    def __init__(
        self,
        backoff: Backoff,
        *,
        clock: Clock = REAL_CLOCK,
        reset_interval: float = BACKOFF_RESET,
        rng: random.Random | None = None,
    ) -> None:
        self._initial = backoff
        self._clock = clock
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        if backoff.factor <= 0:
            reset_interval = math.inf  # DelayWithReset degrades to DelayFunc: no reset
        elif reset_interval <= 0:
            self._initial = Backoff(
                duration=backoff.duration, factor=0.0, jitter=backoff.jitter, steps=0, cap=backoff.cap
            )
            reset_interval = math.inf
        self._reset_interval = reset_interval
        self._duration = self._initial.duration
        self._steps = self._initial.steps
        self._last_start = clock.monotonic()

    def step(self) -> float:
        """The next delay in seconds."""
        with self._lock:
            now = self._clock.monotonic()
            if now - self._last_start > self._reset_interval:
                self._duration, self._steps = self._initial.duration, self._initial.steps
                self._last_start = now
            b = self._initial
            current = self._duration
            if self._steps < 1:
                return self._jitter(current, b.jitter)
            self._steps -= 1
            nxt = current * b.factor if b.factor != 0 else current
            if b.cap > 0 and nxt > b.cap:
                nxt = b.cap
                self._steps = 0
            self._duration = nxt
            return self._jitter(current, b.jitter)

    def _jitter(self, duration: float, factor: float) -> float:
        if factor <= 0:
            return duration
        return duration + self._rng.random() * factor * duration


# --- errors -----------------------------------------------------------------------------------------------


class VeryShortWatchError(Exception):
    """The watch closed within a second without delivering any event (client-go ``VeryShortWatchError``)."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"very short watch: {name}: unexpected watch close - "
            "watch lasted less than a second and no items received"
        )
        self.name = name


def _is_resource_expired(err: BaseException) -> bool:
    """apimachinery ``IsResourceExpired``: reason ``Expired`` exactly (the pager's test)."""
    return isinstance(err, errors.ApiError) and err.reason == errors.REASON_EXPIRED


def _is_connection_refused(err: BaseException) -> bool:
    """Whether a ``ConnectionRefusedError`` is in the chain of causes (utilnet ``IsConnectionRefused``)."""
    seen: set[int] = set()
    todo: list[BaseException] = [err]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, ConnectionRefusedError):
            return True
        for nxt in (e.__cause__, e.__context__, getattr(e, "reason", None)):
            if isinstance(nxt, BaseException):
                todo.append(nxt)
    return False


def is_watch_error_retriable(err: BaseException) -> bool:
    """A watch that failed to start with this error is retried after a backoff, without a relist."""
    if isinstance(err, errors.TooManyRequests):
        return True
    return isinstance(err, errors.ConnectionFailed) and _is_connection_refused(err)


# --- GC tactic around big lists ---------------------------------------------------------------------------

LIST_GC_THRESHOLDS = (50_000, 20, 100)
"""Generation thresholds while a list is decoded and stored (measured: 138 → 43 µs per object at 20k
objects)."""


class _ListGcGuard:
    """Raise the cyclic GC's thresholds while a list is decoded and stored; after an informer's first list,
    freeze what survived.

    Why: CPython's cyclic collector runs a young-generation pass every 700 allocations and an older pass every
    10 of those; while a list of thousands of freshly decoded dicts is retained, those passes traverse the
    growing cache again and again and dominate the cost of building it. Raising the thresholds for the
    duration of the list cuts the build time two to five times (``test/benchmark/test_bench_cache.py``).
    After the *first* list of an informer, ``gc.freeze()`` moves everything alive (above all, the new cache)
    into the permanent generation, so later full collections no longer walk it: one full collection over a
    cache of 10k Pods drops from ~0.4-0.7 s to under 1 ms. Reference counting still frees frozen objects
    the informer drops; only reference cycles that are already garbage when ``freeze`` runs are kept for
    good, so freezing is limited to the start-up lists, not repeated on every relist.

    Process-wide and reference-counted: informers listing at once share one raised setting; the thresholds
    in force before the first one are restored (and the freeze, if any participant asked for it, done) when
    the last one finishes. CPython 3.11 semantics; 3.13's incremental collector would make this moot.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._saved: tuple[int, int, int] | None = None
        self._freeze = False

    @contextlib.contextmanager
    def __call__(self, enabled: bool, *, freeze: bool) -> Iterator[None]:
        if not enabled:
            yield
            return
        with self._lock:
            if self._depth == 0:
                self._saved = gc.get_threshold()
                gc.set_threshold(*LIST_GC_THRESHOLDS)
            self._depth += 1
            self._freeze = self._freeze or freeze
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0 and self._saved is not None:
                    gc.set_threshold(*self._saved)
                    self._saved = None
                    if self._freeze:
                        gc.freeze()
                    self._freeze = False


_list_gc_guard = _ListGcGuard()


# --- the reflector ----------------------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class _WatchOutcome:
    """How one watch ended: with an error (None: closed normally), because we were told to stop, or (a
    streaming list) at the bookmark that ends its initial events, with the watch left open."""

    error: BaseException | None = None
    events: int = 0
    stop_requested: bool = False
    initial_events_end: bool = False


class _EventSink(Protocol):
    """What :meth:`Reflector._handle_watch` applies events to: the store, or a streaming list's temporary
    store."""

    def add(self, obj: Any) -> None: ...

    def update(self, obj: Any) -> None: ...

    def delete(self, obj: Any) -> None: ...

    def bookmark(self, resource_version: str) -> None: ...


class _TemporaryStore:
    """Where a streaming list collects its initial objects until the bookmark that ends them (client-go's
    ``temporaryStore`` in ``watchList``): by key, in arrival order; objects arrive transformed."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: dict[str, Any] = {}

    def add(self, obj: Any) -> None:
        self._items[deletion_handling_meta_namespace_key(obj)] = obj

    update = add

    def delete(self, obj: Any) -> None:
        self._items.pop(deletion_handling_meta_namespace_key(obj), None)

    def bookmark(self, resource_version: str) -> None:
        pass

    def list(self) -> list[Any]:
        return list(self._items.values())

    def __len__(self) -> int:
        return len(self._items)


class Reflector:
    """Keeps ``store`` in step with the API server for one kind, through ``lister_watcher``.

    ``name`` names the log lines and threads. ``resync_period`` (seconds, 0 = never) and ``should_resync``
    drive resyncs. ``transform`` is applied to every object before it reaches the store: to list items page
    by page as they arrive (so what it drops is freed before the next page is decoded: lower peak memory
    than transforming the whole list at once), and to the object of each ADDED/MODIFIED/DELETED event.
    ``clock`` and ``rng`` make the backoff, the watch timeouts and very-short-watch detection deterministic
    in tests. ``gc_tuning`` applies the GC tactic of :class:`_ListGcGuard` to every list (off by default: it
    changes interpreter-wide state, so only an entry point opts in). ``use_watch_list`` asks for the
    streaming list first (None: :func:`watch_list_client_enabled`, on unless ``KUBE_FEATURE_WatchListClient``
    says false); ``watch_list_page_size`` is the page size of the plain list (the streaming list has none).
    """

    def __init__(
        self,
        lister_watcher: ListerWatcher,
        store: ReflectorStore,
        *,
        name: str,
        resync_period: float = 0.0,
        should_resync: Callable[[], bool] | None = None,
        clock: Clock = REAL_CLOCK,
        backoff: Backoff | None = None,
        watch_list_page_size: int = 0,
        min_watch_timeout: float = MIN_WATCH_TIMEOUT,
        rng: random.Random | None = None,
        gc_tuning: bool = False,
        watch_error_handler: Callable[[Reflector, BaseException], None] | None = None,
        transform: Callable[[Any], Any] | None = None,
        use_watch_list: bool | None = None,
    ) -> None:
        self.name = name
        self.use_watch_list = watch_list_client_enabled() if use_watch_list is None else use_watch_list
        self._transform = transform
        self._lw = lister_watcher
        self._store = store
        self._resync_period = resync_period
        self._should_resync = should_resync
        self._clock = clock
        self._rng = rng or random.Random()
        self._backoff = BackoffManager(backoff or Backoff(), clock=clock, rng=self._rng)
        self.watch_list_page_size = watch_list_page_size
        # Values below 5 minutes are not honoured, as in client-go.
        self._min_watch_timeout = max(min_watch_timeout, MIN_WATCH_TIMEOUT)
        self._max_watch_timeout = 2 * self._min_watch_timeout
        self._gc_tuning = gc_tuning
        self._watch_error_handler = watch_error_handler or default_watch_error_handler

        # Guarded by _rv_lock.
        self._rv_lock = threading.Lock()
        self._last_sync_resource_version = ""
        self._is_last_sync_resource_version_unavailable = False
        # Set once the first RV="0" list came back in pages: the watch cache is off, keep paging.
        self._paginated_result = False
        self._has_listed = False  # a first list succeeded (the GC tactic freezes only after that one)

        # The watch in flight, so that interrupt() can stop it. Guarded by _watch_lock.
        self._watch_lock = threading.Lock()
        self._current_watch: Watch | None = None
        self._resync_error: BaseException | None = None

    # --- public surface ----------------------------------------------------------------------------------

    @property
    def last_sync_resource_version(self) -> str:
        """The resourceVersion of the last list or watch event applied to the store."""
        with self._rv_lock:
            return self._last_sync_resource_version

    def run(self, stop_event: threading.Event) -> None:
        """List and watch until ``stop_event`` is set, backing off between attempts. Blocks."""
        log.debug("informer.reflector_started", informer=self.name, resync_period_s=self._resync_period)
        while not stop_event.is_set():
            try:
                self.list_and_watch(stop_event)
            except Exception as exc:  # noqa: BLE001 - report any failure and retry: the informer must live on
                self._watch_error_handler(self, exc)
            if self._clock.wait(stop_event, self._backoff.step()):
                break
        log.debug("informer.reflector_stopped", informer=self.name)

    def interrupt(self) -> None:
        """Stop the watch in flight (if any), so that a caller who set the stop event is noticed at once."""
        with self._watch_lock:
            w = self._current_watch
        if w is not None:
            w.stop()

    def list_and_watch(self, stop_event: threading.Event) -> None:
        """List everything, replace the store with it, then watch until the watch ends (client-go
        ``ListAndWatchWithContext``).

        With :attr:`use_watch_list`, the list is a streaming list whose watch then goes on as the watch; if
        the stream fails (refused, or ended by an error its retries do not cover), this one run falls back to
        a plain list and a new watch. Returns normally when the watch ended (the caller relists) or
        ``stop_event`` was set; raises when the list failed or a watch could not be started.
        """
        w: Watch | None = None
        try:
            fallback_to_list = not self.use_watch_list
            if self.use_watch_list:
                try:
                    w = self._watch_list(stop_event)
                except Exception as exc:  # noqa: BLE001 - any failure of the stream falls back to a list
                    log.info(
                        "informer.watch_list_fallback",
                        informer=self.name,
                        error=str(exc),
                        error_type=type(exc).__name__,
                    )
                    fallback_to_list = True
                else:
                    if w is None:
                        return  # stopped
            if fallback_to_list and not self._list(stop_event):
                return
            self._watch_with_resync(stop_event, w)
        finally:
            if w is not None:
                w.stop()

    # --- list --------------------------------------------------------------------------------------------

    def relist_resource_version(self) -> str:
        """The RV the next list asks for: ``""`` after an unavailable RV, ``"0"`` at first, else the last."""
        with self._rv_lock:
            if self._is_last_sync_resource_version_unavailable:
                return ""
            if self._last_sync_resource_version == "":
                return "0"
            return self._last_sync_resource_version

    def rewatch_resource_version(self) -> str:
        """The RV a streaming list starts from: ``""`` (a consistent read) at first and after an unavailable
        RV, else the last synced (client-go ``rewatchResourceVersion``)."""
        with self._rv_lock:
            if self._is_last_sync_resource_version_unavailable:
                return ""
            return self._last_sync_resource_version

    def _set_last_sync_resource_version(self, rv: str) -> None:
        with self._rv_lock:
            self._last_sync_resource_version = rv

    def _set_unavailable(self, unavailable: bool) -> None:
        with self._rv_lock:
            self._is_last_sync_resource_version_unavailable = unavailable

    def _list(self, stop_event: threading.Event) -> bool:
        """One list (with the RV fallbacks); False if stopped meanwhile."""
        rv = self.relist_resource_version()
        if self.watch_list_page_size:
            page_size = self.watch_list_page_size
        elif self._paginated_result:
            page_size = DEFAULT_PAGE_SIZE
        elif rv not in ("", "0"):
            # A paged list at a specific RV skips the watch cache and hits etcd; unpaged, the watch cache
            # serves it ("at least as fresh as rv" keeps this from going back in time).
            page_size = 0
        else:
            page_size = DEFAULT_PAGE_SIZE
        start = self._clock.monotonic()
        with _list_gc_guard(self._gc_tuning, freeze=not self._has_listed):
            try:
                items, list_rv, paginated = self._pager_list(rv, page_size)
            except Exception as exc:
                if not (errors.is_expired(exc) or errors.is_too_large_resource_version(exc)):
                    raise
                self._set_unavailable(True)
                log.info(
                    "informer.relist_consistent", informer=self.name, resource_version=rv, error=str(exc)
                )
                items, list_rv, paginated = self._pager_list(self.relist_resource_version(), page_size)
            if stop_event.is_set():
                return False
            if rv == "0" and paginated:
                self._paginated_result = True
            self._set_unavailable(False)
            self._store.replace(items, list_rv)
        self._record_synced("informer.listed", rv, list_rv, len(items), start)
        return True

    def _record_synced(
        self, event: str, requested: str, resource_version: str, count: int, start: float
    ) -> None:
        """After a list or a stream filled the store: its RV is the last synced one; log how it went."""
        self._set_last_sync_resource_version(resource_version)
        self._has_listed = True
        log.info(
            event,
            informer=self.name,
            requested_resource_version=requested,
            resource_version=resource_version,
            count=count,
            duration_s=round(self._clock.monotonic() - start, 6),
        )

    def _pager_list(self, resource_version: str, page_size: int) -> tuple[list[Any], str, bool]:
        """tools/pager ``ListPager.List`` with ``FullListIfExpired``: (items, list RV, came back in pages)."""
        continue_: str | None = None
        rv = resource_version
        items: list[Any] | None = None
        list_rv = ""
        paginated = False
        while True:
            try:
                page = self._lw.list(rv, page_size, continue_)
            except Exception as exc:
                if not _is_resource_expired(exc) or continue_ is None:
                    raise
                # The continue token expired mid-list: fall back to one full list at the requested RV.
                log.info(
                    "informer.list_continue_expired", informer=self.name, resource_version=resource_version
                )
                page = self._lw.list(resource_version, 0, None)
                return self._transformed(page.items), page.resource_version, paginated
            page_items = self._transformed(page.items)
            if not page.continue_ and items is None:
                return page_items, page.resource_version, paginated
            if items is None:
                items = []
                list_rv = page.resource_version
            items.extend(page_items)
            if not page.continue_:
                return items, list_rv, paginated
            continue_ = page.continue_
            rv = ""  # a continue token carries its RV; sending one too is rejected
            paginated = True

    def _transformed(self, items: list[Any]) -> list[Any]:
        """Apply the transform page by page, so what it drops is freed before the next page is decoded."""
        transform = self._transform
        if transform is None:
            return items
        return [transform(obj) for obj in items]

    # --- streaming list ----------------------------------------------------------------------------------

    def _watch_list(self, stop_event: threading.Event) -> Watch | None:
        """client-go ``watchList``: a watch with ``sendInitialEvents``, whose initial objects go (transformed
        one by one, as they arrive) into a temporary store until the bookmark annotated
        :data:`INITIAL_EVENTS_ANNOTATION_KEY`; then the store is replaced with them at the bookmark's RV and
        the still-open watch is returned, to be consumed as the watch. None if stopped meanwhile.

        A stream that ends before that bookmark without an error is opened again at once; a 429 or a refused
        connection, again after a backoff; an expired or too large RV (at the start or as an ``ERROR`` event
        during the stream), again at once from RV ``""``. Any other failure is raised: the caller lists.
        """
        start_all = self._clock.monotonic()
        requested = ""
        with _list_gc_guard(self._gc_tuning, freeze=not self._has_listed):
            while True:
                if stop_event.is_set():
                    return None
                requested = self.rewatch_resource_version()
                temporary_store = _TemporaryStore()
                synced_rv = ""

                def track(rv: str, received_besides_added: bool) -> None:
                    nonlocal synced_rv
                    if received_besides_added:
                        synced_rv = rv

                start = self._clock.monotonic()
                try:
                    w = self._lw.watch(
                        requested,
                        self._watch_timeout_seconds(),
                        True,
                        send_initial_events=True,
                        resource_version_match=RESOURCE_VERSION_MATCH_NOT_OLDER_THAN,
                    )
                except Exception as exc:
                    if self._watch_list_retriable(exc, stop_event):
                        continue
                    raise
                outcome = self._handle_watch(
                    w, start, stop_event, sink=temporary_store, set_resource_version=track, watch_list=True
                )
                if outcome.stop_requested:
                    return None
                if outcome.error is not None:
                    if self._watch_list_retriable(outcome.error, stop_event):
                        continue
                    raise outcome.error
                if outcome.initial_events_end:
                    break
                log.info(
                    "informer.watch_list_restarted",
                    informer=self.name,
                    resource_version=requested,
                    received=len(temporary_store),
                )
            self._set_unavailable(False)
            try:
                self._store.replace(temporary_store.list(), synced_rv)
            except BaseException:
                w.stop()
                raise
        self._record_synced("informer.streamed", requested, synced_rv, len(temporary_store), start_all)
        return w

    def _watch_list_retriable(self, err: BaseException, stop_event: threading.Event) -> bool:
        """client-go ``isErrorRetriableWithSideEffectsFn``: whether a failed stream is opened again; waits
        the backoff after a 429 or a refused connection, and after an unavailable RV marks it so (the next
        stream starts from ``""``)."""
        if is_watch_error_retriable(err):
            log.info("informer.watch_list_backoff", informer=self.name, error=str(err))
            self._clock.wait(stop_event, self._backoff.step())
            return True
        if errors.is_expired(err) or errors.is_too_large_resource_version(err):
            self._set_unavailable(True)
            log.info("informer.watch_list_consistent", informer=self.name, error=str(err))
            return True
        return False

    # --- watch -------------------------------------------------------------------------------------------

    def _watch_with_resync(self, stop_event: threading.Event, w: Watch | None) -> None:
        with self._watch_lock:
            self._resync_error = None
        if self._resync_period <= 0:
            self._watch(stop_event, w)
            return
        resync_stop = threading.Event()
        resyncer = threading.Thread(
            target=self._resync_loop,
            args=(resync_stop, self._clock.monotonic()),
            name=f"informer/{self.name}/resync",
            daemon=True,
        )
        resyncer.start()
        try:
            self._watch(stop_event, w)
        finally:
            resync_stop.set()
            resyncer.join()

    def _resync_loop(self, resync_stop: threading.Event, started: float) -> None:
        # Deadlines are counted from when the watch started, one period apart (a ticker that drops the ticks
        # it missed), so a slow resync does not make the next one drift.
        deadline = started + self._resync_period
        while not self._clock.wait(resync_stop, deadline - self._clock.monotonic()):
            now = self._clock.monotonic()
            while deadline <= now:
                deadline += self._resync_period
            if self._should_resync is None or self._should_resync():
                try:
                    self._store.resync()
                except Exception as exc:  # noqa: BLE001 - handed to the watch loop, which ends the watch
                    with self._watch_lock:
                        self._resync_error = exc
                    self.interrupt()
                    return

    def _watch_timeout_seconds(self) -> int:
        span = self._max_watch_timeout - self._min_watch_timeout
        return int(self._min_watch_timeout + self._rng.random() * span)

    def _watch(self, stop_event: threading.Event, w: Watch | None) -> None:
        """client-go ``Reflector.watch``: consume ``w`` (a streaming list's, past its initial events) if
        given, then start watches from the last RV until one ends badly or we stop."""
        while not stop_event.is_set():
            start = self._clock.monotonic()
            # A watch handed over is past any synthetic ADDED events: its RVs are in order.
            propagate_from_start = True
            if w is None:
                rv = self.last_sync_resource_version
                # Synthetic ADDED events of a watch from ""/"0" are not in RV order: wait for another type.
                propagate_from_start = rv not in ("", "0")
                try:
                    w = self._lw.watch(rv, self._watch_timeout_seconds(), True)
                except Exception as exc:
                    if is_watch_error_retriable(exc):
                        log.info("informer.watch_backoff", informer=self.name, error=str(exc))
                        if self._clock.wait(stop_event, self._backoff.step()):
                            return
                        continue
                    raise

            outcome = self._handle_watch(
                w,
                start,
                stop_event,
                sink=self._store,
                set_resource_version=functools.partial(self._track_watch_rv, propagate_from_start),
                watch_list=False,
            )
            w = None  # _handle_watch stopped it
            if outcome.stop_requested:
                return
            err = outcome.error
            if err is None:
                continue  # closed normally: watch again from the last RV
            if errors.is_expired(err):
                # Relist at the last RV: a list at an RV already means "at least this fresh".
                log.info(
                    "informer.watch_expired",
                    informer=self.name,
                    resource_version=self.last_sync_resource_version,
                    error=str(err),
                )
            elif isinstance(err, errors.TooManyRequests):
                log.info("informer.watch_backoff", informer=self.name, error=str(err))
                if self._clock.wait(stop_event, self._backoff.step()):
                    return
                continue
            else:
                log.warning(
                    "informer.watch_failed", informer=self.name, error=str(err), error_type=type(err).__name__
                )
            return

    def _track_watch_rv(self, propagate_from_start: bool, rv: str, received_besides_added: bool) -> None:
        if propagate_from_start or received_besides_added:
            self._set_last_sync_resource_version(rv)

    def _handle_watch(
        self,
        w: Watch,
        start: float,
        stop_event: threading.Event,
        *,
        sink: _EventSink,
        set_resource_version: Callable[[str, bool], None],
        watch_list: bool,
    ) -> _WatchOutcome:
        """client-go ``handleAnyWatch``: apply events to ``sink`` in order until the stream ends, telling
        ``set_resource_version`` each event's RV and whether an event other than ADDED came yet.

        With ``watch_list``, returns at the bookmark that ends the initial events and leaves ``w`` open;
        otherwise, and on every other return, ``w`` is stopped.
        """
        outcome = _WatchOutcome()
        received_besides_added = False
        keep_open = False
        with self._watch_lock:
            self._current_watch = w
            resync_failed = self._resync_error is not None  # failed before this watch could be interrupted
        try:
            if stop_event.is_set():
                outcome.stop_requested = True
                return outcome
            # A resync that failed before this watch was registered ends it at once.
            events: Iterable[WatchEventLike] = () if resync_failed else w
            try:
                for event in events:
                    if stop_event.is_set():
                        outcome.stop_requested = True
                        return outcome
                    etype = event.type
                    obj = event.object
                    if etype == ERROR:
                        outcome.error = errors.from_status(obj)
                        return outcome
                    meta = obj.get("metadata") if isinstance(obj, dict) else None
                    rv = meta.get("resourceVersion", "") if isinstance(meta, dict) else ""
                    if etype == ADDED:
                        self._apply(sink.add, obj, etype)
                    elif etype == MODIFIED:
                        received_besides_added = True
                        self._apply(sink.update, obj, etype)
                    elif etype == DELETED:
                        received_besides_added = True
                        self._apply(sink.delete, obj, etype)
                    elif etype == BOOKMARK:
                        received_besides_added = True
                        annotations = meta.get("annotations") if isinstance(meta, dict) else None
                        if (
                            isinstance(annotations, dict)
                            and annotations.get(INITIAL_EVENTS_ANNOTATION_KEY) == "true"
                        ):
                            outcome.initial_events_end = True
                        sink.bookmark(rv)
                    else:
                        log.error("informer.watch_event_unknown", informer=self.name, event_type=etype)
                    set_resource_version(rv, received_besides_added)
                    outcome.events += 1
                    if watch_list and outcome.initial_events_end:
                        keep_open = True
                        return outcome
            except (errors.WatchTimeout, errors.ConnectionFailed) as exc:
                # A read timeout or a broken stream is a normal close (StreamWatcher's IsProbableEOF).
                log.debug("informer.watch_closed", informer=self.name, reason=type(exc).__name__)
            except Exception as exc:  # noqa: BLE001 - any other stream failure ends this watch with an error
                outcome.error = exc
                return outcome
        finally:
            resync_error = self._end_watch()
            if not keep_open:
                w.stop()
        if stop_event.is_set():
            outcome.stop_requested = True
            return outcome
        if resync_error is not None:
            outcome.error = resync_error
            return outcome
        if self._clock.monotonic() - start < VERY_SHORT_WATCH and outcome.events == 0:
            outcome.error = VeryShortWatchError(self.name)
        return outcome

    def _end_watch(self) -> BaseException | None:
        """Forget the watch in flight; return (and clear) the error of a failed resync, if any."""
        with self._watch_lock:
            self._current_watch = None
            err, self._resync_error = self._resync_error, None
            return err

    def _apply(self, op: Callable[[Any], None], obj: Any, etype: str) -> None:
        try:
            op(obj if self._transform is None else self._transform(obj))
        except Exception as exc:
            log.error(
                "informer.store_failed",
                informer=self.name,
                event_type=etype,
                error=str(exc),
                error_type=type(exc).__name__,
                exc_info=True,
            )

    def __repr__(self) -> str:
        return (
            f"Reflector(name={self.name!r}, last_sync_resource_version={self.last_sync_resource_version!r}, "
            f"relist_resource_version={self.relist_resource_version()!r}, "
            f"use_watch_list={self.use_watch_list})"
        )


def default_watch_error_handler(reflector: Reflector, err: BaseException) -> None:
    """client-go ``DefaultWatchErrorHandler``: log, quietly for the expected cases."""
    if errors.is_expired(err):
        log.info("informer.watch_closed", informer=reflector.name, error=str(err))
    else:
        log.warning(
            "informer.list_and_watch_failed",
            informer=reflector.name,
            error=str(err),
            error_type=type(err).__name__,
        )
