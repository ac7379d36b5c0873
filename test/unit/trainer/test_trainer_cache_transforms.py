"""`controller.trainer.cache_transforms`: what the cache keeps of each kind the Trainer reads."""

from __future__ import annotations

from typing import Any

import orjson

from controller.client.gvk import GVK
from controller.trainer.cache_transforms import LAST_APPLIED_ANNOTATION, CacheTransforms
from controller.trainer.kinds import CONFIGMAP, JOBSET, SECRET, TRAINJOB

OWNER = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "name": "tj",
    "uid": "u-1",
    "controller": True,
}
MANAGED = [{"manager": "trainer", "operation": "Apply", "fieldsV1": {"f:spec": {}}}]


def _wire(obj: dict[str, Any]) -> Any:
    """As the informer gets it: freshly decoded."""
    return orjson.loads(orjson.dumps(obj))


def _jobset(suspend: bool | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {}}}}}],
        "volumeClaimPolicies": [{"templates": [{"metadata": {"name": "data"}}], "retentionPolicy": {}}],
    }
    if suspend is not None:
        spec["suspend"] = suspend
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "tj", "namespace": "ns", "ownerReferences": [OWNER], "managedFields": MANAGED},
        "spec": spec,
        "status": {"replicatedJobsStatus": [{"name": "node", "active": 2}]},
    }


def test_a_running_jobset_keeps_metadata_status_suspend_and_its_volume_claim_policies() -> None:
    transforms = CacheTransforms()
    for suspend in (None, False):
        source = _jobset(suspend)
        cached = transforms.jobset(_wire(source))
        kept = {k: v for k, v in source["spec"].items() if k != "replicatedJobs"}
        assert cached["spec"] == kept
        assert cached["status"] == source["status"]
        assert cached["metadata"] == {k: v for k, v in source["metadata"].items() if k != "managedFields"}


def test_a_suspended_jobset_is_kept_whole() -> None:
    source = _jobset(True)
    cached = CacheTransforms().jobset(_wire(source))
    del source["metadata"]["managedFields"]
    assert cached == source


def test_a_secret_a_trainjob_controls_keeps_no_keys_and_any_other_secret_keeps_its_data() -> None:
    transforms = CacheTransforms()
    data = {"ssh-privatekey": "cHJpdmF0ZQ==", "ssh-publickey": "cHVibGlj"}
    owned = {"kind": "Secret", "metadata": {"name": "tj-mpi-ssh", "ownerReferences": [OWNER]}, "data": data}
    cached = transforms.secret(_wire({**owned, "stringData": {"x": "y"}}))
    assert "data" not in cached and "stringData" not in cached
    assert cached["metadata"]["name"] == "tj-mpi-ssh"
    for metadata in (
        {"name": "ca"},
        {"name": "ca", "ownerReferences": [{**OWNER, "controller": False}]},
        {"name": "ca", "ownerReferences": [{**OWNER, "kind": "Deployment", "apiVersion": "apps/v1"}]},
    ):
        cached = transforms.secret(_wire({"kind": "Secret", "metadata": metadata, "data": data}))
        assert cached["data"] == data


def test_a_trainjob_keeps_everything_but_kubectls_last_applied_copy_and_managed_fields() -> None:
    source = {
        "kind": "TrainJob",
        "metadata": {
            "name": "tj",
            "annotations": {LAST_APPLIED_ANNOTATION: '{"kind":"TrainJob"}', "team": "vision"},
            "managedFields": MANAGED,
        },
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
        "status": {"conditions": []},
    }
    cached = CacheTransforms().trainjob(_wire(source))
    assert cached["metadata"] == {"name": "tj", "annotations": {"team": "vision"}}
    assert cached["spec"] == source["spec"] and cached["status"] == source["status"]
    only_last_applied = _wire({"metadata": {"name": "a", "annotations": {LAST_APPLIED_ANNOTATION: "{}"}}})
    assert CacheTransforms().trainjob(only_last_applied)["metadata"] == {"name": "a"}


def test_equal_snapshots_of_two_trainjobs_share_one_string() -> None:
    transforms = CacheTransforms()
    text = "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: ClusterTrainingRuntime\n" + "x: y\n" * 400
    a = transforms.configmap(_wire({"metadata": {"name": "a-snapshot"}, "data": {"runtime": text}}))
    b = transforms.configmap(_wire({"metadata": {"name": "b-snapshot"}, "data": {"runtime": text}}))
    assert a["data"]["runtime"] == text
    assert a["data"]["runtime"] is b["data"]["runtime"]


def test_each_kind_gets_its_own_transform_and_any_other_the_default() -> None:
    transforms = CacheTransforms()
    assert transforms.for_kind(JOBSET) == transforms.jobset
    assert transforms.for_kind(TRAINJOB) == transforms.trainjob
    assert transforms.for_kind(SECRET) == transforms.secret
    assert transforms.for_kind(CONFIGMAP) == transforms.configmap
    other = GVK("scheduling.x-k8s.io", "v1alpha1", "PodGroup")
    assert transforms.for_kind(other) == transforms.default
    pod_group = {"metadata": {"name": "tj", "managedFields": MANAGED}, "spec": {"minMember": 2}}
    assert transforms.default(_wire(pod_group)) == {"metadata": {"name": "tj"}, "spec": {"minMember": 2}}


def test_anything_that_is_not_an_object_passes_through() -> None:
    transforms = CacheTransforms()
    for transform in (transforms.trainjob, transforms.jobset, transforms.secret, transforms.configmap):
        assert transform([1, "a"]) == [1, "a"]
        assert transform({"spec": "not a dict", "metadata": 3, "data": None}) is not None
