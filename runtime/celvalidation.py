"""Offline evaluation of CRD validation rules (`x-kubernetes-validations`), as kube-apiserver runs them.

Go origin: `k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel` (`NewValidator`, `Validator.Validate`).
A `RuleValidator` is built once per CRD version: it walks the structural schema once, compiles every rule
with the `cel` package (common-expression-language: CEL in Rust, with Python bindings) and keeps a tree
that mirrors the schema but only where a rule lives below. `validate(obj)` walks the object along that tree,
top-down as the apiserver does, and returns `FieldError`s printed as the apiserver prints them.

Guarantees:
- The same verdicts and messages as kube-apiserver for the rules the Trainer CRDs (and the JobSet spec
  they embed) carry: `has()`, `size()`, `matches()` (RE2 syntax, linear time), `exists`/`all`/`filter`,
  `in [...]`, `double()`. A false rule gives `<path>: Invalid value: <value>: <message>` (no value for an
  object or a list), or `Forbidden`/`Required`/`Duplicate` when the rule has a `reason`; its `fieldPath`,
  when set, is appended to the path. A rule that fails to evaluate (a missing key, a wrong type) gives
  `... evaluating rule: <message>`.
- Transition rules (those that read `oldSelf`, unless `optionalOldSelf`) are not run: render has no old
  object, and on create the apiserver does not run them either.
- At the resource root, `self.metadata` holds only `name` and `generateName`, as in the apiserver.
- Each rule is compiled once per `RuleValidator`; `SchemaChecker` keeps one per CRD version. The `cel`
  package is imported by the first compile, not with this module.
- Bounded: evaluating a rule costs one unit per value it is handed as `self` (every map, list, scalar
  below it) plus one per 64 characters of each string, and one object may spend `COST_BUDGET` units in all.
  A rule that reads `self` only through fields (`self.metadata.name`) is handed only those fields.
  When the next rule would overrun the budget, the walk stops with the apiserver's own message
  ("validation failed due to running out of cost budget, no further validation rules will be run").
  The apiserver counts differently (CEL's runtime cost: roughly one unit per operation, with a budget of
  10,000,000 per object and 1,000,000 per rule); ours counts what the evaluation is handed, an upper
  bound of what a rule over it can touch, so that time and memory stay linear in the budget.

Deliberately missing: rules the apiserver rejects at CRD creation are not diagnosed (a rule that does not
compile here is skipped, as is one that calls a function only Kubernetes defines, such as `quantity()`,
`url()` or `isSorted()`: the apiserver decides those); `messageExpression` (the static `message` is used);
static type checking (the apiserver types `self` from the schema, so an int-or-string compared with a
number is a compile error there and an evaluation error or a verdict here); ratcheting (update only).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime.framework import ErrorType, FieldError

__all__ = ["COST_BUDGET", "RuleValidator"]

COST_BUDGET = 200_000
"""Cost units one object may spend on its rules: about two seconds of evaluation on a slow machine (handing
a value to the evaluator costs a few microseconds)."""

_CHARS_PER_UNIT = 64

OUT_OF_BUDGET = "validation failed due to running out of cost budget, no further validation rules will be run"

_REASONS = {
    "FieldValueForbidden": ErrorType.FORBIDDEN,
    "FieldValueRequired": ErrorType.REQUIRED,
    "FieldValueDuplicate": ErrorType.DUPLICATE,
}

# The Rust evaluator's words for a function it does not know: a Kubernetes extension the apiserver has.
_UNKNOWN_FUNCTION = "Undefined variable or function"


@dataclass(frozen=True, slots=True)
class _Rule:
    program: Any
    """The compiled `cel.Program`."""
    text: str
    """`message`, else the rule, as the apiserver quotes a rule in its errors (`ruleErrorString`)."""
    message: str
    """What a false rule says (`ruleMessageOrDefault`)."""
    field_path: str
    """The rule's `fieldPath`, as a suffix of the node's path (`.a.b`), or ""."""
    reason: ErrorType
    fields: frozenset[str] | None
    """The only fields of `self` the rule can read (`_selected_fields`), or None for any."""


@dataclass(slots=True)
class _Node:
    """The compiled rules of one schema node, and the nodes below it that have rules."""

    type: str
    rules: list[_Rule] = field(default_factory=list)
    properties: dict[str, _Node] = field(default_factory=dict)
    items: _Node | None = None
    additional: _Node | None = None


class _OutOfBudget(Exception):
    """The walk's budget ran out: no further rules are run."""


