"""Where envtest finds etcd and kube-apiserver: TEST_ASSET_*, then an assets directory, then the versioned
cache; never by looking at a checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.envtest.binaries import BinariesNotFound, cache_directory, find_binaries


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_test_asset_variables_name_each_binary(tmp_path: Path) -> None:
    etcd = _executable(tmp_path / "a" / "my-etcd")
    apiserver = _executable(tmp_path / "b" / "my-apiserver")
    env = {"TEST_ASSET_ETCD": str(etcd), "TEST_ASSET_KUBE_APISERVER": str(apiserver)}
    found = find_binaries(environ=env)
    assert (found.etcd, found.kube_apiserver) == (etcd, apiserver)


@pytest.mark.parametrize("variable", ["TRAINER_TEST_ASSETS", "KUBEBUILDER_ASSETS"])
def test_an_assets_directory_holds_both(tmp_path: Path, variable: str) -> None:
    etcd = _executable(tmp_path / "assets" / "etcd")
    apiserver = _executable(tmp_path / "assets" / "kube-apiserver")
    found = find_binaries(environ={variable: str(tmp_path / "assets")})
    assert (found.etcd, found.kube_apiserver) == (etcd, apiserver)


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"TRAINER_CACHE_DIR": "/c/trainer", "XDG_CACHE_HOME": "/x"}, Path("/c/trainer")),
        ({"XDG_CACHE_HOME": "/x"}, Path("/x/kubeflow-trainer-py")),
        ({}, Path.home() / ".cache" / "kubeflow-trainer-py"),
    ],
)
def test_the_cache_directory_is_build_binaries_ones(environ: dict[str, str], expected: Path) -> None:
    assert cache_directory(environ) == expected


def test_the_versioned_cache_is_used_for_the_versions_the_caller_names(tmp_path: Path) -> None:
    etcd = _executable(tmp_path / "bin" / "etcd-v3.6.16" / "etcd")
    apiserver = _executable(tmp_path / "bin" / "kubernetes-v1.36.3" / "kube-apiserver")
    _executable(tmp_path / "bin" / "kubernetes-v1.35.0" / "kube-apiserver")
    found = find_binaries(
        etcd_version="v3.6.16",
        kubernetes_version="v1.36.3",
        environ={"XDG_CACHE_HOME": "/nowhere", "TRAINER_CACHE_DIR": str(tmp_path)},
    )
    assert (found.etcd, found.kube_apiserver) == (etcd, apiserver)


def test_each_binary_is_resolved_on_its_own(tmp_path: Path) -> None:
    own_etcd = _executable(tmp_path / "custom" / "etcd")
    _executable(tmp_path / "bin" / "etcd-v3" / "etcd")
    apiserver = _executable(tmp_path / "bin" / "kubernetes-v1" / "kube-apiserver")
    env = {"TEST_ASSET_ETCD": str(own_etcd), "TRAINER_CACHE_DIR": str(tmp_path)}
    found = find_binaries(etcd_version="v3", kubernetes_version="v1", environ=env)
    assert (found.etcd, found.kube_apiserver) == (own_etcd, apiserver)


def test_a_variable_pointing_at_nothing_falls_through_to_the_next_source(tmp_path: Path) -> None:
    etcd = _executable(tmp_path / "assets" / "etcd")
    _executable(tmp_path / "assets" / "kube-apiserver")
    env = {"TEST_ASSET_ETCD": str(tmp_path / "missing"), "KUBEBUILDER_ASSETS": str(tmp_path / "assets")}
    assert find_binaries(environ=env).etcd == etcd


def test_missing_binaries_name_every_place_tried(tmp_path: Path) -> None:
    not_executable = tmp_path / "etcd"
    not_executable.write_text("")
    env = {"TEST_ASSET_ETCD": str(not_executable), "TRAINER_CACHE_DIR": str(tmp_path)}
    with pytest.raises(BinariesNotFound) as err:
        find_binaries(etcd_version="v3", kubernetes_version="v1.36.3", environ=env)
    message = str(err.value)
    assert f"{not_executable} (from $TEST_ASSET_ETCD)" in message
    assert str(tmp_path / "bin" / "kubernetes-v1.36.3" / "kube-apiserver") in message


def test_without_any_source_the_error_says_what_is_missing() -> None:
    with pytest.raises(BinariesNotFound, match=r"no \$TEST_ASSET_KUBE_APISERVER"):
        find_binaries(environ={})
