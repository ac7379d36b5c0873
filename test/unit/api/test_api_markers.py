"""Markers translate to exactly the CRD schema keywords controller-gen writes for the Go markers."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest

from runtime.api import markers
from runtime.api.markers import (
    CEL,
    Default,
    Embedded,
    Enum,
    Format,
    Immutable,
    Items,
    ListType,
    MapType,
    Marker,
    Maximum,
    MaxItems,
    MaxLength,
    MaxProperties,
    Minimum,
    MinItems,
    MinLength,
    MinProperties,
    Pattern,
    PrinterColumn,
    Resource,
    markers_of,
    schema,
)

CASES: list[tuple[str, Marker, dict[str, Any]]] = [
    ("MinLength", MinLength(1), {"minLength": 1}),
    ("MaxLength", MaxLength(253), {"maxLength": 253}),
    ("Pattern", Pattern("^a$"), {"pattern": "^a$"}),
    ("Minimum", Minimum(0), {"minimum": 0}),
    ("Maximum", Maximum(100), {"maximum": 100}),
    ("MinItems", MinItems(1), {"minItems": 1}),
    ("MaxItems", MaxItems(16), {"maxItems": 16}),
    ("MinProperties", MinProperties(1), {"minProperties": 1}),
    ("MaxProperties", MaxProperties(3), {"maxProperties": 3}),
    ("Enum keeps the written order", Enum("OpenMPI", ""), {"enum": ["OpenMPI", ""]}),
    ("Default of a scalar", Default(60), {"default": 60}),
    ("Default of an object", Default({"random": {}}), {"default": {"random": {}}}),
    ("Default false is kept", Default(False), {"default": False}),
    ("Format", Format("int32"), {"format": "int32"}),
    (
        "CEL",
        CEL("self >= 1", "must be >= 1"),
        {"x-kubernetes-validations": [{"message": "must be >= 1", "rule": "self >= 1"}]},
    ),
    (
        "Immutable is upstream's transition rule",
        Immutable(),
        {"x-kubernetes-validations": [{"message": "field is immutable", "rule": "self == oldSelf"}]},
    ),
    ("ListType atomic", ListType("atomic"), {"x-kubernetes-list-type": "atomic"}),
    ("ListType set", ListType("set"), {"x-kubernetes-list-type": "set"}),
    (
        "ListType map carries its keys in order",
        ListType("map", ("containerPort", "protocol")),
        {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["containerPort", "protocol"]},
    ),
    ("MapType", MapType("atomic"), {"x-kubernetes-map-type": "atomic"}),
    ("Items contributes nothing to the list node itself", Items(MaxLength(5)), {}),
    (
        "Embedded contributes nothing: the generator substitutes the schema",
        Embedded("io.k8s.api.core.v1.EnvVar"),
        {},
    ),
]


@pytest.mark.parametrize(("marker", "expected"), [(m, e) for _, m, e in CASES], ids=[c[0] for c in CASES])
def test_marker_translates_to_its_schema_keywords(marker: Marker, expected: dict[str, Any]) -> None:
    assert marker.schema_keywords() == expected


def test_a_map_list_without_keys_is_refused() -> None:
    with pytest.raises(ValueError, match="map list needs keys"):
        ListType("map")


def test_keys_on_a_non_map_list_are_refused() -> None:
    with pytest.raises(ValueError, match="only a map list has keys"):
        ListType("set", ("name",))


def test_markers_are_frozen_values_that_compare_by_content() -> None:
    assert Immutable() == CEL("self == oldSelf", "field is immutable")
    assert Enum("a", "b") == Enum("a", "b")
    with pytest.raises(AttributeError):
        MaxLength(1).value = 2  # type: ignore[misc]


def test_schema_attaches_type_level_markers_that_markers_of_reads_back() -> None:
    rule = CEL("has(self.a)", "a is required")

    @schema(rule, MinProperties(1))
    class Marked(TypedDict, total=False):
        a: str

    class Unmarked(TypedDict, total=False):
        a: str

    assert markers_of(Marked) == (rule, MinProperties(1))
    assert markers_of(Unmarked) == ()


def test_markers_of_does_not_inherit_a_parents_markers() -> None:
    @schema(MinProperties(1))
    class Parent:
        pass

    class Child(Parent):
        pass

    assert markers_of(Child) == ()


def test_printer_column_renders_as_an_additional_printer_column() -> None:
    assert PrinterColumn("State", "string", ".status.conditions[-1:].type").to_crd() == {
        "jsonPath": ".status.conditions[-1:].type",
        "name": "State",
        "type": "string",
    }
    assert PrinterColumn("Wide", "integer", ".spec.x", description="x", priority=1).to_crd() == {
        "description": "x",
        "jsonPath": ".spec.x",
        "name": "Wide",
        "priority": 1,
        "type": "integer",
    }


def test_resource_defaults_to_namespaced_without_subresources() -> None:
    resource = Resource(kind="K", plural="ks", singular="k", list_kind="KList")
    assert resource.scope == "Namespaced"
    assert resource.status_subresource is False
    assert resource.printer_columns == ()


def test_scalar_aliases_carry_controller_gens_formats() -> None:
    assert markers.Int32.__metadata__ == (Format("int32"),)
    assert markers.Int64.__metadata__ == (Format("int64"),)
    assert markers.Time.__metadata__ == (Format("date-time"),)