class _Budget:
    __slots__ = ("remaining",)

    def __init__(self, units: int) -> None:
        self.remaining = units

    def charge(self, value: Any) -> bool:
        """Spend what handing `value` to a rule costs; False (and nothing left) when it does not fit."""
        cost = _cost(value, self.remaining)
        if cost > self.remaining:
            self.remaining = -1
            return False
        self.remaining -= cost
        return True


def _cost(value: Any, limit: int) -> int:
    """One unit per value below `value` and per `_CHARS_PER_UNIT` characters of a string; counting stops
    past `limit`, so it costs at most `limit` steps."""
    cost, stack = 0, [value]
    while stack and cost <= limit:
        item = stack.pop()
        cost += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            cost += len(item) // _CHARS_PER_UNIT
    return cost


_SELF = re.compile(r"\bself\b")
_SELECTION = re.compile(r"\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)\s*(\()?")


def _selected_fields(rule: str) -> frozenset[str] | None:
    """The fields a rule reads from `self` when it only ever uses `self` as `self.field`, else None.

    Handing the evaluator a map with just those fields gives the same result (nothing else in the rule can
    see the map) at a fraction of the cost: the TrainJob's name rules sit on the resource root, where
    `self` is the whole object. A use of `self` alone, `self[...]`, or a method (`self.exists(...)`)
    needs all of it; a "self" inside a string literal only makes the answer more cautious.
    """
    fields = set()
    for match in _SELF.finditer(rule):
        selection = _SELECTION.match(rule, match.end())
        if selection is None or selection.group(2) is not None:
            return None
        fields.add(selection.group(1))
    return frozenset(fields)


def _compile_rules(schema: Mapping[str, Any]) -> list[_Rule]:
    # Imported on first use: the `cel` package imports its command-line front end (prompt_toolkit, ~28 MiB
    # resident), and only `trainer-render` evaluates rules; the manager imports this module but never does.
    import cel  # noqa: PLC0415

    rules = []
    for raw in schema.get("x-kubernetes-validations") or ():
        if not isinstance(raw, Mapping) or not isinstance(raw.get("rule"), str) or not raw["rule"].strip():
            continue
        try:
            program = cel.compile(raw["rule"])
        except (ValueError, RuntimeError):
            continue  # the apiserver reports it when the CRD is created
        if "oldSelf" in program.variables() and not raw.get("optionalOldSelf"):
            continue  # a transition rule: it runs on updates only
        message = str(raw.get("message") or "").strip()
        text = message or raw["rule"].strip()
        path = str(raw.get("fieldPath") or "")
        rules.append(
            _Rule(
                program=program,
                text=text,
                message=message or f"failed rule: {text}",
                field_path=path if not path or path.startswith(("[", ".")) else f".{path}",
                reason=_REASONS.get(str(raw.get("reason")), ErrorType.INVALID),
                fields=_selected_fields(raw["rule"]),
            )
        )
    return rules


def _build(schema: Any) -> _Node | None:
    """The node of `schema`, or None when neither it nor anything below it has a rule."""
    if not isinstance(schema, Mapping):
        return None
    node = _Node(type=str(schema.get("type") or ""), rules=_compile_rules(schema))
    for key, sub in (schema.get("properties") or {}).items():
        child = _build(sub)
        if child is not None:
            node.properties[key] = child
    items, additional = schema.get("items"), schema.get("additionalProperties")
    node.items = _build(items) if isinstance(items, Mapping) else None
    node.additional = _build(additional) if isinstance(additional, Mapping) else None
    if node.rules or node.properties or node.items or node.additional:
        return node
    return None


