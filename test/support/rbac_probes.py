"""The requests the Trainer manager makes, one probe per kind of request, and the RBAC grants each needs.

``test/integration/test_install_manifests.py`` sends every :data:`PROBES` request as the shipped
ServiceAccount (and with each rule of its roles removed in turn), and
``test/reliability/test_rbac_justified.py`` checks that the shipped roles grant nothing beyond them and
:data:`KEPT` (permissions the shared Tier 1 plane cannot probe, each with its reason and a test of its own).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from support.install_manifests import NAMESPACE as NS

USER_NS = "default"  # where the manager's per-TrainJob objects go: any namespace
TRAINER = "/apis/trainer.kubeflow.org/v1alpha1"
APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


Grant = tuple[str, str, str]  # (apiGroup, resource, verb)


@dataclass(frozen=True, slots=True)
class Probe:
    """One request the manager makes; ``ok``: the statuses that prove it was authorized."""

    what: str
    grants: tuple[Grant, ...]
    method: str
    path: str
    body: Any = None
    content_type: str = "application/json"
    ok: tuple[int, ...] = (200,)


def apply_probe(what: str, group: str, resource: str, path: str, obj: dict[str, Any]) -> Probe:
    return Probe(
        what,
        ((group, resource, "create"), (group, resource, "patch")),
        "PATCH",
        f"{path}/{obj['metadata']['name']}?dryRun=All&fieldManager=trainer&force=true",
        obj,
        APPLY,
        ok=(200, 201),
    )


def informer_probes(what: str, group: str, resource: str, path: str, selector: str = "") -> list[Probe]:
    query = f"labelSelector={selector}&" if selector else ""
    return [
        Probe(f"{what}: list", ((group, resource, "list"),), "GET", f"{path}?{query}limit=1"),
        Probe(
            f"{what}: watch",
            ((group, resource, "watch"),),
            "GET",
            f"{path}?{query}watch=true&allowWatchBookmarks=true&timeoutSeconds=5",
        ),
    ]


def meta(name: str, namespace: str | None = USER_NS) -> dict[str, Any]:
    return {"name": name, "namespace": namespace} if namespace else {"name": name}


MISSING = "rbac-probe-missing"
TRAINJOB_LABEL = "trainer.kubeflow.org/trainjob-name"
EVENT = {
    "apiVersion": "v1",
    "kind": "Event",
    "metadata": meta("rbac-probe.1"),
    "involvedObject": {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "name": "x",
        "namespace": USER_NS,
    },
    "reason": "TrainJobResourcesCreationFailed",
    "message": "probe",
    "type": "Warning",
    "source": {"component": "trainer-trainjob-controller"},
    "firstTimestamp": "2026-01-01T00:00:00Z",
    "lastTimestamp": "2026-01-01T00:00:00Z",
    "count": 1,
}
LEASE = {
    "apiVersion": "coordination.k8s.io/v1",
    "kind": "Lease",
    "metadata": meta("trainer.kubeflow.org", NS),
}
WEBHOOK_SECRET = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": meta("kubeflow-trainer-webhook-cert", NS),
}

PROBES: list[Probe] = [
    *informer_probes("TrainJob informer", "trainer.kubeflow.org", "trainjobs", f"{TRAINER}/trainjobs"),
    Probe(
        "TrainJob status write (merge patch on /status)",
        (("trainer.kubeflow.org", "trainjobs/status", "patch"),),
        "PATCH",
        f"{TRAINER}/namespaces/{USER_NS}/trainjobs/{MISSING}/status",
        {"status": {}},
        MERGE,
        ok=(404,),
    ),
    *informer_probes(
        "TrainingRuntime informer", "trainer.kubeflow.org", "trainingruntimes", f"{TRAINER}/trainingruntimes"
    ),
    *informer_probes(
        "ClusterTrainingRuntime informer",
        "trainer.kubeflow.org",
        "clustertrainingruntimes",
        f"{TRAINER}/clustertrainingruntimes",
    ),
    Probe(
        "TrainingRuntime live read (the TrainJob webhook's cache miss on a runtime applied just before)",
        (("trainer.kubeflow.org", "trainingruntimes", "get"),),
        "GET",
        f"{TRAINER}/namespaces/{USER_NS}/trainingruntimes/{MISSING}",
        ok=(404,),
    ),
    Probe(
        "ClusterTrainingRuntime live read (the TrainJob webhook's cache miss)",
        (("trainer.kubeflow.org", "clustertrainingruntimes", "get"),),
        "GET",
        f"{TRAINER}/clustertrainingruntimes/{MISSING}",
        ok=(404,),
    ),
    Probe(
        "TrainingRuntime legacy finalizer removal",
        (("trainer.kubeflow.org", "trainingruntimes", "patch"),),
        "PATCH",
        f"{TRAINER}/namespaces/{USER_NS}/trainingruntimes/{MISSING}",
        {"metadata": {"finalizers": None}},
        MERGE,
        ok=(404,),
    ),
    Probe(
        "ClusterTrainingRuntime legacy finalizer removal",
        (("trainer.kubeflow.org", "clustertrainingruntimes", "patch"),),
        "PATCH",
        f"{TRAINER}/clustertrainingruntimes/{MISSING}",
        {"metadata": {"finalizers": None}},
        MERGE,
        ok=(404,),
    ),
    *informer_probes(
        "JobSet informer", "jobset.x-k8s.io", "jobsets", "/apis/jobset.x-k8s.io/v1alpha2/jobsets"
    ),
    apply_probe(
        "JobSet apply",
        "jobset.x-k8s.io",
        "jobsets",
        f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{USER_NS}/jobsets",
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": meta("rbac-probe"),
            "spec": {},
        },
    ),
    Probe(
        "JobSet delete after the active deadline",
        (("jobset.x-k8s.io", "jobsets", "delete"),),
        "DELETE",
        f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{USER_NS}/jobsets/{MISSING}",
        ok=(404,),
    ),
    *informer_probes("ConfigMap informer (labelled)", "", "configmaps", "/api/v1/configmaps", TRAINJOB_LABEL),
    Probe(
        "ConfigMap live read after a narrowed-cache miss",
        (("", "configmaps", "get"),),
        "GET",
        f"/api/v1/namespaces/{USER_NS}/configmaps/{MISSING}",
        ok=(404,),
    ),
    apply_probe(
        "ConfigMap apply",
        "",
        "configmaps",
        f"/api/v1/namespaces/{USER_NS}/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("rbac-probe"), "data": {"a": "b"}},
    ),
    *informer_probes("Secret informer (labelled)", "", "secrets", "/api/v1/secrets", TRAINJOB_LABEL),
    Probe(
        "Secret live read (narrowed-cache miss; the status server's CA)",
        (("", "secrets", "get"),),
        "GET",
        f"/api/v1/namespaces/{USER_NS}/secrets/{MISSING}",
        ok=(404,),
    ),
    apply_probe(
        "Secret apply",
        "",
        "secrets",
        f"/api/v1/namespaces/{USER_NS}/secrets",
        {"apiVersion": "v1", "kind": "Secret", "metadata": meta("rbac-probe"), "stringData": {"a": "b"}},
    ),
    *informer_probes(
        "PodGroup informer (scheduler-plugins)",
        "scheduling.x-k8s.io",
        "podgroups",
        "/apis/scheduling.x-k8s.io/v1alpha1/podgroups",
    ),
    apply_probe(
        "PodGroup apply (scheduler-plugins)",
        "scheduling.x-k8s.io",
        "podgroups",
        f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{USER_NS}/podgroups",
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": meta("rbac-probe"),
            "spec": {"minMember": 1},
        },
    ),
    *informer_probes(
        "PodGroup informer (Volcano)",
        "scheduling.volcano.sh",
        "podgroups",
        "/apis/scheduling.volcano.sh/v1beta1/podgroups",
    ),
    apply_probe(
        "PodGroup apply (Volcano)",
        "scheduling.volcano.sh",
        "podgroups",
        f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{USER_NS}/podgroups",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": meta("rbac-probe"),
            "spec": {"minMember": 1},
        },
    ),
    *informer_probes("LimitRange watch", "", "limitranges", "/api/v1/limitranges"),
    *informer_probes(
        "RuntimeClass watch", "node.k8s.io", "runtimeclasses", "/apis/node.k8s.io/v1/runtimeclasses"
    ),
    Probe(
        "Volcano plugin: the priority class exists",
        (("scheduling.k8s.io", "priorityclasses", "get"),),
        "GET",
        f"/apis/scheduling.k8s.io/v1/priorityclasses/{MISSING}",
        ok=(404,),
    ),
    Probe(
        "event recorder: a new event",
        (("", "events", "create"),),
        "POST",
        f"/api/v1/namespaces/{USER_NS}/events?dryRun=All",
        EVENT,
        ok=(201,),
    ),
    Probe(
        "event recorder: the same event again (count + 1)",
        (("", "events", "patch"),),
        "PATCH",
        f"/api/v1/namespaces/{USER_NS}/events/{MISSING}",
        {"count": 2},
        MERGE,
        ok=(404,),
    ),
    Probe(
        "secure metrics / status server: authenticate a bearer token",
        (("authentication.k8s.io", "tokenreviews", "create"),),
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "not-a-token"}},
        ok=(201,),
    ),
    Probe(
        "secure metrics: authorize GET /metrics",
        (("authorization.k8s.io", "subjectaccessreviews", "create"),),
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": "someone", "nonResourceAttributes": {"path": "/metrics", "verb": "get"}},
        },
        ok=(201,),
    ),
    *[
        probe
        for resource, name in (
            ("validatingwebhookconfigurations", "validator.trainer.kubeflow.org"),
            ("mutatingwebhookconfigurations", "defaulter.trainer.kubeflow.org"),
        )
        for probe in (
            Probe(
                f"certificate rotator: read {name}",
                (("admissionregistration.k8s.io", resource, "get"),),
                "GET",
                f"/apis/admissionregistration.k8s.io/v1/{resource}/{name}",
                ok=(200, 404),
            ),
            Probe(
                f"certificate rotator: patch the caBundle of {name}",
                (("admissionregistration.k8s.io", resource, "patch"),),
                "PATCH",
                f"/apis/admissionregistration.k8s.io/v1/{resource}/{name}?dryRun=All",
                [{"op": "test", "path": "/metadata/name", "value": name}],
                JSON_PATCH,
                ok=(200, 404),
            ),
        )
    ],
    Probe(
        "leader election: create the Lease",
        (("coordination.k8s.io", "leases", "create"),),
        "POST",
        f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases?dryRun=All",
        LEASE,
        ok=(201, 409),
    ),
    Probe(
        "leader election: read the Lease",
        (("coordination.k8s.io", "leases", "get"),),
        "GET",
        f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/trainer.kubeflow.org",
        ok=(200, 404),
    ),
    Probe(
        "leader election: renew the Lease",
        (("coordination.k8s.io", "leases", "update"),),
        "PUT",
        f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/trainer.kubeflow.org?dryRun=All",
        LEASE,
        ok=(200, 201, 404, 409),
    ),
    Probe(
        "certificate rotator: write the webhook Secret",
        (("", "secrets", "update"),),
        "PUT",
        f"/api/v1/namespaces/{NS}/secrets/kubeflow-trainer-webhook-cert?dryRun=All",
        WEBHOOK_SECRET,
        ok=(200, 404, 409),
    ),
]

FINALIZERS: Grant = ("trainer.kubeflow.org", "trainjobs/finalizers", "update")
KEPT: dict[Grant, str] = {
    FINALIZERS: (
        "owner references with blockOwnerDeletion need it where the OwnerReferencesPermissionEnforcement "
        "admission plugin is on (not in the shared Tier 1 plane): "
        "test_trainjob_finalizers_update_is_needed_where_owner_references_are_enforced"
    ),
}
