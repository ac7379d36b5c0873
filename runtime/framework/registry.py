"""The ordered plugin registry, and third-party plugins loaded from Python entry points.

Go origin: kubeflow/trainer `pkg/runtime/framework/plugins/registry.go` (a `map[string]factory`, iterated in
random order) — here an ordered, immutable sequence, so plugin order within every phase is the same on
every run (upstream's order within a phase changes from run to run).

Guarantees:
- A registry is immutable; names are unique (a duplicate is a `PluginConfigurationError` at construction).
- `load_plugins` keeps the built-in order, then appends the enabled third-party plugins in the order the
  configuration lists them. An enabled name that no entry point provides, a third-party name that shadows a
  built-in, and a name listed twice are clear `PluginConfigurationError`s listing what is available.
- Entry points are imported only when enabled: a broken third-party package that nobody enabled cannot
  break start-up.

Deliberately missing: disabling built-in plugins (each is inert unless its policy is set in a runtime;
TrainJobStatus is added by `runtime.plugins.builtin_registry` only under its feature gate).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from runtime.framework.errors import PluginConfigurationError
from runtime.framework.extensions import Plugin

__all__ = [
    "ENTRY_POINT_GROUP",
    "EntryPointLike",
    "PluginContext",
    "PluginEntry",
    "PluginFactory",
    "PluginRegistry",
    "load_plugins",
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
    """The part of `importlib.metadata.EntryPoint` we use (tests pass fakes)."""

    @property
    def name(self) -> str: ...

    def load(self) -> Any: ...


def load_plugins(
    builtins: PluginRegistry,
    enabled: Sequence[str],
    *,
    entry_points: Iterable[EntryPointLike] | None = None,
) -> PluginRegistry:
    """The built-in plugins followed by the enabled third-party ones (configuration order).

    `entry_points` defaults to the installed distributions' `kubeflow_trainer.plugins` group.
    """
    if entry_points is None:
        entry_points = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    available = {ep.name: ep for ep in entry_points}
    extra: list[PluginEntry] = []
    for name in enabled:
        if name in builtins:
            raise PluginConfigurationError(
                f"plugin {name!r} is built in and always enabled; list only third-party plugins"
            )
        if any(entry.name == name for entry in extra):
            raise PluginConfigurationError(f"plugin {name!r} is enabled twice")
        entry_point = available.get(name)
        if entry_point is None:
            known = ", ".join(sorted(available)) or "none installed"
            raise PluginConfigurationError(
                f"unknown plugin {name!r}: no {ENTRY_POINT_GROUP!r} entry point provides it "
                f"(available: {known})"
            )
        try:
            factory = entry_point.load()
        except Exception as exc:
            raise PluginConfigurationError(f"loading plugin {name!r}: {exc}") from exc
        if not callable(factory):
            raise PluginConfigurationError(f"plugin {name!r}: entry point does not name a callable factory")
        extra.append(PluginEntry(name, factory))
    return builtins.extended(extra)
