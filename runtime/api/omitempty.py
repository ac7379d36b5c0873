"""Go's `omitempty` JSON round trip of a decoded object, worked out from the API type that describes it.

Go origin: `encoding/json` `Marshal` of a typed value that `json.Unmarshal` filled from the wire.
kubeflow/trainer does this to a runtime patch's `trainingRuntimeSpec.template.spec` before merging it
into the runtime (`pkg/runtime/core/trainingruntime.go`, `mergeRuntimePatches`) and to
`spec.trainer.resourcesPerNode` (`pkg/util/trainingruntime`, `MergeResourceRequirements`); and
`equality.Semantic.DeepEqual`, which compares runtime patches on update, equates an empty map or slice
with an absent one but not an empty struct with an absent one.

The rule, read off the types in `runtime.api` (the convention `hack/gen-crds.py` turns into schemas):
- a null is dropped (a nil pointer, map or slice);
- an empty list is dropped (the slices of these types are all `omitempty`);
- an empty `dict[str, V]` is dropped: it is a Go map, `additionalProperties` in the schema;
- a TypedDict, or an opaque `dict[str, Any]`, is a Go struct (`properties` in the schema) and is kept even
  when empty: `encoding/json` never omits a struct, nor a non-nil pointer to one. So a volume's
  `emptyDir: {}` or a `securityContext: {}` survives, as it does upstream.
A key the types do not name (the TypedDicts of embedded Kubernetes types are partial) is a struct too;
test_runtime_omitempty.py checks against the TrainJob CRD that every map a runtime patch or
`resourcesPerNode` can hold is typed as one, so that the rule meets no map it cannot see.

Guarantees: the input is not modified; the result shares no dict or list with it; list items are never
dropped (Go writes `[{}]` as it is), only cleaned.

Deliberately missing: Go also drops `""`, `0` and `false` from a non-pointer `omitempty` field but keeps
them in a pointer field (`serviceAccountName` is a `*string`); neither the schema nor these types tell the
two apart, so scalars are kept as written.
"""

from __future__ import annotations

import functools
import typing
from typing import Any

__all__ = ["omit_empty"]


def omit_empty(value: Any, hint: Any) -> Any:
    """`value` (a decoded object of type `hint`) as Go writes it back after decoding it into that type."""
    if isinstance(value, dict):
        kept: dict[Any, Any] = {}
        for key, item in value.items():
            field = _field(hint, key)
            cleaned = omit_empty(item, field)
            if cleaned is None or cleaned == [] or (cleaned == {} and _is_map(field)):
                continue
            kept[key] = cleaned
        return kept
    if isinstance(value, list):
        item_hint = _item(hint)
        return [omit_empty(item, item_hint) for item in value]
    return value


def _bare(hint: Any) -> Any:
    """`hint` without `Annotated[...]`, `Required[...]` and `NotRequired[...]`."""
    while True:
        origin = typing.get_origin(hint)
        if origin is typing.Annotated:
            hint = hint.__origin__
        elif origin is typing.Required or origin is typing.NotRequired:
            hint = typing.get_args(hint)[0]
        else:
            return hint


@functools.cache
def _fields(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _field(hint: Any, key: Any) -> Any:
    """The type of `key` in an object of type `hint`: a TypedDict's field, a map's value, else `Any`."""
    bare = _bare(hint)
    if typing.is_typeddict(bare):
        return _fields(bare).get(key, Any)
    if typing.get_origin(bare) is dict:
        return typing.get_args(bare)[1]
    return Any


def _item(hint: Any) -> Any:
    bare = _bare(hint)
    return typing.get_args(bare)[0] if typing.get_origin(bare) is list else Any


def _is_map(hint: Any) -> bool:
    """A `dict[str, V]` with a known `V` is a Go map; `dict[str, Any]` is an opaque struct."""
    bare = _bare(hint)
    return typing.get_origin(bare) is dict and typing.get_args(bare)[1] is not Any
