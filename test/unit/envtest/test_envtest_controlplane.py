"""Pure parts of the control plane: reading CRDs (as envtest's ReadCRDs), sweeping abandoned directories."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from controller.envtest.controlplane import load_crds, sweep_abandoned_directories
from controller.envtest.errors import EnvtestError


def _crd(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
    }


def test_dicts_are_taken_as_they_are() -> None:
    assert load_crds([_crd("a.example.com")]) == [_crd("a.example.com")]


def test_a_dict_of_another_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="not a CustomResourceDefinition"):
        load_crds([{"kind": "Namespace"}])


def test_a_file_yields_its_crd_documents_and_skips_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "mixed.yaml"
    path.write_text(
        "---\n# a comment-only document\n---\n"
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n---\n"
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
        "metadata: {name: b.example.com}\n"
    )
    assert [c["metadata"]["name"] for c in load_crds([path])] == ["b.example.com"]


def test_a_directory_yields_its_yaml_and_json_files_in_name_order(tmp_path: Path) -> None:
    (tmp_path / "2.yml").write_text("kind: CustomResourceDefinition\nmetadata: {name: two}\n")
    (tmp_path / "1.json").write_text('{"kind": "CustomResourceDefinition", "metadata": {"name": "one"}}')
    (tmp_path / "3.yaml").write_text("kind: CustomResourceDefinition\nmetadata: {name: three}\n")
    (tmp_path / "notes.txt").write_text("kind: CustomResourceDefinition\n")
    (tmp_path / "nested").mkdir()
    (tmp_path / "nested" / "4.yaml").write_text("kind: CustomResourceDefinition\nmetadata: {name: four}\n")
    assert [c["metadata"]["name"] for c in load_crds([str(tmp_path)])] == ["one", "two", "three"]


def test_a_single_path_instead_of_a_list_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="not a single one"):
        load_crds(str(tmp_path))  # type: ignore[arg-type]


def test_broken_yaml_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("kind: [unclosed\n")
    with pytest.raises(EnvtestError, match=r"broken\.yaml"):
        load_crds([path])


def test_a_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_crds([tmp_path / "nope.yaml"])


def test_sweeping_removes_only_directories_whose_owner_is_dead(tmp_path: Path) -> None:
    dead = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True)
    dead_pid = int(dead.stdout)  # that shell has exited and been reaped
    layout = {
        "envtest-abandoned": str(dead_pid),
        "envtest-live": str(os.getpid()),
        "envtest-garbled": "not a pid",
        "other-dead": str(dead_pid),
    }
    for name, owner in layout.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "owner.pid").write_text(owner)
    (tmp_path / "envtest-no-owner").mkdir()
    assert sweep_abandoned_directories(tmp_path) == [tmp_path / "envtest-abandoned"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "envtest-garbled",
        "envtest-live",
        "envtest-no-owner",
        "other-dead",
    ]
