"""YAML as kubectl reads it, safe against hostile input: a loader for every YAML a user or tenant hands us.

Go origin: `sigs.k8s.io/yaml` (`YAMLToJSON`: go-yaml v2 decodes, then Go's `encoding/json` converts) as
kubectl and the controllers use it, with go-yaml v2's resolver (`resolve.go`) and its alias-expansion limit
(`decode.go`, `allowedAliasRatio`). Written anew over PyYAML's event parser (libyaml when available); this
module builds the values itself, so PyYAML's composer and constructor never see the input.

What a document reads as (the table test in test/unit/render/test_render_input.py is the specification):
- Plain scalars resolve as go-yaml v2 does: `true`/`yes`/`on`/`y` (and capitalised forms) are booleans,
  `~`/`null`/empty are null; integers in Go's base-0 syntax (`0x10`, `0o10`, `010` octal, `0b1`, `1_000`);
  floats in YAML's syntax (`1.5`, `1e1`, `.5`); `.inf`/`.nan` are floats. Everything else is a string,
  notably `1:30` (no sexagesimal numbers) and `2001-12-14` (no timestamps: go-yaml keeps them strings when
  decoding into an interface). Quoted and block scalars are strings.
- Then Go's JSON round trip: a whole float below 1e21 that fits int64 is that integer (`1e1` is `10`,
  `2.0` is `2`, `-0.0` is `0`), an integer outside int64 is a float, and `.inf`/`.nan` are errors (Go's
  `json: unsupported value`). Map keys become strings (`1` → `"1"`, `true` → `"true"`, a float as Go's
  float32 `%g`); a null or a collection key is an error.
- Explicit tags: `!!str`, `!!int`, `!!float`, `!!bool`, `!!null`, `!!timestamp` check the value as go-yaml
  does (`!!int 1.0` is an error); `!!binary` is base64-decoded text; any other tag (`!!python/object`,
  `!foo`, `!!set`) is ignored, as go-yaml ignores it: the node reads as a plain string, list or mapping.
  No tag ever runs code or constructs anything but JSON values.
- `<<` merge keys as go-yaml v2 applies them: the merged keys land where `<<` is, so keys before it are
  overridden and keys after it win; in a list of maps, earlier maps win. Duplicate keys: the last wins.

Guarantees against hostile input (a tenant edits the runtime snapshot, a user pipes anything to
trainer-render); each refusal is a `YAMLInputError` with a line and column, never another exception:
- Aliases: as go-yaml, a document may not decode more than `allowed_alias_ratio(n)` of its `n` nodes
  through aliases once it has over 1000 nodes and 100 alias-decoded ones (99% up to 400,000 nodes, falling
  to 10% at 4,000,000). The count is made before anything is copied, so a "billion laughs" document is
  refused after reading it once, in time and memory linear in its size. The same limit applies to the
  whole stream, and `max_nodes` caps the decoded nodes of a stream outright.
- Nesting: at most `MAX_DEPTH` levels of collections, also through aliases, so that every recursive walk
  of the pipeline (schema checks, copies, strategic merge, orjson's limit of 254) stays within bounds.
- Anchors: an alias of an undefined anchor, or of an anchor inside its own value, is an error.
- Each alias use is a fresh copy: no two places of a document share a mutable value.
- Messages repeat at most `runtime.echo.ECHO_LIMIT` characters of any value.

`dump` writes YAML that this loader, go-yaml and PyYAML all read back as the same values: a string that
either would resolve to something else is quoted (`y`, `0o10`, `1e1`, `08` for go-yaml; `1:30`,
`2001-12-14` for PyYAML), which PyYAML's dumper alone does not do for go-yaml's forms.

Deliberately missing: go-yaml's per-node check of the alias ratio inside one alias expansion (the ratio
is checked after each alias and each node, which refuses the same documents up to rounding), its exact
error texts, and non-deterministic duplicate float keys.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import yaml
from yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import Node, ScalarNode

from runtime.echo import elide

__all__ = [
    "MAX_DEPTH",
    "YAMLInputError",
    "allowed_alias_ratio",
    "dump",
    "load",
    "load_all",
]

MAX_DEPTH: Final = 128
"""The most nested collections a document may have (the Trainer CRDs, the deepest input, have 47)."""

_TAG = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL = (f"{_TAG}{name}" for name in ("str", "int", "float", "bool", "null"))
_TIMESTAMP, _BINARY, _MERGE = (f"{_TAG}{name}" for name in ("timestamp", "binary", "merge"))
_RESOLVABLE = frozenset({_STR, _INT, _FLOAT, _BOOL, _NULL, _TIMESTAMP})

_INT64 = (-(2**63), 2**63 - 1)
_UINT64_MAX = 2**64 - 1
_FLOAT32_MAX = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]


class YAMLInputError(ValueError):
    """The text is not YAML this loader accepts; `line` and `column` are 1-based when known."""

    def __init__(self, problem: str, *, line: int | None = None, column: int | None = None) -> None:
        self.problem = problem
        self.line = line
        self.column = column
        super().__init__(str(self))

    def __str__(self) -> str:
        if self.line is None:
            return self.problem
        return f"line {self.line}, column {self.column}: {self.problem}"


def allowed_alias_ratio(decodes: int) -> float:
    """go-yaml v2's `allowedAliasRatio`: the share of `decodes` nodes that may come from alias expansion."""
    if decodes <= 400_000:
        return 0.99
    if decodes >= 4_000_000:
        return 0.10
    return 0.99 - 0.89 * (decodes - 400_000) / 3_600_000


