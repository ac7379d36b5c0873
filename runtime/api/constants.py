"""The Trainer API's well-known strings and numbers: group, kinds, labels, names, conditions, defaults.

Go origin: kubeflow/trainer `pkg/apis/trainer/v1alpha1` (kinds, condition types and reasons) and
`pkg/constants/constants.go` (the API-level subset: labels, step and container names, messages, port).

Guarantees: every value is the exact upstream string (manifests, the Python SDK and existing clusters depend
on them); names keep the Go words in upper snake case.

Deliberately missing: plugin-private constants (MPI SSH key files, OpenMPI/Torch/XGBoost env names, Flux
volumes, torchtune recipes) live with their plugin in `runtime/plugins/`, not here.
"""

from __future__ import annotations

from typing import Final

# Group, version, kinds.
GROUP: Final = "trainer.kubeflow.org"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
TRAINJOB_KIND: Final = "TrainJob"
TRAINING_RUNTIME_KIND: Final = "TrainingRuntime"
CLUSTER_TRAINING_RUNTIME_KIND: Final = "ClusterTrainingRuntime"

# Kinds the TrainJob controller produces or reads, outside this group.
JOBSET_GROUP: Final = "jobset.x-k8s.io"
JOBSET_VERSION: Final = "v1alpha2"
JOBSET_API_VERSION: Final = f"{JOBSET_GROUP}/{JOBSET_VERSION}"
JOBSET_KIND: Final = "JobSet"
POD_GROUP_KIND: Final = "PodGroup"

# spec.managedBy values (the CRD allows exactly these two).
MANAGED_BY_TRAINJOB_CONTROLLER: Final = "trainer.kubeflow.org/trainjob-controller"
MANAGED_BY_MULTIKUEUE: Final = "kueue.x-k8s.io/multikueue"
MANAGED_BY_VALUES: Final = (MANAGED_BY_TRAINJOB_CONTROLLER, MANAGED_BY_MULTIKUEUE)

# Server-side apply field managers.
FIELD_MANAGER: Final = "trainer"
STATUS_SERVER_FIELD_MANAGER: Final = "trainer-status"

# Labels and annotations.
LABEL_TRAINJOB_ANCESTOR: Final = "trainer.kubeflow.org/trainjob-ancestor-step"
"""On a runtime's replicatedJobs[].template.metadata: which TrainJob step this job implements."""
LABEL_FRAMEWORK: Final = "trainer.kubeflow.org/framework"
"""On a runtime: the framework the Python SDK shows (torch, deepspeed, mlx, jax, xgboost, torchtune, flux)."""
LABEL_SUPPORT: Final = "trainer.kubeflow.org/support"
SUPPORT_DEPRECATED: Final = "deprecated"
LABEL_WEBHOOK_VALIDATION: Final = "trainer.kubeflow.org/webhook-validation"
WEBHOOK_VALIDATION_DISABLED: Final = "disabled"
LABEL_TRAINJOB_NAME: Final = "trainer.kubeflow.org/trainjob-name"
"""On the ConfigMaps and Secrets built for a TrainJob (value: its name), so a controller can watch and cache
only those (`Watch.label_selector`) instead of every ConfigMap and Secret of the cluster (trainer#3374)."""
RESOURCE_IN_USE_FINALIZER: Final = "trainer.kubeflow.org/resource-in-use"
"""Legacy (≤ v2.2) runtime finalizer; the runtime controllers only strip it."""
RUNTIME_DEPRECATION_POLICY_URL: Final = (
    "https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy"
)

# Ancestor steps (values of LABEL_TRAINJOB_ANCESTOR) and the fixed container and job names.
DATASET_INITIALIZER: Final = "dataset-initializer"
MODEL_INITIALIZER: Final = "model-initializer"
ANCESTOR_TRAINER: Final = "trainer"
ANCESTOR_STEPS: Final = (DATASET_INITIALIZER, MODEL_INITIALIZER, ANCESTOR_TRAINER)
NODE: Final = "node"
"""The trainer container name (and the usual trainer replicated job name)."""
LAUNCHER: Final = "launcher"
"""The MPI launcher replicated job name."""
INITIALIZER_VOLUME: Final = "initializer"
DATASET_MOUNT_PATH: Final = "/workspace/dataset"
MODEL_MOUNT_PATH: Final = "/workspace/model"
CONTAINER_TRAINER_PORT: Final = 29500
"""Default trainer (torch rendezvous) port."""
DEFAULT_JOB_REPLICAS: Final = 1

# The runtime snapshot ConfigMap: `<trainjob>` + suffix, data key RUNTIME_SNAPSHOT_KEY.
RUNTIME_SNAPSHOT_SUFFIX: Final = "-runtime-snapshot"
RUNTIME_SNAPSHOT_KEY: Final = "runtime"

# TrainJob condition types.
CONDITION_SUSPENDED: Final = "Suspended"
CONDITION_COMPLETE: Final = "Complete"
CONDITION_FAILED: Final = "Failed"

# TrainJob condition reasons and messages.
REASON_SUSPENDED: Final = "Suspended"
REASON_RESUMED: Final = "Resumed"
REASON_RUNTIME_NOT_SUPPORTED: Final = "TrainingRuntimeNotSupported"
REASON_DEADLINE_EXCEEDED: Final = "DeadlineExceeded"
MESSAGE_SUSPENDED: Final = "TrainJob is suspended"
MESSAGE_RESUMED: Final = "TrainJob is resumed"
MESSAGE_DEADLINE_EXCEEDED: Final = "TrainJob exceeded its active deadline"

# Condition status values (metav1.ConditionStatus).
CONDITION_TRUE: Final = "True"
CONDITION_FALSE: Final = "False"
CONDITION_UNKNOWN: Final = "Unknown"

# MPI implementation values.
MPI_IMPLEMENTATION_OPENMPI: Final = "OpenMPI"
MPI_IMPLEMENTATION_INTEL: Final = "Intel"
MPI_IMPLEMENTATION_MPICH: Final = "MPICH"

# Schema defaults the views apply to objects that did not go through an API server.
DEFAULT_MPI_SSH_AUTH_MOUNT_PATH: Final = "/root/.ssh"
DEFAULT_NUM_PROC_PER_NODE: Final = 1
DEFAULT_SCHEDULE_TIMEOUT_SECONDS: Final = 60
DEFAULT_NUM_NODES: Final = 1
"""mlPolicy.numNodes when absent (documented, not a schema default)."""
