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
from collections.abc import Mapping
from typing import Any, cast

from runtime.api.core import JobSetSpec
from runtime.resources import InvalidQuantityError, Quantity

__all__ = ["go_round_trip_jobset_spec", "omit_empty"]


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


# ---------------------------------------------------------------------------------------------------------
# A JobSet spec as Go writes it (Go `apply.FromTypedObjWithFields` of a `jobsetv1alpha2.JobSetSpec`)


def go_round_trip_jobset_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A runtime's JobSet spec as upstream writes it, after decoding it into `jobsetv1alpha2.JobSetSpec`.

    `omit_empty` by the `JobSetSpec` type, then the two things `encoding/json` adds on the way back,
    listed from the Go types of jobset v0.12 and k8s.io/api (a reflection walk of `JobSetSpec`):
    - a non-pointer struct field is never omitted, so an absent one comes back `{}`: the job and pod
      templates (`template`, `metadata`, `spec` at both levels), every container's `resources`, an
      ephemeral volume's claim template `metadata`, `spec` and `spec.resources`, and a volume claim
      policy template's `metadata`, `spec`, `spec.resources` and `status`;
    - every quantity is written as Go's `Quantity` writes it (`runtime.resources`): resource lists of
      containers, pods (`overhead`, `resources`) and claim templates, `emptyDir.sizeLimit`, and the
      `resourceFieldRef.divisor` of env vars and downward API items, a non-pointer field that comes back
      `"0"` when absent.
    A quantity that does not parse is left as written (it is reported where it is read, such as
    `runtime.resources.pod_requests`), and so is any value of an unexpected type: this never raises.
    """
    written = omit_empty(dict(spec), JobSetSpec)
    for rjob in _dicts(written.get("replicatedJobs")):
        job_template = _struct(rjob, "template")
        _struct(job_template, "metadata")
        pod_template = _struct(_struct(job_template, "spec"), "template")
        _struct(pod_template, "metadata")
        _pod_spec(_struct(pod_template, "spec"))
    for policy in _dicts(written.get("volumeClaimPolicies")):
        for claim in _dicts(policy.get("templates")):
            _claim_template(claim)
            _struct(claim, "status")
    return cast(dict[str, Any], written)


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _struct(parent: dict[str, Any], key: str) -> dict[str, Any]:
    """`parent[key]`, set to `{}` when absent (a Go struct); a detached `{}` when it is not an object."""
    value = parent.setdefault(key, {})
    return value if isinstance(value, dict) else {}


def _quantity(value: Any) -> Any:
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        try:
            return str(Quantity.parse(value))
        except InvalidQuantityError:
            pass
    return value


def _resource_lists(requirements: dict[str, Any]) -> None:
    for key in ("limits", "requests"):
        resources = requirements.get(key)
        if isinstance(resources, dict):
            requirements[key] = {name: _quantity(q) for name, q in resources.items()}


def _divisor(selector: Any) -> None:
    if isinstance(selector, dict):
        selector["divisor"] = _quantity(selector.get("divisor", "0"))


def _downward_api(source: Any) -> None:
    for item in _dicts(source.get("items")) if isinstance(source, dict) else ():
        _divisor(item.get("resourceFieldRef"))


def _claim_template(claim: dict[str, Any]) -> None:
    _struct(claim, "metadata")
    _resource_lists(_struct(_struct(claim, "spec"), "resources"))


def _pod_spec(pod_spec: dict[str, Any]) -> None:
    for key in ("containers", "initContainers", "ephemeralContainers"):
        for container in _dicts(pod_spec.get(key)):
            _resource_lists(_struct(container, "resources"))
            for env in _dicts(container.get("env")):
                value_from = env.get("valueFrom")
                if isinstance(value_from, dict):
                    _divisor(value_from.get("resourceFieldRef"))
    for volume in _dicts(pod_spec.get("volumes")):
        empty_dir = volume.get("emptyDir")
        if isinstance(empty_dir, dict) and "sizeLimit" in empty_dir:
            empty_dir["sizeLimit"] = _quantity(empty_dir["sizeLimit"])
        _downward_api(volume.get("downwardAPI"))
        projected = volume.get("projected")
        for source in _dicts(projected.get("sources")) if isinstance(projected, dict) else ():
            _downward_api(source.get("downwardAPI"))
        ephemeral = volume.get("ephemeral")
        if isinstance(ephemeral, dict) and isinstance(ephemeral.get("volumeClaimTemplate"), dict):
            _claim_template(ephemeral["volumeClaimTemplate"])
    if isinstance(pod_spec.get("overhead"), dict):
        pod_spec["overhead"] = {name: _quantity(q) for name, q in pod_spec["overhead"].items()}
    if isinstance(pod_spec.get("resources"), dict):
        _resource_lists(pod_spec["resources"])
