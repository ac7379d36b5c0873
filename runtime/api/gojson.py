"""Go's `encoding/json` round trip of a decoded object, read off the Go types in `runtime/api/gotypes.json`.

Go origin: `encoding/json` (`Unmarshal` as client-go's decoder does it: case-sensitive keys, unknown keys
dropped; `Marshal` with `omitempty` and `omitzero`), `runtime.DefaultUnstructuredConverter.ToUnstructured`
(apimachinery: the same rules for these types) and the apply configurations of client-go and JobSet
(every field a pointer, slice or map with `omitempty`). kubeflow/trainer v2.3.0 passes what it renders
through Go types at these places, each replayed here:
- a runtime patch's `trainingRuntimeSpec.template.spec` is `json.Marshal`ed from its typed
  `JobSetSpecPatch` before the strategic merge (`mergeRuntimePatches`): `go_json_runtime_patch_spec`;
- `spec.trainer.resourcesPerNode` is `json.Marshal`ed from a `corev1.ResourceRequirements`
  (`MergeResourceRequirements`): `go_json_resource_requirements`;
- the runtime's JobSet template, typed `jobsetv1alpha2.JobSetSpec` after the merge, becomes a
  `JobSetSpecApplyConfiguration` through `apply.FromTypedObjWithFields` (ToUnstructured, `json.Marshal`,
  `json.Unmarshal` into the apply configuration), which the SSA client writes with `json.Marshal`:
  `go_round_trip_jobset_spec`;
- `equality.Semantic.DeepEqual` of typed runtime patches (the TrainJob webhook): `go_semantic_form`;
- the runtime snapshot: `json.Marshal` of a typed `TrainingRuntime`: `go_json_training_runtime`.

The rule per field comes from the table (written by `hack/tools/gotypes`, a reflection walk of the Go
types; never edited by hand), as Go applies it:
- a key the type does not name is dropped; a null decodes to the zero value of the field's type;
- a field is left out when it is `omitempty` and empty (`""`, `0`, `false`, a nil pointer, a slice or map
  of length 0), or `omitzero` and zero (`Time` and `Quantity` by their `IsZero`; a struct when every field
  is zero; a `[]` or `{}` slice or map is not zero, a null one is);
- a struct is never empty, so a struct field is written even when absent: as `{}` plus its own fields
  that are written when zero (`"name": ""`, `"containerPort": 0`, a non-`omitempty` nil slice as null);
- a type with its own marshaller is written as that marshaller writes it: `Quantity` canonical
  (`runtime.resources`), `Time` as RFC 3339 UTC seconds (null when zero), `MicroTime` with microseconds,
  `IntOrString` as its int or string, `FieldsV1` as is (the generator refuses any other marshaller);
- a struct's fields are written in declaration order (embedded structs inlined in place, the shallower
  of two same-named fields winning), a map's keys sorted, as `json.Marshal` writes them.
Through an apply configuration, only nulls and empty slices and maps vanish: `""`, `0`, `false` and `{}`
held by a pointer survive.

Guarantees: the input is not modified and the result shares no dict or list with it; nothing raises. A
value whose JSON type does not fit its Go type (where Go's `Unmarshal` fails and upstream reports an
error) and a quantity or time that does not parse are left as written, copied. Work is bounded by the
size of the input: recursion follows the type (the table has no recursive type), and a value left as
written is copied without recursion. Thread-safe: the node of every struct in the table is built when the
module is imported (about 25 ms with the table), and Python's import lock makes a thread that imports it
meanwhile wait; afterwards nodes are only read. (Built lazily, a struct node was linked before its fields
were filled, since a struct may name itself, and a worker that asked while another built it encoded every
value as `{}`: five workers building their first snapshots at once wrote `{}` as the runtime of some of
them, which no retry repairs.)

Deliberately missing: Go's encoder escapes `<`, `>` and `&` in strings (`\\u003c`); that is a property
of the text, for whoever writes it. Go matches keys case-insensitively in `encoding/json`'s `Unmarshal`,
but the objects here come from the API server through client-go's case-sensitive decoder, pruned by a
CRD schema generated from the same types, so no key differs only by case.
"""

from __future__ import annotations

import datetime
import functools
import importlib.resources
import json
import re
from collections.abc import Mapping
from typing import Any, NamedTuple, cast

from runtime.api.views import copy_json
from runtime.resources import InvalidQuantityError, Quantity

