"""controller.controller.source.Kind: controller-runtime pkg/source Kind, as behaviour, with an in-memory
informer."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from controller.controller.handler import EnqueueRequestForObject
from controller.controller.predicate import Funcs as PredicateFuncs
from controller.controller.reconcile import Request
from controller.controller.source import Kind
from controller.workqueue.queue import Queue


@pytest.fixture
def queue() -> Iterator[Queue[Request]]:
    with Queue[Request]() as q:
        yield q


def queued(queue: Queue[Request]) -> list[Request]:
    out = []
    while len(queue):
        item, _ = queue.get()
        assert item is not None
        queue.done(item)
        out.append(item)
    return out


def test_a_started_kind_feeds_the_informers_events_through_its_predicates_into_the_queue(
    new_informer: Callable[..., Any], mkobj: Callable[..., dict[str, Any]], queue: Queue[Request]
) -> None:
    informer = new_informer()
    only_b = PredicateFuncs(create_fn=lambda e: e.object["metadata"]["name"] == "b")
    source = Kind(informer, EnqueueRequestForObject(), only_b)
    source.start(queue)
    informer.add(mkobj("a"))
    informer.add(mkobj("b"))
    assert queued(queue) == [Request("ns", "b")]


def test_a_kind_has_synced_only_once_started_and_its_registration_has(
    new_informer: Callable[..., Any], queue: Queue[Request]
) -> None:
    informer = new_informer(synced=True)
    source = Kind(informer, EnqueueRequestForObject())
    assert not source.has_synced()  # not started: nothing was delivered to the queue yet
    source.start(queue)
    assert source.has_synced()
    informer.synced = False
    assert not source.has_synced()


def test_stop_removes_the_handler_from_the_informer_and_is_idempotent(
    new_informer: Callable[..., Any], mkobj: Callable[..., dict[str, Any]], queue: Queue[Request]
) -> None:
    informer = new_informer()
    source = Kind(informer, EnqueueRequestForObject())
    source.start(queue)
    assert len(informer.handlers) == 1
    source.stop()
    source.stop()
    assert informer.handlers == []
    informer.add(mkobj("late"))
    assert queued(queue) == []
    assert "stopped" in repr(source)


def test_a_kind_is_started_once(new_informer: Callable[..., Any], queue: Queue[Request]) -> None:
    source = Kind(new_informer(), EnqueueRequestForObject())
    source.start(queue)
    with pytest.raises(RuntimeError, match="more than once"):
        source.start(queue)


def test_a_kind_stopped_while_starting_removes_the_registration_it_just_made(
    new_informer: Callable[..., Any], queue: Queue[Request]
) -> None:
    informer = new_informer()
    source = Kind(informer, EnqueueRequestForObject())
    add = informer.add_event_handler

    def add_then_stop(handler: Any, resync_period: float | None = None) -> Any:
        registration = add(handler)
        source.stop()  # the controller stops between registration and bookkeeping
        return registration

    informer.add_event_handler = add_then_stop
    source.start(queue)
    assert informer.handlers == []
    assert not source.has_synced()
