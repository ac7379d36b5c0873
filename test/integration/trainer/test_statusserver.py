"""The status server against the Tier 1 API server: upstream's scenarios
(test/integration/statusserver/server_test.go) and the token checks, with real TokenReviews of tokens from
the TokenRequest API.

Upstream starts the server with a permissive authorizer; here the real one runs, so every request carries
a ServiceAccount token for the TrainJob's audience, as a training pod's projected token. The server is
started directly (not through the manager) on 127.0.0.1 with a self-signed certificate; its client is the
one ``client_for`` builds (the status server's rate limit, TokenReviews without discovery), and its
authenticator the production one: TokenReviews behind the 10 s cache.

The token checks (upstream verifies them itself, here the API server does): a token for another TrainJob's
audience, for the API server's audience, of a ServiceAccount of another namespace, of another issuer, an
expired one, a forged signature, and one whose bound object is gone are all 403. Tokens with a claim
changed are re-signed with the control plane's own service-account key, and the same re-signing of an
unchanged token is accepted, so each 403 is the claim's doing.
"""

from __future__ import annotations

import base64
import http.client
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from controller.client.client import Client
from controller.client.errors import NotFound
from controller.envtest import ControlPlane
from controller.envtest.certs import CertificateAuthority
from controller.serving.authentication import CachingAuthenticator, TokenReviewAuthenticator
from controller.serving.certwatcher import CertWatcher
from controller.trainer.config import Configuration
from controller.trainer.kinds import TRAINJOB
from controller.trainer.statusserver import StatusHandler, StatusServer, client_for
from support import trainer_objects as objects

SERVICE_ACCOUNT = "trainer-pod"
TIME = "2026-01-02T03:04:05Z"


def audience(namespace: str, name: str) -> str:
    return f"trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"


def status_path(namespace: str, name: str) -> str:
    return f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"


@dataclass
class Served:
    server: StatusServer
    ca_file: Path
    authenticator: CachingAuthenticator

    def post(self, path: str, body: Any, token: str | None) -> tuple[int, Any]:
        context = ssl.create_default_context(cafile=str(self.ca_file))
        conn = http.client.HTTPSConnection(*self.server.address, context=context, timeout=30)
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        try:
            conn.request("POST", path, orjson.dumps(body), headers)
            answer = conn.getresponse()
            return answer.status, orjson.loads(answer.read())
        finally:
            conn.close()


@pytest.fixture(scope="module")
def served(client: Client, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    directory = tmp_path_factory.mktemp("status-server")
    ca = CertificateAuthority.new("status-server-ca")
    ca_file, _ = ca.write(directory, "ca.crt", "ca.key")
    cert, key = ca.issue_serving(["127.0.0.1"]).write(directory / "serving", "tls.crt", "tls.key")
    status_client = client_for(client, Configuration())
    authenticator = CachingAuthenticator(TokenReviewAuthenticator(status_client))
    handler = StatusHandler(authenticator, status_client)
    server = StatusServer(handler, certs=CertWatcher(cert, key), bind_address="127.0.0.1:0")
    server.start(threading.Event())
    yield Served(server=server, ca_file=ca_file, authenticator=authenticator)
    server.stop()
    status_client.close()


def request_token(
    control_plane: ControlPlane,
    namespace: str,
    audiences: list[str],
    *,
    account: str = SERVICE_ACCOUNT,
    bound_secret: Mapping[str, str] | None = None,
) -> str:
    """A token of ServiceAccount ``namespace/account`` (created if missing) from the TokenRequest API."""
    accounts = f"/api/v1/namespaces/{quote(namespace)}/serviceaccounts"
    created = control_plane.admin_request(
        "POST", accounts, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}}
    )
    assert created.status in (201, 409), created.body
    spec: dict[str, Any] = {"audiences": audiences, "expirationSeconds": 600}
    if bound_secret is not None:
        spec["boundObjectRef"] = {"apiVersion": "v1", "kind": "Secret", **bound_secret}
    answer = control_plane.admin_request(
        "POST",
        f"{accounts}/{account}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
    )
    assert answer.status == 201, answer.body
    token: str = answer.json()["status"]["token"]
    return token


