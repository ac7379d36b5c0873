"""What the pipeline can build: one definition of the values it refuses, for admission and for the build.

Go origin: the checks the API server makes later on what the pipeline renders, ported with their messages
from the versions `hack/versions.env` pins (Kubernetes v1.36): `k8s.io/kubernetes/pkg/apis/core/validation`
(`ValidateEnv`, `validateContainerResourceName`, `validateResourceName`, `ValidateResourceQuantityValue`),
its `helper` (`IsStandardContainerResourceName`, `IsExtendedResourceName`, `IsIntegerResourceName`, ...)
and `k8s.io/apimachinery/pkg/api/validate/content` (`IsLabelKey`, alias `IsQualifiedName`;
`IsRelaxedEnvVarName` of `pkg/util/validation`). Upstream Trainer checks none of them: it renders the
values, and the API server refuses the Job's pods far from the TrainJob (or a value renders that nothing
can run).

The rule, applied by `runtime.core` to the TrainJob and to the runtime it is built from (the webhook and
`trainer-render` first, then every build, so a stored object that skipped admission or was edited later
fails the same way):
- An env var name (`env[i].name` of every container and init container, of `spec.trainer.env`, of
  `spec.initializer.*.env`, of runtime patches) is non-empty (`Required value`) and printable ASCII other
  than `=` (Kubernetes' relaxed rule, GA and locked on since v1.34: `1ABC` and `a.b-c` are valid names).
- A resource name (`resources.limits` and `requests` keys, and `spec.trainer.resourcesPerNode`'s) is a
  container resource: `cpu`, `memory`, `ephemeral-storage`, `hugepages-*`, or a qualified name with a
  prefix (`nvidia.com/gpu`) that is not `kubernetes.io/` (an extended resource).
- A quantity parses (`runtime.resources.Quantity`: under 1e100, at most 100 significant digits), is not
  negative, and is a whole number for an extended resource (`nvidia.com/gpu: 500m` is refused).
- The annotations of an object the pipeline renders (the JobSet, each Job template and each pod template)
  hold at most `MAX_ANNOTATIONS_BYTES`, keys and values together (`annotations_bytes`); the runtime's and
  each runtime patch's add up there, and no stored object's own limit covers them.
- A count the plugins derive and render (`PET_NPROC_PER_NODE`, `PET_NNODES`, MPI `slots`,
  `DMLC_NUM_WORKER`, ...) is at most `MAX_INT32`, the API's integer width (`checked_count`); the pod counts
  (`parallelism`, `completions`) have the tighter bounds of `runtime.info`.

A plugin that meets an unbuildable value raises `UnbuildableError` naming the field (a TrainJob field, or
a field of the runtime's spec after the TrainJob's runtime patches); `runtime.core` turns it into a field
error at admission and into a permanent failure at build.

Guarantees: pure functions of their arguments; never raise on odd shapes (a field of the wrong JSON type is
skipped: the CRD schema or `runtime.core.snapshot`'s type check refuses it first); errors come in the
order of the input, with Go's `field.Path` spelling (`requests[cpu]`, `env[0].name`).

Deliberately missing: the rest of Kubernetes' pod validation (env `valueFrom`, ports, volumes, probes,
requests against limits, hugepages alignment): what the pipeline renders from them is what the user wrote,
refused by the API server with its own message when the Job's pods are created.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from typing import Any

from runtime.framework.errors import FrameworkError
from runtime.framework.validation import FieldError
from runtime.resources import InvalidQuantityError, Quantity

__all__ = [
    "MAX_ANNOTATIONS_BYTES",
    "MAX_CONFIGMAP_BYTES",
    "MAX_INT32",
    "UnbuildableError",
    "annotations_bytes",
    "checked_count",
    "container_errors",
    "env_errors",
    "env_var_name_problems",
    "pod_spec_errors",
    "quantity_errors",
    "resource_name_problems",
    "resource_requirements_errors",
    "runtime_errors",
    "trainjob_errors",
    "utf8_length",
]

MAX_INT32 = 2**31 - 1
"""The largest count the API's `int32` fields hold, and so the largest count a plugin renders."""

MAX_CONFIGMAP_BYTES = 1 << 20
"""The most bytes the API server stores in a ConfigMap's data (keys and values together)."""

MAX_ANNOTATIONS_BYTES = 256 * 1024
"""The most bytes an object's annotations hold, keys and values together (Go `TotalAnnotationSizeLimitB`)."""


class UnbuildableError(FrameworkError):
    """A value the pipeline does not build from. `error` names the field: a TrainJob field when
    `in_trainjob`, else a field of the runtime's `spec` (after the TrainJob's runtime patches)."""

    def __init__(self, error: FieldError, *, in_trainjob: bool) -> None:
        super().__init__(str(error))
        self.error = error
        self.in_trainjob = in_trainjob


def checked_count(path: str, value: Any, count: int, *, in_trainjob: bool, what: str) -> int:
    """`count`, or `UnbuildableError` at `path` (whose value is `value`) when it exceeds `MAX_INT32`.

    `what` says which rendered count it became (`PET_NPROC_PER_NODE`), since the field is its source.
    """
    if count > MAX_INT32:
        message = f"must make {what} at most {MAX_INT32}, not {count}"
        raise UnbuildableError(FieldError.invalid(path, value, message), in_trainjob=in_trainjob)
    return count


