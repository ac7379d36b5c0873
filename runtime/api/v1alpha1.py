"""The Trainer API `trainer.kubeflow.org/v1alpha1` as TypedDicts: the one source of truth for code and CRDs.

Go origin: kubeflow/trainer `pkg/apis/trainer/v1alpha1/{trainjob,trainingruntime,optimizationjob}_types.go`
(v2.3). Keys are the wire names (camelCase). Validation is written as `Annotated[...]` markers
(`runtime.api.markers`) where Go writes `+kubebuilder` comments; type-level markers sit in `@schema(...)`.

Guarantees:
- `hack/gen-crds.py` walks these TypedDicts and emits `config/crd/*.yaml`; a test fails when the committed
  YAML drifts from what these definitions produce, and another walks both to check they agree.
- Required-ness follows Go's `+required`/`+optional` markers (not JSON `omitempty`): a key wrapped in
  `Required[...]` is in the schema's `required` list. The API server applies the `Default(...)` markers; for
  objects that never went through an API server, read through `runtime.api.views`, which applies them too.
- Objects are plain dicts decoded from JSON; unknown keys survive. Nothing here validates at run time.

Deliberately missing: the `*List` kinds (lists are plain dicts), deep-copy helpers. `MPIImplementation`
keeps Go's `Intel` and `MPICH` as type values, but the schema's enum allows only `OpenMPI` and `""`.
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
    ExactlyOneOf,
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
    Pattern,
    PrinterColumn,
    Resource,
    Time,
    schema,
)

__all__ = [
    "CategoricalSpace",
    "ClusterTrainingRuntime",
    "ContainerPatch",
    "CoschedulingPodGroupPolicySource",
    "DatasetInitializer",
    "EnvInjection",
    "EnvInjectionTarget",
    "FluxMLPolicySource",
    "GridAlgorithm",
    "Initializer",
    "JAXMLPolicySource",
    "JobSetSpecPatch",
    "JobSetTemplatePatch",
    "JobSetTemplateSpec",
    "JobSpecPatch",
    "JobStatus",
    "JobTemplatePatch",
    "LogUniformSpace",
    "MLPolicy",
    "MPIImplementation",
    "MPIMLPolicySource",
    "Metric",
    "ModelInitializer",
    "NetworkTopologySpec",
    "Objective",
    "OptimizationJob",
    "OptimizationJobSpec",
    "OptimizationJobStatus",
    "Parameter",
    "ParameterAssignment",
    "PodGroupPolicy",
    "PodSpecPatch",
    "PodTemplatePatch",
    "RandomAlgorithm",
    "ReplicatedJobPatch",
    "Result",
    "RuntimePatch",
    "RuntimeRef",
    "SearchAlgorithm",
    "SearchSpace",
    "TorchMLPolicySource",
    "TrainJob",
    "TrainJobSpec",
    "TrainJobStatus",
    "TrainJobTemplateSpec",
    "Trainer",
    "TrainerStatus",
    "TrainingRuntime",
    "TrainingRuntimeSpec",
    "TrainingRuntimeSpecPatch",
    "UniformSpace",
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
    """The (Cluster)TrainingRuntime a TrainJob runs on."""

    name: Required[Name253]
    apiGroup: Annotated[str, Default(constants.GROUP), MaxLength(253)]
    kind: Annotated[str, Default(constants.CLUSTER_TRAINING_RUNTIME_KIND), MaxLength(253)]


class DatasetInitializer(TypedDict, total=False):
    """The dataset initializer: the replicated job labelled ancestor step `dataset-initializer`."""

    storageUri: StorageUri
    env: EnvList
    secretRef: LocalObjectReference


class ModelInitializer(TypedDict, total=False):
    """The model initializer: the replicated job labelled ancestor step `model-initializer`."""

    storageUri: StorageUri
    env: EnvList
    secretRef: LocalObjectReference


class Initializer(TypedDict, total=False):
    """Dataset and model initialization before training."""

    dataset: DatasetInitializer
    model: ModelInitializer


class Trainer(TypedDict, total=False):
    """Overrides for the `node` container of the replicated job labelled ancestor step `trainer`."""

    image: Annotated[str, MaxLength(500)]
    command: StringList
    args: StringList
    env: EnvList
    numNodes: Annotated[Int32, Minimum(0)]
    resourcesPerNode: ResourceRequirements
    numProcPerNode: Annotated[Int32, CEL("self >= 1", "numProcPerNode must be greater than or equal to 1")]


class ContainerPatch(TypedDict, total=False):
    """A patch for one container (or init container) of the runtime's pod template, matched by name."""

    name: Required[Name253]
    env: EnvList
    volumeMounts: Annotated[list[VolumeMount], ListType("map", ("name",)), MaxItems(128)]
    securityContext: SecurityContext


