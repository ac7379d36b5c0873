"""Strategic merge patch: the list, map and directive semantics of apimachinery's `strategicpatch`."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.strategicmerge import (
    JOBSET_SPEC,
    RESOURCE_REQUIREMENTS,
    PatchMeta,
    StrategicMergeError,
    strategic_merge,
)


def _pod_spec(**spec: Any) -> dict[str, Any]:
    return {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": spec}}}}]}


def _merged_pod_spec(original: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    merged = strategic_merge(_pod_spec(**original), _pod_spec(**patch), JOBSET_SPEC)
    return merged["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def test_env_merge_puts_patch_items_first_and_keeps_original_only_items_after() -> None:
    # Upstream "succeeded to build JobSet with TrainJob's RuntimePatches".
    original = {
        "initContainers": [
            {
                "name": "init",
                "env": [{"name": "INIT_ENV", "value": "original"}, {"name": "DATASET_PATH", "value": "rt"}],
            }
        ]
    }
    patch = {
        "initContainers": [
            {
                "name": "init",
                "env": [{"name": "INIT_ENV", "value": "override"}, {"name": "NEW_VALUE", "value": "x"}],
            }
        ]
    }
    env = _merged_pod_spec(original, patch)["initContainers"][0]["env"]
    assert env == [
        {"name": "INIT_ENV", "value": "override"},
        {"name": "NEW_VALUE", "value": "x"},
        {"name": "DATASET_PATH", "value": "rt"},
    ]


def test_an_original_only_item_stays_before_a_patch_item_it_preceded() -> None:
    original = {"containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}
    patch = {"containers": [{"name": "c", "image": "new"}, {"name": "d"}]}
    names = [c["name"] for c in _merged_pod_spec(original, patch)["containers"]]
    assert names == ["a", "b", "c", "d"]


def test_merge_keys_follow_the_go_struct_tags() -> None:
    original = {
        "containers": [
            {
                "name": "node",
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                "ports": [{"containerPort": 8080, "name": "http"}],
            }
        ],
        "volumes": [{"name": "data", "emptyDir": {}}],
        "imagePullSecrets": [{"name": "one"}],
        "schedulingGates": [{"name": "gate-a"}],
    }
    patch = {
        "containers": [
            {
                "name": "node",
                "volumeMounts": [
                    {"name": "other", "mountPath": "/data"},
                    {"name": "more", "mountPath": "/more"},
                ],
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
            }
        ],
        "volumes": [{"name": "data", "secret": {"secretName": "s"}}],
        "imagePullSecrets": [{"name": "two"}],
        "schedulingGates": [{"name": "gate-b"}],
    }
    merged = _merged_pod_spec(original, patch)
    node = merged["containers"][0]
    assert node["volumeMounts"] == [
        {"name": "other", "mountPath": "/data"},
        {"name": "more", "mountPath": "/more"},
    ]
    assert node["ports"] == [{"containerPort": 8080, "name": "http", "protocol": "TCP"}]
    assert merged["volumes"] == [{"name": "data", "emptyDir": {}, "secret": {"secretName": "s"}}]
    assert merged["imagePullSecrets"] == [{"name": "two"}, {"name": "one"}]
    assert merged["schedulingGates"] == [{"name": "gate-b"}, {"name": "gate-a"}]


def test_lists_without_a_merge_strategy_are_replaced() -> None:
    original = {
        "tolerations": [{"key": "a", "operator": "Exists"}],
        "containers": [{"name": "node", "command": ["a", "b"], "args": ["x"]}],
    }
    patch = {
        "tolerations": [{"key": "b", "operator": "Exists"}],
        "containers": [{"name": "node", "args": ["y"]}],
    }
    merged = _merged_pod_spec(original, patch)
    assert merged["tolerations"] == [{"key": "b", "operator": "Exists"}]
    assert merged["containers"] == [{"name": "node", "command": ["a", "b"], "args": ["y"]}]


def test_maps_merge_by_key_and_null_deletes() -> None:
    original = {"nodeSelector": {"a": "1", "b": "2"}, "serviceAccountName": "old", "hostNetwork": True}
    patch = {"nodeSelector": {"b": "3", "c": "4"}, "serviceAccountName": "new", "hostNetwork": None}
    merged = _merged_pod_spec(original, patch)
    assert merged == {"nodeSelector": {"a": "1", "b": "3", "c": "4"}, "serviceAccountName": "new"}


def test_nested_structs_merge_recursively_and_their_lists_are_replaced() -> None:
    original = {"affinity": {"podAffinity": {"x": 1}, "nodeAffinity": {"required": {"terms": [{"k": "a"}]}}}}
    patch = {"affinity": {"nodeAffinity": {"required": {"terms": [{"k": "b"}]}}}}
    assert _merged_pod_spec(original, patch)["affinity"] == {
        "podAffinity": {"x": 1},
        "nodeAffinity": {"required": {"terms": [{"k": "b"}]}},
    }


def test_nulls_inside_added_values_are_dropped() -> None:
    merged = _merged_pod_spec({}, {"securityContext": {"runAsUser": 1, "fsGroup": None}, "containers": []})
    assert merged["securityContext"] == {"runAsUser": 1}


def test_replicated_jobs_merge_by_name() -> None:
    original = {"replicatedJobs": [{"name": "a", "replicas": 1}, {"name": "b", "replicas": 1}]}
    patch = {"replicatedJobs": [{"name": "b", "replicas": 2}]}
    assert strategic_merge(original, patch, JOBSET_SPEC) == {
        "replicatedJobs": [{"name": "a", "replicas": 1}, {"name": "b", "replicas": 2}]
    }


def test_merge_lists_of_scalars_are_unions() -> None:
    meta = PatchMeta(fields={"metadata": PatchMeta(fields={"finalizers": PatchMeta(merge=True)})})
    merged = strategic_merge(
        {"metadata": {"finalizers": ["a", "b"]}}, {"metadata": {"finalizers": ["b", "c"]}}, meta
    )
    assert merged == {"metadata": {"finalizers": ["a", "b", "c"]}}


def test_resources_merge_per_resource_name_and_claims_by_name() -> None:
    # upstream "merged resourcesPerNode keeps runtime resources when trainjob sets gpu only"
    original = {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}, "claims": [{"name": "a"}]}
    patch = {"limits": {"nvidia.com/gpu": "4"}, "claims": [{"name": "b"}]}
    assert strategic_merge(original, patch, RESOURCE_REQUIREMENTS) == {
        "requests": {"cpu": "1"},
        "limits": {"cpu": "2", "nvidia.com/gpu": "4"},
        "claims": [{"name": "b"}, {"name": "a"}],
    }


def test_patch_directives_replace_and_delete() -> None:
    original = {"containers": [{"name": "a", "image": "x"}, {"name": "b"}], "nodeSelector": {"k": "v"}}
    assert _merged_pod_spec(original, {"nodeSelector": {"$patch": "replace", "n": "w"}})["nodeSelector"] == {
        "n": "w"
    }
    assert _merged_pod_spec(original, {"nodeSelector": {"$patch": "delete"}})["nodeSelector"] == {}
    deleted = _merged_pod_spec(original, {"containers": [{"name": "a", "$patch": "delete"}]})
    assert deleted["containers"] == [{"name": "b"}]
    replaced = _merged_pod_spec(original, {"containers": [{"name": "c"}, {"$patch": "replace"}]})
    assert replaced["containers"] == [{"name": "c"}]


def test_retain_keys_and_delete_from_primitive_list() -> None:
    meta = PatchMeta(fields={"tags": PatchMeta(merge=True)})
    original = {"a": 1, "b": 2, "tags": ["x", "y", "z"]}
    assert strategic_merge(original, {"$retainKeys": ["a", "tags"], "a": 3}, meta) == {
        "a": 3,
        "tags": ["x", "y", "z"],
    }
    assert strategic_merge(original, {"$deleteFromPrimitiveList/tags": ["y"]}, meta) == {
        "a": 1,
        "b": 2,
        "tags": ["x", "z"],
    }


@pytest.mark.parametrize(
    "patch",
    [
        {"containers": [{"image": "no-name"}]},  # a merge-list item without its key
        {"containers": [{"name": "a", "$patch": "merge"}]},
        {"containers": [{"name": "a"}, "scalar"]},
        {"$setElementOrder/containers": [{"name": "a"}]},
        {"nodeSelector": {"$patch": "bogus"}},
        {"$retainKeys": ["a"], "b": 1},
    ],
)
def test_malformed_patches_raise_a_strategic_merge_error(patch: dict[str, Any]) -> None:
    with pytest.raises(StrategicMergeError):
        _merged_pod_spec({"containers": [{"name": "a"}], "nodeSelector": {"k": "v"}}, patch)


def test_inputs_are_never_modified() -> None:
    original = _pod_spec(containers=[{"name": "a", "env": [{"name": "X", "value": "1"}]}])
    patch = _pod_spec(containers=[{"name": "a", "env": [{"name": "Y", "value": "2"}]}, {"name": "b"}])
    before = orjson.dumps([original, patch])
    merged = strategic_merge(original, patch, JOBSET_SPEC)
    assert orjson.dumps([original, patch]) == before
    merged["replicatedJobs"][0]["name"] = "changed"
    assert original["replicatedJobs"][0]["name"] == "node"


# Properties -----------------------------------------------------------------------------------------------

_META = PatchMeta(
    fields={
        "env": PatchMeta(merge=True, merge_key="name"),
        "containers": PatchMeta(
            merge=True, merge_key="name", fields={"env": PatchMeta(merge=True, merge_key="name")}
        ),
        "tags": PatchMeta(merge=True),
    }
)
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from(["a", "b", "c"]))
_names = st.sampled_from(["A", "B", "C", "D"])
_env = st.lists(
    st.fixed_dictionaries({"name": _names, "value": st.sampled_from(["1", "2", "3"])}), max_size=4
)
_plain = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["p", "q", "r"]), inner, max_size=3)
    ),
    max_leaves=8,
)
_containers = st.lists(
    st.fixed_dictionaries({"name": _names}, optional={"env": _env, "image": _scalars}), max_size=3
)
_documents = st.fixed_dictionaries(
    {},
    optional={
        "env": _env,
        "containers": _containers,
        "tags": st.lists(st.sampled_from(["x", "y", "z"]), max_size=4, unique=True),
        "plain": _plain,
        "nested": st.dictionaries(st.sampled_from(["p", "q"]), _plain, max_size=2),
        "scalar": _scalars,
    },
)


def _unique_names(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for item in items:
        seen.setdefault(item["name"], item)
    return list(seen.values())


def _well_formed(document: dict[str, Any], *, nulls: bool = False) -> dict[str, Any]:
    """Documents from an API server have unique merge keys (list-map schemas); only patches carry nulls."""
    document = {k: v for k, v in document.items() if nulls or v is not None}
    if "env" in document:
        document["env"] = _unique_names(document["env"])
    if "containers" in document:
        document["containers"] = [
            {**c, "env": _unique_names(c["env"])} if "env" in c else c
            for c in _unique_names(document["containers"])
        ]
    return document


@settings(max_examples=300)
@given(_documents)
def test_an_empty_patch_changes_nothing(original: dict[str, Any]) -> None:
    original = _well_formed(original)
    assert strategic_merge(original, {}, _META) == original


@settings(max_examples=300)
@given(_documents, _documents)
def test_applying_the_same_patch_twice_is_applying_it_once(
    original: dict[str, Any], patch: dict[str, Any]
) -> None:
    patch = _well_formed(patch, nulls=True)
    once = strategic_merge(_well_formed(original), patch, _META)
    assert strategic_merge(once, patch, _META) == once


@settings(max_examples=300)
@given(_documents, _documents)
def test_keys_survive_unless_the_patch_nulls_them(original: dict[str, Any], patch: dict[str, Any]) -> None:
    original, patch = _well_formed(original), _well_formed(patch, nulls=True)
    merged = strategic_merge(original, patch, _META)
    for key in original:
        assert (key in merged) == (key not in patch or patch[key] is not None)
    for key, value in patch.items():
        if value is not None:
            assert key in merged
