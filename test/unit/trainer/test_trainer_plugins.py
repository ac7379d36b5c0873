"""Third-party plugins in the manager: `plugins.enabled` names entry points of `kubeflow_trainer.plugins`,
`new_registry` loads exactly those after the built-ins, and one that cannot be loaded or built is a
`ConfigurationError` at its entry of the list. One test installs the example distribution of
`test/plugins/example_plugin` with pip and enables it through the real entry-point machinery.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from controller.trainer.config import Configuration, ConfigurationError, Plugins, parse_configuration
from controller.trainer.setup import new_registry
from runtime.api.v1alpha1 import TrainJob
from runtime.api.views import TrainJobView
from runtime.core import RuntimeRegistry
from runtime.features import FeatureGates
from runtime.framework import EnforceMLPolicy, MemoryReader, PluginContext
from runtime.framework import registry as plugin_registry
from runtime.info import Info
from runtime.plugins import builtin_registry
from runtime.testing import Make
from support import example_plugin

ENV = "ACME_TRAINJOB"


class Acme(EnforceMLPolicy):
    """Gives every container the TrainJob's name in `ACME_TRAINJOB`."""

    name = "Acme"

    def __init__(self, context: PluginContext) -> None:
        self.context = context

    def enforce_ml_policy(self, info: Info, trainjob: TrainJob) -> None:
        for pod_set in info.pod_sets:
            for container in pod_set.containers:
                container.upsert_env({"name": ENV, "value": TrainJobView(trainjob).name})


class Other(Acme):
    name = "Other"


class Misnamed(Acme):
    name = "NotWhatTheEntryPointSays"


def failing_factory(context: PluginContext) -> Acme:
    raise RuntimeError("the licence server is down")


@dataclass
class FakeEntryPoint:
    name: str
    target: Any
    value: str = ""

    def load(self) -> Any:
        if isinstance(self.target, Exception):
            raise self.target
        return self.target


ENTRY_POINTS = [
    FakeEntryPoint("Acme", Acme, "acme.plugin:Acme"),
    FakeEntryPoint("Other", Other, "acme.plugin:Other"),
    FakeEntryPoint("Broken", ModuleNotFoundError("No module named 'acme_broken'"), "acme_broken:Broken"),
    FakeEntryPoint("Misnamed", Misnamed, "acme.plugin:Misnamed"),
    FakeEntryPoint("Failing", failing_factory, "acme.plugin:failing_factory"),
]
BUILTINS = builtin_registry().names


def enabling(*names: str, **changes: Any) -> Configuration:
    return Configuration(plugins=Plugins(enabled=names), **changes)


def plugin_names(registry: RuntimeRegistry) -> list[str]:
    return [p.name for p in registry.framework.plugins]


def rendered_env(registry: RuntimeRegistry, make: Make) -> list[list[dict[str, Any]]]:
    """The env of every container of the JobSet `registry` builds for a one-node TrainJob on a runtime."""
    runtime = make.runtime(
        make.runtime_spec(
            make.job("node", ancestor="trainer", containers=[make.container(image="trainer:1")]),
            ml_policy={"numNodes": 1},
        )
    )
    trainjob = make.trainjob("tj", suspend=False, trainer={"numNodes": 1})
    objects = registry.new_objects(trainjob, MemoryReader([runtime]))
    (jobset,) = [o for o in objects if o["kind"] == "JobSet"]
    return [
        container.get("env", [])
        for job in jobset["spec"]["replicatedJobs"]
        for container in job["template"]["spec"]["template"]["spec"]["containers"]
    ]


@pytest.fixture
def make() -> Make:
    return Make()


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> list[FakeEntryPoint]:
    """`ENTRY_POINTS` are what the installed distributions provide."""
    monkeypatch.setattr(plugin_registry, "installed_entry_points", lambda: tuple(ENTRY_POINTS))
    return ENTRY_POINTS


def test_the_enabled_plugins_run_after_the_built_ins_in_the_listed_order(installed: object) -> None:
    assert plugin_names(new_registry(enabling("Other", "Acme"))) == [*BUILTINS, "Other", "Acme"]


def test_without_plugins_enabled_only_the_built_ins_run_and_nothing_is_imported(installed: object) -> None:
    # "Broken" is installed and would fail to import: nobody enabled it, so nothing happens.
    assert plugin_names(new_registry()) == list(BUILTINS)
    assert plugin_names(new_registry(parse_configuration(
        "apiVersion: config.trainer.kubeflow.org/v1alpha1\nkind: Configuration\n"
    ))) == list(BUILTINS)  # fmt: skip


