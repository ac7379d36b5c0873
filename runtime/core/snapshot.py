"""The runtime snapshot: a ConfigMap `<trainjob>-runtime-snapshot` freezing the runtime a TrainJob started on.

Go origin: kubeflow/trainer `pkg/runtime/core/snapshot.go` (`getRuntimeSnapshot`, `createRuntimeSnapshot`).

Guarantees:
- `build_snapshot` returns the ConfigMap apply body: name `<trainjob>-runtime-snapshot`, the TrainJob's
  namespace, the TrainJob as controller owner (so it is garbage-collected with it), the label
  `trainer.kubeflow.org/trainjob-name: <trainjob>` (not upstream's: it puts the snapshot in the controller's
  label-narrowed ConfigMap cache, which the MPI and Flux watches declare), and `data.runtime`,
  the YAML of the whole runtime object (`apiVersion`, `kind`, `metadata`, `spec`; keys sorted, as Go's
  `sigs.k8s.io/yaml` writes them). The runtime's `managedFields` and `status` are left out.
- `read_snapshot` accepts a ConfigMap only if it is controlled by this TrainJob (owner UID), has the
  `runtime` key, parses as a YAML mapping, and names the runtime the TrainJob references (kind and group
  when the TrainJob sets them, and name); otherwise it raises `SnapshotError` with upstream's message.

Deliberately missing: rewriting an existing snapshot. A snapshot is written once (and again only if it was
deleted); later runtime edits never reach an existing TrainJob. So a snapshot an older controller wrote
keeps having no label; `get_snapshot` still finds it, because a `Reader` never answers None from a
label-narrowed cache alone (`runtime.framework.reader`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from runtime.api import constants
from runtime.api.v1alpha1 import TrainJob
from runtime.api.views import ObjectView, TrainJobView
from runtime.core.errors import SnapshotError
from runtime.framework.reader import Reader
from runtime.ownership import owned_object_metadata

__all__ = ["build_snapshot", "get_snapshot", "read_snapshot", "snapshot_name"]

_CONFIGMAP = ("v1", "ConfigMap")
# libyaml when PyYAML has it (about 10x faster: the snapshot is parsed on every reconcile).
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def snapshot_name(trainjob: TrainJob) -> str:
    """`<trainjob>-runtime-snapshot`."""
    return TrainJobView(trainjob).name + constants.RUNTIME_SNAPSHOT_SUFFIX


def build_snapshot(trainjob: TrainJob, runtime: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """The snapshot ConfigMap of `runtime` (a TrainingRuntime or ClusterTrainingRuntime of `kind`)."""
    metadata = {k: v for k, v in (runtime.get("metadata") or {}).items() if k != "managedFields"}
    frozen = {
        "apiVersion": constants.API_VERSION,
        "kind": kind,
        "metadata": metadata,
        "spec": runtime.get("spec"),
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": owned_object_metadata(trainjob, snapshot_name(trainjob)),
        "data": {
            constants.RUNTIME_SNAPSHOT_KEY: yaml.dump(
                frozen, Dumper=_Dumper, sort_keys=True, default_flow_style=False
            )
        },
    }


def _controller_uid(obj: Mapping[str, Any]) -> str | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller") is True:
            return str(ref.get("uid", ""))
    return None


def read_snapshot(configmap: Mapping[str, Any], trainjob: TrainJob) -> dict[str, Any]:
    """The runtime object frozen in a snapshot ConfigMap, after upstream's checks (raises `SnapshotError`)."""
    view = TrainJobView(trainjob)
    if _controller_uid(configmap) != view.uid:
        raise SnapshotError(
            "invalid runtime snapshot: a snapshot configmap exists but is owned by another object"
        )
    text = (configmap.get("data") or {}).get(constants.RUNTIME_SNAPSHOT_KEY)
    if text is None:
        raise SnapshotError(
            "invalid runtime snapshot: snapshot ConfigMap missing "
            f'"{constants.RUNTIME_SNAPSHOT_KEY}" data key'
        )
    try:
        runtime = yaml.load(text, Loader=_Loader)  # a safe loader (plain data only)
    except yaml.YAMLError as exc:
        raise SnapshotError(f"invalid runtime snapshot: unable to unmarshal the snapshot: {exc}") from exc
    if not isinstance(runtime, dict) or not isinstance(runtime.get("spec", {}), dict):
        raise SnapshotError(
            "invalid runtime snapshot: unable to unmarshal the snapshot: not a runtime object"
        )
    ref: Mapping[str, Any] = view.spec["runtimeRef"] if isinstance(view.spec.get("runtimeRef"), dict) else {}
    found = ObjectView(runtime)
    found_group = found.api_version.rpartition("/")[0]
    want_kind, want_group = ref.get("kind"), ref.get("apiGroup")
    if (
        (want_kind is not None and found.kind != want_kind)
        or (want_group is not None and found_group != want_group)
        or found.name != view.runtime_ref_name
    ):
        expected = f'"{view.runtime_ref_name}", "{want_group or "<any>"}", "{want_kind or "<any>"}"'
        actual = f'"{found.name}", "{found_group}", "{found.kind}"'
        raise SnapshotError(
            "invalid runtime snapshot: the snapshot refers to the wrong runtime: "
            "expecting a runtime with name, "
            f"api group and kind of {expected} but found runtime with name, api group and kind of {actual}"
        )
    return runtime


def get_snapshot(reader: Reader, trainjob: TrainJob) -> Mapping[str, Any] | None:
    """The snapshot ConfigMap of the TrainJob, or None (raises `ReadError` when it cannot tell)."""
    return reader.get(*_CONFIGMAP, snapshot_name(trainjob), TrainJobView(trainjob).namespace)
