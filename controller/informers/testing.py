"""Fakes for testing informers and their users: a scriptable watch stream and an in-memory API server.

Go origin: apimachinery ``watch.FakeWatcher`` and client-go ``tools/cache/testing.FakeControllerSource``.
They live in the library (as upstream ships its fakes) because the informer, cache and benchmark tests all
use them.

:class:`FakeListerWatcher` models, for one kind: a monotonically increasing resourceVersion bumped by each
change; lists at the current state, paginated with continue tokens that see one consistent snapshot; watches
from a resourceVersion that replay every later change, or, from ``""``/``"0"``, start with a synthetic
``ADDED`` per object; streaming lists (``sendInitialEvents=true``, which requires
``resourceVersionMatch=NotOlderThan`` as kube-apiserver does): a synthetic ``ADDED`` per object at the current
state, then, if bookmarks are allowed, a ``BOOKMARK`` at the current resourceVersion annotated
``k8s.io/initial-events-end: "true"``, then every later change on the same stream; refusing streaming lists
(``watch_list=False``: 422 ``Invalid``, as a server without the WatchList feature); bookmarks on request;
compaction (a watch from before it gets a 410 ``Expired`` ``ERROR`` event, a continue token from before it a
410 ``Expired`` error); a list, or a streaming list, at a resourceVersion newer than the current one fails as
"too large resource version"; and scripted failures of the next list or watch calls. It records every request
it served, in order (its access log).

What it does not model: label and field selectors; namespaces as a scope of the list/watch (objects may carry
any namespace; everything is listed); the watch cache's freshness rules (every list, whatever its
resourceVersion, is served at the current state: RV ``"0"`` is never stale, and a streaming list from an RV,
even a compacted one, starts at the current state); ``resourceVersionMatch`` on lists (recorded by no one:
lists take none here) and ``sendInitialEvents=false``; server-side watch timeouts (``timeout_seconds`` is
recorded, never enforced); periodic bookmarks (only :meth:`FakeListerWatcher.bookmark` sends one); an
``ERROR`` or a close in the middle of a streaming list's initial events (script those with a
:class:`FakeWatcher`); generation, uid or any other field the API server sets, except
``metadata.resourceVersion``. Every object handed out is a fresh copy, as a decoded response would be.
"""

from __future__ import annotations

import builtins
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from controller.client import errors
from controller.client.object import Object, deep_copy
from controller.informers.reflector import (
    ADDED,
    BOOKMARK,
    DELETED,
    ERROR,
    INITIAL_EVENTS_ANNOTATION_KEY,
    MODIFIED,
    RESOURCE_VERSION_MATCH_NOT_OLDER_THAN,
    ListPage,
    WatchEvent,
)
from controller.informers.store import meta_namespace_key

_CLOSE = object()


