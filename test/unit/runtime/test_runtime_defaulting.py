"""The TrainJob defaulter's `runtimePatches[].time` rules (runtime.core.defaulting), as behaviour: upstream's
pkg/webhooks/trainjob_webhook_test.go TestDefault, case by case, plus the decision on user edits of `time`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from runtime.core.defaulting import MAX_RUNTIME_PATCHES, stamp_runtime_patch_times
from runtime.schema import CRD_DIR
from runtime.testing import Make

make = Make(runtime_kind="ClusterTrainingRuntime")
NOW = datetime(2025, 6, 15, 12, 0, 0, 123456, tzinfo=UTC)
STAMP = "2025-06-15T12:00:00Z"  # metav1.Time: whole seconds
OLD = "2025-01-01T00:00:00Z"


def sa_patch(sa: str, **extra: Any) -> dict[str, Any]:
    pod = {"spec": {"template": {"spec": {"serviceAccountName": sa}}}}
    return {
        "manager": "acme.io/one",
        "trainingRuntimeSpec": {
            "template": {"spec": {"replicatedJobs": [{"name": "node", "template": pod}]}}
        },
        **extra,
    }


def times(trainjob: dict[str, Any]) -> list[str | None]:
    return [p.get("time") for p in trainjob["spec"].get("runtimePatches", [])]


def stamp(
    new_patches: list[dict[str, Any]], old_patches: list[dict[str, Any]] | None = None
) -> list[str | None]:
    new = make.trainjob(runtime_patches=new_patches)
    old = make.trainjob(runtime_patches=old_patches) if old_patches is not None else None
    result = stamp_runtime_patch_times(new, old, NOW)
    assert result is not new
    return times(result)


CASES = [
    # (upstream case name, old patches or None for CREATE, new patches, expected times)
    (
        "CREATE: all patches get timestamped",
        None,
        [{"manager": "acme.io/one"}, {"manager": "acme.io/two"}],
        [STAMP, STAMP],
    ),
    ("UPDATE, patch unchanged: Time preserved", [sa_patch("sa", time=OLD)], [sa_patch("sa")], [OLD]),
    ("UPDATE, patch changed: Time updated", [sa_patch("old-sa", time=OLD)], [sa_patch("new-sa")], [STAMP]),
    (
        "CREATE: externally-set Time is preserved",
        None,
        [{"manager": "acme.io/one", "time": OLD}, {"manager": "acme.io/two"}],
        [OLD, STAMP],
    ),
    (
        "UPDATE, patch changed with pre-existing Time: Time updated",
        [{"manager": "acme.io/one", "time": OLD}],
        [
            {
                "manager": "acme.io/one",
                "time": OLD,
                "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{"name": "node"}]}}},
            }
        ],
        [STAMP],
    ),
    (
        "UPDATE, new patch added alongside unchanged patch",
        [{"manager": "acme.io/existing", "time": OLD}],
        [{"manager": "acme.io/existing"}, {"manager": "acme.io/new"}],
        [OLD, STAMP],
    ),
    (
        "UPDATE, new patch added with externally-set Time: Time preserved",
        [{"manager": "acme.io/existing", "time": OLD}],
        [{"manager": "acme.io/existing"}, {"manager": "acme.io/new", "time": OLD}],
        [OLD, OLD],
    ),
    # Ours.
    (
        "UPDATE, as upstream: a user's edit of time alone on an unchanged patch is reverted",
        [sa_patch("sa", time=OLD)],
        [sa_patch("sa", time="2030-01-01T00:00:00Z")],
        [OLD],
    ),
    (
        "UPDATE, an unchanged patch that had no time keeps none",
        [{"manager": "acme.io/one"}],
        [{"manager": "acme.io/one"}],
        [None],
    ),
    (
        "UPDATE, null members and empty lists compare equal to absent ones (Go semantic equality)",
        [{"manager": "acme.io/one", "time": OLD, "trainingRuntimeSpec": None}],
        [{"manager": "acme.io/one", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": []}}}}],
        [STAMP],
    ),
]


@pytest.mark.parametrize(("name", "old", "new", "expected"), CASES, ids=[c[0] for c in CASES])
def test_time_stamping_rules(
    name: str, old: list[dict[str, Any]] | None, new: list[dict[str, Any]], expected: list[str | None]
) -> None:
    assert stamp(new, old) == expected


def test_an_empty_spec_object_differs_from_an_absent_one() -> None:
    # Go: a nil pointer and a pointer to an empty struct are not semantically equal.
    assert stamp([{"manager": "m", "trainingRuntimeSpec": {}}], [{"manager": "m", "time": OLD}]) == [STAMP]


def test_duplicate_managers_in_the_old_object_match_the_last() -> None:
    old = [{"manager": "m", "time": OLD, "x": 1}, {"manager": "m", "time": "2024-01-01T00:00:00Z"}]
    assert stamp([{"manager": "m"}], old) == ["2024-01-01T00:00:00Z"]


def test_the_arguments_are_not_mutated_and_odd_entries_are_left_alone() -> None:
    new = make.trainjob(runtime_patches=[{"manager": "m"}])
    new["spec"]["runtimePatches"].append("not an object")
    snapshot = repr(new)
    result = stamp_runtime_patch_times(new, None, NOW)
    assert repr(new) == snapshot
    assert result["spec"]["runtimePatches"] == [{"manager": "m", "time": STAMP}, "not an object"]


def test_odd_managers_and_values_the_api_server_never_sends_do_not_raise() -> None:
    # A manager that is a list or an object (unhashable) is left to the schema; so is a whole object that
    # is no JSON the API server sends (an integer beyond 64 bits): returned as it came.
    new = make.trainjob(runtime_patches=[{"manager": ["m"]}, {"manager": {"a": 1}}, {"manager": "m"}])
    old = make.trainjob(runtime_patches=[{"manager": ["m"], "time": OLD}, {"manager": "m", "time": OLD}])
    patches = stamp_runtime_patch_times(new, old, NOW)["spec"]["runtimePatches"]
    assert [patch.get("time") for patch in patches] == [STAMP, STAMP, OLD]
    huge = make.trainjob(runtime_patches=[{"manager": "m"}], activeDeadlineSeconds=2**70)
    assert stamp_runtime_patch_times(huge, None, NOW) == huge


def test_a_trainjob_without_patches_is_returned_equal() -> None:
    new = make.trainjob()
    assert stamp_runtime_patch_times(new, new, NOW) == new


def test_more_patches_than_the_schema_allows_are_left_alone() -> None:
    # The API server refuses them after the mutating webhooks; stamping them only grew the answer.
    patches = [{"manager": f"acme.io/m{i}"} for i in range(MAX_RUNTIME_PATCHES + 1)]
    assert stamp(patches) == [None] * (MAX_RUNTIME_PATCHES + 1)
    assert stamp(patches[:MAX_RUNTIME_PATCHES]) == [STAMP] * MAX_RUNTIME_PATCHES


def test_the_most_patches_is_the_crds_max_items() -> None:
    crd = yaml.safe_load((CRD_DIR / "trainer.kubeflow.org_trainjobs.yaml").read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["runtimePatches"]["maxItems"] == MAX_RUNTIME_PATCHES
