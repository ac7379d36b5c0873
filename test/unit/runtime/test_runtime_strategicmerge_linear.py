"""The indexed (linear) strategic merge gives exactly what the quadratic one it replaced gave.

The reference is the module with its list functions swapped back to the linear searches they were before
(`_Quadratic` below, a copy kept only here): de-duplication by pairwise comparison, a merge-key lookup that
scans the list, a `$patch: delete` that filters the list once per item, positions found by scanning, the
order of a keyed list computed apart for each group. The map-level functions and Go's interleave
(`_merge_sorted`) are shared. Hypothesis draws small documents that are hostile where the indexes could
differ: duplicate and equal-but-not-identical keys (`1`, `1.0`, `True`), keys that are maps or lists with
nulls inside, null keys, items without their key, `$patch` items. Results, and error messages, must match.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import runtime.strategicmerge as sm
from runtime.strategicmerge import PatchMeta, StrategicMergeError, strategic_merge

# --- the quadratic reference (the list functions as they were) ----------------------------------------


class _Quadratic:
    @staticmethod
    def merge_list_values(
        original: list[Any], patch: list[Any], meta: PatchMeta, is_delete_list: bool
    ) -> list[Any]:
        if not original and not patch:
            return original
        kind = sm._element_kind(original, patch)
        key = meta.merge_key
        if kind == "scalar":
            if is_delete_list:
                doomed = set(map(sm._scalar_key, patch))
                return [item for item in original if sm._scalar_key(item) not in doomed]
            merged = _Quadratic.deduplicate_scalars(original + patch)
            patch_items, server_only = _Quadratic.partition(merged, patch, None)
            return _Quadratic.normalize_element_order(patch_items, server_only, patch, original, None)
        if not key:
            raise StrategicMergeError("cannot merge lists without merge key")
        original, patch = _Quadratic.merge_special_elements(original, patch, key)
        merged = _Quadratic.merge_without_special_elements(original, patch, key, meta)
        patch_items, server_only = _Quadratic.partition(merged, patch, key)
        return _Quadratic.normalize_element_order(patch_items, server_only, patch, original, key)

    @staticmethod
    def deduplicate_scalars(items: list[Any]) -> list[Any]:
        result = list(items)
        last = len(result) - 1
        i = 0
        while i < last:
            j = i + 1
            while j <= last:
                if sm._scalar_key(result[i]) == sm._scalar_key(result[j]):
                    result[j] = result[last]
                    result.pop()
                    last -= 1
                    j -= 1
                j += 1
            i += 1
        return result

    @staticmethod
    def merge_special_elements(
        original: list[Any], patch: list[Any], key: str
    ) -> tuple[list[Any], list[Any]]:
        plain = []
        replace = False
        for item in patch:
            directive = item.get(sm._DIRECTIVE)
            if sm._DIRECTIVE not in item:
                plain.append(item)
            elif directive == "delete":
                doomed = sm._item_key(item, key)
                original = [o for o in original if sm._item_key(o, key) != doomed]
            elif directive == "replace":
                replace = True
            elif directive == "merge":
                raise StrategicMergeError("merging lists cannot yet be specified in the patch")
            else:
                raise StrategicMergeError(f"unknown patch type {directive!r} in list")
        if replace:
            return plain, []
        return original, plain

    @staticmethod
    def merge_without_special_elements(
        original: list[Any], patch: list[Any], key: str, meta: PatchMeta
    ) -> list[Any]:
        merged = list(original)
        for item in patch:
            value = sm._item_key(item, key)
            for index, candidate in enumerate(merged):
                if sm._item_key(candidate, key) == value:
                    merged[index] = sm._merge_map(candidate, item, meta)
                    break
            else:
                sm._discard_nulls(item)
                merged.append(item)
        return merged

    @staticmethod
    def partition(merged: list[Any], patch: list[Any], key: str | None) -> tuple[list[Any], list[Any]]:
        if key is None:
            in_patch = {sm._scalar_key(v) for v in patch}
            return (
                [v for v in merged if sm._scalar_key(v) in in_patch],
                [v for v in merged if sm._scalar_key(v) not in in_patch],
            )
        patch_keys = [sm._item_key(v, key) for v in patch]
        hits: list[Any] = []
        rest: list[Any] = []
        for item in merged:
            (hits if sm._item_key(item, key) in patch_keys else rest).append(item)
        return hits, rest

    @staticmethod
    def normalize_element_order(
        patch_items: list[Any],
        server_only: list[Any],
        patch_order: list[Any],
        server_order: list[Any],
        key: str | None,
    ) -> list[Any]:
        patch_items = _Quadratic.sort_by(patch_items, patch_order, key)
        server_only = _Quadratic.sort_by(server_only, server_order, key)
        return sm._merge_sorted(server_only, patch_items, server_order, key)

    @staticmethod
    def sort_by(items: list[Any], order: list[Any], key: str | None) -> list[Any]:
        index = sm._index_fn(order, key)
        deleted = (
            [i for i in items if isinstance(i, dict) and i.get(sm._DIRECTIVE) == "delete"] if key else []
        )
        kept = (
            [i for i in items if not (isinstance(i, dict) and i.get(sm._DIRECTIVE) == "delete")]
            if key
            else list(items)
        )
        kept.sort(key=index)
        return kept + deleted

    @staticmethod
    def index_fn(items: list[Any], key: str | None) -> Callable[[Any], int]:
        def identity(item: Any) -> Any:
            if key is None:
                return sm._scalar_key(item)
            return item.get(key) if isinstance(item, dict) else None

        identities = [identity(item) for item in items]

        def index(value: Any) -> int:
            wanted = identity(value)
            for position, candidate in enumerate(identities):
                if candidate == wanted:
                    return position
            return -1

        return index


@contextlib.contextmanager
def _quadratic() -> Iterator[None]:
    with mock.patch.multiple(
        sm,
        _merge_list_values=_Quadratic.merge_list_values,
        _index_fn=_Quadratic.index_fn,
    ):
        yield


def _outcome(merge: Callable[[], dict[str, Any]]) -> tuple[str, Any]:
    try:
        return "ok", merge()
    except StrategicMergeError as exc:
        return "error", str(exc)


def _both(original: dict[str, Any], patch: dict[str, Any], meta: PatchMeta) -> None:
    linear = _outcome(lambda: strategic_merge(original, patch, meta))
    with _quadratic():
        quadratic = _outcome(lambda: strategic_merge(original, patch, meta))
    assert repr(linear) == repr(quadratic)  # repr: 1 and True, 0.0 and 0 must match in kind too


# --- documents ------------------------------------------------------------------------------------------

_META = PatchMeta(
    fields={
        "env": PatchMeta(merge=True, merge_key="name"),
        "containers": PatchMeta(
            merge=True, merge_key="name", fields={"env": PatchMeta(merge=True, merge_key="name")}
        ),
        "finalizers": PatchMeta(merge=True),
    }
)
_words = st.sampled_from(["a", "b", "c", ""])
_leaf = st.one_of(st.none(), st.booleans(), st.sampled_from([0, 1, 2, 1.0, 2.5, 0.0]), _words)
_KEYS = ["a", "b", "c", None, 1, 1.0, True, {"p": None}, {"p": 1}, {"p": True}, {}, [None], [1], [True]]
"""Merge-key values, few so that they clash: equal but not identical (`1`, `1.0`, `True`), null, and maps
or lists with nulls inside (a merge changes such a key: the nulls go)."""
_directives = st.sampled_from(["delete", "delete", "replace", "merge", "other"])


def _key() -> st.SearchStrategy[Any]:
    return st.sampled_from(range(len(_KEYS))).map(lambda index: copy.deepcopy(_KEYS[index]))


def _item(*, directives: bool) -> st.SearchStrategy[dict[str, Any]]:
    optional: dict[str, st.SearchStrategy[Any]] = {"name": _key(), "value": _leaf}
    if directives:
        optional["$patch"] = _directives
    return st.fixed_dictionaries({}, optional=optional)


def _keyed(*, directives: bool) -> st.SearchStrategy[list[dict[str, Any]]]:
    named = st.fixed_dictionaries({"name": _key(), "value": _leaf})
    return st.lists(st.one_of(named, named, named, _item(directives=directives)), max_size=7)


def _scalar_lists() -> st.SearchStrategy[list[Any]]:
    # One type per list, as Go requires (mixed lists are an error both ways); -0.0 is left out (see
    # `runtime.strategicmerge._merge_scalars`).
    return st.one_of(
        st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), max_size=9),
        st.lists(st.integers(0, 4), max_size=9),
        st.lists(st.booleans(), max_size=4),
        st.lists(st.sampled_from([0.5, 1.0, 2.0]), max_size=6),
        st.lists(st.sampled_from(["a", 1]), max_size=3),
    )


def _document(*, patch: bool) -> st.SearchStrategy[dict[str, Any]]:
    container = st.fixed_dictionaries(
        {"name": _words}, optional={"env": _keyed(directives=patch), "image": _leaf}
    )
    containers = st.lists(st.one_of(container, _item(directives=patch)) if patch else container, max_size=4)
    return st.fixed_dictionaries(
        {},
        optional={
            "env": _keyed(directives=patch),
            "containers": containers,
            "finalizers": _scalar_lists(),
            "$deleteFromPrimitiveList/finalizers": _scalar_lists() if patch else st.nothing(),
        },
    )


@settings(max_examples=1500)
@given(_document(patch=False), _document(patch=True))
def test_the_linear_merge_equals_the_quadratic_one_on_hostile_documents(
    original: dict[str, Any], patch: dict[str, Any]
) -> None:
    _both(original, patch, _META)


@settings(max_examples=500)
@given(_scalar_lists(), _scalar_lists())
def test_scalar_unions_equal_the_pairwise_deduplication(original: list[Any], patch: list[Any]) -> None:
    _both({"finalizers": original}, {"finalizers": patch}, _META)


@pytest.mark.parametrize(
    ("original", "patch"),
    [
        pytest.param(
            [{"name": {"p": None}}, {"name": "a"}],
            [{"name": {"p": None}, "value": "x"}, {"name": {"p": None}, "value": "y"}],
            id="a key that loses its nulls in a merge is no longer found by its old value",
        ),
        pytest.param(
            [{"name": None, "value": "a"}, {"value": "keyless"}, {"name": "b"}],
            [{"name": "b"}, {"name": None}],
            id="the error names the first item without its key when it is met",
        ),
        pytest.param(
            [{"name": "a"}, {"name": 1}, {"name": "a", "value": "second"}],
            [{"name": True, "value": "x"}, {"$patch": "delete", "name": "a"}, {"name": 1.0}],
            id="equal keys of other types and duplicates: the first match, as a scan finds it",
        ),
    ],
)
def test_edge_cases_of_the_index(original: list[Any], patch: list[Any]) -> None:
    _both({"env": original}, {"env": patch}, _META)


def test_the_reference_differs_from_an_unindexed_lookup() -> None:
    # The properties above can fail: a patch whose key value is `True` merges into the item named `1` (Python
    # equality), which an index keyed by the raw JSON text would miss.
    original = {"env": [{"name": 1, "value": "a"}]}
    patch = {"env": [{"name": True, "value": "b"}]}
    with _quadratic():
        assert strategic_merge(original, patch, _META) == {"env": [{"name": True, "value": "b"}]}
    assert strategic_merge(original, patch, _META) == {"env": [{"name": True, "value": "b"}]}
