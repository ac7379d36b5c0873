"""The Trainer's field indexes: TrainJobs by the runtime they reference.

Go origin: kubeflow/trainer `pkg/runtime/indexer/indexer.go` (`TrainJobRuntimeRefKey`,
`TrainJobClusterRuntimeRefKey` and their index functions); the index machinery is
`controller.indexers.index_field` (controller-runtime `IndexField`).

Guarantees:

- `TRAINJOB_RUNTIME_REF` (`.spec.runtimeRef.kind=trainingRuntime`) files a TrainJob under its
  `spec.runtimeRef.name` when it references a TrainingRuntime of `trainer.kubeflow.org`;
  `TRAINJOB_CLUSTER_RUNTIME_REF` (`.spec.runtimeRef.kind=clusterTrainingRuntime`) when it references a
  ClusterTrainingRuntime. Unset kind and group mean the CRD defaults (ClusterTrainingRuntime,
  `trainer.kubeflow.org`), as the API server fills them in.
- Values are keyed globally as well as per namespace (`controller.indexers`), so a ClusterTrainingRuntime
  finds its TrainJobs in every namespace with one lookup, and a TrainingRuntime those of its own namespace.
- `trainjobs_for_runtime` answers "which TrainJobs reference this runtime" from the cache, without a list
  of every TrainJob.

Deliberately missing: upstream's runtimeClassName indexes on the runtimes (the RuntimeClass handler of the
PodGroup plugins reads the runtimes from the cache instead: there are few runtimes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.cache.informer_cache import InformerCache
from controller.indexers import index_field
from controller.trainer.kinds import TRAINJOB
from runtime.api import constants
from runtime.api.views import ObjectView, TrainJobView

__all__ = [
    "TRAINJOB_CLUSTER_RUNTIME_REF",
    "TRAINJOB_RUNTIME_REF",
    "register_indexes",
    "trainjobs_for_runtime",
]

TRAINJOB_RUNTIME_REF = ".spec.runtimeRef.kind=trainingRuntime"
TRAINJOB_CLUSTER_RUNTIME_REF = ".spec.runtimeRef.kind=clusterTrainingRuntime"


def _runtime_ref(kind: str) -> Any:
    def index(obj: Mapping[str, Any]) -> list[str]:
        view = TrainJobView(obj)
        if view.runtime_ref_api_group != constants.GROUP or view.runtime_ref_kind != kind:
            return []
        name = view.runtime_ref_name
        return [name] if name else []

    return index


def register_indexes(cache: InformerCache) -> None:
    """Register both TrainJob indexes on the cache (before it starts)."""
    index_field(cache, TRAINJOB, TRAINJOB_RUNTIME_REF, _runtime_ref(constants.TRAINING_RUNTIME_KIND))
    index_field(
        cache, TRAINJOB, TRAINJOB_CLUSTER_RUNTIME_REF, _runtime_ref(constants.CLUSTER_TRAINING_RUNTIME_KIND)
    )


def trainjobs_for_runtime(cache: InformerCache, runtime: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The cached TrainJobs that reference `runtime` (a TrainingRuntime or ClusterTrainingRuntime)."""
    view = ObjectView(runtime)
    if view.kind == constants.TRAINING_RUNTIME_KIND:
        return cache.list(TRAINJOB, view.namespace, index=(TRAINJOB_RUNTIME_REF, view.name))
    if view.kind == constants.CLUSTER_TRAINING_RUNTIME_KIND:
        return cache.list(TRAINJOB, None, index=(TRAINJOB_CLUSTER_RUNTIME_REF, view.name))
    return []
