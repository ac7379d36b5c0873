"""The AdmissionReview wire format and the Webhook adapter (controller.serving.webhook.admission), as
behaviour: controller-runtime pkg/webhook/admission http_test.go, response_test.go and webhook_test.go."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from controller import metrics
from controller.serving.webhook.admission import (
    AdmissionRequest,
    AdmissionResponse,
    BadReview,
    Webhook,
    allowed,
    decode_review,
    denied,
    encode_review,
    errored,
    json_patch,
    patched,
)

from .conftest import review


def decoded(answer_body: bytes) -> dict[str, Any]:
    out: dict[str, Any] = orjson.loads(answer_body)
    return out


def test_a_review_decodes_to_its_request() -> None:
    body = review(
        "UPDATE",
        uid="abc",
        kind={"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob"},
        name="job",
        namespace="ns",
        object={"spec": {"a": 1}},
        oldObject={"spec": {"a": 0}},
        dryRun=True,
        userInfo={"username": "alice"},
    )
    request = decode_review(body, "application/json")
    assert request.uid == "abc"
    assert request.operation == "UPDATE"
    assert request.kind["kind"] == "TrainJob"
    assert (request.namespace, request.name) == ("ns", "job")
    assert request.object == {"spec": {"a": 1}}
    assert request.old_object == {"spec": {"a": 0}}
    assert request.dry_run is True
    assert request.user_info["username"] == "alice"


def test_a_content_type_parameter_is_accepted() -> None:
    assert decode_review(review(), "application/json; charset=utf-8").uid == "uid-1"


def _nested(depth: int) -> dict[str, Any]:
    """``{"spec": {"a": {"a": ... {}}}}`` with ``depth`` levels below ``spec``."""
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return {"spec": value}


MALFORMED = [
    ("not JSON", b"{nope", "application/json", "not JSON"),
    ("empty", b"", "application/json", "request body is empty"),
    ("a JSON array", b"[]", "application/json", "not a JSON object"),
    (
        "wrong apiVersion",
        review(api_version="admission.k8s.io/v2"),
        "application/json",
        "expected an AdmissionReview",
    ),
    (
        "wrong kind",
        b'{"apiVersion":"admission.k8s.io/v1","kind":"Pod","request":{"uid":"u"}}',
        "application/json",
        "kind 'Pod'",
    ),
    (
        "no request",
        b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}',
        "application/json",
        "has no request",
    ),
    ("no uid", review(uid=""), "application/json", "request.uid is missing"),
    (
        "a uid that is no string",
        b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":7}}',
        "application/json",
        "request.uid must be a string, got 7",
    ),
    (
        "a request that is no object",
        b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":"x"}',
        "application/json",
        "has no request",
    ),
    (
        "an object nested too deep",
        review(object=_nested(200)),
        "application/json",
        "request.object.spec.a.a.a.a.a.a.a.a.a.a.a...: collections nested more than 128 levels deep",
    ),
    (
        "an old object nested too deep in a list",
        review("UPDATE", object={}, oldObject={"spec": {"l": [0, _nested(130)]}}),
        "application/json",
        "request.oldObject.spec.l[1].spec.a.a.a.a.a.a.a.a...: collections nested more than 128 levels deep",
    ),
    ("JSON nested beyond the decoder", b"[" * 2000 + b"]" * 2000, "application/json", "not JSON"),
    (
        "a kind of a megabyte",
        b'{"apiVersion":"admission.k8s.io/v1","kind":"' + b"K" * (1 << 20) + b'"}',
        "application/json",
        "got kind 'KKKKKKKK",
    ),
    ("unknown operation", review("PATCH"), "application/json", "unknown operation 'PATCH'"),
    ("object not an object", review(object=[1]), "application/json", "request.object must be a JSON object"),
    ("wrong content type", review(), "text/plain", "contentType=text/plain, expected application/json"),
    ("no content type", review(), "", "contentType=<none>"),
]


@pytest.mark.parametrize(
    ("case", "body", "content_type", "message"), MALFORMED, ids=[m[0] for m in MALFORMED]
)
def test_a_malformed_review_is_a_400_with_a_review_saying_why(
    case: str, body: bytes, content_type: str, message: str
) -> None:
    with pytest.raises(BadReview) as caught:
        decode_review(body, content_type)
    assert caught.value.code == 400
    assert message in str(caught.value)
    answer = Webhook("/w", _Fixed(allowed())).serve(body, content_type)
    assert answer.status == 400
    out = decoded(answer.body)
    assert out["kind"] == "AdmissionReview"
    assert out["response"]["allowed"] is False
    assert out["response"]["status"]["code"] == 400
    assert message in out["response"]["status"]["message"]
    assert len(answer.body) < 2048  # nothing a client sends makes the answer grow


class _Fixed:
    def __init__(self, response: AdmissionResponse) -> None:
        self.response = response
        self.seen: list[AdmissionRequest] = []

    def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        self.seen.append(request)
        return self.response


def test_denied_is_403_forbidden_with_the_message_and_warnings() -> None:
    # controller-runtime: Denied(msg) → code 403, reason Forbidden; WithWarnings appends.
    answer = Webhook("/w", _Fixed(denied("spec.x: Invalid value: 1: no").with_warnings("w1", "w2"))).serve(
        review(uid="u-7"), "application/json"
    )
    assert answer.status == 200
    assert decoded(answer.body) == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {
            "uid": "u-7",
            "allowed": False,
            "status": {
                "metadata": {},
                "code": 403,
                "reason": "Forbidden",
                "message": "spec.x: Invalid value: 1: no",
            },
            "warnings": ["w1", "w2"],
        },
    }


def test_allowed_is_code_200_and_the_review_version_is_echoed() -> None:
    answer = Webhook("/w", _Fixed(allowed())).serve(
        review(api_version="admission.k8s.io/v1beta1"), "application/json"
    )
    out = decoded(answer.body)
    assert out["apiVersion"] == "admission.k8s.io/v1beta1"
    assert out["response"] == {"uid": "uid-1", "allowed": True, "status": {"metadata": {}, "code": 200}}


def test_a_patch_response_is_base64_json_patch() -> None:
    ops = [{"op": "add", "path": "/spec/x", "value": 1}]
    out = decoded(encode_review(patched(ops), uid="u"))["response"]
    assert out["patchType"] == "JSONPatch"
    assert orjson.loads(base64.b64decode(out["patch"])) == ops
    assert "patch" not in decoded(encode_review(patched([]), uid="u"))["response"]


def test_errored_has_a_code_and_no_reason() -> None:
    assert decoded(encode_review(errored(400, "bad"), uid="u"))["response"]["status"] == {
        "metadata": {},
        "code": 400,
        "message": "bad",
    }


class _Raising:
    def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        raise KeyError("boom")


def test_a_handler_that_raises_gets_a_500_review_and_is_counted() -> None:
    before = metrics.REGISTRY.get_sample_value("controller_runtime_webhook_panics_total") or 0.0
    answer = Webhook("/w", _Raising()).serve(review(), "application/json")
    assert answer.status == 200
    status = decoded(answer.body)["response"]["status"]
    assert status["code"] == 500
    assert status["message"] == "panic: 'boom' [recovered]"
    assert metrics.REGISTRY.get_sample_value("controller_runtime_webhook_panics_total") == before + 1


PATCHES = [
    ("equal", {"a": 1}, {"a": 1}, []),
    ("added member", {"a": 1}, {"a": 1, "b": [1]}, [{"op": "add", "path": "/b", "value": [1]}]),
    ("removed member", {"a": 1, "b": 2}, {"a": 1}, [{"op": "remove", "path": "/b"}]),
    ("changed scalar", {"a": {"b": 1}}, {"a": {"b": 2}}, [{"op": "replace", "path": "/a/b", "value": 2}]),
    (
        "same-length list",
        {"l": [{"t": 1}, {"t": 2}]},
        {"l": [{"t": 1}, {"t": 3}]},
        [{"op": "replace", "path": "/l/1/t", "value": 3}],
    ),
    ("list length changed", {"l": [1]}, {"l": [1, 2]}, [{"op": "replace", "path": "/l", "value": [1, 2]}]),
    ("type changed", {"a": 1}, {"a": "1"}, [{"op": "replace", "path": "/a", "value": "1"}]),
    ("escaped keys", {}, {"a/b~c": 1}, [{"op": "add", "path": "/a~1b~0c", "value": 1}]),
]


@pytest.mark.parametrize(("case", "old", "new", "ops"), PATCHES, ids=[p[0] for p in PATCHES])
def test_json_patch(case: str, old: dict[str, Any], new: dict[str, Any], ops: list[dict[str, Any]]) -> None:
    assert json_patch(old, new) == ops
    assert _apply(old, ops) == new


def _apply(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """A minimal RFC 6902 applier (add/remove/replace) to check the patches round-trip."""
    doc = orjson.loads(orjson.dumps(doc))
    for op in ops:
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]]
        parent = doc
        for token in tokens[:-1]:
            parent = parent[int(token)] if isinstance(parent, list) else parent[token]
        last: Any = int(tokens[-1]) if isinstance(parent, list) else tokens[-1]
        if op["op"] == "remove":
            del parent[last]
        else:
            parent[last] = op["value"]
    return doc
