"""The informer cache: reads served from one shared informer per kind, created on first use.

Go origin: controller-runtime ``pkg/cache`` (``informerCache``, ``Options.ByObject``, ``DefaultTransform``,
``SyncPeriod``), ``pkg/cache/internal/informers.go`` (lazy per-GVK informers, start/stop, wait for sync) and
``pkg/cache/internal/cache_reader.go`` (``Get``/``List`` over the indexer, label and field-index filtering).

The seams: :class:`Reader` is what a reconciler reads through (``get``, ``list``, ``by_index``);
:class:`Informers` is what the builder and the field indexers need (``get_informer``); :class:`Cache` is both
plus the lifecycle the manager drives. :class:`InformerCache` implements all three.

Guarantees:

- **One informer per kind**, created lazily by :meth:`InformerCache.get_informer` (or the first ``get`` or
  ``list`` of that kind) with the lister-watcher ``factory`` returns for it (the manager passes
  ``client.lister_watcher``). Per kind, :class:`ByObject` restricts the watch to a namespace and to label
  and field selectors (the API server filters: e.g. only ConfigMaps with a label), and sets the transform.
- **Lifecycle.** Informers created before :meth:`InformerCache.start` start with it; later ones start at once.
  :meth:`InformerCache.stop` stops and joins every informer thread. Reads before ``start`` raise
  :class:`CacheNotStarted` (``ErrCacheNotStarted``); after ``start``, a read of a kind whose informer has not
  synced yet blocks until it has (controller-runtime's ``BlockUntilSynced`` default).
  :meth:`InformerCache.wait_for_cache_sync` waits for every informer, on events rather than
  controller-runtime's 100 ms polling; given a ``stop`` event (the manager's), it gives up within
  :data:`STOP_CHECK_PERIOD` of the cache's clock once that is set, as ``WaitForCacheSync(ctx)`` ends with
  its context.
- **Reads.** ``get`` looks a key up; ``list`` walks the namespace index (every informer has one), or a field
  index (``index=(field_name, value)``, exact match, registered with ``controller.indexers.index_field``),
  then filters by label selector. Results come in no particular order.
- **Objects are read-only by contract, and not copied.** controller-runtime deep-copies every object it hands
  out; this cache does not (a deepcopy costs ~6x a decode, and most reads only look). Everything ``get`` and
  ``list`` return is the cache's own, shared with every other reader: copy it
  (``controller.client.object.deep_copy``) before changing it. The mutation detector
  (``KUBE_CACHE_MUTATION_DETECTOR=true``) fails the tests of anyone who does not.
- ``managedFields`` are stripped from every object before it is stored (``default_transform``).
- Resync: informers resync every ``sync_period`` (10 h by default) scaled by a random factor in [0.9, 1.1),
  so the informers of a process do not resync in lock-step.

Deliberately missing: ``Limit``/``Continue`` on cached lists, several field requirements in one list,
``DefaultNamespaces`` maps and per-namespace informers (one namespace, or all, per kind), metadata-only and
typed informers, ``RemoveInformer``, and ``ReaderFailOnMissingInformer``.
"""

from __future__ import annotations

import random
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from controller.client import errors, interfaces
from controller.client.gvk import GVK
from controller.client.object import Object
from controller.clock import REAL_CLOCK, Clock
from controller.indexers.field import field_index_name, key_to_namespaced_key
from controller.informers.mutation_detector import CacheMutationError
from controller.informers.reflector import ListerWatcher
from controller.informers.shared_informer import SharedIndexInformer, TransformFunc, strip_managed_fields
from controller.informers.store import NAMESPACE_INDEX, meta_namespace_index_func

DEFAULT_SYNC_PERIOD = 10 * 3600.0
"""controller-runtime's default ``SyncPeriod``."""

STOP_CHECK_PERIOD = 0.1
"""Seconds of the cache's clock between looks at the ``stop`` of a sync wait (a sync wakes it at once)."""


class CacheNotStarted(RuntimeError):
    """A read was attempted on a cache that has not been started, or has been stopped."""


ObjectList = list[Object]
"""``list[Object]``, named once where a class's own ``list`` method would shadow the builtin."""


