"""controller.serving.certs.rotator: the rotation rule on a fake clock, the caBundle patch, and passes against
an in-memory API (create-if-absent, adoption, conflicts, files, readiness)."""

from __future__ import annotations

import base64
import copy
import datetime as dt
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import structlog

from controller.client import errors
from controller.client.gvk import GVK
from controller.clock import FakeClock
from controller.serving.certs.keypairs import create_ca, first_certificate
from controller.serving.certs.rotator import (
    MUTATING_WEBHOOK_CONFIGURATION,
    SECRET,
    VALIDATING_WEBHOOK_CONFIGURATION,
    Action,
    CertRotator,
    RotationError,
    RotatorOptions,
    WebhookConfigurationRef,
    ca_bundle_patch,
    plan,
    renew,
)
from controller.serving.certwatcher import CertWatcher

DAY = 86400.0
NAMESPACE = "kubeflow-system"
DNS = f"kubeflow-trainer-controller-manager.{NAMESPACE}.svc"


def _status(code: int, reason: str) -> dict[str, Any]:
    return {"kind": "Status", "status": "Failure", "code": code, "reason": reason, "message": reason}


class FakeAPI:
    """An in-memory API server for the rotator's four calls.

    Models: resourceVersion (a counter) and optimistic concurrency on update, AlreadyExists on create,
    NotFound, and JSON patches of ``test``/``add`` operations (a failed ``test`` is Invalid). Does not model:
    validation, managedFields, watches, other patch types. ``before_write`` runs before each write so a test
    can play a concurrent replica.
    """

    def __init__(self) -> None:
        self.objects: dict[tuple[GVK, str | None, str], dict[str, Any]] = {}
        self.version = 0
        self.writes: list[tuple[str, str]] = []
        self.before_write: Callable[[str], None] | None = None
        self.lock = threading.Lock()

    def _key(self, obj: Mapping[str, Any]) -> tuple[GVK, str | None, str]:
        meta = obj["metadata"]
        return GVK.of(obj), meta.get("namespace"), meta["name"]

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.version += 1
            stored = copy.deepcopy(obj)
            stored["metadata"]["resourceVersion"] = str(self.version)
            self.objects[self._key(stored)] = stored
            return copy.deepcopy(stored)

    def get(self, gvk: GVK, name: str, namespace: str | None = None) -> dict[str, Any]:
        with self.lock:
            obj = self.objects.get((gvk, namespace, name))
        if obj is None:
            raise errors.from_status(_status(404, "NotFound"))
        return copy.deepcopy(obj)

    def create(self, obj: Mapping[str, Any], *, field_manager: str | None = None) -> dict[str, Any]:
        if self.before_write:
            self.before_write("create")
        if self._key(obj) in self.objects:
            raise errors.from_status(_status(409, "AlreadyExists"))
        self.writes.append(("create", obj["metadata"]["name"]))
        return self.put(dict(obj))

    def update(self, obj: Mapping[str, Any], *, field_manager: str | None = None) -> dict[str, Any]:
        if self.before_write:
            self.before_write("update")
        current = self.objects[self._key(obj)]
        if current["metadata"]["resourceVersion"] != obj["metadata"].get("resourceVersion"):
            raise errors.from_status(_status(409, "Conflict"))
        self.writes.append(("update", obj["metadata"]["name"]))
        return self.put(dict(obj))

    def patch(
        self,
        gvk: GVK,
        name: str,
        patch: Any,
        namespace: str | None = None,
        patch_type: str = "merge",
        *,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        assert patch_type == "json"
        obj = self.get(gvk, name, namespace)
        for op in patch:
            *parents, last = [int(p) if p.isdigit() else p for p in op["path"].strip("/").split("/")]
            target: Any = obj
            for part in parents:
                target = target[part]
            if op["op"] == "test":
                if target[last] != op["value"]:
                    raise errors.from_status(_status(422, "Invalid"))
            else:
                target[last] = op["value"]
        self.writes.append(("patch", name))
        return self.put(obj)


def webhook_configuration(gvk: GVK, name: str, hooks: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": gvk.api_version,
        "kind": gvk.kind,
        "metadata": {"name": name},
        "webhooks": [
            {"name": h, "clientConfig": {"service": {"name": "svc", "namespace": NAMESPACE}}} for h in hooks
        ],
    }


def options(cert_dir: Path, **overrides: Any) -> RotatorOptions:
    values: dict[str, Any] = {
        "secret_namespace": NAMESPACE,
        "secret_name": "kubeflow-trainer-webhook-cert",
        "cert_dir": cert_dir,
        "dns_name": DNS,
        "ca_name": "kubeflow-trainer-ca",
        "ca_organization": "kubeflow-trainer",
        "webhooks": (
            WebhookConfigurationRef.validating("validator.trainer.kubeflow.org"),
            WebhookConfigurationRef.mutating("defaulter.trainer.kubeflow.org"),
        ),
    }
    values.update(overrides)
    return RotatorOptions(**values)


@pytest.fixture
def api() -> FakeAPI:
    api = FakeAPI()
    api.put(
        webhook_configuration(
            VALIDATING_WEBHOOK_CONFIGURATION, "validator.trainer.kubeflow.org", ["a", "b", "c"]
        )
    )
    api.put(webhook_configuration(MUTATING_WEBHOOK_CONFIGURATION, "defaulter.trainer.kubeflow.org", ["m"]))
    return api


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(wall=dt.datetime(2026, 3, 1, tzinfo=dt.UTC))


def secret_data(api: FakeAPI) -> dict[str, bytes]:
    secret = api.get(SECRET, "kubeflow-trainer-webhook-cert", NAMESPACE)
    return {k: base64.b64decode(v) for k, v in secret["data"].items()}


def bundles(api: FakeAPI) -> list[str | None]:
    out: list[str | None] = []
    for gvk, name in (
        (VALIDATING_WEBHOOK_CONFIGURATION, "validator.trainer.kubeflow.org"),
        (MUTATING_WEBHOOK_CONFIGURATION, "defaulter.trainer.kubeflow.org"),
    ):
        out += [w["clientConfig"].get("caBundle") for w in api.get(gvk, name)["webhooks"]]
    return out


# --- the rule ---------------------------------------------------------------------------------------------


def test_nothing_means_a_new_ca(tmp_path: Path, clock: FakeClock) -> None:
    assert plan({}, options(tmp_path), clock.now())[0] is Action.NEW_CA


def test_the_serving_certificate_is_renewed_90_days_before_it_expires(
    tmp_path: Path, clock: FakeClock
) -> None:
    opts = options(tmp_path)
    data = renew({}, Action.NEW_CA, opts, clock.now())
    assert plan(data, opts, clock.now()) == (Action.KEEP, "valid")
    clock.step(274 * DAY)  # 91 days left: still good
    assert plan(data, opts, clock.now())[0] is Action.KEEP
    clock.step(2 * DAY)  # 89 days left
    action, reason = plan(data, opts, clock.now())
    assert action is Action.NEW_SERVING and "not valid at" in reason
    renewed = renew(data, action, opts, clock.now())
    assert renewed["ca.crt"] == data["ca.crt"] and renewed["ca.key"] == data["ca.key"]
    assert renewed["tls.crt"] != data["tls.crt"]
    assert plan(renewed, opts, clock.now())[0] is Action.KEEP


def test_the_ca_is_renewed_90_days_before_it_expires_and_the_old_one_stays_trusted(
    tmp_path: Path, clock: FakeClock
) -> None:
    opts = options(tmp_path)
    data = renew({}, Action.NEW_CA, opts, clock.now())
    clock.step((3650 - 89) * DAY)
    action, reason = plan(data, opts, clock.now())
    assert action is Action.NEW_CA and reason.startswith("CA:")
    renewed = renew(data, action, opts, clock.now())
    assert renewed["ca.crt"].count(b"BEGIN CERTIFICATE") == 2
    assert renewed["ca.crt"].endswith(data["ca.crt"])  # the previous CA, after the new one
    assert plan(renewed, opts, clock.now())[0] is Action.KEEP


def test_an_expired_previous_ca_is_not_kept(tmp_path: Path, clock: FakeClock) -> None:
    opts = options(tmp_path)
    old = create_ca("kubeflow-trainer-ca", "kubeflow-trainer", now=clock.now(), validity=dt.timedelta(days=1))
    clock.step(2 * DAY)
    renewed = renew({"ca.crt": old.cert_pem, "ca.key": old.key_pem}, Action.NEW_CA, opts, clock.now())
    assert renewed["ca.crt"].count(b"BEGIN CERTIFICATE") == 1


def test_a_serving_certificate_for_another_name_is_renewed(tmp_path: Path, clock: FakeClock) -> None:
    data = renew({}, Action.NEW_CA, options(tmp_path), clock.now())
    other = options(tmp_path, dns_name="renamed.kubeflow-system.svc")
    action, reason = plan(data, other, clock.now())
    assert action is Action.NEW_SERVING and "does not name renamed" in reason


def test_options_refuse_a_lookahead_that_would_rotate_every_pass(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="lookahead"):
        options(tmp_path, server_validity=dt.timedelta(days=30))


# --- the caBundle patch -----------------------------------------------------------------------------------


def test_the_patch_sets_every_webhooks_bundle_guarded_by_its_name() -> None:
    config = webhook_configuration(VALIDATING_WEBHOOK_CONFIGURATION, "v", ["a", "b"])
    encoded = base64.b64encode(b"CA").decode()
    assert ca_bundle_patch(config, b"CA") == [
        {"op": "test", "path": "/webhooks/0/name", "value": "a"},
        {"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": encoded},
        {"op": "test", "path": "/webhooks/1/name", "value": "b"},
        {"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": encoded},
    ]


def test_the_patch_skips_webhooks_already_right_and_is_empty_when_nothing_changes() -> None:
    config = webhook_configuration(VALIDATING_WEBHOOK_CONFIGURATION, "v", ["a", "b"])
    encoded = base64.b64encode(b"CA").decode()
    config["webhooks"][0]["clientConfig"]["caBundle"] = encoded
    assert [op["path"] for op in ca_bundle_patch(config, b"CA")] == [
        "/webhooks/1/name",
        "/webhooks/1/clientConfig/caBundle",
    ]
    config["webhooks"][1]["clientConfig"]["caBundle"] = encoded
    assert ca_bundle_patch(config, b"CA") == []
    assert ca_bundle_patch({"webhooks": None}, b"CA") == []


def test_the_patch_adds_a_missing_client_config() -> None:
    ops = ca_bundle_patch({"webhooks": [{"name": "a"}]}, b"CA")
    assert ops[1] == {"op": "add", "path": "/webhooks/0/clientConfig", "value": {}}


# --- passes -----------------------------------------------------------------------------------------------


def test_bootstrap_from_an_absent_secret(api: FakeAPI, tmp_path: Path, clock: FakeClock) -> None:
    cert_dir = tmp_path / "certs"
    rotator = CertRotator(api, options(cert_dir), clock=clock)
    with pytest.raises(RuntimeError, match="certificates are not ready"):
        rotator.check()
    with structlog.testing.capture_logs() as logs:
        rotator.refresh()
    data = secret_data(api)
    assert set(data) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    assert (cert_dir / "tls.crt").read_bytes() == data["tls.crt"]
    assert (cert_dir / "tls.key").read_bytes() == data["tls.key"]
    assert (cert_dir / "ca.crt").read_bytes() == data["ca.crt"]
    assert not (cert_dir / "ca.key").exists()
    assert (cert_dir / "tls.key").stat().st_mode & 0o777 == 0o600
    expected = base64.b64encode(data["ca.crt"]).decode()
    assert bundles(api) == [expected] * 4
    rotator.check()
    assert CertWatcher(cert_dir / "tls.crt", cert_dir / "tls.key").ready()
    # No key material in any log line.
    text = repr(logs)
    for secret in (data["tls.key"], data["ca.key"]):
        assert secret.decode() not in text and base64.b64encode(secret).decode() not in text
    assert "PRIVATE KEY" not in text and "PRIVATE KEY" not in repr(rotator)


def test_a_second_pass_writes_nothing(api: FakeAPI, tmp_path: Path, clock: FakeClock) -> None:
    rotator = CertRotator(api, options(tmp_path), clock=clock)
    rotator.refresh()
    writes = list(api.writes)
    mtime = (tmp_path / "tls.crt").stat().st_mtime_ns
    rotator.refresh()
    assert api.writes == writes
    assert (tmp_path / "tls.crt").stat().st_mtime_ns == mtime


def test_an_existing_valid_secret_is_adopted(api: FakeAPI, tmp_path: Path, clock: FakeClock) -> None:
    CertRotator(api, options(tmp_path / "first"), clock=clock).refresh()
    before = secret_data(api)
    writes = len(api.writes)
    second = CertRotator(api, options(tmp_path / "second"), clock=clock)
    second.refresh()
    assert secret_data(api) == before
    assert len(api.writes) == writes
    assert (tmp_path / "second" / "tls.crt").read_bytes() == before["tls.crt"]


def test_an_empty_secret_from_the_manifests_is_filled(api: FakeAPI, tmp_path: Path, clock: FakeClock) -> None:
    api.put(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "kubeflow-trainer-webhook-cert", "namespace": NAMESPACE},
        }
    )
    CertRotator(api, options(tmp_path), clock=clock).refresh()
    assert api.writes[0] == ("update", "kubeflow-trainer-webhook-cert")
    assert set(secret_data(api)) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}


