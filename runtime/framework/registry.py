"""The ordered plugin registry, and third-party plugins loaded from Python entry points.

Go origin: kubeflow/trainer `pkg/runtime/framework/plugins/registry.go` (a `map[string]factory`, iterated in
random order) — here an ordered, immutable sequence, so plugin order within every phase is the same on
every run (upstream's order within a phase changes from run to run).

Guarantees:
- A registry is immutable; names are unique (a duplicate is a `PluginConfigurationError` at construction).
- `load_plugins` keeps the built-in order, then appends the enabled third-party plugins in the order the
  configuration lists them. `load_third_party` is the one loader (the manager's `plugins.enabled` and
  `trainer-render --plugins` both use it): every bad entry of the list (a name no installed distribution
  provides, one two distributions provide, a built-in's name, a name listed twice, an entry point that fails
  to import, names no callable or a class that subclasses no extension point) is a field error at its
  index, all reported at once in a `PluginLoadError`
  (`plugins.enabled[1]: Not found: "acme": no installed distribution provides ...`, then the installed
  names).
- Entry points are imported only when enabled: a broken third-party package that nobody enabled cannot
  break start-up.

Deliberately missing: disabling built-in plugins (each is inert unless its policy is set in a runtime;
TrainJobStatus is added by `runtime.plugins.builtin_registry` only under its feature gate).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from runtime.echo import quote
from runtime.framework.errors import PluginConfigurationError
from runtime.framework.extensions import Plugin
from runtime.framework.phases import Phase
from runtime.framework.validation import ErrorType, FieldError

__all__ = [
    "ENTRY_POINT_GROUP",
    "EntryPointLike",
    "PluginContext",
    "PluginEntry",
    "PluginFactory",
    "PluginLoadError",
    "PluginRegistry",
    "installed_entry_points",
    "load_plugins",
    "load_third_party",
]

ENTRY_POINT_GROUP = "kubeflow_trainer.plugins"
"""The Python entry-point group third-party plugins register under (name = plugin name, value = factory)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PluginContext:
    """What a plugin factory receives at start-up.

    `config` is the operator's configuration as loaded (read-only), for plugins that need settings such as
    the status server's address; `feature_gates` the enabled feature gates.
    """

    config: Mapping[str, Any] = field(default_factory=dict)
    feature_gates: frozenset[str] = frozenset()


PluginFactory = Callable[[PluginContext], Plugin]
"""Builds one plugin instance; a plugin class whose constructor takes the context is a factory."""


@dataclass(frozen=True, slots=True)
class PluginEntry:
    """A named plugin factory."""

    name: str
    factory: PluginFactory


class PluginRegistry:
    """An ordered, immutable sequence of named plugin factories."""

    __slots__ = ("_entries",)

    def __init__(self, entries: Iterable[PluginEntry] = ()) -> None:
        entries = tuple(entries)
        seen: set[str] = set()
        for entry in entries:
            if not entry.name:
                raise PluginConfigurationError("a plugin name must not be empty")
            if entry.name in seen:
                raise PluginConfigurationError(f"plugin {entry.name!r} is registered twice")
            seen.add(entry.name)
        self._entries = entries

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(entry.name for entry in self._entries)

    def __iter__(self) -> Iterator[PluginEntry]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return any(entry.name == name for entry in self._entries)

    def extended(self, entries: Iterable[PluginEntry]) -> PluginRegistry:
        """A new registry: these entries, then the given ones."""
        return PluginRegistry((*self._entries, *entries))

    def __repr__(self) -> str:
        return f"PluginRegistry({list(self.names)!r})"


class EntryPointLike(Protocol):
    """The part of `importlib.metadata.EntryPoint` we use (tests pass fakes; `value` and `dist`, when
    present, only make error messages more precise)."""

    @property
    def name(self) -> str: ...

    def load(self) -> Any: ...


class PluginLoadError(PluginConfigurationError):
    """The enabled third-party plugins cannot be loaded. `errors` holds one field error per bad entry of the
    list, at its path (`plugins.enabled[1]`); the message is their lines joined by `; `."""

    def __init__(self, errors: Sequence[FieldError]) -> None:
        super().__init__("; ".join(map(str, errors)))
        self.errors = tuple(errors)


