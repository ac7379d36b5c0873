"""Fixtures for the reliability suite: the Tier 1 control plane of ``test/integration`` and faults put in
its way.

- ``envtest_binaries``, ``crd_sources``, ``control_plane``, ``control_plane_without_watch_cache``,
  ``kubeconfig``, ``eventually``: the integration tier's own fixtures, imported from ``support.tier1``
  (a plane of this suite's own when both directories run in one
  session: these scenarios restart its kube-apiserver, compact its etcd and register webhooks with
  ``failurePolicy: Fail``, which no other module should meet).
- ``namespace``: a fresh namespace per test, as the integration tier's, but emptied of TrainJobs, runtimes
  and JobSets before it is deleted (``reliability.empty_namespace``): Tier 1 leaves deleted namespaces
  Terminating with their objects, and every later manager would go on reconciling them.
- ``admin`` (session): an admin client, unthrottled, for the tests' own reads and writes.
- ``service_account_kubeconfig`` (session): the shipped RBAC installed (``kubectl kustomize
  config/default``) and a token kubeconfig for the manager's ServiceAccount, as the Trainer integration
  suite does: every manager here runs with the shipped roles.
- ``proxies`` (function): :class:`support.reliability.ApiserverProxies`, fault proxies in front of
  kube-apiserver, stopped (threads joined) after the test.
- ``profile``: every test that asks for it runs twice, ``ci`` (the default run) and ``soak`` (marked
  ``soak``, left out unless ``-m soak``: ``make soak``).
- ``figures`` (session): each test reports its figures; they are printed again at the end of the session.
- ``clean_lease``: the Trainer Lease deleted before and after a test that runs several managers, so the
  next one does not wait out a dead holder's lease.
- ``production_logging`` (module, autouse): structlog renders as the manager binary does (JSON lines,
  tracebacks as data without locals), from warnings up, and is put back after the module. structlog's
  unconfigured default draws pretty tracebacks, a second or two each on this machine, on the worker
  thread that logs ``reconcile.failed``, holding its key meanwhile: backoff and failover figures would
  measure the renderer.

Every test here but the fault proxy's own is marked ``integration``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from controller import envtest
from controller.client.client import Client
from controller.envtest import Binaries, ControlPlane
from support import reliability, tier1

HERE = Path(__file__).resolve().parent

# The Tier 1 fixtures of support.tier1, registered for this directory under the same names.
envtest_binaries = tier1.envtest_binaries
crd_sources = tier1.crd_sources
control_plane = tier1.control_plane
control_plane_without_watch_cache = tier1.control_plane_without_watch_cache
kubeconfig = tier1.kubeconfig
eventually = tier1.eventually

_SELF_CONTAINED = {"test_faultproxy.py"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # This hook sees every collected item of the session, not only ours.
    for item in items:
        if item.path.is_relative_to(HERE) and item.path.name not in _SELF_CONTAINED:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="module", autouse=True)
def production_logging() -> Iterator[None]:
    previous = structlog.get_config()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.ExceptionRenderer(
                structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
            ),
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,  # what this module's threads log goes back to the defaults after it
    )
    yield
    structlog.configure(**previous)
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(scope="session")
def figures() -> Any:
    return _FIGURES


_FIGURES = reliability.Figures()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if not _FIGURES.rows:
        return
    terminalreporter.section("reliability figures")
    for line in _FIGURES.lines():
        terminalreporter.write_line(line)


@pytest.fixture(
    params=[reliability.CI, pytest.param(reliability.SOAK, marks=pytest.mark.soak)], ids=["ci", "soak"]
)
def profile(request: pytest.FixtureRequest) -> Any:
    return request.param


@pytest.fixture(scope="session")
def admin(kubeconfig: Path) -> Iterator[Client]:
    client = Client.load(str(kubeconfig), user_agent=reliability.USER, qps=0)
    yield client
    client.close()


@pytest.fixture(scope="session")
def service_account_kubeconfig(
    control_plane: ControlPlane, admin: Client, envtest_binaries: Binaries
) -> Path:
    return reliability.install.manager_kubeconfig(control_plane, admin, envtest_binaries)


@pytest.fixture
def namespace(control_plane: ControlPlane, admin: Client, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace, emptied of TrainJobs, runtimes and JobSets and deleted after the test."""
    name = envtest.namespace_name(request.node.name)
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    reliability.empty_namespace(admin, name)
    deleted = control_plane.admin_request("DELETE", f"/api/v1/namespaces/{name}")
    assert deleted.status in (200, 202, 404), deleted.body


@pytest.fixture
def proxies(control_plane: ControlPlane, tmp_path: Path) -> Iterator[Any]:
    made = reliability.ApiserverProxies(control_plane, tmp_path / "proxies")
    yield made
    made.stop_all()


@pytest.fixture
def clean_lease(admin: Client) -> Iterator[None]:
    reliability.delete_lease(admin)
    yield
    reliability.delete_lease(admin)
