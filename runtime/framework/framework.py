"""The framework: builds the registered plugins once and dispatches each phase to the ones implementing it.

Go origin: kubeflow/trainer `pkg/runtime/framework/core/framework.go` (`New`, `RunEnforceMLPolicyPlugins`,
..., `RunTrainJobStatusPlugin`).

Guarantees:
- Plugins are instantiated once, in registry order; a plugin takes part in a phase iff its class explicitly
  subclasses that phase's extension point. Within a phase plugins run in registry order.
- At most one plugin implements TrainJobStatus, checked at construction ("too many TrainJobStatus plugins
  are registered").
- `enforce` runs every `Stage.BUILD_INFO` phase in `Phase` order; the first failure aborts.
- `watches` lists each distinct `Watch` once, where it was first declared: plugins that share a watch
  (MPI and Flux their ConfigMaps and Secrets; CoScheduling and Volcano LimitRanges and RuntimeClasses)
  declare equal values, and the controller registers each once.
- Every exception a plugin raises during a reconcile phase comes out as `PluginError(plugin, phase)` chained
  to the original. `validate` never raises: a plugin that raises there becomes an `Internal error` field
  error naming the plugin.
- The framework holds no per-TrainJob state and no locks; calls for different TrainJobs may run
  concurrently as long as plugins keep the purity contract of `runtime.framework.extensions`.

Deliberately missing: field indexer set-up (the controller owns indexes; `Watch` declares what it needs).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar, cast

from runtime.framework.errors import FrameworkError, PluginConfigurationError
from runtime.framework.extensions import (
    ComponentBuilder,
    CustomValidation,
    Plugin,
    TrainJobStatus,
    Watch,
    WatchExtension,
)
from runtime.framework.phases import Phase, Stage
from runtime.framework.registry import PluginContext, PluginRegistry
from runtime.framework.validation import FieldError, Validation

if TYPE_CHECKING:
    from runtime.api.v1alpha1 import TrainJob
    from runtime.api.v1alpha1 import TrainJobStatus as TrainJobStatusValue
    from runtime.framework.reader import Reader
    from runtime.info import Info

__all__ = ["Framework", "PluginError", "implements"]

_T = TypeVar("_T")


class PluginError(FrameworkError):
    """A plugin failed in a phase; `__cause__` is what it raised. Always names the plugin and the phase."""

    def __init__(self, *, plugin: str, phase: Phase, cause: BaseException) -> None:
        super().__init__(f"plugin {plugin} failed in {phase.title}: {cause}")
        self.plugin = plugin
        self.phase = phase
        self.cause = cause


def implements(plugin: Plugin, phase: Phase) -> bool:
    """Whether the plugin's class explicitly subclasses the phase's extension point."""
    return phase.extension_point in type(plugin).__mro__


class Framework:
    """The instantiated plugins of one controller (or one `render` run), grouped by phase."""

    __slots__ = ("_by_phase", "_plugins")

    def __init__(self, registry: PluginRegistry, context: PluginContext | None = None) -> None:
        context = context or PluginContext()
        plugins: list[Plugin] = []
        for entry in registry:
            try:
                plugin = entry.factory(context)
            except Exception as exc:
                raise PluginConfigurationError(
                    f"initializing plugin {entry.name!r}: {exc}", plugin=entry.name
                ) from exc
            if getattr(plugin, "name", None) != entry.name:
                raise PluginConfigurationError(
                    f"plugin registered as {entry.name!r} calls itself {getattr(plugin, 'name', None)!r}",
                    plugin=entry.name,
                )
            plugins.append(plugin)
        self._plugins = tuple(plugins)
        self._by_phase = {phase: tuple(p for p in plugins if implements(p, phase)) for phase in Phase}
        status_plugins = self._by_phase[Phase.TRAINJOB_STATUS]
        if len(status_plugins) > 1:
            names = ", ".join(p.name for p in status_plugins)
            raise PluginConfigurationError(f"too many TrainJobStatus plugins are registered: {names}")

    @property
    def plugins(self) -> tuple[Plugin, ...]:
        """Every plugin, in registry order."""
        return self._plugins

    def plugins_for(self, phase: Phase) -> tuple[Plugin, ...]:
        """The plugins that take part in a phase, in the order they run."""
        return self._by_phase[phase]

    def _call(self, plugin: Plugin, phase: Phase, call: Callable[[], _T]) -> _T:
        try:
            return call()
        except Exception as exc:
            raise PluginError(plugin=plugin.name, phase=phase, cause=exc) from exc

    def watches(self) -> list[Watch]:
        """Every WatchExtension plugin's watches, in plugin order, each distinct watch once (first seen)."""
        found: list[Watch] = []
        for plugin in self._by_phase[Phase.WATCH_EXTENSION]:
            for watch in self._call(plugin, Phase.WATCH_EXTENSION, cast(WatchExtension, plugin).watches):
                if watch not in found:  # equality, not hashing: a mapping function need not be hashable
                    found.append(watch)
        return found

    def validate(self, info: Info, old: TrainJob | None, new: TrainJob, reader: Reader) -> Validation:
        """Every CustomValidation plugin's verdict, aggregated in plugin order. Never raises."""
        result = Validation()
        for plugin in self._by_phase[Phase.CUSTOM_VALIDATION]:
            validator = cast(CustomValidation, plugin)
            try:
                result += validator.validate(info, old, new, reader)
            except Exception as exc:  # noqa: BLE001 -- validation must answer: a crash becomes a field error
                message = f"plugin {plugin.name} failed in {Phase.CUSTOM_VALIDATION.title}: {exc}"
                result += Validation(errors=(FieldError.internal("spec", message),))
        return result

    def enforce(self, info: Info, trainjob: TrainJob) -> None:
        """Run the Info phases (`Stage.BUILD_INFO`) in `Phase` order; the first failure aborts."""
        for phase in Phase.of_stage(Stage.BUILD_INFO):
            for plugin in self._by_phase[phase]:
                method = cast("Callable[[Info, TrainJob], None]", getattr(plugin, phase.method))
                self._call(plugin, phase, partial(method, info, trainjob))

    def build(self, info: Info, trainjob: TrainJob, reader: Reader) -> list[dict[str, Any]]:
        """Every ComponentBuilder's objects, concatenated in plugin order (the apply order)."""
        objects: list[dict[str, Any]] = []
        for plugin in self._by_phase[Phase.COMPONENT_BUILDER]:
            builder = cast(ComponentBuilder, plugin)
            objects.extend(
                self._call(plugin, Phase.COMPONENT_BUILDER, partial(builder.build, info, trainjob, reader))
            )
        return objects

    def status(self, trainjob: TrainJob, reader: Reader, now: datetime) -> TrainJobStatusValue | None:
        """The TrainJobStatus plugin's status, or None without one (or when it has nothing to say)."""
        for plugin in self._by_phase[Phase.TRAINJOB_STATUS]:
            status_plugin = cast(TrainJobStatus, plugin)
            return self._call(
                plugin, Phase.TRAINJOB_STATUS, partial(status_plugin.status, trainjob, reader, now)
            )
        return None

    def __repr__(self) -> str:
        return f"<Framework plugins={[p.name for p in self._plugins]!r}>"