@pytest.fixture
def trainjob(client: Client, namespace: str) -> str:
    """A TrainJob (its runtime need not exist: no controller runs here); returns its name."""
    client.create(
        objects.trainjob(namespace, "status-job", "torch-distributed", kind="ClusterTrainingRuntime")
    )
    return "status-job"


@pytest.fixture
def token(control_plane: ControlPlane, namespace: str, trainjob: str) -> str:
    """A token of a ServiceAccount of the TrainJob's namespace for the TrainJob's audience (a pod's)."""
    return request_token(control_plane, namespace, [audience(namespace, trainjob)])


@dataclass
class Job:
    namespace: str
    name: str
    token: str


@pytest.fixture
def job(namespace: str, trainjob: str, token: str) -> Job:
    return Job(namespace=namespace, name=trainjob, token=token)


def trainer_status(client: Client, namespace: str, name: str) -> Any:
    return client.get(TRAINJOB, name, namespace).get("status", {}).get("trainerStatus")


def test_98_a_valid_update_is_written(
    served: Served, client: Client, namespace: str, trainjob: str, token: str
) -> None:
    body = {
        "trainerStatus": {
            "progressPercentage": 50,
            "estimatedRemainingSeconds": 120,
            "metrics": [{"name": "loss", "value": "0.123"}, {"name": "accuracy", "value": "0.95"}],
            "lastUpdatedTime": "2026-01-02T03:04:05.678+00:00",
        }
    }
    code, answer = served.post(status_path(namespace, trainjob), body, token)
    assert code == 200, answer
    expected = {
        "progressPercentage": 50,
        "estimatedRemainingSeconds": 120,
        "metrics": [{"name": "loss", "value": "0.123"}, {"name": "accuracy", "value": "0.95"}],
        "lastUpdatedTime": TIME,
    }
    assert answer == {"trainerStatus": expected}
    assert trainer_status(client, namespace, trainjob) == expected
    managers = {
        (entry["manager"], entry.get("subresource", ""))
        for entry in client.get(TRAINJOB, trainjob, namespace)["metadata"]["managedFields"]
    }
    assert ("trainer-status", "status") in managers


def test_99_a_second_update_replaces_the_first(
    served: Served, client: Client, namespace: str, trainjob: str, token: str
) -> None:
    path = status_path(namespace, trainjob)
    first = {
        "trainerStatus": {
            "progressPercentage": 40,
            "metrics": [{"name": "a", "value": "1"}],
            "lastUpdatedTime": TIME,
        }
    }
    assert served.post(path, first, token)[0] == 200
    second = {"trainerStatus": {"estimatedRemainingSeconds": 7, "lastUpdatedTime": TIME}}
    assert served.post(path, second, token)[0] == 200
    assert trainer_status(client, namespace, trainjob) == {
        "estimatedRemainingSeconds": 7,
        "lastUpdatedTime": TIME,
    }


def test_100_an_empty_update_leaves_the_status_unchanged(
    served: Served, client: Client, namespace: str, trainjob: str, token: str
) -> None:
    path = status_path(namespace, trainjob)
    assert (
        served.post(path, {"trainerStatus": {"progressPercentage": 40, "lastUpdatedTime": TIME}}, token)[0]
        == 200
    )
    before = client.get(TRAINJOB, trainjob, namespace)
    assert served.post(path, {}, token) == (200, {})
    after = client.get(TRAINJOB, trainjob, namespace)
    # Nothing was written at all: the resourceVersion (not only the value) is the same.
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["status"]["trainerStatus"] == {"progressPercentage": 40, "lastUpdatedTime": TIME}


