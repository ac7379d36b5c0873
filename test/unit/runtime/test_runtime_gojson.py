"""`runtime.api.gojson` writes objects back as Go's types do, by the rule read off the table of Go types.

A runtime patch written back as Go's typed patch: empty maps and lists go, structs stay. The rule is
checked three ways: on hand-picked values (an `emptyDir: {}` volume, `securityContext: {}`,
`nodeSelector: {}`, ...), against the TrainJob CRD (every empty map a runtime patch or `resourcesPerNode`
can hold is dropped and every empty object kept, which also proves the API types name every such map),
and through its two users: the runtime patch merge of `build_info` and the JobSet plugin's
runtime-patch immutability check (Go's `equality.Semantic.DeepEqual`).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from runtime.api.gojson import (
    RESOURCE_REQUIREMENTS,
    RUNTIME_PATCH_SPEC,
    go_json,
    go_json_resource_requirements,
    go_json_training_runtime,
    go_round_trip_jobset_spec,
    go_semantic_form,
    table,
)
from runtime.framework import MemoryReader
from runtime.info import build_info
from runtime.plugins.jobset import JobSet
from runtime.testing import Make

ROOT = Path(__file__).resolve().parents[3]


def _pod_patch(**pod_spec: Any) -> dict[str, Any]:
    return {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": pod_spec}}}}]}


def _pod(patch: dict[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = patch["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    return pod


# -- hand-picked values -------------------------------------------------------------------------------------


def test_empty_volume_sources_and_security_contexts_are_kept() -> None:
    patch = _pod_patch(
        volumes=[{"name": "scratch", "emptyDir": {}}, {"name": "cfg", "configMap": {}}],
        securityContext={},
        containers=[{"name": "node", "securityContext": {}}],
    )
    assert go_json(patch, RUNTIME_PATCH_SPEC) == patch


def test_empty_maps_lists_and_nulls_are_dropped() -> None:
    patch = _pod_patch(nodeSelector={}, tolerations=[], volumes=[], serviceAccountName=None)
    patch["replicatedJobs"][0]["template"]["metadata"] = {"labels": {}, "annotations": {}}
    assert go_json(patch, RUNTIME_PATCH_SPEC) == {
        "replicatedJobs": [{"name": "node", "template": {"metadata": {}, "spec": {"template": {"spec": {}}}}}]
    }


def test_maps_deep_inside_embedded_types_are_maps_too() -> None:
    selector = {"matchLabels": {}, "matchExpressions": []}
    term = {"topologyKey": "zone", "labelSelector": selector, "namespaceSelector": copy.deepcopy(selector)}
    patch = _pod_patch(
        affinity={"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": term}
        ]}},
        volumes=[
            {"name": "csi", "csi": {"driver": "d", "volumeAttributes": {}}},
            {"name": "eph", "ephemeral": {"volumeClaimTemplate": {
                "metadata": {"labels": {}},
                "spec": {"resources": {"requests": {}}, "selector": {"matchLabels": {}}},
            }}},
        ],
    )  # fmt: skip
    pod = _pod(go_json(patch, RUNTIME_PATCH_SPEC))
    kept_term = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert kept_term["podAffinityTerm"] == {
        "topologyKey": "zone",
        "labelSelector": {},
        "namespaceSelector": {},
    }
    assert pod["volumes"] == [
        {"name": "csi", "csi": {"driver": "d"}},
        {"name": "eph", "ephemeral": {"volumeClaimTemplate": {
            "metadata": {}, "spec": {"resources": {}, "selector": {}}
        }}},
    ]  # fmt: skip


def test_list_items_and_scalars_are_never_dropped() -> None:
    # Go writes `[{}]` as it is; "", 0 and false are kept (pointer fields keep them; see the module).
    patch = _pod_patch(
        imagePullSecrets=[{}],
        serviceAccountName="",
        terminationGracePeriodSeconds=0,
        securityContext={"runAsNonRoot": False},
    )
    assert go_json(patch, RUNTIME_PATCH_SPEC) == patch


def test_resources_per_node_drops_empty_limits_and_requests() -> None:
    resources = {"limits": {"cpu": 1}, "requests": {}, "claims": []}
    assert go_json_resource_requirements(resources) == {"limits": {"cpu": "1"}}  # a Quantity is a string


def test_the_input_is_neither_modified_nor_shared() -> None:
    patch = _pod_patch(nodeSelector={}, volumes=[{"name": "v", "emptyDir": {}}])
    before = copy.deepcopy(patch)
    result = go_json(patch, RUNTIME_PATCH_SPEC)
    assert patch == before
    _pod(result)["volumes"][0]["emptyDir"]["medium"] = "Memory"
    assert patch == before


# -- against the CRD schema ---------------------------------------------------------------------------------


def _trainjob_schema() -> dict[str, Any]:
    crd = yaml.safe_load((ROOT / "config" / "crd" / "trainer.kubeflow.org_trainjobs.yaml").read_text())
    (version,) = crd["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    return schema


def _dict_nodes(schema: dict[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], bool]]:
    """(path, is a map) for every object node of `schema`; `[]` steps into list items, `*` into map values."""
    if "additionalProperties" in schema:
        yield path, True
        yield from _dict_nodes(schema["additionalProperties"], (*path, "*"))
    elif "properties" in schema:
        yield path, False
        for name, child in schema["properties"].items():
            yield from _dict_nodes(child, (*path, name))
    elif "items" in schema:
        yield from _dict_nodes(schema["items"], (*path, "[]"))


def _holding_empty_dict(path: tuple[str, ...]) -> Any:
    """The smallest value with `{}` at `path` (map values under the key `k`)."""
    value: Any = {}
    for step in reversed(path):
        value = [value] if step == "[]" else {"k" if step == "*" else step: value}
    return value


def _keeps_leaf(value: Any, path: tuple[str, ...]) -> bool:
    for step in path[:-1]:
        value = value[0] if step == "[]" else value["k" if step == "*" else step]
    return ("k" if path[-1] == "*" else path[-1]) in value


SCHEMA = _trainjob_schema()
CASES = [
    pytest.param(root, hint, path, is_map, id=f"{name}.{'.'.join(path).replace('.[]', '[]')}")
    for name, root, hint in (
        ("runtimePatches[]", SCHEMA["runtimePatches"]["items"], "trainer/v1alpha1.RuntimePatch"),
        (
            "trainer.resourcesPerNode",
            SCHEMA["trainer"]["properties"]["resourcesPerNode"],
            RESOURCE_REQUIREMENTS,
        ),
    )
    for path, is_map in _dict_nodes(root)
    if path and path[-1] != "[]"
]


def test_the_schema_has_maps_and_objects_in_runtime_patches() -> None:
    kinds = [case.values[3] for case in CASES]
    assert kinds.count(True) >= 24 and kinds.count(False) >= 100  # the walk reaches deep into pod specs


@pytest.mark.parametrize(("root", "hint", "path", "is_map"), CASES)
def test_an_empty_map_is_dropped_and_an_empty_object_kept_as_the_crd_schema_says(
    root: dict[str, Any], hint: str, path: tuple[str, ...], is_map: bool
) -> None:
    kept = _keeps_leaf(go_json(_holding_empty_dict(path), hint), path)
    assert kept is not is_map, (
        "a map the API types do not name: type it as dict[str, V] in runtime/api" if is_map else path
    )


# -- through its users --------------------------------------------------------------------------------------


def _runtime_patch(manager: str = "sdk.io/manager", **pod_spec: Any) -> dict[str, Any]:
    return {"manager": manager, "trainingRuntimeSpec": {"template": {"spec": _pod_patch(**pod_spec)}}}


def test_a_runtime_patch_adds_volumes_with_empty_sources_and_no_empty_node_selector(make: Make) -> None:
    jobs = [make.job("node", containers=[make.container("node")])]
    patch = _runtime_patch(
        volumes=[{"name": "scratch", "emptyDir": {}}, {"name": "cfg", "configMap": {}}], nodeSelector={}
    )
    info = build_info(make.trainjob(runtime_patches=[patch]), make.runtime_spec(*jobs))
    pod = info.pod_sets[0].pod_spec
    assert pod["volumes"] == [{"name": "scratch", "emptyDir": {}}, {"name": "cfg", "configMap": {}}]
    assert "nodeSelector" not in pod


def test_an_empty_struct_in_a_runtime_patch_is_a_change_and_an_empty_map_is_not(make: Make) -> None:
    old = make.trainjob(runtime_patches=[_runtime_patch(nodeSelector={"a": "1"})])
    same = make.trainjob(
        runtime_patches=[_runtime_patch(nodeSelector={"a": "1"}, tolerations=[], volumes=[])]
    )
    changed = make.trainjob(runtime_patches=[_runtime_patch(nodeSelector={"a": "1"}, securityContext={})])
    plugin = JobSet()
    info = build_info(same, make.runtime_spec(*make.default_jobs()))
    assert list(plugin.validate(info, old, same, MemoryReader()).errors) == []
    assert [str(e) for e in plugin.validate(info, old, changed, MemoryReader()).errors] == [
        "spec.runtimePatches: Forbidden: RuntimePatches can only be modified when the TrainJob is suspended "
        "before or after the update"
    ]


# -- go_round_trip_jobset_spec: the JobSet spec as upstream writes it ---------------------------------------
# Expected values were produced by Go: json.Unmarshal into jobsetv1alpha2.JobSetSpec (jobset v0.12.0), then
# upstream's apply.FromTypedObjWithFields (DefaultUnstructuredConverter, apimachinery v0.36.3), then
# json.Marshal of the JobSetSpecApplyConfiguration.


def test_go_writes_empty_structs_for_templates_and_container_resources() -> None:
    spec = {
        "replicatedJobs": [
            {"name": "x", "template": {}},
            _pod_patch(containers=[{"name": "a"}])["replicatedJobs"][0],
        ]
    }
    written = go_round_trip_jobset_spec(spec)
    assert written["replicatedJobs"][0]["template"] == {
        "metadata": {},
        "spec": {"template": {"metadata": {}, "spec": {}}},
    }
    assert written["replicatedJobs"][1]["template"]["metadata"] == {}
    pod = written["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    assert pod["containers"] == [{"name": "a", "resources": {}}]
    assert spec["replicatedJobs"][0]["template"] == {}  # the input is not modified


def test_go_writes_every_quantity_of_the_pod_template_as_its_quantity_type_does() -> None:
    pod = _pod_patch(
        overhead={"cpu": "1.5"},
        resources={"limits": {"memory": "2048Mi"}},
        containers=[
            {
                "name": "node",
                "resources": {
                    "limits": {"cpu": "+1", "memory": "1.5Gi", "nvidia.com/gpu": 2, "x": 1.5},
                    "requests": {},
                },
                "env": [
                    {
                        "name": "A",
                        "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1000m"}},
                    },
                    {"name": "B", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
                ],
            }
        ],
        initContainers=[{"name": "i"}],
        volumes=[
            {"name": "v", "emptyDir": {"sizeLimit": "1000Mi"}},
            {"name": "w", "emptyDir": {}},
            {
                "name": "d",
                "downwardAPI": {"items": [{"path": "p", "resourceFieldRef": {"resource": "limits.cpu"}}]},
            },
            {"name": "e", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}},
        ],
        nodeSelector={},
        tolerations=[],
    )
    written = _pod(go_round_trip_jobset_spec(pod))
    assert written["overhead"] == {"cpu": "1500m"}
    assert written["resources"] == {"limits": {"memory": "2Gi"}}
    node = written["containers"][0]
    # "+1" is kept as written (Go's parser keeps text it finds canonical); numbers become strings.
    assert node["resources"] == {
        "limits": {"cpu": "+1", "memory": "1536Mi", "nvidia.com/gpu": "2", "x": "1500m"}
    }
    assert [e["valueFrom"]["resourceFieldRef"]["divisor"] for e in node["env"]] == ["1", "0"]
    assert written["initContainers"] == [{"name": "i", "resources": {}}]
    assert written["volumes"][0]["emptyDir"] == {"sizeLimit": "1000Mi"}
    assert written["volumes"][1]["emptyDir"] == {}
    assert written["volumes"][2]["downwardAPI"]["items"][0]["resourceFieldRef"]["divisor"] == "0"
    assert written["volumes"][3]["ephemeral"]["volumeClaimTemplate"] == {
        "metadata": {},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {}},
    }
    assert "nodeSelector" not in written and "tolerations" not in written


def test_go_writes_a_volume_claim_policy_template_with_an_empty_status() -> None:
    spec = {
        "volumeClaimPolicies": [{"templates": [{"spec": {"resources": {"requests": {"storage": "1.5Gi"}}}}]}]
    }
    assert go_round_trip_jobset_spec(spec)["volumeClaimPolicies"][0]["templates"] == [
        {"metadata": {}, "spec": {"resources": {"requests": {"storage": "1536Mi"}}}, "status": {}}
    ]


@pytest.mark.parametrize(
    "spec",
    [
        {"replicatedJobs": "nope"},
        {"replicatedJobs": [None, 3, {"template": []}]},
        _pod_patch(
            containers="nope",
            volumes=[{"emptyDir": "x"}, {"downwardAPI": {"items": [{"resourceFieldRef": 1}]}}],
        ),
    ],
)
def test_odd_input_never_raises(spec: dict[str, Any]) -> None:
    assert isinstance(go_round_trip_jobset_spec(spec), dict)


def test_a_value_that_is_not_a_quantity_is_left_as_written() -> None:
    # Reported where it is read (pod_requests, the plugins), not here.
    limits = {"cpu": "lots", "gpu": True, "m": "1e999"}
    spec = _pod_patch(containers=[{"name": "a", "resources": {"limits": limits}}])
    assert _pod(go_round_trip_jobset_spec(spec))["containers"][0]["resources"]["limits"] == limits


def test_an_init_container_a_plugin_appends_gets_no_resources(make: Make) -> None:
    # Upstream appends plugin init containers (Flux's installer) as apply configurations after the typed
    # round trip, so they have no `resources: {}`; the runtime's own init containers do.
    jobs = [make.job("node", ancestor="trainer", containers=[make.container("node")])]
    jobs[0]["template"]["spec"]["template"]["spec"]["initContainers"] = [{"name": "setup"}]
    trainjob = make.trainjob()
    info = build_info(trainjob, make.runtime_spec(*jobs))
    info.pod_sets[0].add_init_container("installer")
    jobset = JobSet().build(info, trainjob, MemoryReader([]))[0]
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["initContainers"] == [{"name": "setup", "resources": {}}, {"name": "installer"}]
    assert pod["containers"][0]["resources"] == {}


# -- the rule read off the Go types, where the hand list of runtime/api/omitempty.py was wrong -----------
# Each expectation below is what Go v0.36.2 / jobset v0.12.0 wrote for the same input (the corpus of
# test/integration/test_gojson_parity.py holds these values and checks them against Go itself).


def test_go_drops_zero_scalars_of_omitempty_value_fields_and_keeps_them_behind_pointers() -> None:
    spec = {
        "failurePolicy": {"maxRestarts": 0},  # int32, omitempty: dropped
        "suspend": False,  # *bool: kept
        **_pod_patch(
            hostNetwork=False,  # bool, omitempty
            serviceAccountName="",  # string, omitempty (not a pointer in core/v1)
            containers=[
                {
                    "name": "a",
                    "stdin": False,
                    "env": [{"name": "E", "value": ""}],
                    "volumeMounts": [{"name": "v", "mountPath": "/v", "readOnly": False, "subPath": ""}],
                    "livenessProbe": {"initialDelaySeconds": 0, "periodSeconds": 0, "timeoutSeconds": 1},
                    "securityContext": {"privileged": False, "runAsUser": 0},  # pointers
                }
            ],
            volumes=[{"name": "h", "hostPath": {"path": "/tmp", "type": ""}}],  # type: *HostPathType
        ),
    }
    written = go_round_trip_jobset_spec(spec)
    assert written["failurePolicy"] == {}
    assert written["suspend"] is False
    pod = _pod(written)
    assert "hostNetwork" not in pod and "serviceAccountName" not in pod
    container = pod["containers"][0]
    assert "stdin" not in container
    assert container["env"] == [{"name": "E"}]
    assert container["volumeMounts"] == [{"name": "v", "mountPath": "/v"}]
    assert container["livenessProbe"] == {"timeoutSeconds": 1}
    assert container["securityContext"] == {"privileged": False, "runAsUser": 0}
    assert pod["volumes"] == [{"name": "h", "hostPath": {"path": "/tmp", "type": ""}}]


def test_go_writes_required_fields_of_a_present_struct_with_their_zero_values() -> None:
    # A struct field without omitempty is always written; an absent one comes back with its zero value.
    spec = _pod_patch(
        containers=[{"name": "a", "ports": [{"name": "p"}]}],
        topologySpreadConstraints=[{"maxSkew": 1}],
    )
    pod = _pod(go_round_trip_jobset_spec(spec))
    assert pod["containers"][0]["ports"] == [{"name": "p", "containerPort": 0}]
    assert pod["topologySpreadConstraints"] == [{"maxSkew": 1, "topologyKey": "", "whenUnsatisfiable": ""}]


def test_go_drops_an_empty_pod_level_resource_list_and_unknown_keys() -> None:
    spec = {
        "unknownField": 1,
        **_pod_patch(resources={"requests": {}, "limits": {"cpu": 1}}, containers=[{"name": "a", "x": {}}]),
    }
    written = go_round_trip_jobset_spec(spec)
    assert "unknownField" not in written
    pod = _pod(written)
    assert pod["resources"] == {"limits": {"cpu": "1"}}
    assert pod["containers"] == [{"name": "a", "resources": {}}]


def test_go_writes_a_typed_training_runtime_in_its_own_order_with_times_in_utc() -> None:
    runtime = {
        "kind": "ClusterTrainingRuntime",
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "spec": {"mlPolicy": {"jax": {}, "numNodes": 2}, "template": {"spec": {}}, "unknown": 1},
        "metadata": {
            "name": "r",
            "labels": {"b": "2", "a": "1"},
            "creationTimestamp": "2025-01-02T04:04:05.9+01:00",
        },
    }
    written = go_json_training_runtime(runtime)
    assert list(written) == ["kind", "apiVersion", "metadata", "spec"]
    assert list(written["metadata"]) == ["name", "creationTimestamp", "labels"]
    assert list(written["metadata"]["labels"]) == ["a", "b"]
    assert written["metadata"]["creationTimestamp"] == "2025-01-02T03:04:05Z"
    # omitzero: a template whose every field is zero is left out, as are an absent creationTimestamp and
    # an all-zero spec
    assert written["spec"] == {"mlPolicy": {"numNodes": 2, "jax": {}}}
    assert go_json_training_runtime({"metadata": {}, "spec": {"template": {}}}) == {"metadata": {}}


def test_the_committed_table_has_no_hand_edits_and_names_every_reachable_struct() -> None:
    structs = table()["structs"]
    for name, fields in structs.items():
        for json_name, flags, go_type in fields:
            assert set(flags) <= {"o", "z", "i"}, (name, json_name)
            base = go_type.lstrip("*")
            while base.startswith(("[]", "map[string]", "*")):
                base = base.removeprefix("[]").removeprefix("map[string]").removeprefix("*")
            assert base in structs or base in {
                "string",
                "bool",
                "int",
                "int32",
                "int64",
                "bytes",
                "Quantity",
                "Time",
                "MicroTime",
                "IntOrString",
                "FieldsV1",
            }, (name, json_name, go_type)
    assert set(table()["roots"]) <= set(structs)


def test_semantic_form_equates_zero_values_with_absent_ones_and_not_an_empty_struct_with_none() -> None:
    def form(**pod_spec: Any) -> Any:
        return go_semantic_form([_runtime_patch(**pod_spec)], "[]trainer/v1alpha1.RuntimePatch")

    assert form(containers=[{"name": "a", "env": []}]) == form(containers=[{"name": "a"}])
    assert form(containers=[{"name": "a", "resources": {"limits": {"cpu": "1000m"}}}]) == form(
        containers=[{"name": "a", "resources": {"limits": {"cpu": 1}}}]
    )
    assert form(securityContext={}) != form()


def test_the_quantity_memo_keeps_no_long_text() -> None:
    # The memo outlives the objects: a quantity a million characters long (leading zeros pass every check)
    # must not be held once per TrainJob, 4,096 of them.
    from runtime.api import gojson

    gojson._canonical_quantity.cache_clear()
    long_text = "0" * 1_000_000 + "1"
    written = go_json_resource_requirements({"limits": {"cpu": long_text, "memory": "1Gi"}})
    assert written["limits"]["memory"] == "1Gi"
    assert gojson._canonical_quantity.cache_info().currsize == 1  # "1Gi" only


def test_every_struct_node_is_complete_once_the_module_is_imported() -> None:
    # In a fresh interpreter: nodes built lazily were handed to a second worker half-built (linked before
    # their fields were filled), which then encoded the runtime of its snapshot as {} and failed the
    # TrainJob for good. Built at import, under Python's import lock, no thread can see one half-built.
    probe = (
        "import json\n"
        "from runtime.api import gojson\n"
        "structs = gojson.table()['structs']\n"
        "built = {n: len(s.fields) for n, s in gojson._STRUCTS.items()}\n"
        "print(json.dumps({'missing': sorted(set(structs) - set(built)),"
        " 'empty': sorted(n for n in structs if structs[n] and not built.get(n))}))\n"
    )
    answer = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(answer.stdout) == {"missing": [], "empty": []}
