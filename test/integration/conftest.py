"""Fixtures for the integration tier: one real etcd + kube-apiserver per test session (Tier 1).

- ``control_plane`` (session): a started :class:`controller.envtest.ControlPlane` with the third-party CRDs
  (JobSet, scheduler-plugins and Volcano PodGroups, read from the Go module cache by ``hack/thirdparty.py``)
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

Every test under ``test/integration`` is marked ``integration``.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import structlog

from controller import envtest
from controller.envtest import Binaries, BinariesNotFound, ControlPlane, find_binaries
from controller.envtest.process import install_sigterm_handler

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # This hook sees every collected item of the session, not only ours.
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.integration)


def _thirdparty() -> ModuleType:
    """hack/thirdparty.py, imported by path (hack/ is scripts, not a package)."""
    return envtest.load_script(ROOT / "hack" / "thirdparty.py", "_hack_thirdparty")


def _build_binaries(config: pytest.Config) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("integration: building control-plane binaries (a cold build takes ~30 min)")
    done = subprocess.run(
        ["bash", str(ROOT / "hack" / "build-binaries.sh")], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        pytest.fail(f"hack/build-binaries.sh failed:\n{done.stderr[-4000:]}", pytrace=False)


def _find_binaries() -> Binaries:
    """The binaries of the versions pinned in hack/versions.env (the library takes versions, not paths)."""
    pinned = _thirdparty().read_versions()
    return find_binaries(etcd_version=pinned["ETCD_VERSION"], kubernetes_version=pinned["KUBERNETES_VERSION"])


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


@pytest.fixture(scope="session")
def envtest_binaries(request: pytest.FixtureRequest, prerequisite: Any) -> Binaries:
    # The library installs no signal handler; the suite opts in, so a SIGTERM to pytest stops the planes too.
    install_sigterm_handler()
    try:
        return _find_binaries()
    except BinariesNotFound:
        pass  # build them below
    if shutil.which("go") is None:
        prerequisite.missing(
            "integration tests need Go >= 1.26 on PATH to build etcd and kube-apiserver "
            "(or $TEST_ASSET_ETCD and $TEST_ASSET_KUBE_APISERVER; see docs/development.md)"
        )
    _build_binaries(request.config)
    return _find_binaries()


@pytest.fixture(scope="session")
def crd_sources(prerequisite: Any) -> list[Path]:
    """The third-party CRD files (from the Go module cache) and this project's ``config/crd/*.yaml``."""
    thirdparty = _thirdparty()
    try:
        paths: list[Path] = list(thirdparty.crd_paths())
    except thirdparty.ThirdPartyError as exc:
        prerequisite.missing(f"third-party CRDs unavailable: {exc}")
    return paths + sorted((ROOT / "config" / "crd").glob("*.yaml"))


@pytest.fixture(scope="session")
def control_plane(envtest_binaries: Binaries, crd_sources: list[Path]) -> Iterator[ControlPlane]:
    with ControlPlane(envtest_binaries) as plane:
        plane.install_crds(crd_sources)
        yield plane


@pytest.fixture(scope="session")
def control_plane_without_watch_cache(envtest_binaries: Binaries) -> Iterator[ControlPlane]:
    """A second plane, started only if a test asks for it, whose watches and lists all go to etcd.

    With the watch cache off, ``compact_etcd()`` makes every older resourceVersion answer 410 Gone, for
    watches too: what a reflector meets when it falls behind compaction. No CRDs are installed.
    """
    with ControlPlane(envtest_binaries, apiserver_flags={"watch-cache": "false"}) as plane:
        yield plane


@pytest.fixture(scope="session")
def kubeconfig(control_plane: ControlPlane) -> Path:
    return control_plane.kubeconfig


@pytest.fixture
def namespace(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    name = envtest.namespace_name(request.node.name)
    created = control_plane.admin_request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    assert created.status == 201, created.body
    yield name
    deleted = control_plane.admin_request("DELETE", f"/api/v1/namespaces/{name}")
    assert deleted.status in (200, 202, 404), deleted.body


@pytest.fixture
def eventually() -> Callable[..., Any]:
    return envtest.eventually
