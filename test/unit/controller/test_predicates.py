"""Predicates: controller-runtime pkg/predicate/predicate_test.go, as behaviour."""

from __future__ import annotations

from typing import Any

import pytest

from controller.controller.event import CreateEvent, DeleteEvent, GenericEvent, UpdateEvent
from controller.controller.predicate import (
    AnnotationChangedPredicate,
    Funcs,
    GenerationChangedPredicate,
    LabelChangedPredicate,
    ResourceVersionChangedPredicate,
    and_,
    new_predicate_funcs,
    not_,
    or_,
)


def _o(**meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": "a", "namespace": "ns", **meta}}


def _update(old: dict[str, Any], new: dict[str, Any]) -> UpdateEvent:
    return UpdateEvent(object_old=old, object_new=new)


ALL_KINDS_OF_NON_UPDATE = [
    ("create", CreateEvent(object=_o())),
    ("delete", DeleteEvent(object=_o())),
    ("generic", GenericEvent(object=_o())),
]


@pytest.mark.parametrize(
    ("predicate", "old", "new", "passes"),
    [
        # "GenerationChangedPredicate": "should return true when the generation changes"
        pytest.param(
            GenerationChangedPredicate(), _o(generation=1), _o(generation=2), True, id="generation-changed"
        ),
        # "should return false when the generation is the same" (a status-only write)
        pytest.param(
            GenerationChangedPredicate(),
            _o(generation=1, resourceVersion="1"),
            _o(generation=1, resourceVersion="2"),
            False,
            id="generation-same-status-write",
        ),
        pytest.param(
            ResourceVersionChangedPredicate(),
            _o(resourceVersion="1"),
            _o(resourceVersion="2"),
            True,
            id="rv-changed",
        ),
        # a resync replays the same object: old.RV == new.RV
        pytest.param(
            ResourceVersionChangedPredicate(),
            _o(resourceVersion="1"),
            _o(resourceVersion="1"),
            False,
            id="rv-same",
        ),
        pytest.param(
            LabelChangedPredicate(), _o(labels={"a": "1"}), _o(labels={"a": "2"}), True, id="labels-changed"
        ),
        pytest.param(
            LabelChangedPredicate(), _o(labels={"a": "1"}), _o(labels={"a": "1"}), False, id="labels-same"
        ),
        pytest.param(LabelChangedPredicate(), _o(), _o(labels={"a": "1"}), True, id="labels-added"),
        pytest.param(LabelChangedPredicate(), _o(), _o(labels={}), False, id="labels-absent-equals-empty"),
        pytest.param(
            AnnotationChangedPredicate(),
            _o(annotations={"a": "1"}),
            _o(annotations={"a": "2"}),
            True,
            id="annotations-changed",
        ),
        pytest.param(
            AnnotationChangedPredicate(),
            _o(annotations={"a": "1"}),
            _o(annotations={"a": "1"}),
            False,
            id="annotations-same",
        ),
    ],
)
def test_changed_predicates_judge_updates(predicate: Any, old: Any, new: Any, passes: bool) -> None:
    assert predicate.update(_update(old, new)) is passes


@pytest.mark.parametrize(
    "predicate",
    [
        GenerationChangedPredicate(),
        ResourceVersionChangedPredicate(),
        LabelChangedPredicate(),
        AnnotationChangedPredicate(),
    ],
    ids=repr,
)
@pytest.mark.parametrize(
    ("kind", "event"), ALL_KINDS_OF_NON_UPDATE, ids=[k for k, _ in ALL_KINDS_OF_NON_UPDATE]
)
def test_changed_predicates_let_every_other_event_kind_pass(predicate: Any, kind: str, event: Any) -> None:
    assert getattr(predicate, kind)(event) is True


def test_funcs_without_a_function_lets_that_kind_pass_and_uses_the_ones_given() -> None:
    p = Funcs(create_fn=lambda e: False)
    assert p.create(CreateEvent(object=_o())) is False
    assert p.update(_update(_o(), _o())) is True
    assert p.delete(DeleteEvent(object=_o())) is True
    assert p.generic(GenericEvent(object=_o())) is True


def test_new_predicate_funcs_applies_the_filter_to_the_new_object_of_updates() -> None:
    keep_labelled = new_predicate_funcs(lambda o: "keep" in (o["metadata"].get("labels") or {}))
    assert keep_labelled.update(_update(_o(), _o(labels={"keep": "1"}))) is True
    assert keep_labelled.update(_update(_o(labels={"keep": "1"}), _o())) is False
    assert keep_labelled.create(CreateEvent(object=_o(labels={"keep": "1"}))) is True
    assert keep_labelled.delete(DeleteEvent(object=_o())) is False


NO = Funcs(
    create_fn=lambda e: False,
    update_fn=lambda e: False,
    delete_fn=lambda e: False,
    generic_fn=lambda e: False,
)
YES = Funcs()


@pytest.mark.parametrize(
    ("combined", "passes"),
    [
        # "And": "should return false when one of its predicates returns false"
        pytest.param(and_(YES, NO), False, id="and-one-false"),
        pytest.param(and_(YES, YES), True, id="and-all-true"),
        pytest.param(and_(), True, id="and-empty-passes"),
        # "Or": "should return true when one of its predicates returns true"
        pytest.param(or_(NO, YES), True, id="or-one-true"),
        pytest.param(or_(NO, NO), False, id="or-all-false"),
        pytest.param(or_(), False, id="or-empty-rejects"),
        # "Not": "should return false when its predicate returns true"
        pytest.param(not_(YES), False, id="not-true"),
        pytest.param(not_(NO), True, id="not-false"),
    ],
)
def test_combinators_apply_to_every_event_kind(combined: Any, passes: bool) -> None:
    assert combined.create(CreateEvent(object=_o())) is passes
    assert combined.update(_update(_o(), _o())) is passes
    assert combined.delete(DeleteEvent(object=_o())) is passes
    assert combined.generic(GenericEvent(object=_o())) is passes


def test_or_of_generation_and_labels_passes_a_label_only_change_but_not_a_status_write() -> None:
    p = or_(GenerationChangedPredicate(), LabelChangedPredicate())
    assert p.update(_update(_o(generation=1, labels={"a": "1"}), _o(generation=1, labels={"a": "2"}))) is True
    assert (
        p.update(_update(_o(generation=1, resourceVersion="1"), _o(generation=1, resourceVersion="2")))
        is False
    )


def test_and_stops_at_the_first_false() -> None:
    seen: list[str] = []

    def record(name: str, answer: bool) -> Funcs:
        def fn(e: Any) -> bool:
            seen.append(name)
            return answer

        return Funcs(create_fn=fn)

    assert and_(record("a", False), record("b", True)).create(CreateEvent(object=_o())) is False
    assert seen == ["a"]
