"""The Trainer API `trainer.kubeflow.org/v1alpha1` as TypedDicts: the one source of truth for code and CRDs.

Go origin: kubeflow/trainer `pkg/apis/trainer/v1alpha1/{trainjob,trainingruntime}_types.go` (v2.3.0). Keys are
the wire names (camelCase). Validation is written as `Annotated[...]` markers (`runtime.api.markers`) where Go
writes `+kubebuilder` comments; type-level markers sit in `@schema(...)`. The string literal under a field
(its attribute docstring) is the field's description in the CRD, which `kubectl explain` prints; a class
docstring describes its type. Both are written for users of the API.

Guarantees:
- `hack/gen-crds.py` walks these TypedDicts and emits `config/crd/*.yaml`; a test fails when the committed
  YAML drifts from what these definitions produce, another walks both to check they agree, and a third
  compares every validation keyword with upstream v2.3.0's CRDs.
- The schema validation is upstream v2.3.0's, no stricter and no looser (docs/compatibility.md). Nonsense
  that upstream's schema accepts (`spec.trainer.numNodes: 0`, `numProcPerNode: 0`) is refused by the
  TrainJob validation (`runtime.core`), with a field error.
- Required-ness follows Go's `+required`/`+optional` markers (not JSON `omitempty`): a key wrapped in
  `Required[...]` is in the schema's `required` list. The API server applies the `Default(...)` markers; for
  objects that never went through an API server, read through `runtime.api.views`, which applies them too.
- Objects are plain dicts decoded from JSON; unknown keys survive. Nothing here validates at run time.

Deliberately missing: the `*List` kinds (lists are plain dicts), deep-copy helpers, and `OptimizationJob`
(only a proposal in v2.3.0: no Go type, no CRD). `MPIImplementation` keeps Go's `Intel` and `MPICH` as type
values, but the schema's enum allows only `OpenMPI` and `""`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Required, TypedDict

from runtime.api import constants
from runtime.api.core import (
    Affinity,
    Condition,
    EnvList,
    JobSetSpec,
    LocalObjectReference,
    ObjectMeta,
    ObjectMetaFull,
    PodSchedulingGate,
    PodSecurityContext,
    ResourceRequirements,
    SecurityContext,
    Toleration,
    Volume,
    VolumeMount,
)
from runtime.api.markers import (
    CEL,
    Default,
    Enum,
    Immutable,
    Int32,
    Int64,
    Items,
    ListType,
    Maximum,
    MaxItems,
    MaxLength,
    Minimum,
    MinItems,
    MinLength,
    MinProperties,
    PrinterColumn,
    Resource,
    Time,
    schema,
)

__all__ = [
    "ClusterTrainingRuntime",
    "ContainerPatch",
    "CoschedulingPodGroupPolicySource",
    "DatasetInitializer",
    "EnvInjection",
    "EnvInjectionTarget",
    "FluxMLPolicySource",
    "Initializer",
    "JAXMLPolicySource",
    "JobSetSpecPatch",
    "JobSetTemplatePatch",
    "JobSetTemplateSpec",
    "JobSpecPatch",
    "JobStatus",
    "JobTemplatePatch",
    "MLPolicy",
    "MPIImplementation",
    "MPIMLPolicySource",
    "Metric",
    "ModelInitializer",
    "NetworkTopologySpec",
    "PodGroupPolicy",
    "PodSpecPatch",
    "PodTemplatePatch",
    "ReplicatedJobPatch",
    "RuntimePatch",
    "RuntimeRef",
    "TorchMLPolicySource",
    "TrainJob",
    "TrainJobSpec",
    "TrainJobStatus",
    "Trainer",
    "TrainerStatus",
    "TrainingRuntime",
    "TrainingRuntimeSpec",
    "TrainingRuntimeSpecPatch",
    "UpdateTrainJobStatusRequest",
    "VolcanoPodGroupPolicySource",
    "XGBoostMLPolicySource",
]

# Shapes used more than once.
Name253 = Annotated[str, MinLength(1), MaxLength(253)]
StorageUri = Annotated[
    str,
    MaxLength(2048),
    CEL(
        "self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')",
        "storageUri may be empty, or it must be a valid URI (scheme://...)",
    ),
]
StringList = Annotated[list[str], ListType("atomic"), MaxItems(128), Items(MaxLength(1048576))]
"""Container `command`/`args`: atomic, at most 128 items of at most 1 MiB each."""


# ---------------------------------------------------------------------------------------------------------
# TrainJob


class RuntimeRef(TypedDict, total=False):
    """Which TrainingRuntime or ClusterTrainingRuntime the TrainJob is built from."""

    name: Required[Name253]
    """Name of the runtime. A TrainingRuntime must be in the TrainJob's own namespace; a
    ClusterTrainingRuntime serves every namespace."""
    apiGroup: Annotated[str, Default(constants.GROUP), MaxLength(253)]
    """API group of the runtime. Defaults to `trainer.kubeflow.org`, the only group the controller serves."""
    kind: Annotated[str, Default(constants.CLUSTER_TRAINING_RUNTIME_KIND), MaxLength(253)]
    """Kind of the runtime: `ClusterTrainingRuntime` (the default) or `TrainingRuntime`."""


class DatasetInitializer(TypedDict, total=False):
    """Settings for the dataset initializer: they apply to the replicated job of the runtime labelled
    `trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer`."""

    storageUri: StorageUri
    """Where to fetch the dataset from: empty, or a URI with a scheme (for example `hf://org/name` or
    `s3://bucket/path`). Given to the initializer container as `STORAGE_URI`."""
    env: EnvList
    """Environment variables for the dataset initializer container, merged over the runtime's by name."""
    secretRef: LocalObjectReference
    """A Secret in the TrainJob's namespace with the credentials needed to download the dataset."""