def test_an_enabled_plugin_changes_what_the_manager_builds(installed: object, make: Make) -> None:
    assert all(ENV not in {e["name"] for e in env} for env in rendered_env(new_registry(), make))
    enabled = rendered_env(new_registry(enabling("Acme")), make)
    assert enabled and all({"name": ENV, "value": "tj"} in env for env in enabled)


def test_the_plugins_come_after_the_gated_built_ins_too(installed: object) -> None:
    config = enabling("Acme", feature_gates=FeatureGates({"TrainJobStatus": True}))
    assert plugin_names(new_registry(config))[-2:] == ["TrainJobStatus", "Acme"]


@pytest.mark.parametrize(
    ("enabled", "field", "message"),
    [
        (
            ("Acme", "acme"),
            "plugins.enabled[1]",
            'plugins.enabled[1]: Not found: "acme": no installed distribution provides a '
            'kubeflow_trainer.plugins entry point named "acme" (installed: Acme, Broken, Failing, Misnamed, '
            "Other)",
        ),
        (
            ("Broken",),
            "plugins.enabled[0]",
            'plugins.enabled[0]: Invalid value: "Broken": loading "acme_broken:Broken": '
            "ModuleNotFoundError: No module named 'acme_broken'",
        ),
        (
            ("Acme", "Acme"),
            "plugins.enabled[1]",
            'plugins.enabled[1]: Duplicate value: "Acme"',
        ),
        (
            ("Torch",),
            "plugins.enabled[0]",
            'plugins.enabled[0]: Invalid value: "Torch": a built-in plugin, always registered: '
            "list only third-party ones",
        ),
        (
            ("TrainJobStatus",),  # gated off here; the gate enables it, not this list
            "plugins.enabled[0]",
            'plugins.enabled[0]: Invalid value: "TrainJobStatus": a built-in plugin, always registered: '
            "list only third-party ones",
        ),
        (
            ("Acme", "Failing"),
            "plugins.enabled[1]",
            "plugins.enabled[1]: initializing plugin 'Failing': the licence server is down",
        ),
        (
            ("Misnamed",),
            "plugins.enabled[0]",
            "plugins.enabled[0]: plugin registered as 'Misnamed' calls itself 'NotWhatTheEntryPointSays'",
        ),
    ],
    ids=[
        "an unknown name",
        "an entry point that fails to import",
        "a name listed twice",
        "a built-in's name",
        "a gated built-in's name",
        "a factory that fails",
        "a plugin that calls itself otherwise",
    ],
)
def test_a_plugin_that_cannot_be_loaded_or_built_is_a_configuration_error_at_its_entry(
    installed: object, enabled: tuple[str, ...], field: str, message: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        new_registry(enabling(*enabled))
    assert caught.value.field == field
    assert str(caught.value) == f"invalid configuration: {message}"


def test_every_bad_entry_is_reported_at_once(installed: object) -> None:
    with pytest.raises(ConfigurationError) as caught:
        new_registry(enabling("nope", "Acme", "Broken"))
    assert [e.path for e in caught.value.errors] == ["plugins.enabled[0]", "plugins.enabled[2]"]


def test_with_nothing_installed_the_error_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plugin_registry, "installed_entry_points", lambda: ())
    with pytest.raises(ConfigurationError, match=r"entry point named \"Acme\" \(installed: none\)$"):
        new_registry(enabling("Acme"))


def test_the_example_distribution_installed_with_pip_is_enabled_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make: Make
) -> None:
    """The path a user takes: pip installs the distribution (its entry point in its metadata), the
    Configuration names the plugin, the manager's objects carry its effect."""
    target = example_plugin.pip_install(tmp_path)
    monkeypatch.syspath_prepend(str(target))
    # The real look-up: importlib.metadata finds the distribution on sys.path.
    assert "Example" in {ep.name for ep in plugin_registry.installed_entry_points()}

    registry = new_registry(enabling("Example"))
    assert plugin_names(registry) == [*BUILTINS, "Example"]
    env = rendered_env(registry, make)
    assert env and all({"name": "EXAMPLE_PLUGIN_TRAINJOB", "value": "tj"} in e for e in env)
    assert all(
        "EXAMPLE_PLUGIN_TRAINJOB" not in {e["name"] for e in env}
        for env in rendered_env(new_registry(), make)
    )
