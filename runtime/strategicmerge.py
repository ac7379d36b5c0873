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
- Merge-strategy lists of scalars (`finalizers`) are the union, in Go's order (which does not depend on
  how Go's swap-with-last de-duplication shuffles them: see `_merge_scalars`).
- Work: O(n log n) for n items of the original and the patch, O(n) unless a merge changes an item's
  merge key (a `null` key; a map-valued key with nulls inside). Items are found by their merge key through
  an index, never by a search per item; merge keys compare as Python's `==` does (`json_key`).
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

import heapq
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from runtime.api.views import copy_json

__all__ = [
    "JOBSET_SPEC",
    "RESOURCE_REQUIREMENTS",
    "PatchMeta",
    "StrategicMergeError",
    "json_key",
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


def strategic_merge(
    original: Mapping[str, Any], patch: Mapping[str, Any], meta: PatchMeta, *, in_place: bool = False
) -> dict[str, Any]:
    """Apply a strategic merge patch to `original` and return the result (Go `StrategicMergeMapPatch`).

    `in_place`: `original` is the caller's private document, merged into and returned (or replaced, by a
    `$patch: replace` at the top), not copied first: patches applied one after another then copy the
    document once, not once per patch. The patch is always copied.

    Raises `StrategicMergeError` for malformed patches (a merge-list item without its key, an unknown
    directive, mixed item types, ...).
    """
    # Go mutates both documents while merging; work on private copies so callers' objects stay intact.
    work_original = original if in_place else copy_json(original)
    work_patch = copy_json(patch)
    return _merge_map(cast(dict[str, Any], work_original), work_patch, meta)


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
        return _merge_scalars(original, patch)
    if not key:
        raise StrategicMergeError("cannot merge lists without merge key")
    original, patch = _merge_special_elements(original, patch, key)
    merged, identities = _merge_without_special_elements(original, patch, key, meta)
    return _normalize_keyed_order(merged, identities, patch, len(original), key)


def _scalar_key(value: Any) -> tuple[str, Any]:
    """A scalar's identity: equal only to a scalar of the same type (`1` is not `True`, as in Go)."""
    return (type(value).__name__, value)


def json_key(value: Any) -> Hashable:
    """A hashable stand-in for a JSON value that is equal to another's exactly when the values are `==`.

    Merge-key values compare as Python's `==` compares them (`1`, `1.0` and `True` are one key): a map
    becomes a frozen set of (key, stand-in) pairs and a list a tagged tuple, so a map and a list never
    meet, and every scalar stands for itself (JSON values hold no tuples). O(size of the value).
    """
    if type(value) is str:  # the common merge key (a name), first
        return value
    if isinstance(value, dict):
        return ("map", frozenset((k, json_key(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("list", tuple(json_key(v) for v in value))
    return value  # type: ignore[no-any-return]


def _merge_scalars(original: list[Any], patch: list[Any]) -> list[Any]:
    """The union of two scalar lists in Go's order, in linear time.

    Go de-duplicates `original + patch` (swapping each duplicate with the last item), splits the distinct
    items into those in the patch and the others, sorts the first by their first position in the patch and
    the others by their first position in the original, then interleaves them (`mergeSortedSlice`). The
    items being distinct, both sorts are fully determined by those first positions, whatever order the
    de-duplication left: so each group is its items in order of first occurrence, and no de-duplication
    pass is needed. (Of equal items of different sign, `0.0` and `-0.0`, the first occurrence is kept;
    `finalizers`, the only merged scalar list, holds strings.)
    """
    first: dict[tuple[str, Any], Any] = {}
    for item in original:
        first.setdefault(_scalar_key(item), item)
    in_patch: dict[tuple[str, Any], None] = {}
    for item in patch:
        identity = _scalar_key(item)
        first.setdefault(identity, item)
        in_patch[identity] = None
    patch_items = [first[identity] for identity in in_patch]
    server_only = [value for identity, value in first.items() if identity not in in_patch]
    return _merge_sorted(server_only, patch_items, original, None)


def _item_key(item: Any, key: str) -> Any:
    if not _is_map(item) or key not in item:
        raise StrategicMergeError(f"map item does not contain the merge key {key!r}: {item!r}")
    return item[key]


def _merge_special_elements(original: list[Any], patch: list[Any], key: str) -> tuple[list[Any], list[Any]]:
    """Go `mergeSliceWithSpecialElements`: apply `$patch: delete|replace` items; return the plain patch.

    Every `$patch: delete` item removes the original items with its key: one pass over the original for
    all of them (the first such item checks that every original item has the key, as Go's first filter
    does)."""
    plain = []
    replace = False
    doomed: set[Hashable] = set()
    checked = False
    for item in patch:
        directive = item.get(_DIRECTIVE)
        if _DIRECTIVE not in item:
            plain.append(item)
        elif directive == "delete":
            doomed.add(json_key(_item_key(item, key)))
            if not checked:
                for candidate in original:
                    _item_key(candidate, key)
                checked = True
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise StrategicMergeError("merging lists cannot yet be specified in the patch")
        else:
            raise StrategicMergeError(f"unknown patch type {directive!r} in list")
    if doomed:
        original = [o for o in original if json_key(o[key]) not in doomed]
    if replace:
        return plain, []
    return original, plain


_KEYLESS = object()
"""The identity of a merged item that has lost its merge key (a patch's `null` for it)."""


class _KeyIndex:
    """The positions of a growing list's map items by merge-key value, for first-match lookups in O(log n).

    `first(value)` is the lowest position whose item's key equals `value` (`==`), as a linear search from
    the start finds it. An item's key may change when a patch item is merged into it (a `null` drops the
    key, nulls inside a map-valued key vanish): `moved` records it. Positions of one value sit in a heap,
    stale ones (whose item's key changed) are dropped when met.
    """

    __slots__ = ("_heaps", "_identities", "_key", "_keyless")

    def __init__(self, items: list[Any], key: str) -> None:
        self._key = key
        self._identities: list[Any] = []
        self._heaps: dict[Any, list[int]] = {}
        self._keyless: list[int] = []
        for item in items:
            self.appended(item)

    def _identity(self, item: Any) -> Any:
        return json_key(item[self._key]) if _is_map(item) and self._key in item else _KEYLESS

    def _file(self, position: int, identity: Any) -> None:
        if identity is _KEYLESS:
            heapq.heappush(self._keyless, position)
        else:
            heapq.heappush(self._heaps.setdefault(identity, []), position)

    def appended(self, item: Any) -> None:
        position = len(self._identities)
        identity = self._identity(item)
        self._identities.append(identity)
        # The largest position filed yet: appending keeps its heap a heap, in O(1).
        (self._keyless if identity is _KEYLESS else self._heaps.setdefault(identity, [])).append(position)

    def moved(self, position: int, item: Any) -> None:
        """The item at `position` was replaced by `item` (whose key may differ)."""
        identity = self._identity(item)
        if identity is _KEYLESS or identity != self._identities[position]:
            self._identities[position] = identity
            self._file(position, identity)

    def first(self, value: Any) -> int | None:
        identity = json_key(value)
        heap = self._heaps.get(identity)
        while heap:
            position = heap[0]
            if self._identities[position] is not _KEYLESS and self._identities[position] == identity:
                return position
            heapq.heappop(heap)
        return None

    @property
    def identities(self) -> list[Any]:
        """Each position's identity now (`_KEYLESS` for an item without the key)."""
        return self._identities

    def first_keyless(self) -> int | None:
        """The lowest position whose item has no merge key (such an item never gets one back)."""
        return self._keyless[0] if self._keyless else None


def _merge_without_special_elements(
    original: list[Any], patch: list[Any], key: str, meta: PatchMeta
) -> tuple[list[Any], list[Any]]:
    """Each patch item merged into the first item with its key, or appended (Go `mergeSlice`); returns the
    merged items and their identities (`_KeyIndex`), each computed once.

    As a search from the start would: an item without the merge key met before the match (or anywhere,
    when nothing matches) is an error naming it."""
    merged = list(original)
    index = _KeyIndex(merged, key)
    for item in patch:
        position = index.first(_item_key(item, key))
        keyless = index.first_keyless()
        if keyless is not None and (position is None or keyless < position):
            _item_key(merged[keyless], key)  # raises, naming it
        if position is not None:
            merged[position] = _merge_map(merged[position], item, meta)
            index.moved(position, merged[position])
        else:
            _discard_nulls(item)
            merged.append(item)
            index.appended(item)
    return merged, index.identities


def _normalize_keyed_order(
    merged: list[Any], identities: list[Any], patch: list[Any], originals: int, key: str
) -> list[Any]:
    """Go's order of a merged keyed list (`normalizeElementOrder`, then `mergeSortedSlice`), each item's
    identity computed once: the items in the patch by their first position there, the others by their
    first position among the first `originals` (the original's), interleaved.

    Patch items never carry a directive here, so a merge changes no original item's object, only its
    state: an item's position in the original's order is read with its identity after the merge, as
    Go's lookups read it."""
    patch_identities = [json_key(_item_key(item, key)) for item in patch]
    for item, identity in zip(merged, identities, strict=True):
        if identity is _KEYLESS:
            _item_key(item, key)  # raises, naming it
    in_patch: dict[Any, int] = {}
    for position, identity in enumerate(patch_identities):
        in_patch.setdefault(identity, position)
    in_original: dict[Any, int] = {}
    for position in range(originals):
        in_original.setdefault(identities[position], position)
    # (sort position, position in the original or -1, item); `$patch: delete` items go last, unsorted.
    hits: list[tuple[int, int, Any]] = []
    rest: list[tuple[int, int, Any]] = []
    deleted_hits: list[tuple[int, int, Any]] = []
    deleted_rest: list[tuple[int, int, Any]] = []
    for item, identity in zip(merged, identities, strict=True):
        at = in_original.get(identity, -1)
        deleted = item.get(_DIRECTIVE) == "delete"
        if identity in in_patch:
            (deleted_hits if deleted else hits).append((in_patch[identity], at, item))
        else:
            (deleted_rest if deleted else rest).append((at, at, item))
    hits.sort(key=_first)  # stable: ties keep the merged order
    rest.sort(key=_first)
    right, left = hits + deleted_hits, rest + deleted_rest
    # Interleave: an original-only item goes before a patch item that came after it in the original.
    result: list[Any] = []
    i = j = 0
    while i < len(left) and j < len(right):
        left_at, right_at = left[i][1], right[j][1]
        if left_at >= 0 and right_at >= 0 and left_at < right_at:
            result.append(left[i][2])
            i += 1
        else:
            result.append(right[j][2])
            j += 1
    result.extend(entry[2] for entry in left[i:])
    result.extend(entry[2] for entry in right[j:])
    return result


def _first(entry: tuple[int, int, Any]) -> int:
    return entry[0]


def _index_fn(items: list[Any], key: str | None) -> Callable[[Any], int]:
    """The first position of an item's identity in `items`, -1 if absent (one dict, built once)."""
    positions: dict[Any, int] = {}
    for position, item in enumerate(items):
        positions.setdefault(_identity(item, key), position)

    def index(value: Any) -> int:
        return positions.get(_identity(value, key), -1)

    return index


def _identity(item: Any, key: str | None) -> Hashable:
    if key is None:
        return _scalar_key(item)
    return json_key(item.get(key)) if _is_map(item) else None


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
