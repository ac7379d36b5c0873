"""The REST client: raw-JSON reads and writes of any kind, with retries and client-side throttling.

Go origin: controller-runtime ``pkg/client`` (the unstructured client: get, list, create, update, patch,
apply, status subresource, delete) and client-go ``rest`` (request building, ``transformResponse``,
Retry-After retries, the ``rest_client_requests_total`` metric) and ``tools/pager`` (paginated lists). Its
collaborators have modules of their own: kinds and resources (:mod:`controller.client.gvk`), discovery
(:mod:`controller.client.restmapper`), the watch decoder (:mod:`controller.client.watch`), the per-kind
list/watch pair (:mod:`controller.client.listerwatcher`) and wire objects (:mod:`controller.client.object`).

Guarantees:

- **Objects are dicts** decoded once by orjson, never generated models. Items of a list carry ``apiVersion``
  and ``kind`` (the server leaves them out; we fill them from the list, as client-go's unstructured decoder
  does). What the client returns is the caller's to mutate; objects from a *cache* are not (copy them with
  :func:`controller.client.object.deep_copy`).
- **Every request** waits for its resource's token bucket (:mod:`controller.client.flowcontrol`; QPS 50 /
  burst 100 each, as Kubeflow Trainer runs). As in controller-runtime, which builds one REST client per
  resource type, each resource (group, version, plural) has a bucket of its own, created on first use, and
  discovery and other non-resource paths share one more; a process-wide rate is therefore not bounded by
  one bucket. Each request counts one ``rest_client_requests_total{code,method,host}``, with code
  ``<error>`` when no HTTP answer came back, per attempt, as client-go counts.
- **Failures** raise the one mapping of :mod:`controller.client.errors` (``NotFound``, ``Conflict``,
  ``Gone``...).
- **Retry-After.** Any request answered 429, or 5xx with a ``Retry-After`` header, is retried after that
  delay, at most 10 times, as client-go does for every request whose body it can replay (ours are bytes):
  reads, watch starts and discovery, and writes too, so a write's Retry-After is honoured here rather than
  left to a work queue whose first retry comes 5 ms later. Past the retries, or without the header, the
  error (``TooManyRequests`` with ``retry_after``, ``ServerError``) reaches the caller.
- **Lists** are paginated 500 per page (client-go's pager default); an expired continue token falls back to
  one unpaginated list, as the pager's ``FullListIfExpired``. The list's resourceVersion is the first page's.
- **Watches** return a :class:`controller.client.watch.Watch`. A read timeout (default 90 s, beyond the API
  server's one-minute bookmark period) raises :class:`~controller.client.errors.WatchTimeout` on a silent,
  presumably dead, connection.
- **Discovery.** :meth:`Client.resource_for` delegates to a :class:`controller.client.restmapper.RESTMapper`.
- **Server-side apply** sends the object as JSON (valid YAML) with ``application/apply-patch+yaml``,
  ``fieldManager`` and ``force``.
- **Streaming lists** (``WatchList``, KEP-3157) are watches: :meth:`Client.watch` passes
  ``sendInitialEvents`` and ``resourceVersionMatch``; the reflector drives them.

Deliberately missing: protobuf, ``deletecollection``, dry run, and a fake client (tests run a real API
server, or the small HTTP stub in ``test/unit/client``).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol, TypeVar

import orjson
import structlog

from controller import metrics
from controller.client import errors
from controller.client.flowcontrol import TokenBucketRateLimiter
from controller.client.gvk import GVK, Resource
from controller.client.listerwatcher import KindListerWatcher
from controller.client.object import ListResult, Object
from controller.client.restmapper import RESTMapper
from controller.client.transport import DEFAULT_POOL_SIZE, Query, Response, Transport
from controller.client.watch import Watch
from controller.clock import REAL_CLOCK, Clock

_log = structlog.get_logger(__name__)

_QueryValue = str | int | bool
_QueryPairs = list[tuple[str, _QueryValue]]

DEFAULT_QPS = 50.0
DEFAULT_BURST = 100
DEFAULT_PAGE_SIZE = 500  # client-go tools/pager defaultPageSize
DEFAULT_WATCH_READ_TIMEOUT = 90.0
MAX_RETRIES = 10  # client-go rest.Request maxRetries
# Nothing guarantees traffic on a watch before the server ends it, bookmarks or not: kube-apiserver sends
# none on a resource its watch cache has seen no event of since it started, until etcd's next progress
# notification (every 10 minutes by default). A watch with a server timeout may be silent until then.
_WATCH_TIMEOUT_SLACK = 30.0

PatchType = Literal["merge", "json", "strategic"]
PATCH_CONTENT_TYPES: Mapping[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}
PROPAGATION_POLICIES = ("Background", "Foreground", "Orphan")


def _query(*pairs: tuple[str, _QueryValue | None]) -> _QueryPairs:
    """The query parameters that are set, in order: a value of None or ``""`` leaves its parameter out."""
    return [(name, value) for name, value in pairs if value is not None and value != ""]


# --- the client ------------------------------------------------------------------------------------------


class _Answer(Protocol):
    """What :meth:`Client._exchange` reads of a :class:`Response` or a :class:`Stream`."""

    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    def read_body(self) -> bytes: ...


_A = TypeVar("_A", bound=_Answer)
_LimiterKey = tuple[str, str, str]  # (group, version, plural)
_NON_RESOURCE: _LimiterKey = ("", "", "")  # discovery and other paths that name no resource
_REQUEST_OK = range(200, 207)  # client-go transformResponse: 200 to 206 carry a result
_WATCH_OK = range(200, 201)


class Client:
    """A thread-safe REST client for any kind; share one per process.

    The client owns its transport: :meth:`close` aborts requests waiting for the rate limiter or a
    Retry-After delay (they raise :class:`~controller.client.errors.ClientClosed`) and closes the connection
    pool. ``qps <= 0`` turns client-side throttling off (controller-runtime's ``QPS: -1``).
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
        self._qps = qps
        self._burst = burst
        # Invariant: one bucket per resource (group, version, plural) that was requested, plus the key
        # _NON_RESOURCE for discovery and other non-resource paths; created on first use, never removed.
        self._limiters: dict[_LimiterKey, TokenBucketRateLimiter] = {}
        self._limiters_lock = threading.Lock()
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

    def rate_limiter_for(self, resource: Resource | None) -> TokenBucketRateLimiter | None:
        """The token bucket requests for ``resource`` wait for (None: discovery and other non-resource
        paths), created on first use with the client's qps and burst; None when throttling is off.

        As controller-runtime, which builds one REST client (and so one client-go rate limiter) per
        resource type: a burst of writes to one kind does not hold up reads of another.
        """
        if self._qps <= 0:
            return None
        key: _LimiterKey = (
            (resource.group, resource.version, resource.plural) if resource is not None else _NON_RESOURCE
        )
        with self._limiters_lock:
            limiter = self._limiters.get(key)
            if limiter is None:
                limiter = TokenBucketRateLimiter(self._qps, self._burst, clock=self._clock)
                self._limiters[key] = limiter
            return limiter

    def close(self) -> None:
        """Abort waiting requests and close the connection pool. Idempotent."""
        self._closed.set()
        self._transport.close()

    # --- plumbing ----------------------------------------------------------------------------------------

    def _throttle(self, resource: Resource | None) -> None:
        if self._closed.is_set():
            raise errors.ClientClosed("the client is closed")
        limiter = self.rate_limiter_for(resource)
        if limiter is not None and not limiter.accept(self._closed):
            raise errors.ClientClosed("the client was closed while waiting for the rate limiter")

    def _count(self, code: str, method: str) -> None:
        metrics.rest_client_requests_total.labels(code=code, method=method, host=self._host).inc()

    def _retry_delay(self, status: int, headers: Mapping[str, str], attempt: int) -> float | None:
        """client-go ``IsNextRetry``/``checkWait``: a request answered 429, or 5xx, with Retry-After is
        retried (10 times), whatever its method: every body here is bytes, which client-go resends."""
        if attempt >= self.max_retries or not (status == 429 or status >= 500):
            return None
        return errors.parse_retry_after(headers.get("Retry-After"))

    def _wait_retry(self, delay: float) -> None:
        if delay > 0 and self._clock.wait(self._closed, delay):
            raise errors.ClientClosed("the client was closed while waiting to retry")

    def _exchange(
        self,
        method: str,
        path: str,
        send: Callable[[], _A],
        *,
        success: range,
        resource: Resource | None,
    ) -> _A:
        """Throttle (on ``resource``'s bucket), send, count, retry per Retry-After, and map failures; returns
        an answer whose status is in ``success``. A failed answer's body is read (and a stream closed) before
        any retry."""
        attempt = 0
        while True:
            self._throttle(resource)
            try:
                answer = send()
            except errors.TransportError:
                self._count("<error>", method)
                raise
            self._count(str(answer.status), method)
            if answer.status in success:
                return answer
            body = answer.read_body()
            delay = self._retry_delay(answer.status, answer.headers, attempt)
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
        resource: Resource | None,
    ) -> Response:
        """One request through :meth:`_exchange`; returns a 2xx response."""
        return self._exchange(
            method,
            path,
            lambda: self._transport.request(method, path, query=query, body=body, content_type=content_type),
            success=_REQUEST_OK,
            resource=resource,
        )

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return orjson.loads(self._request(method, path, **kwargs).body)

    def get_raw(self, path: str) -> Any:
        """GET an arbitrary path (``/version``, discovery documents) and decode its JSON."""
        return self._json("GET", path, resource=None)

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
        """One object; raises :class:`~controller.client.errors.NotFound` if absent."""
        resource = self._named(gvk, name, namespace)
        obj: Object = self._json("GET", resource.path(namespace, name), resource=resource)
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
        doc = self._json("GET", resource.path(namespace), query=query, resource=resource)
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
        send_initial_events: bool | None = None,
        resource_version_match: str | None = None,
    ) -> Watch:
        """Open a watch. Raises the mapped error if the server refuses it; see :class:`Watch`.

        ``send_initial_events=True`` with ``resource_version_match="NotOlderThan"`` asks for a streaming
        list (KEP-3157): the state at ``resource_version`` (or a consistent read, when it is empty) as
        ``ADDED`` events, then a ``BOOKMARK`` annotated ``k8s.io/initial-events-end: "true"``, then the
        changes. A server that does not serve it refuses the watch (422 ``Invalid``, or 403 ``Forbidden``).

        ``read_timeout`` (default :attr:`watch_read_timeout`) bounds the silence on the stream. With a
        ``timeout_seconds``, a quiet watch may legitimately say nothing until the server ends it, with
        bookmarks or without (see ``_WATCH_TIMEOUT_SLACK``), so the bound is stretched past it: a watch is
        re-opened at client-go's pace, never because a quiet kind sent nothing for a minute and a half. A
        dead peer is still found within about a minute by the transport's TCP keepalive, as client-go
        finds it.
        """
        resource = self.resource_for(gvk)
        query = _query(
            ("watch", True),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", timeout_seconds),
            ("allowWatchBookmarks", allow_bookmarks or None),
            ("labelSelector", label_selector),
            ("fieldSelector", field_selector),
            ("sendInitialEvents", send_initial_events),
            ("resourceVersionMatch", resource_version_match),
        )
        timeout = read_timeout if read_timeout is not None else self.watch_read_timeout
        if timeout_seconds is not None:
            timeout = max(timeout, timeout_seconds + _WATCH_TIMEOUT_SLACK)
        path = resource.path(namespace)
        stream = self._exchange(
            "GET",
            path,
            lambda: self._transport.stream("GET", path, query=query, read_timeout=timeout),
            success=_WATCH_OK,
            resource=resource,
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
        resource: Resource,
        field_manager: str | None,
        force: bool | None = None,
    ) -> Object:
        """Send ``body`` (JSON-encoded unless already bytes) and return the object the server answers with."""
        written: Object = self._json(
            method,
            path,
            resource=resource,
            query=_query(("fieldManager", field_manager), ("force", force)),
            body=body if isinstance(body, bytes) else orjson.dumps(body),
            content_type=content_type,
        )
        return written

    def create(self, obj: Mapping[str, Any], *, field_manager: str | None = None) -> Object:
        """POST a new object; raises :class:`~controller.client.errors.AlreadyExists` if the name is taken."""
        resource, namespace, _ = self._located(obj)
        return self._write(
            "POST",
            resource.path(namespace),
            obj,
            "application/json",
            resource=resource,
            field_manager=field_manager,
        )

    def update(self, obj: Mapping[str, Any], *, field_manager: str | None = None) -> Object:
        """PUT the whole object; a stale ``metadata.resourceVersion`` raises
        :class:`~controller.client.errors.Conflict`."""
        return self._put(obj, None, field_manager)

    def update_status(self, obj: Mapping[str, Any], *, field_manager: str | None = None) -> Object:
        """PUT the object to its ``status`` subresource (only the status is changed)."""
        return self._put(obj, "status", field_manager)

    def _put(self, obj: Mapping[str, Any], subresource: str | None, field_manager: str | None) -> Object:
        resource, namespace, name = self._located(obj)
        path = resource.path(namespace, name, subresource)
        return self._write(
            "PUT", path, obj, "application/json", resource=resource, field_manager=field_manager
        )

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
            resource=resource,
            field_manager=field_manager,
        )

    def apply(self, obj: Mapping[str, Any], field_manager: str, *, force: bool = True) -> Object:
        """Server-side apply ``obj`` (the fields this manager owns, nothing else) and return the result.

        Without ``force``, a field owned by another manager with a different value raises
        :class:`~controller.client.errors.Conflict` (causes of type ``FieldManagerConflict``); with it, this
        manager takes ownership.
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
            "PATCH",
            path,
            obj,
            PATCH_CONTENT_TYPES["apply"],
            resource=resource,
            field_manager=field_manager,
            force=force,
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
        :class:`~controller.client.errors.Conflict`); raises :class:`~controller.client.errors.NotFound` if
        already gone."""
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
            resource=resource,
        )

    def __repr__(self) -> str:
        limiter = f"qps={self._qps:g}, burst={self._burst}" if self._qps > 0 else "unthrottled"
        return f"Client(server={self._transport.server!r}, {limiter})"


__all__ = [
    "DEFAULT_BURST",
    "DEFAULT_PAGE_SIZE",
    "DEFAULT_QPS",
    "PATCH_CONTENT_TYPES",
    "Client",
    "PatchType",
]
