"""The Trainer's admission webhooks: a mutating one for TrainJobs, validating ones for TrainJobs,
TrainingRuntimes and ClusterTrainingRuntimes, served by the manager's webhook server.

Go origin: kubeflow/trainer `pkg/webhooks` (`Setup`, `TrainJobDefaulter`, `TrainJobValidator`,
`TrainingRuntimeValidator`, `ClusterTrainingRuntimeValidator`) and controller-runtime's typed
`Defaulter`/`Validator` adapters (`admission/defaulter_custom.go`, `validator_custom.go`).

- `/mutate-trainer-kubeflow-org-v1alpha1-trainjob` (TrainJob CREATE, UPDATE): stamps
  `spec.runtimePatches[].time` (`runtime.core.defaulting`), answered as a JSON Patch of at most
  `MAX_RUNTIME_PATCHES` (16) operations: a longer list, which the schema refuses after this webhook, is
  left alone.
- `/validate-trainer-kubeflow-org-v1alpha1-trainjob` (TrainJob CREATE, UPDATE):
  `RuntimeRegistry.validate(old, new, reader)`: the runtime exists, the plugins' checks; warnings for a
  deprecated ClusterTrainingRuntime.
- `/validate-trainer-kubeflow-org-v1alpha1-trainingruntime` (TrainingRuntime CREATE): the replicated-job
  rules, the buildable values and the snapshot size (`runtime.core.runtime_rules`: a runtime whose runtime
  snapshot would be more than a ConfigMap holds is denied, which upstream does not do).
- `/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime` (ClusterTrainingRuntime CREATE, UPDATE):
  the same rules; a deprecation warning on CREATE.

Guarantees:

- A rejection is controller-runtime's `Denied` for a validator's error: `allowed: false`, `code: 403`,
  `reason: Forbidden`, the message Go's aggregate of the field errors prints (`<path>: Invalid value: <v>:
  <detail>`; several in `[a, b]`), warnings kept. However many errors, the message is bounded
  (`runtime.framework.validation.error_lines`: at most 5 of one kind, 20 lines, then `and K more`), and so
  is a 400's list of schema errors. A TrainJob whose `runtimeRef` names no registered runtime
  kind is denied with `spec.runtimeRef: Invalid value: {...}: unsupported runtime: <Kind>.<group>`
  (upstream's message is the part from `unsupported runtime`; the field path is this port's, so that every
  rejection names the field).
- Operations a webhook does not check (DELETE, CONNECT, a TrainingRuntime UPDATE) are allowed with
  `code: 200`. A CREATE or UPDATE without the object(s) it needs, or with an object of another kind
  (`request.object.kind: expected TrainJob of trainer.kubeflow.org/v1alpha1, got 'Pod' of 'v1'`), is
  `errored(400)`, as controller-runtime's typed adapters answer an object they cannot decode.
- An object that does not have its CRD's shape (a string where the schema wants an object...) never
  reaches the API server's validating webhooks, whose schema check comes first; should one reach these
  handlers anyway and trip the rules, the answer is `errored(400)` with the CRD schema's field errors
  (`runtime.schema.SchemaChecker`, loaded on first need), the field errors of the decoding step that Go's
  typed adapters would have failed: never a 500. A failure the schema cannot explain is a bug, and is
  answered 500 (`controller.serving.webhook.admission`).
- A stored runtime that Go's typed decoding would refuse (a field of the wrong JSON type, a quantity that does
  not parse: stored under an older CRD, or edited in etcd) is not validated against: the TrainJob is denied
  at `spec.runtimeRef`, naming the runtime and its field (`Runtime.validate`; upstream's typed cache cannot
  decode such a runtime, and its webhook denies there too). Never a 500.
- Reads go through the `Reader` given (the manager's cache-backed `CacheReader`): an admission makes no API
  request for a cached kind. A read failure is a field error (`Internal error`), so the request is denied,
  never admitted unchecked.
- An update after the runtime was deleted (upstream rejects every update of a TrainJob whose runtime was
  deleted): here an update is validated against the TrainJob's runtime snapshot ConfigMap when the runtime is
  gone (`Runtime.validate`); without a snapshot it is rejected as upstream.
- Handlers hold no lock and keep no state: any number of connection threads may call them at once.

`setup_webhooks` registers the four handlers on a `WebhookServer` (HTTPS on the configured port, certificates
from the cert dir, `tls` options of the Configuration), adds it to the manager as a Runnable that runs on
every replica, and adds the readiness check `webhook-server` (certificates present, server answering).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, cast

import structlog

from controller.clock import REAL_CLOCK, Clock
from controller.manager.manager import Manager
from controller.serving.tlsconfig import TLSOptions
from controller.serving.webhook import (
    DEFAULT_CERT_DIR,
    AdmissionRequest,
    AdmissionResponse,
    Handler,
    WebhookServer,
    allowed,
    denied,
    errored,
    json_patch,
    patched,
)
from controller.trainer.config import Configuration
from controller.trainer.kinds import CLUSTER_TRAINING_RUNTIME, JOBSET, TRAINING_RUNTIME, TRAINJOB
from controller.trainer.reader import CacheReader
from runtime.api import constants
from runtime.api.v1alpha1 import TrainJob
from runtime.core import RuntimeRegistry
from runtime.core.defaulting import stamp_runtime_patch_times
from runtime.core.runtime_rules import validate_cluster_training_runtime, validate_training_runtime
from runtime.framework import FieldError, Reader, Validation, error_lines
from runtime.schema import CRD_DIR, SchemaChecker

__all__ = [
    "CLUSTER_TRAINING_RUNTIME_VALIDATOR_PATH",
    "TRAINING_RUNTIME_VALIDATOR_PATH",
    "TRAINJOB_DEFAULTER_PATH",
    "TRAINJOB_VALIDATOR_PATH",
    "ClusterTrainingRuntimeValidator",
    "Schemas",
    "TrainJobDefaulter",
    "TrainJobValidator",
    "TrainingRuntimeValidator",
    "aggregate_message",
    "setup_webhooks",
]

_log = structlog.get_logger("controller.trainer.webhooks")

TRAINJOB_DEFAULTER_PATH = "/mutate-trainer-kubeflow-org-v1alpha1-trainjob"
TRAINJOB_VALIDATOR_PATH = "/validate-trainer-kubeflow-org-v1alpha1-trainjob"
TRAINING_RUNTIME_VALIDATOR_PATH = "/validate-trainer-kubeflow-org-v1alpha1-trainingruntime"
CLUSTER_TRAINING_RUNTIME_VALIDATOR_PATH = "/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime"


def aggregate_message(messages: list[str]) -> str:
    """Go's `utilerrors.NewAggregate(...).Error()`: duplicates dropped; one message as is, several in
    `[a, b]`."""
    unique = list(dict.fromkeys(messages))
    if len(unique) == 1:
        return unique[0]
    return "[" + ", ".join(unique) + "]"


def _verdict(validation: Validation) -> AdmissionResponse:
    """A validator's answer (controller-runtime `validatorForType.Handle`)."""
    if validation.errors:
        return denied(aggregate_message(error_lines(validation.errors))).with_warnings(*validation.warnings)
    return allowed().with_warnings(*validation.warnings)


