"""Fakes shared by the controller/manager/manager unit tests.

``FakeInformer`` is an in-memory event source with the shared informer's handler surface. It delivers every
event synchronously on the caller's thread, to every registered handler, in registration order. It does not
model: a store or indexes, relists and resyncs (the test chooses ``is_in_initial_list`` and resourceVersions
itself), per-handler buffering and delivery threads, or removal of handlers.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from controller.clock import FakeClock


class FakeRegistration:
    def __init__(self, informer: FakeInformer, handler: Any) -> None:
        self._informer = informer
        self.handler = handler

    def has_synced(self) -> bool:
        return self._informer.synced


class FakeInformer:
    def __init__(self, *, synced: bool = True) -> None:
        self.synced = synced
        self.handlers: list[Any] = []

    def add_event_handler(self, handler: Any, resync_period: float | None = None) -> FakeRegistration:
        self.handlers.append(handler)
        return FakeRegistration(self, handler)

    def remove_event_handler(self, registration: FakeRegistration) -> None:
        self.handlers.remove(registration.handler)

    def has_synced(self) -> bool:
        return self.synced

    def add(self, obj: dict[str, Any], *, initial: bool = False) -> None:
        for handler in self.handlers:
            handler.on_add(obj, initial)

    def update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        for handler in self.handlers:
            handler.on_update(old, new)

    def delete(self, obj: Any) -> None:
        for handler in self.handlers:
            handler.on_delete(obj)


def obj(
    name: str,
    namespace: str = "ns",
    *,
    rv: str = "1",
    generation: int = 1,
    owners: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A minimal wire object."""
    meta: dict[str, Any] = {"name": name, "resourceVersion": rv, "generation": generation}
    if namespace:
        meta["namespace"] = namespace
    if owners is not None:
        meta["ownerReferences"] = owners
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


def run_in_thread(fn: Callable[[], Any], name: str = "test/helper") -> tuple[threading.Thread, list[Any]]:
    """Runs ``fn`` on a thread; the list receives its return value or exception."""
    out: list[Any] = []

    def target() -> None:
        try:
            out.append(fn())
        except BaseException as exc:
            out.append(exc)

    thread = threading.Thread(target=target, name=name)
    thread.start()
    return thread, out


def http_get(address: tuple[str, int] | None, path: str) -> tuple[int, str]:
    """``GET path`` from one of our loopback servers: the status and the body as text."""
    assert address is not None, "the server is not running"
    conn = http.client.HTTPConnection(*address, timeout=5)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


@pytest.fixture(name="http_get")
def http_get_fixture() -> Callable[[tuple[str, int] | None, str], tuple[int, str]]:
    return http_get


def step_until_done(clock: FakeClock, thread: threading.Thread, step: float, limit: float) -> None:
    """Steps fake time by ``step`` until ``thread`` exits or ``limit`` seconds of fake time have passed."""
    start = clock.monotonic()
    while thread.is_alive() and clock.monotonic() - start <= limit:
        clock.step(step)
        thread.join(0.005)  # hands the CPU to the thread; fake time only moves through step()
    thread.join(5.0)
    assert not thread.is_alive(), "the thread did not finish"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def informer() -> FakeInformer:
    return FakeInformer()


@pytest.fixture
def fresh_name(request: pytest.FixtureRequest) -> Iterator[str]:
    """A controller name unique to the test, so metric series of different tests never mix."""
    yield "t-" + request.node.name.replace("[", "-").replace("]", "").replace(" ", "-")[:60]


@pytest.fixture
def new_informer() -> Callable[..., FakeInformer]:
    return FakeInformer


@pytest.fixture
def mkobj() -> Callable[..., dict[str, Any]]:
    return obj


@pytest.fixture
def in_thread() -> Callable[..., tuple[threading.Thread, list[Any]]]:
    return run_in_thread


@pytest.fixture
def step_until() -> Callable[[FakeClock, threading.Thread, float, float], None]:
    return step_until_done


class FakeLeaseClient:
    """An in-memory API for Lease objects with optimistic concurrency, shared by several candidates.

    Models: NotFound on get, AlreadyExists on create, Conflict when an update carries a stale
    resourceVersion, a new resourceVersion on every write, and an outage (``down = True``: every call raises
    ``ConnectionFailed``). Does not model: validation, managedFields, generation, watches, or any kind but
    Lease.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.leases: dict[tuple[str, str], dict[str, Any]] = {}
        self._rv = 0
        self.down = False

    def _check_up(self) -> None:
        from controller.client.errors import ConnectionFailed

        if self.down:
            raise ConnectionFailed("fake API server is down")

    def _stamp(self, obj: dict[str, Any]) -> dict[str, Any]:
        import orjson

        self._rv += 1
        stored = orjson.loads(orjson.dumps(obj))
        stored["metadata"]["resourceVersion"] = str(self._rv)
        return stored

    def get(self, gvk: Any, name: str, namespace: str | None = None) -> dict[str, Any]:
        import orjson

        from controller.client.errors import NotFound

        with self._lock:
            self._check_up()
            lease = self.leases.get((namespace or "", name))
            if lease is None:
                raise NotFound(f'leases "{name}" not found', status=404, reason="NotFound")
            return orjson.loads(orjson.dumps(lease))

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        from controller.client.errors import AlreadyExists

        with self._lock:
            self._check_up()
            key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
            if key in self.leases:
                raise AlreadyExists("exists", status=409, reason="AlreadyExists")
            self.leases[key] = self._stamp(obj)
            return self.leases[key]

    def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        from controller.client.errors import Conflict, NotFound

        with self._lock:
            self._check_up()
            key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
            current = self.leases.get(key)
            if current is None:
                raise NotFound("gone", status=404, reason="NotFound")
            if obj["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                raise Conflict("the object has been modified", status=409, reason="Conflict")
            self.leases[key] = self._stamp(obj)
            return self.leases[key]

    def spec(self, namespace: str = "ns", name: str = "lock") -> dict[str, Any]:
        with self._lock:
            return dict(self.leases[(namespace, name)]["spec"])

    def edit(self, namespace: str = "ns", name: str = "lock", **spec: Any) -> None:
        """Another writer changes the lease (new resourceVersion)."""
        with self._lock:
            current = self.leases[(namespace, name)]
            self.leases[(namespace, name)] = self._stamp({**current, "spec": {**current["spec"], **spec}})


@pytest.fixture
def lease_api() -> FakeLeaseClient:
    return FakeLeaseClient()
