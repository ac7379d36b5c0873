"""runtime.framework: the plugin framework that turns an `Info` into objects, status and validation verdicts.

Go origin: kubeflow/trainer `pkg/runtime/framework` (`interface.go`, `core/framework.go`,
`plugins/registry.go`).

Module map:
- `runtime.framework.extensions`: the extension points (one Protocol, one method each) and `Watch`.
- `runtime.framework.phases`: `Phase`, the ordered enum the framework runs and the docs are generated from.
- `runtime.framework.registry`: `PluginRegistry` (ordered), `PluginContext`, entry-point loading.
- `runtime.framework.framework`: `Framework`, which dispatches each phase to the plugins that implement it,
  and `PluginError`, what it raises when a plugin fails.
- `runtime.framework.reader`: the `Reader` protocol (all cluster reads) and `MemoryReader`.
- `runtime.framework.validation`: `FieldError` and `Validation` (validation returns, never raises), and
  `error_lines`, the one bounded way to report many field errors.
- `runtime.framework.errors`: `FrameworkError`, `PhaseError`, `PluginConfigurationError`.

Layering: the submodules import each other by module (never this package), `errors` and `validation`
import nothing of the runtime, and only `extensions` and `framework` name `runtime.info.Info` (for types);
the `Info` model imports nothing here but `errors`. So the package has no import cycle, and importing it
re-exports the whole surface for plugin authors.

Writing a plugin: `docs/plugins.md`.
"""

from __future__ import annotations

from runtime.framework.errors import FrameworkError, PhaseError, PluginConfigurationError
from runtime.framework.extensions import (
    ComponentBuilder,
    CustomValidation,
    EnforceMLPolicy,
    EnforcePodGroupPolicy,
    MapFunc,
    Plugin,
    PodNetwork,
    TrainJobKey,
    TrainJobStatus,
    Watch,
    WatchExtension,
)
from runtime.framework.framework import Framework, PluginError, implements
from runtime.framework.phases import Phase, Stage
from runtime.framework.reader import MemoryReader, ObjectKey, Reader, ReadError, object_key
from runtime.framework.registry import (
    ENTRY_POINT_GROUP,
    EntryPointLike,
    PluginContext,
    PluginEntry,
    PluginFactory,
    PluginLoadError,
    PluginRegistry,
    installed_entry_points,
    load_plugins,
    load_third_party,
)
from runtime.framework.validation import ErrorType, FieldError, Validation, error_lines

__all__ = [
    "ENTRY_POINT_GROUP",
    "ComponentBuilder",
    "CustomValidation",
    "EnforceMLPolicy",
    "EnforcePodGroupPolicy",
    "EntryPointLike",
    "ErrorType",
    "FieldError",
    "Framework",
    "FrameworkError",
    "MapFunc",
    "MemoryReader",
    "ObjectKey",
    "Phase",
    "PhaseError",
    "Plugin",
    "PluginConfigurationError",
    "PluginContext",
    "PluginEntry",
    "PluginError",
    "PluginFactory",
    "PluginLoadError",
    "PluginRegistry",
    "PodNetwork",
    "ReadError",
    "Reader",
    "Stage",
    "TrainJobKey",
    "TrainJobStatus",
    "Validation",
    "Watch",
    "WatchExtension",
    "error_lines",
    "implements",
    "installed_entry_points",
    "load_plugins",
    "load_third_party",
    "object_key",
]
