"""TrainJobs at and beyond the limits, through the admission webhooks (over the wire format) and
trainer-render: a 1 MiB command, 1,000 environment variables, a runtime patch nested deeply. Each is handled
within the limits or refused with an error that names the field and says which limit.

The API server refuses what breaks the CRD schema (``maxLength``, ``maxItems``, unknown fields) before the
validating webhooks run, so the webhooks are asked only to answer such objects without failing; render
checks the schema itself and must name the field.
"""

from __future__ import annotations

import io
import json
from typing import Any

import orjson
import pytest
import yaml

from controller.clock import FakeClock
from controller.serving.webhook.admission import MAX_OBJECT_DEPTH, Webhook
from controller.trainer.setup import new_registry
from controller.trainer.webhooks import Schemas, TrainJobDefaulter, TrainJobValidator
from runtime.framework import MemoryReader
from runtime.render import EXIT_INVALID, EXIT_OK, run
from runtime.schema import CRD_DIR, SchemaChecker
from runtime.testing import NOW

from .conftest import RUNTIMES

TORCH = next(r for r in RUNTIMES if r["metadata"]["name"] == "torch-distributed")
MIB = 1 << 20
SCHEMAS = SchemaChecker.from_crd_dir(CRD_DIR)
WEBHOOK_SCHEMAS = Schemas(SCHEMAS)


def trainjob(trainer: dict[str, Any] | None = None, patches: list[Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"runtimeRef": {"name": "torch-distributed"}}
    if trainer is not None:
        spec["trainer"] = trainer
    if patches is not None:
        spec["runtimePatches"] = patches
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "big", "namespace": "team", "uid": "big-uid"},
        "spec": spec,
    }


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return value


PATCH_PREFIX = "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0]"


def deep_patch(depth: int) -> list[dict[str, Any]]:
    """A runtime patch whose env var's ``valueFrom`` nests ``depth`` more objects."""
    container = {"name": "node", "env": [{"name": "A", "valueFrom": nested(depth)}]}
    job = {"name": "node", "template": {"spec": {"template": {"spec": {"containers": [container]}}}}}
    return [
        {"manager": "acme.io/x", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [job]}}}}
    ]


def admit(obj: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """(HTTP status, response) of the defaulter and the validator for a CREATE of ``obj``."""
    body = json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {"uid": "u", "operation": "CREATE", "object": obj},
        }
    ).encode()
    hooks = [
        Webhook("/mutate", TrainJobDefaulter(FakeClock(wall=NOW), schemas=WEBHOOK_SCHEMAS)),
        Webhook(
            "/validate", TrainJobValidator(new_registry(), MemoryReader([TORCH]), schemas=WEBHOOK_SCHEMAS)
        ),
    ]
    out = []
    for hook in hooks:
        answer = hook.serve(body, "application/json")
        out.append((answer.status, orjson.loads(answer.body)["response"]))
    return out


def render(obj: dict[str, Any]) -> tuple[int, str, str]:
    text = json.dumps(obj) + "\n---\n" + json.dumps(TORCH)
    out, err = io.StringIO(), io.StringIO()
    status = run(["-"], stdin=io.BytesIO(text.encode()), stdout=out, stderr=err, schemas=SCHEMAS)
    return status, out.getvalue(), err.getvalue()


def test_a_command_of_one_mebibyte_is_admitted_and_rendered() -> None:
    command = "x" * MIB  # the CRD's maxLength of one item
    for status, response in admit(trainjob({"command": [command]})):
        assert (status, response["allowed"]) == (200, True), response["status"]
    status, out, err = render(trainjob({"command": [command]}))
    assert status == EXIT_OK, err
    jobset = next(o for o in yaml.safe_load_all(out) if o["kind"] == "JobSet")
    containers = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"]
    assert containers[0]["command"] == [command]


def test_a_command_beyond_one_mebibyte_is_refused_naming_the_item_and_the_limit() -> None:
    for status, response in admit(trainjob({"command": ["x" * (MIB + 1)]})):
        assert status == 200 and response["status"]["code"] in (
            200,
            403,
        )  # the API server's schema refuses it
    status, _, err = render(trainjob({"command": ["x" * (MIB + 1)]}))
    assert status == EXIT_INVALID
    assert f"spec.trainer.command[0]: Too long: may not be longer than {MIB}" in err


def test_a_thousand_environment_variables_are_answered_and_refused_naming_the_limit() -> None:
    env = [{"name": f"VAR_{i}", "value": "v"} for i in range(1000)]
    for status, response in admit(trainjob({"env": env})):
        assert status == 200 and response["status"]["code"] in (200, 403), response["status"]
    status, _, err = render(trainjob({"env": env}))
    assert status == EXIT_INVALID
    assert "spec.trainer.env: Too many: 1000: must have at most 128 items" in err


def test_a_runtime_patch_nested_within_the_limits_is_refused_naming_the_unknown_field() -> None:
    obj = trainjob(patches=deep_patch(50))
    for status, response in admit(obj):
        assert status == 200 and response["status"]["code"] in (200, 403), response["status"]
    status, _, err = render(obj)
    assert status == EXIT_INVALID
    assert f"{PATCH_PREFIX}.template.spec.template.spec.containers[0].env[0].valueFrom.a: Forbidden" in err


@pytest.mark.parametrize("depth", [MAX_OBJECT_DEPTH, 300, 900])
def test_a_runtime_patch_nested_beyond_the_limit_is_a_400_naming_where(depth: int) -> None:
    obj = trainjob(patches=deep_patch(depth))
    for status, response in admit(obj):
        assert (status, response["allowed"], response["status"]["code"]) == (400, False, 400)
        message = response["status"]["message"]
        assert message.startswith(f"request.object.{PATCH_PREFIX}.template.spec.template.spec...: ")
        assert message.endswith(f"collections nested more than {MAX_OBJECT_DEPTH} levels deep")
    status, _, err = render(obj)
    assert status == EXIT_INVALID
    assert "collections nested more than 128 levels deep" in err


def test_a_patch_nested_beyond_the_json_decoder_is_a_400_not_json() -> None:
    body = (
        b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u",'
        b'"operation":"CREATE","object":{"spec":' + b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"}}}"
    )
    answer = Webhook("/validate", TrainJobValidator(new_registry(), MemoryReader([]))).serve(
        body, "application/json"
    )
    assert answer.status == 400
    assert "the body is not JSON" in orjson.loads(answer.body)["response"]["status"]["message"]


def test_an_empty_key_is_named_as_a_field() -> None:
    # Found by `make fuzz`: an unknown "" key at the top printed as ": Forbidden", naming nothing.
    obj = {**trainjob(), "": []}
    obj["spec"] = {**obj["spec"], "": 1}
    status, _, err = render(obj)
    assert status == EXIT_INVALID
    assert '<root>[""]: Forbidden: field not declared in schema' in err
    assert 'spec[""]: Forbidden: field not declared in schema' in err
