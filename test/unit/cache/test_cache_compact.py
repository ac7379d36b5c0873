"""`controller.cache.compact.StringTable`: one shared copy of each repeated string value, within bounds."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from controller.cache.compact import StringTable


def _decoded(name: str) -> Any:
    return orjson.loads(
        orjson.dumps(
            {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "metadata": {"name": name, "labels": {"team": "vision"}},
                "spec": {"trainer": {"command": ["torchrun", "train.py"]}},
            }
        )
    )


def test_equal_values_of_different_objects_become_one_object_and_stay_equal() -> None:
    table = StringTable()
    a, b = _decoded("a"), _decoded("b")
    expected = orjson.loads(orjson.dumps(b))
    assert a["apiVersion"] is not b["apiVersion"]  # orjson decodes each value anew
    table.dedupe(a)
    assert table.dedupe(b) is b
    assert b == expected
    assert a["apiVersion"] is b["apiVersion"]
    assert a["metadata"]["labels"]["team"] is b["metadata"]["labels"]["team"]
    assert a["spec"]["trainer"]["command"][1] is b["spec"]["trainer"]["command"][1]


def test_a_value_longer_than_the_bound_is_left_alone() -> None:
    table = StringTable(max_length=4)
    long_a, long_b = "x" * 5, "".join(["x"] * 5)
    assert table.share(long_a) is long_a
    assert table.share(long_b) is long_b
    assert len(table) == 0


def test_the_table_never_holds_more_than_its_bound_of_unique_values() -> None:
    table = StringTable(max_entries=8)
    for i in range(100):
        table.dedupe({"name": f"unique-{i}"})
        assert len(table) <= 8
    shared = table.share("kept")
    assert table.share("".join(["ke", "pt"])) is shared


def test_a_deeply_nested_tree_is_walked_without_recursion() -> None:
    tree: Any = "leaf"
    for _ in range(100_000):  # far deeper than Python's recursion limit
        tree = [tree]
    assert StringTable().dedupe(tree) is tree


def test_bounds_must_make_sense() -> None:
    with pytest.raises(ValueError, match="max_entries"):
        StringTable(max_entries=0)