class FakeWatcher:
    """A watch stream fed by the test (apimachinery ``FakeWatcher``, but buffered, so senders never block).

    Events are delivered in the order they were sent. :meth:`close` ends the stream after the buffered
    events (the server closed it); :meth:`stop` ends it at once (the consumer stopped it); :meth:`fail`
    makes the iteration raise once the events before it are consumed.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._buffer: deque[Any] = deque()
        self._stopped = False

    def action(self, event_type: str, obj: Mapping[str, Any]) -> None:
        with self._cond:
            self._buffer.append(WatchEvent(event_type, dict(obj)))
            self._cond.notify_all()

    def add(self, obj: Mapping[str, Any]) -> None:
        self.action(ADDED, obj)

    def modify(self, obj: Mapping[str, Any]) -> None:
        self.action(MODIFIED, obj)

    def delete(self, obj: Mapping[str, Any]) -> None:
        self.action(DELETED, obj)

    def bookmark(self, resource_version: str, *, initial_events_end: bool = False) -> None:
        """Send a BOOKMARK; ``initial_events_end`` annotates it as the end of a streaming list's initial
        events."""
        meta: dict[str, Any] = {"resourceVersion": resource_version}
        if initial_events_end:
            meta["annotations"] = {INITIAL_EVENTS_ANNOTATION_KEY: "true"}
        self.action(BOOKMARK, {"metadata": meta})

    def error(self, status: Mapping[str, Any]) -> None:
        """Send an ``ERROR`` event carrying a ``metav1.Status``."""
        self.action(ERROR, status)

    def fail(self, exc: BaseException) -> None:
        """Make the iteration raise ``exc`` after the events already sent."""
        with self._cond:
            self._buffer.append(exc)
            self._cond.notify_all()

    def close(self) -> None:
        """End the stream after the events already sent, as a server closing it would."""
        with self._cond:
            self._buffer.append(_CLOSE)
            self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    @property
    def is_stopped(self) -> bool:
        with self._cond:
            return self._stopped

    def __iter__(self) -> Iterator[WatchEvent]:
        return self

    def __next__(self) -> WatchEvent:
        with self._cond:
            while not self._buffer and not self._stopped:
                self._cond.wait()
            if self._stopped:
                raise StopIteration
            item = self._buffer.popleft()
            if item is _CLOSE:
                self._stopped = True
                raise StopIteration
            if isinstance(item, BaseException):
                raise item
            event: WatchEvent = item
            return event

    def __repr__(self) -> str:
        with self._cond:
            return f"FakeWatcher(buffered={len(self._buffer)}, stopped={self._stopped})"


@dataclass(frozen=True, slots=True, kw_only=True)
class ListRequest:
    """A list call as the fake server received it."""

    resource_version: str
    limit: int
    continue_: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class WatchRequest:
    """A watch call as the fake server received it."""

    resource_version: str
    timeout_seconds: int
    allow_bookmarks: bool
    send_initial_events: bool = False
    resource_version_match: str = ""


class FakeListerWatcher:
    """An in-memory API server for one kind, implementing ``ListerWatcher``. Thread-safe.

    Mutate its state with :meth:`add`, :meth:`modify`, :meth:`delete`; script failures by appending to
    :attr:`list_errors` / :attr:`watch_errors` (each call pops one, if any, and raises it); read what it was
    asked in :attr:`requests`; block until a condition holds with :meth:`wait_for`. ``watch_list`` False
    makes it refuse streaming lists (settable later through the attribute of that name).
    """

    def __init__(self, *, start_resource_version: int = 1, watch_list: bool = True) -> None:
        self.watch_list = watch_list
        self._cond = threading.Condition()
        self._rv = start_resource_version
        self._items: dict[str, dict[str, Any]] = {}
        self._history: list[tuple[int, str, dict[str, Any]]] = []  # (rv, event type, object)
        self._compacted = 0  # watches and continue tokens from an RV below this are gone
        self._watchers: list[tuple[FakeWatcher, bool]] = []
        self._snapshots: dict[int, list[dict[str, Any]]] = {}
        self.requests: list[ListRequest | WatchRequest] = []
        self.list_errors: deque[BaseException] = deque()
        self.watch_errors: deque[BaseException] = deque()

    # --- server-side changes -----------------------------------------------------------------------------

    @property
    def resource_version(self) -> str:
        with self._cond:
            return str(self._rv)

    def add(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create (or overwrite) an object; returns it as stored, with its new resourceVersion."""
        return self._change(ADDED, obj)

    def modify(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        return self._change(MODIFIED, obj)

    def delete(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Delete the object with ``obj``'s key; the DELETED event carries the last state at a new RV."""
        with self._cond:
            current = self._items.get(meta_namespace_key(obj))
        return self._change(DELETED, current if current is not None else obj)

    def _change(self, event_type: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        stored: Object = deep_copy(obj)
        with self._cond:
            self._rv += 1
            stored.setdefault("metadata", {})["resourceVersion"] = str(self._rv)
            key = meta_namespace_key(stored)
            if event_type == DELETED:
                self._items.pop(key, None)
            else:
                self._items[key] = stored
            self._history.append((self._rv, event_type, stored))
            for w, _ in self._live_watchers_locked():
                w.action(event_type, deep_copy(stored))
            self._cond.notify_all()
        copy: Object = deep_copy(stored)
        return copy

    def bookmark(self) -> str:
        """Send a BOOKMARK at the current resourceVersion to every open watch that allows bookmarks."""
        with self._cond:
            rv = str(self._rv)
            for w, allow in self._live_watchers_locked():
                if allow:
                    w.bookmark(rv)
            return rv

    def compact(self) -> str:
        """Forget history up to now, as etcd compaction does; returns the compacted resourceVersion."""
        with self._cond:
            self._compacted = self._rv
            self._history.clear()
            self._snapshots.clear()
            return str(self._rv)

    def close_watches(self) -> None:
        """End every open watch stream, as an API server restart or a server-side timeout would."""
        with self._cond:
            for w, _ in self._live_watchers_locked():
                w.close()
            self._watchers.clear()
            self._cond.notify_all()

    def _live_watchers_locked(self) -> list[tuple[FakeWatcher, bool]]:
        self._watchers = [(w, a) for w, a in self._watchers if not w.is_stopped]
        return list(self._watchers)

    def open_watches(self) -> int:
        """How many watch streams are open (neither stopped by the client nor closed)."""
        with self._cond:
            return len(self._live_watchers_locked())

    def items(self) -> builtins.list[dict[str, Any]]:
        """Copies of the current objects, sorted by key."""
        with self._cond:
            return [deep_copy(self._items[k]) for k in sorted(self._items)]

    # --- ListerWatcher -----------------------------------------------------------------------------------

    def list(self, resource_version: str, limit: int, continue_: str | None) -> ListPage:
        with self._cond:
            self.requests.append(
                ListRequest(resource_version=resource_version, limit=limit, continue_=continue_)
            )
            self._cond.notify_all()
            if self.list_errors:
                raise self.list_errors.popleft()
            if continue_:
                snap_rv, offset = (int(part) for part in continue_.split(":"))
                if snap_rv < self._compacted or snap_rv not in self._snapshots:
                    raise errors.Gone(
                        "The provided continue parameter is too old to display a consistent list result.",
                        status=410,
                        reason=errors.REASON_EXPIRED,
                    )
                snapshot = self._snapshots[snap_rv]
            else:
                if resource_version not in ("", "0") and int(resource_version) > self._rv:
                    raise _too_large_resource_version()
                snap_rv, offset = self._rv, 0
                snapshot = [self._items[k] for k in sorted(self._items)]
            if limit <= 0 or offset + limit >= len(snapshot):
                page = snapshot[offset:]
                token = None
            else:
                page = snapshot[offset : offset + limit]
                self._snapshots[snap_rv] = snapshot
                token = f"{snap_rv}:{offset + limit}"
            return ListPage([deep_copy(o) for o in page], str(snap_rv), token)

    def watch(
        self,
        resource_version: str,
        timeout_seconds: int,
        allow_bookmarks: bool,
        *,
        send_initial_events: bool = False,
        resource_version_match: str = "",
    ) -> FakeWatcher:
        with self._cond:
            self.requests.append(
                WatchRequest(
                    resource_version=resource_version,
                    timeout_seconds=timeout_seconds,
                    allow_bookmarks=allow_bookmarks,
                    send_initial_events=send_initial_events,
                    resource_version_match=resource_version_match,
                )
            )
            self._cond.notify_all()
            if self.watch_errors:
                raise self.watch_errors.popleft()
            if send_initial_events or resource_version_match:
                self._check_watch_list_locked(send_initial_events, resource_version_match)
            w = FakeWatcher()
            if send_initial_events:
                if resource_version not in ("", "0") and int(resource_version) > self._rv:
                    raise _too_large_resource_version()
                for key in sorted(self._items):
                    w.add(deep_copy(self._items[key]))
                if allow_bookmarks:
                    w.bookmark(str(self._rv), initial_events_end=True)
            elif resource_version in ("", "0"):
                for key in sorted(self._items):
                    w.add(deep_copy(self._items[key]))
            else:
                since = int(resource_version)
                if since < self._compacted:
                    w.error(
                        {
                            "kind": "Status",
                            "apiVersion": "v1",
                            "status": "Failure",
                            "message": f"too old resource version: {since} ({self._compacted})",
                            "reason": errors.REASON_EXPIRED,
                            "code": 410,
                        }
                    )
                    w.close()
                    return w
                for rv, event_type, obj in self._history:
                    if rv > since:
                        w.action(event_type, deep_copy(obj))
            self._watchers.append((w, allow_bookmarks))
            return w

    def _check_watch_list_locked(self, send_initial_events: bool, resource_version_match: str) -> None:
        """kube-apiserver's validation of a watch's ``sendInitialEvents``/``resourceVersionMatch``."""
        problem = ""
        if send_initial_events and not self.watch_list:
            problem = (
                "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList "
                "feature gate is enabled"
            )
        elif send_initial_events and resource_version_match != RESOURCE_VERSION_MATCH_NOT_OLDER_THAN:
            problem = (
                "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to "
                f"{RESOURCE_VERSION_MATCH_NOT_OLDER_THAN}"
            )
        elif resource_version_match and not send_initial_events:
            problem = (
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless "
                "sendInitialEvents is provided"
            )
        if problem:
            raise errors.Invalid(
                f'ListOptions.meta.k8s.io "" is invalid: {problem}', status=422, reason=errors.REASON_INVALID
            )

    # --- observing ---------------------------------------------------------------------------------------

    def list_requests(self) -> builtins.list[ListRequest]:
        with self._cond:
            return [r for r in self.requests if isinstance(r, ListRequest)]

    def watch_requests(self) -> builtins.list[WatchRequest]:
        with self._cond:
            return [r for r in self.requests if isinstance(r, WatchRequest)]

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
        """Block until ``predicate()`` holds, re-checking on every request and change (not a sleep)."""
        with self._cond:
            return self._cond.wait_for(predicate, timeout)

    def __repr__(self) -> str:
        with self._cond:
            return (
                f"FakeListerWatcher(resource_version={self._rv}, items={len(self._items)}, "
                f"open_watches={len(self._watchers)}, requests={len(self.requests)})"
            )


def _too_large_resource_version() -> errors.ServerError:
    return errors.ServerError(
        "Too large resource version",
        status=504,
        reason=errors.REASON_TIMEOUT,
        details={
            "causes": [
                {"reason": errors.CAUSE_RESOURCE_VERSION_TOO_LARGE, "message": "Too large resource version"}
            ]
        },
    )
