"""Kubernetes strategic merge patch over JSON-like dicts, driven by a small table of patch metadata.

Go origin: `k8s.io/apimachinery/pkg/util/strategicpatch` (`StrategicMergePatch`, `mergeMap`, `mergeSlice`,
`normalizeElementOrder`, `mergeSortedSlice`), with the `patchStrategy`/`patchMergeKey` struct tags of
`k8s.io/api/core/v1`, `batch/v1`, `meta/v1` and JobSet `v1alpha2` written down as `PatchMeta` tables.

Semantics (one property per line, each tested):
- Maps merge key by key, recursively; a `null` in the patch deletes the key; nulls inside values that are
  added are dropped (Go's `IgnoreUnmatchedNulls`).
- A list whose field has `patchStrategy=merge` and a merge key (`containers`, `env`, `volumes`, ... by
  `name`; `volumeMounts` by `mountPath`; `ports` by `containerPort`) merges item by item: an item whose key
  exists is merged into it, a new item is appended. Every other list (`tolerations`, `args`, `command`,
  node selector terms, ...) is replaced by the patch's list.
- Order of a merged list (Go's `normalizeElementOrder`): patch items keep the patch's order, items only in
  the original keep theirs, and an original-only item is placed before a patch item only when both were in
  the original and it came first. Runtime env `[INIT_ENV, DATASET_PATH]` patched with
  `[INIT_ENV, NEW_VALUE]` gives `[INIT_ENV, NEW_VALUE, DATASET_PATH]`.
- Merge-strategy lists of scalars (`finalizers`) are the union, de-duplicated with Go's swap-with-last
  algorithm (so the order of duplicates follows Go exactly).
- Directives: `$patch: replace` / `$patch: delete` on a map, `$patch: delete` (by merge key) and
  `$patch: replace` as list items, `$retainKeys`, and `$deleteFromPrimitiveList/<field>`.
- Neither input is modified; the result shares no mutable structure with them.

Deliberately missing: `$setElementOrder/<field>` (raises `StrategicMergeError`; only `kubectl apply`
generates it), the `retainKeys` strategy of `volumes` beyond the `$retainKeys` directive (identical unless
that directive is present), and patch creation (`CreateTwoWayMergePatch`): we only apply patches. The
Trainer API's schema prunes every `$` key from `runtimePatches`, so the directives matter only to other
callers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = [
    "JOBSET_SPEC",
    "RESOURCE_REQUIREMENTS",
    "PatchMeta",
    "StrategicMergeError",
    "strategic_merge",
]

_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList/"
_SET_ELEMENT_ORDER = "$setElementOrder/"


class StrategicMergeError(ValueError):
    """The patch cannot be applied (Go returns these from `StrategicMergePatch`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PatchMeta:
    """How one field merges: Go's `patchStrategy` / `patchMergeKey` struct tags for it and its children.

    `fields` describes the fields of a map (or of each map item of a list). `merge` marks a list with
    `patchStrategy=merge`; `merge_key` names its items' key (None for a list of scalars). Fields absent from
    `fields` merge with the defaults: maps recursively, lists replaced.
    """

    fields: Mapping[str, PatchMeta] = field(default_factory=dict)
    merge: bool = False
    merge_key: str | None = None

    def child(self, name: str) -> PatchMeta:
        return self.fields.get(name, _DEFAULT)


_DEFAULT = PatchMeta()


def _merge_list(key: str | None, item: PatchMeta = _DEFAULT) -> PatchMeta:
    return PatchMeta(fields=item.fields, merge=True, merge_key=key)


_OBJECT_META = PatchMeta(fields={"ownerReferences": _merge_list("uid"), "finalizers": _merge_list(None)})
_CONTAINER = PatchMeta(
    fields={
        "ports": _merge_list("containerPort"),
        "env": _merge_list("name"),
        "volumeMounts": _merge_list("mountPath"),
        "volumeDevices": _merge_list("devicePath"),
    }
)
_POD_SPEC = PatchMeta(
    fields={
        "volumes": _merge_list("name"),
        "initContainers": _merge_list("name", _CONTAINER),
        "containers": _merge_list("name", _CONTAINER),
        "ephemeralContainers": _merge_list("name", _CONTAINER),
        "imagePullSecrets": _merge_list("name"),
        "hostAliases": _merge_list("ip"),
        "topologySpreadConstraints": _merge_list("topologyKey"),
        "schedulingGates": _merge_list("name"),
        "resourceClaims": _merge_list("name"),
    }
)
_POD_TEMPLATE = PatchMeta(fields={"metadata": _OBJECT_META, "spec": _POD_SPEC})
_JOB_TEMPLATE = PatchMeta(
    fields={"metadata": _OBJECT_META, "spec": PatchMeta(fields={"template": _POD_TEMPLATE})}
)
_REPLICATED_JOB = PatchMeta(fields={"template": _JOB_TEMPLATE, "dependsOn": _merge_list("name")})

JOBSET_SPEC = PatchMeta(fields={"replicatedJobs": _merge_list("name", _REPLICATED_JOB)})
"""Patch metadata of a JobSet `v1alpha2` `JobSetSpec` (the runtime template's `spec`)."""

RESOURCE_REQUIREMENTS = PatchMeta(fields={"claims": _merge_list("name")})
"""Patch metadata of a core/v1 `ResourceRequirements` as kubeflow/trainer merges `resourcesPerNode`:
`limits`/`requests` per resource name, `claims` by name."""


def strategic_merge(original: Mapping[str, Any], patch: Mapping[str, Any], meta: PatchMeta) -> dict[str, Any]:
    """Apply a strategic merge patch to `original` and return the result (Go `StrategicMergeMapPatch`).

    Raises `StrategicMergeError` for malformed patches (a merge-list item without its key, an unknown
    directive, mixed item types, ...).
    """
    # Go mutates both documents while merging; work on private copies so callers' objects stay intact.
    work_original = orjson.loads(orjson.dumps(original))
    work_patch = orjson.loads(orjson.dumps(patch))
    return _merge_map(work_original, work_patch, meta)


def _is_map(value: object) -> bool:
    return isinstance(value, dict)


def _merge_map(original: dict[str, Any] | None, patch: dict[str, Any], meta: PatchMeta) -> dict[str, Any]:
    if _DIRECTIVE in patch:
        directive = patch[_DIRECTIVE]
        if directive == "replace":
            del patch[_DIRECTIVE]
            return _strip_directives(patch)
        if directive == "delete":
            return {}
        raise StrategicMergeError(f"unknown patch type {directive!r} in map")
    if original is None:
        original = {}
    _apply_retain_keys(original, patch)
    for key in patch:
        if key.startswith(_SET_ELEMENT_ORDER):
            raise StrategicMergeError(f"unsupported directive {key!r}")
    for patch_key, patch_value in patch.items():
        is_delete_list = patch_key.startswith(_DELETE_FROM_PRIMITIVE_LIST)
        key = patch_key[len(_DELETE_FROM_PRIMITIVE_LIST) :] if is_delete_list else patch_key
        if patch_value is None:
            original.pop(key, None)
            continue
        if key not in original:
            if not is_delete_list:
                _set_or_drop(original, key, patch_value)
            continue
        original_value = original[key]
        if _is_map(original_value) and _is_map(patch_value):
            original[key] = _merge_map(original_value, patch_value, meta.child(key))
        elif isinstance(original_value, list) and isinstance(patch_value, list):
            child = meta.child(key)
            if child.merge or is_delete_list:
                original[key] = _merge_list_values(original_value, patch_value, child, is_delete_list)
            else:
                _set_or_drop(original, key, patch_value)
        elif not is_delete_list:
            _set_or_drop(original, key, patch_value)
    return original


def _set_or_drop(target: dict[str, Any], key: str, value: Any) -> None:
    """Take a patch value as is, minus nulls and directives; a value that is a directive itself is dropped."""
    _discard_nulls(value)
    kept, keep = _remove_directives(value)
    if keep:
        target[key] = kept
    else:
        target.pop(key, None)


def _apply_retain_keys(original: dict[str, Any], patch: dict[str, Any]) -> None:
    if _RETAIN_KEYS not in patch:
        return
    retain = patch.pop(_RETAIN_KEYS)
    if not isinstance(retain, list):
        raise StrategicMergeError(f"{_RETAIN_KEYS} must be a list")
    allowed = set(retain)
    for key, value in patch.items():
        if value is None or key.startswith((_DELETE_FROM_PRIMITIVE_LIST, _SET_ELEMENT_ORDER, _DIRECTIVE)):
            continue
        if key not in allowed:
            raise StrategicMergeError(f"field {key!r} is in the patch but not in {_RETAIN_KEYS}")
    for key in [k for k in original if k not in allowed]:
        del original[key]


def _discard_nulls(value: Any) -> None:
    if isinstance(value, dict):
        for key in [k for k, v in value.items() if v is None]:
            del value[key]
        for item in value.values():
            _discard_nulls(item)
    elif isinstance(value, list):
        for item in value:
            _discard_nulls(item)


def _strip_directives(value: dict[str, Any]) -> dict[str, Any]:
    stripped, _ = _remove_directives(value)
    return stripped if isinstance(stripped, dict) else {}


def _remove_directives(value: Any) -> tuple[Any, bool]:
    """Go `removeDirectives`: drop maps carrying `$patch` (and their slots); keep everything else."""
    if isinstance(value, dict):
        if _DIRECTIVE in value:
            return None, False
        for key in list(value):
            kept, keep = _remove_directives(value[key])
            if keep:
                value[key] = kept
            else:
                del value[key]
        return value, True
    if isinstance(value, list):
        result = []
        for item in value:
            kept, keep = _remove_directives(item)
            if keep:
                result.append(kept)
        return result, True
    return value, True


def _element_kind(*lists: list[Any]) -> str:
    """'map' or 'scalar' for the items of the lists (Go `sliceElementType`)."""
    kind: str | None = None
    for items in lists:
        for item in items:
            if isinstance(item, list):
                raise StrategicMergeError("lists of lists are not supported")
            this = "map" if _is_map(item) else f"scalar:{type(item).__name__}"
            if kind is None:
                kind = this
            elif kind != this:
                raise StrategicMergeError("list element types are not identical")
    if kind is None:
        raise StrategicMergeError("no elements in any of the given lists")
    return "map" if kind == "map" else "scalar"


def _merge_list_values(
    original: list[Any], patch: list[Any], meta: PatchMeta, is_delete_list: bool
) -> list[Any]:
    if not original and not patch:
        return original
    kind = _element_kind(original, patch)
    key = meta.merge_key
    if kind == "scalar":
        if is_delete_list:
            doomed = set(map(_scalar_key, patch))
            return [item for item in original if _scalar_key(item) not in doomed]
        merged = _deduplicate_scalars(original + patch)
        patch_items, server_only = _partition(merged, patch, None)
        return _normalize_element_order(patch_items, server_only, patch, original, None)
    if not key:
        raise StrategicMergeError("cannot merge lists without merge key")
    original, patch = _merge_special_elements(original, patch, key)
    merged = _merge_without_special_elements(original, patch, key, meta)
    patch_items, server_only = _partition(merged, patch, key)
    return _normalize_element_order(patch_items, server_only, patch, original, key)


def _scalar_key(value: Any) -> tuple[str, Any]:
    return (type(value).__name__, value)


def _deduplicate_scalars(items: list[Any]) -> list[Any]:
    """Go's in-place de-duplication: a duplicate is overwritten by the current last item."""
    result = list(items)
    last = len(result) - 1
    i = 0
    while i < last:
        j = i + 1
        while j <= last:
            if _scalar_key(result[i]) == _scalar_key(result[j]):
                result[j] = result[last]
                result.pop()
                last -= 1
                j -= 1
            j += 1
        i += 1
    return result


def _item_key(item: Any, key: str) -> Any:
    if not _is_map(item) or key not in item:
        raise StrategicMergeError(f"map item does not contain the merge key {key!r}: {item!r}")
    return item[key]


def _merge_special_elements(original: list[Any], patch: list[Any], key: str) -> tuple[list[Any], list[Any]]:
    """Go `mergeSliceWithSpecialElements`: apply `$patch: delete|replace` items; return the plain patch."""
    plain = []
    replace = False
    for item in patch:
        directive = item.get(_DIRECTIVE)
        if _DIRECTIVE not in item:
            plain.append(item)
        elif directive == "delete":
            doomed = _item_key(item, key)
            original = [o for o in original if _item_key(o, key) != doomed]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise StrategicMergeError("merging lists cannot yet be specified in the patch")
        else:
            raise StrategicMergeError(f"unknown patch type {directive!r} in list")
    if replace:
        return plain, []
    return original, plain


def _merge_without_special_elements(
    original: list[Any], patch: list[Any], key: str, meta: PatchMeta
) -> list[Any]:
    merged = list(original)
    for item in patch:
        value = _item_key(item, key)
        for index, candidate in enumerate(merged):
            if _item_key(candidate, key) == value:
                merged[index] = _merge_map(candidate, item, meta)
                break
        else:
            _discard_nulls(item)
            merged.append(item)
    return merged


def _partition(merged: list[Any], patch: list[Any], key: str | None) -> tuple[list[Any], list[Any]]:
    """Split merged items into (present in the patch, only in the original)."""
    if key is None:
        in_patch = {_scalar_key(v) for v in patch}
        return (
            [v for v in merged if _scalar_key(v) in in_patch],
            [v for v in merged if _scalar_key(v) not in in_patch],
        )
    patch_keys = [_item_key(v, key) for v in patch]
    hits: list[Any] = []
    rest: list[Any] = []
    for item in merged:
        (hits if _item_key(item, key) in patch_keys else rest).append(item)
    return hits, rest


def _index_fn(items: list[Any], key: str | None) -> Callable[[Any], int]:
    identities = [_identity(item, key) for item in items]

    def index(value: Any) -> int:
        identity = _identity(value, key)
        for position, candidate in enumerate(identities):
            if candidate == identity:
                return position
        return -1

    return index


def _identity(item: Any, key: str | None) -> Any:
    if key is None:
        return _scalar_key(item)
    return item.get(key) if _is_map(item) else None


def _normalize_element_order(
    patch_items: list[Any],
    server_only: list[Any],
    patch_order: list[Any],
    server_order: list[Any],
    key: str | None,
) -> list[Any]:
    patch_items = _sort_by(patch_items, patch_order, key)
    server_only = _sort_by(server_only, server_order, key)
    return _merge_sorted(server_only, patch_items, server_order, key)


def _sort_by(items: list[Any], order: list[Any], key: str | None) -> list[Any]:
    index = _index_fn(order, key)
    deleted = [i for i in items if _is_map(i) and i.get(_DIRECTIVE) == "delete"] if key else []
    kept = [i for i in items if not (_is_map(i) and i.get(_DIRECTIVE) == "delete")] if key else list(items)
    # Every kept item is found in `order` (it came from there), so a stable sort by position is Go's order.
    kept.sort(key=index)
    return kept + deleted


def _merge_sorted(left: list[Any], right: list[Any], server_order: list[Any], key: str | None) -> list[Any]:
    """Go `mergeSortedSlice`: interleave server-only items (left) into patch items (right)."""
    index = _index_fn(server_order, key)
    result: list[Any] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if i >= len(left):
            result.append(right[j])
            j += 1
        elif j >= len(right):
            result.append(left[i])
            i += 1
        else:
            li, ri = index(left[i]), index(right[j])
            if li >= 0 and ri >= 0 and li < ri:
                result.append(left[i])
                i += 1
            else:
                result.append(right[j])
                j += 1
    return result
