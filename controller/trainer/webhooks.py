"""The Trainer's admission webhooks: a mutating one for TrainJobs, validating ones for TrainJobs,
TrainingRuntimes and ClusterTrainingRuntimes, served by the manager's webhook server.

Go origin: kubeflow/trainer `pkg/webhooks` (`Setup`, `TrainJobDefaulter`, `TrainJobValidator`,
`TrainingRuntimeValidator`, `ClusterTrainingRuntimeValidator`) and controller-runtime's typed
`Defaulter`/`Validator` adapters (`admission/defaulter_custom.go`, `validator_custom.go`).

- `/mutate-trainer-kubeflow-org-v1alpha1-trainjob` (TrainJob CREATE, UPDATE): stamps
  `spec.runtimePatches[].time` (`runtime.core.defaulting`), answered as a JSON Patch.
- `/validate-trainer-kubeflow-org-v1alpha1-trainjob` (TrainJob CREATE, UPDATE):
  `RuntimeRegistry.validate(old, new, reader)`: the runtime exists, the plugins' checks; warnings for a
  deprecated ClusterTrainingRuntime.
- `/validate-trainer-kubeflow-org-v1alpha1-trainingruntime` (TrainingRuntime CREATE): the replicated-job
  rules (`runtime.core.runtime_rules`).
- `/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime` (ClusterTrainingRuntime CREATE, UPDATE):
  the same rules; a deprecation warning on CREATE.

Guarantees:

- A rejection is controller-runtime's `Denied` for a validator's error: `allowed: false`, `code: 403`,
  `reason: Forbidden`, the message Go's aggregate of the field errors prints (`<path>: Invalid value: <v>:
  <detail>`; several in `[a, b]`), warnings kept. A TrainJob whose `runtimeRef` names no registered runtime
  kind is denied with `unsupported runtime: <Kind>.<group>`, as upstream.
- Operations a webhook does not check (DELETE, CONNECT, a TrainingRuntime UPDATE) are allowed with
  `code: 200`. A CREATE or UPDATE without the object(s) it needs is `errored(400)`.
- Reads go through the `Reader` given (the manager's cache-backed `CacheReader`): an admission makes no API
  request for a cached kind. A read failure is a field error (`Internal error`), so the request is denied,
  never admitted unchecked.
- Q8 (upstream rejects every update of a TrainJob whose runtime was deleted): here an update is validated
  against the TrainJob's runtime snapshot ConfigMap when the runtime is gone (`Runtime.validate`); without a
  snapshot it is rejected as upstream.
- Handlers hold no lock and keep no state: any number of connection threads may call them at once.

`setup_webhooks` registers the four handlers on a `WebhookServer` (HTTPS on the configured port, certificates
from the cert dir, `tls` options of the Configuration), adds it to the manager as a Runnable that runs on
every replica, and adds the readiness check `webhook-server` (certificates present, server answering).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, cast

import structlog

from controller.clock import REAL_CLOCK, Clock
from controller.manager import Manager
from controller.tlsconfig import TLSOptions
from controller.trainer.config import Configuration
from controller.trainer.kinds import CLUSTER_TRAINING_RUNTIME, JOBSET, TRAINING_RUNTIME, TRAINJOB
from controller.trainer.reader import CacheReader
from controller.webhook import (
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
from runtime.api.v1alpha1 import TrainJob
from runtime.core import RuntimeRegistry, UnsupportedRuntimeError
from runtime.core.defaulting import stamp_runtime_patch_times
from runtime.core.runtime_rules import validate_cluster_training_runtime, validate_training_runtime
from runtime.framework import Reader, Validation

__all__ = [
    "CLUSTER_TRAINING_RUNTIME_VALIDATOR_PATH",
    "TRAINING_RUNTIME_VALIDATOR_PATH",
    "TRAINJOB_DEFAULTER_PATH",
    "TRAINJOB_VALIDATOR_PATH",
    "ClusterTrainingRuntimeValidator",
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
        return denied(aggregate_message([str(e) for e in validation.errors])).with_warnings(
            *validation.warnings
        )
    return allowed().with_warnings(*validation.warnings)


def _objects(
    request: AdmissionRequest,
) -> tuple[Mapping[str, Any], Mapping[str, Any] | None] | AdmissionResponse:
    """(new, old) for CREATE (old None) and UPDATE, or the error answer when the review lacks one."""
    if request.object is None:
        return errored(400, f"request.object is required for {request.operation}")
    if request.operation == "UPDATE":
        if request.old_object is None:
            return errored(400, "request.oldObject is required for UPDATE")
        return request.object, request.old_object
    return request.object, None


class TrainJobDefaulter(Handler):
    """The mutating TrainJob webhook: `spec.runtimePatches[].time` (rules in `runtime.core.defaulting`)."""

    def __init__(self, clock: Clock = REAL_CLOCK) -> None:
        self._clock = clock

    def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        if request.operation not in ("CREATE", "UPDATE"):
            return allowed()
        objects = _objects(request)
        if isinstance(objects, AdmissionResponse):
            return objects
        new, old = objects
        defaulted = stamp_runtime_patch_times(new, old, self._clock.now())
        return patched(json_patch(new, defaulted))


class TrainJobValidator(Handler):
    """The validating TrainJob webhook: `RuntimeRegistry.validate` over the given reader."""

    def __init__(self, registry: RuntimeRegistry, reader: Reader) -> None:
        self._registry = registry
        self._reader = reader

    def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        if request.operation not in ("CREATE", "UPDATE"):
            return allowed()
        objects = _objects(request)
        if isinstance(objects, AdmissionResponse):
            return objects
        new, old = cast(TrainJob, objects[0]), cast("TrainJob | None", objects[1])
        try:
            self._registry.runtime_for(new)
        except UnsupportedRuntimeError as exc:
            return denied(str(exc))
        return _verdict(self._registry.validate(old, new, self._reader))


class TrainingRuntimeValidator(Handler):
    """The validating TrainingRuntime webhook: the replicated-job rules on CREATE only (as upstream)."""

    def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        if request.operation != "CREATE":
            return allowed()
        objects = _objects(request)
        if isinstance(objects, AdmissionResponse):
            return objects
        return _verdict(validate_training_runtime(objects[0]))


class ClusterTrainingRuntimeValidator(Handler):
    """The validating ClusterTrainingRuntime webhook: the rules on CREATE and UPDATE, a warning on CREATE."""

    def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        if request.operation not in ("CREATE", "UPDATE"):
            return allowed()
        objects = _objects(request)
        if isinstance(objects, AdmissionResponse):
            return objects
        new, old = objects
        return _verdict(validate_cluster_training_runtime(new, old))


_VALIDATION_KINDS = frozenset({TRAINJOB, TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME, JOBSET})


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
    cache for the TrainJob, runtime and JobSet kinds (pass `setup_with_manager(...).reader` to share the
    controllers'). The runtime informers are created here, so the cache syncs them before the server starts.
    """
    cache = manager.cache
    # What validation reads: the runtimes, TrainJobs, and JobSets (runtime patches may change only while no
    # replicated job is active). The manager's RBAC grants these kinds list/watch, not get: read them cached.
    for gvk in _VALIDATION_KINDS:
        cache.get_informer(gvk, block_until_synced=False)
    if reader is None:
        from controller.cache import InformerCache  # noqa: PLC0415 - only needed for this default

        if not isinstance(cache, InformerCache):
            raise TypeError("setup_webhooks needs a reader, or the manager's InformerCache to build one")
        reader = CacheReader(cache, manager.client, cached=_VALIDATION_KINDS)
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
    server.register(TRAINJOB_DEFAULTER_PATH, TrainJobDefaulter(clock or manager.clock))
    server.register(TRAINJOB_VALIDATOR_PATH, TrainJobValidator(registry, reader))
    server.register(TRAINING_RUNTIME_VALIDATOR_PATH, TrainingRuntimeValidator())
    server.register(CLUSTER_TRAINING_RUNTIME_VALIDATOR_PATH, ClusterTrainingRuntimeValidator())
    manager.add(server)
    manager.add_readyz_check("webhook-server", server.started_checker())
    _log.info("webhooks.registered", address=bind_address, cert_dir=str(cert_dir), paths=server.paths)
    return server
