"""The Tier 1 control plane as pytest fixtures: one real etcd + kube-apiserver per test session.

``test/integration/conftest.py`` and ``test/reliability/conftest.py`` import these fixtures, which registers
them for their directories (each directory gets a plane of its own when both run in one session). What each
fixture gives is described in ``test/integration/conftest.py``.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from controller import envtest
from controller.envtest import Binaries, BinariesNotFound, ControlPlane, find_binaries
from controller.envtest.process import install_sigterm_handler
from support import thirdparty

ROOT = Path(__file__).resolve().parents[2]


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
    pinned = thirdparty.read_versions()
    return find_binaries(etcd_version=pinned["ETCD_VERSION"], kubernetes_version=pinned["KUBERNETES_VERSION"])


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
