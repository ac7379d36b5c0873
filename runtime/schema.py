"""What kube-apiserver checks and defaults before it stores a Trainer custom resource, done offline.

Go origin: `k8s.io/apiextensions-apiserver` (`customResourceStrategy.Validate`: the structural schema's
validation and defaulting, `ValidateObjectMeta` with `NameIsDNSSubdomain`, list-type uniqueness, then the
CEL rules, which `runtime.celvalidation` evaluates), and etcd's request size limit. `trainer-render` uses
it on every TrainJob and runtime it reads; docs/render.md lists what it checks.

Guarantees:
- `SchemaChecker.check` never raises on decoded YAML/JSON, whatever its shape or depth; it returns a
  defaulted copy and the field errors, printed as the apiserver prints them. An object whose collections
  nest more than `MAX_DEPTH` levels (128, as `trainer-render`'s reader and the webhook server refuse) is
  not checked further: its one error names where (`spec.labels.a.a.a...: Forbidden: collections nested
  more than 128 levels deep`), found by one walk without recursion, and the copy is shallow. Every other
  walk here recurses, at most `MAX_DEPTH` levels down.
- The CRDs ship inside this package: `CRD_DIR` (`runtime/crds/`) is a symbolic link to `config/crd/` in a
  source checkout (the one copy kustomize installs and `hack/gen-crds.py` writes), and setuptools copies
  the files it points to into wheels, so an installed package finds them too.
- Each CRD's rules are compiled once, on the first object of its kind.

Deliberately missing: what the apiserver checks besides the schema, the name, the namespace, and the CEL
rules (labels and annotations syntax, owner references, finalizers); admission webhooks (render runs the
Trainer webhook's checks itself).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import orjson
import yaml

from runtime.api.views import copy_json
from runtime.celvalidation import RuleValidator
from runtime.framework import ErrorType, FieldError
from runtime.kubeyaml import MAX_DEPTH

__all__ = [
    "CRD_DIR",
    "ETCD_REQUEST_LIMIT",
    "MAX_DEPTH",
    "CRDError",
    "SchemaChecker",
    "json_type",
    "namespace_problems",
    "oversize_warning",
]

CRD_DIR = Path(__file__).resolve().parent / "crds"
"""The Trainer CRDs shipped with this package (in a source checkout, a link to `config/crd/`)."""

ETCD_REQUEST_LIMIT = 1536 * 1024
"""etcd's default `--max-request-bytes` (1.5 MiB): the apiserver cannot store a larger object."""

# libyaml's parser when PyYAML was built with it (about ten times faster on the CRDs), else pure Python.
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


_JSON_TYPES: tuple[tuple[type, str], ...] = (
    (type(None), "null"),
    (bool, "boolean"),  # before int: booleans are ints in Python, not integers in a schema
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
)


def json_type(value: object) -> str:
    """The JSON type of a decoded value, as a schema names it (booleans are not integers)."""
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), type(value).__name__)


_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_JSON_SAFE_INTEGER = 2**53 - 1
"""The largest whole float64 that go-openapi takes for an integer (ECMAScript's MAX_SAFE_INTEGER)."""

_OLD_SELF = re.compile(r"\boldSelf\b")

_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN_PROBLEM = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
    "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    f"'{_DNS1123_SUBDOMAIN.pattern}')"
)
_LABEL_PROBLEM = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    f"'{_DNS1123_LABEL.pattern}')"
)


def _as_integer(value: float) -> float | int:
    """`value` as kube-apiserver stores it where the schema says integer (or int-or-string).

    kube-apiserver decodes a JSON number with a fraction or an exponent (`2.0`, `2e0`) into a float64. The
    schema check (go-openapi `swag.IsFloat64AJSONInteger`, then `IsValueValidAgainstRange`) accepts it for
    an integer when it is a whole number within +-(2**53 - 1), and Go's JSON encoder writes that float back
    without a fraction, so `2.0` is stored, and read back, as `2`. Any other float is returned unchanged
    (and then rejected as a number): `1.5`, `2**53`, `1e21`, and near-integers such as `1.0000000001`.
    """
    if value.is_integer() and abs(value) <= _JSON_SAFE_INTEGER:
        return int(value)
    return value


