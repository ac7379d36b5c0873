"""`trainer-render`: print the objects the controller would apply for a TrainJob, without a cluster.

    trainer-render TRAINJOB.yaml --runtime config/runtimes/ [--runtime more.yaml] [--existing cluster.yaml]

Go origin: none; upstream has no offline renderer. It strings together what a reconcile and the admission
webhooks do (`runtime.core.RuntimeRegistry.validate` and `new_objects`) over a `MemoryReader` filled from
files. docs/render.md is the user guide.

What it does, in order:
1. Reads the TrainJob file (exactly one TrainJob; runtimes in the same file are used too), every
   TrainingRuntime and ClusterTrainingRuntime under each `--runtime` path (a file or a directory searched
   recursively for *.yaml, *.yml and *.json; other documents, such as kustomization.yaml, are skipped),
   and the objects of each `--existing` path (objects already in the cluster: a JobSet, a PodGroup, an MPI
   or Flux Secret, PriorityClasses, and with the `TrainJobStatus` gate the status server's CA Secret in
   `--operator-namespace`). Any path may be `-` (stdin), a FIFO or a process substitution. YAML is read
   as kubectl reads it (`runtime.kubeyaml`: go-yaml v2's resolver, Go's JSON conversion, its limit on
   alias expansion), so `1e1` is 10 and `1:30` a string.
2. Checks each TrainJob and runtime as the API server does on create (for runtimes, also their validating
   webhooks' replicated-job rules, `runtime.core.runtime_rules`), and applies the schema defaults
   (`runtime.schema.SchemaChecker`: names, the structural schema, the CRD's CEL rules; CRDs from
   `--crd-dir`, default those shipped in this package). Unknown fields are errors, as with kubectl's strict
   field validation. An object larger than etcd stores (1.5 MiB as JSON) gets a warning. A cluster-scoped
   object (a ClusterTrainingRuntime, a PriorityClass) loses any `metadata.namespace`, as the API server
   stores it.
3. Runs the TrainJob validating webhook's checks, then builds the objects in apply order: the runtime
   snapshot ConfigMap, then each plugin's objects in registry order. The plugins are the built-ins, then
   the third-party ones `--plugins a,b` names (else the `--config` file's `plugins.enabled`), loaded from
   the installed `kubeflow_trainer.plugins` entry points by the manager's loader
   (`runtime.framework.load_third_party`, so a name the manager would refuse is refused here too).
4. Prints them as multi-document YAML (keys sorted, multi-line strings as literal blocks).

Guarantees:
- Deterministic: the same input gives byte-identical output. The TrainJob's UID defaults to
  `PLACEHOLDER_UID`; the MPI SSH key pair and the Flux CURVE key pair are readable placeholders unless
  `--ssh-keys=generate` or `--curve-keys=generate`.
  Nothing printed depends on the clock.
- Invalid input (a YAML syntax error, a missing file, a schema violation, a webhook rejection, a runtime
  that is not found, a plugin that cannot build) exits with status 2 and field paths and messages on
  stderr, never a traceback. Status 1 means a bug in this program (`--traceback` shows it). A refusal of
  a whole document names the document and the field: `<stdin>#2: kind: "Foo" is not TrainJob,
  TrainingRuntime or ClusterTrainingRuntime`, `job.yaml: <root>: must be of type object (a YAML mapping),
  not array`, `cluster.yaml#3: metadata.name: missing (an object in the cluster has one)`.
- Bounded on hostile input: an alias bomb or deep nesting is refused after one linear read; one input
  holds at most `MAX_INPUT_BYTES`; an error line repeats at most `runtime.echo.ECHO_LIMIT` characters of
  a value and is at most `_LINE_LIMIT` long; a list of problems shows at most
  `runtime.framework.validation.PER_KIND` of one kind and `MAX_LINES` in all, each time followed by
  `and K more` (`error_lines`). An unknown feature gate is an error, as in the manager.
- A TrainJob managed by another controller (`spec.managedBy`) or already finished renders as nothing, as
  the controller applies nothing for it.

Deliberately missing: the JobSet and core API defaults applied to the rendered objects are the API
server's; status is not computed. Without schemas (`--no-schema`, or no CRDs), input of the wrong shape is
refused with the exception the pipeline raised on it, not a field path.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
import traceback
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

import yaml

from runtime import kubeyaml
from runtime.api import constants
from runtime.api.v1alpha1 import TrainJob
from runtime.api.views import ObjectView, TrainJobView, copy_json
from runtime.core import RuntimeRegistry
from runtime.core.runtime_rules import validate_cluster_training_runtime, validate_training_runtime
from runtime.echo import ECHO_LIMIT, elide, escape
from runtime.features import FeatureGateError, FeatureGates, parse_feature_gates
from runtime.framework import (
    FieldError,
    Framework,
    FrameworkError,
    MemoryReader,
    PluginContext,
    PluginEntry,
    PluginFactory,
    PluginLoadError,
    PluginRegistry,
    error_lines,
    load_third_party,
    object_key,
)
from runtime.plugins import BUILTIN_ORDER, builtin_registry
from runtime.plugins.flux import CurveKeyGenerator, CurveKeyPair, Flux, generate_curve_key_pair
from runtime.plugins.mpi import MPI, KeyGenerator, SSHKeyPair, generate_ssh_key_pair
from runtime.plugins.trainjobstatus import (
    DEFAULT_OPERATOR_NAMESPACE,
    StatusServerSettings,
    TrainJobStatusPlugin,
)
from runtime.plugins.volcano import PRIORITY_CLASS_API_VERSION
from runtime.resources import InvalidQuantityError
from runtime.schema import CRD_DIR, CRDError, SchemaChecker, namespace_problems, oversize_warning
from runtime.schema import json_type as _json_type

__all__ = [
    "PLACEHOLDER_CURVE_KEYS",
    "PLACEHOLDER_SSH_KEYS",
    "PLACEHOLDER_UID",
    "BlockDumper",
    "Document",
    "RenderError",
    "RenderOptions",
    "RenderResult",
    "SchemaChecker",
    "dump_yaml",
    "load_documents",
    "main",
    "render",
]

PLACEHOLDER_UID = "00000000-0000-0000-0000-000000000000"
"""The TrainJob UID when neither the file nor `--uid` gives one (it appears in every ownerReference)."""

PLACEHOLDER_SSH_KEYS = SSHKeyPair(
    private_key=b"<ECDSA P-521 private key: generated by the controller when the Secret is created>\n",
    public_key=b"ecdsa-sha2-nistp521 <public key: generated by the controller with the private key>\n",
)
"""What the MPI Secret holds by default in render output: readable text, not a usable key."""

PLACEHOLDER_CURVE_KEYS = CurveKeyPair(
    public_key="<Z85 public key: generated by the controller when the Secret is created>",
    secret_key="<Z85 secret key: generated by the controller with the public key>",
)
"""The key pair in the Flux CURVE certificate by default in render output: readable text, not a key."""

DEFAULT_CRD_DIR = CRD_DIR
"""Where `--crd-dir` defaults to: the CRDs shipped with this package (`runtime.schema.CRD_DIR`)."""

EXIT_OK = 0
EXIT_INTERNAL_ERROR = 1
EXIT_INVALID = 2

_RUNTIME_KINDS = (constants.TRAINING_RUNTIME_KIND, constants.CLUSTER_TRAINING_RUNTIME_KIND)
_CLUSTER_SCOPED = frozenset(
    {
        (constants.API_VERSION, constants.CLUSTER_TRAINING_RUNTIME_KIND),
        (PRIORITY_CLASS_API_VERSION, "PriorityClass"),
    }
)
"""The cluster-scoped kinds the pipeline reads (runtimes, and the PriorityClasses Volcano checks)."""
_SUFFIXES = (".yaml", ".yml", ".json")
_LINE_LIMIT = 5 * ECHO_LIMIT
"""The longest line of an error: room for a field path, a capped value and a message."""


class RenderError(Exception):
    """The input cannot be rendered; `problems` say why (field paths and messages), one per line."""

    def __init__(self, title: str, problems: Sequence[FieldError | str] = ()) -> None:
        # Values are capped where they are echoed (`runtime.echo.elide`); this caps what any one line can
        # still grow to (a message quoting a long name), and `error_lines` how many lines there are (at most
        # `PER_KIND` of one kind, `MAX_LINES` in all), so no input can flood a terminal or a log.
        title = elide(title, _LINE_LIMIT)
        lines = [elide(p, _LINE_LIMIT) for p in error_lines(problems)]
        super().__init__(title if not lines else f"{title}: " + "; ".join(lines))
        self.title = title
        self.problems = tuple(lines)


# ---------------------------------------------------------------------------------------------------------
# Reading files


STDIN = "-"
"""The path that means standard input, as with `kubectl apply -f -`."""

MAX_INPUT_BYTES = 32 * 2**20
MAX_INPUT_NODES = 250_000
"""The most YAML nodes one input may decode to (aliases expanded): a runtime has hundreds, a directory of them
thousands; decoding costs about 12 µs a node, so this bounds a hostile input's time to a few seconds."""
"""The most one input file (or stdin) may hold: the Trainer CRDs, the largest inputs, are under 1 MiB."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Document(ObjectView):
    """One YAML document of a file: where it came from, and the object (read through `ObjectView`)."""

    obj: dict[str, Any]
    source: str
    """`path` for a one-document file, `path#N` (1-based) otherwise; `<stdin>` for standard input."""

    def describe(self) -> str:
        return f'{elide(str(self.kind or "document"))} "{elide(str(self.name))}" ({self.source})'


def _files(path: Path, skipped: list[str]) -> list[Path]:
    """The files to read for `path`: itself (a regular file, a FIFO, `/dev/stdin`, `-`), or a directory's
    *.yaml, *.yml and *.json files, recursively and sorted (symbolic links to directories not followed).
    Subdirectories that cannot be read go to `skipped`; a directory without a YAML or JSON file is an
    error that says what it holds."""
    if str(path) == STDIN:
        return [path]
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise RenderError(f"{path}: no such file or directory") from exc
    except OSError as exc:
        raise RenderError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if not stat.S_ISDIR(mode):
        return [path]

    unreadable: list[str] = []

    def report(exc: OSError) -> None:
        unreadable.append(f"{exc.filename}: skipped, cannot read the directory: {exc.strerror or exc}")

    files: list[Path] = []
    others = 0
    for directory, _, names in os.walk(path, onerror=report):
        for name in names:
            file = Path(directory, name)
            if file.suffix in _SUFFIXES and file.is_file():
                files.append(file)
            else:
                others += 1
    skipped.extend(unreadable)
    if not files:
        found = [f"{others} other file{'s' if others != 1 else ''}"] if others else []
        found += [f"{len(unreadable)} unreadable director{'ies' if len(unreadable) != 1 else 'y'}"] * bool(
            unreadable
        )
        holds = ", ".join(found) or "nothing"
        raise RenderError(
            f"{path}: no *.yaml, *.yml or *.json file in the directory (found {holds})", unreadable
        )
    return sorted(files)


def _read(path: Path, stdin: IO[Any] | None) -> str:
    """The text of a file or of stdin (`-`): at most `MAX_INPUT_BYTES`, UTF-8."""
    name = "<stdin>" if str(path) == STDIN else str(path)
    try:
        if str(path) == STDIN:
            data: str | bytes = (stdin or sys.stdin.buffer).read(MAX_INPUT_BYTES + 1)
        else:
            with path.open("rb") as stream:  # also a FIFO or a character device: read to its end
                data = stream.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        raise RenderError(f"{name}: cannot read: {exc.strerror or exc}") from exc
    if len(data) > MAX_INPUT_BYTES:
        raise RenderError(f"{name}: more than {MAX_INPUT_BYTES // 2**20} MiB; not read")
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RenderError(f"{name}: not UTF-8 text: {exc.reason} at byte {exc.start}") from exc


def load_documents(
    path: Path, *, stdin: IO[Any] | None = None, skipped: list[str] | None = None
) -> list[Document]:
    """Every non-empty document of a file, of stdin (`-`), or of every YAML/JSON file under a directory.

    YAML is read as kubectl reads it (`runtime.kubeyaml`: go-yaml's resolver, then Go's JSON conversion,
    with its limit on alias expansion). What a directory holds but cannot be read is skipped and reported
    in `skipped`; anything else that cannot be read or parsed raises `RenderError`.
    """
    documents: list[Document] = []
    skipped = [] if skipped is None else skipped
    in_directory = str(path) != STDIN and path.is_dir()
    for file in _files(path, skipped):
        name = "<stdin>" if str(file) == STDIN else str(file)
        try:
            text = _read(file, stdin)
        except RenderError as exc:
            if not in_directory:
                raise
            skipped.append(f"{exc.title}: skipped")
            continue
        try:
            loaded = [d for d in kubeyaml.load_all(text, max_nodes=MAX_INPUT_NODES) if d is not None]
        except kubeyaml.YAMLInputError as exc:
            raise RenderError(f"{name}: invalid YAML: {exc}") from exc
        for index, obj in enumerate(loaded, start=1):
            source = name if len(loaded) == 1 else f"{name}#{index}"
            if not isinstance(obj, dict):
                raise RenderError(
                    f"{source}: {_ROOT}: must be of type object (a YAML mapping), not {_json_type(obj)}"
                )
            documents.append(Document(source=source, obj=obj))
    return documents


# ---------------------------------------------------------------------------------------------------------
# What a document must be: each refusal names the document (its source) and the field.

_ROOT = "<root>"
"""The field path of a whole document, as the schema checks print it (`runtime.schema`)."""


def _echo(value: Any) -> str:
    """A value from input as a message repeats it: JSON (`"Foo"`, `5`, `null`), cut by `elide`."""
    try:
        return elide(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError):  # an integer of over 4300 digits (only parsed YAML holds one)
        return "<a value too large to print>"


def _one_of(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _type_problem(document: Document, kinds: Sequence[str]) -> str | None:
    """Why the document is not of one of `kinds` in `trainer.kubeflow.org/v1alpha1`, as `field: message`;
    None when it is. The kind is checked first: it says best what the document is."""
    obj = document.obj
    if "kind" not in obj:
        return f"kind: missing (expected {_one_of(kinds)})"
    if obj["kind"] not in kinds:
        return f"kind: {_echo(obj['kind'])} is not {_one_of(kinds)}"
    if "apiVersion" not in obj:
        return f"apiVersion: missing (expected {constants.API_VERSION})"
    if obj["apiVersion"] != constants.API_VERSION:
        return f"apiVersion: {_echo(obj['apiVersion'])} is not {constants.API_VERSION}"
    return None


def _check_type(document: Document, kinds: Sequence[str]) -> None:
    if (problem := _type_problem(document, kinds)) is not None:
        raise RenderError(f"{document.source}: {problem}")


def _object_problem(obj: Mapping[str, Any]) -> str | None:
    """Why `obj` cannot be an object in the cluster (an `--existing` one), as `field: message`; None when it
    can: `apiVersion`, `kind` and `metadata.name` are non-empty strings, `metadata.namespace` a string."""
    metadata = obj.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        return f"metadata: must be of type object, not {_json_type(metadata)}"
    metadata = metadata or {}
    required = (
        ("apiVersion", obj.get("apiVersion")),
        ("kind", obj.get("kind")),
        ("metadata.name", metadata.get("name")),
    )
    for path, value in required:
        if value is None or value == "":
            return f"{path}: missing (an object in the cluster has one)"
        if not isinstance(value, str):
            return f"{path}: {_echo(value)} is not a string"
    namespace = metadata.get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        return f"metadata.namespace: {_echo(namespace)} is not a string"
    return None


# ---------------------------------------------------------------------------------------------------------
# Rendering


def placeholder_ssh_keys() -> SSHKeyPair:
    """The `KeyGenerator` behind `--ssh-keys=placeholder`."""
    return PLACEHOLDER_SSH_KEYS


def placeholder_curve_keys() -> CurveKeyPair:
    """The `CurveKeyGenerator` behind `--curve-keys=placeholder`."""
    return PLACEHOLDER_CURVE_KEYS


@dataclass(frozen=True, slots=True, kw_only=True)
class RenderOptions:
    """How to render (the command-line options, as values)."""

    namespace: str | None = None
    """The TrainJob's namespace when its file has none (then `default`)."""
    uid: str | None = None
    """The TrainJob's UID when its file has none (then `PLACEHOLDER_UID`)."""
    feature_gates: frozenset[str] = frozenset()
    config: Mapping[str, Any] = field(default_factory=dict)
    """The controller configuration plugins read (PluginContext.config)."""
    operator_namespace: str = DEFAULT_OPERATOR_NAMESPACE
    """The controller's namespace (in a cluster, its pod's): where the TrainJobStatus plugin's status server
    Service and CA Secret are."""
    keygen: KeyGenerator = placeholder_ssh_keys
    """The MPI SSH key pair (`--ssh-keys`)."""
    curve_keygen: CurveKeyGenerator = placeholder_curve_keys
    """The Flux CURVE key pair (`--curve-keys`)."""
    schemas: SchemaChecker | None = None
    """None skips the schema checks and defaults."""
    plugins: tuple[PluginEntry, ...] = ()
    """Third-party plugins, run after the built-ins in this order (`--plugins`, else the `--config` file's
    `plugins.enabled`; loaded by `runtime.framework.load_third_party`, as the manager loads them)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RenderResult:
    """The objects to apply, in order, and what to tell the user besides."""

    objects: list[dict[str, Any]]
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    """Why nothing is rendered, when nothing is."""


def _checked(document: Document, schemas: SchemaChecker | None, warnings: list[str]) -> dict[str, Any]:
    """The document's object, schema-checked and defaulted, with a `metadata.name`; a warning goes to
    `warnings` when it is too large for the API server to store."""
    if schemas is None:
        obj, errors = cast(dict[str, Any], copy_json(document.obj)), list[FieldError]()
    else:
        obj, errors = schemas.check(document.obj)
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str) or not metadata["name"]:
        errors.append(FieldError.required("metadata.name", "name or generateName is required"))
    if errors:
        raise RenderError(f"{document.describe()} is invalid", errors)
    if (warning := oversize_warning(obj, document.describe())) is not None:
        warnings.append(warning)
    return obj


def _as_stored(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` as the API server stores it: a cluster-scoped object's `metadata.namespace` is dropped, as
    kube-apiserver clears it on create (`rest.EnsureObjectNamespaceMatchesRequestNamespace`), so that
    `kubectl apply` of a ClusterTrainingRuntime or PriorityClass written with a namespace succeeds and the
    object is found by name alone."""
    metadata = obj.get("metadata")
    if (str(obj.get("apiVersion")), str(obj.get("kind"))) in _CLUSTER_SCOPED and isinstance(metadata, dict):
        metadata.pop("namespace", None)
    return obj


