"""``support.kueue_e2e``: Kueue's TrainJob specs selected, run and judged with upstream_e2e's reader.

The suite itself runs on kind (``test/e2e/test_kueue_e2e.py``).
"""

from __future__ import annotations

from pathlib import Path

from support import kueue_e2e, upstream_e2e

ADMITTED = "TrainJob when Creating a TrainJob Should run a TrainJob if admitted"


def _spec(container: list[str], leaf: str, state: str, node_type: str = "It") -> dict[str, object]:
    return {
        "ContainerHierarchyTexts": container,
        "LeafNodeType": node_type,
        "LeafNodeText": leaf,
        "State": state,
        "RunTime": 1_000_000_000,
    }


def test_specs_the_label_filter_left_out_are_not_this_runs_business_but_a_failed_one_is() -> None:
    results = upstream_e2e.parse_report(
        [
            {
                "SpecReports": [
                    _spec(
                        ["TrainJob", "when Creating a TrainJob"],
                        "Should run a TrainJob if admitted",
                        "passed",
                    ),
                    _spec(["Job"], "Should run", "skipped"),
                    _spec(["Pod"], "Should admit", "failed"),
                    _spec([], "", "failed", node_type="BeforeSuite"),
                ]
            }
        ]
    )
    names = [r.name for r in kueue_e2e.selected(results)]
    assert names == [ADMITTED, "Pod Should admit", "BeforeSuite"]
    found = upstream_e2e.problems(kueue_e2e.selected(results), kueue_e2e.SPECS)
    assert any("did not run" in line and "resource flavors" in line for line in found)
    assert any("does not list ran (failed): Pod Should admit" in line for line in found)
    assert any(line.startswith("BeforeSuite failed") for line in found)


def test_the_suite_runs_the_trainjob_label_with_what_its_set_up_reads(tmp_path: Path) -> None:
    argv = kueue_e2e.command(tmp_path / "e2e.test", tmp_path / "report.json", timeout_s=60)
    assert argv[-1] == "-ginkgo.label-filter=feature:trainjob"
    assert f"-ginkgo.json-report={tmp_path / 'report.json'}" in argv
    env = kueue_e2e.environment(
        {"PATH": "/bin", "KUEUE_NAMESPACE": "elsewhere"},
        kubeconfig=tmp_path / "kubeconfig",
        agnhost_image="registry.k8s.io/e2e-test-images/agnhost:2.63.0",
        module_dir=tmp_path / "kueue@v0.17.0",
        artifacts=tmp_path,
    )
    assert env == {
        "PATH": "/bin",
        "KUBECONFIG": str(tmp_path / "kubeconfig"),
        "E2E_TEST_AGNHOST_IMAGE": "registry.k8s.io/e2e-test-images/agnhost:2.63.0",
        "PROJECT_DIR": str(tmp_path / "kueue@v0.17.0" / "Makefile"),  # the suite takes its parent
        "ARTIFACTS": str(tmp_path),
    }