def _kind_error(where: str, obj: Mapping[str, Any], kind: str) -> AdmissionResponse | None:
    api_version, found = obj.get("apiVersion"), obj.get("kind")
    if api_version == constants.API_VERSION and found == kind:
        return None
    shown = [repr(v) if len(repr(v)) <= 64 else repr(v)[:61] + "..." for v in (found, api_version)]
    return errored(
        400, f"{where}.kind: expected {kind} of {constants.API_VERSION}, got {shown[0]} of {shown[1]}"
    )


def _objects(
    request: AdmissionRequest, kind: str
) -> tuple[Mapping[str, Any], Mapping[str, Any] | None] | AdmissionResponse:
    """(new, old) for CREATE (old None) and UPDATE, or the error answer when the review lacks one or
    carries an object of another kind."""
    if request.object is None:
        return errored(400, f"request.object is required for {request.operation}")
    wrong = _kind_error("request.object", request.object, kind)
    if wrong is not None:
        return wrong
    if request.operation == "UPDATE":
        if request.old_object is None:
            return errored(400, "request.oldObject is required for UPDATE")
        wrong = _kind_error("request.oldObject", request.old_object, kind)
        if wrong is not None:
            return wrong
        return request.object, request.old_object
    return request.object, None


class Schemas:
    """The Trainer CRDs' schema checker, loaded from `runtime.schema.CRD_DIR` on first need (only an
    object of the wrong shape needs it). Thread-safe."""

    def __init__(self, checker: SchemaChecker | None = None) -> None:
        self._lock = threading.Lock()
        self._checker = checker

    def errors(self, obj: Mapping[str, Any]) -> list[FieldError]:
        """The object's schema violations."""
        with self._lock:
            if self._checker is None:
                self._checker = SchemaChecker.from_crd_dir(CRD_DIR)
            checker = self._checker
        return checker.check(obj)[1]

    def field_errors(self, obj: Mapping[str, Any]) -> list[str]:
        """The object's schema violations, as the API server prints them."""
        return [str(error) for error in self.errors(obj)]


