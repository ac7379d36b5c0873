"""The Trainer's admission handlers (controller.trainer.webhooks) over a MemoryReader, as behaviour:
upstream's pkg/webhooks/*_test.go (TestDefault, TestValidateCreate, TestValidateReplicatedJobs,
TestClusterTrainingRuntimeValidateCreate) through the AdmissionReview adapter, and an update after the
runtime was deleted."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from controller.clock import FakeClock
from controller.serving.webhook.admission import AdmissionRequest, AdmissionResponse, Webhook
from controller.trainer.setup import new_registry
from controller.trainer.webhooks import (
    ClusterTrainingRuntimeValidator,
    TrainingRuntimeValidator,
    TrainJobDefaulter,
    TrainJobValidator,
    aggregate_message,
)
from runtime.api import constants
from runtime.core.defaulting import MAX_RUNTIME_PATCHES
from runtime.core.snapshot import build_snapshot
from runtime.framework import MemoryReader
from runtime.framework.validation import PER_KIND
from runtime.testing import Make

make = Make(runtime_kind=constants.CLUSTER_TRAINING_RUNTIME_KIND)
NOW = datetime(2025, 6, 15, 12, 0, 0, tzinfo=UTC)
JOBS = "spec.template.spec.replicatedJobs"


def request(operation: str, obj: Any = None, old: Any = None) -> AdmissionRequest:
    return AdmissionRequest(uid="u", operation=operation, object=obj, old_object=old)


def cluster_runtime(**kw: Any) -> dict[str, Any]:
    return make.runtime(
        make.runtime_spec(*make.default_jobs()), kind=constants.CLUSTER_TRAINING_RUNTIME_KIND, **kw
    )


@pytest.fixture(scope="module")
def registry() -> Any:
    return new_registry()


def validate(
    registry: Any, reader: MemoryReader, operation: str, new: Any, old: Any = None
) -> AdmissionResponse:
    return TrainJobValidator(registry, reader).handle(request(operation, new, old))


# --- defaulter -------------------------------------------------------------------------------------------


def test_the_defaulter_answers_a_json_patch_stamping_missing_times() -> None:
    # upstream TestDefault "CREATE: externally-set Time is preserved", through the wire format
    trainjob = make.trainjob(
        runtime_patches=[
            {"manager": "acme.io/one", "time": "2025-01-01T00:00:00Z"},
            {"manager": "acme.io/two"},
        ]
    )
    body = orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {"uid": "u", "operation": "CREATE", "object": trainjob},
        }
    )
    answer = Webhook("/m", TrainJobDefaulter(FakeClock(wall=NOW))).serve(body, "application/json")
    response = orjson.loads(answer.body)["response"]
    assert response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    assert orjson.loads(base64.b64decode(response["patch"])) == [
        {"op": "add", "path": "/spec/runtimePatches/1/time", "value": "2025-06-15T12:00:00Z"}
    ]


def test_the_defaulter_without_changes_answers_no_patch() -> None:
    response = TrainJobDefaulter(FakeClock(wall=NOW)).handle(request("CREATE", make.trainjob()))
    assert response.allowed and response.patch == ()


def test_the_defaulter_reverts_a_time_edit_on_an_unchanged_patch() -> None:
    # A user's edit of `time` alone is reverted, as upstream.
    old = make.trainjob(runtime_patches=[{"manager": "m", "time": "2025-01-01T00:00:00Z"}])
    new = make.trainjob(runtime_patches=[{"manager": "m", "time": "2030-01-01T00:00:00Z"}])
    response = TrainJobDefaulter(FakeClock(wall=NOW)).handle(request("UPDATE", new, old))
    assert response.patch == (
        {"op": "replace", "path": "/spec/runtimePatches/0/time", "value": "2025-01-01T00:00:00Z"},
    )


def test_the_defaulter_allows_delete_and_needs_the_old_object_on_update() -> None:
    defaulter = TrainJobDefaulter(FakeClock(wall=NOW))
    assert defaulter.handle(request("DELETE", None, make.trainjob())).allowed
    missing = defaulter.handle(request("UPDATE", make.trainjob(), None))
    assert (missing.allowed, missing.code, missing.message) == (
        False,
        400,
        "request.oldObject is required for UPDATE",
    )


def test_the_defaulter_answers_more_patches_than_the_schema_allows_without_a_patch() -> None:
    # A JSON Patch `add` per entry (about 70 bytes for an entry of 25) grew the answer faster than the
    # request: 11 MB for 100,000 entries. The API server refuses more than MAX_RUNTIME_PATCHES anyway.
    many = make.trainjob(runtime_patches=[{"manager": f"acme.io/m{i}"} for i in range(100_000)])
    response = TrainJobDefaulter(FakeClock(wall=NOW)).handle(request("CREATE", many))
    assert (response.allowed, response.patch) == (True, ())
    most = make.trainjob(runtime_patches=[{"manager": f"acme.io/m{i}"} for i in range(MAX_RUNTIME_PATCHES)])
    stamped = TrainJobDefaulter(FakeClock(wall=NOW)).handle(request("CREATE", most)).patch
    assert len(stamped) == MAX_RUNTIME_PATCHES


# --- TrainJob validator ----------------------------------------------------------------------------------


def test_a_trainjob_on_an_existing_runtime_is_allowed(registry: Any) -> None:
    # upstream TestValidateCreate "valid trainjob name compliant with RFC 1035"
    response = validate(
        registry, MemoryReader([cluster_runtime()]), "CREATE", make.trainjob("valid-job-name")
    )
    assert (response.allowed, response.code, response.warnings) == (True, 200, ())


def test_a_trainjob_on_a_missing_runtime_is_denied_403(registry: Any) -> None:
    # upstream TestValidateCreate "unsupported runtime" (an absent ClusterTrainingRuntime)
    response = validate(registry, MemoryReader([]), "CREATE", make.trainjob(runtime="unsupported-runtime"))
    assert (response.allowed, response.code, response.reason) == (False, 403, "Forbidden")
    assert response.message.startswith("spec.RuntimeRef: Invalid value: ")
    assert response.message.endswith(
        'clustertrainingruntimes.trainer.kubeflow.org "unsupported-runtime" not found: specified '
        "clusterTrainingRuntime must be created before the TrainJob is created"
    )


def test_a_deprecated_runtime_is_a_warning(registry: Any) -> None:
    # upstream TestValidateCreate "deprecated runtime referenced"
    deprecated = cluster_runtime(labels={constants.LABEL_SUPPORT: constants.SUPPORT_DEPRECATED})
    response = validate(registry, MemoryReader([deprecated]), "CREATE", make.trainjob())
    assert response.allowed
    assert response.warnings == (
        'Referenced ClusterTrainingRuntime "test-runtime" is deprecated and will be removed in a future '
        "release of Kubeflow Trainer. See runtime deprecation policy: "
        f"{constants.RUNTIME_DEPRECATION_POLICY_URL}",
    )


def test_an_unregistered_runtime_kind_is_denied_naming_the_field_with_upstreams_message(
    registry: Any,
) -> None:
    trainjob = make.trainjob(kind="SomethingElse")
    response = validate(registry, MemoryReader([]), "CREATE", trainjob)
    ref = '{"name":"test-runtime","kind":"SomethingElse","apiGroup":"trainer.kubeflow.org"}'
    assert (response.code, response.message) == (
        403,
        f"spec.runtimeRef: Invalid value: {ref}: unsupported runtime: SomethingElse.trainer.kubeflow.org",
    )


@pytest.mark.parametrize(
    ("trainer", "message"),
    [
        ({"numNodes": -1}, "spec.trainer.numNodes: Invalid value: -1: must be greater than or equal to 1"),
        (
            {"numProcPerNode": -5},
            "spec.trainer.numProcPerNode: Invalid value: -5: must be greater than or equal to 1",
        ),
        (
            {"numProcPerNode": 0},
            "spec.trainer.numProcPerNode: Invalid value: 0: must be greater than or equal to 1",
        ),
    ],
)
def test_counts_below_1_are_denied(registry: Any, trainer: dict[str, Any], message: str) -> None:
    # Upstream's webhook scenarios for numNodes -1 and numProcPerNode -5 or 0: the CRDs (as upstream
    # v2.3.0) do not bound these; the webhook does.
    response = validate(registry, MemoryReader([cluster_runtime()]), "CREATE", make.trainjob(trainer=trainer))
    assert (response.code, response.message) == (403, message)


def test_several_errors_are_aggregated_in_brackets(registry: Any) -> None:
    trainjob = make.trainjob(trainer={"numNodes": -1, "numProcPerNode": 0})
    response = validate(registry, MemoryReader([cluster_runtime()]), "CREATE", trainjob)
    assert response.message.startswith("[spec.trainer.numNodes: Invalid value: -1: ")
    assert ", spec.trainer.numProcPerNode: Invalid value: 0: " in response.message
    assert response.message.endswith("]")


def test_q8_an_update_after_the_runtime_was_deleted_is_judged_by_the_snapshot(registry: Any) -> None:
    trainjob = make.trainjob(labels=None)
    trainjob["metadata"]["labels"] = {"a": "b"}
    updated = orjson.loads(orjson.dumps(trainjob))
    updated["metadata"]["labels"] = {"a": "c"}
    snapshot = build_snapshot(trainjob, cluster_runtime(), constants.CLUSTER_TRAINING_RUNTIME_KIND)
    assert validate(registry, MemoryReader([snapshot]), "UPDATE", updated, trainjob).allowed
    # Without a snapshot (and without the runtime) the update is denied, as upstream.
    denied = validate(registry, MemoryReader([]), "UPDATE", updated, trainjob)
    assert (denied.allowed, denied.code) == (False, 403)
    # A create is never judged by a snapshot.
    assert not validate(registry, MemoryReader([snapshot]), "CREATE", updated).allowed


def test_delete_and_connect_are_allowed_unchecked(registry: Any) -> None:
    for operation in ("DELETE", "CONNECT"):
        assert validate(registry, MemoryReader([]), operation, None, make.trainjob()).allowed


def test_create_without_an_object_is_a_400(registry: Any) -> None:
    response = validate(registry, MemoryReader([]), "CREATE", None)
    assert (response.allowed, response.code) == (False, 400)


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}},
            "request.object.kind: expected TrainJob of trainer.kubeflow.org/v1alpha1, got 'Pod' of 'v1'",
        ),
        (
            {"metadata": {"name": "p"}, "spec": {}},
            "request.object.kind: expected TrainJob of trainer.kubeflow.org/v1alpha1, got None of None",
        ),
        (
            {"apiVersion": "trainer.kubeflow.org/v2", "kind": "TrainJob"},
            "request.object.kind: expected TrainJob of trainer.kubeflow.org/v1alpha1, got 'TrainJob' of "
            "'trainer.kubeflow.org/v2'",
        ),
    ],
    ids=["a Pod", "no kind", "another version"],
)
def test_an_object_of_another_kind_is_a_400_naming_the_field(
    registry: Any, obj: dict[str, Any], message: str
) -> None:
    # controller-runtime's typed adapters fail to decode it: Errored(400)
    for handler in (TrainJobValidator(registry, MemoryReader([])), TrainJobDefaulter(FakeClock(wall=NOW))):
        response = handler.handle(request("CREATE", obj))
        assert (response.allowed, response.code, response.message) == (False, 400, message)
    old = handler.handle(request("UPDATE", make.trainjob(), {**obj}))
    assert old.code == 400 and old.message.startswith("request.oldObject.kind: expected TrainJob")
    runtime = TrainingRuntimeValidator().handle(request("CREATE", make.trainjob()))
    assert runtime.code == 400
    assert runtime.message.startswith("request.object.kind: expected TrainingRuntime of")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"runtimeRef": {"name": "rt"}, "trainer": ["node"]},
            'spec.trainer: Invalid value: ["node"]: must be of type object, not array',
        ),
        (
            {"runtimeRef": {"name": "rt"}, "trainer": {"numNodes": "two"}},
            'spec.trainer.numNodes: Invalid value: "two": must be of type integer, not string',
        ),
    ],
    ids=["a list where the trainer is", "a string where a count is"],
)
def test_an_object_of_the_wrong_shape_is_a_400_with_the_schemas_field_errors(
    registry: Any, spec: dict[str, Any], message: str
) -> None:
    # The API server checks the schema before the validating webhooks; should such an object come anyway,
    # the answer is the decoding error Go's typed adapter gives, with the field, never a 500.
    trainjob = {**make.trainjob(), "spec": spec}
    response = validate(registry, MemoryReader([]), "CREATE", trainjob)
    assert (response.allowed, response.code, response.message) == (False, 400, message)


@pytest.mark.parametrize(
    ("patches", "first"),
    [
        (["a", "b"], 'spec.runtimePatches[0]: Invalid value: "a": must be of type object, not string'),
        ([[1]], "spec.runtimePatches[0]: Invalid value: [1]: must be of type object, not array"),
        (
            [{"manager": "acme.io/a"}, 7],
            "spec.runtimePatches[1]: Invalid value: 7: must be of type object, not integer",
        ),
        ("abc", 'spec.runtimePatches: Invalid value: "abc": must be of type array, not string'),
    ],
    ids=["strings", "a list", "a number after an object", "a string for the list"],
)
def test_runtime_patches_that_are_not_objects_are_denied_naming_each_item(
    registry: Any, patches: Any, first: str
) -> None:
    # Was "spec: Internal error: plugin JobSet failed in CustomValidation: dictionary update sequence ...".
    trainjob = make.trainjob()
    trainjob["spec"]["runtimePatches"] = patches
    response = validate(registry, MemoryReader([cluster_runtime()]), "CREATE", trainjob)
    assert (response.allowed, response.code) == (False, 403)
    assert response.message.lstrip("[").startswith(first)
    assert "Internal error" not in response.message


def test_sixteen_hundred_bad_runtime_patch_items_are_named_and_bounded(registry: Any) -> None:
    # 16 patches (the schema's most) naming 100 replicated jobs each that the runtime does not have: upstream
    # answers with one `spec.runtimePatches` line echoing all patches per item.
    jobs = [{"name": f"x{j}"} for j in range(100)]
    patches = [
        {"manager": f"acme.io/m{i}", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": jobs}}}}
        for i in range(16)
    ]
    response = validate(
        registry, MemoryReader([cluster_runtime()]), "CREATE", make.trainjob(runtime_patches=patches)
    )
    detail = "must not have replicated job that doesn't exist in the runtime job template"
    assert response.message == (
        "["
        + ", ".join(
            f"spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[{j}].name: "
            f'Invalid value: "x{j}": {detail}'
            for j in range(PER_KIND)
        )
        + f", and {1600 - PER_KIND} more Invalid value errors: {detail}]"
    )


def test_an_object_the_schema_finds_nothing_wrong_with_is_never_blamed_on_its_shape(registry: Any) -> None:
    class Broken:
        def get(self, *args: Any) -> Any:
            raise KeyError("a bug, not a shape")

    validator = TrainJobValidator(registry, Broken())  # type: ignore[arg-type]
    with pytest.raises(KeyError):  # the Webhook adapter turns it into a counted 500
        validator.handle(request("CREATE", make.trainjob()))


# --- runtime validators ----------------------------------------------------------------------------------


def bad_runtime(kind: str) -> dict[str, Any]:
    job = make.job("node", ancestor="trainer", containers=[make.container("main")], replicas=2)
    return make.runtime(make.runtime_spec(job), kind=kind)


def test_a_training_runtime_is_denied_on_create_and_not_checked_on_update() -> None:
    bad = bad_runtime(constants.TRAINING_RUNTIME_KIND)
    response = TrainingRuntimeValidator().handle(request("CREATE", bad))
    assert (response.allowed, response.code) == (False, 403)
    assert response.message == (
        f"[{JOBS}[0].replicas: Invalid value: 2: always must be 1, "
        f"{JOBS}[0].template.spec.template.spec.containers: Invalid value: "
        '[{"name":"main"}]: must contain the required container for the ancestor: trainer]'
    )
    assert TrainingRuntimeValidator().handle(request("UPDATE", bad, bad)).allowed


def test_a_cluster_training_runtime_is_checked_on_create_and_update() -> None:
    bad = bad_runtime(constants.CLUSTER_TRAINING_RUNTIME_KIND)
    validator = ClusterTrainingRuntimeValidator()
    assert validator.handle(request("CREATE", bad)).code == 403
    assert validator.handle(request("UPDATE", bad, bad)).code == 403
    assert validator.handle(request("DELETE", None, bad)).allowed
    deprecated = cluster_runtime(labels={constants.LABEL_SUPPORT: constants.SUPPORT_DEPRECATED})
    assert len(validator.handle(request("CREATE", deprecated)).warnings) == 1
    assert validator.handle(request("UPDATE", deprecated, deprecated)).warnings == ()


def test_aggregate_message_is_gos() -> None:
    assert aggregate_message(["a"]) == "a"
    assert aggregate_message(["a", "b", "a"]) == "[a, b]"
    assert aggregate_message(["a", "a"]) == "a"


def test_a_runtime_whose_snapshot_a_configmap_cannot_hold_is_denied_by_both_runtime_webhooks() -> None:
    # Upstream admits it (the API server stores 1.5 MiB) and each TrainJob of it fails to create its snapshot.
    container = make.container("node", env=[{"name": "SCRIPT", "value": "x" * (1 << 20)}])
    for kind, validator in (
        (constants.TRAINING_RUNTIME_KIND, TrainingRuntimeValidator()),
        (constants.CLUSTER_TRAINING_RUNTIME_KIND, ClusterTrainingRuntimeValidator()),
    ):
        job = make.job("node", ancestor="trainer", containers=[container])
        response = validator.handle(request("CREATE", make.runtime(make.runtime_spec(job), kind=kind)))
        assert (response.allowed, response.code) == (False, 403)
        assert response.message.startswith(
            "spec: Too long: no TrainJob can run this runtime: its runtime snapshot would be "
        )
        assert response.message.endswith(" bytes of YAML, more than a ConfigMap holds (1048576 bytes)")
