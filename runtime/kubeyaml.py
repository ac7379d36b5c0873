"""YAML as kubectl reads it, safe against hostile input, and as sigs.k8s.io/yaml writes it.

Go origin: `sigs.k8s.io/yaml` (`YAMLToJSON`: go-yaml v2 decodes, then Go's `encoding/json` converts) as
kubectl and the controllers use it, with go-yaml v2's resolver (`resolve.go`) and its alias-expansion limit
(`decode.go`, `allowedAliasRatio`); for writing, `Marshal` (go-yaml v2 `encode.go`, `emitterc.go`,
`sorter.go`). Written anew over PyYAML's event parser (libyaml when available); this
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
- Text: a string holding a lone surrogate (no UTF-8 text, which only a caller of the library can pass)
  is refused naming the character, without a line and column.
- Each alias use is a fresh copy: no two places of a document share a mutable value.
- Messages repeat at most `runtime.echo.ECHO_LIMIT` characters of any value.

`dump` writes what upstream's `sigs.k8s.io/yaml.Marshal` (v1.6.0: `json.Marshal`, then go-yaml v2.4.3's
`JSONToYAML`) writes for the JSON value Go holds, byte for byte (test_render_goyaml_marshal.py checks it
against Go's own output on a hostile corpus):
- Keys in go-yaml's order (`sorter.go`): non-letters before letters, runs of digits by value (`a2` before
  `a10`), else by code point. Block style, two spaces, sequences in a mapping not indented; `{}` and `[]`
  for empty collections; a key longer than 128 bytes or with a line break as `? key` / `: value`.
- Strings plain when go-yaml's resolver reads them back as strings and its emitter allows it; single-quoted
  where only an indicator or edge spaces forbid plain; double-quoted with go-yaml's escapes when they would
  resolve as something else (`"y"`, `"0o10"`, `"2001-12-14"`, `"1:30"`, `""`) or hold characters it does
  not print (tab, CR, C0 and C1 controls, U+FEFF, anything beyond U+FFFF); literal blocks (`|`, `|-`, `|+`,
  an indentation hint when it opens with a space) for multi-line ones. Plain and quoted scalars fold at their
  first single space past column 80; literal blocks never.
- Numbers as Go's JSON round trip leaves them: `2.0` is `2`, a whole float below 1e21 its shortest digits
  (`5.368166190431145e16` is `53681661904311450`), an integer beyond 64 bits a float
  (`1.8446744073709552e+19`), other floats in Go's `%g` (`1e-07`, `1.5e+06`). A U+0085 (NEL) folds
  with the spaces around it, as go-yaml reads Go's JSON.
- What it writes reads back through `load` as the value Go holds (not so for NaN and infinities, written
  `.nan`/`.inf` as go-yaml writes a float, which no JSON value is: Go's `json.Marshal` refuses them).

Deliberate differences from Go's bytes: a key `<<` is quoted (go-yaml writes it plain, then reads it back
as a merge key); strings with DEL, C1 controls (other than NEL), U+FFFE or U+FFFF, or a key with a NEL,
which go-yaml refuses to read back from Go's JSON (so `Marshal` fails), are written escaped; for key sets
on which go-yaml's comparison is not an order (`x1y`, `x9y`, `x10y`) Go's order changes from run to run
with its map iteration, ours is always the same one.

Deliberately missing: go-yaml's per-node check of the alias ratio inside one alias expansion (the ratio
is checked after each alias and each node, which refuses the same documents up to rounding), its exact
error texts, and non-deterministic duplicate float keys.
"""

from __future__ import annotations

import base64
import binascii
import functools
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

from runtime.api.views import copy_json
from runtime.echo import elide

