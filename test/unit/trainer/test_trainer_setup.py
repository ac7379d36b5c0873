"""`controller.trainer.setup`: what the manager caches of each kind, and the registry it runs."""

from __future__ import annotations

from controller.client.gvk import GVK
from controller.trainer.cache_transforms import CacheTransforms
from controller.trainer.config import Configuration
from controller.trainer.kinds import CLUSTER_TRAINING_RUNTIME, JOBSET, TRAINING_RUNTIME, TRAINJOB
from controller.trainer.setup import cache_by_object, concurrency_key, new_registry
from runtime.features import FeatureGates

LABEL = "trainer.kubeflow.org/trainjob-name"


def test_configmaps_and_secrets_are_cached_only_with_the_trainjob_label() -> None:
    options = cache_by_object(new_registry())
    selectors = {gvk: opts.label_selector for gvk, opts in options.items()}
    assert {gvk for gvk, selector in selectors.items() if selector} == {
        GVK("", "v1", "ConfigMap"),
        GVK("", "v1", "Secret"),
    }
    assert set(selectors.values()) == {LABEL, None}


def test_every_kind_the_trainer_caches_has_its_transform() -> None:
    transforms = CacheTransforms()
    options = cache_by_object(new_registry(), transforms)
    assert {TRAINJOB, TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME, JOBSET} <= set(options)
    for gvk, opts in options.items():
        assert opts.transform == transforms.for_kind(gvk), gvk
    assert options[JOBSET].transform == transforms.jobset
    assert options[TRAINJOB].transform == transforms.trainjob


def test_the_trainjobstatus_plugin_runs_only_with_its_feature_gate() -> None:
    off = new_registry()
    on = new_registry(Configuration(feature_gates=FeatureGates({"TrainJobStatus": True})))
    assert "TrainJobStatus" not in [p.name for p in off.framework.plugins]
    assert "TrainJobStatus" in [p.name for p in on.framework.plugins]


def test_the_status_plugin_points_pods_at_the_namespace_the_manager_runs_in() -> None:
    config = Configuration(feature_gates=FeatureGates({"TrainJobStatus": True}))
    registry = new_registry(config, operator_namespace="trainer-system")
    plugin = next(p for p in registry.framework.plugins if p.name == "TrainJobStatus")
    url = plugin.settings.server_url("ns", "tj")  # type: ignore[attr-defined]
    assert url.startswith("https://kubeflow-trainer-controller-manager.trainer-system.svc:10443/")


def test_concurrency_keys_are_kind_dot_group() -> None:
    assert (
        concurrency_key(GVK("trainer.kubeflow.org", "v1alpha1", "TrainJob"))
        == "TrainJob.trainer.kubeflow.org"
    )
    assert concurrency_key(GVK("", "v1", "ConfigMap")) == "ConfigMap"
