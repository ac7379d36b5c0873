"""Wires the Trainer into a manager: the runtime registry, the cache's label selectors, the field indexes,
the three controllers and their watches.

Go origin: kubeflow/trainer `pkg/controller/setup.go` (`SetupControllers`), `pkg/runtime/core` (registry and
`EventHandlerRegistrars`), `pkg/runtime/indexer` and the manager options of
`cmd/trainer-controller-manager/main.go`.

Start-up, in order (`cmd/` calls these):

1. `new_registry(...)`: the built-in plugins (with the enabled feature gates), then the third-party ones
   `plugins.enabled` names (from the `kubeflow_trainer.plugins` entry points), in one framework; a name
   that cannot be loaded or built is a `ConfigurationError` at its entry of the list.
2. `cache_by_object(registry)`: what the cache holds of each kind the plugins watch. A kind whose watches
   all declare the same label selector is cached under it (ConfigMaps and Secrets: only those labelled
   `trainer.kubeflow.org/trainjob-name`), so the manager never caches every ConfigMap or Secret of the
   cluster (upstream's trainer#3374 memory problem); and of each object only what the readers read
   (`controller.trainer.cache_transforms`: a running JobSet without its pod templates, a TrainJob's Secrets
   without their keys). Pass it to the manager's cache.
3. `setup_with_manager(manager, registry, ...)`: the TrainJob field indexes, then the controllers:
   - `trainjob_controller` for TrainJobs (every event), owning JobSets, PodGroups (each flavour only when
     its CRD is served at start-up; otherwise logged and skipped, as upstream), ConfigMaps and Secrets, and
     the plugins' mapped watches (LimitRanges, RuntimeClasses: suspended TrainJobs). It also watches the two
     runtime kinds: when a runtime is created, the unfinished TrainJobs that reference it (found through the
     runtimeRef field index) are reconciled at once, so a TrainJob created before its runtime does not wait
     out its backoff.
   - `trainingruntime_controller` and `clustertrainingruntime_controller`, which strip the legacy finalizer.
   Concurrency per kind comes from `group_kind_concurrency` (`TrainJob.trainer.kubeflow.org`, ...; 1 when
   absent), and is honoured (upstream ignores it and runs one worker each).
   - The `kubeflow_trainer_trainjobs` gauge's collector, registered while the manager runs.

The admission webhooks, the certificate rotator and the status server are wired by their own modules
(`controller.trainer.webhooks`, `controller.trainer.certificates`, `controller.trainer.statusserver`).

Deliberately different from upstream: the LimitRange and RuntimeClass watches of the PodGroup plugins are
registered even when no PodGroup CRD is installed (upstream then registers none); they only enqueue suspended
TrainJobs, whose reconcile writes nothing when nothing changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import structlog

from controller.cache.informer_cache import ByObject, InformerCache
from controller.client.client import Client
from controller.client.gvk import GVK
from controller.controller.builder import ControllerBuilder
from controller.controller.predicate import Funcs
from controller.controller.reconcile import Request
from controller.manager.manager import Manager
from controller.trainer.apply import Applier
from controller.trainer.cache_transforms import CacheTransforms
from controller.trainer.config import Configuration, ConfigurationError
from controller.trainer.indexers import register_indexes, trainjobs_for_runtime
from controller.trainer.kinds import CLUSTER_TRAINING_RUNTIME, TRAINING_RUNTIME, TRAINJOB, gvk_of
from controller.trainer.metrics import TrainJobStateMetrics
from controller.trainer.reader import CacheReader
from controller.trainer.runtime_controller import (
    CLUSTER_TRAINING_RUNTIME_CONTROLLER,
    TRAINING_RUNTIME_CONTROLLER,
    RuntimeFinalizerReconciler,
)
from controller.trainer.trainjob_controller import CONTROLLER_NAME, RECORDER_NAME, TrainJobReconciler
from runtime.api import constants
from runtime.api.views import TrainJobView
from runtime.core import RuntimeRegistry
from runtime.framework import (
    EntryPointLike,
    ErrorType,
    FieldError,
    Framework,
    PluginConfigurationError,
    PluginContext,
    PluginEntry,
    PluginLoadError,
    PluginRegistry,
    Reader,
    Watch,
    load_third_party,
)
from runtime.plugins import BUILTIN_ORDER, builtin_registry
from runtime.plugins.trainjobstatus import (
    DEFAULT_OPERATOR_NAMESPACE,
    StatusServerSettings,
    TrainJobStatusPlugin,
)

__all__ = [
    "TrainerControllers",
    "cache_by_object",
    "concurrency_key",
    "new_registry",
    "setup_with_manager",
]

_log = structlog.get_logger("controller.trainer")


def concurrency_key(gvk: GVK) -> str:
    """The `controller.groupKindConcurrency` key of a kind: `<Kind>.<group>`."""
    return f"{gvk.kind}.{gvk.group}" if gvk.group else gvk.kind


_PLUGINS_ENABLED = "plugins.enabled"
"""Where the Configuration names the third-party plugins (field errors point into it)."""


def new_registry(
    config: Configuration | None = None,
    *,
    operator_namespace: str = DEFAULT_OPERATOR_NAMESPACE,
    entry_points: Iterable[EntryPointLike] | None = None,
) -> RuntimeRegistry:
    """The runtime registry as the manager runs it: the built-in plugins with the feature gates of `config`
    (default: none enabled) and the status server's address for the `TrainJobStatus` plugin
    (`certManagement` names, `statusServer.port`, and the namespace the manager runs in), then the
    third-party plugins `plugins.enabled` names, loaded from the `kubeflow_trainer.plugins` entry points
    (`entry_points`: the installed ones unless given), in that order.

    Raises `ConfigurationError` naming the entry of `plugins.enabled` at fault when a plugin cannot be
    loaded or built (`plugins.enabled[1]: Not found: "acme": no installed distribution provides ...`).
    """
    config = config if config is not None else Configuration()
    gates = config.feature_gates.enabled_set()
    plugin_config = {
        "certManagement": {
            "webhookServiceName": config.cert_management.webhook_service_name,
            "webhookSecretName": config.cert_management.webhook_secret_name,
        },
        "statusServer": {"port": config.status_server.port},
    }
    context = PluginContext(config=plugin_config, feature_gates=gates)
    settings = StatusServerSettings.from_config(plugin_config, operator_namespace=operator_namespace)
    builtins = PluginRegistry(
        PluginEntry(entry.name, lambda ctx: TrainJobStatusPlugin(ctx, settings=settings))
        if entry.name == TrainJobStatusPlugin.name
        else entry
        for entry in builtin_registry(gates)
    )
    # Every built-in name is refused in the list, the gated ones too: enabling one is the gate's job.
    every_builtin = set(builtins.names) | set(BUILTIN_ORDER)
    enabled = config.plugins.enabled
    try:
        third_party = load_third_party(
            enabled, builtins=every_builtin, path=_PLUGINS_ENABLED, entry_points=entry_points
        )
    except PluginLoadError as exc:
        raise ConfigurationError(
            [FieldError(path=e.path, type=ErrorType.INVALID, message=e.body()) for e in exc.errors]
        ) from exc
    try:
        framework = Framework(builtins.extended(third_party), context)
    except PluginConfigurationError as exc:
        if exc.plugin not in enabled:
            raise
        path = f"{_PLUGINS_ENABLED}[{enabled.index(exc.plugin)}]"
        raise ConfigurationError(FieldError(path=path, type=ErrorType.INVALID, message=str(exc))) from exc
    return RuntimeRegistry(framework)


def _watched_kinds(watches: Iterable[Watch]) -> dict[GVK, list[Watch]]:
    kinds: dict[GVK, list[Watch]] = {}
    for watch in watches:
        kinds.setdefault(gvk_of(watch.api_version, watch.kind), []).append(watch)
    return kinds


def cache_by_object(
    registry: RuntimeRegistry, transforms: CacheTransforms | None = None
) -> dict[GVK, ByObject]:
    """Per-kind cache options for the TrainJob, the two runtime kinds and every kind the plugins watch: a
    label selector where every watch of the kind declares the same one (no selector, i.e. cache everything,
    as soon as one watch declares none), and the kind's transform (`controller.trainer.cache_transforms`:
    only what the readers read, in one shared in-memory form)."""
    transforms = transforms if transforms is not None else CacheTransforms()
    watched = _watched_kinds(registry.watches())
    options: dict[GVK, ByObject] = {}
    for gvk in (TRAINJOB, TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME, *watched):
        selectors = {w.label_selector for w in watched.get(gvk, ())}
        selector = selectors.pop() if len(selectors) == 1 and None not in selectors else None
        options[gvk] = ByObject(label_selector=selector, transform=transforms.for_kind(gvk))
    return options


def _served(client: Client, gvk: GVK) -> bool:
    return client.mapper.is_served(gvk)


def _map_to_requests(watch: Watch, reader: Reader) -> Any:
    map_fn = watch.map_to_trainjobs
    assert map_fn is not None

    def mapped(obj: Mapping[str, Any]) -> list[Request]:
        return [Request(namespace=ns, name=name) for ns, name in map_fn(obj, reader)]

    return mapped


class TrainerControllers:
    """What `setup_with_manager` registered (for tests and the entry point to look at)."""

    __slots__ = ("reader", "registry", "skipped_watches", "trainjob")

    def __init__(
        self,
        *,
        registry: RuntimeRegistry,
        reader: CacheReader,
        trainjob: TrainJobReconciler,
        skipped: list[Watch],
    ) -> None:
        self.registry = registry
        self.reader = reader
        self.trainjob = trainjob
        self.skipped_watches = skipped


def setup_with_manager(
    manager: Manager,
    registry: RuntimeRegistry,
    *,
    group_kind_concurrency: Mapping[str, int] | None = None,
) -> TrainerControllers:
    """Register the Trainer's indexes and controllers with `manager` (before it runs). See the module doc.

    The manager's cache must have been built with `cache_by_object(registry)`.
    """
    cache = manager.cache
    if not isinstance(cache, InformerCache):
        raise TypeError("the Trainer controllers need the manager's InformerCache")
    concurrency = dict(group_kind_concurrency or {})
    register_indexes(cache)

    by_object = cache_by_object(registry)
    watches = _watched_kinds(registry.watches())
    skipped: list[Watch] = []
    cached: set[GVK] = {TRAINJOB, TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME}
    active: list[tuple[GVK, Watch]] = []
    for gvk, kind_watches in watches.items():
        served = _served(manager.client, gvk)
        for watch in kind_watches:
            if not served and watch.optional:
                _log.info("watch.skipped", kind=gvk.kind, group=gvk.group, reason="CRD not installed")
                skipped.append(watch)
                continue
            if not served:
                _log.error("watch.kind_not_served", kind=gvk.kind, group=gvk.group)
            active.append((gvk, watch))
            cached.add(gvk)
    narrowed = {gvk for gvk, opts in by_object.items() if opts.label_selector}
    # Live reads (cache misses of narrowed kinds, uncached kinds) go through the API reader: token buckets of
    # their own, so a burst's snapshot look-ups do not halve the rate of its snapshot applies.
    reader = CacheReader(cache, manager.api_reader, cached=cached, narrowed=narrowed)

    applier = Applier(manager.client, field_manager=constants.FIELD_MANAGER)
    reconciler = TrainJobReconciler(
        cache=cache,
        client=manager.client,
        reader=reader,
        registry=registry,
        recorder=manager.get_event_recorder(RECORDER_NAME),
        clock=manager.clock,
        new_owner_reader=reader.trusting_misses,
        applier=applier,
    )
    # The event each apply causes is dropped: the reconcile that applied the object has read its reply.
    not_own_write = Funcs(
        create_fn=lambda event: not applier.is_own_write(event.object),
        update_fn=lambda event: not applier.is_own_write(event.object_new),
    )
    builder = ControllerBuilder(manager).named(CONTROLLER_NAME).for_(TRAINJOB)
    owned: set[GVK] = set()
    for gvk, watch in active:
        if watch.map_to_trainjobs is None:
            if gvk not in owned:
                builder.owns(gvk, not_own_write)
                owned.add(gvk)
        else:
            builder.watches(gvk, _map_to_requests(watch, reader))
    created_only = Funcs(
        update_fn=lambda event: False, delete_fn=lambda event: False, generic_fn=lambda event: False
    )
    for runtime_gvk in (TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME):
        builder.watches(runtime_gvk, _trainjobs_waiting_for(cache), created_only)
    builder.with_options(max_concurrent_reconciles=concurrency.get(concurrency_key(TRAINJOB), 1))
    builder.complete(reconciler)

    for gvk, name in (
        (TRAINING_RUNTIME, TRAINING_RUNTIME_CONTROLLER),
        (CLUSTER_TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME_CONTROLLER),
    ):
        (
            ControllerBuilder(manager)
            .named(name)
            .for_(gvk)
            .with_options(max_concurrent_reconciles=concurrency.get(concurrency_key(gvk), 1))
            .complete(RuntimeFinalizerReconciler(gvk, cache=cache, client=manager.client))
        )
    manager.add(TrainJobStateMetrics(cache))
    return TrainerControllers(registry=registry, reader=reader, trainjob=reconciler, skipped=skipped)


def _trainjobs_waiting_for(cache: InformerCache) -> Any:
    """Map a newly created runtime to the unfinished TrainJobs that reference it."""

    def mapped(runtime: Mapping[str, Any]) -> list[Request]:
        requests = []
        for trainjob in trainjobs_for_runtime(cache, runtime):
            view = TrainJobView(trainjob)
            if not view.is_finished and view.is_managed_by_trainer:
                requests.append(Request(namespace=view.namespace, name=view.name))
        return requests

    return mapped