__all__ = [
    "MAX_DEPTH",
    "YAMLInputError",
    "allowed_alias_ratio",
    "dump",
    "load",
    "load_all",
    "node_count",
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
# go-yaml's parseTimestamp: `time.Parse` with "2006-1-2T15:4:5.999999999Z07:00" (or a lower-case "t"),
# "2006-1-2 15:4:5.999999999" (one space or more) or "2006-1-2"; the ranges are checked by `_go_timestamp`.
_TIMESTAMP_RE = re.compile(
    r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})"
    r"(?:(?:[Tt]|( +))([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(?:[.,][0-9]+)?"
    r"(Z|[+-]([0-9]{2}):([0-9]{2}))?)?"
)
_DAYS_IN_MONTH = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _go_timestamp(text: str) -> bool:
    """Whether go-yaml v2 resolves the plain scalar `text` as a timestamp (its `parseTimestamp`)."""
    match = _TIMESTAMP_RE.fullmatch(text)
    if match is None:
        return False
    year, month, day, spaces, hour, minute, second, zone, zone_hour, zone_minute = match.groups()
    if hour is not None and (spaces is None) == (zone is None):
        return False  # a zone after "T" or "t" only, and always there
    if not 1 <= int(month) <= 12:
        return False
    leap = int(year) % 4 == 0 and (int(year) % 100 != 0 or int(year) % 400 == 0)
    if not 1 <= int(day) <= _DAYS_IN_MONTH[int(month) - 1] + (leap and int(month) == 2):
        return False
    if hour is not None and (int(hour) > 23 or int(minute) > 59 or int(second) > 59):
        return False
    return zone_hour is None or (int(zone_hour) <= 24 and int(zone_minute) <= 60)


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
    if _go_timestamp(text):
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


# ---------------------------------------------------------------------------------------------------------
# Go's JSON conversion (sigs.k8s.io/yaml, then encoding/json and the API server's decoding)


def _go_g(number: float, digits: str, exponent: int) -> str:
    """strconv.FormatFloat(number, 'g', -1, _) from its shortest decimal digits (no trailing zeros) and the
    decimal exponent of the first one: an exponent below -4 or from 6 on is written as `d.ddde+XX`."""
    sign = "-" if math.copysign(1.0, number) < 0 else ""
    if exponent < -4 or exponent >= 6:
        fraction = f".{digits[1:]}" if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{fraction}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    if exponent < 0:
        return f"{sign}0.{'0' * (-exponent - 1)}{digits}"
    whole, fraction = digits[: exponent + 1].ljust(exponent + 1, "0"), digits[exponent + 1 :]
    return f"{sign}{whole}{'.' + fraction if fraction else ''}"


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
    mantissa, _, exponent = text.partition("e")
    return _go_g(single, mantissa.replace(".", "").rstrip("0") or "0", int(exponent))


def _go_float64_g(number: float) -> str:
    """strconv.FormatFloat(number, 'g', -1, 64) with go-yaml's names for the infinities and NaN (Python's
    `repr` has the same shortest digits as Go)."""
    if not math.isfinite(number):
        return ".nan" if math.isnan(number) else (".inf" if number > 0 else "-.inf")
    if number == 0:
        return "-0" if math.copysign(1.0, number) < 0 else "0"
    mantissa, _, exponent = f"{abs(number)!r}".partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    shift = len(whole) - 1 - (len(whole + fraction) - len(digits))  # leading zeros: 0.00123
    return _go_g(number, digits.rstrip("0") or "0", int(exponent or 0) + shift)


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
        try:
            parser = _Parser(self._text)
        except UnicodeEncodeError as exc:  # a lone surrogate: no UTF-8 text, so no YAML (kubectl's neither)
            raise YAMLInputError(f"not UTF-8: a lone surrogate at character {exc.start + 1}") from exc
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
            copy_json(anchored.value),
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


# ---------------------------------------------------------------------------------------------------------
# Writing: sigs.k8s.io/yaml's Marshal (json.Marshal, go-yaml v2's encode.go, emitterc.go, sorter.go)

_WIDTH: Final = 80
"""go-yaml's `best_width`: a plain or quoted scalar is folded at its first space past this column."""
_INDENT: Final = 2
_SIMPLE_KEY_BYTES: Final = 128
"""The longest key (UTF-8 bytes) written as `key: value`; a longer one is written `? key` / `: value`."""