# Env var names (k8s.io/apimachinery IsRelaxedEnvVarName, v0.36) -----------------------------------------

_RELAXED_ENV_VAR_NAME = (
    "a valid environment variable name must consist only of printable ASCII characters other than '='"
)
_PRINTABLE_ASCII_BUT_EQUALS = re.compile(r"[ -<>-~]*")


def env_var_name_problems(name: str) -> list[str]:
    """Go `IsRelaxedEnvVarName`'s messages for a non-empty name (the empty one is `Required value`)."""
    if _PRINTABLE_ASCII_BUT_EQUALS.fullmatch(name):
        return []
    return [_RELAXED_ENV_VAR_NAME]


def env_errors(env: Any, path: str) -> list[FieldError]:
    """Go `ValidateEnv`'s name checks over an env list at `path` (`spec.trainer.env`)."""
    errors: list[FieldError] = []
    for index, item in _items(env):
        name = item.get("name")
        if not isinstance(name, str):
            continue
        name_path = f"{path}[{index}].name"
        if not name:
            errors.append(FieldError.required(name_path, ""))
        else:
            errors.extend(FieldError.invalid(name_path, name, p) for p in env_var_name_problems(name))
    return errors


# Resource names (k8s.io/kubernetes pkg/apis/core/validation and helper, v1.36) ---------------------------

_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY = re.compile(_LABEL_KEY_FMT)
_LABEL_KEY_MESSAGE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    "character (e.g. 'MyName',  or 'my.name',  or '123-abc', "
    f"regex used for validation is '{_LABEL_KEY_FMT}')"
)
_DNS1123_SUBDOMAIN_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_DNS1123_SUBDOMAIN = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1123_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    f"start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    f"'{_DNS1123_SUBDOMAIN_FMT}')"
)
_STANDARD_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
_STANDARD_RESOURCES = frozenset(
    {
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "storage",
        "requests.storage",
        "services.nodeports",
        "services.loadbalancers",
    }
)
_INTEGER_RESOURCES = frozenset(
    {
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    }
)


