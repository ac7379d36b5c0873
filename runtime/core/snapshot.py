"""The runtime snapshot: a ConfigMap `<trainjob>-runtime-snapshot` freezing the runtime a TrainJob started on.

Go origin: kubeflow/trainer `pkg/runtime/core/snapshot.go` (`getRuntimeSnapshot`, `createRuntimeSnapshot`).

Guarantees:
- `build_snapshot` returns the ConfigMap apply body: name `<trainjob>-runtime-snapshot`, the TrainJob's
  namespace, the TrainJob as controller owner (so it is garbage-collected with it), the label
  `trainer.kubeflow.org/trainjob-name: <trainjob>` (not upstream's: it puts the snapshot in the controller's
  label-narrowed ConfigMap cache, which the MPI and Flux watches declare), and `data.runtime`, the text
  upstream's `sigs.k8s.io/yaml.Marshal` writes for the runtime: the runtime passes through one function,
  `_go_json_value` (the value Go's `json.Marshal` makes of the typed runtime), then `runtime.kubeyaml.dump`
  (go-yaml's text of that value, byte for byte). What still differs from upstream's text, and why, is in
  docs/compatibility.md ("The runtime snapshot"): chiefly `metadata.managedFields`, which the controller's
  cache strips and upstream's keeps.
- A ConfigMap holds at most `MAX_SNAPSHOT_BYTES` (1 MiB) of data, in UTF-8 bytes, while the API server
  stores a runtime up to etcd's 1.5 MiB; and `read_snapshot` reads at most `MAX_SNAPSHOT_NODES` YAML nodes,
  which a runtime of many small items passes within 1 MiB. `SnapshotText.problem` says when a snapshot is
  beyond either (exactly), `admitted_snapshot` gives a runtime webhook a snapshot at least as long as the
  stored object's will be (conservatively). Upstream v2.3.0 checks neither: the apply of the snapshot
  fails, and every reconcile of the TrainJob with it (or, here, every read of it once the runtime is gone).
  `runtime.core.runtime` and `runtime.core.runtime_rules` refuse.
- `read_snapshot` accepts a ConfigMap only if it is controlled by this TrainJob (owner UID), has the
  `runtime` key, parses as a YAML mapping, and names the runtime the TrainJob references (kind and group
  when the TrainJob sets them, and name); otherwise it raises `SnapshotError` with upstream's message.
- The snapshot lives in the tenant's namespace, so a tenant can edit it; `read_snapshot` treats it as hostile
  input. Whatever the ConfigMap holds, it either returns a runtime whose every field has the JSON type the
  runtime CRD declares and whose every quantity parses (what upstream's typed `yaml.Unmarshal` guarantees;
  unknown fields are kept and ignored, as there) or raises `SnapshotError` with a short message, never another
  exception. Reading is bounded: at most `MAX_SNAPSHOT_BYTES` of text and `MAX_SNAPSHOT_NODES` decoded nodes
  (aliases expanded), at most `runtime.kubeyaml.MAX_DEPTH` levels deep, with kubectl's limit on alias
  expansion; the YAML is read as kubectl reads it (`runtime.kubeyaml`: no tag constructs anything but JSON
  values). Messages repeat at most `runtime.echo.ECHO_LIMIT` characters of any value.
- Writing is memoised by content (a burst of TrainJobs on one runtime dumps its YAML once), for runtimes of
  at most `SHARED_TEXT_LIMIT` bytes of JSON, `SHARED_PARSES` of them.
- Parsing is memoised by text: the snapshots of TrainJobs started on one runtime version hold the same text,
  so a restart parses it once, not once per TrainJob. Only small texts (`SHARED_TEXT_LIMIT` characters,
  `SHARED_MAX_NODES` nodes) are kept, `SHARED_PARSES` of them, so hostile snapshots cannot grow memory; a
  memoised runtime is shared by every caller and read-only, as a cached object is.

Deliberately missing: rewriting an existing snapshot. A snapshot is written once (and again only if it was
deleted); later runtime edits never reach an existing TrainJob. So a snapshot an older controller wrote
keeps having no label; `get_snapshot` still finds it, because a `Reader` confirms a miss of a
label-narrowed cache live for any TrainJob something may have built for (`runtime.framework.reader`). The
snapshot's runtime is not checked against the CRD's other rules (enums, patterns, CEL): a runtime that the
API server once accepted passes them, and upstream does not check them either.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from runtime import kubeyaml
from runtime.api import constants
from runtime.api.gojson import go_json_training_runtime
from runtime.api.v1alpha1 import TrainJob
from runtime.api.views import ObjectView, TrainJobView, as_dict
from runtime.buildable import MAX_CONFIGMAP_BYTES, utf8_length
from runtime.core.errors import SnapshotError
from runtime.echo import elide, quote
from runtime.framework.reader import Reader
from runtime.ownership import owned_object_metadata
from runtime.resources import InvalidQuantityError, Quantity
from runtime.schema import CRD_DIR, json_type

__all__ = [
    "MAX_SNAPSHOT_BYTES",
    "MAX_SNAPSHOT_NODES",
    "SnapshotText",
    "admitted_snapshot",
    "build_snapshot",
    "get_snapshot",
    "is_owned_by",
    "preload_runtime_schema",
    "read_snapshot",
    "runtime_type_errors",
    "snapshot_name",
    "snapshot_text",
    "type_error_summary",
]

MAX_SNAPSHOT_BYTES: Final = MAX_CONFIGMAP_BYTES
"""The most text `data.runtime` may hold: the API server's limit for a whole ConfigMap's data, in bytes
(`core.MaxSecretSize`); `read_snapshot` counts characters, never more than the bytes."""

MAX_SNAPSHOT_NODES: Final = 100_000
"""The most YAML nodes a snapshot may decode to, aliases expanded (the largest default runtime has 188)."""

SHARED_PARSES: Final = 32
SHARED_TEXT_LIMIT: Final = 64 * 1024
SHARED_MAX_NODES: Final = 2000
"""The memo's bounds: at most 32 texts of at most 64 KiB, each at most 2,000 nodes once decoded."""