def _status_plugin(operator_namespace: str) -> PluginFactory:
    def factory(context: PluginContext) -> TrainJobStatusPlugin:
        settings = StatusServerSettings.from_config(context.config, operator_namespace=operator_namespace)
        return TrainJobStatusPlugin(context, settings=settings)

    return factory


def _registry(options: RenderOptions) -> PluginRegistry:
    keygen, curve_keygen = options.keygen, options.curve_keygen
    entries = []
    for entry in builtin_registry(options.feature_gates):
        if entry.name == MPI.name:
            entries.append(PluginEntry(MPI.name, lambda context: MPI(context, keygen=keygen)))
        elif entry.name == Flux.name:
            entries.append(PluginEntry(Flux.name, lambda context: Flux(context, keygen=curve_keygen)))
        elif entry.name == TrainJobStatusPlugin.name:
            entries.append(PluginEntry(entry.name, _status_plugin(options.operator_namespace)))
        else:
            entries.append(entry)
    return PluginRegistry((*entries, *options.plugins))


def render(
    trainjob_document: Document,
    runtimes: Iterable[Document] = (),
    existing: Iterable[Document] = (),
    options: RenderOptions | None = None,
) -> RenderResult:
    """The objects the controller would apply for the TrainJob; raises `RenderError` for invalid input.

    Without schemas (`--no-schema`, or no CRDs found) nothing has checked the input's shape, which the
    pipeline relies on: a `TypeError`, `AttributeError`, `KeyError` or `ValueError` it raises then means
    input that its CRD would refuse, and is reported as such.
    """
    options = options or RenderOptions()
    try:
        return _render(trainjob_document, runtimes, existing, options)
    except (TypeError, AttributeError, KeyError, ValueError) as exc:
        if options.schemas is not None:
            raise
        raise RenderError(
            f"{trainjob_document.source}: cannot be rendered without schema checks",
            [
                f"{type(exc).__name__}: {exc}",
                "a TrainJob or runtime does not have the shape of its CRD; drop --no-schema (or pass "
                "--crd-dir) to see which field",
            ],
        ) from exc