__all__ = [
    "go_json",
    "go_json_resource_requirements",
    "go_json_runtime_patch_spec",
    "go_json_training_runtime",
    "go_round_trip_jobset_spec",
    "go_semantic_form",
    "table",
]

TYPED_JOBSET_SPEC = "jobset/v1alpha2.JobSetSpec"
APPLY_JOBSET_SPEC = "ac/jobset/v1alpha2.JobSetSpecApplyConfiguration"
RUNTIME_PATCH_SPEC = "trainer/v1alpha1.JobSetSpecPatch"
RESOURCE_REQUIREMENTS = "core/v1.ResourceRequirements"
TRAINING_RUNTIME = "trainer/v1alpha1.TrainingRuntime"
RUNTIME_PATCHES = "[]trainer/v1alpha1.RuntimePatch"

_MISSING: Any = object()
"""An absent key: decodes to the zero value, like a null."""


@functools.cache
def table() -> dict[str, Any]:
    """The committed type table (`{"roots": [...], "structs": {name: [[json name, flags, type], ...]}}`)."""
    text = importlib.resources.files("runtime.api").joinpath("gotypes.json").read_text(encoding="utf-8")
    return cast(dict[str, Any], json.loads(text))


def go_json(value: Any, go_type: str) -> Any:
    """`json.Marshal` of `value` decoded into `go_type` (a table type: `core/v1.Container`, `[]...`)."""
    return _node(go_type).encode(value, False)[0]


def go_semantic_form(value: Any, go_type: str) -> Any:
    """A form of `value` (decoded into `go_type`) that is equal for values `equality.Semantic` equates.

    `go_json`, with empty and null slices and maps left out: Semantic.DeepEqual equates an empty slice or
    map with a nil one (not a nil pointer with a pointer to an empty struct); quantities are canonical, so
    equal values read equal (bar `1Ki` and `1024`, equal by `Cmp` but written apart).
    """
    return _node(go_type).encode(value, True)[0]


def go_json_runtime_patch_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A runtime patch's JobSet spec as upstream feeds it to the strategic merge (typed `JobSetSpecPatch`)."""
    return _as_object(go_json(spec, RUNTIME_PATCH_SPEC), spec)


def go_json_resource_requirements(requirements: Mapping[str, Any]) -> dict[str, Any]:
    """`spec.trainer.resourcesPerNode` as upstream merges it (typed `corev1.ResourceRequirements`)."""
    return _as_object(go_json(requirements, RESOURCE_REQUIREMENTS), requirements)


def go_json_training_runtime(runtime: Mapping[str, Any]) -> dict[str, Any]:
    """`json.Marshal` of a (Cluster)TrainingRuntime decoded into Go's `trainer.TrainingRuntime`.

    Upstream reads both kinds into a `TrainingRuntime` for its runtime snapshot; the two share their
    fields. Keys come in Go's order (struct fields as declared, map keys sorted).
    """
    return _as_object(go_json(runtime, TRAINING_RUNTIME), runtime)