_CONFIGMAP = ("v1", "ConfigMap")
_INVALID = "invalid runtime snapshot"
_UNMARSHAL = f"{_INVALID}: unable to unmarshal the snapshot"
_RUNTIME_KINDS = (constants.TRAINING_RUNTIME_KIND, constants.CLUSTER_TRAINING_RUNTIME_KIND)
_RUNTIME_CRD = "trainer.kubeflow.org_trainingruntimes.yaml"
_MAX_REPORTED = 3
_NAME_LIMIT = 253
"""The longest `spec.runtimeRef` name, group and kind the TrainJob schema admits: echoed whole."""


def snapshot_name(trainjob: TrainJob) -> str:
    """`<trainjob>-runtime-snapshot`."""
    return TrainJobView(trainjob).name + constants.RUNTIME_SNAPSHOT_SUFFIX


def build_snapshot(
    trainjob: TrainJob, runtime: Mapping[str, Any], kind: str, *, text: str | None = None
) -> dict[str, Any]:
    """The snapshot ConfigMap of `runtime` (a TrainingRuntime or ClusterTrainingRuntime of `kind`); `text`
    is its `snapshot_text` when the caller has it already. Its size is not checked (`SnapshotText.problem`
    is the caller's)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": owned_object_metadata(trainjob, snapshot_name(trainjob)),
        "data": {constants.RUNTIME_SNAPSHOT_KEY: snapshot_text(runtime, kind).text if text is None else text},
    }


@dataclass(frozen=True, slots=True)
class SnapshotText:
    """A snapshot's `data.runtime` text and the YAML nodes it decodes to (counted up to one more than
    `MAX_SNAPSHOT_NODES`)."""

    text: str
    nodes: int

    def problem(self) -> str | None:
        """Why the snapshot cannot be stored and read back, or None. The API server refuses a ConfigMap whose
        data values add up to more than `MAX_SNAPSHOT_BYTES` bytes (UTF-8; Go `ValidateConfigMap`, `Too
        long: may not be more than 1048576 bytes`), and the snapshot is its only value; `read_snapshot`
        refuses more than `MAX_SNAPSHOT_NODES` nodes. Exact: the bytes counted are those the apply sends,
        the nodes those the read decodes."""
        size = utf8_length(self.text)
        if size > MAX_SNAPSHOT_BYTES:
            return (
                f"its runtime snapshot would be {size} bytes of YAML, more than a ConfigMap holds "
                f"({MAX_SNAPSHOT_BYTES} bytes)"
            )
        if self.nodes > MAX_SNAPSHOT_NODES:
            return (
                f"its runtime snapshot would hold more than {MAX_SNAPSHOT_NODES} YAML nodes (scalars, keys "
                "and collections), more than a snapshot is read back with"
            )
        return None


def snapshot_text(runtime: Mapping[str, Any], kind: str) -> SnapshotText:
    """`data.runtime` of the snapshot of `runtime`: the same for every TrainJob (owners are metadata)."""
    value = _go_json_value(runtime, kind)
    return SnapshotText(_dump(value), kubeyaml.node_count(value, limit=MAX_SNAPSHOT_NODES))


_MAX_RESOURCE_VERSION: Final = str(2**64 - 1)
_PLACEHOLDER_METADATA: Final[Mapping[str, Any]] = {
    "uid": "00000000-0000-0000-0000-000000000000",
    "creationTimestamp": "2006-01-02T15:04:05Z",
    "generation": 2**63 - 1,
}


def admitted_snapshot(runtime: Mapping[str, Any], kind: str) -> SnapshotText:
    """`snapshot_text` of a runtime being admitted, at least as long as that of the object stored from it:
    the API server sets `resourceVersion` after admission, so it is counted at its longest (20 digits), as
    are `uid`, `creationTimestamp` and `generation` when absent (an object not from the API server, such
    as `trainer-render`'s input). Conservative, by those few bytes at most; later edits of the metadata are
    not foreseen (the TrainJob webhook and the build check the stored object exactly)."""
    metadata = dict(as_dict(runtime.get("metadata")))
    for key, placeholder in _PLACEHOLDER_METADATA.items():
        metadata.setdefault(key, placeholder)
    metadata["resourceVersion"] = _MAX_RESOURCE_VERSION
    return snapshot_text({**runtime, "metadata": metadata}, kind)


def _go_json_value(runtime: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """The JSON value Go's `json.Marshal` makes of the typed runtime as upstream's cached client returns it:
    `apiVersion` and `kind` set (the cache reader sets them), `metadata` as the API server returned it, then
    Go's struct rules (`runtime.api.gojson.go_json_training_runtime`: which empty fields are written, which
    are omitted, quantities canonical, unknown fields dropped). `managedFields` are left out: the cache
    strips them at ingestion, so they are never here, and a render input's are dropped the same way."""
    metadata = {k: v for k, v in as_dict(runtime.get("metadata")).items() if k != "managedFields"}
    typed = {
        "apiVersion": constants.API_VERSION,
        "kind": kind,
        "metadata": metadata,
        "spec": runtime.get("spec"),
    }
    return go_json_training_runtime(typed)


