"""`controller.trainer.apply`: merge patches as controller-runtime's `MergeFrom`, and when an apply can be
skipped because it would change nothing."""

from __future__ import annotations

from typing import Any

import pytest

from controller.trainer.apply import AppliedBodies, contains, merge_patch


def test_merge_patch_sends_changed_and_added_keys_and_nulls_removed_ones() -> None:
    old = {"a": 1, "b": {"c": 1, "d": 2}, "gone": "x"}
    new = {"a": 1, "b": {"c": 2, "d": 2}, "added": [1]}
    assert merge_patch(old, new) == {"b": {"c": 2}, "added": [1], "gone": None}


def test_merge_patch_sends_lists_whole() -> None:
    old = {"conditions": [{"type": "A"}], "jobsStatus": [{"name": "node", "active": 1}]}
    new = {"conditions": [{"type": "A"}, {"type": "B"}], "jobsStatus": [{"name": "node", "active": 1}]}
    assert merge_patch(old, new) == {"conditions": [{"type": "A"}, {"type": "B"}]}


def test_merge_patch_of_equal_objects_is_empty() -> None:
    assert merge_patch({"a": {"b": [1]}}, {"a": {"b": [1]}}) == {}


@pytest.mark.parametrize(
    ("desired", "live", "expected"),
    [
        ({"a": 1}, {"a": 1, "b": 2}, True),  # fields others set (defaults, status) do not matter
        ({"a": 1}, {"a": 2}, False),
        ({"a": {"b": 1}}, {"a": {"b": 1, "c": 0}}, True),
        ({"a": [{"n": 1}]}, {"a": [{"n": 1, "x": 0}]}, True),
        ({"a": [{"n": 1}]}, {"a": [{"n": 1}, {"n": 2}]}, False),  # someone added an item: apply
        ({"a": {}}, {}, True),  # an empty struct is contained in an absent field
        ({"a": []}, {}, True),
        ({"a": {"b": 1}}, {}, False),
        ({"a": True}, {"a": 1}, False),  # bool is not int on the wire
        ({"a": "1"}, {"a": 1}, False),
        ({"a": None}, {}, True),
        ({"a": 1}, None, False),
    ],
    ids=lambda v: repr(v)[:40],
)
def test_contains(desired: Any, live: Any, expected: bool) -> None:
    assert contains(desired, live) is expected


BODY = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "x", "namespace": "ns"},
    "data": {"k": "v"},
}


def test_same_body_only_after_recording_that_exact_body() -> None:
    applied = AppliedBodies()
    owner = ("ns", "tj")
    assert not applied.same_body(owner, BODY)
    applied.record(owner, BODY)
    assert applied.same_body(owner, BODY)
    changed = {**BODY, "data": {"k": "other"}}
    assert not applied.same_body(owner, changed)
    assert not applied.same_body(("ns", "another"), BODY)


def test_key_order_does_not_make_a_body_different() -> None:
    applied = AppliedBodies()
    applied.record(("ns", "tj"), BODY)
    reordered = {
        "data": {"k": "v"},
        "metadata": {"namespace": "ns", "name": "x"},
        "kind": "ConfigMap",
        "apiVersion": "v1",
    }
    assert applied.same_body(("ns", "tj"), reordered)


def test_forget_drops_everything_of_a_trainjob() -> None:
    applied = AppliedBodies()
    applied.record(("ns", "tj"), BODY)
    applied.record(("ns", "other"), BODY)
    applied.forget(("ns", "tj"))
    assert not applied.same_body(("ns", "tj"), BODY)
    assert applied.same_body(("ns", "other"), BODY)
    assert len(applied) == 1
