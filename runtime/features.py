"""The Trainer's feature gates: which exist, their defaults, and the value a Configuration carries.

The one parser of gate settings: the manager (its configuration's ``featureGates`` and ``--feature-gates``)
and ``trainer-render`` both use it, so a setting one accepts the other accepts too.

Go origin: kubeflow/trainer ``pkg/features`` (the gate table) on component-base ``featuregate`` (the
``--feature-gates k=v,...`` syntax and its errors).

Guarantees:

- :data:`KNOWN_FEATURES` is the whole table; a gate not in it is an error wherever it is named (the
  configuration's ``featureGates`` or the command line), as upstream ("unrecognized feature gate").
- :class:`FeatureGates` is a frozen value, not a process-wide registry: the entry point builds one (file,
  then flag overrides) and hands it down; nothing reads a global.
- Values on the command line are parsed as Go's ``strconv.ParseBool`` parses them (``true``, ``1``, ``t``,
  ``True``, ``TRUE``... and their false twins).

Deliberately missing: the ``AllAlpha``/``AllBeta`` pseudo-gates and locking of GA/deprecated gates (there is
only one gate, and it is alpha).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from runtime.echo import elide

__all__ = [
    "ALPHA",
    "BETA",
    "GA",
    "KNOWN_FEATURES",
    "TRAIN_JOB_STATUS",
    "FeatureGateError",
    "FeatureGates",
    "FeatureSpec",
    "parse_feature_gates",
]

ALPHA = "Alpha"
BETA = "Beta"
GA = ""  # component-base spells general availability as an empty pre-release


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureSpec:
    """One gate: its default and its maturity (``Alpha``, ``Beta`` or GA)."""

    default: bool
    pre_release: str


TRAIN_JOB_STATUS = "TrainJobStatus"
"""Serves the runtime status server and adds the ``TrainJobStatus`` plugin (pods report progress).

``runtime.plugins.TRAINJOB_STATUS_GATE`` is this name; it is defined here so that loading a configuration
does not import the plugins."""

KNOWN_FEATURES: Mapping[str, FeatureSpec] = MappingProxyType(
    {TRAIN_JOB_STATUS: FeatureSpec(default=False, pre_release=ALPHA)}
)
"""Every feature gate this controller knows, by name."""

_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


class FeatureGateError(ValueError):
    """A gate that does not exist, or a setting that is not a boolean."""


def _check_known(name: str) -> None:
    if name not in KNOWN_FEATURES:
        known = ", ".join(sorted(KNOWN_FEATURES))
        raise FeatureGateError(f"unrecognized feature gate: {elide(name)!r} (known: {known})")


def parse_feature_gates(text: str) -> dict[str, bool]:
    """``"A=true,B=false"`` → ``{"A": True, "B": False}``; blanks around items are ignored.

    Raises :class:`FeatureGateError` for an item without ``=``, a value that is not a boolean, or an
    unknown gate.
    """
    settings: dict[str, bool] = {}
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name:
            raise FeatureGateError(f"missing bool value for {elide(item)!r}: expected NAME=true|false")
        _check_known(name)
        if value in _TRUE:
            settings[name] = True
        elif value in _FALSE:
            settings[name] = False
        else:
            raise FeatureGateError(f"invalid value of {elide(f'{name}={value}')}: expected true or false")
    return settings


@dataclass(frozen=True, slots=True)
class FeatureGates:
    """The explicitly set gates; every other known gate has its default.

    Iterating yields the known gates' names; ``gates[name]`` and :meth:`enabled` give the effective value.
    """

    overrides: Mapping[str, bool] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        for name, value in self.overrides.items():
            _check_known(name)
            if not isinstance(value, bool):
                raise FeatureGateError(f"feature gate {name}: expected true or false, got {value!r}")
        object.__setattr__(self, "overrides", MappingProxyType(dict(self.overrides)))

    def enabled(self, name: str) -> bool:
        """Whether ``name`` is on; an unknown name is an error (a typo must not read as "off")."""
        _check_known(name)
        return self.overrides.get(name, KNOWN_FEATURES[name].default)

    def with_overrides(self, overrides: Mapping[str, bool]) -> FeatureGates:
        """These gates with ``overrides`` applied on top (the command line over the file)."""
        return FeatureGates({**self.overrides, **overrides})

    def enabled_set(self) -> frozenset[str]:
        """The names of the gates that are on: what ``runtime`` takes (``builtin_registry``)."""
        return frozenset(name for name in KNOWN_FEATURES if self.enabled(name))

    def __getitem__(self, name: str) -> bool:
        return self.enabled(name)

    def __iter__(self) -> Iterator[str]:
        return iter(KNOWN_FEATURES)

    def __repr__(self) -> str:
        state = ", ".join(f"{name}={self.enabled(name)}" for name in KNOWN_FEATURES)
        return f"FeatureGates({state})"
