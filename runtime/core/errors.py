"""The errors of the core runtimes, named by what the controller should do with them.

Go origin: the `errors.New`/`fmt.Errorf` values of kubeflow/trainer `pkg/runtime/core` and
`pkg/controller/trainjob_controller.go` (`unsupported runtime: <key>`), with their exact texts.

Guarantees:
- `PermanentError`s cannot go away by retrying: the fields they depend on are immutable. The controller
  records them (event, condition) and does not requeue.
- `InvalidSnapshotError` (a snapshot ConfigMap whose content is not this TrainJob's runtime) and
  `UnbuildableRuntimeError` are permanent too, though the runtime is not immutable: the object the TrainJob is
  built from (its runtime snapshot, or the live runtime before there is one) holds a value the pipeline
  does not build (`runtime.buildable`); the TrainJob fails naming the object and the field rather than
  being retried with only events while nobody looks (a snapshot, the TrainJob's own copy, changes only if
  someone edits it by hand).
- Every other error here may clear up (a runtime created later, a snapshot fixed by hand): requeue with
  backoff, as upstream does.

Deliberately missing: error codes; the messages are the compatibility surface (events show them).
"""

from __future__ import annotations

from runtime.echo import elide
from runtime.framework.errors import FrameworkError
from runtime.framework.validation import FieldError, error_lines

__all__ = [
    "InvalidRuntimeError",
    "InvalidSnapshotError",
    "InvalidTrainJobError",
    "PermanentError",
    "RuntimeNotFoundError",
    "SnapshotError",
    "UnbuildableRuntimeError",
    "UnsupportedRuntimeError",
]


class PermanentError(FrameworkError):
    """Retrying cannot help until the TrainJob changes (and the fields involved are immutable)."""


class UnsupportedRuntimeError(PermanentError):
    """`spec.runtimeRef` names a kind no runtime is registered for (message `unsupported runtime: <key>`).

    The controller persists `Failed=True` (reason `TrainingRuntimeNotSupported`) and stops; see
    `RuntimeRegistry.next_status` (upstream sets it in memory but never persists it).
    """

    def __init__(self, key: str) -> None:
        super().__init__(f"unsupported runtime: {elide(key, 507)}")  # the kind and group: 253 each, and a dot
        self.key = key


class InvalidTrainJobError(PermanentError):
    """The TrainJob fails a check the webhook should have made (it was created without the webhook)."""

    def __init__(self, errors: tuple[FieldError, ...]) -> None:
        super().__init__("invalid TrainJob: " + "; ".join(error_lines(errors)))
        self.errors = errors


class UnbuildableRuntimeError(PermanentError):
    """The runtime object the TrainJob is built from holds a value the pipeline does not build: `source`
    names the object (`trainingruntimes.trainer.kubeflow.org "torch"`, or its snapshot ConfigMap), `error`
    the field of it, or what is wrong with the whole object (a string: its snapshot would be larger than a
    ConfigMap holds). The controller fails the TrainJob (reason `RuntimeNotBuildable`)."""

    def __init__(self, source: str, error: FieldError | str) -> None:
        super().__init__(f"{source} cannot be built: {error}")
        self.source = source
        self.error = error


class InvalidRuntimeError(FrameworkError):
    """The referenced runtime exists but Go's typed decoding would refuse it (a field of the wrong JSON type,
    a quantity that does not parse: stored under an older CRD, or edited in etcd), so nothing is built from
    it; it may be fixed, so retry. (Upstream's typed cache cannot decode such an object at all.)"""


class RuntimeNotFoundError(FrameworkError):
    """The referenced runtime does not exist and the TrainJob has no runtime snapshot yet."""


class SnapshotError(FrameworkError):
    """The runtime snapshot ConfigMap exists but is not a valid snapshot of this TrainJob's runtime (or it
    could not be read: retry)."""


class InvalidSnapshotError(SnapshotError, PermanentError):
    """The TrainJob's own snapshot ConfigMap (it is the controller) holds no snapshot of its runtime (text
    that does not parse, fields of the wrong type, another runtime). The snapshot lives in the tenant's
    namespace and is never rewritten, so retrying cannot help: the controller fails the TrainJob (reason
    `RuntimeNotBuildable`) with upstream's message, which names the field when one is wrong."""