# ---------------------------------------------------------------------------------------------------------
# go-yaml v2's resolver (resolve.go), for plain scalars and explicitly tagged ones

_HINTS = {**dict.fromkeys("+-", "S"), **dict.fromkeys("0123456789", "D"), **dict.fromkeys("yYnNtTfFoO~", "M")}
_HINTS["."] = "."

_TRUE = ("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON")
_FALSE = ("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF")
_SPECIAL: dict[str, tuple[str, Any]] = {
    **{s: (_BOOL, True) for s in _TRUE},
    **{s: (_BOOL, False) for s in _FALSE},
    **{s: (_NULL, None) for s in ("", "~", "null", "Null", "NULL")},
    **{s: (_FLOAT, math.nan) for s in (".nan", ".NaN", ".NAN")},
    **{s: (_FLOAT, math.inf) for s in (".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF")},
    **{s: (_FLOAT, -math.inf) for s in ("-.inf", "-.Inf", "-.INF")},
}

# strconv.ParseInt/ParseUint with base 0 (underscores are already gone).
_GO_INT = re.compile(r"([+-]?)(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)")
_BASES = {"x": 16, "o": 8, "b": 2}
# go-yaml's yamlStyleFloat, applied after removing underscores.
_YAML_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
# strconv.ParseFloat of a value starting with ".": underscores only between digits.
_DOT_FLOAT = re.compile(r"\.[0-9]+(_[0-9]+)*([eE][-+]?[0-9]+(_[0-9]+)*)?")
# go-yaml's allowed timestamp layouts (only an explicit !!timestamp tag needs them: plain ones stay strings).
_TIMESTAMP_RE = re.compile(
    r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}"
    r"(([Tt][0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2}))"
    r"|( [0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(\.[0-9]+)?))?"
)


def _go_int(text: str, *, signed: bool) -> int | None:
    """strconv.ParseInt(text, 0, 64) (signed) or ParseUint(text, 0, 64); None when it fails."""
    match = _GO_INT.fullmatch(text)
    if match is None or (match.group(1) and not signed):
        return None
    body = match.group(2)
    prefix = body[1:2].lower()
    if prefix in _BASES:
        base, digits = _BASES[prefix], body[2:]
    else:
        base, digits = (8, body[1:]) if body.startswith("0") else (10, body)
    digits = digits.lstrip("0") or "0"
    if len(digits) > 64:  # more than 64 binary digits: out of range, and int() is never fed a long string
        return None
    value = int(digits, base) * (-1 if match.group(1) == "-" else 1)
    if signed:
        return value if _INT64[0] <= value <= _INT64[1] else None
    return value if value <= _UINT64_MAX else None


def _go_resolve(text: str) -> tuple[str, Any]:
    """go-yaml v2's `resolve("", text)`: the tag and value a plain scalar resolves to."""
    hint = _HINTS.get(text[:1], "N" if not text else None)
    if hint is None:
        return _STR, text
    special = _SPECIAL.get(text)
    if special is not None:
        return special
    if hint == "M":
        return _STR, text
    if hint == ".":
        if _DOT_FLOAT.fullmatch(text):
            number = float(text.replace("_", ""))
            if math.isfinite(number):
                return _FLOAT, number
        return _STR, text
    if _TIMESTAMP_RE.fullmatch(text):
        return _TIMESTAMP, text  # decoded into an interface, go-yaml v2 keeps the string
    plain = text.replace("_", "")
    for signed in (True, False):
        integer = _go_int(plain, signed=signed)
        if integer is not None:
            return _INT, integer
    if _YAML_FLOAT.fullmatch(plain):
        number = float(plain)
        if math.isfinite(number):  # strconv.ParseFloat fails with ErrRange: then it is a string
            return _FLOAT, number
    return _STR, text