def test_losing_the_create_race_adopts_the_winners_secret(
    api: FakeAPI, tmp_path: Path, clock: FakeClock
) -> None:
    winner = CertRotator(api, options(tmp_path / "winner"), clock=clock)

    def other_replica_first(kind: str) -> None:
        api.before_write = None
        winner.refresh()

    api.before_write = other_replica_first
    loser = CertRotator(api, options(tmp_path / "loser"), clock=clock)
    loser.refresh()
    data = secret_data(api)
    assert [w for w in api.writes if w[0] != "patch"] == [("create", "kubeflow-trainer-webhook-cert")]
    assert (tmp_path / "loser" / "tls.crt").read_bytes() == data["tls.crt"]
    assert (tmp_path / "winner" / "tls.crt").read_bytes() == data["tls.crt"]


def test_a_conflicting_rotation_reads_again_and_keeps_the_other_replicas_certificate(
    api: FakeAPI, tmp_path: Path, clock: FakeClock
) -> None:
    a = CertRotator(api, options(tmp_path / "a"), clock=clock)
    b = CertRotator(api, options(tmp_path / "b"), clock=clock)
    a.refresh()
    b.refresh()
    clock.step(300 * DAY)  # both see a certificate to renew

    def a_renews_first(kind: str) -> None:
        api.before_write = None
        a.refresh()

    api.before_write = a_renews_first
    b.refresh()
    updates = [w for w in api.writes if w[0] == "update"]
    assert len(updates) == 1  # b's write lost, b adopted a's certificate
    data = secret_data(api)
    assert (tmp_path / "a" / "tls.crt").read_bytes() == data["tls.crt"]
    assert (tmp_path / "b" / "tls.crt").read_bytes() == data["tls.crt"]


