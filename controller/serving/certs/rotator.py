"""The certificate rotator: a self-managed CA and serving certificate kept in one Secret, written to the
servers' certificate directory and injected as the ``caBundle`` of webhook configurations.

Go origin: open-policy-agent cert-controller ``pkg/rotator`` (``CertRotator``, ``refreshCertIfNeeded``,
``ReconcileWH.ensureCerts``, ``injectCertToWebhook``, the ``IsReady`` channel) as upstream Kubeflow Trainer
configures it (``pkg/util/cert``).

What one pass (:meth:`CertRotator.refresh`) does, in order:

1. **The Secret.** Read it. Absent: create it with a new CA and serving certificate (create-if-absent; when
   another replica created it first, ``AlreadyExists``, read it again and adopt it). Present: keep what is
   there if it is still good at ``now + lookahead`` (:func:`plan`); otherwise renew the serving
   certificate, or the CA and the serving certificate when the CA is the problem, and write the Secret back
   with the ``resourceVersion`` read (optimistic concurrency: on ``Conflict`` read it again and decide
   again, so concurrent replicas converge on one certificate instead of overwriting each other).
2. **The caBundle.** For each webhook configuration named, add ``clientConfig.caBundle`` (the Secret's
   ``ca.crt``, base64) to every webhook whose bundle differs, with a JSON patch that touches nothing else
   and tests each webhook's name first (:func:`ca_bundle_patch`); a configuration that does not exist is
   logged and skipped, as upstream.
3. **The files.** Write ``tls.crt``, ``tls.key`` and ``ca.crt`` to the certificate directory when their
   content differs (each to a temporary file renamed over the old one; ``tls.key`` mode 0600). The
   servers' :class:`~controller.serving.certwatcher.CertWatcher` serve the new pair from their next
   connection, so rotation needs no restart. They come after the caBundle, so the API server trusts a new CA
   before a certificate it signed is served; they are written even when a configuration could not be patched
   (the pass then fails and is retried; the metrics server serves the same files). A directory that cannot be
   written (the Secret mounted read-only, as upstream's Deployment does) is left to the kubelet: the pass
   then only checks whether the files equal the Secret.

**Readiness** (:meth:`CertRotator.check`, "certificates are not ready") turns true once a pass has
finished with the files equal to the Secret, and stays true: later rotations happen ``lookahead`` (90 days)
before expiry, so the certificate being served is still valid while a new one propagates.

**Rotation rule** (upstream's): a certificate is renewed when it would not verify ``lookahead`` from now:
with the defaults, a 1-year serving certificate is renewed 90 days before it expires, and the 10-year CA
9.75 years after it was made. Time comes from the injected clock; tests step a fake clock.

**CA rotation keeps the old CA trusted**: ``ca.crt`` (and so every ``caBundle``) then holds the new CA
followed by the previous one while that is still valid, and the bundles are patched before the new
certificate is served, so the API server trusts both the certificate served before and the one served
after (upstream injects only the new CA, and replicas still serving the old certificate fail admission
until they catch up; kubeflow/trainer#2640). ``test/reliability/test_webhook_outage.py`` measures it
under load: no request refused. A **deleted Secret** is a clean break instead: the new CA has no
predecessor to keep (the old key may be why it was deleted), so admission requests in flight while the
bundles and the files switch over (tens of milliseconds) are refused with ``x509: certificate signed by
unknown authority``.

Threads: :meth:`CertRotator.start` starts one named thread (``cert-rotator``) that runs a pass at once,
then every ``resync_interval`` seconds (30 s), or sooner after :meth:`CertRotator.resync`; a failed pass
is logged and retried after 1, 2, 4 ... seconds (at most ``resync_interval``). :meth:`CertRotator.stop`
ends the wait and joins it. The rotator does not need leader election: every replica runs one.

Deliberately missing: watches of the Secret and the configurations (upstream runs a controller with its own
cache; here a pass is three GETs every 30 s, which also catches a ``kubectl apply`` that reset a caBundle),
CRD conversion webhooks, APIServices and ``RestartOnSecretRefresh``. Key material never reaches a log line,
an exception message or a ``repr``.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import enum
import os
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import structlog
from cryptography.hazmat.primitives import serialization

from controller.client import errors
from controller.client.gvk import GVK
from controller.clock import REAL_CLOCK, Clock
from controller.serving.certs.keypairs import (
    create_ca,
    create_serving,
    first_certificate,
    load_key_pair,
    problem_with,
)

__all__ = [
    "CA_CERT_KEY",
    "CA_KEY_KEY",
    "MUTATING_WEBHOOK_CONFIGURATION",
    "SECRET",
    "TLS_CERT_KEY",
    "TLS_KEY_KEY",
    "VALIDATING_WEBHOOK_CONFIGURATION",
    "Action",
    "CertRotator",
    "RotationError",
    "RotatorClient",
    "RotatorOptions",
    "WebhookConfigurationRef",
    "ca_bundle_patch",
    "plan",
    "renew",
]

_log = structlog.get_logger("controller.serving.certs.rotator")

SECRET = GVK("", "v1", "Secret")
VALIDATING_WEBHOOK_CONFIGURATION = GVK("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration")
MUTATING_WEBHOOK_CONFIGURATION = GVK("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration")

CA_CERT_KEY = "ca.crt"
CA_KEY_KEY = "ca.key"
TLS_CERT_KEY = "tls.crt"
TLS_KEY_KEY = "tls.key"

FIELD_MANAGER = "cert-rotator"
_WRITE_ATTEMPTS = 5
_DAY = dt.timedelta(days=1)


class RotationError(RuntimeError):
    """A pass could not settle the Secret or inject the caBundle (the loop retries it)."""


class RotatorClient(Protocol):
    """The client calls the rotator makes (:class:`controller.client.client.Client` has them)."""

    def get(self, gvk: GVK, name: str, namespace: str | None = None) -> Mapping[str, Any]: ...

    def create(self, obj: Mapping[str, Any], *, field_manager: str | None = None) -> Mapping[str, Any]: ...

    def update(self, obj: Mapping[str, Any], *, field_manager: str | None = None) -> Mapping[str, Any]: ...

    def patch(
        self,
        gvk: GVK,
        name: str,
        patch: Any,
        namespace: str | None = None,
        patch_type: Literal["merge", "json", "strategic"] = "merge",
        *,
        field_manager: str | None = None,
    ) -> Mapping[str, Any]: ...


@dataclass(frozen=True, slots=True)
class WebhookConfigurationRef:
    """A (Validating|Mutating)WebhookConfiguration whose webhooks get the caBundle, by name."""

    gvk: GVK
    name: str

    @classmethod
    def validating(cls, name: str) -> WebhookConfigurationRef:
        return cls(VALIDATING_WEBHOOK_CONFIGURATION, name)

    @classmethod
    def mutating(cls, name: str) -> WebhookConfigurationRef:
        return cls(MUTATING_WEBHOOK_CONFIGURATION, name)


@dataclass(frozen=True, slots=True, kw_only=True)
class RotatorOptions:
    """What the rotator manages; the durations are cert-controller's defaults."""

    secret_namespace: str
    secret_name: str
    cert_dir: Path
    dns_name: str
    """The serving certificate's name: ``<service>.<namespace>.svc``."""
    ca_name: str
    ca_organization: str
    webhooks: tuple[WebhookConfigurationRef, ...] = ()
    extra_dns_names: tuple[str, ...] = ()
    ca_validity: dt.timedelta = 10 * 365 * _DAY
    server_validity: dt.timedelta = 365 * _DAY
    lookahead: dt.timedelta = 90 * _DAY
    resync_interval: float = 30.0

    def __post_init__(self) -> None:
        if not (self.secret_namespace and self.secret_name and self.dns_name and self.ca_name):
            raise ValueError("the rotator needs a Secret namespace and name, a DNS name and a CA name")
        if self.lookahead >= self.server_validity or self.lookahead >= self.ca_validity:
            raise ValueError("lookahead must be shorter than both validities, or every pass would rotate")
        if self.resync_interval <= 0:
            raise ValueError("resync_interval must be > 0")

    @property
    def dns_names(self) -> tuple[str, ...]:
        return (self.dns_name, *self.extra_dns_names)