_PLAIN, _SINGLE, _DOUBLE, _LITERAL = "plain", "single", "double", "literal"
_BREAKS: Final = "\r\n\x85\u2028\u2029"
_ESCAPES: Final = {
    "\x00": "0", "\x07": "a", "\x08": "b", "\t": "t", "\n": "n", "\x0b": "v", "\x0c": "f", "\r": "r",
    "\x1b": "e", '"': '"', "\\": "\\", "\x85": "N", "\u2028": "L", "\u2029": "P",
}  # fmt: skip
# Characters go-yaml writes as they are: `is_printable` (tab and CR are not; nor is anything beyond U+FFFF).
_UNPRINTABLE = re.compile("[^\n\x20-\x7e\xa0-\ud7ff\ue000-\ufefe\uff00-\ufffd]")
_NEEDS_ESCAPE = re.compile('[^\x20-\x7e\xa0-\ud7ff\ue000-\ufefe\uff00-\ufffd]|["\\\\\u2028\u2029]')
_BLOCK_INDICATOR = re.compile(
    r"---|\.\.\.|[#,\[\]{}&*!|>'\"%@`]|[?:-](?:[ \t]|\Z)|.+?:(?:[ \t]|\Z)|.*?[ \t\r\n\x85\u2028\u2029\x00]#",
    re.DOTALL,
)
_BREAK_SPACE = re.compile("[\r\n\x85\u2028\u2029] ")
_SPACE_BREAK = re.compile(" [\r\n\x85\u2028\u2029]")
_BASE60_FLOAT = re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?")
# Strings plain in any position, whatever the column: the common case, decided without the full analysis.
_PLAIN_WORD = re.compile(r"[A-Za-z_/=$^()][A-Za-z0-9_./=$^()+-]*")
_LETTERS_ONLY = re.compile(r"[A-Za-z]*")


_SURROGATE = re.compile("[\ud800-\udfff]")


_NEL_RUN = re.compile("[ \x85]*\x85[ \x85]*")


def _fold_nel(run: re.Match[str]) -> str:
    breaks = run.group().count("\x85")
    return " " if breaks == 1 else "\n" * (breaks - 1)


def _go_string(text: str) -> str:
    """The string go-yaml holds for `text` after JSONToYAML's round trip: a lone surrogate (not UTF-8) is
    U+FFFD, as json.Marshal writes it; json.Marshal leaves U+0085 (NEL) unescaped, and go-yaml reads it
    as a line break in a quoted scalar, which it folds with the spaces around it (one is a space, n are
    n-1 newlines)."""
    if text.isascii():
        return text
    if "\x85" in text:
        text = _NEL_RUN.sub(_fold_nel, text)
    return _SURROGATE.sub("\ufffd", text)


def _wrap64(value: int) -> int:
    """`value` as Go's int64 arithmetic leaves it (wrapping around)."""
    return (value + 2**63) % 2**64 - 2**63


def _key_less(a: str, b: str) -> bool:
    """go-yaml v2's `keyList.Less` for two string keys: letters after everything else, runs of digits by
    their value (`a2` before `a10`), then by code point; a prefix first."""
    for i in range(min(len(a), len(b))):
        x, y = a[i], b[i]
        if x == y:
            continue
        x_letter, y_letter = x.isalpha(), y.isalpha()
        if x_letter and y_letter:
            return x < y
        if x_letter or y_letter:
            return y_letter
        x_number = y_number = 0
        if x == "0" or y == "0":
            j = i - 1
            while j >= 0 and a[j].isdecimal():
                if a[j] != "0":
                    x_number = y_number = 1
                    break
                j -= 1
        x_end = i
        while x_end < len(a) and a[x_end].isdecimal():
            x_number = _wrap64(x_number * 10 + ord(a[x_end]) - 48)
            x_end += 1
        y_end = i
        while y_end < len(b) and b[y_end].isdecimal():
            y_number = _wrap64(y_number * 10 + ord(b[y_end]) - 48)
            y_end += 1
        if x_number != y_number:
            return x_number < y_number
        if x_end != y_end:
            return x_end < y_end
        return x < y
    return len(a) < len(b)


def _key_compare(a: str, b: str) -> int:
    return -1 if _key_less(a, b) else int(_key_less(b, a))