class ModelInitializer(TypedDict, total=False):
    """Settings for the model initializer: they apply to the replicated job of the runtime labelled
    `trainer.kubeflow.org/trainjob-ancestor-step: model-initializer`."""

    storageUri: StorageUri
    """Where to fetch the pre-trained model from: empty, or a URI with a scheme (for example
    `hf://org/name`). Given to the initializer container as `STORAGE_URI`."""
    env: EnvList
    """Environment variables for the model initializer container, merged over the runtime's by name."""
    secretRef: LocalObjectReference
    """A Secret in the TrainJob's namespace with the credentials needed to download the model."""


class Initializer(TypedDict, total=False):
    """Preparation steps that run before training: fetching (and pre-processing) the dataset and the
    pre-trained model into the runtime's shared volume."""

    dataset: DatasetInitializer
    """How to initialize the dataset."""
    model: ModelInitializer
    """How to initialize the pre-trained model."""


class Trainer(TypedDict, total=False):
    """Settings for the training step. They override the `node` container of the runtime's replicated job
    labelled `trainer.kubeflow.org/trainjob-ancestor-step: trainer`."""

    image: Annotated[str, MaxLength(500)]
    """Container image of the training container; replaces the runtime's image."""
    command: StringList
    """Entrypoint of the training container; replaces the runtime's command."""
    args: StringList
    """Arguments to the entrypoint of the training container; replace the runtime's arguments."""
    env: EnvList
    """Environment variables for the training container, merged over the runtime's by name. Names the ML
    policy sets itself (such as `PET_*` for torch) are refused."""
    numNodes: Int32
    """Number of training nodes (pods of the training job); overrides the runtime's `mlPolicy.numNodes`.
    Must be at least 1: the TrainJob validation refuses 0 and negative values."""
    resourcesPerNode: ResourceRequirements
    """Compute resources for each training node, merged into the training container's resources. The GPU
    count here also decides the default number of processes per node for some frameworks."""
    numProcPerNode: Int32
    """Number of processes (workers, MPI slots) on each training node. Without it, torch uses `auto` (one
    per GPU, else one per CPU) and MPI the runtime's `mlPolicy.mpi.numProcPerNode`. Must be at least 1: the
    TrainJob validation refuses 0 and negative values."""


class ContainerPatch(TypedDict, total=False):
    """A patch for one container (or init container) of the runtime's pod template, matched by name."""

    name: Required[Name253]
    """Name of the container to patch; the runtime's replicated job must have a container (or init
    container) of that name."""
    env: EnvList
    """Environment variables merged over the container's by name. Not allowed for the containers `node`,
    `dataset-initializer` and `model-initializer`: use `spec.trainer` and `spec.initializer` for those."""
    volumeMounts: Annotated[list[VolumeMount], ListType("map", ("name",)), MaxItems(128)]
    """Volumes to mount into the container, merged over the container's mounts by name."""
    securityContext: SecurityContext
    """Security options for the container, merged over the runtime's."""