class RuleValidator:
    """The `x-kubernetes-validations` rules of one CRD version's `openAPIV3Schema`, compiled."""

    __slots__ = ("_root",)

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self._root = _build(schema)

    @property
    def has_rules(self) -> bool:
        return self._root is not None

    def validate(
        self, obj: Mapping[str, Any], *, skip: frozenset[str] = frozenset(), budget: int = COST_BUDGET
    ) -> list[FieldError]:
        """The errors of `obj` (a schema-checked, defaulted object) against the rules.

        `skip` holds paths whose rules are not run (the schema check has already reported them: a whole
        float in an integer field, which the apiserver's CEL cannot read).
        """
        if self._root is None:
            return []
        metadata = obj.get("metadata")
        root_self = dict(obj)
        if isinstance(metadata, Mapping):
            root_self["metadata"] = {k: metadata[k] for k in ("name", "generateName") if k in metadata}
        run = _Run(skip=skip, budget=_Budget(budget))
        with contextlib.suppress(_OutOfBudget):  # the walk stopped, as the apiserver's does; errors say why
            run.walk(self._root, root_self, "")
        return run.errors


@dataclass(slots=True, kw_only=True)
class _Run:
    """One walk of an object: what it found and what it may still spend."""

    skip: frozenset[str]
    budget: _Budget
    errors: list[FieldError] = field(default_factory=list)

    def walk(self, node: _Node, value: Any, path: str) -> None:
        """Evaluates the rules at and below `node`; raises `_OutOfBudget` when the budget runs out."""
        if value is None:
            return
        if node.rules and path not in self.skip:
            for rule in node.rules:
                given = value
                if rule.fields is not None and isinstance(value, dict):
                    given = {key: value[key] for key in rule.fields if key in value}
                if not self.budget.charge(given):
                    self.errors.append(FieldError.invalid(path or "<nil>", node.type, OUT_OF_BUDGET))
                    raise _OutOfBudget
                error = _evaluate(rule, given, path, node.type)
                if error is not None:
                    self.errors.append(error)
        if isinstance(value, dict):
            for key, child in node.properties.items():
                if key in value:
                    self.walk(child, value[key], f"{path}.{key}" if path else key)
            if node.additional is not None:
                for key, item in value.items():
                    self.walk(node.additional, item, f"{path}[{key}]")
        elif isinstance(value, list) and node.items is not None:
            for index, item in enumerate(value):
                self.walk(node.items, item, f"{path}[{index}]")


def _evaluate(rule: _Rule, value: Any, path: str, type_: str) -> FieldError | None:
    """The error of one rule over `value`, or None when it holds (or cannot be evaluated offline)."""
    at = path or "<nil>"
    try:
        result = rule.program.execute({"self": value})
    except KeyError as exc:
        return FieldError.invalid(at, type_, f"no such key: {exc.args[0]} evaluating rule: {rule.text}")
    except Exception as exc:  # noqa: BLE001 -- the evaluator raises many types; each is the rule's verdict
        problem = str(exc).strip()
        if problem.startswith(_UNKNOWN_FUNCTION):
            return None  # a Kubernetes CEL library function: left to the apiserver
        return FieldError.invalid(at, type_, f"{problem} evaluating rule: {rule.text}")
    if result is True:
        return None
    at = f"{path}{rule.field_path}" if rule.field_path else at
    if rule.reason is ErrorType.INVALID:
        if type_ in ("object", "array"):
            return FieldError(path=at, type=ErrorType.INVALID, message=rule.message)
        return FieldError.invalid(at, value, rule.message)
    if rule.reason is ErrorType.DUPLICATE:
        return FieldError(path=at, type=ErrorType.DUPLICATE, value=value, message="")
    return FieldError(path=at, type=rule.reason, message=rule.message)
