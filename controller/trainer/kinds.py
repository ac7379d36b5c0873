"""The kinds the Trainer controllers read, watch and write, as `GVK`s.

Go origin: the scheme kubeflow/trainer's manager registers (`cmd/trainer-controller-manager/main.go`: core,
trainer `v1alpha1`, JobSet `v1alpha2`, scheduler-plugins `v1alpha1`, Volcano `v1beta1`).

The API strings themselves live in `runtime.api.constants`; this module only pairs them into the `GVK`
values `controller/` speaks.
"""

from __future__ import annotations

from controller.client.gvk import GVK
from runtime.api import constants

__all__ = [
    "CLUSTER_TRAINING_RUNTIME",
    "CONFIGMAP",
    "JOBSET",
    "SECRET",
    "TRAINING_RUNTIME",
    "TRAINJOB",
    "gvk_of",
]

TRAINJOB = GVK(constants.GROUP, constants.VERSION, constants.TRAINJOB_KIND)
TRAINING_RUNTIME = GVK(constants.GROUP, constants.VERSION, constants.TRAINING_RUNTIME_KIND)
CLUSTER_TRAINING_RUNTIME = GVK(constants.GROUP, constants.VERSION, constants.CLUSTER_TRAINING_RUNTIME_KIND)
JOBSET = GVK.from_api_version(constants.JOBSET_API_VERSION, constants.JOBSET_KIND)
CONFIGMAP = GVK("", "v1", "ConfigMap")
SECRET = GVK("", "v1", "Secret")


def gvk_of(api_version: str, kind: str) -> GVK:
    """The `GVK` of an `apiVersion` and `kind` pair as the runtime pipeline names kinds."""
    return GVK.from_api_version(api_version, kind)