class PodSpecPatch(TypedDict, total=False):
    """The pod spec fields a runtime patch may set. The scheduling fields (node selector, affinity,
    tolerations, scheduling gates) stay mutable, so a queueing system can change them while the TrainJob is
    suspended; the others cannot change once written."""

    serviceAccountName: Annotated[str, MaxLength(253), Immutable()]
    """Service account for the pods."""
    volumes: Annotated[list[Volume], ListType("map", ("name",)), MaxItems(128), Immutable()]
    """Volumes added to the pods, merged over the runtime's volumes by name."""
    initContainers: Annotated[list[ContainerPatch], ListType("map", ("name",)), MaxItems(64), Immutable()]
    """Patches for init containers of the pods, each matched by name."""
    containers: Annotated[list[ContainerPatch], ListType("map", ("name",)), MaxItems(64), Immutable()]
    """Patches for containers of the pods, each matched by name."""
    imagePullSecrets: Annotated[
        list[LocalObjectReference], ListType("map", ("name",)), MaxItems(64), Immutable()
    ]
    """Secrets in the TrainJob's namespace used to pull the pods' images."""
    securityContext: Annotated[PodSecurityContext, Immutable()]
    """Pod-level security options, merged over the runtime's."""
    nodeSelector: dict[str, str]
    """Node labels the pods must be scheduled onto, merged over the runtime's."""
    affinity: Affinity
    """Scheduling constraints for the pods."""
    tolerations: Annotated[list[Toleration], ListType("atomic"), MaxItems(128)]
    """Tolerations added to the pods."""
    schedulingGates: Annotated[list[PodSchedulingGate], ListType("map", ("name",)), MaxItems(16)]
    """Gates that keep the pods from being scheduled until removed."""
    terminationGracePeriodSeconds: Annotated[Int64, Minimum(0), Immutable()]
    """Seconds a pod is given to stop gracefully when it is deleted."""


class PodTemplatePatch(TypedDict, total=False):
    """A patch for the pod template of a replicated job."""

    metadata: ObjectMeta
    """Labels and annotations added to the pods (other metadata fields are ignored)."""
    spec: PodSpecPatch
    """The pod spec fields to patch."""


class JobSpecPatch(TypedDict, total=False):
    """A patch for the Job spec of a replicated job."""

    template: PodTemplatePatch
    """The patch for the Job's pod template."""


class JobTemplatePatch(TypedDict, total=False):
    """A patch for the Job template of a replicated job."""

    metadata: ObjectMeta
    """Labels and annotations added to the Jobs (other metadata fields are ignored)."""
    spec: JobSpecPatch
    """The Job spec fields to patch."""


class ReplicatedJobPatch(TypedDict, total=False):
    """A patch for one replicated job of the runtime's JobSet template, matched by name."""

    name: Required[Name253]
    """Name of the replicated job to patch; the runtime must have it."""
    template: JobTemplatePatch
    """The patch for the replicated job's Job template."""


class JobSetSpecPatch(TypedDict, total=False):
    """A patch for the JobSet spec: per replicated job only."""

    replicatedJobs: Annotated[list[ReplicatedJobPatch], ListType("map", ("name",)), MaxItems(100)]
    """Patches for replicated jobs, one per job name."""


class JobSetTemplatePatch(TypedDict, total=False):
    """A patch for the runtime's JobSet template."""

    metadata: ObjectMeta
    """Labels and annotations added to the JobSet (other metadata fields are ignored)."""
    spec: JobSetSpecPatch
    """The JobSet spec fields to patch."""


class TrainingRuntimeSpecPatch(TypedDict, total=False):
    """The parts of a runtime a patch may change."""

    template: JobSetTemplatePatch
    """The patch for the runtime's JobSet template."""


class RuntimePatch(TypedDict, total=False):
    """Changes one owner makes to the runtime for this TrainJob only, layered over the runtime's template
    in list order. Each owner (a user, a queueing system, an admission webhook) keeps its own entry."""

    manager: Required[Annotated[str, MinLength(1), MaxLength(253), Immutable()]]
    """Who owns this entry, as a domain-prefixed path such as `kueue.x-k8s.io/manager`; the key of the
    list."""
    time: Time
    """When the entry was last written; set by the admission webhook, for information only."""
    trainingRuntimeSpec: TrainingRuntimeSpecPatch
    """The patch for the (Cluster)TrainingRuntime's spec."""