_SHAPE_ERRORS = (TypeError, AttributeError, KeyError, IndexError, ValueError)
"""What the rules raise on an object of the wrong shape."""


def _checked_shape(
    schemas: Schemas,
    new: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    rules: Callable[[], AdmissionResponse],
) -> AdmissionResponse:
    """`rules()`, or, when they trip over the objects' shape, 400 with the schema's field errors."""
    try:
        return rules()
    except _SHAPE_ERRORS as exc:
        problems = schemas.errors(new)
        if old is not None:
            problems += [replace(p, path=f"request.oldObject.{p.path}") for p in schemas.errors(old)]
        if not problems:
            raise  # the schema finds nothing wrong: a bug in the rules, answered 500 and counted
        _log.info("webhooks.malformed_object", error=f"{type(exc).__name__}: {exc}", problems=len(problems))
        return errored(400, aggregate_message(error_lines(problems)))


class TrainJobDefaulter(Handler):
    """The mutating TrainJob webhook: `spec.runtimePatches[].time` (rules in `runtime.core.defaulting`)."""

    def __init__(self, clock: Clock = REAL_CLOCK, *, schemas: Schemas | None = None) -> None:
        self._clock = clock
        self._schemas = schemas or Schemas()

    def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        if request.operation not in ("CREATE", "UPDATE"):
            return allowed()
        objects = _objects(request, constants.TRAINJOB_KIND)
        if isinstance(objects, AdmissionResponse):
            return objects
        new, old = objects

        def rules() -> AdmissionResponse:
            return patched(json_patch(new, stamp_runtime_patch_times(new, old, self._clock.now())))

        return _checked_shape(self._schemas, new, old, rules)


class TrainJobValidator(Handler):
    """The validating TrainJob webhook: `RuntimeRegistry.validate` over the given reader."""

    def __init__(self, registry: RuntimeRegistry, reader: Reader, *, schemas: Schemas | None = None) -> None:
        self._registry = registry
        self._reader = reader
        self._schemas = schemas or Schemas()

    def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        if request.operation not in ("CREATE", "UPDATE"):
            return allowed()
        objects = _objects(request, constants.TRAINJOB_KIND)
        if isinstance(objects, AdmissionResponse):
            return objects
        new, old = cast(TrainJob, objects[0]), cast("TrainJob | None", objects[1])

        def rules() -> AdmissionResponse:
            # An unregistered runtime kind is a field error of spec.runtimeRef (RuntimeRegistry.validate).
            return _verdict(self._registry.validate(old, new, self._reader))

        return _checked_shape(self._schemas, new, old, rules)


class TrainingRuntimeValidator(Handler):
    """The validating TrainingRuntime webhook: the replicated-job rules on CREATE only (as upstream)."""

    def __init__(self, *, schemas: Schemas | None = None) -> None:
        self._schemas = schemas or Schemas()

    def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        if request.operation != "CREATE":
            return allowed()
        objects = _objects(request, constants.TRAINING_RUNTIME_KIND)
        if isinstance(objects, AdmissionResponse):
            return objects
        new = objects[0]
        return _checked_shape(self._schemas, new, None, lambda: _verdict(validate_training_runtime(new)))