def go_round_trip_jobset_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A runtime's JobSet spec as upstream writes it, after decoding it into `jobsetv1alpha2.JobSetSpec`.

    `apply.FromTypedObjWithFields` writes the typed spec (every struct field, every quantity canonical),
    decodes that into a `JobSetSpecApplyConfiguration`, whose `json.Marshal` drops the nulls and empty
    slices and maps the typed spec wrote.
    """
    typed = go_json(spec, TYPED_JOBSET_SPEC)
    return _as_object(go_json(typed, APPLY_JOBSET_SPEC), spec)


def _as_object(result: Any, original: Mapping[str, Any]) -> dict[str, Any]:
    return result if isinstance(result, dict) else copy_json(dict(original))


# ---------------------------------------------------------------------------------------------- nodes
#
# `encode(value, semantic)` returns (what Go writes, whether the decoded value is zero, whether it is
# empty in the sense of `omitempty`). `value` may be `_MISSING`.


class _Node:
    def encode(self, value: Any, semantic: bool) -> tuple[Any, bool, bool]:
        raise NotImplementedError


class _Scalar(_Node):
    _ZERO: dict[str, Any] = {"string": "", "bool": False}

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.zero: Any = self._ZERO.get(kind, 0)
        if kind == "string":
            self.accepts: Any = lambda v: isinstance(v, str)
        elif kind == "bool":
            self.accepts = lambda v: isinstance(v, bool)
        elif kind.startswith("float"):
            self.accepts = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
        else:
            self.accepts = lambda v: isinstance(v, int) and not isinstance(v, bool)

    def encode(self, value: Any, semantic: bool) -> tuple[Any, bool, bool]:
        if value is _MISSING or value is None:
            return self.zero, True, True
        if not self.accepts(value):
            return copy_json(value), False, False
        if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
            value = int(value)  # Go writes a whole float64 without a fraction
        return value, value == self.zero, value == self.zero


class _Any(_Node):
    def encode(self, value: Any, semantic: bool) -> tuple[Any, bool, bool]:
        if value is _MISSING or value is None:
            return None, True, True
        return copy_json(value), False, False


class _Pointer(_Node):
    def __init__(self, elem: _Node) -> None:
        self.elem = elem

    def encode(self, value: Any, semantic: bool) -> tuple[Any, bool, bool]:
        if value is _MISSING or value is None:
            return None, True, True
        return self.elem.encode(value, semantic)[0], False, False


class _Slice(_Node):
    def __init__(self, elem: _Node) -> None:
        self.elem = elem

    def encode(self, value: Any, semantic: bool) -> tuple[Any, bool, bool]:
        if value is _MISSING or value is None:
            return None, True, True
        if not isinstance(value, list):
            return copy_json(value), False, False
        encode = self.elem.encode
        return [encode(item, semantic)[0] for item in value], False, not value


class _Map(_Node):
    def __init__(self, elem: _Node) -> None:
        self.elem = elem

    def encode(self, value: Any, semantic: bool) -> tuple[Any, bool, bool]:
        if value is _MISSING or value is None:
            return None, True, True
        if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
            return copy_json(value), False, False
        encode = self.elem.encode
        return {key: encode(value[key], semantic)[0] for key in sorted(value)}, False, not value


class _Field(NamedTuple):
    """One field of a struct as `encoding/json` sees it."""

    name: str  # the JSON name
    node: _Node
    omitempty: bool
    omitzero: bool
    collection: bool  # a slice or map: left out when empty or null in the semantic form
    always: bool  # written when absent: neither omitzero nor omitempty with a type whose zero value is empty


class _Struct(_Node):
    """A Go struct: its fields as `encoding/json` sees them (embedded structs flattened)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.fields: list[_Field] = []
        self.positions: dict[str, int] = {}  # json name -> index in `fields`
        self.always: list[int] = []  # the fields written when absent

    def encode(self, value: Any, semantic: bool) -> tuple[Any, bool, bool]:
        if value is _MISSING or value is None:
            value = {}
        elif not isinstance(value, dict):
            return copy_json(value), False, False
        out: dict[str, Any] = {}
        zero = True
        positions = self.positions
        present = [positions[key] for key in value if key in positions]
        if self.always:
            present = sorted(set(present).union(self.always))
        else:
            present.sort()
        fields = self.fields
        for position in present:
            name, node, omitempty, omitzero, collection, _ = fields[position]
            item = value.get(name, _MISSING)
            written, is_zero, is_empty = node.encode(item, semantic)
            zero = zero and is_zero
            if (omitempty and is_empty) or (omitzero and is_zero):
                continue
            if semantic and collection and (written is None or written in ([], {})):
                continue
            out[name] = written
        return out, zero, False


class _Quantity(_Node):
    def encode(self, value: Any, semantic: bool) -> tuple[Any, bool, bool]:
        if value is _MISSING or value is None:
            return "0", True, False
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            short = (
                isinstance(value, float)
                or (isinstance(value, int) and value.bit_length() <= 192)
                or (isinstance(value, str) and len(value) <= 64)
            )
            written, zero = (_canonical_quantity if short else _canonical_quantity_of)(value)
            return written, zero, False
        return copy_json(value), False, False


def _canonical_quantity_of(raw: str | int | float) -> tuple[Any, bool]:
    """(Go's text for the quantity `raw`, whether it is zero); `raw` itself when it does not parse."""
    try:
        quantity = Quantity.parse(raw)
    except InvalidQuantityError:
        return raw, False
    return str(quantity), quantity.is_zero()


_canonical_quantity = functools.lru_cache(maxsize=4096, typed=True)(_canonical_quantity_of)
"""`_canonical_quantity_of`, memoised for texts of at most 64 characters only: a quantity may be as long as
the object holding it (a million leading zeros pass every check), and the memo outlives the objects."""


_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})\Z")


