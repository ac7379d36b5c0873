"""Validation markers: the metadata attached to API types that the CRD generator turns into schema.

Go origin: controller-gen's `+kubebuilder:validation:*`, `+kubebuilder:default`, `+listType`/`+listMapKey`,
`+mapType`, `+kubebuilder:validation:XValidation` and `+kubebuilder:resource`/`printcolumn` comments
(sigs.k8s.io/controller-tools `pkg/crd/markers`). Here a marker is a small frozen value placed in
`typing.Annotated[...]` metadata on a TypedDict field, or attached to a TypedDict class with `@schema(...)`.

Guarantees:
- Markers are inert data; nothing here validates objects. `hack/gen-crds.py` reads them through
  `typing.get_type_hints(include_extras=True)` and emits the structural schema; the API server enforces it.
- Every marker maps to exactly one OpenAPI v3 / CRD schema keyword (`schema_keywords()`), so the translation
  is a table that tests can walk.
- `Embedded` and `EmbeddedJobSetSpec` name a schema taken from outside (the kube-apiserver's OpenAPI v3
  document, JobSet's CRD) at generation time; the TypedDict behind them only types the fields our code reads.

Deliberately missing: markers nobody in this API uses (`XIntOrString` on our own fields, `Type` overrides,
`EmbeddedResource`, `Schemaless`, `ExactlyOneOf`), a description marker (a field's description is its
attribute docstring, which the generator reads from the source), and any runtime validation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeVar

__all__ = [
    "CEL",
    "Default",
    "Embedded",
    "EmbeddedJobSetSpec",
    "EmbeddedObjectMeta",
    "Enum",
    "Format",
    "Immutable",
    "Int32",
    "Int64",
    "Items",
    "ListType",
    "MapType",
    "Marker",
    "MaxItems",
    "MaxLength",
    "MaxProperties",
    "Maximum",
    "MinItems",
    "MinLength",
    "MinProperties",
    "Minimum",
    "Pattern",
    "PrinterColumn",
    "Resource",
    "Time",
    "markers_of",
    "schema",
]


class Marker:
    """Base of every marker: `schema_keywords()` is its contribution to the schema node it annotates."""

    __slots__ = ()

    def schema_keywords(self) -> dict[str, Any]:
        return {}


@dataclass(frozen=True, slots=True)
class MinLength(Marker):
    value: int

    def schema_keywords(self) -> dict[str, Any]:
        return {"minLength": self.value}


@dataclass(frozen=True, slots=True)
class MaxLength(Marker):
    value: int

    def schema_keywords(self) -> dict[str, Any]:
        return {"maxLength": self.value}


@dataclass(frozen=True, slots=True)
class Pattern(Marker):
    regex: str

    def schema_keywords(self) -> dict[str, Any]:
        return {"pattern": self.regex}


@dataclass(frozen=True, slots=True)
class Minimum(Marker):
    value: int

    def schema_keywords(self) -> dict[str, Any]:
        return {"minimum": self.value}


@dataclass(frozen=True, slots=True)
class Maximum(Marker):
    value: int

    def schema_keywords(self) -> dict[str, Any]:
        return {"maximum": self.value}


@dataclass(frozen=True, slots=True)
class MinItems(Marker):
    value: int

    def schema_keywords(self) -> dict[str, Any]:
        return {"minItems": self.value}


@dataclass(frozen=True, slots=True)
class MaxItems(Marker):
    value: int

    def schema_keywords(self) -> dict[str, Any]:
        return {"maxItems": self.value}


@dataclass(frozen=True, slots=True)
class MinProperties(Marker):
    value: int

    def schema_keywords(self) -> dict[str, Any]:
        return {"minProperties": self.value}


@dataclass(frozen=True, slots=True)
class MaxProperties(Marker):
    value: int

    def schema_keywords(self) -> dict[str, Any]:
        return {"maxProperties": self.value}


@dataclass(frozen=True, slots=True, init=False)
class Enum(Marker):
    """`+kubebuilder:validation:Enum=a;b`: the allowed values, in the order written."""

    values: tuple[Any, ...]

    def __init__(self, *values: Any) -> None:
        object.__setattr__(self, "values", values)

    def schema_keywords(self) -> dict[str, Any]:
        return {"enum": list(self.values)}


@dataclass(frozen=True, slots=True)
class Default(Marker):
    """`+kubebuilder:default=...`: applied by the API server to absent fields (not to explicit nulls)."""

    value: Any

    def schema_keywords(self) -> dict[str, Any]:
        return {"default": self.value}


@dataclass(frozen=True, slots=True)
class Format(Marker):
    """OpenAPI `format` (`int32`, `int64`, `date-time`), as controller-gen derives it from Go types."""

    value: str

    def schema_keywords(self) -> dict[str, Any]:
        return {"format": self.value}


@dataclass(frozen=True, slots=True)
class CEL(Marker):
    """`+kubebuilder:validation:XValidation:rule=...,message=...`: one `x-kubernetes-validations` entry."""

    rule: str
    message: str

    def schema_keywords(self) -> dict[str, Any]:
        return {"x-kubernetes-validations": [{"message": self.message, "rule": self.rule}]}


def Immutable() -> CEL:
    """The transition rule upstream puts on immutable fields: `self == oldSelf`, "field is immutable"."""
    return CEL("self == oldSelf", "field is immutable")


@dataclass(frozen=True, slots=True)
class ListType(Marker):
    """`+listType` (`atomic`, `set`, `map`) and, for maps, `+listMapKey` (in order)."""

    kind: Literal["atomic", "set", "map"]
    keys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.kind == "map") != bool(self.keys):
            raise ValueError("a map list needs keys, and only a map list has keys")

    def schema_keywords(self) -> dict[str, Any]:
        out: dict[str, Any] = {"x-kubernetes-list-type": self.kind}
        if self.keys:
            out["x-kubernetes-list-map-keys"] = list(self.keys)
        return out


@dataclass(frozen=True, slots=True)
class MapType(Marker):
    """`+mapType` (`atomic`, `granular`) for objects and maps."""

    kind: Literal["atomic", "granular"]

    def schema_keywords(self) -> dict[str, Any]:
        return {"x-kubernetes-map-type": self.kind}


@dataclass(frozen=True, slots=True, init=False)
class Items(Marker):
    """`+kubebuilder:validation:items:...`: markers applied to each item of a list."""

    markers: tuple[Marker, ...]

    def __init__(self, *markers: Marker) -> None:
        object.__setattr__(self, "markers", markers)

    def schema_keywords(self) -> dict[str, Any]:
        return {}


@dataclass(frozen=True, slots=True)
class Embedded(Marker):
    """The schema of this type is the kube-apiserver's OpenAPI v3 component of that name, inlined.

    The name is the OpenAPI definition name, e.g. `io.k8s.api.core.v1.PodSpec`.
    """

    definition: str


@dataclass(frozen=True, slots=True)
class EmbeddedJobSetSpec(Marker):
    """The schema of this type is `spec` of JobSet's own CRD (`jobset.x-k8s.io`, served version `version`)."""

    version: str = "v1alpha2"