def _render(
    document: Document, runtimes: Iterable[Document], existing: Iterable[Document], options: RenderOptions
) -> RenderResult:
    _check_type(document, (constants.TRAINJOB_KIND,))
    runtimes, existing = list(runtimes), list(existing)
    for runtime_document in runtimes:
        _check_type(runtime_document, _RUNTIME_KINDS)
    for existing_document in existing:
        if (problem := _object_problem(existing_document.obj)) is not None:
            raise RenderError(f"{existing_document.source}: {problem}")
    warnings: list[str] = []
    trainjob = _checked(document, options.schemas, warnings)
    metadata = trainjob["metadata"]
    namespace = metadata.get("namespace")
    if options.namespace and namespace and namespace != options.namespace:
        raise RenderError(
            f"{document.source}: metadata.namespace: {_echo(namespace)} does not match "
            f"--namespace {_echo(options.namespace)}"
        )
    if options.namespace:
        problems = namespace_problems(options.namespace)
        if problems:
            raise RenderError(f"--namespace {_echo(options.namespace)} is not a namespace name", problems)
    metadata["namespace"] = namespace or options.namespace or "default"
    metadata.setdefault("uid", options.uid or PLACEHOLDER_UID)

    objects: dict[tuple[str, str, str, str], tuple[str, dict[str, Any]]] = {}
    for runtime_document in runtimes:
        runtime = _as_stored(_checked(runtime_document, options.schemas, warnings))
        admission = (
            validate_training_runtime(runtime)
            if runtime_document.kind == constants.TRAINING_RUNTIME_KIND
            else validate_cluster_training_runtime(runtime)
        )
        if admission.errors:
            raise RenderError(f"{runtime_document.describe()} is invalid", admission.errors)
        warnings.extend(admission.warnings)
        if runtime_document.kind == constants.TRAINING_RUNTIME_KIND:
            runtime["metadata"].setdefault("namespace", metadata["namespace"])
        key = object_key(runtime)
        if key in objects:
            raise RenderError(
                f"{runtime_document.source}: metadata.name: {elide(runtime_document.kind)} "
                f'"{elide(runtime_document.name)}" is defined twice (also in {objects[key][0]})'
            )
        objects[key] = (runtime_document.source, runtime)
    for existing_document in existing:
        obj = _as_stored(cast(dict[str, Any], copy_json(existing_document.obj)))
        objects.setdefault(object_key(obj), (existing_document.source, obj))
    reader = MemoryReader(obj for _, obj in objects.values())

    view = TrainJobView(trainjob)
    name = f"{constants.TRAINJOB_KIND} {view.namespace}/{view.name}"
    if not view.is_managed_by_trainer:
        note = f"{name} is managed by {view.managed_by}: nothing to apply"
        return RenderResult(objects=[], warnings=tuple(warnings), notes=(note,))
    if view.is_finished:
        note = f"{name} has finished: nothing to apply"
        return RenderResult(objects=[], warnings=tuple(warnings), notes=(note,))

    try:
        framework = Framework(
            _registry(options), PluginContext(config=options.config, feature_gates=options.feature_gates)
        )
    except FrameworkError as exc:
        raise RenderError("cannot set up the plugins", [str(exc)]) from exc
    registry = RuntimeRegistry(framework)
    typed = cast(TrainJob, trainjob)
    verdict = registry.validate(None, typed, reader)
    if verdict.errors:
        raise RenderError(f"{name} is invalid", verdict.errors)
    try:
        built = registry.new_objects(typed, reader)
    except (FrameworkError, InvalidQuantityError) as exc:
        raise RenderError(f"cannot build the objects of {name}", [str(exc)]) from exc
    return RenderResult(objects=built, warnings=(*warnings, *verdict.warnings))