class TrainJobSpec(TypedDict, total=False):
    """The desired state of a TrainJob."""

    runtimeRef: Required[Annotated[RuntimeRef, Immutable()]]
    """The runtime the TrainJob is built from. Immutable: later changes to the runtime itself do not affect
    an existing TrainJob either."""
    initializer: Annotated[Initializer, Immutable()]
    """Dataset and model initialization before training."""
    trainer: Annotated[Trainer, Immutable()]
    """Overrides for the training step: image, command, environment, nodes and resources."""
    runtimePatches: Annotated[list[RuntimePatch], ListType("map", ("manager",)), MaxItems(16)]
    """Patches to the runtime's JobSet template for this TrainJob, one entry per owner (`manager`)."""
    suspend: Annotated[bool, Default(False)]
    """Whether the TrainJob is suspended: its pods are deleted (or never created) until it is resumed.
    Defaults to false."""
    activeDeadlineSeconds: Annotated[Int64, Minimum(1), Immutable()]
    """How long, in seconds, the TrainJob may run before it is stopped and marked `Failed` with reason
    `DeadlineExceeded`. The clock starts at creation and restarts when the TrainJob is resumed."""
    managedBy: Annotated[
        str,
        Default(constants.MANAGED_BY_TRAINJOB_CONTROLLER),
        CEL(
            "self in ['trainer.kubeflow.org/trainjob-controller', 'kueue.x-k8s.io/multikueue']",
            "ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set",
        ),
        MaxLength(253),
        Immutable(),
    ]
    """Which controller reconciles the TrainJob: `trainer.kubeflow.org/trainjob-controller` (the default,
    this controller) or `kueue.x-k8s.io/multikueue`, in which case this controller leaves it alone."""


class JobStatus(TypedDict):
    """Counts of the Jobs of one replicated job, as JobSet reports them."""

    name: Name253
    """Name of the replicated job."""
    ready: Annotated[Int32, Minimum(0)]
    """Jobs whose ready and completed pods reach the pod count they expect."""
    succeeded: Annotated[Int32, Minimum(0)]
    """Jobs that completed successfully."""
    failed: Annotated[Int32, Minimum(0)]
    """Jobs that failed."""
    active: Annotated[Int32, Minimum(0)]
    """Jobs with at least one running or pending pod that is not being deleted."""
    suspended: Annotated[Int32, Minimum(0)]
    """Jobs that are suspended."""


class Metric(TypedDict):
    """One training metric reported by the trainer."""

    name: Annotated[str, MinLength(1), MaxLength(64)]
    """Name of the metric, such as `loss` or `eval_accuracy`."""
    value: Annotated[str, MinLength(1), MaxLength(64)]
    """Value of the metric, written as a string."""


@schema(CEL("has(self.lastUpdatedTime)", "lastUpdatedTime is required when trainerStatus is present"))
class TrainerStatus(TypedDict, total=False):
    """Progress the training step reports about itself (alpha; needs the feature gate TrainJobStatus)."""

    progressPercentage: Annotated[Int32, Minimum(0), Maximum(100)]
    """Estimated progress of the training, from 0 to 100; absent when unknown."""
    estimatedRemainingSeconds: Annotated[Int32, Minimum(0)]
    """Estimated seconds until training completes; absent when unknown."""
    metrics: Annotated[list[Metric], MaxItems(256), ListType("atomic")]
    """The latest training metrics."""
    lastUpdatedTime: Time
    """When this progress was reported."""


@schema(MinProperties(1))
class TrainJobStatus(TypedDict, total=False):
    """The observed state of a TrainJob."""

    conditions: Annotated[list[Condition], ListType("map", ("type",)), MaxItems(8)]
    """The TrainJob's conditions: `Suspended`, `Complete` and `Failed`. A TrainJob with `Complete` or
    `Failed` true is finished."""
    jobsStatus: Annotated[list[JobStatus], ListType("map", ("name",)), MaxItems(100)]
    """Job counts for each replicated job of the TrainJob's JobSet."""
    trainerStatus: TrainerStatus
    """Progress reported by the training step itself; absent until it reports (alpha; needs the feature
    gate TrainJobStatus)."""


class UpdateTrainJobStatusRequest(TypedDict, total=False):
    """The body of a progress report sent to the status server (not a resource)."""

    trainerStatus: TrainerStatus
    """The training step's progress."""