def test_a_missing_webhook_configuration_is_skipped(tmp_path: Path, clock: FakeClock) -> None:
    api = FakeAPI()
    rotator = CertRotator(api, options(tmp_path), clock=clock)
    with structlog.testing.capture_logs() as logs:
        rotator.refresh()
    assert rotator.ready()
    assert sum(1 for e in logs if e["event"] == "certs.webhook_configuration_not_found") == 2


def test_a_caBundle_reset_by_an_apply_is_restored(api: FakeAPI, tmp_path: Path, clock: FakeClock) -> None:
    rotator = CertRotator(api, options(tmp_path), clock=clock)
    rotator.refresh()
    api.put(webhook_configuration(MUTATING_WEBHOOK_CONFIGURATION, "defaulter.trainer.kubeflow.org", ["m"]))
    assert bundles(api)[3] is None
    rotator.refresh()
    assert bundles(api)[3] == base64.b64encode(secret_data(api)["ca.crt"]).decode()


def test_a_new_ca_is_in_every_bundle_before_a_certificate_it_signed_is_served(
    api: FakeAPI, tmp_path: Path, clock: FakeClock
) -> None:
    rotator = CertRotator(api, options(tmp_path), clock=clock)
    rotator.refresh()
    old_ca, old_serving = secret_data(api)["ca.crt"], secret_data(api)["tls.crt"]
    served_while_patched: list[bytes] = []
    patch = api.patch

    def patch_and_look(*args: Any, **kwargs: Any) -> dict[str, Any]:
        served_while_patched.append((tmp_path / "tls.crt").read_bytes())
        return patch(*args, **kwargs)

    api.patch = patch_and_look  # type: ignore[method-assign]
    clock.step((3650 - 89) * DAY)  # the CA is within the lookahead: a new CA and serving certificate
    rotator.refresh()
    data = secret_data(api)
    assert data["ca.crt"].endswith(old_ca) and data["ca.crt"] != old_ca
    # While each configuration was patched, the files still held the certificate of the old CA, which
    # the new bundle (new CA, then the old one) trusts as well; the new certificate came after.
    assert served_while_patched == [old_serving, old_serving]
    assert (tmp_path / "tls.crt").read_bytes() == data["tls.crt"]
    assert bundles(api) == [base64.b64encode(data["ca.crt"]).decode()] * 4