class PodSpecPatch(TypedDict, total=False):
    """The pod spec fields a runtime patch may set; the scheduling fields stay mutable for Kueue."""

    serviceAccountName: Annotated[str, MaxLength(253), Immutable()]
    volumes: Annotated[list[Volume], ListType("map", ("name",)), MaxItems(128), Immutable()]
    initContainers: Annotated[list[ContainerPatch], ListType("map", ("name",)), MaxItems(64), Immutable()]
    containers: Annotated[list[ContainerPatch], ListType("map", ("name",)), MaxItems(64), Immutable()]
    imagePullSecrets: Annotated[
        list[LocalObjectReference], ListType("map", ("name",)), MaxItems(64), Immutable()
    ]
    securityContext: Annotated[PodSecurityContext, Immutable()]
    nodeSelector: dict[str, str]
    affinity: Affinity
    tolerations: Annotated[list[Toleration], ListType("atomic"), MaxItems(128)]
    schedulingGates: Annotated[list[PodSchedulingGate], ListType("map", ("name",)), MaxItems(16)]
    terminationGracePeriodSeconds: Annotated[Int64, Minimum(0), Immutable()]


class PodTemplatePatch(TypedDict, total=False):
    """A patch for the pod template of a replicated job."""

    metadata: ObjectMeta
    spec: PodSpecPatch


class JobSpecPatch(TypedDict, total=False):
    """A patch for the Job spec of a replicated job."""

    template: PodTemplatePatch


class JobTemplatePatch(TypedDict, total=False):
    """A patch for the Job template of a replicated job."""

    metadata: ObjectMeta
    spec: JobSpecPatch


class ReplicatedJobPatch(TypedDict, total=False):
    """A patch for one replicated job of the runtime's JobSet template, matched by name."""

    name: Required[Name253]
    template: JobTemplatePatch


class JobSetSpecPatch(TypedDict, total=False):
    """A patch for the JobSet spec: per replicated job only."""

    replicatedJobs: Annotated[list[ReplicatedJobPatch], ListType("map", ("name",)), MaxItems(100)]


class JobSetTemplatePatch(TypedDict, total=False):
    """A patch for the runtime's JobSet template."""

    metadata: ObjectMeta
    spec: JobSetSpecPatch


class TrainingRuntimeSpecPatch(TypedDict, total=False):
    """The parts of a TrainingRuntimeSpec a runtime patch may change."""

    template: JobSetTemplatePatch


class RuntimePatch(TypedDict, total=False):
    """One owner's overlay on the runtime, keyed by `manager` (a domain-prefixed path)."""

    manager: Required[Annotated[str, MinLength(1), MaxLength(253), Immutable()]]
    time: Time
    trainingRuntimeSpec: TrainingRuntimeSpecPatch


class TrainJobSpec(TypedDict, total=False):
    """The desired state of a TrainJob."""

    runtimeRef: Required[Annotated[RuntimeRef, Immutable()]]
    initializer: Annotated[Initializer, Immutable()]
    trainer: Annotated[Trainer, Immutable()]
    runtimePatches: Annotated[list[RuntimePatch], ListType("map", ("manager",)), MaxItems(16)]
    suspend: Annotated[bool, Default(False)]
    activeDeadlineSeconds: Annotated[Int64, Minimum(1), Immutable()]
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