class Action(enum.Enum):
    """What a pass does to the Secret (:func:`plan`)."""

    KEEP = "keep"
    NEW_SERVING = "new-serving-certificate"
    NEW_CA = "new-ca"


def plan(data: Mapping[str, bytes], options: RotatorOptions, now: dt.datetime) -> tuple[Action, str]:
    """Upstream's rule: the CA must verify (as its own issuer, for ``ca_name``) at ``now + lookahead``, else
    :attr:`Action.NEW_CA`; the serving pair must verify against it for ``dns_name`` with ``serverAuth`` at
    the same instant, else :attr:`Action.NEW_SERVING`. Returns the action and the reason."""
    at = now + options.lookahead
    ca_pem = data.get(CA_CERT_KEY, b"")
    ca_problem = problem_with(
        ca_pem, ca_pem, data.get(CA_KEY_KEY, b""), dns_name=options.ca_name, at=at, server_auth=False
    )
    if ca_problem is not None:
        return Action.NEW_CA, f"CA: {ca_problem}"
    serving_problem = problem_with(
        ca_pem,
        data.get(TLS_CERT_KEY, b""),
        data.get(TLS_KEY_KEY, b""),
        dns_name=options.dns_name,
        at=at,
        server_auth=True,
    )
    if serving_problem is not None:
        return Action.NEW_SERVING, f"serving certificate: {serving_problem}"
    return Action.KEEP, "valid"


