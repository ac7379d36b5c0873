"""Kubernetes core/v1, batch/v1, meta/v1 and JobSet v1alpha2 types as the Trainer code reads them.

Go origin: `k8s.io/api/core/v1`, `k8s.io/api/batch/v1`, `k8s.io/apimachinery/pkg/apis/meta/v1` and
`sigs.k8s.io/jobset/api/jobset/v1alpha2`, as embedded in the Trainer API.

Guarantees:
- Each TypedDict lists the wire keys (camelCase) our code reads or writes; objects are plain dicts, so keys
  not listed here survive a round trip untouched.
- Each class marked `Embedded(...)` / `EmbeddedJobSetSpec()` is NOT walked by the CRD generator: its schema is
  the real one, taken at generation time from the kube-apiserver's OpenAPI v3 document or JobSet's CRD. So
  these TypedDicts may be partial without making the CRDs partial.

Deliberately missing: fields nobody in this project reads (they stay reachable as plain dict keys), and
`metav1.Condition`'s Go-side helpers; `Condition` here is our own schema (controller-gen's markers on
metav1.Condition), because the core/v1 OpenAPI document does not define it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Required, TypedDict

from runtime.api.markers import (
    Embedded,
    EmbeddedJobSetSpec,
    EmbeddedObjectMeta,
    Enum,
    Int64,
    ListType,
    MaxItems,
    MaxLength,
    Minimum,
    MinLength,
    Pattern,
    Time,
    schema,
)

# Opaque embedded types: the code passes them through without reading inside.
PodSecurityContext = Annotated[dict[str, Any], Embedded("io.k8s.api.core.v1.PodSecurityContext")]
SecurityContext = Annotated[dict[str, Any], Embedded("io.k8s.api.core.v1.SecurityContext")]
Toleration = Annotated[dict[str, Any], Embedded("io.k8s.api.core.v1.Toleration")]
Quantity = str | int | float
"""resource.Quantity on the wire: a string such as `"500m"`, or a bare number."""


@schema(Embedded("io.k8s.api.core.v1.ObjectFieldSelector"))
class ObjectFieldSelector(TypedDict, total=False):
    apiVersion: str
    fieldPath: Required[str]


@schema(Embedded("io.k8s.api.core.v1.EnvVarSource"))
class EnvVarSource(TypedDict, total=False):
    fieldRef: ObjectFieldSelector
    resourceFieldRef: dict[str, Any]
    configMapKeyRef: dict[str, Any]
    secretKeyRef: dict[str, Any]


@schema(Embedded("io.k8s.api.core.v1.EnvVar"))
class EnvVar(TypedDict, total=False):
    name: Required[str]
    value: str
    valueFrom: EnvVarSource


@schema(Embedded("io.k8s.api.core.v1.LocalObjectReference"))
class LocalObjectReference(TypedDict, total=False):
    name: str


@schema(Embedded("io.k8s.api.core.v1.ResourceRequirements"))
class ResourceRequirements(TypedDict, total=False):
    limits: dict[str, Quantity]
    requests: dict[str, Quantity]
    claims: list[dict[str, Any]]


@schema(Embedded("io.k8s.api.core.v1.ContainerPort"))
class ContainerPort(TypedDict, total=False):
    containerPort: Required[int]
    name: str
    protocol: str
    hostPort: int
    hostIP: str


@schema(Embedded("io.k8s.api.core.v1.VolumeMount"))
class VolumeMount(TypedDict, total=False):
    name: Required[str]
    mountPath: Required[str]
    readOnly: bool
    subPath: str


# The embedded types below are typed down to every map (`dict[str, V]`) a runtime patch can carry, so the CRD
# schema tells maps from structs. Other fields stay opaque. (How Go writes them back is read off the Go
# types themselves: `runtime.api.gojson`.)


@schema(Embedded("io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"))
class LabelSelector(TypedDict, total=False):
    matchLabels: dict[str, str]
    matchExpressions: list[dict[str, Any]]


@schema(Embedded("io.k8s.api.core.v1.PodAffinityTerm"))
class PodAffinityTerm(TypedDict, total=False):
    labelSelector: LabelSelector
    namespaceSelector: LabelSelector
    topologyKey: Required[str]


@schema(Embedded("io.k8s.api.core.v1.WeightedPodAffinityTerm"))
class WeightedPodAffinityTerm(TypedDict):
    weight: int
    podAffinityTerm: PodAffinityTerm


@schema(Embedded("io.k8s.api.core.v1.PodAffinity"))
class PodAffinity(TypedDict, total=False):
    requiredDuringSchedulingIgnoredDuringExecution: list[PodAffinityTerm]
    preferredDuringSchedulingIgnoredDuringExecution: list[WeightedPodAffinityTerm]


@schema(Embedded("io.k8s.api.core.v1.PodAntiAffinity"))
class PodAntiAffinity(PodAffinity, total=False):
    """The same fields as PodAffinity."""


@schema(Embedded("io.k8s.api.core.v1.Affinity"))
class Affinity(TypedDict, total=False):
    nodeAffinity: dict[str, Any]
    podAffinity: PodAffinity
    podAntiAffinity: PodAntiAffinity


@schema(Embedded("io.k8s.api.core.v1.CSIVolumeSource"))
class CSIVolumeSource(TypedDict, total=False):
    driver: Required[str]
    volumeAttributes: dict[str, str]


@schema(Embedded("io.k8s.api.core.v1.FlexVolumeSource"))
class FlexVolumeSource(TypedDict, total=False):
    driver: Required[str]
    options: dict[str, str]


@schema(Embedded("io.k8s.api.core.v1.VolumeResourceRequirements"))
class VolumeResourceRequirements(TypedDict, total=False):
    limits: dict[str, Quantity]
    requests: dict[str, Quantity]


@schema(Embedded("io.k8s.api.core.v1.PersistentVolumeClaimSpec"))
class PersistentVolumeClaimSpec(TypedDict, total=False):
    resources: VolumeResourceRequirements
    selector: LabelSelector


@schema(Embedded("io.k8s.api.core.v1.PersistentVolumeClaimTemplate"))
class PersistentVolumeClaimTemplate(TypedDict, total=False):
    metadata: ObjectMeta
    spec: Required[PersistentVolumeClaimSpec]


@schema(Embedded("io.k8s.api.core.v1.EphemeralVolumeSource"))
class EphemeralVolumeSource(TypedDict, total=False):
    volumeClaimTemplate: PersistentVolumeClaimTemplate


@schema(Embedded("io.k8s.api.core.v1.ClusterTrustBundleProjection"))
class ClusterTrustBundleProjection(TypedDict, total=False):
    labelSelector: LabelSelector
    path: Required[str]


@schema(Embedded("io.k8s.api.core.v1.PodCertificateProjection"))
class PodCertificateProjection(TypedDict, total=False):
    signerName: Required[str]
    keyType: Required[str]
    userAnnotations: dict[str, str]


@schema(Embedded("io.k8s.api.core.v1.VolumeProjection"))
class VolumeProjection(TypedDict, total=False):
    clusterTrustBundle: ClusterTrustBundleProjection
    podCertificate: PodCertificateProjection


@schema(Embedded("io.k8s.api.core.v1.ProjectedVolumeSource"))
class ProjectedVolumeSource(TypedDict, total=False):
    sources: list[VolumeProjection]


@schema(Embedded("io.k8s.api.core.v1.Volume"))
class Volume(TypedDict, total=False):
    name: Required[str]
    configMap: dict[str, Any]
    secret: dict[str, Any]
    emptyDir: dict[str, Any]
    persistentVolumeClaim: dict[str, Any]
    csi: CSIVolumeSource
    flexVolume: FlexVolumeSource
    ephemeral: EphemeralVolumeSource
    projected: ProjectedVolumeSource


@schema(Embedded("io.k8s.api.core.v1.PodSchedulingGate"))
class PodSchedulingGate(TypedDict):
    name: str


@schema(Embedded("io.k8s.api.core.v1.Container"))
class Container(TypedDict, total=False):
    name: Required[str]
    image: str
    command: list[str]
    args: list[str]
    workingDir: str
    env: list[EnvVar]
    envFrom: list[dict[str, Any]]
    ports: list[ContainerPort]
    resources: ResourceRequirements
    volumeMounts: list[VolumeMount]
    securityContext: SecurityContext
    restartPolicy: str


@schema(Embedded("io.k8s.api.core.v1.PodSpec"))
class PodSpec(TypedDict, total=False):
    containers: Required[list[Container]]
    initContainers: list[Container]
    volumes: list[Volume]
    restartPolicy: str
    serviceAccountName: str
    nodeSelector: dict[str, str]
    affinity: Affinity
    tolerations: list[Toleration]
    schedulingGates: list[PodSchedulingGate]
    securityContext: PodSecurityContext
    imagePullSecrets: list[LocalObjectReference]
    terminationGracePeriodSeconds: int
    priorityClassName: str
    schedulerName: str
    subdomain: str
    overhead: dict[str, Quantity]


@schema(EmbeddedObjectMeta())
class ObjectMeta(TypedDict, total=False):
    """ObjectMeta as a template carries it: only these five fields are kept by the schema."""

    name: str
    namespace: str
    labels: dict[str, str]
    annotations: dict[str, str]
    finalizers: list[str]


class OwnerReference(TypedDict, total=False):
    apiVersion: Required[str]
    kind: Required[str]
    name: Required[str]
    uid: Required[str]
    controller: bool
    blockOwnerDeletion: bool


class ObjectMetaFull(TypedDict, total=False):
    """The `metadata` of a top-level object as the API server returns it (the server owns its schema)."""

    name: str
    generateName: str
    namespace: str
    uid: str
    resourceVersion: str
    generation: int
    creationTimestamp: str
    deletionTimestamp: str
    labels: dict[str, str]
    annotations: dict[str, str]
    finalizers: list[str]
    ownerReferences: list[OwnerReference]


class PodTemplateSpec(TypedDict, total=False):
    metadata: ObjectMeta
    spec: PodSpec


class JobSpec(TypedDict, total=False):
    template: Required[PodTemplateSpec]
    parallelism: int
    completions: int
    completionMode: str
    backoffLimit: int
    activeDeadlineSeconds: int
    ttlSecondsAfterFinished: int
    suspend: bool


class JobTemplateSpec(TypedDict, total=False):
    metadata: ObjectMeta
    spec: JobSpec


class DependsOn(TypedDict):
    name: str
    status: Literal["Ready", "Complete"]


class ReplicatedJob(TypedDict, total=False):
    name: Required[str]
    groupName: str
    template: Required[JobTemplateSpec]
    replicas: int
    dependsOn: list[DependsOn]


class Network(TypedDict, total=False):
    enableDNSHostnames: bool
    subdomain: str
    publishNotReadyAddresses: bool


@schema(EmbeddedJobSetSpec("v1alpha2"))
class JobSetSpec(TypedDict, total=False):
    replicatedJobs: list[ReplicatedJob]
    network: Network
    successPolicy: dict[str, Any]
    failurePolicy: dict[str, Any]
    startupPolicy: dict[str, Any]
    coordinator: dict[str, Any]
    volumeClaimPolicies: list[dict[str, Any]]
    suspend: bool
    managedBy: str
    ttlSecondsAfterFinished: int


# metav1.Condition, with the validation controller-gen emits for it.
class Condition(TypedDict, total=False):
    """One aspect of the object's current state, in the standard Kubernetes condition shape."""

    type: Required[
        Annotated[
            str,
            MaxLength(316),
            Pattern(
                r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
            ),
        ]
    ]
    """The aspect this condition describes, in CamelCase (for example `Complete`); the key of the list."""
    status: Required[Annotated[Literal["True", "False", "Unknown"], Enum("True", "False", "Unknown")]]
    """Whether the condition holds: `True`, `False` or `Unknown`."""
    observedGeneration: Annotated[Int64, Minimum(0)]
    """The `metadata.generation` of the object when the condition was set."""
    lastTransitionTime: Required[Time]
    """When the status last changed."""
    reason: Required[
        Annotated[str, MinLength(1), MaxLength(1024), Pattern(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")]
    ]
    """Why the condition has its status, as a CamelCase word programs can match on."""
    message: Required[Annotated[str, MaxLength(32768)]]
    """Why the condition has its status, in words for people; may be empty."""


EnvList = Annotated[list[EnvVar], ListType("map", ("name",)), MaxItems(128)]
"""The `env` list shape the Trainer API uses everywhere: a map list keyed by name, at most 128 entries."""

__all__ = [
    "Affinity",
    "CSIVolumeSource",
    "ClusterTrustBundleProjection",
    "Condition",
    "Container",
    "ContainerPort",
    "DependsOn",
    "EnvList",
    "EnvVar",
    "EnvVarSource",
    "EphemeralVolumeSource",
    "FlexVolumeSource",
    "JobSetSpec",
    "JobSpec",
    "JobTemplateSpec",
    "LabelSelector",
    "LocalObjectReference",
    "Network",
    "ObjectFieldSelector",
    "ObjectMeta",
    "ObjectMetaFull",
    "OwnerReference",
    "PersistentVolumeClaimSpec",
    "PersistentVolumeClaimTemplate",
    "PodAffinity",
    "PodAffinityTerm",
    "PodAntiAffinity",
    "PodCertificateProjection",
    "PodSchedulingGate",
    "PodSecurityContext",
    "PodSpec",
    "PodTemplateSpec",
    "ProjectedVolumeSource",
    "Quantity",
    "ReplicatedJob",
    "ResourceRequirements",
    "SecurityContext",
    "Toleration",
    "Volume",
    "VolumeMount",
    "VolumeProjection",
    "VolumeResourceRequirements",
    "WeightedPodAffinityTerm",
]
