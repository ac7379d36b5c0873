"""Where envtest finds etcd and kube-apiserver: env vars, then KUBEBUILDER_ASSETS, then the build script."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.envtest.binaries import BinariesNotFound, find_binaries, parse_print_output


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def _print_script(tmp_path: Path, k8s_dir: Path, etcd_dir: Path) -> Path:
    script = tmp_path / "build-binaries.sh"
    script.write_text(
        '#!/usr/bin/env bash\n[[ "$1" == --print ]] || exit 3\n'
        f"echo KUBERNETES_BIN={k8s_dir}\necho ETCD_BIN={etcd_dir}\necho KWOK_BIN=/nowhere\n"
    )
    return script


def test_test_asset_variables_name_each_binary(tmp_path: Path) -> None:
    etcd = _executable(tmp_path / "a" / "my-etcd")
    apiserver = _executable(tmp_path / "b" / "my-apiserver")
    env = {"TEST_ASSET_ETCD": str(etcd), "TEST_ASSET_KUBE_APISERVER": str(apiserver)}
    found = find_binaries(env, build_script=None)
    assert (found.etcd, found.kube_apiserver) == (etcd, apiserver)


def test_kubebuilder_assets_is_a_directory_holding_both(tmp_path: Path) -> None:
    etcd = _executable(tmp_path / "assets" / "etcd")
    apiserver = _executable(tmp_path / "assets" / "kube-apiserver")
    found = find_binaries({"KUBEBUILDER_ASSETS": str(tmp_path / "assets")}, build_script=None)
    assert (found.etcd, found.kube_apiserver) == (etcd, apiserver)


def test_build_script_directories_are_used_when_no_variable_is_set(tmp_path: Path) -> None:
    etcd = _executable(tmp_path / "etcd-v3" / "etcd")
    apiserver = _executable(tmp_path / "kubernetes-v1" / "kube-apiserver")
    script = _print_script(tmp_path, apiserver.parent, etcd.parent)
    found = find_binaries({}, build_script=script)
    assert (found.etcd, found.kube_apiserver) == (etcd, apiserver)


def test_each_binary_is_resolved_on_its_own(tmp_path: Path) -> None:
    own_etcd = _executable(tmp_path / "custom" / "etcd")
    _executable(tmp_path / "etcd-v3" / "etcd")
    apiserver = _executable(tmp_path / "kubernetes-v1" / "kube-apiserver")
    script = _print_script(tmp_path, apiserver.parent, tmp_path / "etcd-v3")
    found = find_binaries({"TEST_ASSET_ETCD": str(own_etcd)}, build_script=script)
    assert (found.etcd, found.kube_apiserver) == (own_etcd, apiserver)


def test_a_variable_pointing_at_nothing_falls_through_to_the_next_source(tmp_path: Path) -> None:
    etcd = _executable(tmp_path / "assets" / "etcd")
    _executable(tmp_path / "assets" / "kube-apiserver")
    env = {"TEST_ASSET_ETCD": str(tmp_path / "missing"), "KUBEBUILDER_ASSETS": str(tmp_path / "assets")}
    assert find_binaries(env, build_script=None).etcd == etcd


def test_missing_binaries_name_every_place_tried_and_how_to_build(tmp_path: Path) -> None:
    not_executable = tmp_path / "etcd"
    not_executable.write_text("")
    script = _print_script(tmp_path, tmp_path / "k8s-not-built", tmp_path / "etcd-not-built")
    with pytest.raises(BinariesNotFound) as err:
        find_binaries({"TEST_ASSET_ETCD": str(not_executable)}, build_script=script)
    message = str(err.value)
    assert f"{not_executable} (from $TEST_ASSET_ETCD)" in message
    assert str(tmp_path / "k8s-not-built" / "kube-apiserver") in message
    assert "build-binaries.sh" in message


def test_without_any_source_the_error_says_what_is_missing() -> None:
    with pytest.raises(BinariesNotFound, match=r"no \$TEST_ASSET_KUBE_APISERVER"):
        find_binaries({}, build_script=None)


def test_print_output_parsing_keeps_key_value_lines_only() -> None:
    text = "build-binaries: note\nKUBERNETES_BIN=/c/k8s\n\nETCD_BIN=/c/etcd\nnot a pair\nEMPTY=\n"
    assert parse_print_output(text) == {"KUBERNETES_BIN": "/c/k8s", "ETCD_BIN": "/c/etcd"}