_KEY_ORDER = functools.cmp_to_key(_key_compare)


def _sorted_keys(mapping: dict[str, Any]) -> list[str]:
    keys = list(mapping)
    if all(_LETTERS_ONLY.fullmatch(key) for key in keys):
        return sorted(keys)  # the same order, cheaper
    return sorted(keys, key=_KEY_ORDER)


def _go_number(number: int | float) -> str:
    """A number as sigs.k8s.io/yaml writes it: Go's JSON text of it (a float in its shortest form, whole ones
    below 1e21 without an exponent) read back by go-yaml as an int64, else a uint64, else a float64, and
    written again (`2.0` is `2`, `1e20` is `1e+20`, beyond 64 bits a float)."""
    if isinstance(number, int):
        if _INT64[0] <= number <= _UINT64_MAX:
            return str(number)
        try:
            return _go_float64_g(float(number))
        except OverflowError:  # strconv.ParseFloat's ErrRange: go-yaml keeps the digits as a string
            return str(number)
    if number.is_integer() and abs(number) < 1e21:
        mantissa, _, exponent = f"{abs(number)!r}".partition("e")
        whole, _, fraction = mantissa.partition(".")
        digits = (whole + fraction).rstrip("0") or "0"
        written = int(digits) * 10 ** (int(exponent or 0) + len(whole) - len(digits))  # 'f' format, -1
        written = -written if number < 0 else written
        if _INT64[0] <= written <= _UINT64_MAX:
            return str(written)
    return _go_float64_g(number)


@dataclass(frozen=True, slots=True)
class _Analysis:
    """go-yaml's `yaml_emitter_analyze_scalar` of a string, as far as block context needs it."""

    multiline: bool
    plain: bool
    single_quoted: bool
    literal: bool


def _analyze(text: str) -> _Analysis:
    if not text:
        return _Analysis(multiline=False, plain=True, single_quoted=True, literal=False)
    special = _UNPRINTABLE.search(text) is not None
    breaks = any(c in text for c in _BREAKS)
    space_break = _SPACE_BREAK.search(text) is not None
    break_space = _BREAK_SPACE.search(text) is not None
    edges = text[0] == " " or text[-1] == " " or text[0] in _BREAKS or text[-1] in _BREAKS
    indicators = _BLOCK_INDICATOR.match(text) is not None
    return _Analysis(
        multiline=breaks,
        plain=not (edges or breaks or special or space_break or break_space or indicators),
        single_quoted=not (special or space_break or break_space),
        literal=not (special or space_break or text[-1] == " "),
    )


def _requested_style(text: str) -> str:
    """go-yaml's `stringv`: literal when multi-line, plain when it reads back as the same string (not
    another type, not a YAML 1.1 base-60 float), else double-quoted."""
    if "\n" in text:
        return _LITERAL
    if _go_resolve(text)[0] == _STR and not (":" in text and _BASE60_FLOAT.fullmatch(text)):
        return _PLAIN
    return _DOUBLE