def _qualified_name_problems(value: str) -> list[str]:
    """Go `content.IsLabelKey` (alias `IsQualifiedName`)."""
    problems: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            if len(prefix.encode()) > 253:
                problems.append("prefix part must be no more than 253 bytes")
            if not _DNS1123_SUBDOMAIN.fullmatch(prefix):
                problems.append(f"prefix part {_DNS1123_SUBDOMAIN_MESSAGE}")
    else:
        return [
            f"a valid label key {_LABEL_KEY_MESSAGE} with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    if not name:
        problems.append("name part must be non-empty")
    elif len(name.encode()) > 63:
        problems.append("name part must be no more than 63 bytes")
    if not _LABEL_KEY.fullmatch(name):
        problems.append(f"name part {_LABEL_KEY_MESSAGE}")
    return problems


def _is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _is_extended(name: str) -> bool:
    """Go `helper.IsExtendedResourceName`."""
    if _is_native(name) or name.startswith("requests."):
        return False
    return not _qualified_name_problems(f"requests.{name}")


def _is_extended_qualified(name: str) -> bool:
    """`_is_extended` of a qualified name with a prefix that is not native: `requests.<prefix>` is a DNS
    subdomain when `<prefix>` is one and stays within 253 bytes (the name part is unchanged)."""
    prefix = name.partition("/")[0]
    return not name.startswith("requests.") and len(prefix.encode()) + len("requests.") <= 253


def resource_name_problems(name: str) -> list[str]:
    """Go `validateContainerResourceName`'s messages: a name a container may request."""
    problems = _qualified_name_problems(name)
    standard = name in _STANDARD_RESOURCES or name.startswith(("hugepages-", "requests.hugepages-"))
    if not problems and "/" not in name and not standard:
        problems.append("must be a standard resource type or fully qualified")
    if "/" not in name:
        if name not in _STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
            problems.append("must be a standard resource for containers")
    elif not _is_native(name) and (problems or not _is_extended_qualified(name)):
        problems.append("doesn't follow extended resource name standard")
    return problems


# Quantities (ValidateResourceQuantityValue) --------------------------------------------------------------


def quantity_errors(resource: str, raw: Any, path: str) -> list[FieldError]:
    """A quantity that does not parse, is negative, or is not whole for an integer (extended) resource."""
    short = (
        (isinstance(raw, str) and len(raw) <= _MEMO_TEXT_LIMIT)
        or type(raw) is float
        or (type(raw) is int and raw.bit_length() <= _MEMO_TEXT_LIMIT * 3)
    )
    check = _memo_quantity_problems if short else _quantity_problems
    problems = check(resource, raw)
    return [FieldError.invalid(path, value, message) for value, message in problems]


_MEMO_TEXT_LIMIT = 64
"""Quantities up to this long are checked once per resource name (parsing one costs 10 to 40 µs, and every
reconcile checks the TrainJob's): a bounded memo of short texts, so hostile input cannot grow it."""


def _quantity_problems(resource: str, raw: Any) -> tuple[tuple[Any, str], ...]:
    """(the value to print, the message) of each problem of the quantity `raw` of `resource`."""
    try:
        quantity = Quantity.parse(raw)
    except InvalidQuantityError as exc:
        return ((raw, str(exc)),)
    problems = []
    if quantity.value < 0:
        problems.append((str(quantity), "must be greater than or equal to 0"))
    if quantity.value.denominator != 1 and (resource in _INTEGER_RESOURCES or _is_extended(resource)):
        problems.append((str(quantity), "must be an integer"))
    return tuple(problems)


_memo_quantity_problems = functools.lru_cache(maxsize=1024, typed=True)(_quantity_problems)


def resource_requirements_errors(requirements: Any, path: str) -> list[FieldError]:
    """Names and quantities of a container's `resources` (`limits`, then `requests`, as Go checks them)."""
    if not isinstance(requirements, Mapping):
        return []
    errors: list[FieldError] = []
    for key in ("limits", "requests"):
        resources = requirements.get(key)
        if not isinstance(resources, Mapping):
            continue
        for name, raw in resources.items():
            entry = f"{path}.{key}[{name}]"
            errors.extend(FieldError.invalid(entry, name, p) for p in resource_name_problems(str(name)))
            errors.extend(quantity_errors(str(name), raw, entry))
    return errors


# Pod specs -----------------------------------------------------------------------------------------------


def container_errors(container: Any, path: str) -> list[FieldError]:
    """A container's env var names and resources."""
    if not isinstance(container, Mapping):
        return []
    return [
        *env_errors(container.get("env"), f"{path}.env"),
        *resource_requirements_errors(container.get("resources"), f"{path}.resources"),
    ]


def pod_spec_errors(pod_spec: Any, path: str) -> list[FieldError]:
    """Every container's and init container's `container_errors` in a pod spec at `path`."""
    if not isinstance(pod_spec, Mapping):
        return []
    errors: list[FieldError] = []
    for key in ("initContainers", "containers"):
        for index, container in _items(pod_spec.get(key)):
            errors.extend(container_errors(container, f"{path}.{key}[{index}]"))
    return errors


_POD_SPEC = "template.spec.template.spec"
"""Where a replicated job holds its pod spec (`replicatedJobs[i].template.spec.template.spec`)."""


def _replicated_jobs(template: Any, path: str) -> Iterator[tuple[str, Any]]:
    """(path of the pod spec, the pod spec) of each replicated job of a JobSet template at `path`."""
    spec = _mapping(_mapping(template).get("spec"))
    for index, job in _items(spec.get("replicatedJobs")):
        pod_spec = _mapping(_mapping(_mapping(_mapping(job.get("template")).get("spec")).get("template")))
        yield f"{path}.spec.replicatedJobs[{index}].{_POD_SPEC}", pod_spec.get("spec")


def trainjob_errors(trainjob: Mapping[str, Any]) -> list[FieldError]:
    """The TrainJob's own values the pipeline copies into pods: `spec.trainer.env` and `resourcesPerNode`,
    `spec.initializer.dataset.env` and `model.env`, and the runtime patches' containers."""
    spec = _mapping(trainjob.get("spec"))
    trainer = _mapping(spec.get("trainer"))
    errors = [
        *env_errors(trainer.get("env"), "spec.trainer.env"),
        *resource_requirements_errors(trainer.get("resourcesPerNode"), "spec.trainer.resourcesPerNode"),
    ]
    initializer = _mapping(spec.get("initializer"))
    for step in ("dataset", "model"):
        errors.extend(env_errors(_mapping(initializer.get(step)).get("env"), f"spec.initializer.{step}.env"))
    for index, patch in _items(spec.get("runtimePatches")):
        template = _mapping(patch.get("trainingRuntimeSpec")).get("template")
        for path, pod_spec in _replicated_jobs(
            template, f"spec.runtimePatches[{index}].trainingRuntimeSpec.template"
        ):
            errors.extend(pod_spec_errors(pod_spec, path))
    return errors


def runtime_errors(runtime_spec: Mapping[str, Any]) -> list[FieldError]:
    """The runtime's values the pipeline copies into pods: every container of its JobSet template."""
    errors: list[FieldError] = []
    for path, pod_spec in _replicated_jobs(runtime_spec.get("template"), "spec.template"):
        errors.extend(pod_spec_errors(pod_spec, path))
    return errors


def annotations_bytes(annotations: Any) -> int:
    """What the API server counts of `annotations` against `MAX_ANNOTATIONS_BYTES` (Go
    `ValidateAnnotationsSize`: the UTF-8 length of every key and value). O(their size)."""
    return sum(utf8_length(str(k)) + utf8_length(str(v)) for k, v in _mapping(annotations).items())


def utf8_length(text: str) -> int:
    """The bytes of `text` in UTF-8, as Go's `len` counts a string (lone surrogates as 3 bytes)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _items(value: Any) -> Iterator[tuple[int, Mapping[str, Any]]]:
    if isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, Mapping):
                yield index, item