def _plain_tag(text: str) -> str:
    """The tag go-yaml gives `text` written as a plain scalar (`<<` is a merge key, timestamps strings)."""
    if text == "<<":
        return _MERGE
    tag = _go_resolve(text)[0]
    return _STR if tag == _TIMESTAMP else tag


# ---------------------------------------------------------------------------------------------------------
# Go's JSON conversion (sigs.k8s.io/yaml, then encoding/json and the API server's decoding)


def _go_float32_g(number: float) -> str:
    """strconv.FormatFloat(number, 'g', -1, 32) with go-yaml's names for the infinities and NaN."""
    if math.isnan(number):
        return ".nan"
    if abs(number) > _FLOAT32_MAX:
        return ".inf" if number > 0 else "-.inf"
    single = struct.unpack("<f", struct.pack("<f", number))[0]
    if single == 0:
        return "-0" if math.copysign(1.0, single) < 0 else "0"
    for precision in range(1, 10):
        text = f"{abs(single):.{precision - 1}e}"
        if struct.unpack("<f", struct.pack("<f", float(text)))[0] == abs(single):
            break
    mantissa, _, exponent_text = text.partition("e")
    digits = mantissa.replace(".", "").rstrip("0") or "0"
    exponent = int(exponent_text)
    sign = "-" if single < 0 else ""
    if exponent < -4 or exponent >= 6:
        fraction = f".{digits[1:]}" if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{fraction}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    if exponent < 0:
        return f"{sign}0.{'0' * (-exponent - 1)}{digits}"
    whole, fraction = digits[: exponent + 1].ljust(exponent + 1, "0"), digits[exponent + 1 :]
    return f"{sign}{whole}{'.' + fraction if fraction else ''}"


def _json_value(raw: Any, mark: _Mark) -> Any:
    """A decoded scalar as it is after Go's JSON round trip."""
    if isinstance(raw, float):
        if not math.isfinite(raw):
            spelled = "NaN" if math.isnan(raw) else ("+Inf" if raw > 0 else "-Inf")
            raise mark.error(f"{spelled} is not a JSON number (kubectl: json: unsupported value: {spelled})")
        if raw.is_integer() and abs(raw) < 1e21 and _INT64[0] <= raw <= _INT64[1]:
            return int(raw)
        return raw
    if isinstance(raw, int) and not isinstance(raw, bool) and not _INT64[0] <= raw <= _INT64[1]:
        return float(raw)
    return raw


def _json_key(raw: Any, mark: _Mark) -> str:
    """A decoded scalar map key as sigs.k8s.io/yaml turns it into a JSON object key."""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, int):
        return str(raw)
    if isinstance(raw, float):
        return _go_float32_g(raw)
    raise mark.error("a map key may not be null (JSON object keys are strings)")


# ---------------------------------------------------------------------------------------------------------
# Building values from parser events


@dataclass(frozen=True, slots=True)
class _Mark:
    line: int
    column: int

    @classmethod
    def of(cls, event: Any) -> _Mark:
        mark = getattr(event, "start_mark", None)
        return cls(getattr(mark, "line", -1) + 1, getattr(mark, "column", -1) + 1)

    def error(self, problem: str) -> YAMLInputError:
        return YAMLInputError(problem, line=self.line, column=self.column)


_NO_KEY: Final = object()
_MERGE_KEY: Final = object()


@dataclass(slots=True)
class _Collection:
    """An open mapping or sequence: its value so far, and what an alias of it would decode."""

    value: dict[str, Any] | list[Any]
    anchor: str | None
    mark: _Mark
    size: int = 1
    """Nodes decoded for it: itself and everything under it, alias expansions included."""
    height: int = 1
    key: Any = _NO_KEY
    """For a mapping: the key waiting for its value, `_MERGE_KEY` for `<<`, or `_NO_KEY`."""