def test_the_files_are_written_even_when_a_bundle_cannot_be_patched(
    api: FakeAPI, tmp_path: Path, clock: FakeClock
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise errors.from_status(_status(403, "Forbidden"))

    api.patch = refuse  # type: ignore[method-assign]
    rotator = CertRotator(api, options(tmp_path), clock=clock)
    with pytest.raises(RotationError, match="caBundle not injected"):
        rotator.refresh()
    assert (tmp_path / "tls.crt").read_bytes() == secret_data(api)["tls.crt"]
    assert not rotator.ready()  # the pass failed: retried, and not ready until it succeeds


def test_an_unwritable_directory_leaves_readiness_to_the_mounted_files(
    api: FakeAPI, tmp_path: Path, clock: FakeClock
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    rotator = CertRotator(api, options(blocker / "certs"), clock=clock)
    rotator.refresh()  # no exception: the Secret and the bundles are done
    assert not rotator.ready()
    assert bundles(api)[0] is not None


# --- the loop ---------------------------------------------------------------------------------------------


@pytest.fixture
def running(api: FakeAPI, tmp_path: Path, clock: FakeClock) -> Iterator[CertRotator]:
    rotator = CertRotator(api, options(tmp_path), clock=clock)
    rotator.start(threading.Event())
    try:
        yield rotator
    finally:
        assert rotator.stop(10)


def _eventually(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    done = threading.Event()
    deadline = threading.Event()
    timer = threading.Timer(timeout, deadline.set)
    timer.start()
    try:
        while not condition():
            if deadline.is_set():
                raise AssertionError("condition not reached")
            done.wait(0.01)
    finally:
        timer.cancel()
        timer.join()


def test_the_loop_rotates_when_the_clock_reaches_the_lookahead(
    running: CertRotator, api: FakeAPI, tmp_path: Path, clock: FakeClock
) -> None:
    _eventually(lambda: running.ready() and clock.waiters() == 1)
    first = first_certificate((tmp_path / "tls.crt").read_bytes()).serial_number
    watcher = CertWatcher(tmp_path / "tls.crt", tmp_path / "tls.key")
    assert watcher.ready()
    clock.step(200 * DAY)  # a pass runs: nothing to do yet
    _eventually(lambda: running.statistics()["passes"] >= 2 and clock.waiters() == 1)
    assert first_certificate((tmp_path / "tls.crt").read_bytes()).serial_number == first
    clock.step(80 * DAY)  # 85 days left: rotate
    _eventually(lambda: running.statistics()["rotations"] == 2 and clock.waiters() == 1)
    rotated = first_certificate((tmp_path / "tls.crt").read_bytes())
    assert rotated.serial_number != first
    assert secret_data(api)["tls.crt"] == (tmp_path / "tls.crt").read_bytes()
    assert watcher.context() is not None and watcher.ready()


def test_a_failing_pass_is_retried_with_backoff(tmp_path: Path, clock: FakeClock) -> None:
    api = FakeAPI()
    failures = [2]

    def flaky(kind: str) -> None:
        if failures[0]:
            failures[0] -= 1
            raise errors.from_status(_status(500, "InternalError"))

    api.before_write = flaky
    rotator = CertRotator(api, options(tmp_path), clock=clock)
    rotator.start(threading.Event())
    try:
        _eventually(lambda: rotator.statistics()["failures"] == 1 and clock.waiters() == 1)
        with pytest.raises(RuntimeError, match="certificates are not ready"):
            rotator.check()
        clock.step(1)
        _eventually(lambda: rotator.statistics()["failures"] == 2 and clock.waiters() == 1)
        clock.step(1.5)  # the second backoff is 2 s
        assert not rotator.ready()
        clock.step(0.5)
        _eventually(rotator.ready)
    finally:
        assert rotator.stop(10)


def test_a_refused_secret_write_is_reported_without_the_api_servers_message(
    tmp_path: Path, clock: FakeClock
) -> None:
    api = FakeAPI()

    def refuse(kind: str) -> None:
        raise errors.from_status(
            {
                "kind": "Status",
                "code": 422,
                "reason": "Invalid",
                "message": "data[tls.key]: -----BEGIN RSA PRIVATE KEY",
            }
        )

    api.before_write = refuse
    with pytest.raises(RotationError) as caught:
        CertRotator(api, options(tmp_path), clock=clock).refresh()
    assert str(caught.value) == f"writing Secret {NAMESPACE}/kubeflow-trainer-webhook-cert: 422 Invalid"
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