def _shown(value: Any) -> Any:
    """`value` made printable as JSON in an error message (string keys, integers within int64)."""
    if isinstance(value, dict):
        return {str(k): _shown(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shown(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and not _INT64[0] <= value <= _INT64[1]:
        return str(value)
    return value


def _canonical(value: Any) -> str:
    """A key for set and map list uniqueness: equal JSON values give equal keys."""
    return repr(_sorted(value))


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return sorted(((repr(k), _sorted(v)) for k, v in value.items()), key=lambda kv: kv[0])
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return (type(value).__name__, value)


class CRDError(ValueError):
    """The CRD files cannot be read; the message names the file and the problem."""


class _Errors(list[FieldError]):
    """The field errors of one check, and how many of them are CEL's verdict on a whole float."""

    __slots__ = ("cel_errors", "cel_paths")

    def __init__(self) -> None:
        super().__init__()
        self.cel_paths: set[str] = set()
        """Paths whose CEL rules have already failed (`SchemaChecker._float_seen_by_cel`)."""
        self.cel_errors = 0
        """How many of the errors are those failures."""


class _Kind:
    """One CRD version: its schema, its scope, and its compiled rules (on first use)."""

    __slots__ = ("_rules", "namespaced", "schema")

    def __init__(self, schema: Mapping[str, Any], *, namespaced: bool) -> None:
        self.schema = schema
        self.namespaced = namespaced
        self._rules: RuleValidator | None = None

    @property
    def rules(self) -> RuleValidator:
        if self._rules is None:
            self._rules = RuleValidator(self.schema)
        return self._rules


class SchemaChecker:
    """Checks objects as kube-apiserver does on create, and fills in their schema defaults.

    In the apiserver's order: `metadata.name` (a DNS-1123 subdomain of at most 253 characters, as for
    every custom resource) and, for a namespaced kind, `metadata.namespace` (a DNS-1123 label); the
    structural schema; then the CEL rules (`runtime.celvalidation`), which run only when the schema check
    found nothing (the apiserver skips them after a type, enum, required or size error, saying "some
    validation rules were not checked"; render skips them after any, silently, so it may list fewer errors
    at once, never a different verdict).

    Supported keywords: `type`, `properties`, `required`, `additionalProperties`, `items`, `enum`,
    `format` (int32/int64 bounds), `minimum`/`maximum`, `minLength`/`maxLength`, `minItems`/`maxItems`,
    `minProperties`/`maxProperties`, `pattern`, `default`, `nullable`, `x-kubernetes-int-or-string`,
    `x-kubernetes-preserve-unknown-fields`, `x-kubernetes-validations`, and the uniqueness of
    `x-kubernetes-list-type: set|map` items. As the API server does, a null for a non-nullable field is
    dropped before defaulting, and a whole float where the schema says integer or int-or-string (`1.0`: the
    Kubeflow SDK sends quantities so) is accepted and kept as the integer the server stores
    (`_as_integer`); each CEL rule on such a field fails, as the server's CEL cannot read the float
    (`_float_seen_by_cel`).
    """

    __slots__ = ("_kinds",)

    def __init__(
        self,
        schemas: Mapping[tuple[str, str], Mapping[str, Any]],
        *,
        cluster_scoped: frozenset[tuple[str, str]] = frozenset(),
    ) -> None:
        self._kinds = {
            key: _Kind(schema, namespaced=key not in cluster_scoped) for key, schema in schemas.items()
        }
        """(apiVersion, kind) → the version's `openAPIV3Schema`, scope, and rules."""

    @classmethod
    def from_crd_dir(cls, directory: Path) -> SchemaChecker:
        """The CRDs of every *.yaml, *.yml and *.json file under `directory`; raises `CRDError`."""
        schemas: dict[tuple[str, str], Mapping[str, Any]] = {}
        cluster_scoped: set[tuple[str, str]] = set()
        files = sorted(p for p in directory.rglob("*") if p.suffix in (".yaml", ".yml", ".json"))
        for file in files:
            try:
                documents = list(yaml.load_all(file.read_text(encoding="utf-8"), Loader=_SafeLoader))
            except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
                raise CRDError(f"{file}: cannot read the CRDs: {exc}") from exc
            for crd in documents:
                if not isinstance(crd, dict) or crd.get("kind") != "CustomResourceDefinition":
                    continue
                spec = crd.get("spec") or {}
                group, kind = spec.get("group", ""), (spec.get("names") or {}).get("kind", "")
                for version in spec.get("versions") or ():
                    key = (f"{group}/{version.get('name', '')}", kind)
                    schemas[key] = ((version.get("schema") or {}).get("openAPIV3Schema")) or {}
                    if spec.get("scope") == "Cluster":
                        cluster_scoped.add(key)
        if not schemas:
            raise CRDError(f"{directory}: no CustomResourceDefinitions found")
        return cls(schemas, cluster_scoped=frozenset(cluster_scoped))

    def check(self, obj: Mapping[str, Any]) -> tuple[dict[str, Any], list[FieldError]]:
        """(a defaulted copy of `obj`, the field errors); objects of unknown kinds come back unchanged.

        Never raises; an object nested deeper than `MAX_DEPTH` gets one error and a shallow copy."""
        kind = self._kinds.get((str(obj.get("apiVersion", "")), str(obj.get("kind", ""))))
        deep = _too_deep(obj)
        if deep is not None:
            error = FieldError.forbidden(deep, f"collections nested more than {MAX_DEPTH} levels deep")
            return dict(obj), [error] if kind is not None else []
        copy = cast(dict[str, Any], copy_json(obj))
        if kind is None:
            return copy, []
        errors = _Errors()
        checked = cast(dict[str, Any], self._value(copy, kind.schema, "", errors, root=True))
        structural = len(errors) - errors.cel_errors
        names = _metadata_names(checked.get("metadata"), namespaced=kind.namespaced)
        if not structural:  # else the rules are not run: their `self` may not have its schema's types
            errors.extend(kind.rules.validate(checked, skip=frozenset(errors.cel_paths)))
        return checked, [*names, *errors]

    # One value against one schema node; returns it defaulted, and normalised as the API server stores it.
    def _value(
        self,
        value: Any,
        schema: Mapping[str, Any],
        path: str,
        errors: _Errors,
        *,
        root: bool = False,
    ) -> Any:
        int_or_string = bool(schema.get("x-kubernetes-int-or-string"))
        if isinstance(value, float) and (int_or_string or schema.get("type") == "integer"):
            value = _as_integer(value)
            if isinstance(value, int):
                self._float_seen_by_cel(schema, path, errors)
        if int_or_string:
            if json_type(value) not in ("integer", "string"):
                errors.append(FieldError.invalid(path, _shown(value), "must be an integer or a string"))
            elif isinstance(value, str):
                self._string(value, schema, path, errors)
            else:
                self._number(value, {"format": "int64"}, path, errors)
            return value
        kind = schema.get("type")
        if kind is None and ("properties" in schema or "additionalProperties" in schema):
            kind = "object"
        if kind is None:
            return value
        actual = json_type(value)
        if actual != kind and not (kind == "number" and actual == "integer"):
            errors.append(FieldError.invalid(path, _shown(value), f"must be of type {kind}, not {actual}"))
            return value
        if kind == "object":
            return self._object(value, schema, path, errors, root=root)
        if kind == "array":
            return self._array(value, schema, path, errors)
        if kind == "string":
            self._string(value, schema, path, errors)
        elif kind in ("integer", "number"):
            self._number(value, schema, path, errors)
        return value

    def _object(
        self,
        value: dict[Any, Any],
        schema: Mapping[str, Any],
        path: str,
        errors: _Errors,
        *,
        root: bool,
    ) -> dict[str, Any]:
        for key in list(value):
            if not isinstance(key, str):
                errors.append(FieldError.invalid(path or "<root>", _shown(key), "keys must be strings"))
                del value[key]
        properties: Mapping[str, Any] = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        for key in list(value):
            # An empty key is a field too: `spec[""]`, not `spec.` (nor nothing at all at the root).
            child = (f"{path}.{key}" if path else key) if key else f'{path or "<root>"}[""]'
            sub = properties.get(key)
            if sub is None and isinstance(extra, dict):
                sub = extra
                child = f"{path}[{key}]"
            if value[key] is None and not (sub or {}).get("nullable"):
                del value[key]  # the API server prunes nulls of non-nullable fields before defaulting
                continue
            if root and key == "metadata":
                value[key] = self._metadata(value[key], errors)
            elif sub is not None:
                value[key] = self._value(value[key], sub, child, errors)
            elif properties and not preserve and extra is not True:
                errors.append(FieldError.forbidden(child, "field not declared in schema"))
        for key, sub in properties.items():
            if key not in value and isinstance(sub, dict) and "default" in sub:
                child = f"{path}.{key}" if path else key
                value[key] = self._value(copy_json(sub["default"]), sub, child, errors)
        for key in schema.get("required") or ():
            if key not in value:
                errors.append(FieldError.required(f"{path}.{key}" if path else key, ""))
        self._size(len(value), schema, path, errors, bounds=("minProperties", "maxProperties", "properties"))
        return cast(dict[str, Any], value)

    @staticmethod
    def _float_seen_by_cel(schema: Mapping[str, Any], path: str, errors: _Errors) -> None:
        """The CEL errors of a whole float accepted for an integer: CEL reads the float64 the server decoded.

        apiserver's `UnstructuredToVal` converts only Go integers to a CEL int, so every rule on the node
        that runs on create (every rule but a transition rule, one that reads `oldSelf` without
        `optionalOldSelf`) fails to evaluate, whatever it says. Rules on an ancestor that read the value are
        not modelled (none of the Trainer CRDs has one on a TrainJob or a runtime).
        """
        if schema.get("x-kubernetes-int-or-string"):
            problem = "invalid data, expected XIntOrString value to be either a string or integer"
        else:
            problem = "invalid data, expected int, got float64"
        for rule in schema.get("x-kubernetes-validations") or ():
            if _OLD_SELF.search(str(rule.get("rule", ""))) and not rule.get("optionalOldSelf"):
                continue
            errors.cel_paths.add(path)
            errors.cel_errors += 1
            text = str(rule.get("message") or "").strip() or str(rule.get("rule", "")).strip()
            errors.append(
                FieldError.invalid(path, schema.get("type", ""), f"{problem} evaluating rule: {text}")
            )

    @staticmethod
    def _metadata(value: Any, errors: _Errors) -> Any:
        if not isinstance(value, dict):
            errors.append(
                FieldError.invalid(
                    "metadata", _shown(value), f"must be of type object, not {json_type(value)}"
                )
            )
            return value
        for key in ("name", "namespace", "uid", "generateName"):
            if key in value and not isinstance(value[key], str):
                errors.append(
                    FieldError.invalid(f"metadata.{key}", _shown(value[key]), "must be of type string")
                )
        for key in ("labels", "annotations"):
            items = value.get(key)
            if items is None:
                continue
            if not isinstance(items, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in items.items()
            ):
                errors.append(
                    FieldError.invalid(
                        f"metadata.{key}", _shown(items), "must be a map of strings to strings"
                    )
                )
        return value

    def _array(self, value: list[Any], schema: Mapping[str, Any], path: str, errors: _Errors) -> list[Any]:
        items = schema.get("items")
        if isinstance(items, dict):
            value = [self._value(item, items, f"{path}[{index}]", errors) for index, item in enumerate(value)]
        self._size(len(value), schema, path, errors, bounds=("minItems", "maxItems", "items"))
        list_type = schema.get("x-kubernetes-list-type")
        seen: set[str] = set()
        for index, item in enumerate(value):
            if list_type == "set":
                key = _canonical(item)
            elif list_type == "map" and isinstance(item, dict):
                key = _canonical([item.get(k) for k in schema.get("x-kubernetes-list-map-keys") or ()])
            else:
                continue
            if key in seen:
                errors.append(
                    FieldError(
                        path=f"{path}[{index}]", type=ErrorType.DUPLICATE, value=_shown(item), message=""
                    )
                )
            seen.add(key)
        return value

    @staticmethod
    def _size(
        size: int,
        schema: Mapping[str, Any],
        path: str,
        errors: _Errors,
        *,
        bounds: tuple[str, str, str],
    ) -> None:
        low, high, noun = bounds
        if low in schema and size < schema[low]:
            errors.append(FieldError.invalid(path, size, f"should have at least {schema[low]} {noun}"))
        if high in schema and size > schema[high]:
            errors.append(
                FieldError(
                    path=path,
                    type=ErrorType.TOO_MANY,
                    value=size,
                    message=f"must have at most {schema[high]} {noun}",
                )
            )

    @staticmethod
    def _string(value: str, schema: Mapping[str, Any], path: str, errors: _Errors) -> None:
        enum = schema.get("enum")
        if enum is not None and value not in enum:
            errors.append(FieldError.not_supported(path, value, [str(e) for e in enum]))
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(
                FieldError(
                    path=path,
                    type=ErrorType.TOO_LONG,
                    message=f"may not be longer than {schema['maxLength']}",
                )
            )
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(
                FieldError.invalid(path, value, f"should be at least {schema['minLength']} chars long")
            )
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            try:
                matched = re.search(pattern, value) is not None
            except re.error:
                matched = True  # an RE2 construct Python lacks: leave it to the API server
            if not matched:
                errors.append(FieldError.invalid(path, value, f"should match '{pattern}'"))

    @staticmethod
    def _number(value: float, schema: Mapping[str, Any], path: str, errors: _Errors) -> None:
        enum = schema.get("enum")
        if enum is not None and value not in enum:
            errors.append(FieldError.not_supported(path, value, [str(e) for e in enum]))
        # Integers without a format are int64 too: the API server decodes no larger number.
        size = str(schema.get("format") or "int64")
        bounds = {"int32": _INT32, "int64": _INT64}.get(size)
        if isinstance(value, int) and bounds is not None and not bounds[0] <= value <= bounds[1]:
            errors.append(FieldError.invalid(path, _shown(value), f"must fit in {size}"))
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(
                FieldError.invalid(path, value, f"should be greater than or equal to {schema['minimum']}")
            )
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(
                FieldError.invalid(path, value, f"should be less than or equal to {schema['maximum']}")
            )


_PATH_SEGMENTS_SHOWN = 12
"""How much of the path to a too-deep collection an error names (as the webhook server's refusal)."""


def _too_deep(obj: Mapping[str, Any]) -> str | None:
    """The field path of a collection more than `MAX_DEPTH` levels below `obj`, or None. Iterative: any depth
    is walked in constant stack, and the walk stops at the first one found."""
    # (value, its depth, its path as a linked list of (segment, parent)) for each collection still to see.
    stack: list[tuple[Any, int, tuple[Any, ...] | None]] = [(obj, 0, None)]
    while stack:
        value, depth, path = stack.pop()
        if depth > MAX_DEPTH:
            segments: list[str] = []
            while path is not None:
                segment, path = path
                segments.append(segment)
            shown = "".join(reversed(segments[-_PATH_SEGMENTS_SHOWN:])).lstrip(".")
            return shown + "..." if len(segments) > _PATH_SEGMENTS_SHOWN else shown
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, child in items:
            if isinstance(child, (dict, list)):
                segment = f"[{key}]" if isinstance(value, list) else f".{key}"
                stack.append((child, depth + 1, (segment, path)))
    return None


def _metadata_names(metadata: Any, *, namespaced: bool) -> list[FieldError]:
    """The apiserver's checks of `metadata.name` and `metadata.namespace` (`ValidateObjectMetaAccessor`
    with `NameIsDNSSubdomain`); a missing name is left to the caller, a mistyped one to the schema check."""
    if not isinstance(metadata, dict):
        return []
    errors = []
    name = metadata.get("name")
    if isinstance(name, str) and name:
        if len(name) > 253:
            errors.append(FieldError.invalid("metadata.name", name, "must be no more than 253 characters"))
        if not _DNS1123_SUBDOMAIN.fullmatch(name):
            errors.append(FieldError.invalid("metadata.name", name, _SUBDOMAIN_PROBLEM))
    namespace = metadata.get("namespace")
    if namespaced and isinstance(namespace, str) and namespace:
        problems = namespace_problems(namespace)
        errors.extend(FieldError.invalid("metadata.namespace", namespace, p) for p in problems)
    return errors


def namespace_problems(namespace: str) -> list[str]:
    """Why `namespace` is not a namespace name, in Go's words (`ValidateNamespaceName`: a DNS-1123 label)."""
    problems = []
    if len(namespace) > 63:
        problems.append("must be no more than 63 characters")
    if _DNS1123_LABEL.fullmatch(namespace):
        pass
    elif _DNS1123_SUBDOMAIN.fullmatch(namespace):
        problems.append("must not contain dots")
    else:
        problems.append(_LABEL_PROBLEM)
    return problems


def oversize_warning(obj: Mapping[str, Any], what: str) -> str | None:
    """A warning when `obj`, as JSON, is larger than etcd stores (`ETCD_REQUEST_LIMIT`), else None."""
    try:
        size = len(orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS))
    except TypeError:  # orjson.JSONEncodeError: an integer beyond 64 bits; the schema check reports it
        return None
    if size <= ETCD_REQUEST_LIMIT:
        return None
    return (
        f"{what} is {size} bytes as JSON, over etcd's default request limit of {ETCD_REQUEST_LIMIT} bytes "
        "(1.5 MiB): the API server will refuse to store it"
    )