def renew(
    data: Mapping[str, bytes], action: Action, options: RotatorOptions, now: dt.datetime
) -> dict[str, bytes]:
    """The Secret data after ``action`` (other keys kept). A new CA's ``ca.crt`` is followed by the previous
    CA while that one is still valid at ``now``, so both stay trusted during the change."""
    if action is Action.KEEP:
        return dict(data)
    renewed = dict(data)
    if action is Action.NEW_CA:
        ca = create_ca(options.ca_name, options.ca_organization, now=now, validity=options.ca_validity)
        bundle = ca.cert_pem
        previous = _still_valid_ca(data.get(CA_CERT_KEY, b""), now)
        if previous is not None:
            bundle += previous
        renewed[CA_CERT_KEY] = bundle
        renewed[CA_KEY_KEY] = ca.key_pem
    else:
        ca = load_key_pair(data[CA_CERT_KEY], data[CA_KEY_KEY])
    serving = create_serving(ca, options.dns_names, now=now, validity=options.server_validity)
    renewed[TLS_CERT_KEY] = serving.cert_pem
    renewed[TLS_KEY_KEY] = serving.key_pem
    return renewed


def _still_valid_ca(pem: bytes, now: dt.datetime) -> bytes | None:
    """The first certificate of ``pem`` as PEM when it parses and is valid at ``now``."""
    try:
        certificate = first_certificate(pem)
    except ValueError:
        return None
    if not certificate.not_valid_before_utc <= now <= certificate.not_valid_after_utc:
        return None
    return certificate.public_bytes(serialization.Encoding.PEM)


def ca_bundle_patch(configuration: Mapping[str, Any], bundle: bytes) -> list[dict[str, Any]]:
    """A JSON patch setting ``clientConfig.caBundle`` of every webhook of ``configuration`` whose bundle is
    not ``bundle`` already; empty when nothing changes. Each change is guarded by a ``test`` of the
    webhook's name at its index, so a concurrent reorder makes the patch fail instead of writing the wrong
    webhook. Nothing else in the object is touched."""
    encoded = base64.b64encode(bundle).decode("ascii")
    ops: list[dict[str, Any]] = []
    webhooks = configuration.get("webhooks") or []
    for index, webhook in enumerate(webhooks):
        client_config = webhook.get("clientConfig") or {}
        if client_config.get("caBundle") == encoded:
            continue
        ops.append({"op": "test", "path": f"/webhooks/{index}/name", "value": webhook.get("name")})
        if "clientConfig" not in webhook:
            ops.append({"op": "add", "path": f"/webhooks/{index}/clientConfig", "value": {}})
        ops.append({"op": "add", "path": f"/webhooks/{index}/clientConfig/caBundle", "value": encoded})
    return ops


def _decode(secret: Mapping[str, Any] | None) -> dict[str, bytes]:
    if secret is None:
        return {}
    out: dict[str, bytes] = {}
    for key, value in (secret.get("data") or {}).items():
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                out[key] = base64.b64decode(value, validate=True)
    return out


def _encode(data: Mapping[str, bytes]) -> dict[str, str]:
    return {key: base64.b64encode(value).decode("ascii") for key, value in sorted(data.items())}


@dataclass(slots=True, kw_only=True)
class _Stats:
    passes: int = 0
    failures: int = 0
    rotations: int = 0
    bundles_patched: int = 0
    last_error: str = ""
    serving_not_after: dt.datetime | None = None


