"""An event recorder: reconcilers report what they did as core/v1 Events, without ever waiting for the API.

Go origin: client-go ``tools/record`` (``EventBroadcaster``, ``EventRecorder``, ``recordToSink``, and the
``EventCorrelator``'s "logger" that turns repeats into one Event with a growing ``count``), which is what
controller-runtime's ``mgr.GetEventRecorderFor(name)`` hands out.

Guarantees:

- :meth:`EventRecorder.event` never blocks and never raises for API trouble: it validates its arguments,
  stamps the time, and puts the event on a bounded queue (1000 by default). When the queue is full the event
  is **dropped and counted** (:meth:`EventBroadcaster.statistics`), never waited for.
- One owned thread, ``event-broadcaster``, writes the queue to the API in order. A write that fails is
  logged (``event.write_failed``) and counted; the broadcaster does not retry it (client-go retries up to 12
  times, 10 s apart; a reconciler that keeps failing will emit the event again), though the client itself
  resends a write answered 429 or 5xx with ``Retry-After``.
- **Series of repeats.** Events are correlated on (involved object, type, reason, message, source). The first
  occurrence creates an Event named ``<object name>.<hex nanoseconds>`` in the object's namespace (``default``
  for cluster-scoped objects) with ``count: 1``; each repeat, while its key is among the 4096 most recently
  seen, merge-patches that Event with ``count + 1`` and a new ``lastTimestamp``. If the Event was deleted
  meanwhile (expired by the API server's event TTL) a new one is created. This is client-go's
  ``eventLogger`` without its other two stages (below).
- Messages longer than 1024 characters are truncated (ending in ``...``).
- :meth:`EventBroadcaster.stop` writes what is still queued (within ``flush_timeout`` seconds), then joins
  the thread (for at most a second more: a write waiting out a server's ``Retry-After`` is left to
  finish); events recorded after stop are dropped and counted.

Deliberately missing: client-go's spam filter (a per-object token bucket, 25 burst then one per 5 minutes)
and its aggregator (10 similar events with different messages within 10 minutes become one "combined from
similar events"): the bounded queue and the series above keep a controller's event volume in check here.
Also missing: ``events.k8s.io/v1`` Events, ``AnnotatedEventf``, and related objects.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import cachetools
import structlog

from controller.client.errors import NotFound
from controller.client.gvk import GVK
from controller.clock import REAL_CLOCK, Clock

__all__ = [
    "EVENT_TYPE_NORMAL",
    "EVENT_TYPE_WARNING",
    "MAX_MESSAGE_LENGTH",
    "EventBroadcaster",
    "EventRecorder",
    "EventSink",
    "EventStatistics",
]

_log = structlog.get_logger("controller.manager.recorder")

EVENT_TYPE_NORMAL = "Normal"
EVENT_TYPE_WARNING = "Warning"
MAX_MESSAGE_LENGTH = 1024
EVENT_GVK = GVK("", "v1", "Event")

_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


class EventSink(Protocol):
    """The slice of ``controller.client.client.Client`` the broadcaster writes through."""

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]: ...

    def patch(
        self, gvk: GVK, name: str, patch: Any, namespace: str | None = None, patch_type: Any = "merge"
    ) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class EventStatistics:
    """Counters since the broadcaster was created."""

    recorded: int
    created: int
    patched: int
    dropped: int
    failed: int


@dataclass(frozen=True, slots=True, kw_only=True)
class _Pending:
    involved: dict[str, Any]
    namespace: str
    type: str
    reason: str
    message: str
    component: str
    at: Any  # datetime


@dataclass(slots=True, kw_only=True)
class _Series:
    name: str
    namespace: str
    count: int
    first_timestamp: str


def _involved_object(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    ref: dict[str, Any] = {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": obj.get("kind", ""),
        "name": meta.get("name", ""),
    }
    for key in ("namespace", "uid", "resourceVersion"):
        if meta.get(key):
            ref[key] = meta[key]
    return ref


def _truncate(message: str) -> str:
    if len(message) <= MAX_MESSAGE_LENGTH:
        return message
    return message[: MAX_MESSAGE_LENGTH - 3] + "..."


class EventBroadcaster:
    """Owns the queue, the writer thread and the series cache; hands out :class:`EventRecorder` s."""

    def __init__(
        self,
        sink: EventSink,
        *,
        clock: Clock = REAL_CLOCK,
        host: str | None = None,
        queue_size: int = 1000,
        cache_size: int = 4096,
        flush_timeout: float = 5.0,
    ) -> None:
        self._sink = sink
        self._clock = clock
        self._host = host if host is not None else socket.gethostname()
        self._queue: queue.Queue[_Pending | None] = queue.Queue(maxsize=queue_size)
        # Only the writer thread touches the series cache and _last_nanos.
        self._last_nanos = 0
        self._series: cachetools.LRUCache[tuple[Any, ...], _Series] = cachetools.LRUCache(maxsize=cache_size)
        self._flush_timeout = flush_timeout
        self._stats_lock = threading.Lock()
        self._recorded = self._created = self._patched = self._dropped = self._failed = 0
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def new_recorder(self, component: str) -> EventRecorder:
        """A recorder whose events carry ``source.component = component`` (controller-runtime's name)."""
        return EventRecorder(self, component)

    def start(self) -> None:
        """Starts the writer thread (idempotent). Events recorded before start wait in the queue."""
        with self._start_lock:
            if self._thread is not None or self._stopped.is_set():
                return
            self._thread = threading.Thread(target=self._run, name="event-broadcaster", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Writes what is queued (for at most ``flush_timeout`` s), then stops and joins the thread."""
        with self._start_lock:
            self._stopped.set()
            thread = self._thread
        if thread is None:
            return
        # Wakes a writer blocked on an empty queue; a full queue means it is busy and will see _stopped.
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(None)
        # Bounded: a write may be waiting out a server's Retry-After inside the client. The thread is a
        # daemon and sees _stopped after that write; stop() never outlives the flush by more than a second.
        thread.join(self._flush_timeout + 1.0)
        if thread.is_alive():
            _log.warning("event.stop_timed_out", flush_timeout_s=self._flush_timeout)

    def statistics(self) -> EventStatistics:
        with self._stats_lock:
            return EventStatistics(
                recorded=self._recorded,
                created=self._created,
                patched=self._patched,
                dropped=self._dropped,
                failed=self._failed,
            )

    # --- producer side --------------------------------------------------------------------------------

    def _enqueue(self, pending: _Pending) -> None:
        if self._stopped.is_set():
            self._count_dropped()
            return
        try:
            self._queue.put_nowait(pending)
        except queue.Full:
            self._count_dropped()
            _log.warning("event.dropped", reason=pending.reason, name=pending.involved.get("name"))
            return
        with self._stats_lock:
            self._recorded += 1

    def _count_dropped(self) -> None:
        with self._stats_lock:
            self._dropped += 1

    # --- writer thread --------------------------------------------------------------------------------

    def _run(self) -> None:
        flush_deadline: float | None = None
        while True:
            if self._stopped.is_set() and flush_deadline is None:
                flush_deadline = self._clock.monotonic() + self._flush_timeout
            if flush_deadline is not None:
                if self._clock.monotonic() >= flush_deadline:
                    break
                try:
                    pending = self._queue.get_nowait()
                except queue.Empty:
                    break
            else:
                pending = self._queue.get()
            if pending is None:
                continue
            self._write(pending)
        # Whatever is left after the flush deadline is dropped, and counted.
        left = 0
        while True:
            try:
                if self._queue.get_nowait() is not None:
                    left += 1
            except queue.Empty:
                break
        if left:
            with self._stats_lock:
                self._dropped += left

    def _write(self, pending: _Pending) -> None:
        involved = pending.involved
        key = (
            involved.get("apiVersion"),
            involved.get("kind"),
            involved.get("namespace"),
            involved.get("name"),
            involved.get("uid"),
            pending.type,
            pending.reason,
            pending.message,
            pending.component,
        )
        timestamp = pending.at.strftime(_TIME_FORMAT)
        series = self._series.get(key)
        try:
            if series is not None:
                try:
                    self._sink.patch(
                        EVENT_GVK,
                        series.name,
                        {"count": series.count + 1, "lastTimestamp": timestamp},
                        namespace=series.namespace,
                    )
                except NotFound:
                    series = None  # expired by the API server's TTL: start a new series
                else:
                    series.count += 1
                    with self._stats_lock:
                        self._patched += 1
                    return
            # client-go's <name>.<UnixNano in hex>, made strictly increasing so two events in one clock tick
            # never collide.
            nanos = max(int(pending.at.timestamp() * 1e9), self._last_nanos + 1)
            self._last_nanos = nanos
            name = f"{involved.get('name', '')}.{nanos:x}"
            self._sink.create(
                {
                    "apiVersion": "v1",
                    "kind": "Event",
                    "metadata": {"name": name, "namespace": pending.namespace},
                    "involvedObject": involved,
                    "reason": pending.reason,
                    "message": pending.message,
                    "type": pending.type,
                    "source": {"component": pending.component, "host": self._host},
                    "firstTimestamp": timestamp,
                    "lastTimestamp": timestamp,
                    "count": 1,
                    "reportingComponent": pending.component,
                    "reportingInstance": self._host,
                }
            )
        except Exception as exc:  # noqa: BLE001 - an event that cannot be written is logged and counted
            self._series.pop(key, None)
            with self._stats_lock:
                self._failed += 1
            _log.warning(
                "event.write_failed", reason=pending.reason, name=involved.get("name"), error=str(exc)
            )
            return
        self._series[key] = _Series(
            name=name, namespace=pending.namespace, count=1, first_timestamp=timestamp
        )
        with self._stats_lock:
            self._created += 1

    def __repr__(self) -> str:
        s = self.statistics()
        return (
            f"EventBroadcaster(queued={self._queue.qsize()}, recorded={s.recorded}, created={s.created}, "
            f"patched={s.patched}, dropped={s.dropped}, failed={s.failed})"
        )


class EventRecorder:
    """Records Events about objects on behalf of one component (``record.EventRecorder``)."""

    __slots__ = ("_broadcaster", "component")

    def __init__(self, broadcaster: EventBroadcaster, component: str) -> None:
        if not component:
            raise ValueError("an event recorder needs a component name")
        self._broadcaster = broadcaster
        self.component = component

    def event(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        """Records that ``reason`` happened to ``obj``. Never blocks; see the module docstring.

        ``type`` is ``"Normal"`` or ``"Warning"``; ``reason`` a short UpperCamelCase word. Anything else is
        a programming error and raises ValueError.
        """
        if type not in (EVENT_TYPE_NORMAL, EVENT_TYPE_WARNING):
            raise ValueError(f"event type must be Normal or Warning, not {type!r}")
        if not reason:
            raise ValueError("an event needs a reason")
        involved = _involved_object(obj)
        if not involved["name"] or not involved["kind"]:
            raise ValueError("an event's object needs kind and metadata.name")
        self._broadcaster._enqueue(
            _Pending(
                involved=involved,
                namespace=involved.get("namespace") or "default",
                type=type,
                reason=reason,
                message=_truncate(message),
                component=self.component,
                at=self._broadcaster._clock.now(),
            )
        )

    def eventf(self, obj: Mapping[str, Any], type: str, reason: str, fmt: str, *args: Any) -> None:
        """:meth:`event` with ``fmt % args`` as the message."""
        self.event(obj, type, reason, fmt % args if args else fmt)

    def __repr__(self) -> str:
        return f"EventRecorder({self.component!r})"