def installed_entry_points() -> tuple[EntryPointLike, ...]:
    """The `kubeflow_trainer.plugins` entry points of the installed distributions (not loaded)."""
    return tuple(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


def _origin(entry_point: EntryPointLike) -> str:
    """`"acme_trainer.plugin:Acme" (acme-trainer 1.0)`, as much of it as the entry point knows."""
    value = getattr(entry_point, "value", None)
    text = f'"{value}"' if value else "the entry point"
    dist = getattr(entry_point, "dist", None)
    if dist is not None:
        text += f" ({getattr(dist, 'name', '?')} {getattr(dist, 'version', '?')})"
    return text


def load_third_party(
    enabled: Sequence[str],
    *,
    builtins: Container[str] = (),
    path: str = "plugins.enabled",
    entry_points: Iterable[EntryPointLike] | None = None,
) -> tuple[PluginEntry, ...]:
    """The plugins `enabled` names, loaded from their entry points, in that order.

    `path` is where the list was written (`plugins.enabled` in the manager's Configuration, `--plugins` in
    `trainer-render`); every problem is reported at once as a `PluginLoadError` with a field error at
    `path[i]`: a name no installed distribution provides (the message lists the installed ones), a name
    that two distributions provide, a built-in's name, a name listed twice, an entry point that fails to
    import, one that names no callable, a class that subclasses no extension point (a factory that is not a
    class is checked when the `Framework` calls it). `entry_points` defaults to `installed_entry_points()`;
    only the enabled ones are imported.
    """
    if entry_points is None:
        entry_points = installed_entry_points()
    available: dict[str, list[EntryPointLike]] = {}
    for entry_point in entry_points:
        available.setdefault(entry_point.name, []).append(entry_point)
    installed = ", ".join(sorted(available)) or "none"
    errors: list[FieldError] = []
    loaded: list[PluginEntry] = []
    for i, name in enumerate(enabled):
        at = f"{path}[{i}]"
        if name in builtins:
            errors.append(
                FieldError.invalid(
                    at, name, "a built-in plugin, always registered: list only third-party ones"
                )
            )
            continue
        if name in enabled[:i]:
            errors.append(FieldError(path=at, type=ErrorType.DUPLICATE, value=name, message=""))
            continue
        candidates = available.get(name, [])
        if not candidates:
            errors.append(
                FieldError(
                    path=at,
                    type=ErrorType.NOT_FOUND,
                    value=name,
                    message=f"no installed distribution provides a {ENTRY_POINT_GROUP} entry point named "
                    f"{quote(name)} (installed: {installed})",
                )
            )
            continue
        if len(candidates) > 1:
            origins = ", ".join(map(_origin, candidates))
            errors.append(FieldError.invalid(at, name, f"provided by more than one entry point: {origins}"))
            continue
        (entry_point,) = candidates
        try:
            factory = entry_point.load()
        except Exception as exc:  # noqa: BLE001 - ImportError, or whatever the module raises: reported
            errors.append(
                FieldError.invalid(at, name, f"loading {_origin(entry_point)}: {type(exc).__name__}: {exc}")
            )
            continue
        if not callable(factory):
            errors.append(
                FieldError.invalid(
                    at,
                    name,
                    f"{_origin(entry_point)} names a value of type {type(factory).__name__}, not a plugin "
                    "factory (a callable taking a PluginContext, such as a plugin class)",
                )
            )
            continue
        if isinstance(factory, type) and not any(p.extension_point in factory.__mro__ for p in Phase):
            points = ", ".join(dict.fromkeys(p.extension_point.__name__ for p in Phase))
            errors.append(
                FieldError.invalid(
                    at,
                    name,
                    f"{_origin(entry_point)} is not a plugin: the class {factory.__qualname__} subclasses "
                    f"no extension point ({points}), so it would never run",
                )
            )
            continue
        loaded.append(PluginEntry(name, factory))
    if errors:
        raise PluginLoadError(errors)
    return tuple(loaded)


def load_plugins(
    builtins: PluginRegistry,
    enabled: Sequence[str],
    *,
    path: str = "plugins.enabled",
    entry_points: Iterable[EntryPointLike] | None = None,
) -> PluginRegistry:
    """The built-in plugins followed by the enabled third-party ones (in `enabled` order); raises
    `PluginLoadError` as `load_third_party` does."""
    return builtins.extended(
        load_third_party(enabled, builtins=builtins, path=path, entry_points=entry_points)
    )