class ClusterTrainingRuntimeValidator(Handler):
    """The validating ClusterTrainingRuntime webhook: the rules on CREATE and UPDATE, a warning on CREATE."""

    def __init__(self, *, schemas: Schemas | None = None) -> None:
        self._schemas = schemas or Schemas()

    def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        if request.operation not in ("CREATE", "UPDATE"):
            return allowed()
        objects = _objects(request, constants.CLUSTER_TRAINING_RUNTIME_KIND)
        if isinstance(objects, AdmissionResponse):
            return objects
        new, old = objects
        return _checked_shape(
            self._schemas, new, old, lambda: _verdict(validate_cluster_training_runtime(new, old))
        )


_VALIDATION_KINDS = frozenset({TRAINJOB, TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME, JOBSET})
# Kinds whose cache miss the TrainJob validator confirms live: a runtime applied just before the TrainJob
# (one `kubectl apply -f` of both) may not be in the cache yet (`CacheReader.confirming_misses`).
RUNTIME_KINDS = frozenset({TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME})


def setup_webhooks(
    manager: Manager,
    registry: RuntimeRegistry,
    config: Configuration,
    *,
    reader: Reader | None = None,
    bind_address: str | None = None,
    cert_dir: str | os.PathLike[str] = DEFAULT_CERT_DIR,
    clock: Clock | None = None,
) -> WebhookServer:
    """Registers the four webhooks on a new `WebhookServer` and adds it to `manager` (before it runs).

    `bind_address` defaults to `config.webhook.host:port` with an empty host read as `127.0.0.1` (the entry
    point resolves it against the Pod IP first). `reader` defaults to a `CacheReader` over the manager's
    cache for the TrainJob, runtime and JobSet kinds, confirming a runtime's cache miss live (pass
    `setup_with_manager(...).reader.confirming_misses(RUNTIME_KINDS)` to share the controllers'). The
    runtime informers are created here, so the cache syncs them before the server starts.
    """
    cache = manager.cache
    # What validation reads: the runtimes, TrainJobs, and JobSets (runtime patches may change only while no
    # replicated job is active). The manager's RBAC grants these kinds list/watch, not get: read them cached.
    for gvk in _VALIDATION_KINDS:
        cache.get_informer(gvk, block_until_synced=False)
    if reader is None:
        from controller.cache.informer_cache import InformerCache  # noqa: PLC0415 - only for this default

        if not isinstance(cache, InformerCache):
            raise TypeError("setup_webhooks needs a reader, or the manager's InformerCache to build one")
        reader = CacheReader(cache, manager.client, cached=_VALIDATION_KINDS, narrowed=RUNTIME_KINDS)
    if bind_address is None:
        bind_address = f"{config.webhook.host or '127.0.0.1'}:{config.webhook.port}"
    tls = TLSOptions(
        min_version=config.tls.min_version,
        cipher_suites=tuple(config.tls.cipher_suites),
        next_protos=tuple(config.tls.next_protos),
    )
    server = WebhookServer(
        bind_address=bind_address,
        cert_dir=cert_dir,
        tls=tls,
        allow_all_interfaces=manager.options.allow_all_interfaces,
    )
    schemas = Schemas()  # one checker for the four, loaded when an object of the wrong shape first comes
    server.register(TRAINJOB_DEFAULTER_PATH, TrainJobDefaulter(clock or manager.clock, schemas=schemas))
    server.register(TRAINJOB_VALIDATOR_PATH, TrainJobValidator(registry, reader, schemas=schemas))
    server.register(TRAINING_RUNTIME_VALIDATOR_PATH, TrainingRuntimeValidator(schemas=schemas))
    server.register(CLUSTER_TRAINING_RUNTIME_VALIDATOR_PATH, ClusterTrainingRuntimeValidator(schemas=schemas))
    manager.add(server)
    manager.add_readyz_check("webhook-server", server.started_checker())
    _log.info("webhooks.registered", address=bind_address, cert_dir=str(cert_dir), paths=server.paths)
    return server