class Reader(interfaces.CachedReader, Protocol):
    """What a reconciler reads through (controller-runtime ``client.Reader`` over the cache): the client's
    :class:`~controller.client.interfaces.CachedReader`, with the cache's label selectors and field indexes.

    Everything returned is the cache's own, shared and read-only by contract.
    """

    def get(self, gvk: GVK, name: str, namespace: str | None = None) -> Object:
        """The object; raises :class:`~controller.client.errors.NotFound` if the cache has none of that
        name."""
        ...

    def list(
        self,
        gvk: GVK,
        namespace: str | None = None,
        *,
        label_selector: str | Mapping[str, str] | LabelSelector | None = None,
    ) -> list[Object]:
        """Objects of ``gvk`` in ``namespace`` (None: all) matching ``label_selector``, in no order."""
        ...

    def by_index(self, gvk: GVK, index_name: str, value: str, *, namespace: str | None = None) -> ObjectList:
        """Objects filed under ``value`` in the field index ``index_name`` (registered with
        :func:`controller.indexers.index_field`), in ``namespace`` (None: all), in no order
        (``client.MatchingFields``)."""
        ...


class Informers(Protocol):
    """The informer of a kind, created on first use (``cache.Informers.GetInformer``)."""

    def get_informer(self, gvk: GVK, *, block_until_synced: bool = True) -> SharedIndexInformer: ...


class Cache(Reader, Informers, Protocol):
    """A :class:`Reader` and :class:`Informers` with the lifecycle the manager drives (``cache.Cache``)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def wait_for_cache_sync(
        self, timeout: float | None = None, stop: threading.Event | None = None
    ) -> bool: ...

    def has_synced(self) -> bool: ...


class ListerWatcherFactory(Protocol):
    """Makes the list/watch pair for one kind (``controller.client.client.Client.lister_watcher``)."""

    def __call__(
        self,
        gvk: GVK,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ListerWatcher: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ByObject:
    """What to cache of one kind (controller-runtime ``cache.ByObject``).

    ``namespace`` restricts the watch to one namespace (None: all); ``label_selector`` and
    ``field_selector`` are sent to the API server, so only matching objects are cached; ``transform``
    replaces the cache's default transform for this kind (None: use the default).
    """

    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    transform: TransformFunc | None = None


# --- label selectors --------------------------------------------------------------------------------------

_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET_RE = re.compile(rf"^\s*(?P<key>{_KEY})\s+(?P<op>in|notin)\s*\((?P<values>[^)]*)\)\s*$")
_EQ_RE = re.compile(rf"^\s*(?P<key>{_KEY})\s*(?P<op>==|=|!=)\s*(?P<value>{_VALUE})\s*$")
_EXISTS_RE = re.compile(rf"^\s*(?P<neg>!?)\s*(?P<key>{_KEY})\s*$")
_VALUE_RE = re.compile(rf"^{_VALUE}$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Requirement:
    """One label requirement: ``op`` is one of ``in``, ``notin``, ``exists``, ``!exists``."""

    key: str
    op: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.op == "exists":
            return self.key in labels
        if self.op == "!exists":
            return self.key not in labels
        if self.op == "in":
            return self.key in labels and labels[self.key] in self.values
        return self.key not in labels or labels[self.key] not in self.values  # notin, !=


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed label selector (apimachinery ``labels.Selector``): all requirements must match.

    :meth:`parse` reads the string syntax (``a=b,c!=d,e in (x,y),f notin (z),g,!h``; ``==`` is ``=``); a
    mapping means equality on every key. The empty selector matches everything. Deliberately missing: the
    numeric ``<``/``>`` operators.
    """

    requirements: tuple[Requirement, ...] = ()

    @classmethod
    def parse(cls, selector: str | Mapping[str, str] | LabelSelector | None) -> LabelSelector:
        """Parse a selector; raises ``ValueError`` on a malformed one."""
        if selector is None:
            return cls()
        if isinstance(selector, LabelSelector):
            return selector
        if isinstance(selector, Mapping):
            return cls(tuple(Requirement(key=k, op="in", values=frozenset({v})) for k, v in selector.items()))
        return cls(tuple(_parse_requirement(part) for part in _split_requirements(selector)))

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def __bool__(self) -> bool:
        return bool(self.requirements)


def _split_requirements(selector: str) -> list[str]:
    """Split on the commas that separate requirements (not those inside ``in (a,b)``)."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    if depth != 0:
        raise ValueError(f"unbalanced parentheses in label selector {selector!r}")
    stripped = [p.strip() for p in parts]
    if stripped == [""]:
        return []
    if any(not p for p in stripped):
        raise ValueError(f"empty requirement in label selector {selector!r}")
    return stripped


def _parse_requirement(text: str) -> Requirement:
    if m := _SET_RE.match(text):
        values = [v.strip() for v in m["values"].split(",")]
        if not values or any(not _VALUE_RE.match(v) for v in values):
            raise ValueError(f"invalid values in label requirement {text!r}")
        return Requirement(key=m["key"], op=m["op"], values=frozenset(values))
    if m := _EQ_RE.match(text):
        op = "notin" if m["op"] == "!=" else "in"
        return Requirement(key=m["key"], op=op, values=frozenset({m["value"]}))
    if m := _EXISTS_RE.match(text):
        return Requirement(key=m["key"], op="!exists" if m["neg"] else "exists")
    raise ValueError(f"invalid label requirement {text!r}")


# --- the cache --------------------------------------------------------------------------------------------


def informer_name(gvk: GVK) -> str:
    """The name of a kind's informer and threads: ``configmap``, ``trainjob.trainer.kubeflow.org``."""
    kind = gvk.kind.lower()
    return f"{kind}.{gvk.group}" if gvk.group else kind


