"""The runtime pipeline's `Reader`, served from the manager's informer cache, with live reads where a cache
cannot answer.

Go origin: the cache-backed `client.Reader` of controller-runtime's manager client, as kubeflow/trainer's
plugins and core runtimes use it (`r.client.Get(...)`), plus the fallback the `runtime.framework.Reader`
contract demands for label-narrowed caches.

Guarantees (the contract of `runtime.framework.Reader`):

- A kind the controller caches (every kind some watch of the TrainJob controller declared) is read from the
  cache: no request. A cached object is shared and read-only.
- A kind cached under a label selector (ConfigMaps and Secrets: only those labelled
  `trainer.kubeflow.org/trainjob-name`) holds only the labelled objects, so a cache miss proves nothing:
  `get` then asks the API server once (NotFound → None). An object written by an older controller (upstream
  does not label its snapshot, MPI Secret or Flux Secret) is thus still found, and never re-created. `list`
  of such a kind returns only the labelled objects.
- `trusting_misses(namespace, owner)` is the same reader without that confirmation for the objects of a
  TrainJob no controller can have built yet (the TrainJob reconciler decides when: see
  `controller.trainer.trainjob_controller`): a miss of a narrowed kind named `<owner>-...` in the TrainJob's
  namespace is final, so a new TrainJob's snapshot and MPI and Flux Secrets cost no request. Every other
  miss is still confirmed: an object the TrainJob does not own (the status server's CA Secret in the
  operator namespace is a Secret, cached narrowed, and never labelled) is not absent because the cache
  lacks it.
- `confirming_misses(kinds)` is the same reader with the misses of `kinds` confirmed live too, for the
  admission webhook: a TrainingRuntime created just before a TrainJob that references it (one
  `kubectl apply -f` of both) may not be in the informer's cache yet when the TrainJob is admitted, and
  refusing it as "must be created before the TrainJob" would be wrong. One GET per admission whose runtime
  the cache lacks; the reconciler keeps final misses (a retry with backoff sees the runtime arrive).
- A kind nobody caches (PriorityClasses for the Volcano plugin's validation, the status server's CA Secret in
  the operator namespace) is read live: one request per read, and nothing about it is cached. Caching them
  would mean watching every PriorityClass or every Secret of a namespace for a rare read.
- NotFound is None; every other failure (a kind not served, a cache stopped, a transport error) is
  `ReadError`, with its cause chained.
- `list` results come sorted by namespace and name.

Deliberately missing: field selectors and set-based label selectors (the `Reader` protocol has neither).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from controller.cache.informer_cache import CacheNotStarted
from controller.client.errors import ApiError, NoKindMatch, NotFound, TransportError
from controller.client.gvk import GVK
from controller.client.interfaces import APIReader, CachedReader
from controller.trainer.kinds import gvk_of
from runtime.framework import ReadError

__all__ = ["CacheReader"]

_READ_FAILURES = (ApiError, TransportError, NoKindMatch, CacheNotStarted, ValueError)


def _sorted(items: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    def key(obj: Mapping[str, Any]) -> tuple[str, str]:
        metadata = obj.get("metadata") or {}
        return (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))

    return sorted(items, key=key)


def _selector(labels: Mapping[str, str] | None) -> str | None:
    return ",".join(f"{k}={v}" for k, v in sorted((labels or {}).items())) or None


class CacheReader:
    """A `runtime.framework.Reader` over an informer cache (`cached` kinds) and a client (everything else).

    `narrowed` are the cached kinds whose cache holds only labelled objects: a miss there is confirmed live.
    """

    __slots__ = ("_cache", "_cached", "_client", "_narrowed", "_trusted")

    def __init__(
        self,
        cache: CachedReader,
        client: APIReader,
        *,
        cached: Collection[GVK],
        narrowed: Collection[GVK] = (),
    ) -> None:
        self._cache = cache
        self._client = client
        self._cached = frozenset(cached)
        self._narrowed = frozenset(narrowed)
        # (namespace, name prefix) whose narrowed misses are final; None: every narrowed miss is confirmed.
        self._trusted: tuple[str, str] | None = None

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Mapping[str, Any] | None:
        gvk = gvk_of(api_version, kind)
        try:
            if gvk in self._cached:
                try:
                    return self._cache.get(gvk, name, namespace)
                except NotFound:
                    if gvk not in self._narrowed or self._trusts(name, namespace):
                        return None
            return self._client.get(gvk, name, namespace)
        except NotFound:
            return None
        except _READ_FAILURES as exc:
            raise ReadError(f"reading {kind} {namespace or ''}/{name}: {exc}") from exc

    def trusting_misses(self, namespace: str, owner: str) -> CacheReader:
        """This reader with final cache misses for the objects named `<owner>-...` in `namespace`: the
        objects a TrainJob named `owner` owns, when nothing can have built them yet."""
        if not self._narrowed:
            return self
        trusting = CacheReader(self._cache, self._client, cached=self._cached, narrowed=self._narrowed)
        trusting._trusted = (namespace, owner + "-")
        return trusting

    def confirming_misses(self, kinds: Collection[GVK]) -> CacheReader:
        """This reader with a cache miss of any of `kinds` confirmed with a live read."""
        confirmed = self._narrowed | frozenset(kinds)
        reader = CacheReader(self._cache, self._client, cached=self._cached, narrowed=confirmed)
        reader._trusted = self._trusted
        return reader

    def _trusts(self, name: str, namespace: str | None) -> bool:
        trusted = self._trusted
        return trusted is not None and namespace == trusted[0] and name.startswith(trusted[1])

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Sequence[Mapping[str, Any]]:
        gvk = gvk_of(api_version, kind)
        try:
            if gvk in self._cached:
                return _sorted(self._cache.list(gvk, namespace, label_selector=dict(labels or {})))
            return _sorted(self._client.list(gvk, namespace, label_selector=_selector(labels)).items)
        except _READ_FAILURES as exc:
            raise ReadError(f"listing {kind} in {namespace or 'all namespaces'}: {exc}") from exc

    def __repr__(self) -> str:
        kinds = sorted(str(g.kind) for g in self._cached)
        return f"<CacheReader cached={kinds} narrowed={sorted(str(g.kind) for g in self._narrowed)}>"
