"""Fixtures for the integration tier: one real etcd + kube-apiserver per test session (Tier 1).

- ``control_plane`` (session): a started :class:`controller.envtest.ControlPlane` with the third-party CRDs
  (JobSet, scheduler-plugins and Volcano PodGroups, read from the Go module cache by ``support.thirdparty``)
  and every ``config/crd/*.yaml`` of this project installed. Builds the binaries first if they are missing
  (``hack/build-binaries.sh``; a cold build takes about half an hour). Without Go (needed for the build and
  for the third-party CRDs) the tests that use it are skipped with the reason, or fail with it when
  prerequisites are required (``make test``, CI: the ``prerequisite`` fixture in ``test/conftest.py``).
  Stopped at session end;
  if the run is interrupted, the exit hooks of ``controller.envtest.process`` stop it.
- ``envtest_binaries`` (session): the etcd and kube-apiserver paths, for tests that start planes of their
  own (skips, or fails when prerequisites are required, if they are missing and Go is not there to
  build them).
- ``control_plane_without_watch_cache`` (session, started on first use): a bare plane with
  ``--watch-cache=false``, where ``compact_etcd()`` makes watches from older resourceVersions get 410.
- ``kubeconfig`` (session): the admin kubeconfig path. Nothing global is set: tests pass it on.
- ``namespace`` (function): a fresh namespace per test, deleted afterwards. Tier 1 runs no namespace
  controller, so a deleted namespace stays Terminating; names are unique, so that is harmless.
- ``plain_tracebacks`` (session, autouse): structlog's default configuration with plain tracebacks instead of
  its pretty ones. A pretty traceback takes a second or two to draw on this machine, on the worker thread
  that logs ``reconcile.failed`` (and under the GIL every thread waits): earlier tests' TrainJobs, left in
  namespaces Tier 1 never finishes deleting, keep failing, and their tracebacks slowed every later test.
- ``eventually`` (function): bounded polling, :func:`controller.envtest.eventually`:
  ``eventually(fn, timeout=10.0, interval=0.1)`` calls ``fn`` until it stops raising AssertionError (or the
  ``retry_on`` exception types) and returns its result; on timeout the last such exception propagates.

The session fixtures live in ``support.tier1`` (the reliability suite registers them too); this file imports
them, which registers them for this directory. Every test under ``test/integration`` is marked
``integration``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from support import tier1

HERE = Path(__file__).resolve().parent

# The Tier 1 fixtures of support.tier1, registered for this directory under the same names.
envtest_binaries = tier1.envtest_binaries
crd_sources = tier1.crd_sources
control_plane = tier1.control_plane
control_plane_without_watch_cache = tier1.control_plane_without_watch_cache
kubeconfig = tier1.kubeconfig
namespace = tier1.namespace
eventually = tier1.eventually


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # This hook sees every collected item of the session, not only ours.
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session", autouse=True)
def plain_tracebacks() -> Iterator[None]:
    previous = structlog.get_config()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.StackInfoRenderer(),
            structlog.dev.set_exc_info,
            structlog.processors.TimeStamper(fmt="%Y-%m-%d %H:%M:%S", utc=False),
            structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback),
        ]
    )
    yield
    structlog.configure(**previous)
