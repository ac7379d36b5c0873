"""The extension points: one Protocol per capability a plugin can have, each with exactly one method.

Go origin: kubeflow/trainer `pkg/runtime/framework/interface.go` (`CustomValidationPlugin`,
`WatchExtensionPlugin`, `EnforceMLPolicyPlugin`, `PodNetworkPlugin`, ...), with v2.3.0's names. Changed on
purpose: `ReconcilerBuilders()` became data (`Watch`); the Go context and client became an explicit `Reader`
argument; `TrainJobStatus.status` receives `now` (conditions need a time and plugins never read the clock);
`ComponentBuilder` has only `build`: upstream's second method, `SyncParallelCount`, copies PodSet counts
into the template's `parallelism`/`completions`, and here a PodSet count *is* that field (`runtime.info`),
so there is nothing to copy.

Contract for plugin authors (see docs/plugins.md):
- A plugin class explicitly subclasses the Protocols it implements; its class header is its capability
  list, the framework dispatches on it, and mypy checks the method signatures. A method a plugin does not
  inherit from a Protocol it listed is never called.
- `name` is the plugin's stable name (upstream's strings: `"JobSet"`, `"Torch"`, ...): configuration,
  logs and error messages use it.
- Methods are pure functions of their arguments: no network, no threads, no clock, no global state. They
  read the cluster only through the `Reader` they are given, and mutate only the `Info` they are given.
  The TrainJob and everything a `Reader` returns are read-only.
- A method reports "this TrainJob cannot be built" by raising (preferably `PhaseError`); the framework wraps
  any exception with the plugin's name and the phase. `CustomValidation` returns field errors instead.
- A plugin decides by itself whether it is active, from the policy in `Info` (e.g. Torch acts only when
  `info.ml_policy` has `torch`); plugins never look at which other plugins exist.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from runtime.api.v1alpha1 import TrainJob
    from runtime.api.v1alpha1 import TrainJobStatus as TrainJobStatusValue
    from runtime.framework.reader import Reader
    from runtime.framework.validation import Validation
    from runtime.info import Info

__all__ = [
    "ComponentBuilder",
    "CustomValidation",
    "EnforceMLPolicy",
    "EnforcePodGroupPolicy",
    "MapFunc",
    "Plugin",
    "PodNetwork",
    "TrainJobKey",
    "TrainJobStatus",
    "Watch",
    "WatchExtension",
]

TrainJobKey = tuple[str, str]
"""(namespace, name) of a TrainJob to reconcile."""

MapFunc = Callable[[Mapping[str, Any], "Reader"], Iterable[TrainJobKey]]
"""Maps an object of a watched kind to the TrainJobs to reconcile when it changes."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Watch:
    """An extra watch the TrainJob controller registers at start-up (Go: a `ReconcilerBuilder`).

    With `map_to_trainjobs` None, an event on an object enqueues the TrainJob that is its controller owner
    (Go `handler.EnqueueRequestForOwner(..., OnlyControllerOwner())`). Otherwise the function is called with
    the object and a `Reader` and returns the TrainJobs to enqueue.

    `optional` says what the controller does when the kind is not served by the API server at start-up:
    True → skip this watch (and log that the CRD is missing); False → log an error and register it anyway
    (upstream's JobSet behaviour: the watch starts working once the CRD is installed).

    `label_selector` (Kubernetes selector syntax: `key`, `key=value`, `key in (a,b)`, ...; None: every
    object) narrows the watch to matching objects: the controller sends it to the API server, so objects
    outside it are neither delivered nor cached (controller-runtime `cache.ByObject{Label: ...}`). It is
    how a plugin that watches a common kind (ConfigMaps, Secrets) keeps the controller from caching every
    object of that kind in the cluster (trainer#3374). Two consequences the controller owns:
    - It caches a kind once. When the watches of one kind disagree on the selector, it must cache what
      all of them need (no selector at all, unless it can express the union).
    - Objects outside the selector are missing from the cache but may exist (created before the label
      was set, e.g. by an older controller), so the `Reader` must not report them absent on a cache miss
      alone: see `runtime.framework.reader`.

    Watches are values: two equal declarations are one watch (`Framework.watches` drops repeats), so
    plugins that need the same watch declare it with the same (module-level) mapping function.
    """

    api_version: str
    kind: str
    map_to_trainjobs: MapFunc | None = None
    optional: bool = False
    label_selector: str | None = None

    @classmethod
    def owned(
        cls, api_version: str, kind: str, *, optional: bool = False, label_selector: str | None = None
    ) -> Watch:
        """Watch objects of a kind that TrainJobs own (as controller), optionally only labelled ones."""
        return cls(api_version=api_version, kind=kind, optional=optional, label_selector=label_selector)


class Plugin(Protocol):
    """What every plugin has: a stable name (a class attribute, e.g. `name = "Torch"`)."""

    name: str


class WatchExtension(Plugin, Protocol):
    """Declares extra watches for the TrainJob controller (run once, at start-up)."""

    def watches(self) -> Sequence[Watch]: ...


class CustomValidation(Plugin, Protocol):
    """Validates a TrainJob against its runtime in the admission webhook (`old` is None on create).

    Never raises for invalid input: return field errors. `info` is the runtime's Info before any
    Enforce phase ran.
    """

    def validate(self, info: Info, old: TrainJob | None, new: TrainJob, reader: Reader) -> Validation: ...


class EnforceMLPolicy(Plugin, Protocol):
    """Applies the runtime's `mlPolicy` to Info: PodSet counts, envs, ports, volumes, init containers.

    Pod changes that no policy drives use this phase too, as upstream's TrainJobStatus plugin does (the
    status-server wiring); registry order puts such a plugin after the ML-policy plugins.
    """

    def enforce_ml_policy(self, info: Info, trainjob: TrainJob) -> None: ...


class EnforcePodGroupPolicy(Plugin, Protocol):
    """Applies the runtime's `podGroupPolicy` to Info (scheduler pod labels and annotations).

    Runs after every EnforceMLPolicy, because those may still change PodSet counts.
    """

    def enforce_pod_group_policy(self, info: Info, trainjob: TrainJob) -> None: ...


class PodNetwork(Plugin, Protocol):
    """Gives each PodSet its pods' network identity once every count is final (`PodSet.endpoints`).

    Only the plugin that owns the template shape (JobSet) implements it. Endpoints must be lazy: a count
    may be large, and a consumer that needs them all (the MPI hostfile) iterates them.
    """

    def identify_pod_network(self, info: Info, trainjob: TrainJob) -> None: ...


class ComponentBuilder(Plugin, Protocol):
    """Returns the objects to server-side apply for this TrainJob, in apply order (maybe none).

    Each object is a complete apply body (apiVersion, kind, metadata with name, namespace and the
    TrainJob's controller ownerReference). Must not mutate `info`.

    In a reconcile `info` is computed on its first read (`runtime.info.DeferredInfo`): decide what not to
    build from the `Reader` and `info.runtime_spec` before reading anything else of it, so that a running
    TrainJob's reconcile costs no Info (docs/plugins.md, "Building objects").
    """

    def build(self, info: Info, trainjob: TrainJob, reader: Reader) -> list[dict[str, Any]]: ...


class TrainJobStatus(Plugin, Protocol):
    """Computes the TrainJob's status from the objects it owns; at most one plugin may implement it.

    Returns the new status (a fresh dict; the TrainJob's own is read-only), or None to leave it alone.
    `now` stamps conditions that change status without carrying a transition time.
    """

    def status(self, trainjob: TrainJob, reader: Reader, now: datetime) -> TrainJobStatusValue | None: ...