@pytest.mark.parametrize(
    "trainer_status_body",
    [
        {"progressPercentage": 150, "lastUpdatedTime": TIME},
        {"estimatedRemainingSeconds": -1, "lastUpdatedTime": TIME},
        {"metrics": [{"name": "", "value": "1"}], "lastUpdatedTime": TIME},
        {"metrics": [{"name": "loss", "value": "1" * 65}], "lastUpdatedTime": TIME},
        {"metrics": [{"name": f"m{i}", "value": "1"} for i in range(257)], "lastUpdatedTime": TIME},
        {"progressPercentage": 10},
    ],
    ids=[
        "progress 150",
        "negative remaining seconds",
        "empty metric name",
        "metric value of 65 characters",
        "257 metrics",
        "no lastUpdatedTime",
    ],
)
def test_101_a_status_the_api_server_refuses_is_422_naming_the_trainjob(
    served: Served, client: Client, job: Job, trainer_status_body: dict[str, Any]
) -> None:
    namespace, trainjob, token = job.namespace, job.name, job.token
    path = status_path(namespace, trainjob)
    code, answer = served.post(path, {"trainerStatus": trainer_status_body}, token)
    assert code == 422, answer
    assert answer["code"] == 422
    assert answer["reason"] == "Invalid"
    assert answer["status"] == "Failure"
    assert trainjob in answer["message"]
    assert trainer_status(client, namespace, trainjob) is None


def test_102_a_missing_trainjob_is_404_and_not_created(
    served: Served, client: Client, control_plane: ControlPlane, namespace: str
) -> None:
    token = request_token(control_plane, namespace, [audience(namespace, "missing")])
    body = {"trainerStatus": {"progressPercentage": 10, "lastUpdatedTime": TIME}}
    code, answer = served.post(status_path(namespace, "missing"), body, token)
    assert (code, answer["message"], answer["reason"]) == (404, "Train job not found", "NotFound")
    with pytest.raises(NotFound):
        client.get(TRAINJOB, "missing", namespace)


BODY = {"trainerStatus": {"progressPercentage": 10, "lastUpdatedTime": TIME}}


def test_a_token_for_another_trainjob_is_forbidden(
    served: Served, client: Client, control_plane: ControlPlane, namespace: str, trainjob: str
) -> None:
    wrong = request_token(control_plane, namespace, [audience(namespace, "another-job")])
    code, answer = served.post(status_path(namespace, trainjob), BODY, wrong)
    assert (code, answer["message"]) == (403, "Forbidden")
    assert trainer_status(client, namespace, trainjob) is None


def test_a_token_for_the_api_server_is_forbidden(
    served: Served, control_plane: ControlPlane, namespace: str, trainjob: str
) -> None:
    api_token = request_token(control_plane, namespace, [])  # the API server's own audience
    assert served.post(status_path(namespace, trainjob), BODY, api_token)[0] == 403


def test_a_token_of_another_namespace_with_the_right_audience_is_forbidden(
    served: Served, client: Client, control_plane: ControlPlane, namespace: str, trainjob: str
) -> None:
    other = namespace + "-other"
    created = control_plane.admin_request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}}
    )
    assert created.status == 201, created.body
    try:
        foreign = request_token(control_plane, other, [audience(namespace, trainjob)])
        code, _ = served.post(status_path(namespace, trainjob), BODY, foreign)
        assert code == 403
        assert trainer_status(client, namespace, trainjob) is None
    finally:
        control_plane.admin_request("DELETE", f"/api/v1/namespaces/{other}")


def test_missing_and_forged_tokens_are_forbidden(
    served: Served, namespace: str, trainjob: str, token: str
) -> None:
    path = status_path(namespace, trainjob)
    assert served.post(path, BODY, None)[0] == 403
    header, payload, _signature = token.split(".")
    assert served.post(path, BODY, f"{header}.{payload}.forged")[0] == 403