class _Emitter:
    """go-yaml v2's emitter (a port of libyaml's) for the events its encoder makes of a JSON value: block
    mappings and sequences, `{}` and `[]` for empty ones, scalars in the style `stringv` asks for as far
    as the emitter allows it. The fields are the emitter's own (`column` counts characters)."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.column = 0
        self.indent = -1
        self.indents: list[int] = []
        self.whitespace = True
        self.indention = True
        self.mapping_context = False

    # Writing primitives (emitterc.go: put, put_break, write_indent, write_indicator)

    def put(self, text: str) -> None:
        self.out.append(text)
        self.column += len(text)

    def put_break(self) -> None:
        self.out.append("\n")
        self.column = 0

    def write_break(self, char: str) -> None:
        self.out.append(char)
        self.column = 0

    def write_indent(self) -> None:
        indent = max(self.indent, 0)
        if not self.indention or self.column > indent or (self.column == indent and not self.whitespace):
            self.put_break()
        if self.column < indent:
            self.put(" " * (indent - self.column))
        self.whitespace = self.indention = True

    def write_indicator(self, indicator: str, need_space: bool, whitespace: bool, indention: bool) -> None:
        if need_space and not self.whitespace:
            self.put(" ")
        self.put(indicator)
        self.whitespace = whitespace
        self.indention = self.indention and indention

    def increase_indent(self, *, flow: bool, indentless: bool) -> None:
        self.indents.append(self.indent)
        if self.indent < 0:
            self.indent = _INDENT if flow else 0
        elif not indentless:
            self.indent += _INDENT

    # Nodes

    def node(self, value: Any, *, mapping: bool = False, simple_key: bool = False) -> None:
        self.mapping_context = mapping
        if isinstance(value, dict):
            if value:
                self.block_mapping(value)
            else:
                self.write_indicator("{", True, True, False)
                self.write_indicator("}", False, False, False)
        elif isinstance(value, list):
            if value:
                self.block_sequence(value)
            else:
                self.write_indicator("[", True, True, False)
                self.write_indicator("]", False, False, False)
        elif isinstance(value, str):
            self.string(value, simple_key=simple_key)
        elif isinstance(value, bool):
            self.scalar("true" if value else "false", _PLAIN, simple_key=simple_key)
        elif isinstance(value, (int, float)):
            self.scalar(_go_number(value), _PLAIN, simple_key=simple_key)
        elif value is None:
            self.scalar("null", _PLAIN, simple_key=simple_key)
        else:
            raise TypeError(f"not a JSON value: {type(value).__name__}")

    def block_mapping(self, mapping: dict[str, Any]) -> None:
        self.increase_indent(flow=False, indentless=False)
        for key in _sorted_keys(mapping):
            if not isinstance(key, str):
                raise TypeError(f"not a JSON object key: {type(key).__name__}")
            self.write_indent()
            text = _go_string(key)
            if (len(text) * 4 <= _SIMPLE_KEY_BYTES or len(text.encode()) <= _SIMPLE_KEY_BYTES) and not any(
                c in text for c in _BREAKS
            ):
                if text == "<<":  # go-yaml writes it plain, then reads it back as a merge key
                    self.scalar(text, _DOUBLE, simple_key=True)
                else:
                    self.string(text, simple_key=True)
                self.write_indicator(":", False, False, False)
            else:
                self.write_indicator("?", True, False, True)
                self.string(text, simple_key=False)
                self.write_indent()
                self.write_indicator(":", True, False, True)
            self.node(mapping[key], mapping=True)
        self.indent = self.indents.pop()

    def block_sequence(self, sequence: list[Any]) -> None:
        self.increase_indent(flow=False, indentless=self.mapping_context and not self.indention)
        for item in sequence:
            self.write_indent()
            self.write_indicator("-", True, False, True)
            self.node(item)
        self.indent = self.indents.pop()

    # Scalars (emitterc.go: select_scalar_style, process_scalar and the four writers)

    def string(self, text: str, *, simple_key: bool) -> None:
        text = _go_string(text)
        if _PLAIN_WORD.fullmatch(text) and _go_resolve(text)[0] == _STR:
            self.scalar(text, _PLAIN, simple_key=simple_key, analysis=_WORD)
        else:
            self.scalar(text, _requested_style(text), simple_key=simple_key)

    def scalar(self, text: str, style: str, *, simple_key: bool, analysis: _Analysis | None = None) -> None:
        found = analysis or _analyze(text)
        if simple_key and found.multiline:
            style = _DOUBLE
        if style == _PLAIN and (not found.plain or (not text and simple_key)):
            style = _SINGLE
        if style == _SINGLE and not found.single_quoted:
            style = _DOUBLE
        if style == _LITERAL and (not found.literal or simple_key):
            style = _DOUBLE
        self.increase_indent(flow=True, indentless=False)
        if style == _PLAIN:
            self.plain(text, breaks_allowed=not simple_key)
        elif style == _SINGLE:
            self.single_quoted(text, breaks_allowed=not simple_key)
        elif style == _DOUBLE:
            self.double_quoted(text, breaks_allowed=not simple_key)
        else:
            self.literal(text)
        self.indent = self.indents.pop()

    def plain(self, text: str, *, breaks_allowed: bool) -> None:
        if not self.whitespace:
            self.put(" ")
        if not breaks_allowed or " " not in text or self.column + len(text) <= _WIDTH + 1:
            self.put(text)  # no space past the width: written whole
        else:
            spaces = False
            for i, char in enumerate(text):
                if char == " ":
                    if not spaces and self.column > _WIDTH and text[i + 1] != " ":
                        self.write_indent()
                    else:
                        self.put(char)
                    spaces = True
                else:
                    self.put(char)
                    self.indention = spaces = False
        self.whitespace = self.indention = False

    def single_quoted(self, text: str, *, breaks_allowed: bool) -> None:
        self.write_indicator("'", True, False, False)
        spaces = breaks = False
        last = len(text) - 1
        for i, char in enumerate(text):
            if char == " ":
                fold = breaks_allowed and not spaces and self.column > _WIDTH
                if fold and 0 < i < last and text[i + 1] != " ":
                    self.write_indent()
                else:
                    self.put(char)
                spaces = True
            elif char in _BREAKS:
                if not breaks and char == "\n":
                    self.put_break()
                self.write_break(char)
                self.indention = breaks = True
            else:
                if breaks:
                    self.write_indent()
                self.put("''" if char == "'" else char)
                self.indention = spaces = breaks = False
        self.write_indicator("'", False, False, False)
        self.whitespace = self.indention = False

    def double_quoted(self, text: str, *, breaks_allowed: bool) -> None:
        self.write_indicator('"', True, False, False)
        spaces = False
        last = len(text) - 1
        for i, char in enumerate(text):
            if _NEEDS_ESCAPE.match(char):
                self.put("\\" + (_ESCAPES.get(char) or _hex_escape(ord(char))))
                spaces = False
            elif char == " ":
                if breaks_allowed and not spaces and self.column > _WIDTH and 0 < i < last:
                    self.write_indent()
                    if text[i + 1] == " ":
                        self.put("\\")
                else:
                    self.put(char)
                spaces = True
            else:
                self.put(char)
                spaces = False
        self.write_indicator('"', False, False, False)
        self.whitespace = self.indention = False

    def literal(self, text: str) -> None:
        self.write_indicator("|", True, False, False)
        if text[0] == " " or text[0] in _BREAKS:
            self.write_indicator(str(_INDENT), False, False, False)
        if text[-1] not in _BREAKS:
            self.write_indicator("-", False, False, False)
        elif len(text) == 1 or text[-2] in _BREAKS:
            self.write_indicator("+", False, False, False)
        self.put_break()
        self.indention = self.whitespace = True
        breaks = True
        for line in _LINES.split(text):
            if not line:
                continue
            if line in _BREAKS:
                self.write_break(line)
                self.indention = breaks = True
            else:
                if breaks:
                    self.write_indent()
                self.put(line)
                self.indention = breaks = False


def _hex_escape(code: int) -> str:
    if code <= 0xFF:
        return f"x{code:02X}"
    return f"u{code:04X}" if code <= 0xFFFF else f"U{code:08X}"


_WORD: Final = _Analysis(multiline=False, plain=True, single_quoted=True, literal=True)
_LINES = re.compile(f"([{_BREAKS}])")


def dump(value: Any) -> str:
    """The text sigs.k8s.io/yaml's `Marshal` (v1.6.0, go-yaml v2.4.3) writes for the JSON value Go holds as
    `value`, byte for byte (see the module docstring for what it cannot be given)."""
    emitter = _Emitter()
    emitter.node(value)
    emitter.indent = -1
    emitter.write_indent()
    return "".join(emitter.out)


def node_count(value: Any, *, limit: int) -> int:
    """The nodes `load` decodes from `dump(value)`, as its `max_nodes` counts them: one per scalar (mapping
    keys included) and one per collection; counted only up to `limit + 1`, so O(min(size, limit))."""
    count = 0
    pending = [value]
    while pending and count <= limit:
        item = pending.pop()
        count += 1
        if isinstance(item, dict):
            count += len(item)
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return count