class CertRotator:
    """Keeps the Secret, the certificate files and the caBundles in step (see the module doc).

    A manager Runnable that runs on every replica (``need_leader_election`` is False).
    """

    name = "cert-rotator"

    def __init__(self, client: RotatorClient, options: RotatorOptions, *, clock: Clock = REAL_CLOCK) -> None:
        self._client = client
        self.options = options
        self._clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._stats = _Stats()  # guarded by _lock

    # --- the pass ---------------------------------------------------------------------------------------

    def refresh(self) -> None:
        """One pass (see the module doc); raises :class:`RotationError`, an API error or OSError."""
        data = self._settle_secret()
        try:
            # The bundle before the files: the API server must trust a new CA before a certificate signed
            # by it is served (the previous CA, kept in the bundle, still covers the one served meanwhile).
            self._inject(data[CA_CERT_KEY])
        finally:
            # Written even when a configuration could not be patched (retried on the next pass): the
            # Secret is the truth, and the metrics server serves the same files.
            files_current = self._write_files(data)
        with self._lock:
            self._stats.passes += 1
            self._stats.last_error = ""
            self._stats.serving_not_after = first_certificate(data[TLS_CERT_KEY]).not_valid_after_utc
        if files_current and not self._ready.is_set():
            self._ready.set()
            _log.info("certs.ready", cert_dir=str(self.options.cert_dir), secret=self._secret_ref)
        elif not files_current:
            _log.info(
                "certs.waiting_for_mounted_secret",
                cert_dir=str(self.options.cert_dir),
                note="the directory is not writable; the kubelet updates the mounted Secret",
            )

    @property
    def _secret_ref(self) -> str:
        return f"{self.options.secret_namespace}/{self.options.secret_name}"

    def _settle_secret(self) -> dict[str, bytes]:
        opts = self.options
        for _ in range(_WRITE_ATTEMPTS):
            try:
                secret: Mapping[str, Any] | None = self._client.get(
                    SECRET, opts.secret_name, opts.secret_namespace
                )
            except errors.NotFound:
                secret = None
            data = _decode(secret)
            now = self._clock.now()
            action, reason = plan(data, opts, now)
            if action is Action.KEEP:
                return data
            renewed = renew(data, action, opts, now)
            try:
                if secret is None:
                    self._client.create(
                        {
                            "apiVersion": "v1",
                            "kind": "Secret",
                            "metadata": {"name": opts.secret_name, "namespace": opts.secret_namespace},
                            "data": _encode(renewed),
                        },
                        field_manager=FIELD_MANAGER,
                    )
                else:
                    body = dict(secret)
                    body["data"] = {**(secret.get("data") or {}), **_encode(renewed)}
                    self._client.update(body, field_manager=FIELD_MANAGER)
            except (errors.AlreadyExists, errors.Conflict) as exc:
                # Another replica wrote first: read what it wrote and decide again.
                _log.info("certs.secret_write_lost", secret=self._secret_ref, reason=type(exc).__name__)
                continue
            except errors.ApiError as exc:
                # Status and reason only, and deliberately not chained: an API server's message about a
                # refused Secret may quote what was sent, and this error ends up in a log line.
                raise RotationError(
                    f"writing Secret {self._secret_ref}: {exc.status} {exc.reason or 'error'}"
                ) from None
            with self._lock:
                self._stats.rotations += 1
            _log.info(
                "certs.rotated",
                secret=self._secret_ref,
                action=action.value,
                reason=reason,
                created=secret is None,
                not_after=first_certificate(renewed[TLS_CERT_KEY]).not_valid_after_utc.isoformat(),
            )
            return renewed
        raise RotationError(f"Secret {self._secret_ref} kept changing: gave up after {_WRITE_ATTEMPTS} tries")

    def _write_files(self, data: Mapping[str, bytes]) -> bool:
        """Writes the files that differ; returns whether the directory now holds the Secret's pair."""
        directory = self.options.cert_dir
        wanted = [
            (CA_CERT_KEY, data[CA_CERT_KEY], 0o644),
            (TLS_KEY_KEY, data[TLS_KEY_KEY], 0o600),
            (TLS_CERT_KEY, data[TLS_CERT_KEY], 0o644),
        ]
        try:
            directory.mkdir(parents=True, exist_ok=True)
            for name, content, mode in wanted:
                if _read(directory / name) != content:
                    _replace(directory, name, content, mode)
                    _log.info("certs.file_written", path=str(directory / name))
        except OSError as exc:
            _log.debug("certs.cert_dir_not_writable", cert_dir=str(directory), error=exc.strerror)
        return all(_read(directory / name) == content for name, content, _ in wanted[1:])

    def _inject(self, bundle: bytes) -> None:
        failures: list[str] = []
        for ref in self.options.webhooks:
            try:
                self._inject_one(ref, bundle)
            except (errors.ApiError, errors.TransportError, RotationError) as exc:
                failures.append(f"{ref.gvk.kind} {ref.name}: {exc}")
                _log.error("certs.ca_bundle_failed", kind=ref.gvk.kind, name=ref.name, error=str(exc))
        if failures:
            raise RotationError("caBundle not injected: " + "; ".join(failures))

    def _inject_one(self, ref: WebhookConfigurationRef, bundle: bytes) -> None:
        for _ in range(_WRITE_ATTEMPTS):
            try:
                configuration = self._client.get(ref.gvk, ref.name)
            except errors.NotFound:
                _log.warning("certs.webhook_configuration_not_found", kind=ref.gvk.kind, name=ref.name)
                return
            if (configuration.get("metadata") or {}).get("deletionTimestamp"):
                _log.info("certs.webhook_configuration_deleting", kind=ref.gvk.kind, name=ref.name)
                return
            ops = ca_bundle_patch(configuration, bundle)
            if not ops:
                return
            try:
                self._client.patch(ref.gvk, ref.name, ops, patch_type="json", field_manager=FIELD_MANAGER)
            except (errors.Invalid, errors.Conflict):
                continue  # a webhook moved under us (the test op failed): read again
            with self._lock:
                self._stats.bundles_patched += 1
            _log.info(
                "certs.ca_bundle_injected",
                kind=ref.gvk.kind,
                name=ref.name,
                webhooks=sum(1 for op in ops if op["path"].endswith("/caBundle")),
            )
            return
        raise RotationError(f"{ref.gvk.kind} {ref.name} kept changing")

    # --- readiness --------------------------------------------------------------------------------------

    def ready(self) -> bool:
        """Whether a pass has completed with the certificate files in place."""
        return self._ready.is_set()

    def check(self) -> None:
        """The readiness check: raises until :meth:`ready`."""
        if not self._ready.is_set():
            with self._lock:
                error = self._stats.last_error
            raise RuntimeError("certificates are not ready" + (f": {error}" if error else ""))

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Blocks until ready or ``timeout`` seconds of the rotator's clock pass; returns :meth:`ready`."""
        return self._clock.wait(self._ready, timeout)

    # --- Runnable ---------------------------------------------------------------------------------------

    def need_leader_election(self) -> bool:
        return False

    def start(self, stop: threading.Event) -> None:
        """Starts the ``cert-rotator`` thread and returns; readiness tells when the first pass is done."""
        with self._lock:
            if self._thread is not None:
                raise RuntimeError("the certificate rotator was already started")
            self._thread = threading.Thread(target=self._run, name="cert-rotator", daemon=True)
            self._thread.start()

    def resync(self) -> None:
        """Runs a pass now instead of at the end of the interval."""
        self._wake.set()

    def stop(self, timeout: float | None = None) -> bool:
        """Ends the wait and joins the thread (a pass in progress finishes its current request)."""
        self._stop.set()
        self._wake.set()
        with self._lock:
            thread = self._thread
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def _run(self) -> None:
        backoff = 1.0
        while not self._stop.is_set():
            self._wake.clear()
            try:
                self.refresh()
            except Exception as exc:  # noqa: BLE001 - the loop must survive; logged with its traceback
                with self._lock:
                    self._stats.failures += 1
                    self._stats.last_error = str(exc)
                _log.exception("certs.refresh_failed", secret=self._secret_ref, retry_in_s=backoff)
                wait = min(backoff, self.options.resync_interval)
                backoff = min(backoff * 2, self.options.resync_interval)
            else:
                backoff = 1.0
                wait = self.options.resync_interval
            self._clock.wait(self._wake, wait)

    def statistics(self) -> dict[str, Any]:
        """Passes, failures, rotations, caBundle patches, the last error and the serving cert's expiry."""
        with self._lock:
            s = self._stats
            return {
                "passes": s.passes,
                "failures": s.failures,
                "rotations": s.rotations,
                "bundles_patched": s.bundles_patched,
                "last_error": s.last_error,
                "serving_not_after": s.serving_not_after,
                "ready": self._ready.is_set(),
            }

    def __repr__(self) -> str:
        state = "ready" if self._ready.is_set() else "not ready"
        return f"CertRotator(secret={self._secret_ref!r}, dns_name={self.options.dns_name!r}, {state})"


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _replace(directory: Path, name: str, content: bytes, mode: int) -> None:
    """Writes ``content`` to a temporary file in ``directory`` and renames it over ``name``."""
    fd, temporary = tempfile.mkstemp(prefix=f".{name}.", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, directory / name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
