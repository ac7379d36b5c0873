"""`controller.trainer.apply`: merge patches as controller-runtime's `MergeFrom`, when an apply can be
skipped because it would change nothing, and the objects one reconcile has applied."""

from __future__ import annotations

from typing import Any

import pytest

from controller.client.gvk import GVK
from controller.trainer.apply import Applied, Applier, contains, merge_patch
from runtime.framework import MemoryReader
from support.fakes import FakeCluster

JOBSET = GVK("jobset.x-k8s.io", "v1alpha2", "JobSet")


def obj(gvk: GVK, name: str, namespace: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": gvk.api_version, "kind": gvk.kind, "metadata": metadata}


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


def recorded(applier: Applier, owner: tuple[str, str], body: dict[str, Any]) -> None:
    """`body` applied for `owner` (through a fake API server that holds nothing else)."""
    assert applier.for_reconcile(owner, MemoryReader()).apply(body) is Applied.APPLIED


def test_same_body_only_after_recording_that_exact_body() -> None:
    applied = Applier(FakeCluster(), field_manager="trainer")
    owner = ("ns", "tj")
    assert not applied.same_body(owner, BODY)
    recorded(applied, owner, BODY)
    assert applied.same_body(owner, BODY)
    changed = {**BODY, "data": {"k": "other"}}
    assert not applied.same_body(owner, changed)
    assert not applied.same_body(("ns", "another"), BODY)


def test_key_order_does_not_make_a_body_different() -> None:
    applied = Applier(FakeCluster(), field_manager="trainer")
    recorded(applied, ("ns", "tj"), BODY)
    reordered = {
        "data": {"k": "v"},
        "metadata": {"namespace": "ns", "name": "x"},
        "kind": "ConfigMap",
        "apiVersion": "v1",
    }
    assert applied.same_body(("ns", "tj"), reordered)


def test_forget_drops_everything_of_a_trainjob() -> None:
    applied = Applier(FakeCluster(), field_manager="trainer")
    recorded(applied, ("ns", "tj"), BODY)
    recorded(applied, ("ns", "other"), BODY)
    applied.forget(("ns", "tj"))
    assert not applied.same_body(("ns", "tj"), BODY)
    assert applied.same_body(("ns", "other"), BODY)
    assert len(applied) == 1


def test_each_object_of_a_trainjob_keeps_its_own_last_body() -> None:
    applied = Applier(FakeCluster(), field_manager="trainer")
    owner = ("ns", "tj")
    objects = [{**obj(GVK("", "v1", "ConfigMap"), f"c{i}", "ns"), "data": {"k": "v"}} for i in range(4)]
    for body in objects:
        recorded(applied, owner, body)
    changed = {**objects[2], "data": {"k": "changed"}}
    recorded(applied, owner, changed)  # replaces the entry of c2, in the middle of the record
    assert len(applied) == 4
    assert [applied.same_body(owner, body) for body in objects] == [True, True, False, True]
    assert applied.same_body(owner, changed)
    renamed = {**objects[0], "metadata": {"name": "c0", "namespace": "other"}}  # same name, other key
    assert not applied.same_body(owner, renamed)


def test_applied_objects_answer_before_the_cache_has_seen_them() -> None:
    server = FakeCluster()
    overlay = Applier(server, field_manager="trainer").for_reconcile(("ns", "tj"), MemoryReader())
    assert overlay.get(JOBSET.api_version, "JobSet", "a", "ns") is None
    overlay.apply(obj(JOBSET, "a", "ns"))
    applied = server.reader.get(JOBSET.api_version, "JobSet", "a", "ns")  # what the apply returned
    assert overlay.get(JOBSET.api_version, "JobSet", "a", "ns") is applied
    assert overlay.get(JOBSET.api_version, "JobSet", "a", "other") is None


def test_the_object_an_apply_returned_is_an_own_write_once_and_no_other_version_is() -> None:
    server = FakeCluster()
    applier = Applier(server, field_manager="trainer")
    owner = ("ns", "tj")
    recorded(applier, owner, BODY)
    reply = server.reader.get("v1", "ConfigMap", "x", "ns")
    assert reply is not None and reply["metadata"].get("resourceVersion")
    changed = {**reply, "metadata": {**reply["metadata"], "resourceVersion": "another"}}
    assert not applier.is_own_write(changed)  # someone else's write: reconciled
    assert applier.is_own_write(reply)  # the event the apply caused: dropped
    assert not applier.is_own_write(reply)  # a relist or resync replaying it: reconciled
    recorded(applier, owner, {**BODY, "data": {"k": "again"}})
    again = server.reader.get("v1", "ConfigMap", "x", "ns")
    applier.forget(owner)
    assert not applier.is_own_write(again)  # nothing is remembered for a forgotten TrainJob
