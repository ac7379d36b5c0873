"""The REST client: raw-JSON reads and writes of any kind, discovery, watches, and client-side throttling.

Go origin: controller-runtime ``pkg/client`` (the unstructured client: get, list, create, update, patch,
apply, status subresource, delete), client-go ``rest`` (request building, ``transformResponse``, Retry-After
retries, the ``rest_client_requests_total`` metric), ``tools/pager`` (paginated lists),
``watch.StreamWatcher`` (the JSON-lines watch decoder) and controller-runtime's lazy ``RESTMapper`` over
``discovery``.

Guarantees:

- **Objects are dicts** decoded once by orjson, never generated models. Items of a list carry ``apiVersion``
  and ``kind`` (the server leaves them out; we fill them from the list, as client-go's unstructured decoder
  does). What the client returns is the caller's to mutate; objects from a *cache* are not (copy them with
  :func:`deep_copy`).
- **Every request** waits for the client's token bucket (:mod:`controller.flowcontrol`; QPS 50 / burst 100 as
  Kubeflow Trainer runs) and counts one ``rest_client_requests_total{code,method,host}``, with code
  ``<error>`` when no HTTP answer came back, per attempt, as client-go counts.
- **Failures** raise the one mapping of :mod:`controller.errors` (``NotFound``, ``Conflict``, ``Gone``...).
- **Retry-After.** A GET (list, get, watch start, discovery) answered 429, or 5xx with a ``Retry-After``
  header, is retried after that delay, at most 10 times, as client-go does. A write is never retried:
  ``TooManyRequests`` (``retry_after`` set) reaches the caller, whose work queue backs off.
- **Lists** are paginated 500 per page (client-go's pager default); an expired continue token falls back to
  one unpaginated list, as the pager's ``FullListIfExpired``. The list's resourceVersion is the first page's.
- **Watches** (:class:`Watch`) are iterators of :class:`WatchEvent` read from a streaming response with a
  linear-time line splitter; ``BOOKMARK`` and ``ERROR`` events are passed through (``ERROR`` carries a
  ``metav1.Status``: :meth:`WatchEvent.as_error`). A read timeout (default 90 s, beyond the API server's
  one-minute bookmark period) raises :class:`~controller.errors.WatchTimeout` on a silent, presumably dead,
  connection. :meth:`Watch.stop` may be called from any thread and wakes a blocked reader at once.
- **Discovery.** :class:`RESTMapper` resolves a kind to its resource. The kinds this project touches are
  known without a round trip; others are found in the group-version's resource list, fetched once, cached,
  and fetched again on a miss (a CRD installed later is found).
- **Server-side apply** sends the object as JSON (valid YAML) with ``application/apply-patch+yaml``,
  ``fieldManager`` and ``force``.

Deliberately missing: protobuf, ``WatchList`` streaming lists (later, behind a flag), ``deletecollection``,
dry run, retries of writes on Retry-After (client-go retries any request whose body can be replayed; we leave
writes to the work queue's backoff), and a fake client (tests run a real API server, or the small HTTP stub
in ``test/unit/client``).
"""

from __future__ import annotations

import functools
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar
from urllib.parse import quote

import orjson
import structlog

from controller import errors, metrics
from controller.clock import REAL_CLOCK, Clock
from controller.flowcontrol import TokenBucketRateLimiter
from controller.transport import DEFAULT_POOL_SIZE, Query, Response, Stream, Transport

_log = structlog.get_logger(__name__)

Object = dict[str, Any]
_QueryValue = str | int | bool
_QueryPairs = list[tuple[str, _QueryValue]]

DEFAULT_QPS = 50.0
DEFAULT_BURST = 100
DEFAULT_PAGE_SIZE = 500  # client-go tools/pager defaultPageSize
DEFAULT_WATCH_READ_TIMEOUT = 90.0
MAX_RETRIES = 10  # client-go rest.Request maxRetries
# When bookmarks are off nothing guarantees traffic, so a watch may be silent until the server ends it.
_WATCH_TIMEOUT_SLACK = 30.0

PatchType = Literal["merge", "json", "strategic"]
PATCH_CONTENT_TYPES: Mapping[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}
PROPAGATION_POLICIES = ("Background", "Foreground", "Orphan")


def deep_copy(obj: Any) -> Any:
    """A deep copy of a JSON-shaped value, by an orjson round trip (several times faster than deepcopy)."""
    return orjson.loads(orjson.dumps(obj))


