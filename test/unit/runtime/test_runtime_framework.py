"""The framework: dispatch by declared capability, deterministic order, error wrapping, plugin loading."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest

from runtime.api.v1alpha1 import TrainJob
from runtime.api.v1alpha1 import TrainJobStatus as TrainJobStatusValue
from runtime.framework import (
    ComponentBuilder,
    CustomValidation,
    EnforceMLPolicy,
    EnforcePodGroupPolicy,
    FieldError,
    Framework,
    MemoryReader,
    Phase,
    PhaseError,
    PluginConfigurationError,
    PluginContext,
    PluginEntry,
    PluginError,
    PluginLoadError,
    PluginRegistry,
    PodNetwork,
    Reader,
    Stage,
    TrainJobStatus,
    Validation,
    Watch,
    WatchExtension,
    load_plugins,
    load_third_party,
)
from runtime.info import Info, build_info
from runtime.plugins import BUILTIN_ORDER, builtin_registry

_READER = MemoryReader()
_NOW = datetime(2026, 1, 1)


def _info() -> Info:
    trainjob: TrainJob = {
        "metadata": {"name": "tj", "namespace": "ns"},
        "spec": {"runtimeRef": {"name": "rt"}},
    }
    return build_info(trainjob, {"template": {"spec": {"replicatedJobs": []}}})


class Recorder:
    """Plugins append (name, phase) to a shared list -- the list is the state of the world we assert on."""

    def __init__(self, log: list[tuple[str, str]], name: str) -> None:
        self.log = log
        self.name = name


class Everything(
    Recorder,
    WatchExtension,
    CustomValidation,
    EnforceMLPolicy,
    EnforcePodGroupPolicy,
    PodNetwork,
    ComponentBuilder,
):
    def watches(self) -> Sequence[Watch]:
        return [Watch.owned("v1", f"Kind{self.name}")]

    def validate(self, info: Info, old: TrainJob | None, new: TrainJob, reader: Reader) -> Validation:
        return Validation.of([FieldError.invalid("spec", None, self.name)], [f"warning from {self.name}"])

    def enforce_ml_policy(self, info: Info, trainjob: TrainJob) -> None:
        self.log.append((self.name, "EnforceMLPolicy"))

    def enforce_pod_group_policy(self, info: Info, trainjob: TrainJob) -> None:
        self.log.append((self.name, "EnforcePodGroupPolicy"))

    def identify_pod_network(self, info: Info, trainjob: TrainJob) -> None:
        self.log.append((self.name, "PodNetwork"))

    def build(self, info: Info, trainjob: TrainJob, reader: Reader) -> list[dict[str, Any]]:
        return [{"kind": "Thing", "metadata": {"name": self.name}}]


class Status(Recorder, TrainJobStatus):
    def status(self, trainjob: TrainJob, reader: Reader, now: datetime) -> TrainJobStatusValue | None:
        return {"jobsStatus": []}


class Undeclared(Recorder):
    """Has an enforce method but does not subclass EnforceMLPolicy: the framework must never call it."""

    def enforce_ml_policy(self, info: Info, trainjob: TrainJob) -> None:
        self.log.append((self.name, "EnforceMLPolicy"))


def _registry(log: list[tuple[str, str]], *plugins: tuple[str, type[Recorder]]) -> PluginRegistry:
    return PluginRegistry(PluginEntry(name, lambda ctx, n=name, c=cls: c(log, n)) for name, cls in plugins)


def test_phases_are_declared_in_execution_order() -> None:
    assert [p.title for p in Phase] == [
        "WatchExtension",
        "CustomValidation",
        "EnforceMLPolicy",
        "EnforcePodGroupPolicy",
        "PodNetwork",
        "ComponentBuilder",
        "TrainJobStatus",
    ]
    assert Phase.of_stage(Stage.BUILD_INFO) == (
        Phase.ENFORCE_ML_POLICY,
        Phase.ENFORCE_POD_GROUP_POLICY,
        Phase.POD_NETWORK,
    )
    for phase in Phase:
        assert hasattr(phase.extension_point, phase.method)


def test_enforce_runs_phase_by_phase_and_plugins_in_registry_order() -> None:
    log: list[tuple[str, str]] = []
    framework = Framework(_registry(log, ("B", Everything), ("A", Everything)))
    framework.enforce(_info(), {})
    assert log == [
        ("B", "EnforceMLPolicy"),
        ("A", "EnforceMLPolicy"),
        ("B", "EnforcePodGroupPolicy"),
        ("A", "EnforcePodGroupPolicy"),
        ("B", "PodNetwork"),
        ("A", "PodNetwork"),
    ]


def test_a_plugin_takes_part_only_in_the_phases_it_declares() -> None:
    log: list[tuple[str, str]] = []
    framework = Framework(_registry(log, ("U", Undeclared), ("S", Status)))
    framework.enforce(_info(), {})
    assert log == []
    assert [p.name for p in framework.plugins_for(Phase.TRAINJOB_STATUS)] == ["S"]
    assert framework.plugins_for(Phase.ENFORCE_ML_POLICY) == ()


def test_build_concatenates_objects_in_plugin_order_and_validation_aggregates() -> None:
    framework = Framework(_registry([], ("first", Everything), ("second", Everything)))
    assert [o["metadata"]["name"] for o in framework.build(_info(), {}, _READER)] == ["first", "second"]
    result = framework.validate(_info(), None, {}, _READER)
    assert [e.message for e in result.errors] == ["first", "second"]
    assert result.warnings == ("warning from first", "warning from second")
    assert [w.kind for w in framework.watches()] == ["Kindfirst", "Kindsecond"]


def _map_nothing(obj: Any, reader: Reader) -> list[tuple[str, str]]:
    return []


class Watcher(Recorder, WatchExtension):
    """Declares the watches its name lists: `a` (owned), `b` (mapped), `c` (owned, labelled only)."""

    def watches(self) -> Sequence[Watch]:
        declared = {
            "a": Watch.owned("v1", "A"),
            "b": Watch(api_version="v1", kind="B", map_to_trainjobs=_map_nothing),
            "c": Watch.owned("v1", "C", label_selector="owned-by"),
        }
        return [declared[letter] for letter in self.name.split("-")[0]]


def test_watches_drop_repeated_declarations_and_keep_the_first_seen_order() -> None:
    framework = Framework(_registry([], ("cb-1", Watcher), ("bca-2", Watcher), ("a-3", Watcher)))
    assert framework.watches() == [
        Watch.owned("v1", "C", label_selector="owned-by"),
        Watch(api_version="v1", kind="B", map_to_trainjobs=_map_nothing),
        Watch.owned("v1", "A"),
    ]


def test_watches_of_one_kind_that_differ_are_all_kept() -> None:
    # Not repeats: the controller must reconcile them (e.g. cache the kind without a selector).
    class Mixed(Recorder, WatchExtension):
        def watches(self) -> Sequence[Watch]:
            return [
                Watch.owned("v1", "ConfigMap", label_selector="owned-by"),
                Watch.owned("v1", "ConfigMap"),
                Watch.owned("v1", "ConfigMap", optional=True),
            ]

    assert len(Framework(_registry([], ("m", Mixed))).watches()) == 3


def test_the_builtin_plugins_shared_watches_are_declared_once() -> None:
    # MPI and Flux share the ConfigMap/Secret watches; CoScheduling and Volcano LimitRange/RuntimeClass ones.
    watches = Framework(builtin_registry()).watches()
    assert [(w.kind, w.api_version, w.label_selector) for w in watches] == [
        ("JobSet", "jobset.x-k8s.io/v1alpha2", None),
        ("ConfigMap", "v1", "trainer.kubeflow.org/trainjob-name"),
        ("Secret", "v1", "trainer.kubeflow.org/trainjob-name"),
        ("PodGroup", "scheduling.x-k8s.io/v1alpha1", None),
        ("LimitRange", "v1", None),
        ("RuntimeClass", "node.k8s.io/v1", None),
        ("PodGroup", "scheduling.volcano.sh/v1beta1", None),
    ]


def test_at_most_one_status_plugin_is_allowed_at_start_up() -> None:
    with pytest.raises(
        PluginConfigurationError, match="too many TrainJobStatus plugins are registered: S1, S2"
    ):
        Framework(_registry([], ("S1", Status), ("S2", Status)))


def test_status_without_a_status_plugin_is_none() -> None:
    assert Framework(PluginRegistry()).status({}, _READER, _NOW) is None
    assert Framework(_registry([], ("S", Status))).status({}, _READER, _NOW) == {"jobsStatus": []}


class Failing(Recorder, EnforceMLPolicy, CustomValidation, ComponentBuilder):
    def enforce_ml_policy(self, info: Info, trainjob: TrainJob) -> None:
        raise PhaseError("no trainer job")

    def validate(self, info: Info, old: TrainJob | None, new: TrainJob, reader: Reader) -> Validation:
        raise KeyError("oops")

    def build(self, info: Info, trainjob: TrainJob, reader: Reader) -> list[dict[str, Any]]:
        raise ValueError("bad template")


def test_a_plugin_exception_is_wrapped_with_plugin_and_phase() -> None:
    framework = Framework(_registry([], ("Failing", Failing)))
    with pytest.raises(PluginError) as enforce:
        framework.enforce(_info(), {})
    assert (enforce.value.plugin, enforce.value.phase) == ("Failing", Phase.ENFORCE_ML_POLICY)
    assert str(enforce.value) == "plugin Failing failed in EnforceMLPolicy: no trainer job"
    assert isinstance(enforce.value.__cause__, PhaseError)
    with pytest.raises(PluginError, match="plugin Failing failed in ComponentBuilder: bad template") as build:
        framework.build(_info(), {}, _READER)
    assert isinstance(build.value.__cause__, ValueError)


def test_validation_never_raises_a_crashing_plugin_becomes_an_internal_error() -> None:
    result = Framework(_registry([], ("Failing", Failing))).validate(_info(), None, {}, _READER)
    assert [str(e) for e in result.errors] == [
        "spec: Internal error: plugin Failing failed in CustomValidation: 'oops'"
    ]


def test_a_failing_factory_or_a_misnamed_plugin_fails_start_up() -> None:
    def broken(context: PluginContext) -> Any:
        raise RuntimeError("no config")

    with pytest.raises(PluginConfigurationError, match="initializing plugin 'Broken': no config"):
        Framework(PluginRegistry([PluginEntry("Broken", broken)]))
    with pytest.raises(PluginConfigurationError, match="registered as 'Alias' calls itself 'Real'"):
        Framework(PluginRegistry([PluginEntry("Alias", lambda ctx: Status([], "Real"))]))


def test_registry_names_are_unique() -> None:
    with pytest.raises(PluginConfigurationError, match="registered twice"):
        PluginRegistry([PluginEntry("A", Status), PluginEntry("A", Status)])


# Built-ins and entry points -------------------------------------------------------------------------------


def test_built_in_plugins_follow_the_fixed_order() -> None:
    # Upstream: Go map order was random; ours is this list, in every phase.
    assert BUILTIN_ORDER == (
        "JobSet",
        "PlainML",
        "Torch",
        "MPI",
        "JAX",
        "XGBoost",
        "Flux",
        "CoScheduling",
        "Volcano",
        "TrainJobStatus",
    )
    names = builtin_registry(frozenset({"TrainJobStatus"})).names
    assert list(names) == [n for n in BUILTIN_ORDER if n in names]
    assert {"JobSet", "PlainML", "Torch"} <= set(names)
    assert "TrainJobStatus" not in builtin_registry().names


def test_the_jobset_plugin_is_the_one_status_plugin_of_the_built_ins() -> None:
    framework = Framework(builtin_registry())
    assert [p.name for p in framework.plugins_for(Phase.TRAINJOB_STATUS)] == ["JobSet"]
    # JobSet names the pods; MPI, after it, checks that their hostfile fits a ConfigMap.
    assert [p.name for p in framework.plugins_for(Phase.POD_NETWORK)] == ["JobSet", "MPI"]


@dataclass
class FakeEntryPoint:
    name: str
    target: Any

    def load(self) -> Any:
        if isinstance(self.target, Exception):
            raise self.target
        return self.target


class ThirdParty(EnforceMLPolicy):
    name = "Acme"

    def __init__(self, context: PluginContext) -> None:
        self.context = context

    def enforce_ml_policy(self, info: Info, trainjob: TrainJob) -> None:
        info.labels["acme.io/touched"] = "yes"


def test_enabled_third_party_plugins_run_after_the_built_ins() -> None:
    entry_points = [FakeEntryPoint("Acme", ThirdParty), FakeEntryPoint("Unused", ImportError("not loaded"))]
    registry = load_plugins(builtin_registry(), ["Acme"], entry_points=entry_points)
    assert registry.names[-1] == "Acme"
    assert registry.names[:-1] == builtin_registry().names
    framework = Framework(registry, PluginContext(config={"acme": 1}))
    info = _info()
    framework.enforce(info, {"metadata": {"name": "tj"}, "spec": {}})
    assert info.labels == {"acme.io/touched": "yes"}


class NoExtensionPoint:
    """Has a name and a method an extension point declares, but subclasses none: it would never run."""

    name = "Idle"

    def __init__(self, context: PluginContext) -> None:
        pass

    def enforce_ml_policy(self, info: Info, trainjob: TrainJob) -> None:
        pass


@dataclass
class FakeDistribution:
    name: str
    version: str


@dataclass
class DescribedEntryPoint(FakeEntryPoint):
    """An entry point with the `value` and `dist` of `importlib.metadata.EntryPoint`."""

    value: str = ""
    dist: FakeDistribution | None = None


_ENTRY_POINTS = [
    FakeEntryPoint("Acme", ThirdParty),
    FakeEntryPoint("Broken", ImportError("cannot import")),
    DescribedEntryPoint("Idle", NoExtensionPoint, "idle.plugin:Idle", FakeDistribution("idle", "1.0")),
    DescribedEntryPoint("Constant", 42, "acme.plugin:CONSTANT"),
    DescribedEntryPoint("Twice", ThirdParty, "one:Twice", FakeDistribution("one", "1")),
    DescribedEntryPoint("Twice", ThirdParty, "two:Twice", FakeDistribution("two", "2")),
]


@pytest.mark.parametrize(
    ("enabled", "message"),
    [
        (
            ["Acme", "Nope"],
            'plugins.enabled[1]: Not found: "Nope": no installed distribution provides a '
            'kubeflow_trainer.plugins entry point named "Nope" '
            "(installed: Acme, Broken, Constant, Idle, Twice)",
        ),
        (
            ["Torch"],
            'plugins.enabled[0]: Invalid value: "Torch": a built-in plugin, always registered: '
            "list only third-party ones",
        ),
        (["Acme", "Acme"], 'plugins.enabled[1]: Duplicate value: "Acme"'),
        (
            ["Broken"],
            'plugins.enabled[0]: Invalid value: "Broken": loading the entry point: '
            "ImportError: cannot import",
        ),
        (
            ["Constant"],
            'plugins.enabled[0]: Invalid value: "Constant": "acme.plugin:CONSTANT" names a value of type '
            "int, not a plugin factory (a callable taking a PluginContext, such as a plugin class)",
        ),
        (
            ["Idle"],
            'plugins.enabled[0]: Invalid value: "Idle": "idle.plugin:Idle" (idle 1.0) is not a plugin: '
            "the class NoExtensionPoint subclasses no extension point (WatchExtension, CustomValidation, "
            "EnforceMLPolicy, EnforcePodGroupPolicy, PodNetwork, ComponentBuilder, TrainJobStatus), so it "
            "would never run",
        ),
        (
            ["Twice"],
            'plugins.enabled[0]: Invalid value: "Twice": provided by more than one entry point: '
            '"one:Twice" (one 1), "two:Twice" (two 2)',
        ),
    ],
)
def test_bad_plugin_configuration_is_a_clear_error_at_the_entry_of_the_list(
    enabled: list[str], message: str
) -> None:
    with pytest.raises(PluginLoadError) as caught:
        load_plugins(builtin_registry(), enabled, entry_points=_ENTRY_POINTS)
    assert str(caught.value) == message
    assert [str(e) for e in caught.value.errors] == [message]


def test_every_bad_entry_is_reported_at_once_at_the_path_given() -> None:
    with pytest.raises(PluginLoadError) as caught:
        load_third_party(["Nope", "Acme", "Torch"], builtins={"Torch"}, path="--plugins", entry_points=[])
    assert [e.path for e in caught.value.errors] == ["--plugins[0]", "--plugins[1]", "--plugins[2]"]
    assert "(installed: none)" in str(caught.value)


def test_only_the_enabled_entry_points_are_imported() -> None:
    # "Broken" is installed but not enabled: its import error never surfaces.
    assert [e.name for e in load_third_party(["Acme"], entry_points=_ENTRY_POINTS)] == ["Acme"]
    assert load_third_party([], entry_points=_ENTRY_POINTS) == ()


def test_installed_entry_points_are_read_by_default() -> None:
    # Nothing is installed under the group in this repository: enabling nothing always works.
    assert load_plugins(builtin_registry(), []).names == builtin_registry().names


def test_field_errors_print_like_go() -> None:
    assert str(FieldError.invalid("spec.trainer.env", [{"name": "A"}], "bad")) == (
        'spec.trainer.env: Invalid value: [{"name":"A"}]: bad'
    )
    assert (
        str(FieldError.invalid("spec.runtimeRef.name", "x", "bad"))
        == 'spec.runtimeRef.name: Invalid value: "x": bad'
    )
    assert (
        str(FieldError.invalid("spec.trainer.numNodes", 0, "bad"))
        == "spec.trainer.numNodes: Invalid value: 0: bad"
    )
    assert str(FieldError.forbidden("spec.runtimePatches", "no")) == "spec.runtimePatches: Forbidden: no"
    assert str(FieldError.required("spec.x", "")) == "spec.x: Required value"
    assert str(FieldError.invalid("spec.x", None, "gone")) == "spec.x: Invalid value: null: gone"
