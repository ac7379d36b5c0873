"""What the manager's cache keeps of each kind the Trainer reads: only what its readers read.

Go origin: controller-runtime's per-type cache transform (`cache.ByObject{Transform: ...}`) and
`TransformStripManagedFields`. Upstream kubeflow/trainer uses neither: it caches every JobSet whole, pod
templates included, and every object with its `managedFields`.

Every transform strips `metadata.managedFields` (server-side apply's bookkeeping, which no reader here looks
at), then keeps one shared copy of each short string value (`controller.cache.compact.StringTable`), and
per kind drops what the readers never need. Who reads each kind, and why the dropped part is never needed:

- **TrainJob**: everything is read (the pipeline builds from `spec`, the status writer merges into
  `status`, the indexes read `spec.runtimeRef`). Dropped: the annotation
  `kubectl.kubernetes.io/last-applied-configuration`, kubectl's client-side copy of the whole manifest as
  last applied (often the object's largest field): nothing here reads a TrainJob's annotations, and the
  status is written with a merge patch of `/status`, which never sends metadata.
- **JobSet** that is **not suspended** (`spec.suspend` absent or false): kept are `metadata`, `status` and,
  of `spec`, only `suspend` and `volumeClaimPolicies`. Readers of a JobSet: the status step reads its
  `status` (conditions, `replicatedJobsStatus`); the deadline step its `metadata` (UID, owner, deletion);
  the update webhook its `status`; the JobSet plugin whether it exists and is suspended, and, when it
  re-applies, the stored `volumeClaimPolicies` (immutable, so re-sent as stored). The rest of the spec (the
  replicated jobs and their pod templates, most of a JobSet's bytes) is read only by the applier's skip
  test, "the live object still contains the body", and the pipeline builds a body for a JobSet only while
  the JobSet or its TrainJob is suspended: a running JobSet is never re-applied (its pods keep the template
  they started with). Were a body built while the JobSet runs (the TrainJob just suspended), it differs
  from the live JobSet in `spec.suspend` anyway, so the slim form never turns a skip into a write, nor a
  write into a skip. A **suspended** JobSet is kept whole, so the skip test (and with it drift
  detection: a spec someone else changed is re-applied) sees every field while it can matter.
- **Secret** controlled by a TrainJob (the MPI plugin's SSH keys, the Flux plugin's CURVE keys): `data`
  and `stringData` are dropped. Their plugins only ask whether the Secret exists (each is written once,
  when missing, and never compared). A Secret that no TrainJob controls (the status server's CA Secret,
  which the TrainJobStatus plugin reads `ca.crt` from) is kept whole. So the manager holds no private key
  of any tenant's job in memory.
- **ConfigMap** (the runtime snapshots, the status server's TLS ConfigMaps): kept whole, and each value of
  `data` up to 64 KiB is shared through a second, small table: the snapshots of TrainJobs started on one
  runtime version hold the same YAML, which the pipeline parses once (`runtime.core.snapshot`).
- **PodGroup** (both flavours): kept whole (a few fields; read whole by the skip test while suspended).

The transforms run in the informers' reflector threads, once per listed or watched object, before it is
stored: linear in the object's size. Measured bytes per cached object per kind, before and after:
`hack/bench_scale.py` (the scale scenario's "cache" figures) and `docs/performance.md`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.cache.compact import StringTable
from controller.client.gvk import GVK
from controller.informers.shared_informer import TransformFunc, strip_managed_fields
from controller.trainer.kinds import CONFIGMAP, JOBSET, SECRET, TRAINJOB
from runtime.api import constants

__all__ = [
    "LAST_APPLIED_ANNOTATION",
    "RUNNING_JOBSET_SPEC_KEPT",
    "CacheTransforms",
]

LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
RUNNING_JOBSET_SPEC_KEPT = ("suspend", "volumeClaimPolicies")
"""The fields of a running JobSet's `spec` the cache keeps (see the module docstring)."""

_DATA_VALUE_MAX_LENGTH = 64 * 1024
_DATA_VALUE_MAX_ENTRIES = 64


def _controlled_by_trainjob(metadata: Mapping[str, Any]) -> bool:
    return any(
        isinstance(ref, Mapping)
        and ref.get("controller") is True
        and ref.get("kind") == constants.TRAINJOB_KIND
        and ref.get("apiVersion") == constants.API_VERSION
        for ref in metadata.get("ownerReferences") or ()
    )


class CacheTransforms:
    """The per-kind transforms of one manager's cache, sharing its string tables (see the module docstring).

    Stateless apart from the tables, whose bounds are `controller.cache.compact.StringTable`'s: values up to
    128 characters in one table of 16,384, ConfigMap data values up to 64 KiB in one of 64.
    """

    __slots__ = ("_data", "_strings")

    def __init__(self) -> None:
        self._strings = StringTable()
        self._data = StringTable(max_entries=_DATA_VALUE_MAX_ENTRIES, max_length=_DATA_VALUE_MAX_LENGTH)

    def for_kind(self, gvk: GVK) -> TransformFunc:
        """The transform of `gvk`: a kind of its own above, else managedFields stripped and strings shared."""
        return {
            TRAINJOB: self.trainjob,
            JOBSET: self.jobset,
            SECRET: self.secret,
            CONFIGMAP: self.configmap,
        }.get(gvk, self.default)

    def default(self, obj: Any) -> Any:
        """managedFields stripped, string values shared."""
        return self._strings.dedupe(strip_managed_fields(obj))

    def trainjob(self, obj: Any) -> Any:
        """The default, and no `last-applied-configuration` annotation."""
        metadata = obj.get("metadata") if isinstance(obj, dict) else None
        annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
        dropped = isinstance(annotations, dict) and annotations.pop(LAST_APPLIED_ANNOTATION, None) is not None
        if dropped and not annotations:
            del metadata["annotations"]  # type: ignore[union-attr]
        return self.default(obj)

    def jobset(self, obj: Any) -> Any:
        """The default; a JobSet that is not suspended keeps only `RUNNING_JOBSET_SPEC_KEPT` of its spec."""
        spec = obj.get("spec") if isinstance(obj, dict) else None
        if isinstance(spec, dict) and spec.get("suspend") is not True:
            obj["spec"] = {key: spec[key] for key in RUNNING_JOBSET_SPEC_KEPT if key in spec}
        return self.default(obj)

    def secret(self, obj: Any) -> Any:
        """The default; a Secret a TrainJob controls keeps no `data` or `stringData`."""
        metadata = obj.get("metadata") if isinstance(obj, dict) else None
        if isinstance(metadata, dict) and _controlled_by_trainjob(metadata):
            obj.pop("data", None)
            obj.pop("stringData", None)
        return self.default(obj)

    def configmap(self, obj: Any) -> Any:
        """The default, and `data` values up to 64 KiB shared."""
        data = obj.get("data") if isinstance(obj, dict) else None
        if isinstance(data, dict):
            share = self._data.share
            for key, value in data.items():
                if isinstance(value, str):
                    data[key] = share(value)
        return self.default(obj)

    def __repr__(self) -> str:
        return f"<CacheTransforms strings={self._strings!r} data={self._data!r}>"