def _query(*pairs: tuple[str, _QueryValue | None]) -> _QueryPairs:
    """The query parameters that are set, in order: a value of None or ``""`` leaves its parameter out."""
    return [(name, value) for name, value in pairs if value is not None and value != ""]


# --- kinds and resources ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GVK:
    """A GroupVersionKind. The core group is ``""``."""

    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        """``group/version``, or just ``version`` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    @classmethod
    def from_api_version(cls, api_version: str, kind: str) -> GVK:
        """Split an ``apiVersion`` (``"v1"``, ``"batch/v1"``) and pair it with ``kind``."""
        group, sep, version = api_version.rpartition("/")
        if not version or (sep and not group):
            raise ValueError(f"malformed apiVersion {api_version!r}")
        return cls(group, version, kind)

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> GVK:
        """The GVK an object declares in ``apiVersion`` and ``kind``."""
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if not isinstance(api_version, str) or not isinstance(kind, str) or not api_version or not kind:
            raise ValueError("object has no apiVersion/kind")
        return cls.from_api_version(api_version, kind)

    def __str__(self) -> str:
        return f"{self.api_version}, Kind={self.kind}"


GroupVersionKind = GVK


@dataclass(frozen=True, slots=True, kw_only=True)
class Resource:
    """Where a kind lives on the server: ``/api/v1`` or ``/apis/<group>/<version>``, then ``plural``."""

    group: str
    version: str
    plural: str
    namespaced: bool
    kind: str

    @property
    def gvk(self) -> GVK:
        return GVK(self.group, self.version, self.kind)

    @property
    def api_version(self) -> str:
        return self.gvk.api_version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The URL path of the collection (``name`` None) or of one object, optionally a subresource.

        For a namespaced kind, no ``namespace`` means all namespaces (list and watch only). For a
        cluster-scoped kind ``namespace`` is ignored, as controller-runtime ignores it.
        """
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base = f"{base}/namespaces/{quote(namespace, safe='')}"
        base = f"{base}/{self.plural}"
        if name is None:
            if subresource:
                raise ValueError("a subresource needs an object name")
            return base
        if not name:
            raise ValueError("object name must not be empty")
        base = f"{base}/{quote(name, safe='')}"
        return f"{base}/{subresource}" if subresource else base


def _res(api_version: str, kind: str, plural: str, namespaced: bool) -> Resource:
    gvk = GVK.from_api_version(api_version, kind)
    return Resource(group=gvk.group, version=gvk.version, plural=plural, namespaced=namespaced, kind=kind)


# The kinds this project reads or writes, resolvable without a discovery round trip.
BUILTIN_RESOURCES: tuple[Resource, ...] = (
    _res("v1", "Pod", "pods", True),
    _res("v1", "ConfigMap", "configmaps", True),
    _res("v1", "Secret", "secrets", True),
    _res("v1", "Namespace", "namespaces", False),
    _res("v1", "Event", "events", True),
    _res("v1", "ServiceAccount", "serviceaccounts", True),
    _res("v1", "Node", "nodes", False),
    _res("v1", "Service", "services", True),
    _res("v1", "LimitRange", "limitranges", True),
    _res("events.k8s.io/v1", "Event", "events", True),
    _res("coordination.k8s.io/v1", "Lease", "leases", True),
    _res("node.k8s.io/v1", "RuntimeClass", "runtimeclasses", False),
    _res("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", False),
    _res("batch/v1", "Job", "jobs", True),
    _res("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", False),
    _res("jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets", True),
    _res("scheduling.x-k8s.io/v1alpha1", "PodGroup", "podgroups", True),
    _res("scheduling.volcano.sh/v1beta1", "PodGroup", "podgroups", True),
    _res("trainer.kubeflow.org/v1alpha1", "TrainJob", "trainjobs", True),
    _res("trainer.kubeflow.org/v1alpha1", "TrainingRuntime", "trainingruntimes", True),
    _res("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", "clustertrainingruntimes", False),
)