@schema(
    Resource(
        kind=constants.TRAINJOB_KIND,
        plural="trainjobs",
        singular="trainjob",
        list_kind="TrainJobList",
        status_subresource=True,
        printer_columns=(
            PrinterColumn("State", "string", ".status.conditions[-1:].type"),
            PrinterColumn("Age", "date", ".metadata.creationTimestamp"),
        ),
    ),
    CEL(
        "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
        "metadata.name must match RFC 1035 DNS label format",
    ),
    CEL("size(self.metadata.name) <= 63", "metadata.name must be no more than 63 characters"),
)
class TrainJob(TypedDict, total=False):
    """A training job: a reference to a (Cluster)TrainingRuntime plus the settings of this job. The
    controller turns it into a JobSet of the same name."""

    apiVersion: str
    kind: str
    metadata: ObjectMetaFull
    spec: TrainJobSpec
    """The desired state of the TrainJob."""
    status: TrainJobStatus
    """The observed state of the TrainJob, written by the controller."""


# ---------------------------------------------------------------------------------------------------------
# TrainingRuntime and ClusterTrainingRuntime


class EnvInjectionTarget(TypedDict):
    """The containers of one replicated job that also receive the `PET_*` variables."""

    jobName: Name253
    """Name of the replicated job."""
    containerNames: Annotated[
        list[str],
        ListType("set"),
        MinItems(1),
        MaxItems(8),
        Items(MaxLength(63)),
        CEL(
            "!self.exists(c, c == 'node')",
            "containerNames must not include the main node container because PET_* envs are always "
            "injected into it",
        ),
    ]
    """Names of containers (or init containers) in that job; `node` is not allowed, it always gets them."""


class EnvInjection(TypedDict, total=False):
    """Extra containers that receive the framework's environment variables."""

    targets: Annotated[list[EnvInjectionTarget], ListType("map", ("jobName",)), MaxItems(16)]
    """The replicated jobs, and their containers, that receive the variables; one entry per job."""


class TorchMLPolicySource(TypedDict, total=False):
    """PyTorch distributed training, launched with torchrun (`PET_*` environment variables)."""

    envInjection: EnvInjection
    """Containers besides `node` that also receive the `PET_*` variables (sidecars, init containers).
    Without it, only `node` gets them. With torchtune, targets still get `PET_MASTER_ADDR` and
    `PET_MASTER_PORT`."""


MPIImplementation = Literal["OpenMPI", "Intel", "MPICH", ""]


class MPIMLPolicySource(TypedDict, total=False):
    """MPI training: a launcher runs `mpirun` over the nodes, which it reaches over SSH with a generated
    key; a hostfile lists the nodes and their slots."""

    numProcPerNode: Annotated[Int32, Default(1)]
    """Processes per node: the slots of each node in the hostfile. Defaults to 1; `spec.trainer` may
    override it per TrainJob."""
    mpiImplementation: Annotated[MPIImplementation, Default("OpenMPI"), Enum("OpenMPI", "")]
    """The MPI implementation, which decides the hostfile format and environment. Only `OpenMPI` (the
    default) is supported."""
    sshAuthMountPath: Annotated[str, Default("/root/.ssh"), MaxLength(4096)]
    """Directory where the SSH keys are mounted in the launcher and node containers. Defaults to
    `/root/.ssh`."""
    runLauncherAsNode: Annotated[bool, Default(False)]
    """Whether the launcher also runs a training process, counting as one of the nodes. Defaults to
    false."""


class JAXMLPolicySource(TypedDict):
    """JAX distributed training. It has no settings."""


class XGBoostMLPolicySource(TypedDict):
    """XGBoost distributed training. It has no settings: each node runs one worker per GPU in its
    resources, or one worker using every CPU when it has no GPU."""


class FluxMLPolicySource(TypedDict, total=False):
    """HPC workloads run by the Flux Framework across the nodes."""

    numProcPerNode: Annotated[
        Int32, Default(1), CEL("self >= 1", "NumProcPerNode in fluxPolicy must be >= 1")
    ]
    """Processes per node. Defaults to 1."""


