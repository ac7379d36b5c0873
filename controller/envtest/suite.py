"""What a test suite needs around a cluster, besides the cluster: bounded waits, names, test kinds, scripts.

Go origin: Gomega's ``Eventually`` (as controller-runtime's envtest suites use it) and apimachinery's
``wait.PollUntilContextTimeout``; the rest is what every suite of this repository did for itself. One
implementation here serves the integration and e2e fixtures and the unit-test packages that wait for a
thread under test.

Guarantees:

- :func:`eventually` calls ``fn`` until it returns without raising one of ``retry_on`` (AssertionError by
  default) and returns its result; other exceptions propagate at once; when ``timeout`` seconds have passed
  the last retried exception propagates. :func:`wait_until` is the same for a predicate and raises
  AssertionError naming it. Both wait in real time (they wait for other threads and processes, never for a
  fake clock) with ``interval`` between tries, and always try once more after the deadline has passed.
- :func:`namespace_name` turns a test's name into a valid, unique namespace name (at most 47 characters).
- :func:`namespaced_crd` is a minimal structural CustomResourceDefinition for a kind a test makes up: one
  served and stored version, a status subresource, and the ``spec``/``status`` schemas given.

Deliberately missing: Gomega's matchers and ``Consistently``; a test asserts with plain ``assert``.
"""

from __future__ import annotations

import re
import secrets
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from controller.clock import REAL_CLOCK

T = TypeVar("T")

__all__ = ["eventually", "namespace_name", "namespaced_crd", "wait_until"]


def eventually(
    fn: Callable[[], T],
    *,
    timeout: float = 10.0,
    interval: float = 0.1,
    retry_on: tuple[type[BaseException], ...] = (AssertionError,),
) -> T:
    """``fn()``'s result once it stops raising ``retry_on``; after ``timeout`` seconds, its last exception."""
    deadline = REAL_CLOCK.monotonic() + timeout
    pause = threading.Event()  # never set: waiting on it is an interval between tries
    while True:
        try:
            return fn()
        except retry_on:
            if REAL_CLOCK.monotonic() >= deadline:
                raise
        REAL_CLOCK.wait(pause, interval)


class _NotYet(Exception):
    """The predicate of :func:`wait_until` does not hold yet."""


def wait_until(condition: Callable[[], bool], *, timeout: float = 5.0, interval: float = 0.001) -> None:
    """Return once ``condition()`` holds; raise AssertionError if it still does not after ``timeout`` seconds.

    For synchronising with a thread under test (a waiter to block, a queue to fill), not for timing.
    """

    def holds() -> None:
        if not condition():
            raise _NotYet

    try:
        eventually(holds, timeout=timeout, interval=interval, retry_on=(_NotYet,))
    except _NotYet:
        raise AssertionError(f"condition not met within {timeout}s: {condition}") from None


def namespace_name(test_name: str) -> str:
    """``<test name as a DNS label, at most 40 characters>-<6 random hex digits>``."""
    slug = re.sub(r"[^a-z0-9]+", "-", test_name.lower()).strip("-")[:40].rstrip("-")
    return f"{slug or 'test'}-{secrets.token_hex(3)}"


def namespaced_crd(
    group: str,
    kind: str,
    *,
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
    version: str = "v1",
    plural: str | None = None,
) -> dict[str, Any]:
    """A namespaced CRD for ``kind`` in ``group``: ``version`` served and stored, with a status subresource.

    ``spec`` and ``status`` are the OpenAPI schemas of those two fields; ``plural`` defaults to the kind in
    lower case with an ``s``.
    """
    singular = kind.lower()
    plural = plural or f"{singular}s"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": singular},
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"spec": dict(spec), "status": dict(status)},
                        }
                    },
                }
            ],
        },
    }