def parse_api_resource_list(doc: Mapping[str, Any]) -> dict[str, Resource]:
    """Kind → Resource from a ``metav1.APIResourceList`` (``GET /api/v1``, ``GET /apis/<g>/<v>``).

    Subresources (``pods/status``) are skipped; the first resource named for a kind wins, as the discovery
    RESTMapper does.
    """
    gvk = GVK.from_api_version(str(doc.get("groupVersion") or ""), "")
    out: dict[str, Resource] = {}
    for entry in doc.get("resources") or ():
        name = entry.get("name") or ""
        kind = entry.get("kind") or ""
        if not name or "/" in name or not kind or kind in out:
            continue
        out[kind] = Resource(
            group=gvk.group,
            version=gvk.version,
            plural=name,
            namespaced=bool(entry.get("namespaced")),
            kind=kind,
        )
    return out


def parse_api_groups(
    core: Mapping[str, Any] | None, groups: Mapping[str, Any] | None
) -> dict[str, list[str]]:
    """Group → versions, preferred version first, from ``GET /api`` (``APIVersions``) and ``GET /apis``
    (``APIGroupList``)."""
    out: dict[str, list[str]] = {}
    if core:
        versions = [str(v) for v in core.get("versions") or ()]
        if versions:
            out[""] = versions
    for group in (groups or {}).get("groups") or ():
        name = group.get("name") or ""
        versions = [str(v.get("version")) for v in group.get("versions") or () if v.get("version")]
        preferred = (group.get("preferredVersion") or {}).get("version")
        if preferred in versions:
            versions.remove(preferred)
            versions.insert(0, preferred)
        if name and versions:
            out[name] = versions
    return out


class DiscoveryReader(Protocol):
    """What the mapper needs from a client: one JSON GET (raising ``controller.errors`` on failure)."""

    def get_raw(self, path: str) -> Any: ...


class RESTMapper:
    """Resolves kinds to resources through discovery, lazily, with a cache (controller-runtime's lazy mapper).

    Thread-safe. Built-in kinds (:data:`BUILTIN_RESOURCES`) never cost a round trip. Other kinds are looked up
    in their group-version's resource list, fetched on first use and cached; a kind missing from a cached
    list triggers one re-fetch (a CRD may have been installed since). A version of ``""`` asks for the
    group's preferred version (from ``/api`` and ``/apis``, also cached and re-fetched on a miss).
    """

    def __init__(self, reader: DiscoveryReader, builtins: Sequence[Resource] = BUILTIN_RESOURCES) -> None:
        self._reader = reader
        self._lock = threading.Lock()
        self._builtins: dict[GVK, Resource] = {r.gvk: r for r in builtins}
        # Invariant: a group-version is a key only once its resource list was fetched successfully.
        self._discovered: dict[str, dict[str, Resource]] = {}
        self._groups: dict[str, list[str]] | None = None

    def resource_for(self, gvk: GVK) -> Resource:
        """The resource serving ``gvk``; raises :class:`~controller.errors.NoKindMatch` if there is none."""
        if not gvk.version:
            gvk = GVK(gvk.group, self.preferred_version(gvk.group, gvk.kind), gvk.kind)
        builtin = self._builtins.get(gvk)
        if builtin is not None:
            return builtin
        gv = gvk.api_version
        with self._lock:
            cached = self._discovered.get(gv)
        if cached is not None and gvk.kind in cached:
            return cached[gvk.kind]
        resources = self._fetch_group_version(gvk)
        found = resources.get(gvk.kind)
        if found is None:
            raise errors.NoKindMatch(gvk.group, gvk.version, gvk.kind)
        return found

    def _fetch_group_version(self, gvk: GVK) -> dict[str, Resource]:
        gv = gvk.api_version
        path = f"/apis/{gv}" if gvk.group else f"/api/{gv}"
        try:
            doc = self._reader.get_raw(path)
        except errors.NotFound as exc:
            with self._lock:
                self._discovered.pop(gv, None)
            raise errors.NoKindMatch(gvk.group, gvk.version, gvk.kind) from exc
        resources = parse_api_resource_list(doc)
        with self._lock:
            self._discovered[gv] = resources
        return resources

    def server_groups(self, *, refresh: bool = False) -> dict[str, list[str]]:
        """Group → served versions, preferred first (``""`` is the core group)."""
        with self._lock:
            groups = self._groups
        if groups is None or refresh:
            groups = parse_api_groups(self._reader.get_raw("/api"), self._reader.get_raw("/apis"))
            with self._lock:
                self._groups = groups
        return groups

    def preferred_version(self, group: str, kind: str = "") -> str:
        """The group's preferred version; re-fetches the group list once if the group is unknown."""
        versions = self.server_groups().get(group) or self.server_groups(refresh=True).get(group)
        if not versions:
            raise errors.NoKindMatch(group, "", kind)
        return versions[0]

    def invalidate(self) -> None:
        """Forget everything discovered (built-ins stay)."""
        with self._lock:
            self._discovered.clear()
            self._groups = None

    def __repr__(self) -> str:
        with self._lock:
            discovered = sorted(self._discovered)
        return f"RESTMapper(builtins={len(self._builtins)}, discovered={discovered})"