class JobStatus(TypedDict):
    """Counters of one replicated job, copied from the JobSet's `replicatedJobsStatus` (all always set)."""

    name: Name253
    ready: Annotated[Int32, Minimum(0)]
    succeeded: Annotated[Int32, Minimum(0)]
    failed: Annotated[Int32, Minimum(0)]
    active: Annotated[Int32, Minimum(0)]
    suspended: Annotated[Int32, Minimum(0)]


class Metric(TypedDict):
    """One training metric reported to the status server; the value is a string."""

    name: Annotated[str, MinLength(1), MaxLength(64)]
    value: Annotated[str, MinLength(1), MaxLength(64)]


@schema(CEL("has(self.lastUpdatedTime)", "lastUpdatedTime is required when trainerStatus is present"))
class TrainerStatus(TypedDict, total=False):
    """The trainer's own progress report (status server, feature gate TrainJobStatus)."""

    progressPercentage: Annotated[Int32, Minimum(0), Maximum(100)]
    estimatedRemainingSeconds: Annotated[Int32, Minimum(0)]
    metrics: Annotated[list[Metric], MaxItems(256), ListType("atomic")]
    lastUpdatedTime: Time


@schema(MinProperties(1))
class TrainJobStatus(TypedDict, total=False):
    """The observed state of a TrainJob."""

    conditions: Annotated[list[Condition], ListType("map", ("type",)), MaxItems(8)]
    jobsStatus: Annotated[list[JobStatus], ListType("map", ("name",)), MaxItems(100)]
    trainerStatus: TrainerStatus


class UpdateTrainJobStatusRequest(TypedDict, total=False):
    """The status server's request body (not a CRD)."""

    trainerStatus: TrainerStatus


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
    """A training job: a runtime reference plus the job-specific overrides."""

    apiVersion: str
    kind: str
    metadata: ObjectMetaFull
    spec: TrainJobSpec
    status: TrainJobStatus


# ---------------------------------------------------------------------------------------------------------
# TrainingRuntime and ClusterTrainingRuntime


class EnvInjectionTarget(TypedDict):
    """Containers of one replicated job that also receive the PET_* envs."""

    jobName: Name253
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


class EnvInjection(TypedDict, total=False):
    """Where to inject the PET_* envs besides the `node` container."""

    targets: Annotated[list[EnvInjectionTarget], ListType("map", ("jobName",)), MaxItems(16)]


class TorchMLPolicySource(TypedDict, total=False):
    """PyTorch distributed (torchrun) policy."""

    envInjection: EnvInjection


MPIImplementation = Literal["OpenMPI", "Intel", "MPICH", ""]


class MPIMLPolicySource(TypedDict, total=False):
    """MPI policy: a launcher plus nodes wired with SSH keys and a hostfile."""

    numProcPerNode: Annotated[Int32, Default(1), CEL("self >= 1", "NumProcPerNode in mpiPolicy must be >= 1")]
    mpiImplementation: Annotated[MPIImplementation, Default("OpenMPI"), Enum("OpenMPI", "")]
    sshAuthMountPath: Annotated[str, Default("/root/.ssh"), MaxLength(4096)]
    runLauncherAsNode: Annotated[bool, Default(False)]


class JAXMLPolicySource(TypedDict):
    """JAX distributed policy (no settings)."""


class XGBoostMLPolicySource(TypedDict):
    """XGBoost distributed policy (no settings; workers per node follow the GPUs)."""


class FluxMLPolicySource(TypedDict, total=False):
    """Flux Framework policy."""

    numProcPerNode: Annotated[
        Int32, Default(1), CEL("self >= 1", "NumProcPerNode in fluxPolicy must be >= 1")
    ]


