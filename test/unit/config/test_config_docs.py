"""docs/install.md stays true to what it describes: the JobSet version of hack/versions.env, the image and
its tag, and a row of the RBAC table for every resource the shipped ClusterRole grants."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support import thirdparty

ROOT = Path(__file__).resolve().parents[3]
INSTALL = (ROOT / "docs" / "install.md").read_text()


def test_the_jobset_prerequisite_names_the_pinned_version() -> None:
    versions = thirdparty.read_versions()
    assert f"JobSet {versions['JOBSET_VERSION']}" in INSTALL


def test_the_image_and_its_tag_are_the_shipped_ones(
    default_objects: list[dict[str, Any]], project_version: str
) -> None:
    (deployment,) = [o for o in default_objects if o["kind"] == "Deployment"]
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    repository, _, tag = image.rpartition(":")
    assert f"`{repository}`" in INSTALL and f"`{tag}`" in INSTALL and tag == project_version


def test_the_rbac_table_has_a_row_for_every_resource_of_the_cluster_role(
    default_objects: list[dict[str, Any]],
) -> None:
    (role,) = [o for o in default_objects if o["kind"] == "ClusterRole"]
    rows = [line for line in INSTALL.splitlines() if line.startswith("| `")]
    for rule in role["rules"]:
        for resource in rule["resources"]:
            verbs = ", ".join(rule["verbs"])
            assert any(f"`{resource}`" in row and f"| {verbs} |" in row for row in rows), (resource, verbs)