@dataclass(frozen=True, slots=True)
class _Anchored:
    value: Any
    """The value as decoded (a scalar before JSON conversion); copied at each use."""
    size: int
    height: int
    scalar: bool


@dataclass(slots=True)
class _Budget:
    """go-yaml's decode and alias counters, for one document and for the whole stream."""

    max_nodes: int | None
    decodes: int = 0
    aliased: int = 0
    stream_decodes: int = 0
    stream_aliased: int = 0

    def count(self, decodes: int, aliased: int, mark: _Mark) -> None:
        self.decodes += decodes
        self.aliased += aliased
        self.stream_decodes += decodes
        self.stream_aliased += aliased
        if self.max_nodes is not None and self.stream_decodes > self.max_nodes:
            raise mark.error(f"more than {self.max_nodes} nodes (aliases expanded)")
        for total, expanded in ((self.decodes, self.aliased), (self.stream_decodes, self.stream_aliased)):
            if expanded > 100 and total > 1000 and expanded / total > allowed_alias_ratio(total):
                raise mark.error(
                    f"document contains excessive aliasing: {expanded} of {total} nodes come from "
                    "aliases (the limit kubectl's YAML decoder sets)"
                )


def _copy(value: Any) -> Any:
    """A fresh copy of a decoded value (its depth is bounded by MAX_DEPTH)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


# libyaml's parser when PyYAML was built with it (about ten times faster), else the pure-Python one.
_Parser: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Builder:
    """Turns one stream's parser events into JSON values, one document at a time."""

    def __init__(self, text: str, *, max_nodes: int | None) -> None:
        self._text = text
        self._budget = _Budget(max_nodes)
        self._anchors: dict[str, _Anchored] = {}
        self._open_anchors: set[str] = set()
        self._stack: list[_Collection] = []
        self._root: Any = None

    def documents(self) -> Iterator[Any]:
        parser = _Parser(self._text)
        try:
            while True:
                try:
                    event = parser.get_event()
                except yaml.MarkedYAMLError as exc:
                    mark = exc.problem_mark
                    problem = elide(str(exc.problem or exc.context or "invalid YAML"))
                    if mark is None:
                        raise YAMLInputError(problem) from exc
                    raise YAMLInputError(problem, line=mark.line + 1, column=mark.column + 1) from exc
                except yaml.YAMLError as exc:
                    raise YAMLInputError(elide(str(exc))) from exc
                if isinstance(event, ScalarEvent):
                    self._scalar(event)
                elif isinstance(event, (MappingStartEvent, SequenceStartEvent)):
                    self._open(event)
                elif isinstance(event, (MappingEndEvent, SequenceEndEvent)):
                    self._close()
                elif isinstance(event, AliasEvent):
                    self._alias(event)
                elif isinstance(event, DocumentStartEvent):
                    self._anchors.clear()
                    self._budget.decodes = self._budget.aliased = 0
                    self._root = None
                elif isinstance(event, DocumentEndEvent):
                    yield self._root
                elif isinstance(event, StreamEndEvent):
                    return
        finally:
            parser.dispose()

    def _scalar(self, event: ScalarEvent) -> None:
        mark = _Mark.of(event)
        self._budget.count(1, 0, mark)
        tag, text = event.tag, event.value
        merge = False
        if tag is None and event.implicit[0]:
            raw = _go_resolve(text)[1]
            merge = text == "<<"
        elif tag is None or tag in ("!", _STR):
            raw = text
        elif tag == _BINARY:
            try:
                raw = base64.b64decode("".join(text.split()), validate=True).decode("utf-8", "replace")
            except (binascii.Error, ValueError) as exc:
                raise mark.error(f"!!binary value is not base64: {elide(text)}") from exc
        elif tag in _RESOLVABLE:
            raw = self._tagged(tag, text, mark)
        else:
            raw = text  # go-yaml ignores tags it does not know: the text is the value
        self._add(raw, mark, anchor=event.anchor, size=1, height=0, scalar=True, merge=merge)

    @staticmethod
    def _tagged(tag: str, text: str, mark: _Mark) -> Any:
        resolved, raw = _go_resolve(text)
        if resolved == tag:
            return raw
        if tag == _FLOAT and resolved == _INT:
            return float(raw)
        short = f"!!{tag.removeprefix(_TAG)}"
        raise mark.error(f"cannot decode !!{resolved.removeprefix(_TAG)} `{elide(text)}` as a {short}")

    def _open(self, event: MappingStartEvent | SequenceStartEvent) -> None:
        mark = _Mark.of(event)
        if len(self._stack) >= MAX_DEPTH:
            raise mark.error(f"collections nested more than {MAX_DEPTH} levels deep")
        self._budget.count(1, 0, mark)
        value: dict[str, Any] | list[Any] = {} if isinstance(event, MappingStartEvent) else []
        if event.anchor is not None:
            self._open_anchors.add(event.anchor)
        self._stack.append(_Collection(value=value, anchor=event.anchor, mark=mark))

    def _close(self) -> None:
        done = self._stack.pop()
        if isinstance(done.value, dict) and done.key is not _NO_KEY:  # the parser never allows it
            raise done.mark.error("a mapping key has no value")
        if done.anchor is not None:
            self._open_anchors.discard(done.anchor)
        self._add(done.value, done.mark, anchor=done.anchor, size=done.size, height=done.height, scalar=False)

    def _alias(self, event: AliasEvent) -> None:
        mark = _Mark.of(event)
        name = str(event.anchor)
        if name in self._open_anchors:
            raise mark.error(f"anchor {elide(name)!r} value contains itself")
        anchored = self._anchors.get(name)
        if anchored is None:
            raise mark.error(f"unknown anchor {elide(name)!r} referenced")
        if len(self._stack) + anchored.height > MAX_DEPTH:
            raise mark.error(f"collections nested more than {MAX_DEPTH} levels deep (through aliases)")
        self._budget.count(1 + anchored.size, anchored.size, mark)  # before anything is copied
        self._add(
            _copy(anchored.value),
            mark,
            anchor=None,
            size=anchored.size,
            height=anchored.height,
            scalar=anchored.scalar,
        )

    def _add(
        self,
        raw: Any,
        mark: _Mark,
        *,
        anchor: str | None,
        size: int,
        height: int,
        scalar: bool,
        merge: bool = False,
    ) -> None:
        if anchor is not None:
            self._anchors[anchor] = _Anchored(raw, size, height, scalar)
        if not self._stack:
            self._root = _json_value(raw, mark) if scalar else raw
            return
        parent = self._stack[-1]
        parent.size += size
        parent.height = max(parent.height, height + 1)
        if isinstance(parent.value, list):
            parent.value.append(_json_value(raw, mark) if scalar else raw)
        elif parent.key is _NO_KEY:
            if not scalar:
                raise mark.error("a map key must be a scalar, not a collection")
            parent.key = _MERGE_KEY if merge else _json_key(raw, mark)
        else:
            value = _json_value(raw, mark) if scalar else raw
            if parent.key is _MERGE_KEY:
                _merge(parent.value, value, mark)
            else:
                parent.value[parent.key] = value
            parent.key = _NO_KEY


