"""The CRD generator: TypedDict walking, OpenAPI inlining, defaults, structural checks, drift detection.

Uses small hand-written OpenAPI documents in kube-apiserver's shape (`components.schemas`, `allOf: [$ref]`
wrappers, zero-value defaults, patch keywords) so each rule is seen in isolation; the real documents are
exercised by test/integration/test_crd_drift.py.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Annotated, Any, Literal, NotRequired, Required, TypedDict

import pytest
import yaml

from runtime.api.markers import (
    CEL,
    Default,
    Embedded,
    EmbeddedObjectMeta,
    Immutable,
    Int32,
    Items,
    ListType,
    MaxItems,
    MaxLength,
    MinProperties,
    schema,
)


def ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


CORE = "io.k8s.api.core.v1."
DOCUMENT: dict[str, Any] = {
    "components": {
        "schemas": {
            CORE + "EnvVar": {
                "description": "EnvVar represents an environment variable present in a Container.",
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "default": ""},
                    "value": {"type": "string"},
                    "valueFrom": {"description": "Source.", "allOf": [ref(CORE + "EnvVarSource")]},
                },
            },
            CORE + "EnvVarSource": {
                "type": "object",
                "properties": {"secretKeyRef": {"allOf": [ref(CORE + "SecretKeySelector")]}},
            },
            CORE + "SecretKeySelector": {
                "type": "object",
                "required": ["key"],
                "properties": {
                    "key": {"type": "string", "default": ""},
                    "name": {"type": "string", "default": ""},
                    "optional": {"type": "boolean"},
                },
                "x-kubernetes-map-type": "atomic",
            },
            CORE + "LocalObjectReference": {
                "type": "object",
                "properties": {"name": {"type": "string", "default": ""}},
                "x-kubernetes-map-type": "atomic",
            },
            CORE + "Container": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "default": ""},
                    "env": {
                        "type": "array",
                        "items": {"default": {}, "allOf": [ref(CORE + "EnvVar")]},
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "x-kubernetes-patch-merge-key": "name",
                        "x-kubernetes-patch-strategy": "merge",
                    },
                    "ports": {
                        "type": "array",
                        "items": {"default": {}, "allOf": [ref(CORE + "ContainerPort")]},
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["containerPort", "protocol"],
                    },
                    "resources": {"default": {}, "allOf": [ref(CORE + "ResourceRequirements")]},
                    "imagePullPolicy": {"type": "string", "enum": ["Always", "IfNotPresent", "Never"]},
                },
            },
            CORE + "ContainerPort": {
                "type": "object",
                "required": ["containerPort"],
                "properties": {
                    "containerPort": {"type": "integer", "format": "int32", "default": 0},
                    "protocol": {"type": "string", "default": "TCP", "enum": ["SCTP", "TCP", "UDP"]},
                },
            },
            CORE + "ResourceRequirements": {
                "type": "object",
                "properties": {
                    "limits": {
                        "type": "object",
                        "additionalProperties": ref("io.k8s.apimachinery.pkg.api.resource.Quantity"),
                    }
                },
            },
            CORE + "Probe": {
                "type": "object",
                "properties": {"port": ref("io.k8s.apimachinery.pkg.util.intstr.IntOrString")},
            },
            CORE + "PodTemplateSpec": {
                "type": "object",
                "properties": {
                    "metadata": {
                        "default": {},
                        "allOf": [ref("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")],
                    },
                },
            },
            CORE + "Pulls": {
                "type": "object",
                "properties": {
                    "secrets": {
                        "type": "array",
                        "items": {"default": {}, "allOf": [ref(CORE + "LocalObjectReference")]},
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                    }
                },
            },
            CORE + "AzureDiskVolumeSource": {
                "type": "object",
                "required": ["diskName"],
                "properties": {
                    "diskName": {"type": "string", "default": ""},
                    "cachingMode": {"type": "string", "default": "ReadWrite", "description": "Caching."},
                    "fsType": {"type": "string", "default": "ext4"},
                    "kind": {"type": "string", "default": "Shared"},
                },
            },
            CORE + "ConfigMapVolumeSource": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "default": ""},
                    "optional": {"type": "boolean"},
                },
            },
            CORE + "ConfigMap": {
                "type": "object",
                "properties": {
                    "apiVersion": {"type": "string", "description": "The version of the schema."},
                    "kind": {"type": "string", "description": "The REST resource."},
                    "data": {"type": "object", "additionalProperties": {"type": "string"}},
                },
            },
            CORE + "Loop": {"type": "object", "properties": {"next": {"allOf": [ref(CORE + "Loop")]}}},
            CORE + "Odd": {"type": "object", "properties": {"x": {"type": "string", "readOnly": True}}},
            "io.k8s.apimachinery.pkg.api.resource.Quantity": {
                "oneOf": [{"type": "string"}, {"type": "number"}]
            },
            "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {
                "format": "int-or-string",
                "oneOf": [{"type": "integer"}, {"type": "string"}],
            },
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "managedFields": {"type": "array"}},
            },
        }
    }
}
JOBSET_CRD: dict[str, Any] = {
    "kind": "CustomResourceDefinition",
    "spec": {
        "versions": [
            {
                "name": "v1alpha2",
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "description": "JobSetSpec defines the desired state of JobSet",
                                "type": "object",
                                "properties": {
                                    "description": {
                                        "type": "string",
                                        "description": "a field named description",
                                    },
                                    "suspend": {"type": "boolean"},
                                },
                                "x-kubernetes-validations": [{"rule": "true", "message": "kept"}],
                            }
                        },
                    }
                },
            }
        ]
    },
}


@pytest.fixture
def inliner(gen_crds: ModuleType) -> Any:
    return gen_crds.OpenAPIInliner(DOCUMENT)


@pytest.fixture
def builder(gen_crds: ModuleType, inliner: Any) -> Any:
    return gen_crds.SchemaBuilder(inliner, JOBSET_CRD)


# -- OpenAPI inlining --------------------------------------------------------------------------------------


def test_refs_are_inlined_descriptions_kept_and_patch_keywords_and_enums_dropped(
    gen_crds: ModuleType, inliner: Any
) -> None:
    env = gen_crds.finalize(inliner.component(CORE + "EnvVar"))
    assert env == {
        "description": "EnvVar represents an environment variable present in a Container.",
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": {"type": "string"},
            "value": {"type": "string"},
            "valueFrom": {
                "description": "Source.",  # the property's own description wins over its type's
                "type": "object",
                "properties": {
                    "secretKeyRef": {
                        "type": "object",
                        "required": ["key"],
                        "properties": {
                            "key": {"type": "string"},
                            "name": {"type": "string", "default": ""},
                            "optional": {"type": "boolean"},
                        },
                        "x-kubernetes-map-type": "atomic",
                    }
                },
            },
        },
    }


def test_list_types_and_map_keys_survive_while_patch_strategy_goes(
    gen_crds: ModuleType, inliner: Any
) -> None:
    env = gen_crds.finalize(inliner.component(CORE + "Container"))["properties"]["env"]
    assert env["x-kubernetes-list-type"] == "map"
    assert env["x-kubernetes-list-map-keys"] == ["name"]
    assert "x-kubernetes-patch-merge-key" not in env
    assert "x-kubernetes-patch-strategy" not in env


def test_explicit_non_zero_defaults_survive_and_enums_are_dropped(gen_crds: ModuleType, inliner: Any) -> None:
    container = gen_crds.finalize(inliner.component(CORE + "Container"))
    protocol = container["properties"]["ports"]["items"]["properties"]["protocol"]
    assert protocol == {"type": "string", "default": "TCP"}
    assert container["properties"]["imagePullPolicy"] == {"type": "string"}


def test_defaults_kube_openapi_takes_from_a_default_ref_are_dropped_as_controller_gen_drops_them(
    gen_crds: ModuleType, inliner: Any
) -> None:
    disk = gen_crds.finalize(inliner.component(CORE + "AzureDiskVolumeSource"))["properties"]
    assert disk["cachingMode"] == {"type": "string", "description": "Caching."}
    assert disk["kind"] == {"type": "string"}
    assert disk["fsType"] == {"type": "string", "default": "ext4"}  # a literal `+default`: kept


def test_a_struct_embedding_an_atomic_struct_is_atomic_as_controller_gen_makes_it(
    gen_crds: ModuleType, inliner: Any
) -> None:
    config_map = gen_crds.finalize(inliner.component(CORE + "ConfigMapVolumeSource"))
    assert config_map["x-kubernetes-map-type"] == "atomic"
    assert "x-kubernetes-map-type" not in gen_crds.finalize(inliner.component(CORE + "ContainerPort"))


def test_type_meta_of_a_root_carries_the_descriptions_of_the_core_kinds(inliner: Any) -> None:
    assert inliner.type_meta() == {
        "apiVersion": {"type": "string", "description": "The version of the schema."},
        "kind": {"type": "string", "description": "The REST resource."},
    }


def test_go_zero_defaults_on_required_fields_items_and_structs_are_dropped(
    gen_crds: ModuleType, inliner: Any
) -> None:
    container = gen_crds.finalize(inliner.component(CORE + "Container"))
    assert "default" not in container["properties"]["name"]
    assert "default" not in container["properties"]["resources"]
    assert "default" not in container["properties"]["env"]["items"]
    assert "default" not in container["properties"]["ports"]["items"]["properties"]["containerPort"]


def test_an_optional_list_map_key_keeps_the_zero_default_the_api_server_requires(
    gen_crds: ModuleType, inliner: Any
) -> None:
    secrets = gen_crds.finalize(inliner.component(CORE + "Pulls"))["properties"]["secrets"]
    assert secrets["items"]["properties"]["name"] == {"type": "string", "default": ""}


def test_quantity_becomes_int_or_string_with_controller_gens_pattern(
    gen_crds: ModuleType, inliner: Any
) -> None:
    limits = inliner.component(CORE + "ResourceRequirements")["properties"]["limits"]
    assert limits["additionalProperties"] == {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": gen_crds.QUANTITY_PATTERN,
        "x-kubernetes-int-or-string": True,
    }


def test_int_or_string_becomes_x_kubernetes_int_or_string(inliner: Any) -> None:
    assert inliner.component(CORE + "Probe")["properties"]["port"] == {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
    }


def test_object_meta_in_a_template_keeps_only_the_five_controller_gen_fields(
    gen_crds: ModuleType, inliner: Any
) -> None:
    metadata = gen_crds.finalize(inliner.component(CORE + "PodTemplateSpec"))["properties"]["metadata"]
    assert sorted(metadata["properties"]) == ["annotations", "finalizers", "labels", "name", "namespace"]
    assert metadata["properties"]["labels"] == {"type": "object", "additionalProperties": {"type": "string"}}


def test_a_recursive_schema_is_an_error_not_a_shortcut(gen_crds: ModuleType, inliner: Any) -> None:
    with pytest.raises(gen_crds.GenerationError, match=r"recursive schema .*Loop -> .*Loop"):
        inliner.component(CORE + "Loop")


def test_an_unknown_openapi_keyword_is_an_error(gen_crds: ModuleType, inliner: Any) -> None:
    with pytest.raises(gen_crds.GenerationError, match="unsupported OpenAPI keyword 'readOnly'"):
        inliner.component(CORE + "Odd")


def test_a_missing_component_is_named_in_the_error(gen_crds: ModuleType, inliner: Any) -> None:
    with pytest.raises(gen_crds.GenerationError, match=r"io\.k8s\.api\.core\.v1\.Nope not found"):
        inliner.component(CORE + "Nope")


def test_inlined_components_are_independent_copies(inliner: Any) -> None:
    first = inliner.component(CORE + "EnvVar")
    first["properties"]["name"]["maxLength"] = 1
    assert "maxLength" not in inliner.component(CORE + "EnvVar")["properties"]["name"]


def test_jobset_spec_is_taken_from_its_crd_with_its_descriptions(gen_crds: ModuleType) -> None:
    spec = gen_crds.jobset_spec_schema(JOBSET_CRD, "v1alpha2")
    assert spec == JOBSET_CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec is not JOBSET_CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert gen_crds.strip_descriptions(spec) == {
        "type": "object",
        "properties": {"description": {"type": "string"}, "suspend": {"type": "boolean"}},
        "x-kubernetes-validations": [{"rule": "true", "message": "kept"}],
    }
    with pytest.raises(gen_crds.GenerationError, match="no version v1beta1"):
        gen_crds.jobset_spec_schema(JOBSET_CRD, "v1beta1")


# -- TypedDict walking ---------------------------------------------------------------------------------


class Inner(TypedDict, total=False):
    """Inner thing,
    described over two lines.

    A second paragraph.
    """

    name: Required[Annotated[str, MaxLength(10)]]
    """The name,
       on two lines."""
    count: Int32


@schema(MinProperties(1), CEL("has(self.inner)", "inner is required"))
class Outer(TypedDict, total=False):
    inner: Annotated[Inner, Immutable()]
    tags: Annotated[list[str], ListType("set"), MaxItems(4), Items(MaxLength(63))]
    labels: dict[str, str]
    mode: Annotated[Literal["a", "b"], Default("a")]
    ratio: float
    enabled: bool


class Schemaless(TypedDict, total=False):
    env: Annotated[list[dict[str, Any]], ListType("map", ("name",))]


class Total(TypedDict):
    a: str
    b: NotRequired[str]


def test_a_typed_dict_becomes_an_object_with_sorted_required_keys_and_type_markers(builder: Any) -> None:
    out = builder.for_object(Inner)
    assert out == {
        "type": "object",
        "description": "Inner thing, described over two lines.\n\nA second paragraph.",
        "properties": {
            "name": {"type": "string", "maxLength": 10, "description": "The name, on two lines."},
            "count": {"type": "integer", "format": "int32"},
        },
        "required": ["name"],
    }


def test_a_field_without_a_docstring_takes_its_types_description(builder: Any) -> None:
    props = builder.for_object(Outer)["properties"]
    assert props["inner"]["description"] == "Inner thing, described over two lines.\n\nA second paragraph."
    assert "description" not in props["tags"]


def test_a_class_whose_source_cannot_be_read_has_no_field_docs(gen_crds: ModuleType) -> None:
    made = type("Made", (dict,), {"__annotations__": {"a": str}, "__module__": "nowhere"})
    assert gen_crds.field_docs(made) == {}


def test_descriptions_of_several_lines_are_written_as_literal_blocks(gen_crds: ModuleType) -> None:
    text = gen_crds.dump_yaml({"description": "one\n\ntwo", "short": "one line"})
    assert "description: |-\n  one\n\n  two\n" in text
    assert "short: one line\n" in text
    assert yaml.safe_load(text) == {"description": "one\n\ntwo", "short": "one line"}


def test_totality_and_not_required_decide_required_keys(builder: Any) -> None:
    assert builder.for_object(Total)["required"] == ["a"]


def test_field_markers_merge_with_type_level_markers_of_the_field_type(builder: Any) -> None:
    out = builder.for_object(Outer)
    assert out["minProperties"] == 1
    assert out["x-kubernetes-validations"] == [{"message": "inner is required", "rule": "has(self.inner)"}]
    inner = out["properties"]["inner"]
    assert inner["x-kubernetes-validations"] == [{"message": "field is immutable", "rule": "self == oldSelf"}]
    assert inner["required"] == ["name"]


def test_list_markers_apply_to_the_list_and_items_markers_to_each_item(builder: Any) -> None:
    tags = builder.for_object(Outer)["properties"]["tags"]
    assert tags == {
        "type": "array",
        "items": {"type": "string", "maxLength": 63},
        "x-kubernetes-list-type": "set",
        "maxItems": 4,
    }


def test_scalars_maps_and_literals_map_to_openapi_types(builder: Any) -> None:
    props = builder.for_object(Outer)["properties"]
    assert props["labels"] == {"type": "object", "additionalProperties": {"type": "string"}}
    assert props["mode"] == {"type": "string", "default": "a"}
    assert props["ratio"] == {"type": "number"}
    assert props["enabled"] == {"type": "boolean"}


def test_an_unmarked_dict_of_any_is_refused_rather_than_left_schemaless(
    gen_crds: ModuleType, builder: Any
) -> None:
    with pytest.raises(gen_crds.GenerationError, match=r"dict\[str, Any\] needs an Embedded"):
        builder.for_object(Schemaless)


EnvVarStub = Annotated[dict[str, Any], Embedded(CORE + "EnvVar")]


@schema(Embedded(CORE + "LocalObjectReference"))
class RefStub(TypedDict, total=False):
    name: str


@schema(EmbeddedObjectMeta())
class MetaStub(TypedDict, total=False):
    labels: dict[str, str]


class Holder(TypedDict, total=False):
    env: Annotated[list[EnvVarStub], ListType("map", ("name",)), MaxItems(128)]
    ref: RefStub
    metadata: MetaStub


def test_embedded_markers_substitute_the_external_schema(builder: Any) -> None:
    out = builder.for_object(Holder)["properties"]
    assert out["env"]["items"]["required"] == ["name"]
    assert out["env"]["maxItems"] == 128
    assert out["ref"]["x-kubernetes-map-type"] == "atomic"
    assert sorted(out["metadata"]["properties"]) == [
        "annotations",
        "finalizers",
        "labels",
        "name",
        "namespace",
    ]


def test_unions_are_refused(gen_crds: ModuleType, builder: Any) -> None:
    with pytest.raises(gen_crds.GenerationError, match="unions have no structural schema"):
        builder.for_type(str | int)


def test_structural_check_refuses_preserve_unknown_fields_and_typeless_nodes(gen_crds: ModuleType) -> None:
    with pytest.raises(gen_crds.GenerationError, match="preserve-unknown-fields"):
        gen_crds.check_structural(
            {
                "type": "object",
                "properties": {"a": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            }
        )
    with pytest.raises(gen_crds.GenerationError, match=r"\.a\[\*\]: schema without a type"):
        gen_crds.check_structural({"type": "object", "properties": {"a": {"type": "array", "items": {}}}})
    gen_crds.check_structural({"type": "object", "properties": {"q": {"x-kubernetes-int-or-string": True}}})


def test_a_list_map_key_that_is_neither_required_nor_defaulted_is_an_error(gen_crds: ModuleType) -> None:
    bad = {
        "type": "array",
        "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "properties": {"name": {"type": "string"}}},
    }
    with pytest.raises(gen_crds.GenerationError, match="must be required or have a default"):
        gen_crds.finalize(bad)


# -- The real API types, with stub external schemas -----------------------------------------------------


def stub_document(gen_crds: ModuleType) -> dict[str, Any]:
    """Every core/v1 component the Trainer API embeds, as an empty object (enough to walk our own types)."""
    names = [
        "Affinity",
        "Container",
        "EnvVar",
        "LocalObjectReference",
        "PodSchedulingGate",
        "PodSecurityContext",
        "ResourceRequirements",
        "SecurityContext",
        "Toleration",
        "Volume",
        "VolumeMount",
    ]
    schemas = {
        CORE + name: {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
        for name in names
    }
    return {"components": {"schemas": schemas}}


def test_generation_is_deterministic_and_writes_one_file_per_kind(
    gen_crds: ModuleType, tmp_path: Path
) -> None:
    jobset = {
        "spec": {
            "versions": [
                {
                    "name": "v1alpha2",
                    "schema": {"openAPIV3Schema": {"properties": {"spec": {"type": "object"}}}},
                }
            ]
        }
    }
    first = gen_crds.generate(stub_document(gen_crds), jobset)
    second = gen_crds.generate(stub_document(gen_crds), jobset)
    assert first == second
    assert sorted(first) == [
        "trainer.kubeflow.org_clustertrainingruntimes.yaml",
        "trainer.kubeflow.org_trainingruntimes.yaml",
        "trainer.kubeflow.org_trainjobs.yaml",
    ]
    for text in first.values():
        assert text.startswith(gen_crds.HEADER)
        assert "&id" not in text and "*id" not in text  # no YAML anchors or aliases
        (crd,) = [d for d in yaml.safe_load_all(text) if d]
        assert crd["kind"] == "CustomResourceDefinition"


def test_check_reports_drift_as_a_diff_and_nothing_when_up_to_date(
    gen_crds: ModuleType, tmp_path: Path
) -> None:
    generated, committed = tmp_path / "generated", tmp_path / "committed"
    gen_crds.write(
        {"trainer.kubeflow.org_a.yaml": "x: 1\n", "trainer.kubeflow.org_b.yaml": "y: 1\n"}, generated
    )
    gen_crds.write(
        {"trainer.kubeflow.org_a.yaml": "x: 1\n", "trainer.kubeflow.org_b.yaml": "y: 2\n"}, committed
    )
    (committed / "trainer.kubeflow.org_stale.yaml").write_text("z: 1\n")
    lines = "".join(gen_crds.diff(generated, committed))
    assert "-y: 2\n+y: 1\n" in lines
    assert "-z: 1" in lines
    assert "trainer.kubeflow.org_a.yaml" not in lines
    # Writing removes the CRD files that are no longer generated (a kind taken out of the API).
    gen_crds.write(
        {"trainer.kubeflow.org_a.yaml": "x: 1\n", "trainer.kubeflow.org_b.yaml": "y: 1\n"}, committed
    )
    assert not (committed / "trainer.kubeflow.org_stale.yaml").exists()
    assert list(gen_crds.diff(generated, committed)) == []


def test_check_against_a_saved_document_exits_zero_when_up_to_date_and_one_on_drift(
    gen_crds: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    jobset = {
        "kind": "CustomResourceDefinition",
        "spec": {
            "versions": [
                {
                    "name": "v1alpha2",
                    "schema": {"openAPIV3Schema": {"properties": {"spec": {"type": "object"}}}},
                }
            ]
        },
    }
    (tmp_path / "api__v1.json").write_text(json.dumps(stub_document(gen_crds)))
    (tmp_path / "jobset.yaml").write_text(yaml.safe_dump(jobset))
    out = tmp_path / "crd"
    common = [
        "--openapi-dir",
        str(tmp_path),
        "--jobset-crd",
        str(tmp_path / "jobset.yaml"),
        "--output-dir",
        str(out),
    ]
    assert gen_crds.main(common) == 0
    assert gen_crds.main([*common, "--check"]) == 0
    path = out / "trainer.kubeflow.org_trainjobs.yaml"
    path.write_text(path.read_text().replace("maxItems: 16", "maxItems: 17"))
    assert gen_crds.main([*common, "--check"]) == 1
    assert "+                maxItems: 16" in capsys.readouterr().out


def test_the_figures_printed_for_a_crd_count_its_descriptions(gen_crds: ModuleType) -> None:
    text = gen_crds.dump_yaml(
        {
            "kind": "CustomResourceDefinition",
            "spec": {
                "description": "top",
                "properties": {"description": {"type": "string", "description": "x"}},
            },
        }
    )
    assert gen_crds.measure(text).endswith("KiB JSON, 2 descriptions")
