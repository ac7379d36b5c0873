"""The runtime snapshot's text is the text upstream writes for the same runtime, byte for byte.

`snapshot_text.json` holds every default runtime (`config/runtimes/`) and every example runtime of the
golden files (`test/golden/runtimes/`) as the API server returns it (`creationTimestamp`, `generation`,
`resourceVersion`, `uid`; a namespace for a TrainingRuntime; one applied with `kubectl apply`, so with its
`last-applied-configuration` annotation), and the text upstream's own code stores for it: the `yaml` fields
are the output of `upstream-render snapshot` (`hack/tools/upstream-render`: upstream v2.3.0's typed runtime,
then `sigs.k8s.io/yaml.Marshal`) given each runtime with its `apiVersion` and `kind`. Regenerate them the
same way after a version bump and review the diff.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime import kubeyaml
from runtime.api import constants
from runtime.api.gojson import go_json_training_runtime
from runtime.core.snapshot import build_snapshot, read_snapshot
from runtime.testing import Make

RUNTIMES = json.loads(Path(__file__).with_name("snapshot_text.json").read_text(encoding="utf-8"))["runtimes"]


def _id(case: dict[str, Any]) -> str:
    return Path(case["file"]).stem


@pytest.mark.parametrize("case", RUNTIMES, ids=_id)
def test_the_snapshot_of_a_runtime_is_the_text_upstream_writes(make: Make, case: dict[str, Any]) -> None:
    configmap = build_snapshot(make.trainjob(), case["runtime"], case["kind"])
    assert configmap["data"][constants.RUNTIME_SNAPSHOT_KEY] == case["yaml"]


@pytest.mark.parametrize("case", RUNTIMES, ids=_id)
def test_the_snapshot_reads_back_as_the_runtime(make: Make, case: dict[str, Any]) -> None:
    runtime = case["runtime"]
    trainjob = make.trainjob(runtime=runtime["metadata"]["name"], kind=case["kind"])
    configmap = build_snapshot(trainjob, runtime, case["kind"])
    # What Go's typed runtime holds: the runtime as read, plus the structs Go always writes.
    assert read_snapshot(configmap, trainjob) == go_json_training_runtime(runtime)


def test_managed_fields_are_left_out(make: Make) -> None:
    # Upstream's cache keeps them and its snapshot holds them; ours strips them at ingestion, so a runtime
    # never has them here (docs/compatibility.md, "The runtime snapshot"); were one given, they are dropped.
    case = RUNTIMES[0]
    runtime = copy.deepcopy(case["runtime"])
    runtime["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {}}]
    text = build_snapshot(make.trainjob(), runtime, case["kind"])["data"][constants.RUNTIME_SNAPSHOT_KEY]
    assert text == case["yaml"]
    assert "managedFields" not in kubeyaml.load(text)["metadata"]


def test_a_registry_reads_the_runtime_schema_once_when_it_is_made_not_on_the_first_reconciles() -> None:
    # A fresh interpreter: this process may have read the schema already. Before, five workers reconciling
    # the first TrainJobs at once each parsed the CRD (`functools.cache` does not make them wait).
    program = (
        "from runtime.core import RuntimeRegistry\n"
        "from runtime.core import snapshot\n"
        "from runtime.framework import Framework\n"
        "from runtime.plugins import builtin_registry\n"
        "assert snapshot._runtime_schema.cache_info().currsize == 0\n"
        "RuntimeRegistry(Framework(builtin_registry()))\n"
        "print(snapshot._runtime_schema.cache_info().currsize)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert done.stdout.strip() == "1"
