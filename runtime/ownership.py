"""What a TrainJob puts on the objects it owns: the controller owner reference, the metadata of the ConfigMaps
and Secrets built for it, and the narrowed watches that find them again.

Go origin: the `WithOwnerReferences(...)` apply configurations repeated in kubeflow/trainer's plugins and
`pkg/runtime/core` (`apiVersion: trainer.kubeflow.org/v1alpha1`, `kind: TrainJob`, `controller` and
`blockOwnerDeletion` true), and the `trainer.kubeflow.org/trainjob-name` label that narrows the controller's
ConfigMap and Secret caches (trainer#3374).

Guarantees: every call returns fresh dicts; the label in `owned_object_metadata` is the one
`owned_object_watches` selects on, so whatever a plugin or the snapshot builds with the first is seen by the
second. Used by the plugins and by `runtime.core.snapshot`, which is why it sits beside them rather than in
either.

Deliberately missing: owner references other than the TrainJob's controller reference (nothing here builds
objects owned by anything else).
"""

from __future__ import annotations

from typing import Any

from runtime.api import constants
from runtime.api.v1alpha1 import TrainJob
from runtime.api.views import TrainJobView
from runtime.framework.extensions import Watch

__all__ = ["owned_object_metadata", "owned_object_watches", "owner_reference"]


def owner_reference(trainjob: TrainJob) -> dict[str, Any]:
    """The TrainJob as controller owner: put it on every object the TrainJob controller creates."""
    view = TrainJobView(trainjob)
    return {
        "apiVersion": constants.API_VERSION,
        "kind": constants.TRAINJOB_KIND,
        "name": view.name,
        "uid": view.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def owned_object_metadata(trainjob: TrainJob, name: str) -> dict[str, Any]:
    """The metadata of a ConfigMap or Secret built for the TrainJob: `name` in its namespace, controlled by
    it, labelled `trainer.kubeflow.org/trainjob-name: <trainjob>` (what the controller's narrowed ConfigMap
    and Secret watches select: `Watch.label_selector`)."""
    view = TrainJobView(trainjob)
    return {
        "name": name,
        "namespace": view.namespace,
        "labels": {constants.LABEL_TRAINJOB_NAME: view.name},
        "ownerReferences": [owner_reference(trainjob)],
    }


def owned_object_watches() -> list[Watch]:
    """The watches that go with `owned_object_metadata`: ConfigMaps and Secrets a TrainJob controls, only
    those with the label, so the controller never caches the cluster's other ConfigMaps and Secrets
    (trainer#3374). Equal values from several plugins are one watch (`Framework.watches`)."""
    return [
        Watch.owned("v1", "ConfigMap", label_selector=constants.LABEL_TRAINJOB_NAME),
        Watch.owned("v1", "Secret", label_selector=constants.LABEL_TRAINJOB_NAME),
    ]