@schema(
    CEL(
        "[has(self.torch), has(self.mpi), has(self.jax), has(self.xgboost),has(self.flux)]"
        ".filter(x, x).size() <= 1",
        "Only one of the policy can be configured",
    )
)
class MLPolicy(TypedDict, total=False):
    """The ML framework policy; at most one source may be set. `numNodes` absent means 1."""

    numNodes: Int32
    torch: TorchMLPolicySource
    mpi: MPIMLPolicySource
    flux: FluxMLPolicySource
    jax: JAXMLPolicySource
    xgboost: XGBoostMLPolicySource


class CoschedulingPodGroupPolicySource(TypedDict, total=False):
    """Gang scheduling with the scheduler-plugins coscheduling plugin."""

    scheduleTimeoutSeconds: Annotated[Int32, Default(60)]


class NetworkTopologySpec(TypedDict, total=False):
    """Volcano `scheduling.volcano.sh/v1beta1` NetworkTopologySpec."""

    mode: Annotated[Literal["hard", "soft"], Default("hard"), Enum("hard", "soft")]
    highestTierAllowed: Annotated[int, Default(1)]


class VolcanoPodGroupPolicySource(TypedDict, total=False):
    """Gang scheduling with Volcano."""

    networkTopology: NetworkTopologySpec


class PodGroupPolicy(TypedDict, total=False):
    """The gang-scheduling policy; one source by convention (not enforced by the schema)."""

    coscheduling: CoschedulingPodGroupPolicySource
    volcano: VolcanoPodGroupPolicySource


@schema(MinProperties(1))
class JobSetTemplateSpec(TypedDict, total=False):
    """The JobSet a TrainJob is rendered into; metadata labels and annotations go to the JobSet."""

    metadata: ObjectMeta
    spec: JobSetSpec


@schema(MinProperties(1))
class TrainingRuntimeSpec(TypedDict, total=False):
    """The shape shared by TrainingRuntime and ClusterTrainingRuntime."""

    mlPolicy: MLPolicy
    podGroupPolicy: PodGroupPolicy
    template: JobSetTemplateSpec


@schema(
    Resource(
        kind=constants.TRAINING_RUNTIME_KIND,
        plural="trainingruntimes",
        singular="trainingruntime",
        list_kind="TrainingRuntimeList",
    )
)
class TrainingRuntime(TypedDict, total=False):
    """A namespaced blueprint for TrainJobs in its namespace."""

    apiVersion: str
    kind: str
    metadata: ObjectMetaFull
    spec: TrainingRuntimeSpec


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
    """A cluster-wide blueprint for TrainJobs in any namespace."""

    apiVersion: str
    kind: str
    metadata: ObjectMetaFull
    spec: TrainingRuntimeSpec


# ---------------------------------------------------------------------------------------------------------
# OptimizationJob (API only: no controller, no webhook)