def _merge(target: dict[str, Any], source: Any, mark: _Mark) -> None:
    """go-yaml v2's `<<`: the source's keys land now (over earlier keys); earlier maps of a list win."""
    sources = source if isinstance(source, list) else [source]
    if not all(isinstance(s, dict) for s in sources):
        raise mark.error("map merge requires map or sequence of maps as the value")
    for each in reversed(sources):
        target.update(each)


# ---------------------------------------------------------------------------------------------------------
# Public API


def load_all(text: str, *, max_nodes: int | None = None) -> list[Any]:
    """Every document of `text` (None for an empty one); raises `YAMLInputError`."""
    return list(_Builder(text, max_nodes=max_nodes).documents())


def load(text: str, *, max_nodes: int | None = None) -> Any:
    """The first document of `text`, as go-yaml's `Unmarshal` reads it (later documents are not read)."""
    for document in _Builder(text, max_nodes=max_nodes).documents():
        return document
    return None


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """A safe dumper whose plain scalars read back as the same value in go-yaml and in PyYAML alike."""

    def resolve(self, kind: type[Node], value: Any, implicit: tuple[bool, bool]) -> str:
        pyyaml_tag = str(super().resolve(kind, value, implicit))
        if kind is not ScalarNode or not implicit[0]:
            return pyyaml_tag
        go_tag = _plain_tag(value)
        return pyyaml_tag if go_tag == _STR else go_tag


def dump(value: Any) -> str:
    """Block-style YAML of a JSON value, keys sorted (as sigs.k8s.io/yaml writes them)."""
    return str(yaml.dump(value, Dumper=_Dumper, sort_keys=True, default_flow_style=False))