class InformerCache:
    """A read-only view of the cluster, served from shared informers (controller-runtime ``cache.Cache``).

    ``factory`` makes the list/watch pair of a kind. ``is_namespaced`` (optional; the manager passes the REST
    mapper's answer) lets ``get`` ignore a namespace given for a cluster-scoped kind, as controller-runtime
    does. The other arguments configure every informer: see :class:`SharedIndexInformer`. ``gc_tuning``
    (off by default: it changes interpreter-wide GC state) is for the entry point to switch on;
    ``use_watch_list`` (None: on unless ``KUBE_FEATURE_WatchListClient`` says false) fills each informer with
    a streaming list.
    """

    def __init__(
        self,
        factory: ListerWatcherFactory,
        *,
        by_object: Mapping[GVK, ByObject] | None = None,
        default_transform: TransformFunc | None = strip_managed_fields,
        sync_period: float = DEFAULT_SYNC_PERIOD,
        is_namespaced: Callable[[GVK], bool] | None = None,
        clock: Clock = REAL_CLOCK,
        mutation_detector: bool | None = None,
        gc_tuning: bool = False,
        rng: random.Random | None = None,
        use_watch_list: bool | None = None,
    ) -> None:
        self._factory = factory
        self._by_object = dict(by_object or {})
        self._default_transform = default_transform
        self._sync_period = sync_period
        self._is_namespaced = is_namespaced
        self._clock = clock
        self._mutation_detector = mutation_detector
        self._gc_tuning = gc_tuning
        self._use_watch_list = use_watch_list
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self._informers: dict[GVK, SharedIndexInformer] = {}  # guarded by _lock
        self._started = False
        self._stopped = False
        self._started_or_stopped = threading.Event()

    # --- informers ---------------------------------------------------------------------------------------

    def get_informer(self, gvk: GVK, *, block_until_synced: bool = True) -> SharedIndexInformer:
        """The informer of ``gvk``, created (and started, if the cache runs) on first use.

        With ``block_until_synced`` and a running cache, waits until the informer has synced.
        """
        informer, started = self._informer_for(gvk)
        if block_until_synced and started and not informer.has_synced():
            self._wait_synced(informer, gvk)
        return informer

    def _informer_for(self, gvk: GVK) -> tuple[SharedIndexInformer, bool]:
        with self._lock:
            informer = self._informers.get(gvk)
            if informer is not None:
                return informer, self._started
            if self._stopped:
                raise CacheNotStarted(f"cache stopped: no informer for {gvk}")
            opts = self._by_object.get(gvk, ByObject())
            lw = self._factory(
                gvk,
                namespace=opts.namespace,
                label_selector=opts.label_selector,
                field_selector=opts.field_selector,
            )
            informer = SharedIndexInformer(
                lw,
                name=informer_name(gvk),
                transform=opts.transform if opts.transform is not None else self._default_transform,
                # calculateResyncPeriod: a factor in [0.9, 1.1) so informers do not resync in lock-step.
                resync_period=self._sync_period * (0.9 + self._rng.random() / 5.0),
                indexers={NAMESPACE_INDEX: meta_namespace_index_func},
                clock=self._clock,
                mutation_detector=self._mutation_detector,
                gc_tuning=self._gc_tuning,
                rng=random.Random(self._rng.random()),
                use_watch_list=self._use_watch_list,
            )
            self._informers[gvk] = informer
            if self._started:
                informer.start()
            return informer, self._started

    def _wait_synced(self, informer: SharedIndexInformer, gvk: GVK) -> None:
        if not informer.wait_for_synced(None):
            raise CacheNotStarted(f"cache stopped before the informer for {gvk} synced")

    def informers(self) -> dict[GVK, SharedIndexInformer]:
        """The informers created so far, by kind."""
        with self._lock:
            return dict(self._informers)

    # --- lifecycle ---------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start every informer created so far; later ones start as they are created. Does not block."""
        with self._lock:
            if self._started or self._stopped:
                raise RuntimeError("the informer cache was already started")
            self._started = True
            informers = list(self._informers.values())
            for informer in informers:
                informer.start()
            self._started_or_stopped.set()

    def stop(self) -> None:
        """Stop every informer and join its threads. Raises :class:`CacheMutationError` after stopping all of
        them if a mutation detector caught a mutation."""
        with self._lock:
            self._stopped = True
            informers = list(self._informers.values())
            self._started_or_stopped.set()
        failures: list[CacheMutationError] = []
        for informer in informers:
            try:
                informer.stop()
            except CacheMutationError as err:
                failures.append(err)
        if failures:
            raise failures[0]

    def wait_for_cache_sync(self, timeout: float | None = None, stop: threading.Event | None = None) -> bool:
        """Wait until the cache has started and every informer created so far has synced.

        Returns False if ``timeout`` seconds (on the cache's clock) pass first, the cache stops, or ``stop``
        is set (noticed within :data:`STOP_CHECK_PERIOD`).
        """
        deadline = None if timeout is None else self._clock.monotonic() + timeout
        while True:
            with self._lock:
                started, stopped = self._started, self._stopped
                informers = list(self._informers.values())
            if stopped or (stop is not None and stop.is_set()):
                return False
            pending = next((i for i in informers if not i.has_synced()), None)
            if started and pending is None:
                return True
            left = None if deadline is None else deadline - self._clock.monotonic()
            if left is not None and left <= 0:
                return False
            if stop is not None:
                left = STOP_CHECK_PERIOD if left is None else min(left, STOP_CHECK_PERIOD)
            if started and pending is not None:
                if not pending.wait_for_synced(left) and pending.is_stopped():
                    return False  # its thread ended without a sync
            else:
                self._clock.wait(self._started_or_stopped, left)

    def has_synced(self) -> bool:
        """Whether the cache runs and every informer created so far has synced (a readiness check)."""
        with self._lock:
            if not self._started or self._stopped:
                return False
            informers = list(self._informers.values())
        return all(i.has_synced() for i in informers)

    # --- reads -------------------------------------------------------------------------------------------

    def _synced_informer(self, gvk: GVK) -> SharedIndexInformer:
        informer, started = self._informer_for(gvk)
        if not started:
            raise CacheNotStarted(f"the cache is not started: cannot read {gvk}")
        if not informer.has_synced():
            self._wait_synced(informer, gvk)
        return informer

    def get(self, gvk: GVK, name: str, namespace: str | None = None) -> Object:
        """The cached object; raises :class:`~controller.client.errors.NotFound`. Shared: do not mutate it."""
        informer = self._synced_informer(gvk)
        if namespace and self._is_namespaced is not None and not self._is_namespaced(gvk):
            namespace = None
        key = f"{namespace}/{name}" if namespace else name
        obj = informer.get_store().get_by_key(key)
        if obj is None:
            raise errors.NotFound(
                f'{gvk.kind} "{name}" not found',
                status=404,
                reason=errors.REASON_NOT_FOUND,
                details={"name": name, "group": gvk.group, "kind": gvk.kind},
            )
        result: Object = obj
        return result

    def list(
        self,
        gvk: GVK,
        namespace: str | None = None,
        *,
        label_selector: str | Mapping[str, str] | LabelSelector | None = None,
        index: tuple[str, str] | None = None,
    ) -> list[Object]:
        """Cached objects of ``gvk`` in ``namespace`` (None: all), matching ``label_selector``, and, with
        ``index=(field_name, value)``, filed under ``value`` in that field index. Shared: do not mutate them.
        """
        selector = LabelSelector.parse(label_selector)
        store = self._synced_informer(gvk).get_store()
        objs: Iterable[Any]
        if index is not None:
            field_name, value = index
            try:
                objs = store.by_index(field_index_name(field_name), key_to_namespaced_key(namespace, value))
            except KeyError as exc:
                raise ValueError(
                    f"no field index {field_name!r} on {gvk}: register it with "
                    "controller.indexers.index_field"
                ) from exc
        elif namespace:
            objs = store.by_index(NAMESPACE_INDEX, namespace)
        else:
            objs = store.list()
        if not selector:
            return list(objs)
        return [o for o in objs if selector.matches(o.get("metadata", {}).get("labels"))]

    def by_index(self, gvk: GVK, index_name: str, value: str, *, namespace: str | None = None) -> ObjectList:
        """Objects filed under ``value`` in the field index ``index_name``, in ``namespace`` (None: all).
        ``list(gvk, namespace, index=(index_name, value))``. Raises ``ValueError`` if no such index."""
        return self.list(gvk, namespace, index=(index_name, value))

    def __repr__(self) -> str:
        with self._lock:
            kinds = sorted(informer_name(g) for g in self._informers)
            return f"InformerCache(started={self._started}, stopped={self._stopped}, informers={kinds})"