# --- results ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ListResult:
    """A list response: the items, the list's resourceVersion, and the continue token for the next page."""

    items: list[Object]
    resource_version: str
    continue_: str = ""
    remaining_item_count: int | None = None


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One watch event: ``type`` is ADDED, MODIFIED, DELETED, BOOKMARK or ERROR."""

    type: str
    object: Object

    def as_error(self) -> errors.ApiError:
        """The ``metav1.Status`` of an ERROR event as the exception it describes (``FromObject``)."""
        return errors.from_status(self.object)


# --- watch -----------------------------------------------------------------------------------------------


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

    Iteration raises :class:`~controller.errors.WatchTimeout` when the stream is silent for the read timeout
    and :class:`~controller.errors.ConnectionFailed` when the connection breaks. An undecodable line ends the
    watch with a synthetic ERROR event, as client-go's ``StreamWatcher`` does.
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


# --- the client ------------------------------------------------------------------------------------------


class _Answer(Protocol):
    """What :meth:`Client._exchange` reads of a :class:`Response` or a :class:`Stream`."""

    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    def read_body(self) -> bytes: ...


_A = TypeVar("_A", bound=_Answer)
_REQUEST_OK = range(200, 207)  # client-go transformResponse: 200 to 206 carry a result
_WATCH_OK = range(200, 201)


@dataclass(frozen=True, slots=True)
class KindListerWatcher:
    """List and watch one kind, optionally in one namespace and filtered by selectors: what a reflector needs.

    ``list`` and ``watch`` match the ``ListerWatcher`` protocol of ``controller.informers``.
    """

    client: Client
    gvk: GVK
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None

    def list(
        self, resource_version: str | None = None, limit: int | None = None, continue_: str | None = None
    ) -> ListResult:
        """One page. ``resource_version`` ``""``/None is a consistent read, ``"0"`` any cached state;
        ``limit`` 0/None is unpaginated; ``continue_`` continues a previous page (and then
        ``resource_version`` is not sent, as the server requires)."""
        return self.client.list_page(
            self.gvk,
            self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            resource_version=None if continue_ else resource_version,
            limit=limit,
            continue_=continue_,
        )

    def watch(
        self,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
    ) -> Watch:
        return self.client.watch(
            self.gvk,
            self.namespace,
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
            allow_bookmarks=allow_bookmarks,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
        )


class Client:
    """A thread-safe REST client for any kind; share one per process.

    The client owns its transport: :meth:`close` aborts requests waiting for the rate limiter or a
    Retry-After delay (they raise :class:`~controller.errors.ClientClosed`) and closes the connection pool.
    ``qps <= 0`` turns client-side throttling off (controller-runtime's ``QPS: -1``).
    """

    def __init__(
        self,
        transport: Transport,
        *,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        clock: Clock = REAL_CLOCK,
        watch_read_timeout: float = DEFAULT_WATCH_READ_TIMEOUT,
        max_retries: int = MAX_RETRIES,
        mapper: RESTMapper | None = None,
    ) -> None:
        self._transport = transport
        self._clock = clock
        self._limiter = TokenBucketRateLimiter(qps, burst, clock=clock) if qps > 0 else None
        self._closed = threading.Event()
        self.watch_read_timeout = watch_read_timeout
        self.max_retries = max_retries
        self.mapper = mapper if mapper is not None else RESTMapper(self)
        self._host = transport.host

    @classmethod
    def load(
        cls,
        kubeconfig: str | None = None,
        context: str | None = None,
        *,
        pool_size: int = DEFAULT_POOL_SIZE,
        user_agent: str | None = None,
        **options: Any,
    ) -> Client:
        """Load config as controller-runtime does (:meth:`Transport.load`) and build a client on it."""
        transport = Transport.load(kubeconfig, context, pool_size=pool_size, user_agent=user_agent)
        return cls(transport, **options)

    @property
    def transport(self) -> Transport:
        return self._transport

    @property
    def rate_limiter(self) -> TokenBucketRateLimiter | None:
        return self._limiter

    def close(self) -> None:
        """Abort waiting requests and close the connection pool. Idempotent."""
        self._closed.set()
        self._transport.close()

    # --- plumbing ----------------------------------------------------------------------------------------

    def _throttle(self) -> None:
        if self._closed.is_set():
            raise errors.ClientClosed("the client is closed")
        if self._limiter is not None and not self._limiter.accept(self._closed):
            raise errors.ClientClosed("the client was closed while waiting for the rate limiter")

    def _count(self, code: str, method: str) -> None:
        metrics.rest_client_requests_total.labels(code=code, method=method, host=self._host).inc()

    def _retry_delay(
        self, method: str, status: int, headers: Mapping[str, str], attempt: int
    ) -> float | None:
        """client-go ``checkWait``: a GET answered 429, or 5xx with Retry-After, is retried (10 times)."""
        if method != "GET" or attempt >= self.max_retries or not (status == 429 or status >= 500):
            return None
        return errors.parse_retry_after(headers.get("Retry-After"))

    def _wait_retry(self, delay: float) -> None:
        if delay > 0 and self._clock.wait(self._closed, delay):
            raise errors.ClientClosed("the client was closed while waiting to retry")

    def _exchange(self, method: str, path: str, send: Callable[[], _A], *, success: range) -> _A:
        """Throttle, send, count, retry per Retry-After, and map failures; returns an answer whose status is
        in ``success``. A failed answer's body is read (and a stream closed) before any retry."""
        attempt = 0
        while True:
            self._throttle()
            try:
                answer = send()
            except errors.TransportError:
                self._count("<error>", method)
                raise
            self._count(str(answer.status), method)
            if answer.status in success:
                return answer
            body = answer.read_body()
            delay = self._retry_delay(method, answer.status, answer.headers, attempt)
            if delay is None:
                raise errors.from_response(answer.status, body, answer.headers, method=method)
            attempt += 1
            _log.debug("rest.retry_after", method=method, path=path, status=answer.status, delay_s=delay)
            self._wait_retry(delay)

    def _request(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
    ) -> Response:
        """One request through :meth:`_exchange`; returns a 2xx response."""
        return self._exchange(
            method,
            path,
            lambda: self._transport.request(method, path, query=query, body=body, content_type=content_type),
            success=_REQUEST_OK,
        )

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return orjson.loads(self._request(method, path, **kwargs).body)

    def get_raw(self, path: str) -> Any:
        """GET an arbitrary path (``/version``, discovery documents) and decode its JSON."""
        return self._json("GET", path)

    def resource_for(self, gvk: GVK) -> Resource:
        """Resolve a kind through the mapper (built-ins without a round trip)."""
        return self.mapper.resource_for(gvk)

    def _located(self, obj: Mapping[str, Any]) -> tuple[Resource, str | None, str]:
        """The resource, namespace and name an object names; namespace checked against the scope."""
        resource = self.resource_for(GVK.of(obj))
        meta = obj.get("metadata") or {}
        name = meta.get("name") or ""
        namespace = meta.get("namespace") or None
        if resource.namespaced and not namespace:
            raise ValueError(f"{resource.kind} {name!r} is namespaced but metadata.namespace is empty")
        return resource, namespace if resource.namespaced else None, name

    def _named(self, gvk: GVK, name: str, namespace: str | None) -> Resource:
        resource = self.resource_for(gvk)
        if resource.namespaced and not namespace:
            raise ValueError(f"{gvk.kind} {name!r} is namespaced: pass a namespace")
        if not name:
            raise ValueError("object name must not be empty")
        return resource

    # --- reads -------------------------------------------------------------------------------------------

    def get(self, gvk: GVK, name: str, namespace: str | None = None) -> Object:
        """One object; raises :class:`~controller.errors.NotFound` if absent."""
        resource = self._named(gvk, name, namespace)
        obj: Object = self._json("GET", resource.path(namespace, name))
        return obj

    def list_page(
        self,
        gvk: GVK,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
        limit: int | None = None,
        continue_: str | None = None,
    ) -> ListResult:
        """One page of a list, exactly as asked (the reflector drives pagination itself)."""
        resource = self.resource_for(gvk)
        query = _query(
            ("labelSelector", label_selector),
            ("fieldSelector", field_selector),
            ("resourceVersion", resource_version),
            ("resourceVersionMatch", resource_version_match),
            ("limit", limit or None),
            ("continue", continue_),
        )
        doc = self._json("GET", resource.path(namespace), query=query)
        items: list[Object] = doc.get("items") or []
        api_version, kind = resource.api_version, resource.kind
        for item in items:
            if "apiVersion" not in item:
                item["apiVersion"] = api_version
            if "kind" not in item:
                item["kind"] = kind
        meta = doc.get("metadata") or {}
        return ListResult(
            items=items,
            resource_version=meta.get("resourceVersion") or "",
            continue_=meta.get("continue") or "",
            remaining_item_count=meta.get("remainingItemCount"),
        )

    def list(
        self,
        gvk: GVK,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = DEFAULT_PAGE_SIZE,
        resource_version: str | None = None,
    ) -> ListResult:
        """Every matching object, fetched ``limit`` per page (client-go's pager)."""
        list_page = functools.partial(
            self.list_page, gvk, namespace, label_selector=label_selector, field_selector=field_selector
        )
        first = list_page(resource_version=resource_version, limit=limit)
        if not first.continue_:
            return first
        items = first.items
        token = first.continue_
        while token:
            try:
                page = list_page(limit=limit, continue_=token)
            except errors.Gone:
                # FullListIfExpired: the snapshot behind the token was compacted; take one unpaginated list.
                _log.info("rest.list_continue_expired", kind=gvk.kind, namespace=namespace)
                return list_page(resource_version=resource_version)
            items.extend(page.items)
            token = page.continue_
        return ListResult(items=items, resource_version=first.resource_version)

    def watch(
        self,
        gvk: GVK,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
        label_selector: str | None = None,
        field_selector: str | None = None,
        read_timeout: float | None = None,
    ) -> Watch:
        """Open a watch. Raises the mapped error if the server refuses it; see :class:`Watch`.

        ``read_timeout`` (default :attr:`watch_read_timeout`) bounds the silence on the stream. Without
        bookmarks a quiet watch may legitimately say nothing until ``timeout_seconds``, so then the bound is
        stretched past it.
        """
        resource = self.resource_for(gvk)
        query = _query(
            ("watch", True),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", timeout_seconds),
            ("allowWatchBookmarks", allow_bookmarks or None),
            ("labelSelector", label_selector),
            ("fieldSelector", field_selector),
        )
        timeout = read_timeout if read_timeout is not None else self.watch_read_timeout
        if not allow_bookmarks and timeout_seconds is not None:
            timeout = max(timeout, timeout_seconds + _WATCH_TIMEOUT_SLACK)
        path = resource.path(namespace)
        stream = self._exchange(
            "GET",
            path,
            lambda: self._transport.stream("GET", path, query=query, read_timeout=timeout),
            success=_WATCH_OK,
        )
        return Watch(stream, gvk=gvk)

    def lister_watcher(
        self,
        gvk: GVK,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> KindListerWatcher:
        """The list/watch pair an informer for ``gvk`` runs on."""
        return KindListerWatcher(self, gvk, namespace, label_selector, field_selector)

    # --- writes ------------------------------------------------------------------------------------------

    def _write(
        self,
        method: str,
        path: str,
        body: Any,
        content_type: str,
        *,
        field_manager: str | None,
        force: bool | None = None,
    ) -> Object:
        """Send ``body`` (JSON-encoded unless already bytes) and return the object the server answers with."""
        written: Object = self._json(
            method,
            path,
            query=_query(("fieldManager", field_manager), ("force", force)),
            body=body if isinstance(body, bytes) else orjson.dumps(body),
            content_type=content_type,
        )
        return written

    def create(self, obj: Mapping[str, Any], *, field_manager: str | None = None) -> Object:
        """POST a new object; raises :class:`~controller.errors.AlreadyExists` if the name is taken."""
        resource, namespace, _ = self._located(obj)
        return self._write(
            "POST", resource.path(namespace), obj, "application/json", field_manager=field_manager
        )

    def update(self, obj: Mapping[str, Any], *, field_manager: str | None = None) -> Object:
        """PUT the whole object; a stale ``metadata.resourceVersion`` raises
        :class:`~controller.errors.Conflict`."""
        return self._put(obj, None, field_manager)

    def update_status(self, obj: Mapping[str, Any], *, field_manager: str | None = None) -> Object:
        """PUT the object to its ``status`` subresource (only the status is changed)."""
        return self._put(obj, "status", field_manager)

    def _put(self, obj: Mapping[str, Any], subresource: str | None, field_manager: str | None) -> Object:
        resource, namespace, name = self._located(obj)
        path = resource.path(namespace, name, subresource)
        return self._write("PUT", path, obj, "application/json", field_manager=field_manager)

    def patch(
        self,
        gvk: GVK,
        name: str,
        patch: Any,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        *,
        field_manager: str | None = None,
    ) -> Object:
        """PATCH with a JSON merge patch (dict), JSON patch (list of operations) or strategic merge patch
        (built-in kinds only). ``patch`` may also be pre-encoded bytes."""
        return self._patch(
            gvk, name, patch, namespace, patch_type, subresource=None, field_manager=field_manager
        )

    def patch_status(
        self,
        gvk: GVK,
        name: str,
        patch: Any,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        *,
        field_manager: str | None = None,
    ) -> Object:
        """PATCH the ``status`` subresource. CRD lists (``conditions``) are atomic under a merge patch: send
        the whole list."""
        return self._patch(
            gvk, name, patch, namespace, patch_type, subresource="status", field_manager=field_manager
        )

    def _patch(
        self,
        gvk: GVK,
        name: str,
        patch: Any,
        namespace: str | None,
        patch_type: str,
        *,
        subresource: str | None,
        field_manager: str | None,
    ) -> Object:
        content_type = PATCH_CONTENT_TYPES.get(patch_type)
        if content_type is None or patch_type == "apply":
            raise ValueError(f"unknown patch type {patch_type!r}; use apply() for server-side apply")
        resource = self._named(gvk, name, namespace)
        return self._write(
            "PATCH",
            resource.path(namespace, name, subresource),
            patch,
            content_type,
            field_manager=field_manager,
        )

    def apply(self, obj: Mapping[str, Any], field_manager: str, *, force: bool = True) -> Object:
        """Server-side apply ``obj`` (the fields this manager owns, nothing else) and return the result.

        Without ``force``, a field owned by another manager with a different value raises
        :class:`~controller.errors.Conflict` (causes of type ``FieldManagerConflict``); with it, this manager
        takes ownership.
        """
        return self._apply(obj, field_manager, force, None)

    def apply_status(self, obj: Mapping[str, Any], field_manager: str, *, force: bool = True) -> Object:
        """Server-side apply to the ``status`` subresource."""
        return self._apply(obj, field_manager, force, "status")

    def _apply(
        self, obj: Mapping[str, Any], field_manager: str, force: bool, subresource: str | None
    ) -> Object:
        if not field_manager or len(field_manager) > 128:
            raise ValueError("server-side apply needs a field manager of 1 to 128 characters")
        resource, namespace, name = self._located(obj)
        if not name:
            raise ValueError("server-side apply needs metadata.name")
        path = resource.path(namespace, name, subresource)
        return self._write(
            "PATCH", path, obj, PATCH_CONTENT_TYPES["apply"], field_manager=field_manager, force=force
        )

    def delete(
        self,
        gvk: GVK,
        name: str,
        namespace: str | None = None,
        propagation_policy: str | None = "Background",
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> None:
        """DELETE one object. ``uid``/``resource_version`` are preconditions (a mismatch raises
        :class:`~controller.errors.Conflict`); raises :class:`~controller.errors.NotFound` if already gone."""
        if propagation_policy is not None and propagation_policy not in PROPAGATION_POLICIES:
            raise ValueError(f"propagation_policy must be one of {PROPAGATION_POLICIES}")
        resource = self._named(gvk, name, namespace)
        options: Object = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation_policy is not None:
            options["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        preconditions = {
            k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v is not None
        }
        if preconditions:
            options["preconditions"] = preconditions
        self._request(
            "DELETE",
            resource.path(namespace, name),
            body=orjson.dumps(options),
            content_type="application/json",
        )

    def __repr__(self) -> str:
        limiter = (
            f"qps={self._limiter.qps:g}, burst={self._limiter.burst}" if self._limiter else "unthrottled"
        )
        return f"Client(server={self._transport.server!r}, {limiter})"


__all__ = [
    "BUILTIN_RESOURCES",
    "GVK",
    "Client",
    "GroupVersionKind",
    "KindListerWatcher",
    "LineSplitter",
    "ListResult",
    "Object",
    "RESTMapper",
    "Resource",
    "Watch",
    "WatchEvent",
    "deep_copy",
]
