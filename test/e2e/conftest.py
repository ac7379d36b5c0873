"""Fixtures for the e2e tier: a full cluster with kube-controller-manager, a scheduler, nodes and JobSet.

- ``e2e_cluster`` (session): an :class:`E2ECluster`.

  - If ``E2E_CLUSTER`` and ``KUBECONFIG`` are both set, that cluster is used as it is and left running:
    ``E2E_CLUSTER=kind`` after ``hack/e2e-setup-kind.sh``, or ``E2E_CLUSTER=kwok`` for a cluster from
    ``make cluster-up`` (``eval "$(make -s cluster-env)"``).
  - Otherwise ``support.kwok`` (what ``hack/cluster.py up`` runs) brings up a cluster of its own, named
    ``trainer-e2e-pytest`` (``E2E_CLUSTER_NAME`` overrides) so that it never touches the ``make cluster-up``
    one, and takes it down when the session ends: after failures too, on Ctrl-C (pytest unwinds its
    fixtures), on SIGTERM or SIGHUP (a handler runs the teardown, then lets the signal do what it would have
    done) and at interpreter exit (atexit). Only a SIGKILL leaves it behind; the next session removes it
    before starting its own.
  - Missing binaries are built when collection finishes, before the first test's timeout starts
    (``hack/build-binaries.sh``: about 10 minutes cold on 2 cores). Without Go there is nothing to build
    them with nor to read the JobSet manifests from, so the e2e tests are skipped with that reason, or
    fail with it when prerequisites are required (``make test``, CI: the ``prerequisite`` fixture in
    ``test/conftest.py``).

- ``namespace`` (function): a fresh namespace, returned once kube-controller-manager has created its
  ``default`` ServiceAccount (until then the ServiceAccount admission plugin rejects every pod, and Jobs
  would retry with back-off). Deleted afterwards without waiting; the namespace controller finishes it.
- ``eventually`` (function): :func:`controller.envtest.eventually` with the e2e defaults,
  ``eventually(fn, timeout=60.0, interval=0.25)``: calls ``fn`` until it stops raising AssertionError (or
  the ``retry_on`` types) and returns its result; on timeout the last exception propagates.

Every test under ``test/e2e`` is marked ``e2e``.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import kubernetes
import pytest

from controller import envtest
from support import kwok
from support.process import ClusterError

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
DEFAULT_CLUSTER_NAME = "trainer-e2e-pytest"
_BUILD_FAILURE = pytest.StashKey[str]()

_eventually = functools.partial(envtest.eventually, timeout=60.0, interval=0.25)


def _external_cluster() -> tuple[str, Path] | None:
    flavour, kubeconfig = os.environ.get("E2E_CLUSTER"), os.environ.get("KUBECONFIG")
    if flavour and kubeconfig:
        return flavour, Path(kubeconfig)
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # This hook sees every collected item of the session, not only ours.
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.e2e)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build missing binaries now, so a cold build does not count against the first test's timeout."""
    if not any(item.path.is_relative_to(HERE) for item in session.items):
        return
    if _external_cluster() is not None or shutil.which("go") is None:
        return
    try:
        kwok.locate_binaries()
        return
    except ClusterError:
        pass
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("e2e: building the control-plane binaries (about 10 minutes cold)")
    try:
        kwok.build_binaries()
    except ClusterError as exc:
        session.config.stash[_BUILD_FAILURE] = str(exc)


@dataclass(frozen=True, slots=True, kw_only=True)
class E2ECluster:
    """The cluster the e2e tests run against, with clients for it."""

    flavour: str
    """``kwok`` (support.kwok: fake nodes, pod status from kwok stages) or ``kind`` (real containers)."""
    kubeconfig: Path
    api: kubernetes.client.ApiClient
    owned: bool
    """True when this session started the cluster and will stop it."""

    @property
    def core(self) -> kubernetes.client.CoreV1Api:
        return kubernetes.client.CoreV1Api(self.api)

    @property
    def batch(self) -> kubernetes.client.BatchV1Api:
        return kubernetes.client.BatchV1Api(self.api)

    @property
    def custom(self) -> kubernetes.client.CustomObjectsApi:
        return kubernetes.client.CustomObjectsApi(self.api)


class _Teardown:
    """Runs ``support.kwok.down`` exactly once: at fixture teardown, at exit, or on SIGTERM/SIGHUP."""

    _SIGNALS = (signal.SIGTERM, signal.SIGHUP)

    def __init__(self, down: Callable[[], None]) -> None:
        self._down = down
        self._done = False
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        atexit.register(self.run)
        for signum in self._SIGNALS:
            self._previous[signum] = signal.signal(signum, self._on_signal)

    def run(self) -> None:
        if self._done:
            return
        self._done = True
        try:
            self._down()
        finally:
            atexit.unregister(self.run)
            for signum, handler in self._previous.items():
                signal.signal(signum, handler)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        previous = self._previous.get(signum, signal.SIG_DFL)
        self.run()  # restores the previous handlers
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL:
            signal.raise_signal(signum)


@pytest.fixture(scope="session")
def e2e_cluster(request: pytest.FixtureRequest, prerequisite: Any) -> Iterator[E2ECluster]:
    external = _external_cluster()
    if external is not None:
        flavour, kubeconfig = external
        api = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
        try:
            yield E2ECluster(flavour=flavour, kubeconfig=kubeconfig, api=api, owned=False)
        finally:
            api.close()
        return

    if shutil.which("go") is None:
        prerequisite.missing(
            "e2e tests need Go >= 1.26 on PATH: it builds the control-plane binaries and provides the "
            "JobSet manifests (see docs/development.md); or point E2E_CLUSTER and KUBECONFIG at a cluster"
        )
    build_failure = request.config.stash.get(_BUILD_FAILURE, None)
    if build_failure is not None:
        pytest.fail(build_failure, pytrace=False)
    name = os.environ.get("E2E_CLUSTER_NAME", DEFAULT_CLUSTER_NAME)
    teardown = _Teardown(lambda: kwok.down(name))
    teardown.install()
    try:
        kwok.down(name)  # a fresh cluster every session, even after a SIGKILLed one left its own behind
        state = kwok.up(kwok.ClusterOptions(name=name))
    except ClusterError as exc:
        teardown.run()
        pytest.fail(f"the e2e cluster did not come up: {exc}", pytrace=False)
    except BaseException:
        teardown.run()
        raise
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"e2e: cluster {name!r} up in {state.start_seconds:.1f} s ({state.kubeconfig})")
    api = kubernetes.config.new_client_from_config(config_file=state.kubeconfig)
    try:
        yield E2ECluster(flavour="kwok", kubeconfig=Path(state.kubeconfig), api=api, owned=True)
    finally:
        api.close()
        teardown.run()


@pytest.fixture
def eventually() -> Callable[..., Any]:
    return _eventually


@pytest.fixture
def namespace(e2e_cluster: E2ECluster, request: pytest.FixtureRequest) -> Iterator[str]:
    name = envtest.namespace_name(request.node.name)
    core = e2e_cluster.core
    core.create_namespace(kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=name)))

    def default_service_account_exists() -> None:
        accounts = core.list_namespaced_service_account(name, field_selector="metadata.name=default")
        assert accounts.items, f"namespace {name} has no default ServiceAccount yet"

    _eventually(default_service_account_exists, timeout=30.0)
    yield name
    core.delete_namespace(name, propagation_policy="Background")
