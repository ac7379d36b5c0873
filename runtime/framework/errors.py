"""The errors the runtime pipeline raises: one base class, named by what the caller should do.

Go origin: none as types; upstream returns plain wrapped `error`s from `pkg/runtime/framework/core` and the
plugins. Here every failure the pipeline reports is a `FrameworkError`, so the controller can tell "the
pipeline said no" from a bug in its own code.

Guarantees:
- This module imports nothing of the runtime, so every layer (the `Info` model included) can derive its
  errors from `FrameworkError` without an import cycle. `PluginError`, which names a `Phase`, lives with
  the framework that raises it (`runtime.framework.framework`).
- `PluginConfigurationError` is raised only at start-up (building the framework), never per reconcile.
- Nothing here is raised by validation: validation returns `FieldError`s (`runtime.framework.validation`).

Deliberately missing: retry hints. Whether to requeue is the controller's decision; everything here except
the terminal errors of `runtime.core.errors` is worth retrying with backoff.
"""

from __future__ import annotations

__all__ = ["FrameworkError", "PhaseError", "PluginConfigurationError"]


class FrameworkError(Exception):
    """Base class of every error the runtime pipeline raises on purpose."""


class PhaseError(FrameworkError):
    """Raised by a plugin when its phase cannot complete for this TrainJob (a bad runtime, a missing object).

    The framework wraps it (like any other exception of a plugin) in a `PluginError`.
    """


class PluginConfigurationError(FrameworkError):
    """The plugin set cannot be built: an unknown or duplicate name, a failing factory, two status plugins.

    `plugin` names the plugin at fault when there is one (None for a problem of the whole set), so a caller
    can point at the configuration entry that enabled it.
    """

    def __init__(self, message: str, *, plugin: str | None = None) -> None:
        super().__init__(message)
        self.plugin = plugin