Double = Annotated[str, Pattern(r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$"), MaxLength(64)]
"""A decimal number written as a string."""
ParameterType = Annotated[Literal["Int", "Float"], Enum("Int", "Float")]


class Objective(TypedDict, total=False):
    """The metric to optimize."""

    metric: Required[Annotated[str, MinLength(1), MaxLength(64)]]
    direction: Annotated[Literal["Maximize", "Minimize"], Enum("Maximize", "Minimize"), Default("Minimize")]


class RandomAlgorithm(TypedDict, total=False):
    """Random search."""

    seed: Int64


class GridAlgorithm(TypedDict):
    """Grid search over categorical parameters."""


@schema(ExactlyOneOf(("random", "grid")))
class SearchAlgorithm(TypedDict, total=False):
    """How trials are chosen; exactly one algorithm."""

    random: RandomAlgorithm
    grid: GridAlgorithm


@schema(CEL("double(self.min) < double(self.max)", "min must be strictly less than max"))
class UniformSpace(TypedDict, total=False):
    """A uniform range."""

    min: Required[Annotated[Double, MinLength(1)]]
    max: Required[Annotated[Double, MinLength(1)]]
    type: Annotated[ParameterType, Default("Float")]


@schema(
    CEL("double(self.min) > 0.0", "min must be strictly greater than 0"),
    CEL("double(self.min) < double(self.max)", "min must be strictly less than max"),
)
class LogUniformSpace(TypedDict, total=False):
    """A log-uniform range."""

    min: Required[Annotated[Double, MinLength(1)]]
    max: Required[Annotated[Double, MinLength(1)]]
    type: Annotated[ParameterType, Default("Float")]


class CategoricalSpace(TypedDict):
    """A set of choices."""

    choices: Annotated[list[str], MinItems(1), MaxItems(100), Items(MaxLength(64)), ListType("set")]


@schema(ExactlyOneOf(("uniform", "logUniform", "categorical")))
class SearchSpace(TypedDict, total=False):
    """The space of one parameter; exactly one kind."""

    uniform: UniformSpace
    logUniform: LogUniformSpace
    categorical: CategoricalSpace


class Parameter(TypedDict):
    """A parameter to search."""

    name: Annotated[str, MinLength(1), MaxLength(64)]
    searchSpace: SearchSpace


class ParameterAssignment(TypedDict):
    """A parameter value chosen for a trial."""

    name: Annotated[str, MinLength(1), MaxLength(64)]
    value: Annotated[str, MinLength(1), MaxLength(64)]


class TrainJobTemplateSpec(TypedDict, total=False):
    """The TrainJob each trial runs."""

    metadata: Annotated[
        ObjectMeta,
        CEL("!has(self.name) && !has(self.namespace)", "name and namespace cannot be set in a template."),
    ]
    spec: Required[TrainJobSpec]


@schema(
    CEL("self == oldSelf", "OptimizationJobSpec is immutable and cannot be updated after creation"),
    CEL("self.parallelTrials <= self.numTrials", "parallelTrials cannot exceed numTrials"),
    CEL(
        "!has(self.searchAlgorithm.grid) || self.parameters.all(p, has(p.searchSpace.categorical))",
        "Grid search requires all parameters to be Categorical; Uniform and LogUniform are not supported.",
    ),
)
class OptimizationJobSpec(TypedDict, total=False):
    """A hyper-parameter search over TrainJobs."""

    objectives: Required[Annotated[list[Objective], ListType("map", ("metric",)), MinItems(1), MaxItems(1)]]
    searchAlgorithm: Annotated[SearchAlgorithm, Default({"random": {}})]
    parameters: Required[Annotated[list[Parameter], ListType("map", ("name",)), MinItems(1), MaxItems(100)]]
    numTrials: Annotated[Int32, Default(1), Minimum(1), Maximum(100)]
    parallelTrials: Annotated[Int32, Default(1), Minimum(1), Maximum(100)]
    trainJobTemplate: Required[TrainJobTemplateSpec]


class Result(TypedDict, total=False):
    """The best trial so far."""

    trainJobName: Required[Annotated[str, MinLength(1), MaxLength(63)]]
    parameters: Annotated[list[ParameterAssignment], ListType("map", ("name",)), MaxItems(100)]


class OptimizationJobStatus(TypedDict, total=False):
    """The observed state of an OptimizationJob."""

    conditions: Annotated[list[Condition], ListType("map", ("type",)), MaxItems(100)]
    result: Result


@schema(
    Resource(
        kind=constants.OPTIMIZATION_JOB_KIND,
        plural="optimizationjobs",
        singular="optimizationjob",
        list_kind="OptimizationJobList",
        status_subresource=True,
    )
)
class OptimizationJob(TypedDict, total=False):
    """A hyper-parameter optimization job (API only in this project)."""

    apiVersion: str
    kind: str
    metadata: ObjectMetaFull
    spec: Required[OptimizationJobSpec]
    status: OptimizationJobStatus


ROOT_KINDS: tuple[type[Any], ...] = (TrainJob, TrainingRuntime, ClusterTrainingRuntime, OptimizationJob)
"""The TypedDicts that are CRD roots, in the order the CRDs are generated."""
