"""Hostile input through the Trainer's admission webhooks, in process, over the AdmissionReview wire format
(controller.serving.webhook.admission.Webhook.serve, as the HTTPS server calls it): the defaulter, the
TrainJob
validator (over a reader holding the runtime when it has its CRD's shape, as every object the API server
stores does), and the two runtime validators, on mutated TrainJobs and
runtimes (see conftest.py), and on arbitrary review bodies.

Properties: every answer is HTTP 200 or 400 with an AdmissionReview; no handler raises (no ``code: 500``,
``controller_runtime_webhook_panics_total`` unchanged); every rejection names a field path and says what is
wrong; the defaulter writes nothing but ``spec.runtimePatches[].time``; no input changes the objects the
handlers were given.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from typing import Any

import orjson
import pytest
from hypothesis import assume, given, seed
from hypothesis import strategies as st

from controller import metrics
from controller.clock import FakeClock
from controller.serving.webhook.admission import Webhook
from controller.trainer.setup import new_registry
from controller.trainer.webhooks import (
    ClusterTrainingRuntimeValidator,
    Schemas,
    TrainingRuntimeValidator,
    TrainJobDefaulter,
    TrainJobValidator,
)
from runtime.api import constants
from runtime.framework import MemoryReader
from runtime.testing import NOW

from .conftest import (
    FUZZ,
    JSON_VALUES,
    RUNTIMES,
    SEED,
    TRAINJOBS,
    mutated,
    names_a_field,
    served,
    worlds,
)

REGISTRY = new_registry()
SCHEMAS = Schemas()
_TIME_PATCH = re.compile(r"/spec/runtimePatches/\d+/time")


def _panics() -> float:
    return metrics.REGISTRY.get_sample_value("controller_runtime_webhook_panics_total") or 0.0


def review(operation: str, obj: Any, old: Any = None, *, uid: str = "fuzz-uid") -> bytes:
    request: dict[str, Any] = {"uid": uid, "operation": operation, "object": obj}
    if old is not None:
        request["oldObject"] = old
    # The standard library writes integers of any size, as an API server relaying a client's JSON would.
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    ).encode()


def answer_of(webhook: Webhook, body: bytes) -> dict[str, Any]:
    """The handler's verdict; asserts the wire-level properties on the way."""
    answer = webhook.serve(body, "application/json")
    assert answer.status in (200, 400), answer.body[:300]
    response: dict[str, Any] = orjson.loads(answer.body)["response"]
    status = response["status"]
    assert status["code"] in (200, 400, 403), status  # 500: a handler raised
    if not response["allowed"]:
        message = status.get("message", "")
        assert message, response
        assert names_a_field(message), message
    return response


@pytest.fixture
def no_panics() -> Any:
    before = _panics()
    yield
    assert _panics() == before, "a handler raised"


@FUZZ
@seed(SEED)
@given(world=worlds(), old_world=worlds(), operation=st.sampled_from(["CREATE", "UPDATE"]))
def test_trainjobs_through_the_defaulter_and_the_validator(
    world: tuple[dict[str, Any], dict[str, Any]],
    old_world: tuple[dict[str, Any], dict[str, Any]],
    operation: str,
    no_panics: None,
) -> None:
    trainjob, runtime = world
    old = old_world[0] if operation == "UPDATE" else None
    before = json.dumps([trainjob, old, runtime])

    defaulted = answer_of(
        Webhook("/mutate", TrainJobDefaulter(FakeClock(wall=NOW), schemas=SCHEMAS)),
        review(operation, trainjob, old),
    )
    if defaulted["allowed"] and "patch" in defaulted:
        for op in orjson.loads(base64.b64decode(defaulted["patch"])):
            assert op["op"] in ("add", "replace", "remove") and _TIME_PATCH.fullmatch(op["path"]), op

    # The reader is the informer cache: it holds only what the API server stored, so only a runtime that
    # has its CRD's shape (a runtime that breaks its webhook's rules may be there: made before the webhook).
    # A stored runtime that breaks its CRD's schema has its own property below.
    stored = (
        runtime.get("apiVersion") == constants.API_VERSION
        and runtime.get("kind") in (constants.TRAINING_RUNTIME_KIND, constants.CLUSTER_TRAINING_RUNTIME_KIND)
        and not SCHEMAS.field_errors(runtime)
    )
    reader = MemoryReader([runtime] if stored else [])
    validator = Webhook("/validate", TrainJobValidator(REGISTRY, reader, schemas=SCHEMAS))
    answer_of(validator, review(operation, trainjob, old))
    assert json.dumps([trainjob, old, runtime]) == before  # handlers never mutate what they are given


@FUZZ
@seed(SEED)
@given(world=worlds(), operation=st.sampled_from(["CREATE", "UPDATE"]))
def test_trainjobs_on_a_stored_runtime_that_breaks_its_schema(
    world: tuple[dict[str, Any], dict[str, Any]], operation: str, no_panics: None
) -> None:
    # A runtime stored under an older CRD, or edited in etcd, breaks the schema the API server enforces now.
    # The validator answers (it never raises: no 500) and names the field; a runtime whose fields do not
    # have their CRD's types is refused at spec.runtimeRef, naming the runtime and its field.
    trainjob, runtime = world[0], served(world[1])
    assume(
        runtime.get("apiVersion") == constants.API_VERSION
        and runtime.get("kind") in (constants.TRAINING_RUNTIME_KIND, constants.CLUSTER_TRAINING_RUNTIME_KIND)
        and isinstance(runtime.get("metadata"), dict)
        and isinstance(runtime["metadata"].get("name"), str)
        and SCHEMAS.field_errors(runtime)
    )
    validator = Webhook("/validate", TrainJobValidator(REGISTRY, MemoryReader([runtime]), schemas=SCHEMAS))
    answer_of(validator, review(operation, trainjob, trainjob if operation == "UPDATE" else None))