def test_a_token_whose_bound_object_is_gone_is_forbidden(
    served: Served, client: Client, control_plane: ControlPlane, job: Job, eventually: Callable[..., Any]
) -> None:
    # As a pod's projected token once the pod is deleted: the API server's review says no, once its
    # token cache (10 s) has let the valid answer go.
    namespace, trainjob = job.namespace, job.name
    secret = client.create(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "binding", "namespace": namespace}}
    )
    bound = request_token(
        control_plane,
        namespace,
        [audience(namespace, trainjob)],
        bound_secret={"name": "binding", "uid": secret["metadata"]["uid"]},
    )
    path = status_path(namespace, trainjob)
    assert served.post(path, BODY, bound)[0] == 200
    deleted = control_plane.admin_request("DELETE", f"/api/v1/namespaces/{namespace}/secrets/binding")
    assert deleted.status == 200, deleted.body

    def refused() -> None:
        assert served.post(path, BODY, bound)[0] == 403

    # Up to 10 s in the API server's token cache, then up to 10 s in ours.
    eventually(refused, timeout=45.0, interval=1.0)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def resigned(control_plane: ControlPlane, token: str, **claims: Any) -> str:
    """``token`` with ``claims`` replaced (None removes one), signed again (RS256) with the control plane's
    service-account signing key: valid in every other respect."""
    header, payload, _ = token.split(".")
    body = orjson.loads(_unb64(payload))
    for name, value in claims.items():
        if value is None:
            body.pop(name, None)
        else:
            body[name] = value
    signing_input = f"{header}.{_b64(orjson.dumps(body))}"
    key = serialization.load_pem_private_key(
        (control_plane.directory / "pki" / "sa.key").read_bytes(), password=None
    )
    assert isinstance(key, rsa.RSAPrivateKey)
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{_b64(signature)}"


def test_a_resigned_token_with_its_claims_unchanged_is_accepted(
    served: Served, control_plane: ControlPlane, job: Job
) -> None:
    # The control for the tests below: re-signing alone (here with the issue time a second earlier, so the
    # token is a new one) does not make a token invalid.
    claims = orjson.loads(_unb64(job.token.split(".")[1]))
    earlier = resigned(control_plane, job.token, iat=claims["iat"] - 1, nbf=claims["nbf"] - 1)
    assert earlier != job.token
    assert served.post(status_path(job.namespace, job.name), BODY, earlier)[0] == 200


def test_an_expired_token_is_forbidden(served: Served, control_plane: ControlPlane, job: Job) -> None:
    now = int(time.time())
    expired = resigned(control_plane, job.token, exp=now - 3600, iat=now - 7200, nbf=now - 7200)
    code, answer = served.post(status_path(job.namespace, job.name), BODY, expired)
    assert (code, answer["message"]) == (403, "Forbidden")


def test_a_token_of_another_issuer_is_forbidden(
    served: Served, control_plane: ControlPlane, job: Job
) -> None:
    foreign = resigned(control_plane, job.token, iss="https://issuer.example.com")
    code, answer = served.post(status_path(job.namespace, job.name), BODY, foreign)
    assert (code, answer["message"]) == (403, "Forbidden")


def test_a_token_whose_namespace_claim_was_edited_is_forbidden(
    served: Served, control_plane: ControlPlane, job: Job
) -> None:
    # Re-signed, so only the claim is wrong: the API server finds no such ServiceAccount there, and were it
    # to authenticate the token, its user would not be of the TrainJob's namespace.
    claims = orjson.loads(_unb64(job.token.split(".")[1]))
    claims["kubernetes.io"]["namespace"] = "kube-system"
    edited = resigned(control_plane, job.token, **{"kubernetes.io": claims["kubernetes.io"]})
    assert served.post(status_path(job.namespace, job.name), BODY, edited)[0] == 403


def test_answers_are_cached_briefly(served: Served, job: Job) -> None:
    path = status_path(job.namespace, job.name)
    before = served.authenticator.statistics()
    assert served.post(path, BODY, job.token)[0] == 200
    assert served.post(path, BODY, job.token)[0] == 200
    after = served.authenticator.statistics()
    assert after.hits >= before.hits + 1  # the second request asked no TokenReview
