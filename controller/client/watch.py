"""The streaming watch decoder: an open watch as an iterator of events.

Go origin: apimachinery ``pkg/watch`` (``Event``, ``Interface.Stop``) and client-go ``rest/watch``
(``StreamWatcher`` over the JSON-lines ``watch=true`` response).

Guarantees:

- :class:`Watch` yields :class:`WatchEvent`\\ s (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR) in stream
  order; ``ERROR`` carries a ``metav1.Status`` (:meth:`WatchEvent.as_error`).
- Lines are split in linear time (:class:`LineSplitter`) however many chunks carry one object.
- A silent stream raises :class:`~controller.client.errors.WatchTimeout` (raised by the transport's read
  timeout; it stays in :mod:`controller.client.errors` with the other transport failures) and a broken one
  :class:`~controller.client.errors.ConnectionFailed`. An undecodable line ends the watch with a synthetic
  ERROR event, as client-go's ``StreamWatcher`` does.
- :meth:`Watch.stop` may be called from any thread and wakes a blocked reader at once.

A streaming list (``WatchList``, ``sendInitialEvents``) is a watch like any other here: its initial objects
are decoded one event at a time, as they arrive.

Deliberately missing: protobuf frames.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

import orjson
import structlog

from controller.client import errors
from controller.client.gvk import GVK
from controller.client.object import Object
from controller.client.transport import Stream

__all__ = ["LineSplitter", "Watch", "WatchEvent"]

_log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One watch event: ``type`` is ADDED, MODIFIED, DELETED, BOOKMARK or ERROR."""

    type: str
    object: Object

    def as_error(self) -> errors.ApiError:
        """The ``metav1.Status`` of an ERROR event as the exception it describes (``FromObject``)."""
        return errors.from_status(self.object)


class LineSplitter:
    """Splits a byte stream into newline-terminated lines in linear time.

    Fragments of a line spread over several chunks are kept in a list and joined once, when its newline
    arrives, so a large object costs one copy however many chunks carried it (``kubernetes.watch`` instead
    re-copies its whole buffer per line, quadratic in the chunk size). Blank lines are dropped.
    """

    __slots__ = ("_partial",)

    def __init__(self) -> None:
        self._partial: list[bytes] = []  # pieces of the current, unterminated line

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines completed by ``chunk``, without their newline."""
        end = chunk.find(b"\n")
        if end < 0:
            if chunk:
                self._partial.append(chunk)
            return []
        lines: list[bytes] = []
        if self._partial:
            self._partial.append(chunk[:end])
            first = b"".join(self._partial)
            self._partial.clear()
        else:
            first = chunk[:end]
        if first.strip():
            lines.append(first)
        start = end + 1
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                break
            if end > start:
                line = chunk[start:end]
                if line.strip():
                    lines.append(line)
            start = end + 1
        if start < len(chunk):
            self._partial.append(chunk[start:])
        return lines

    def flush(self) -> bytes:
        """Whatever followed the last newline (a truncated line at end of stream), and reset."""
        rest = b"".join(self._partial)
        self._partial.clear()
        return rest


class Watch:
    """An open watch: iterate it for :class:`WatchEvent`\\ s until the server ends the stream.

    One thread iterates; :meth:`stop` may be called from any thread, and wakes a reader blocked waiting for
    the next event (the socket is shut down), after which iteration ends. Use as a context manager, or call
    :meth:`stop`, to release the connection if you stop iterating early.

    Iteration raises :class:`~controller.client.errors.WatchTimeout` when the stream is silent for the read
    timeout and :class:`~controller.client.errors.ConnectionFailed` when the connection breaks. An undecodable
    line ends the watch with a synthetic ERROR event, as client-go's ``StreamWatcher`` does.
    """

    def __init__(self, stream: Stream, *, gvk: GVK) -> None:
        self._stream = stream
        self._chunks = stream.chunks()
        self._splitter = LineSplitter()
        self._lines: deque[bytes] = deque()
        self._lock = threading.Lock()
        self._stopped = False  # stop() was called
        self._reading = False  # a thread is inside __next__ reading the socket
        self._done = False  # no more events will be produced
        self.gvk = gvk
        self.events = 0

    def __iter__(self) -> Iterator[WatchEvent]:
        return self

    def __next__(self) -> WatchEvent:
        while not self._lines:
            with self._lock:
                if self._stopped or self._done:
                    self._done = True
                    raise StopIteration
                self._reading = True
            try:
                chunk = next(self._chunks)
            except BaseException:  # StopIteration at the end of the stream, or a transport error
                self._finish()
                raise
            finally:
                with self._lock:
                    self._reading = False
            self._lines.extend(self._splitter.feed(chunk))
        if self._stopped:
            self._finish()
            raise StopIteration
        line = self._lines.popleft()
        try:
            event = orjson.loads(line)
            result = WatchEvent(event["type"], event["object"])
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            self._finish()
            return _decode_error_event(exc)
        self.events += 1
        return result

    def _finish(self) -> None:
        with self._lock:
            self._done = True
        tail = self._splitter.flush()
        if tail.strip() and not self._stopped:
            _log.info("watch.truncated", kind=self.gvk.kind, tail_bytes=len(tail))
        self._lines.clear()
        self._stream.close()

    def stop(self) -> None:
        """End the watch; safe from any thread, idempotent (``watch.Interface.Stop``)."""
        with self._lock:
            self._stopped = True
            reading = self._reading
        self._stream.shutdown()
        if not reading:
            self._stream.close()

    @property
    def stopped(self) -> bool:
        return self._stopped

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else ("done" if self._done else "open")
        return f"Watch(kind={self.gvk.kind!r}, events={self.events}, {state})"


def _decode_error_event(exc: BaseException) -> WatchEvent:
    return WatchEvent(
        "ERROR",
        {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "code": 500,
            "reason": errors.REASON_INTERNAL_ERROR,
            "message": f"unable to decode an event from the watch stream: {exc}",
            "details": {"causes": [{"reason": "ClientWatchDecoding", "message": str(exc)}]},
        },
    )