@schema(
    CEL(
        "[has(self.torch), has(self.mpi), has(self.jax), has(self.xgboost),has(self.flux)]"
        ".filter(x, x).size() <= 1",
        "Only one of the policy can be configured",
    )
)
class MLPolicy(TypedDict, total=False):
    """How the training is distributed: the number of nodes and at most one framework."""

    numNodes: Int32
    """Number of training nodes. Absent means 1; a TrainJob's `spec.trainer.numNodes` overrides it."""
    torch: TorchMLPolicySource
    """Distributed PyTorch (torchrun)."""
    mpi: MPIMLPolicySource
    """MPI (for example DeepSpeed over `mpirun`)."""
    flux: FluxMLPolicySource
    """The Flux Framework."""
    jax: JAXMLPolicySource
    """Distributed JAX."""
    xgboost: XGBoostMLPolicySource
    """Distributed XGBoost."""


class CoschedulingPodGroupPolicySource(TypedDict, total=False):
    """Gang scheduling with the coscheduling plugin of the Kubernetes scheduler-plugins. The PodGroup asks
    for all the TrainJob's pods at once."""

    scheduleTimeoutSeconds: Annotated[Int32, Default(60)]
    """Longest time, in seconds, the scheduler waits to place the whole group. Defaults to 60."""


class NetworkTopologySpec(TypedDict, total=False):
    """Where Volcano may place the pods in the network topology (its HyperNodes)."""

    mode: Annotated[Literal["hard", "soft"], Default("hard"), Enum("hard", "soft")]
    """`hard` (the default): the pods must fit within `highestTierAllowed`; `soft`: that is preferred."""
    highestTierAllowed: Annotated[int, Default(1)]
    """The highest HyperNode tier the pods may span. Defaults to 1."""


class VolcanoPodGroupPolicySource(TypedDict, total=False):
    """Gang scheduling with Volcano."""

    networkTopology: NetworkTopologySpec
    """Network-topology-aware placement; needs Volcano's network topology feature and HyperNodes."""


class PodGroupPolicy(TypedDict, total=False):
    """Gang scheduling: a PodGroup so that all the TrainJob's pods are scheduled together. Set one of the
    sources."""

    coscheduling: CoschedulingPodGroupPolicySource
    """Use the scheduler-plugins coscheduling plugin."""
    volcano: VolcanoPodGroupPolicySource
    """Use Volcano."""


@schema(MinProperties(1))
class JobSetTemplateSpec(TypedDict, total=False):
    """The JobSet a TrainJob becomes."""

    metadata: ObjectMeta
    """Labels and annotations for the JobSet. Its name and namespace are always the TrainJob's."""
    spec: JobSetSpec
    """The JobSet spec. The replicated jobs labelled `trainer.kubeflow.org/trainjob-ancestor-step`
    (`dataset-initializer`, `model-initializer`, `trainer`) are the ones a TrainJob's settings apply to."""


@schema(MinProperties(1))
class TrainingRuntimeSpec(TypedDict, total=False):
    """A blueprint for TrainJobs: how training is distributed, gang-scheduled and laid out as a JobSet."""

    mlPolicy: MLPolicy
    """The ML framework and the number of nodes."""
    podGroupPolicy: PodGroupPolicy
    """Gang scheduling of the TrainJob's pods."""
    template: JobSetTemplateSpec
    """The JobSet template every TrainJob on this runtime starts from."""


@schema(
    Resource(
        kind=constants.TRAINING_RUNTIME_KIND,
        plural="trainingruntimes",
        singular="trainingruntime",
        list_kind="TrainingRuntimeList",
    )
)
class TrainingRuntime(TypedDict, total=False):
    """A blueprint for TrainJobs in its own namespace, referenced from their `spec.runtimeRef`."""

    apiVersion: str
    kind: str
    metadata: ObjectMetaFull
    spec: TrainingRuntimeSpec
    """The runtime's blueprint."""


@schema(
    Resource(
        kind=constants.CLUSTER_TRAINING_RUNTIME_KIND,
        plural="clustertrainingruntimes",
        singular="clustertrainingruntime",
        list_kind="ClusterTrainingRuntimeList",
        scope="Cluster",
    )
)
class ClusterTrainingRuntime(TypedDict, total=False):
    """A blueprint for TrainJobs in any namespace, referenced from their `spec.runtimeRef`."""

    apiVersion: str
    kind: str
    metadata: ObjectMetaFull
    spec: TrainingRuntimeSpec
    """The runtime's blueprint."""


ROOT_KINDS: tuple[type[Any], ...] = (TrainJob, TrainingRuntime, ClusterTrainingRuntime)
"""The TypedDicts that are CRD roots, in the order the CRDs are generated."""