class _Time(_Node):
    def __init__(self, micro: bool) -> None:
        self.format = "%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ"

    def encode(self, value: Any, semantic: bool) -> tuple[Any, bool, bool]:
        if value is _MISSING or value is None:
            return None, True, False
        if not isinstance(value, str) or not _RFC3339.match(value):
            return copy_json(value), False, False
        text = value.upper()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        whole, dot, rest = text.partition(".")
        if dot:  # Python reads at most 6 fractional digits; Go's second-level output drops them anyway
            digits = len(rest) - len(rest.lstrip("0123456789"))
            rest = rest[:digits][:6].ljust(6, "0") + rest[digits:]
        try:
            moment = datetime.datetime.fromisoformat(whole + dot + rest)
        except ValueError:
            return value, False, False
        return moment.astimezone(datetime.UTC).strftime(self.format), False, False


class _IntOrString(_Node):
    def encode(self, value: Any, semantic: bool) -> tuple[Any, bool, bool]:
        if value is _MISSING or value is None:
            return 0, True, False
        if isinstance(value, str):
            return value, False, False
        if isinstance(value, int) and not isinstance(value, bool):
            return value, value == 0, False
        return copy_json(value), False, False


class _Raw(_Node):
    """`FieldsV1` (managed fields): raw JSON, written as it was read, null when absent."""

    def encode(self, value: Any, semantic: bool) -> tuple[Any, bool, bool]:
        if value is _MISSING or value is None:
            return None, True, False
        return copy_json(value), False, False


_CUSTOM: dict[str, _Node] = {
    "Quantity": _Quantity(),
    "Time": _Time(micro=False),
    "MicroTime": _Time(micro=True),
    "IntOrString": _IntOrString(),
    "FieldsV1": _Raw(),
    "any": _Any(),
}


@functools.cache
def _node(go_type: str) -> _Node:
    """The node for a table type string; an unknown name reads as `any` (its value is kept as written).
    Struct nodes are built only at import (`_build_structs`); later calls find them complete."""
    if go_type.startswith("*"):
        return _Pointer(_node(go_type[1:]))
    if go_type.startswith("[]"):
        return _Slice(_node(go_type[2:]))
    if go_type.startswith("map[string]"):
        return _Map(_node(go_type[len("map[string]") :]))
    if go_type in _CUSTOM:
        return _CUSTOM[go_type]
    if go_type == "bytes":
        return _CUSTOM["any"]
    structs = table()["structs"]
    if go_type in _STRUCTS:
        return _STRUCTS[go_type]
    if go_type in structs:
        node = _Struct(go_type)
        _STRUCTS[go_type] = node  # before the fields: a struct may name itself
        node.fields = _flatten(go_type, structs)
        node.positions = {field.name: index for index, field in enumerate(node.fields)}
        node.always = [index for index, field in enumerate(node.fields) if field.always]
        return node
    if re.fullmatch(r"string|bool|u?int(8|16|32|64)?|float(32|64)", go_type):
        return _Scalar(go_type)
    return _CUSTOM["any"]


_STRUCTS: dict[str, _Struct] = {}


def _flatten(name: str, structs: Mapping[str, Any]) -> list[_Field]:
    """The fields `encoding/json` sees in struct `name`, embedded ones in place; the shallowest name wins."""
    found: list[tuple[int, str, str, str]] = []  # (depth, json name, flags, type)

    def walk(struct: str, depth: int) -> None:
        for json_name, flags, go_type in structs.get(struct, []):
            if "i" in flags:
                walk(go_type, depth + 1)
            else:
                found.append((depth, json_name, flags, go_type))

    walk(name, 0)
    shallowest: dict[str, int] = {}
    for depth, json_name, _, _ in found:
        shallowest[json_name] = min(depth, shallowest.get(json_name, depth))
    fields = []
    for depth, json_name, flags, go_type in found:
        if depth != shallowest[json_name] or sum(1 for f in found if f[1] == json_name and f[0] == depth) > 1:
            continue  # hidden by a shallower field, or ambiguous at its depth: Go writes neither
        collection = go_type.startswith(("[]", "map[")) or go_type == "bytes"
        node = _node(go_type)
        omitempty, omitzero = "o" in flags, "z" in flags
        absent_empty = not isinstance(node, _Struct) and node.encode(_MISSING, False)[2]
        always = not (omitzero or (omitempty and absent_empty))
        fields.append(_Field(json_name, node, omitempty, omitzero, collection, always))
    return fields


def _build_structs() -> None:
    """Build the node of every struct in the table (at import: see the module docstring)."""
    for name in table()["structs"]:
        _node(name)


_build_structs()