@dataclass(frozen=True, slots=True)
class EmbeddedObjectMeta(Marker):
    """ObjectMeta embedded in a template, typed the way controller-gen does it with
    `generateEmbeddedObjectMeta=true`: only labels, annotations, name, namespace and finalizers."""


@dataclass(frozen=True, slots=True)
class PrinterColumn:
    """`+kubebuilder:printcolumn`: one `additionalPrinterColumns` entry."""

    name: str
    type: str
    json_path: str
    description: str = ""
    priority: int = 0

    def to_crd(self) -> dict[str, Any]:
        out: dict[str, Any] = {"jsonPath": self.json_path, "name": self.name, "type": self.type}
        if self.description:
            out["description"] = self.description
        if self.priority:
            out["priority"] = self.priority
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Resource(Marker):
    """Marks a TypedDict as the root of a CRD: names, scope, subresources and printer columns."""

    kind: str
    plural: str
    singular: str
    list_kind: str
    scope: Literal["Namespaced", "Cluster"] = "Namespaced"
    status_subresource: bool = False
    printer_columns: tuple[PrinterColumn, ...] = field(default=())


# Go scalar types that carry a format in controller-gen's output.
Int32 = Annotated[int, Format("int32")]
Int64 = Annotated[int, Format("int64")]
Time = Annotated[str, Format("date-time")]
"""metav1.Time on the wire: an RFC 3339 string."""

_T = TypeVar("_T")
_MARKERS_ATTRIBUTE = "__crd_markers__"


def schema(*markers: Marker) -> Callable[[_T], _T]:
    """Attach type-level markers to a TypedDict class (markers that Go writes above a `type X struct`)."""

    def attach(cls: _T) -> _T:
        setattr(cls, _MARKERS_ATTRIBUTE, markers)
        return cls

    return attach


def markers_of(cls: object) -> tuple[Marker, ...]:
    """The type-level markers attached with `@schema(...)`, or `()`."""
    found = cls.__dict__.get(_MARKERS_ATTRIBUTE, ()) if hasattr(cls, "__dict__") else ()
    return tuple(found)