# ---------------------------------------------------------------------------------------------------------
# Output


class BlockDumper(yaml.SafeDumper):
    """PyYAML's safe dumper with multi-line strings (scripts, the runtime snapshot, descriptions) as literal
    blocks, so they read as written; the one such dumper of the repository (`hack/` uses it too)."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


BlockDumper.add_representer(str, _represent_str)


def dump_yaml(objects: Sequence[Mapping[str, Any]]) -> str:
    """Multi-document YAML, one document per object, keys sorted ("" for no objects)."""
    return "".join(
        ("---\n" if index else "")
        + yaml.dump(
            obj, Dumper=BlockDumper, sort_keys=True, default_flow_style=False, allow_unicode=True, width=2**16
        )
        for index, obj in enumerate(objects)
    )


# ---------------------------------------------------------------------------------------------------------
# Command line


def _config_feature_gates(config: Mapping[str, Any], source: Path) -> FeatureGates:
    """The gates a Configuration's `featureGates` map sets (the manager's starting point)."""
    gates = config.get("featureGates")
    if gates is None:
        return FeatureGates()
    where = f"--config {source}: featureGates"
    if not isinstance(gates, dict) or not all(isinstance(v, bool) for v in gates.values()):
        raise RenderError(f"{where} must map names to true or false")
    try:
        return FeatureGates({str(name): enabled for name, enabled in gates.items()})
    except FeatureGateError as exc:
        raise RenderError(f"{where}: {exc}") from exc


def _parse_feature_gates(values: Sequence[str], start: FeatureGates | None = None) -> frozenset[str]:
    """The gates that are on: `start` (the configuration's) with each `--feature-gates` setting applied in
    turn, parsed as the manager parses its flag (`runtime.features`)."""
    gates = start or FeatureGates()
    for value in values:
        try:
            gates = gates.with_overrides(parse_feature_gates(value))
        except FeatureGateError as exc:
            raise RenderError(f"--feature-gates: {exc}") from exc
    return gates.enabled_set()


def _config_plugins(config: Mapping[str, Any], source: Path) -> tuple[str, ...]:
    """The names a Configuration's `plugins.enabled` lists (the manager's decoder checks the rest)."""
    section = config.get("plugins")
    enabled = section.get("enabled") if isinstance(section, dict) else None
    if section is not None and not isinstance(section, dict):
        raise RenderError(f"--config {source}: plugins must be an object with a list enabled")
    if enabled is None:
        return ()
    if not isinstance(enabled, list) or not all(isinstance(name, str) for name in enabled):
        raise RenderError(f"--config {source}: plugins.enabled must be a list of plugin names")
    return tuple(enabled)


def _plugins(flag: str | None, config: Mapping[str, Any], source: Path | None) -> tuple[PluginEntry, ...]:
    """The third-party plugins to run: `--plugins` (comma-separated names; empty: none) when given, else the
    `--config` file's `plugins.enabled`, loaded from the installed `kubeflow_trainer.plugins` entry points
    as the manager loads them."""
    if flag is not None:
        names, path = tuple(name.strip() for name in flag.split(",") if name.strip()), "--plugins"
    elif source is not None:
        names, path = _config_plugins(config, source), "plugins.enabled"
    else:
        return ()
    try:
        return load_third_party(names, builtins=BUILTIN_ORDER, path=path)
    except PluginLoadError as exc:
        where = "--plugins" if flag is not None else f"--config {source}"
        raise RenderError(f"{where}: cannot load the plugins", exc.errors) from exc


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trainer-render",
        description="Print the objects the Kubeflow Trainer controller would apply for a TrainJob, as YAML.",
        epilog="Exit status: 0 rendered, 2 invalid input, 1 internal error. See docs/render.md.",
    )
    parser.add_argument(
        "trainjob", type=Path, metavar="TRAINJOB.yaml", help="the TrainJob (and maybe runtimes)"
    )
    parser.add_argument(
        "--runtime",
        "-r",
        dest="runtimes",
        type=Path,
        action="append",
        default=[],
        metavar="PATH",
        help="a (Cluster)TrainingRuntime file, or a directory searched recursively (repeatable)",
    )
    parser.add_argument(
        "--existing",
        type=Path,
        action="append",
        default=[],
        metavar="PATH",
        help="objects already in the cluster, e.g. a running JobSet or a PriorityClass (repeatable)",
    )
    parser.add_argument(
        "--namespace", "-n", help="the TrainJob's namespace when its file has none (default: default)"
    )
    parser.add_argument(
        "--uid", help=f"the TrainJob's UID when its file has none (default: {PLACEHOLDER_UID})"
    )
    parser.add_argument(
        "--feature-gates",
        action="append",
        default=[],
        metavar="NAME=BOOL,...",
        help="controller feature gates, e.g. TrainJobStatus=true (override the --config file's featureGates)",
    )
    parser.add_argument("--config", type=Path, metavar="PATH", help="the controller Configuration (YAML)")
    parser.add_argument(
        "--plugins",
        metavar="NAME,...",
        help="third-party plugins to run after the built-ins, by kubeflow_trainer.plugins entry-point name "
        "(replaces the --config file's plugins.enabled; empty: none)",
    )
    parser.add_argument(
        "--operator-namespace",
        default=DEFAULT_OPERATOR_NAMESPACE,
        metavar="NS",
        help="the controller's namespace: where the TrainJobStatus gate finds the status server "
        f"(default: {DEFAULT_OPERATOR_NAMESPACE})",
    )
    parser.add_argument(
        "--ssh-keys",
        choices=("placeholder", "generate"),
        default="placeholder",
        help="the MPI SSH key pair: readable placeholder text (default), or a freshly generated key",
    )
    parser.add_argument(
        "--curve-keys",
        choices=("placeholder", "generate"),
        default="placeholder",
        help="the Flux CURVE key pair: readable placeholder text (default), or a freshly generated key",
    )
    parser.add_argument(
        "--crd-dir",
        type=Path,
        help="the Trainer CRDs to check against (default: those shipped with this package)",
    )
    parser.add_argument("--no-schema", action="store_true", help="skip the CRD schema checks and defaults")
    parser.add_argument("--traceback", action="store_true", help="show the traceback of an internal error")
    return parser


def _options(
    args: argparse.Namespace,
    warn: list[str],
    preloaded: SchemaChecker | None,
    *,
    stdin: IO[Any] | None = None,
) -> RenderOptions:
    schemas: SchemaChecker | None = None
    if args.no_schema:
        pass
    elif preloaded is not None:
        schemas = preloaded
    else:
        crd_dir: Path = args.crd_dir or DEFAULT_CRD_DIR
        if crd_dir.is_dir():
            try:
                schemas = SchemaChecker.from_crd_dir(crd_dir)
            except CRDError as exc:
                raise RenderError(f"--crd-dir: {exc}") from exc
        elif args.crd_dir is not None:
            raise RenderError(f"--crd-dir {crd_dir}: no such directory")
        else:
            warn.append(f"CRDs not found at {crd_dir}: schema checks and defaults skipped (pass --crd-dir)")
    config: Mapping[str, Any] = {}
    config_gates: FeatureGates | None = None
    if args.config is not None:
        documents = load_documents(args.config, stdin=stdin)
        if len(documents) != 1:
            raise RenderError(
                f"--config {args.config}: expected one document, found {len(documents)}",
                [f"found {_summary(documents)}"] if documents else [],
            )
        config = documents[0].obj
        config_gates = _config_feature_gates(config, args.config)
    return RenderOptions(
        namespace=args.namespace,
        uid=args.uid,
        feature_gates=_parse_feature_gates(args.feature_gates, config_gates),
        config=config,
        operator_namespace=args.operator_namespace,
        keygen=generate_ssh_key_pair if args.ssh_keys == "generate" else placeholder_ssh_keys,
        curve_keygen=generate_curve_key_pair if args.curve_keys == "generate" else placeholder_curve_keys,
        schemas=schemas,
        plugins=_plugins(args.plugins, config, args.config),
    )


def _summary(documents: Sequence[Document], limit: int = 5) -> str:
    """What a file held, for an error: `Kind "name" (source)`, a few of them."""
    shown = ", ".join(d.describe() for d in documents[:limit])
    more = f" and {len(documents) - limit} more" if len(documents) > limit else ""
    return f"{shown}{more}" if documents else "no documents"


def _split_trainjob_file(path: Path, *, stdin: IO[Any] | None = None) -> tuple[Document, list[Document]]:
    """The one TrainJob of the file and the runtimes beside it; any other document is an error that names
    it and its `kind` or `apiVersion`."""
    documents = load_documents(path, stdin=stdin)
    for document in documents:
        _check_type(document, (constants.TRAINJOB_KIND, *_RUNTIME_KINDS))
    trainjobs = [d for d in documents if d.kind == constants.TRAINJOB_KIND]
    others = [d for d in documents if d.kind != constants.TRAINJOB_KIND]
    name = "<stdin>" if str(path) == STDIN else str(path)
    if not documents:  # no document, so no field to name
        raise RenderError(f"{name}: no documents (expected exactly one {constants.TRAINJOB_KIND})")
    if not trainjobs:
        raise RenderError(
            f"{name}: kind: no document is a {constants.TRAINJOB_KIND} (expected exactly one)",
            [f"found {_summary(documents)}"],
        )
    if len(trainjobs) > 1:
        raise RenderError(
            f"{trainjobs[1].source}: kind: a second {constants.TRAINJOB_KIND} (the first is "
            f"{trainjobs[0].source}): a file holds exactly one"
        )
    return trainjobs[0], others


def _is_runtime(document: Document) -> bool:
    return _type_problem(document, _RUNTIME_KINDS) is None


def _runtime_documents(
    paths: Sequence[Path], *, stdin: IO[Any] | None = None, skipped: list[str] | None = None
) -> list[Document]:
    """The runtimes under each `--runtime` path; other documents are skipped, but a path that holds no
    runtime at all is an error that says what it holds."""
    runtimes: list[Document] = []
    for path in paths:
        documents = load_documents(path, stdin=stdin, skipped=skipped)
        found = [d for d in documents if _is_runtime(d)]
        if not found:
            kinds = f"{constants.TRAINING_RUNTIME_KIND} or {constants.CLUSTER_TRAINING_RUNTIME_KIND}"
            raise RenderError(
                f"--runtime {'<stdin>' if str(path) == STDIN else path}: no {kinds} "
                f"({constants.API_VERSION}) found",
                [f"found {_summary(documents)}", *(skipped or ())],
            )
        if skipped is not None:  # beside runtimes, a document of another kind (or version) is skipped: say so
            skipped.extend(
                f"{d.source}: skipped {elide(d.describe())}: not a {constants.API_VERSION} runtime"
                for d in documents
                if not _is_runtime(d) and d.kind != "Kustomization"
            )
        runtimes.extend(found)
    return runtimes


def run(
    argv: Sequence[str] | None = None,
    *,
    stdin: IO[Any] | None = None,
    stdout: Any = None,
    stderr: Any = None,
    schemas: SchemaChecker | None = None,
) -> int:
    """The command; returns the exit status.

    Streams are injectable, and so are the CRD schemas: a preloaded `SchemaChecker` replaces reading
    `--crd-dir` (parsing the CRDs is most of a run's time, which matters to tests and embedders). `stdin`
    (default `sys.stdin.buffer`) is read for the one path given as `-`.
    """
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    args = _parser().parse_args(argv)
    warnings: list[str] = []
    try:
        paths = [args.trainjob, *args.runtimes, *args.existing, *([args.config] if args.config else [])]
        if sum(str(p) == STDIN for p in paths) > 1:
            raise RenderError("standard input (-) can be read only once: give it as one path only")
        # The inputs first, the CRDs (most of a run's time) last: bad input is refused at once.
        trainjob, inline_runtimes = _split_trainjob_file(args.trainjob, stdin=stdin)
        runtimes = [*inline_runtimes, *_runtime_documents(args.runtimes, stdin=stdin, skipped=warnings)]
        existing = [d for path in args.existing for d in load_documents(path, stdin=stdin, skipped=warnings)]
        options = _options(args, warnings, schemas, stdin=stdin)
        result = render(trainjob, runtimes, existing, options)
    except RenderError as exc:
        for warning in warnings:
            if warning not in exc.problems:
                print(f"Warning: {escape(warning)}", file=err)
        print(f"trainer-render: {exc.title}", file=err)
        for problem in exc.problems:
            print(f"  {problem}", file=err)
        return EXIT_INVALID
    except Exception as exc:  # noqa: BLE001 -- the command's outermost boundary: a bug, reported as such
        if args.traceback:
            traceback.print_exc(file=err)
        print(f"trainer-render: internal error: {type(exc).__name__}: {elide(str(exc))}", file=err)
        print("  this is a bug in trainer-render; rerun with --traceback and report it", file=err)
        return EXIT_INTERNAL_ERROR
    for warning in (*warnings, *result.warnings):
        print(f"Warning: {escape(warning)}", file=err)
    for note in result.notes:
        print(f"trainer-render: {note}", file=err)
    out.write(dump_yaml(result.objects))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point (`trainer-render`)."""
    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
