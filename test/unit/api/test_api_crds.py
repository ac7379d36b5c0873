"""The committed CRDs in config/crd: upstream's rules, defaults and shapes are there, and they agree with the
TypedDicts they were generated from (both are walked side by side). test_api_upstream_crds.py compares them
with upstream's own CRDs, keyword by keyword.

The rule and default tables restate upstream v2.3.0's `+kubebuilder` markers (in
`pkg/apis/trainer/v1alpha1`), so a marker dropped from runtime/api/v1alpha1.py fails here even if the
CRDs were regenerated.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest

from runtime.api import constants, v1alpha1
from runtime.api.markers import (
    CEL,
    Embedded,
    EmbeddedJobSetSpec,
    EmbeddedObjectMeta,
    Items,
    Marker,
    Resource,
    markers_of,
)

Schema = Callable[[str], dict[str, Any]]
IMMUTABLE = ("self == oldSelf", "field is immutable")
PATCH_POD_SPEC = (
    "spec.runtimePatches[].trainingRuntimeSpec.template.spec.replicatedJobs[].template.spec.template.spec"
)


def at(schema: dict[str, Any], path: str) -> dict[str, Any]:
    """The schema node at a dotted path; `[]` steps into list items, `{}` into map values."""
    node = schema
    for part in path.split(".") if path else ():
        name = part.removesuffix("[]").removesuffix("{}")
        if name:
            assert "properties" in node and name in node["properties"], f"{path}: no property {name!r}"
            node = node["properties"][name]
        if part.endswith("[]"):
            node = node["items"]
        elif part.endswith("{}"):
            node = node["additionalProperties"]
    return node


def rules(node: dict[str, Any]) -> list[tuple[str, str]]:
    return [(v["rule"], v["message"]) for v in node.get("x-kubernetes-validations", [])]


# (kind, path, rule, message): every CEL rule upstream's CRDs carry on Trainer-owned types.
CEL_RULES = [
    (
        "TrainJob",
        "",
        "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
        "metadata.name must match RFC 1035 DNS label format",
    ),
    ("TrainJob", "", "size(self.metadata.name) <= 63", "metadata.name must be no more than 63 characters"),
    ("TrainJob", "spec.runtimeRef", *IMMUTABLE),
    ("TrainJob", "spec.initializer", *IMMUTABLE),
    ("TrainJob", "spec.trainer", *IMMUTABLE),
    ("TrainJob", "spec.activeDeadlineSeconds", *IMMUTABLE),
    ("TrainJob", "spec.managedBy", *IMMUTABLE),
    (
        "TrainJob",
        "spec.managedBy",
        "self in ['trainer.kubeflow.org/trainjob-controller', 'kueue.x-k8s.io/multikueue']",
        "ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set",
    ),
    (
        "TrainJob",
        "spec.initializer.dataset.storageUri",
        "self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')",
        "storageUri may be empty, or it must be a valid URI (scheme://...)",
    ),
    (
        "TrainJob",
        "spec.initializer.model.storageUri",
        "self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')",
        "storageUri may be empty, or it must be a valid URI (scheme://...)",
    ),
    ("TrainJob", "spec.runtimePatches[].manager", *IMMUTABLE),
    ("TrainJob", f"{PATCH_POD_SPEC}.serviceAccountName", *IMMUTABLE),
    ("TrainJob", f"{PATCH_POD_SPEC}.volumes", *IMMUTABLE),
    ("TrainJob", f"{PATCH_POD_SPEC}.initContainers", *IMMUTABLE),
    ("TrainJob", f"{PATCH_POD_SPEC}.containers", *IMMUTABLE),
    ("TrainJob", f"{PATCH_POD_SPEC}.imagePullSecrets", *IMMUTABLE),
    ("TrainJob", f"{PATCH_POD_SPEC}.securityContext", *IMMUTABLE),
    ("TrainJob", f"{PATCH_POD_SPEC}.terminationGracePeriodSeconds", *IMMUTABLE),
    (
        "TrainJob",
        "status.trainerStatus",
        "has(self.lastUpdatedTime)",
        "lastUpdatedTime is required when trainerStatus is present",
    ),
    *[
        (
            kind,
            "spec.mlPolicy",
            "[has(self.torch), has(self.mpi), has(self.jax), has(self.xgboost),has(self.flux)]"
            ".filter(x, x).size() <= 1",
            "Only one of the policy can be configured",
        )
        for kind in ("TrainingRuntime", "ClusterTrainingRuntime")
    ],
    *[
        (kind, "spec.mlPolicy.flux.numProcPerNode", "self >= 1", "NumProcPerNode in fluxPolicy must be >= 1")
        for kind in ("TrainingRuntime", "ClusterTrainingRuntime")
    ],
    *[
        (
            kind,
            "spec.mlPolicy.torch.envInjection.targets[].containerNames",
            "!self.exists(c, c == 'node')",
            "containerNames must not include the main node container because PET_* envs are always "
            "injected into it",
        )
        for kind in ("TrainingRuntime", "ClusterTrainingRuntime")
    ],
]

# (kind, path, default): every schema default upstream's CRDs carry on Trainer-owned types.
DEFAULTS = [
    ("TrainJob", "spec.runtimeRef.apiGroup", "trainer.kubeflow.org"),
    ("TrainJob", "spec.runtimeRef.kind", "ClusterTrainingRuntime"),
    ("TrainJob", "spec.suspend", False),
    ("TrainJob", "spec.managedBy", "trainer.kubeflow.org/trainjob-controller"),
    *[
        (kind, path, value)
        for kind in ("TrainingRuntime", "ClusterTrainingRuntime")
        for path, value in (
            ("spec.mlPolicy.mpi.numProcPerNode", 1),
            ("spec.mlPolicy.mpi.mpiImplementation", "OpenMPI"),
            ("spec.mlPolicy.mpi.sshAuthMountPath", "/root/.ssh"),
            ("spec.mlPolicy.mpi.runLauncherAsNode", False),
            ("spec.mlPolicy.flux.numProcPerNode", 1),
            ("spec.podGroupPolicy.coscheduling.scheduleTimeoutSeconds", 60),
            ("spec.podGroupPolicy.volcano.networkTopology.mode", "hard"),
            ("spec.podGroupPolicy.volcano.networkTopology.highestTierAllowed", 1),
            # From JobSet's own CRD, embedded unchanged.
            ("spec.template.spec.replicatedJobs[].replicas", 1),
            ("spec.template.spec.replicatedJobs[].groupName", "default"),
            ("spec.template.spec.failurePolicy.restartStrategy", "Recreate"),
        )
    ],
]

# (kind, path, keyword, value): bounds, enums, list types and map keys.
KEYWORDS = [
    ("TrainJob", "spec", "required", ["runtimeRef"]),
    ("TrainJob", "spec.runtimeRef", "required", ["name"]),
    ("TrainJob", "spec.runtimeRef.name", "minLength", 1),
    ("TrainJob", "spec.runtimeRef.name", "maxLength", 253),
    ("TrainJob", "spec.managedBy", "maxLength", 253),
    ("TrainJob", "spec.activeDeadlineSeconds", "minimum", 1),
    ("TrainJob", "spec.activeDeadlineSeconds", "format", "int64"),
    ("TrainJob", "spec.initializer.dataset.storageUri", "maxLength", 2048),
    ("TrainJob", "spec.initializer.dataset.env", "x-kubernetes-list-map-keys", ["name"]),
    ("TrainJob", "spec.initializer.dataset.env", "maxItems", 128),
    ("TrainJob", "spec.trainer.image", "maxLength", 500),
    ("TrainJob", "spec.trainer.command", "x-kubernetes-list-type", "atomic"),
    ("TrainJob", "spec.trainer.command", "maxItems", 128),
    ("TrainJob", "spec.trainer.command[]", "maxLength", 1048576),
    ("TrainJob", "spec.trainer.args[]", "maxLength", 1048576),
    ("TrainJob", "spec.trainer.env", "x-kubernetes-list-type", "map"),
    ("TrainJob", "spec.trainer.numNodes", "format", "int32"),
    ("TrainJob", "spec.runtimePatches", "x-kubernetes-list-type", "map"),
    ("TrainJob", "spec.runtimePatches", "x-kubernetes-list-map-keys", ["manager"]),
    ("TrainJob", "spec.runtimePatches", "maxItems", 16),
    ("TrainJob", "spec.runtimePatches[]", "required", ["manager"]),
    ("TrainJob", "spec.runtimePatches[].time", "format", "date-time"),
    (
        "TrainJob",
        "spec.runtimePatches[].trainingRuntimeSpec.template.spec.replicatedJobs",
        "x-kubernetes-list-map-keys",
        ["name"],
    ),
    ("TrainJob", "spec.runtimePatches[].trainingRuntimeSpec.template.spec.replicatedJobs", "maxItems", 100),
    ("TrainJob", f"{PATCH_POD_SPEC}.containers", "maxItems", 64),
    ("TrainJob", f"{PATCH_POD_SPEC}.containers[]", "required", ["name"]),
    ("TrainJob", f"{PATCH_POD_SPEC}.containers[].volumeMounts", "x-kubernetes-list-map-keys", ["name"]),
    ("TrainJob", f"{PATCH_POD_SPEC}.volumes", "maxItems", 128),
    ("TrainJob", f"{PATCH_POD_SPEC}.imagePullSecrets", "maxItems", 64),
    ("TrainJob", f"{PATCH_POD_SPEC}.imagePullSecrets[].name", "default", ""),
    ("TrainJob", f"{PATCH_POD_SPEC}.tolerations", "x-kubernetes-list-type", "atomic"),
    ("TrainJob", f"{PATCH_POD_SPEC}.tolerations", "maxItems", 128),
    ("TrainJob", f"{PATCH_POD_SPEC}.schedulingGates", "maxItems", 16),
    ("TrainJob", f"{PATCH_POD_SPEC}.terminationGracePeriodSeconds", "minimum", 0),
    ("TrainJob", "status", "minProperties", 1),
    ("TrainJob", "status.conditions", "x-kubernetes-list-map-keys", ["type"]),
    ("TrainJob", "status.conditions", "maxItems", 8),
    (
        "TrainJob",
        "status.conditions[]",
        "required",
        ["lastTransitionTime", "message", "reason", "status", "type"],
    ),
    ("TrainJob", "status.conditions[].status", "enum", ["True", "False", "Unknown"]),
    ("TrainJob", "status.jobsStatus", "x-kubernetes-list-map-keys", ["name"]),
    ("TrainJob", "status.jobsStatus", "maxItems", 100),
    (
        "TrainJob",
        "status.jobsStatus[]",
        "required",
        ["active", "failed", "name", "ready", "succeeded", "suspended"],
    ),
    ("TrainJob", "status.jobsStatus[].ready", "minimum", 0),
    ("TrainJob", "status.trainerStatus.progressPercentage", "maximum", 100),
    ("TrainJob", "status.trainerStatus.metrics", "maxItems", 256),
    ("TrainJob", "status.trainerStatus.metrics[].value", "maxLength", 64),
    ("TrainingRuntime", "spec", "minProperties", 1),
    ("TrainingRuntime", "spec.template", "minProperties", 1),
    ("TrainingRuntime", "spec.mlPolicy.mpi.mpiImplementation", "enum", ["OpenMPI", ""]),
    ("TrainingRuntime", "spec.mlPolicy.mpi.sshAuthMountPath", "maxLength", 4096),
    (
        "TrainingRuntime",
        "spec.mlPolicy.torch.envInjection.targets",
        "x-kubernetes-list-map-keys",
        ["jobName"],
    ),
    ("TrainingRuntime", "spec.mlPolicy.torch.envInjection.targets", "maxItems", 16),
    (
        "TrainingRuntime",
        "spec.mlPolicy.torch.envInjection.targets[]",
        "required",
        ["containerNames", "jobName"],
    ),
    (
        "TrainingRuntime",
        "spec.mlPolicy.torch.envInjection.targets[].containerNames",
        "x-kubernetes-list-type",
        "set",
    ),
    ("TrainingRuntime", "spec.mlPolicy.torch.envInjection.targets[].containerNames", "minItems", 1),
    ("TrainingRuntime", "spec.mlPolicy.torch.envInjection.targets[].containerNames", "maxItems", 8),
    ("TrainingRuntime", "spec.mlPolicy.torch.envInjection.targets[].containerNames[]", "maxLength", 63),
    ("TrainingRuntime", "spec.podGroupPolicy.volcano.networkTopology.mode", "enum", ["hard", "soft"]),
    ("TrainingRuntime", "spec.template.spec.replicatedJobs", "x-kubernetes-list-map-keys", ["name"]),
    (
        "TrainingRuntime",
        "spec.template.spec.replicatedJobs[].template.spec.template.spec.containers",
        "x-kubernetes-list-map-keys",
        ["name"],
    ),
]


@pytest.mark.parametrize(
    ("kind", "path", "rule", "message"),
    CEL_RULES,
    ids=[f"{k}:{p or '<root>'}:{m[:30]}" for k, p, _, m in CEL_RULES],
)
def test_upstream_cel_rule_is_in_the_crd(
    crd_schema: Schema, kind: str, path: str, rule: str, message: str
) -> None:
    assert (rule, message) in rules(at(crd_schema(kind), path))


@pytest.mark.parametrize(("kind", "path", "default"), DEFAULTS, ids=[f"{k}:{p}" for k, p, _ in DEFAULTS])
def test_upstream_default_is_in_the_crd(crd_schema: Schema, kind: str, path: str, default: Any) -> None:
    assert at(crd_schema(kind), path)["default"] == default


@pytest.mark.parametrize(
    ("kind", "path", "keyword", "value"), KEYWORDS, ids=[f"{k}:{p}:{w}" for k, p, w, _ in KEYWORDS]
)
def test_upstream_bound_or_list_type_is_in_the_crd(
    crd_schema: Schema, kind: str, path: str, keyword: str, value: Any
) -> None:
    assert at(crd_schema(kind), path)[keyword] == value


# (kind, path): places where upstream v2.3.0's schema has no bound, although 0 or less is nonsense there. The
# schema matches upstream (a manifest upstream accepts is accepted). The TrainJob validation refuses the
# TrainJob's own counts below 1 with a field error (runtime.core); the runtimes' are left as upstream's.
# docs/compatibility.md says why.
UNBOUNDED_AS_UPSTREAM = [
    ("TrainJob", "spec.trainer.numNodes"),
    ("TrainJob", "spec.trainer.numProcPerNode"),
    ("TrainingRuntime", "spec.mlPolicy.numNodes"),
    ("TrainingRuntime", "spec.mlPolicy.mpi.numProcPerNode"),
    ("ClusterTrainingRuntime", "spec.mlPolicy.mpi.numProcPerNode"),
]


@pytest.mark.parametrize(
    ("kind", "path"), UNBOUNDED_AS_UPSTREAM, ids=[f"{k}:{p}" for k, p in UNBOUNDED_AS_UPSTREAM]
)
def test_counts_upstream_leaves_unbounded_carry_no_bound_here_either(
    crd_schema: Schema, kind: str, path: str
) -> None:
    node = at(crd_schema(kind), path)
    assert "minimum" not in node
    assert rules(node) == []


def test_the_mutable_parts_of_a_runtime_patch_carry_no_immutability_rule(crd_schema: Schema) -> None:
    pod_spec = at(crd_schema("TrainJob"), PATCH_POD_SPEC)
    for mutable in ("nodeSelector", "affinity", "tolerations", "schedulingGates"):
        assert IMMUTABLE not in rules(pod_spec["properties"][mutable]), mutable
    assert IMMUTABLE not in rules(at(crd_schema("TrainJob"), "spec.suspend"))
    assert IMMUTABLE not in rules(at(crd_schema("TrainJob"), "spec.runtimePatches"))


def test_crd_names_scopes_subresources_and_printer_columns_match_upstream(
    crds: dict[str, dict[str, Any]],
) -> None:
    expected = {
        "TrainJob": ("trainjobs", "trainjob", "TrainJobList", "Namespaced", True),
        "TrainingRuntime": (
            "trainingruntimes",
            "trainingruntime",
            "TrainingRuntimeList",
            "Namespaced",
            False,
        ),
        "ClusterTrainingRuntime": (
            "clustertrainingruntimes",
            "clustertrainingruntime",
            "ClusterTrainingRuntimeList",
            "Cluster",
            False,
        ),
    }
    assert sorted(crds) == sorted(expected)
    for kind, (plural, singular, list_kind, scope, status) in expected.items():
        spec = crds[kind]["spec"]
        assert crds[kind]["metadata"]["name"] == f"{plural}.trainer.kubeflow.org"
        assert spec["group"] == "trainer.kubeflow.org"
        assert spec["names"] == {"kind": kind, "listKind": list_kind, "plural": plural, "singular": singular}
        assert "shortNames" not in spec["names"] and "categories" not in spec["names"]
        assert spec["scope"] == scope
        (version,) = spec["versions"]
        assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
        assert version.get("subresources") == ({"status": {}} if status else None)
    (trainjob,) = crds["TrainJob"]["spec"]["versions"]
    assert trainjob["additionalPrinterColumns"] == [
        {"jsonPath": ".status.conditions[-1:].type", "name": "State", "type": "string"},
        {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
    ]


def walk(node: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if not isinstance(node, dict):
        return
    yield path, node
    for name, prop in node.get("properties", {}).items():
        yield from walk(prop, f"{path}.{name}")
    yield from walk(node.get("items"), f"{path}[]")
    yield from walk(node.get("additionalProperties"), f"{path}{{}}")
    for i, sub in enumerate(node.get("anyOf", ())):
        yield from walk(sub, f"{path}|{i}")


def test_no_schema_uses_preserve_unknown_fields_and_every_node_is_typed(crd_schema: Schema) -> None:
    for kind in ("TrainJob", "TrainingRuntime", "ClusterTrainingRuntime"):
        for path, node in walk(crd_schema(kind)):
            assert "x-kubernetes-preserve-unknown-fields" not in node, f"{kind}{path}"
            assert "type" in node or node.get("x-kubernetes-int-or-string"), f"{kind}{path}"
            assert "$ref" not in node, f"{kind}{path}"


def test_every_list_map_key_is_required_or_defaulted(crd_schema: Schema) -> None:
    # The API server refuses a CRD otherwise; server-side apply needs the keys to merge lists.
    for kind in ("TrainJob", "TrainingRuntime"):
        for path, node in walk(crd_schema(kind)):
            for key in node.get("x-kubernetes-list-map-keys", ()):
                items = node["items"]
                assert key in items.get("required", ()) or "default" in items["properties"][key], (
                    f"{kind}{path}.{key}"
                )


def test_embedded_pod_templates_keep_server_side_apply_list_semantics(crd_schema: Schema) -> None:
    pod = at(crd_schema("TrainingRuntime"), "spec.template.spec.replicatedJobs[].template.spec.template.spec")
    assert pod["properties"]["containers"]["x-kubernetes-list-map-keys"] == ["name"]
    assert pod["properties"]["containers"]["items"]["properties"]["env"]["x-kubernetes-list-map-keys"] == [
        "name"
    ]
    ports = pod["properties"]["containers"]["items"]["properties"]["ports"]
    assert ports["x-kubernetes-list-map-keys"] == ["containerPort", "protocol"]
    assert ports["items"]["properties"]["protocol"]["default"] == "TCP"
    assert pod["properties"]["nodeSelector"]["x-kubernetes-map-type"] == "atomic"
    limits = pod["properties"]["containers"]["items"]["properties"]["resources"]["properties"]["limits"]
    assert limits["additionalProperties"]["x-kubernetes-int-or-string"] is True
    meta = at(
        crd_schema("TrainingRuntime"), "spec.template.spec.replicatedJobs[].template.spec.template.metadata"
    )
    assert sorted(meta["properties"]) == ["annotations", "finalizers", "labels", "name", "namespace"]


def test_each_crd_is_well_under_the_etcd_request_limit(crds: dict[str, dict[str, Any]]) -> None:
    for kind, crd in crds.items():
        size = len(json.dumps(crd, separators=(",", ":")))
        assert size < 1024 * 1024, f"{kind}: {size} bytes"


# -- TypedDicts and schemas agree ----------------------------------------------------------------------


def _is_embedded(tp: Any, found: tuple[Marker, ...]) -> bool:
    embedded = (Embedded, EmbeddedJobSetSpec, EmbeddedObjectMeta)
    return any(isinstance(m, embedded) for m in (*found, *markers_of(tp)))


def _check_keywords(found: tuple[Marker, ...], node: dict[str, Any], path: str) -> None:
    for marker in found:
        for key, value in marker.schema_keywords().items():
            if key == "x-kubernetes-validations":
                for rule in value:
                    assert rule in node.get(key, []), f"{path}: {rule} missing"
            elif not isinstance(marker, Resource):
                assert node.get(key) == value, f"{path}: {key} is {node.get(key)!r}, marker says {value!r}"


def agree(
    gen_crds: ModuleType, tp: Any, node: dict[str, Any], path: str, extra: tuple[Marker, ...] = ()
) -> None:
    """Assert that the TypedDict type `tp` and the schema `node` describe the same thing."""
    base, found, _ = gen_crds.unwrap(tp)
    found = (*found, *extra)
    _check_keywords([m for m in found if not isinstance(m, Items)], node, path)  # type: ignore[arg-type]
    if _is_embedded(base, found):
        if typing.is_typeddict(base):
            # A partial TypedDict over a real schema: every key it types must exist there.
            subset(gen_crds, base, node, path)
        return
    origin = typing.get_origin(base)
    if typing.is_typeddict(base):
        assert node["type"] == "object", path
        _check_keywords(markers_of(base), node, path)  # type: ignore[arg-type]
        fields = gen_crds.typed_dict_fields(base)
        assert sorted(f.name for f in fields) == sorted(node.get("properties", {})), path
        assert sorted(f.name for f in fields if f.required) == node.get("required", []), path
        for field in fields:
            if path == "" and field.name in ("apiVersion", "kind", "metadata"):
                continue
            agree(gen_crds, field.type, node["properties"][field.name], f"{path}.{field.name}", field.markers)
    elif origin is list:
        assert node["type"] == "array", path
        items = tuple(m for marker in found if isinstance(marker, Items) for m in marker.markers)
        agree(gen_crds, typing.get_args(base)[0], node["items"], f"{path}[]", items)
    elif origin is dict:
        assert node["type"] == "object", path
        agree(gen_crds, typing.get_args(base)[1], node["additionalProperties"], f"{path}{{}}")
    else:
        expected = {bool: "boolean", int: "integer", float: "number", str: "string"}
        assert node["type"] == (expected[base] if origin is not typing.Literal else "string"), path


def subset(gen_crds: ModuleType, cls: type, node: dict[str, Any], path: str) -> None:
    for field in gen_crds.typed_dict_fields(cls):
        assert field.name in node.get("properties", {}), (
            f"{path}.{field.name} is typed but not in the real schema"
        )
        child = node["properties"][field.name]
        base, _, _ = gen_crds.unwrap(field.type)
        if typing.get_origin(base) is list:
            base, child = typing.get_args(base)[0], child["items"]
            base, _, _ = gen_crds.unwrap(base)
        if typing.is_typeddict(base):
            subset(gen_crds, base, child, f"{path}.{field.name}")


@pytest.mark.parametrize("root", v1alpha1.ROOT_KINDS, ids=lambda cls: cls.__name__)
def test_typed_dicts_and_committed_schema_agree(gen_crds: ModuleType, crd_schema: Schema, root: type) -> None:
    schema = crd_schema(root.__name__)
    agree(gen_crds, root, schema, "")
    assert schema["properties"]["metadata"] == {"type": "object"}


def test_root_kinds_are_the_three_resources_of_upstream_v2_3() -> None:
    # OptimizationJob is only a proposal in v2.3.0: no Go type, no CRD, nothing installed here either.
    assert [markers_of(cls)[0].kind for cls in v1alpha1.ROOT_KINDS] == [  # type: ignore[attr-defined]
        constants.TRAINJOB_KIND,
        constants.TRAINING_RUNTIME_KIND,
        constants.CLUSTER_TRAINING_RUNTIME_KIND,
    ]


def test_every_cel_marker_in_the_types_appears_in_some_crd(crd_schema: Schema, gen_crds: ModuleType) -> None:
    seen: set[tuple[str, str]] = set()
    for kind in ("TrainJob", "TrainingRuntime"):
        for _, node in walk(crd_schema(kind)):
            seen.update(rules(node))
    declared: set[tuple[str, str]] = set()
    for name in dir(v1alpha1):
        obj = getattr(v1alpha1, name)
        if isinstance(obj, type) and typing.is_typeddict(obj):
            for marker in markers_of(obj):
                if isinstance(marker, CEL):
                    declared.add((marker.rule, marker.message))
            for field in gen_crds.typed_dict_fields(obj):
                for marker in field.markers:
                    if isinstance(marker, CEL):
                        declared.add((marker.rule, marker.message))
    assert declared <= seen
    assert {(r, m) for _, _, r, m in CEL_RULES} <= seen
