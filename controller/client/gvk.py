"""Kinds and resources: ``GVK`` names a kind, ``Resource`` says where it is served, and the well-known table.

Go origin: apimachinery ``pkg/runtime/schema`` (``GroupVersionKind``, ``GroupVersionResource``) plus the
scope a ``RESTMapping`` carries, and the static mappings controller-runtime's tests and our client start
from.

Guarantees: both are frozen, hashable values; the core group is ``""``; :meth:`Resource.path` builds the URL
path of a collection, an object or a subresource, escaping names. :data:`BUILTIN_RESOURCES` lists the kinds
this project reads or writes, so they resolve without a discovery round trip
(:class:`controller.client.restmapper.RESTMapper`).

Deliberately missing: ``GroupVersion``/``GroupKind``/``GroupVersionResource`` as separate types (a ``GVK``
with an empty version or a ``Resource`` serves), short names and categories.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

__all__ = ["BUILTIN_RESOURCES", "GVK", "Resource"]


@dataclass(frozen=True, slots=True)
class GVK:
    """A GroupVersionKind. The core group is ``""``."""

    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        """``group/version``, or just ``version`` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    @classmethod
    def from_api_version(cls, api_version: str, kind: str) -> GVK:
        """Split an ``apiVersion`` (``"v1"``, ``"batch/v1"``) and pair it with ``kind``."""
        group, sep, version = api_version.rpartition("/")
        if not version or (sep and not group):
            raise ValueError(f"malformed apiVersion {api_version!r}")
        return cls(group, version, kind)

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> GVK:
        """The GVK an object declares in ``apiVersion`` and ``kind``."""
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if not isinstance(api_version, str) or not isinstance(kind, str) or not api_version or not kind:
            raise ValueError("object has no apiVersion/kind")
        return cls.from_api_version(api_version, kind)

    def __str__(self) -> str:
        return f"{self.api_version}, Kind={self.kind}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Resource:
    """Where a kind lives on the server: ``/api/v1`` or ``/apis/<group>/<version>``, then ``plural``."""

    group: str
    version: str
    plural: str
    namespaced: bool
    kind: str

    @property
    def gvk(self) -> GVK:
        return GVK(self.group, self.version, self.kind)

    @property
    def api_version(self) -> str:
        return self.gvk.api_version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The URL path of the collection (``name`` None) or of one object, optionally a subresource.

        For a namespaced kind, no ``namespace`` means all namespaces (list and watch only). For a
        cluster-scoped kind ``namespace`` is ignored, as controller-runtime ignores it.
        """
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base = f"{base}/namespaces/{quote(namespace, safe='')}"
        base = f"{base}/{self.plural}"
        if name is None:
            if subresource:
                raise ValueError("a subresource needs an object name")
            return base
        if not name:
            raise ValueError("object name must not be empty")
        base = f"{base}/{quote(name, safe='')}"
        return f"{base}/{subresource}" if subresource else base


def _res(api_version: str, kind: str, plural: str, namespaced: bool) -> Resource:
    gvk = GVK.from_api_version(api_version, kind)
    return Resource(group=gvk.group, version=gvk.version, plural=plural, namespaced=namespaced, kind=kind)


# The kinds this project reads or writes, resolvable without a discovery round trip.
BUILTIN_RESOURCES: tuple[Resource, ...] = (
    _res("v1", "Pod", "pods", True),
    _res("v1", "ConfigMap", "configmaps", True),
    _res("v1", "Secret", "secrets", True),
    _res("v1", "Namespace", "namespaces", False),
    _res("v1", "Event", "events", True),
    _res("v1", "ServiceAccount", "serviceaccounts", True),
    _res("v1", "Node", "nodes", False),
    _res("v1", "Service", "services", True),
    _res("v1", "LimitRange", "limitranges", True),
    _res("events.k8s.io/v1", "Event", "events", True),
    _res("coordination.k8s.io/v1", "Lease", "leases", True),
    _res("node.k8s.io/v1", "RuntimeClass", "runtimeclasses", False),
    _res("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", False),
    _res("batch/v1", "Job", "jobs", True),
    _res("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", False),
    _res(
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        False,
    ),
    _res(
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        False,
    ),
    _res("authentication.k8s.io/v1", "TokenReview", "tokenreviews", False),
    _res("authorization.k8s.io/v1", "SubjectAccessReview", "subjectaccessreviews", False),
    _res("jobset.x-k8s.io/v1alpha2", "JobSet", "jobsets", True),
    _res("scheduling.x-k8s.io/v1alpha1", "PodGroup", "podgroups", True),
    _res("scheduling.volcano.sh/v1beta1", "PodGroup", "podgroups", True),
    _res("trainer.kubeflow.org/v1alpha1", "TrainJob", "trainjobs", True),
    _res("trainer.kubeflow.org/v1alpha1", "TrainingRuntime", "trainingruntimes", True),
    _res("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", "clustertrainingruntimes", False),
)
