"""Fixtures for the informer cache tests: a fake API server per kind, and a cache that is always stopped.

``servers`` maps each kind to a ``FakeListerWatcher`` (created on demand) and records what the cache asked
for each informer (namespace, label and field selectors): the API requests a real client would send.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from controller.cache.informer_cache import InformerCache
from controller.client.gvk import GVK
from controller.clock import FakeClock
from controller.informers.testing import FakeListerWatcher

NODE = GVK("", "v1", "Node")  # the cluster-scoped kind of these tests


@dataclass
class Servers:
    """One in-memory API server per kind, and the selectors each informer was created with."""

    by_kind: dict[GVK, FakeListerWatcher] = field(default_factory=dict)
    asked: dict[GVK, dict[str, Any]] = field(default_factory=dict)

    def __getitem__(self, gvk: GVK) -> FakeListerWatcher:
        return self.by_kind.setdefault(gvk, FakeListerWatcher())

    def factory(
        self,
        gvk: GVK,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> FakeListerWatcher:
        self.asked[gvk] = {
            "namespace": namespace,
            "label_selector": label_selector,
            "field_selector": field_selector,
        }
        return self[gvk]


@pytest.fixture
def servers() -> Servers:
    return Servers()


@pytest.fixture
def make_cache(servers: Servers) -> Iterator[Callable[..., InformerCache]]:
    made: list[InformerCache] = []

    def make(**kwargs: Any) -> InformerCache:
        kwargs.setdefault("clock", FakeClock())
        kwargs.setdefault("gc_tuning", False)
        kwargs.setdefault("is_namespaced", lambda gvk: gvk != NODE)
        cache = InformerCache(servers.factory, **kwargs)
        made.append(cache)
        return cache

    yield make
    for cache in made:
        cache.stop()
