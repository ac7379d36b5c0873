"""``support.upstream_e2e``: a Ginkgo JSON report read into results, what fails a run, and the table.

The reports here are shaped as Ginkgo v2 writes them (``--ginkgo.json-report``: a list of suite reports,
each with ``SpecReports``); the suite itself runs on kind (``test/e2e/test_upstream_e2e.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support import upstream_e2e
from support.upstream_e2e import Spec, SpecResult

TORCH = (
    "TrainJob e2e when Creating TrainJob to perform the PyTorch workload "
    "should create TrainJob with PyTorch runtime reference"
)
SPECS = {
    "A when b does c": Spec(stand_in="image x: exits 0"),
    "A when b does d": Spec(stand_in=""),
    "A when e may skip": Spec(stand_in="", skip_reason="needs a GPU"),
}


def _spec(container: list[str], leaf: str, state: str, **extra: Any) -> dict[str, Any]:
    return {
        "ContainerHierarchyTexts": container,
        "LeafNodeType": extra.pop("node_type", "It"),
        "LeafNodeText": leaf,
        "State": state,
        "RunTime": extra.pop("run_time", 2_500_000_000),
        **extra,
    }


def _report(*specs: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"SuiteDescription": "Kubeflow Trainer E2E Suite", "SuiteSucceeded": True, "SpecReports": list(specs)}
    ]


def _results(*specs: dict[str, Any]) -> list[SpecResult]:
    return upstream_e2e.parse_report(_report(*specs))


def test_a_spec_is_named_by_its_containers_and_leaf_and_timed_in_seconds() -> None:
    (result,) = _results(_spec(["A", "when b"], "does c", "passed"))
    assert result == SpecResult(name="A when b does c", node_type="It", state="passed", seconds=2.5)
    assert result.passed


def test_a_table_entry_is_named_by_its_table_and_entry() -> None:
    (result,) = _results(
        _spec(["TrainJob e2e", "when Updating a runtime", "a suspended TrainJob"], "X", "passed")
    )
    assert result.name == "TrainJob e2e when Updating a runtime a suspended TrainJob X"


def test_a_failure_carries_its_message_and_location() -> None:
    failure = {
        "Message": "Timed out after 600s.\nExpected ...",
        "Location": {"FileName": "e2e_test.go", "LineNumber": 7},
    }
    (result,) = _results(_spec(["A", "when b"], "does c", "failed", Failure=failure))
    assert result.failure == "Timed out after 600s.\nExpected ... (e2e_test.go:7)"


def test_a_passed_suite_node_is_not_a_result_and_a_failed_one_is() -> None:
    before = _spec([], "", "passed", node_type="BeforeSuite")
    failed = _spec([], "", "failed", node_type="BeforeSuite", Failure={"Message": "no kubeconfig"})
    assert _results(before) == []
    (result,) = _results(failed)
    assert (result.name, result.node_type, result.failure) == ("BeforeSuite", "BeforeSuite", "no kubeconfig")
    assert upstream_e2e.problems([result], SPECS)[0] == "BeforeSuite failed: no kubeconfig"


def test_every_listed_spec_passing_or_skipped_with_its_reason_is_no_problem() -> None:
    results = _results(
        _spec(["A", "when b"], "does c", "passed"),
        _spec(["A", "when b"], "does d", "passed"),
        _spec(["A", "when e"], "may skip", "skipped"),
    )
    assert upstream_e2e.problems(results, SPECS) == []


def test_a_failed_spec_an_unlisted_one_a_skip_without_reason_and_a_missing_one_are_problems() -> None:
    results = _results(
        _spec(["A", "when b"], "does c", "failed", Failure={"Message": "boom"}),
        _spec(["A", "when b"], "does d", "pending"),
        _spec(["A", "when new"], "spec", "passed"),
    )
    assert upstream_e2e.problems(results, SPECS) == [
        "failed: A when b does c: boom",
        "pending without a stated reason: A when b does d",
        "a spec this project does not list ran (passed): A when new spec",
        "did not run: A when e may skip",
    ]


def test_an_empty_report_is_every_listed_spec_missing() -> None:
    assert upstream_e2e.problems([], SPECS) == [f"did not run: {name}" for name in SPECS]


def test_the_table_shows_the_stand_in_a_skip_reason_or_the_failures_first_line() -> None:
    results = _results(
        _spec(["A", "when b"], "does c", "passed"),
        _spec(["A", "when b"], "does d", "failed", Failure={"Message": "Timed out\nmore | detail"}),
        _spec(["A", "when e"], "may skip", "skipped", run_time=0),
    )
    assert upstream_e2e.table(results, SPECS).splitlines() == [
        "| spec | result | s | stand-in used and what it does |",
        "|---|---|---|---|",
        "| A when b does c | passed | 2 | image x: exits 0 |",
        "| A when b does d | failed | 2 | Timed out |",
        "| A when e may skip | skipped | 0 | needs a GPU |",
    ]


def test_the_report_file_is_read_as_written(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(_report(_spec(["A"], "b", "passed"))))
    assert [r.name for r in upstream_e2e.read_report(path)] == ["A b"]


def test_the_command_writes_the_json_report_with_a_suite_timeout(tmp_path: Path) -> None:
    line = upstream_e2e.command(tmp_path / "e2e.test", tmp_path / "r.json", timeout_s=900)
    assert line[0] == str(tmp_path / "e2e.test")
    assert f"-ginkgo.json-report={tmp_path / 'r.json'}" in line
    assert "-ginkgo.timeout=900s" in line


def test_the_suites_twelve_specs_are_listed_and_none_may_be_skipped() -> None:
    # Upstream v2.3.0's test/e2e/e2e_test.go: five runtimes, two RuntimePatches specs, managed-by, deadline,
    # status server, and the two entries of the runtime-update table.
    assert len(upstream_e2e.SPECS) == 12
    assert TORCH in upstream_e2e.SPECS
    assert not [name for name, spec in upstream_e2e.SPECS.items() if spec.skip_reason]


def test_a_passed_suite_level_defer_cleanup_is_not_a_spec() -> None:
    # Ginkgo's JSON report names the node a DeferCleanup in a BeforeSuite registers "DeferCleanup (Suite)".
    results = _results(_spec([], "", "passed", node_type="DeferCleanup (Suite)"))
    assert results == []
