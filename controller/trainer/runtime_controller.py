"""The TrainingRuntime and ClusterTrainingRuntime reconcilers: strip the legacy `resource-in-use` finalizer.

Go origin: kubeflow/trainer `pkg/controller/trainingruntime_controller.go` and
`clustertrainingruntime_controller.go` (v2.3.0, after "Remove Runtime Finalizers").

Guarantees:

- A runtime carrying the finalizer `trainer.kubeflow.org/resource-in-use` (written by Trainer ≤ v2.2) loses
  it through one JSON merge patch of `metadata.finalizers` (the other finalizers are kept, in order), with
  the object's `resourceVersion` as a precondition so a concurrent change of the list is never overwritten
  (a conflict is retried with backoff). Anything else: no request at all.
- So a runtime can be deleted while TrainJobs reference it: they keep running from their runtime snapshot.

Deliberately missing: the deletion protection of Trainer ≤ v2.2 (adding the finalizer while referenced).
"""

from __future__ import annotations

from controller.client.errors import NotFound
from controller.client.gvk import GVK
from controller.client.interfaces import Reader, Writer
from controller.controller.reconcile import DONE, Request, Result
from runtime.api import constants

__all__ = [
    "CLUSTER_TRAINING_RUNTIME_CONTROLLER",
    "TRAINING_RUNTIME_CONTROLLER",
    "RuntimeFinalizerReconciler",
]

TRAINING_RUNTIME_CONTROLLER = "trainingruntime_controller"
CLUSTER_TRAINING_RUNTIME_CONTROLLER = "clustertrainingruntime_controller"


class RuntimeFinalizerReconciler:
    """Removes `trainer.kubeflow.org/resource-in-use` from one runtime kind's objects."""

    __slots__ = ("_cache", "_client", "gvk")

    def __init__(self, gvk: GVK, *, cache: Reader, client: Writer) -> None:
        self.gvk = gvk
        self._cache = cache
        self._client = client

    def reconcile(self, request: Request) -> Result:
        try:
            runtime = self._cache.get(self.gvk, request.name, request.namespace or None)
        except NotFound:
            return DONE
        metadata = runtime.get("metadata") or {}
        finalizers = list(metadata.get("finalizers") or [])
        if constants.RESOURCE_IN_USE_FINALIZER not in finalizers:
            return DONE
        kept = [f for f in finalizers if f != constants.RESOURCE_IN_USE_FINALIZER]
        patch = {"metadata": {"finalizers": kept or None, "resourceVersion": metadata.get("resourceVersion")}}
        try:
            self._client.patch(self.gvk, request.name, patch, request.namespace or None)
        except NotFound:
            return DONE
        return DONE

    def __repr__(self) -> str:
        return f"<RuntimeFinalizerReconciler {self.gvk.kind}>"