def _dump(frozen: Mapping[str, Any]) -> str:
    """`kubeyaml.dump(frozen)`, memoised by content when small and plain JSON (what reads back equal from
    its JSON: not a NaN, an infinity or an integer beyond 64 bits, which `render` may be given)."""
    try:
        content = orjson.dumps(frozen, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return kubeyaml.dump(frozen)
    if len(content) <= SHARED_TEXT_LIMIT and orjson.loads(content) == frozen:
        return _dump_shared(content)
    return kubeyaml.dump(frozen)


@functools.lru_cache(maxsize=SHARED_PARSES)
def _dump_shared(content: bytes) -> str:
    return kubeyaml.dump(orjson.loads(content))


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _controller_uid(obj: Mapping[str, Any]) -> str | None:
    references = _mapping(obj.get("metadata")).get("ownerReferences")
    for ref in references if isinstance(references, list) else ():
        if isinstance(ref, dict) and ref.get("controller") is True:
            return str(ref.get("uid", ""))
    return None


def preload_runtime_schema() -> None:
    """Read the runtime CRD's schema now (~50 ms of YAML), so that no reconcile or admission pays for it:
    `functools.cache` does not make concurrent first callers wait for one another, so the first burst of
    TrainJobs had every worker parse it at once."""
    _runtime_schema()


@functools.cache
def _runtime_schema() -> Mapping[str, Any]:
    """The runtime CRD's `openAPIV3Schema` (both runtime kinds share it), read once from the package."""
    crd = kubeyaml.load((CRD_DIR / _RUNTIME_CRD).read_text(encoding="utf-8"))
    for version in crd["spec"]["versions"]:
        if f"{crd['spec']['group']}/{version['name']}" == constants.API_VERSION:
            return dict(version["schema"]["openAPIV3Schema"])
    raise LookupError(f"{CRD_DIR / _RUNTIME_CRD}: no {constants.API_VERSION} version")  # a packaging bug


_TYPES: dict[str, tuple[str, ...]] = {
    "object": ("object",),
    "array": ("array",),
    "string": ("string",),
    "integer": ("integer",),
    "number": ("number", "integer"),
    "boolean": ("boolean",),
}


def _type_errors(value: Any, schema: Mapping[str, Any], path: str, errors: list[str]) -> None:
    """Field errors where `value` has another JSON type than `schema` says (as Go's typed unmarshal finds
    them), or is a quantity (int-or-string with a `pattern`: `resource.Quantity`, whose unmarshal parses
    it) that does not parse; nulls of non-nullable fields are dropped, as the API server drops them.
    Unknown fields pass."""
    if len(errors) > _MAX_REPORTED:
        return
    actual = json_type(value)
    if schema.get("x-kubernetes-int-or-string"):
        if actual not in ("integer", "string"):
            errors.append(f"{path}: expected an integer or a string, found {actual}")
        elif "pattern" in schema:
            try:
                Quantity.parse(value)
            except InvalidQuantityError as exc:
                errors.append(f"{path}: {exc}")
        return
    kind = schema.get("type") or ("object" if "properties" in schema else None)
    if kind not in _TYPES:
        return
    if actual not in _TYPES[kind]:
        errors.append(f"{path}: expected {kind}, found {actual}")
        return
    if isinstance(value, dict):
        properties = _mapping(schema.get("properties"))
        extra = schema.get("additionalProperties")
        for key in list(value):
            child = properties.get(key, extra if isinstance(extra, dict) else None)
            if value[key] is None and not _mapping(child).get("nullable"):
                del value[key]
            elif isinstance(child, Mapping):
                _type_errors(value[key], child, f"{path}.{elide(key, 60)}", errors)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            _type_errors(item, schema["items"], f"{path}[{index}]", errors)


def _metadata_errors(metadata: Any) -> list[str]:
    if not isinstance(metadata, dict):
        return [f"metadata: expected object, found {json_type(metadata)}"]
    errors = [
        f"metadata.{key}: expected string, found {json_type(metadata[key])}"
        for key in ("name", "namespace", "uid")
        if key in metadata and not isinstance(metadata[key], str)
    ]
    for key in ("labels", "annotations"):
        items = metadata.get(key)
        if items is not None and not (
            isinstance(items, dict) and all(isinstance(v, str) for v in items.values())
        ):
            errors.append(f"metadata.{key}: expected a map of strings, found {json_type(items)}")
    return errors


def _parse(text: Any, max_nodes: int = MAX_SNAPSHOT_NODES) -> dict[str, Any]:
    """`data.runtime` as a runtime object whose fields have the CRD's JSON types (raises SnapshotError)."""
    if not isinstance(text, str):
        raise SnapshotError(f"{_UNMARSHAL}: the {constants.RUNTIME_SNAPSHOT_KEY!r} data is {json_type(text)}")
    if len(text) > MAX_SNAPSHOT_BYTES:
        raise SnapshotError(f"{_UNMARSHAL}: more than {MAX_SNAPSHOT_BYTES} characters")
    try:
        runtime = kubeyaml.load(text, max_nodes=max_nodes)
    except kubeyaml.YAMLInputError as exc:
        raise SnapshotError(f"{_UNMARSHAL}: {exc}") from exc
    if not isinstance(runtime, dict):
        raise SnapshotError(f"{_UNMARSHAL}: not a runtime object but {json_type(runtime)}")
    errors = runtime_type_errors(runtime)
    if errors:
        raise SnapshotError(f"{_UNMARSHAL}: not a runtime object: {type_error_summary(errors)}")
    return runtime


@functools.lru_cache(maxsize=SHARED_PARSES)
def _parse_shared(text: str) -> Mapping[str, Any]:
    """`_parse` of a small text, memoised (failures are not: `_parse_or_share` then parses in full)."""
    return _parse(text, SHARED_MAX_NODES)


def _parse_or_share(text: Any) -> Mapping[str, Any]:
    if isinstance(text, str) and len(text) <= SHARED_TEXT_LIMIT:
        try:
            return _parse_shared(text)
        except SnapshotError:
            pass  # invalid, or more nodes than the memo keeps: the full parse says which
    return _parse(text)


def runtime_type_errors(runtime: dict[str, Any]) -> list[str]:
    """Where a runtime object's fields have another JSON type than the runtime CRD declares, or a quantity
    does not parse (what Go's typed decoding refuses), as `<path>: expected <type>, found <type>` or
    `<path>: quantities must match ...`; the first few only. Nulls of
    non-nullable fields are dropped from `runtime` in place (as the API server drops them): pass a copy
    of a shared object. Unknown fields and the CRD's other rules (enums, bounds, CEL) are not checked."""
    errors = _metadata_errors(runtime.get("metadata", {}))
    for key in ("apiVersion", "kind"):
        if not isinstance(runtime.get(key, ""), str):
            errors.append(f"{key}: expected string, found {json_type(runtime[key])}")
    if runtime.get("spec") is None:
        runtime.pop("spec", None)
    else:
        _type_errors(
            runtime["spec"], _mapping(_runtime_schema().get("properties")).get("spec", {}), "spec", errors
        )
    return errors


def type_error_summary(errors: list[str]) -> str:
    """The first of `runtime_type_errors` and how many more: `spec.x: expected ... (and 2 more)`."""
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{errors[0]}{more}"


def read_snapshot(configmap: Mapping[str, Any], trainjob: TrainJob) -> Mapping[str, Any]:
    """The runtime object frozen in a snapshot ConfigMap, after upstream's checks (raises `SnapshotError`).
    Shared and read-only."""
    view = TrainJobView(trainjob)
    if not is_owned_by(configmap, trainjob):
        raise SnapshotError(f"{_INVALID}: a snapshot configmap exists but is owned by another object")
    text = _mapping(configmap.get("data")).get(constants.RUNTIME_SNAPSHOT_KEY)
    if text is None:
        raise SnapshotError(
            f'{_INVALID}: snapshot ConfigMap missing "{constants.RUNTIME_SNAPSHOT_KEY}" data key'
        )
    runtime = _parse_or_share(text)
    ref: Mapping[str, Any] = _mapping(view.spec.get("runtimeRef"))
    found = ObjectView(runtime)
    found_group = found.api_version.rpartition("/")[0]
    want_kind, want_group = ref.get("kind"), ref.get("apiGroup")
    if (
        (want_kind is not None and found.kind != want_kind)
        or (want_group is not None and found_group != want_group)
        or found.name != view.runtime_ref_name
    ):
        # Go's %q of each: quoted, and a tenant's control or bidirectional character escaped.
        expected = ", ".join(
            quote(str(v), _NAME_LIMIT)
            for v in (view.runtime_ref_name, want_group or "<any>", want_kind or "<any>")
        )
        actual = ", ".join(quote(str(v)) for v in (found.name, found_group, found.kind))
        raise SnapshotError(
            f"{_INVALID}: the snapshot refers to the wrong runtime: expecting a runtime with name, "
            f"api group and kind of {expected} but found runtime with name, api group and kind of {actual}"
        )
    if found.kind not in _RUNTIME_KINDS:
        raise SnapshotError(f"{_UNMARSHAL}: not a runtime object: kind {elide(found.kind)!r}")
    return runtime


def is_owned_by(configmap: Mapping[str, Any], trainjob: TrainJob) -> bool:
    """Whether the TrainJob is the ConfigMap's controller: only then is the snapshot its own (a TrainJob
    deleted and created again under its name may meet its predecessor's until garbage collection)."""
    return _controller_uid(configmap) == TrainJobView(trainjob).uid


def get_snapshot(reader: Reader, trainjob: TrainJob) -> Mapping[str, Any] | None:
    """The snapshot ConfigMap of the TrainJob, or None (raises `ReadError` when it cannot tell)."""
    return reader.get(*_CONFIGMAP, snapshot_name(trainjob), TrainJobView(trainjob).namespace)