def test_a_stored_runtime_of_the_wrong_types_is_refused_naming_the_runtime_and_the_field(
    no_panics: None,
) -> None:
    # Was a 500 (`TypeError` in the rules, and the TrainJob itself has its CRD's shape): found by the property
    # above with `spec.mlPolicy` a string. Upstream's typed cache cannot decode such a runtime, and its
    # webhook refuses the TrainJob at `spec.RuntimeRef`.
    runtime = copy.deepcopy(next(r for r in RUNTIMES if r["metadata"]["name"] == "torch-distributed"))
    runtime["spec"]["mlPolicy"] = "x" * 1000
    trainjob = copy.deepcopy(TRAINJOBS[1])
    validator = Webhook("/validate", TrainJobValidator(REGISTRY, MemoryReader([runtime]), schemas=SCHEMAS))
    response = answer_of(validator, review("CREATE", trainjob))
    assert (response["allowed"], response["status"]["code"]) == (False, 403)
    assert response["status"]["message"] == (
        'spec.RuntimeRef: Invalid value: {"name":"torch-distributed","kind":"ClusterTrainingRuntime",'
        '"apiGroup":"trainer.kubeflow.org"}: clustertrainingruntimes.trainer.kubeflow.org '
        '"torch-distributed" is not a runtime object: spec.mlPolicy: expected object, found string'
    )


@FUZZ
@seed(SEED)
@given(
    runtime=mutated(RUNTIMES),
    old=mutated(RUNTIMES, max_mutations=1),
    operation=st.sampled_from(["CREATE", "UPDATE"]),
)
def test_runtimes_through_their_validators(
    runtime: dict[str, Any], old: dict[str, Any], operation: str, no_panics: None
) -> None:
    namespaced = {**runtime, "kind": "TrainingRuntime"}
    if isinstance(runtime.get("metadata"), dict):
        namespaced["metadata"] = {**runtime["metadata"], "namespace": "team"}
    old_namespaced = {**old, "kind": "TrainingRuntime"}
    answer_of(
        Webhook("/cluster", ClusterTrainingRuntimeValidator(schemas=SCHEMAS)),
        review(operation, runtime, old if operation == "UPDATE" else None),
    )
    answer_of(
        Webhook("/namespaced", TrainingRuntimeValidator(schemas=SCHEMAS)),
        review(operation, namespaced, old_namespaced if operation == "UPDATE" else None),
    )


_REVIEW_PARTS = st.fixed_dictionaries(
    {},
    optional={
        "apiVersion": st.sampled_from(["admission.k8s.io/v1", "admission.k8s.io/v1beta1", "v1", ""])
        | JSON_VALUES,
        "kind": st.sampled_from(["AdmissionReview", "Pod"]) | JSON_VALUES,
        "request": st.fixed_dictionaries(
            {},
            optional={
                "uid": st.sampled_from(["u", ""]) | JSON_VALUES,
                "operation": st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT", "PATCH"])
                | JSON_VALUES,
                "object": st.sampled_from(TRAINJOBS + RUNTIMES) | JSON_VALUES,
                "oldObject": st.sampled_from(TRAINJOBS + RUNTIMES) | JSON_VALUES,
                "userInfo": JSON_VALUES,
                "dryRun": JSON_VALUES,
            },
        )
        | JSON_VALUES,
    },
)


@FUZZ
@seed(SEED)
@given(
    body=st.one_of(
        _REVIEW_PARTS.map(lambda review: json.dumps(review).encode()),
        JSON_VALUES.map(lambda value: json.dumps(value).encode()),
        st.binary(max_size=300),
    ),
    content_type=st.sampled_from(["application/json", "application/json; charset=utf-8", "text/plain", ""]),
)
def test_any_review_body_gets_a_review_and_never_a_5xx(
    body: bytes, content_type: str, no_panics: None
) -> None:
    hooks = [
        Webhook("/mutate", TrainJobDefaulter(FakeClock(wall=NOW), schemas=SCHEMAS)),
        Webhook("/validate", TrainJobValidator(REGISTRY, MemoryReader(RUNTIMES), schemas=SCHEMAS)),
        Webhook("/cluster", ClusterTrainingRuntimeValidator(schemas=SCHEMAS)),
        Webhook("/namespaced", TrainingRuntimeValidator(schemas=SCHEMAS)),
    ]
    for webhook in hooks:
        answer = webhook.serve(body, content_type)
        assert answer.status in (200, 400)
        review_out = orjson.loads(answer.body)
        assert review_out["kind"] == "AdmissionReview"
        response = review_out["response"]
        assert response["status"]["code"] in (200, 400, 403), response
        if answer.status == 400 or not response["allowed"]:
            assert response["status"].get("message"), response
