"""Field errors and warnings: what validation returns instead of raising.

Go origin: `k8s.io/apimachinery/pkg/util/validation/field` (`field.Error`, `field.ErrorList`, the error types
and their `Error()` text) and controller-runtime's `admission.Warnings`.

Guarantees:
- A `FieldError` prints like Go's `field.Error.Error()`: `spec.trainer.env: Invalid value: ...: detail`,
  `spec.runtimePatches: Forbidden: detail`; the webhook puts these strings in its response unchanged.
- `Validation` values are immutable and combine with `+` (errors and warnings keep their order).
- Bounded whatever the input: a value is echoed in at most `runtime.echo.ECHO_LIMIT` characters, a field path
  in at most `PATH_LIMIT` and a detail in at most `DETAIL_LIMIT`; and every report of many errors (the
  webhooks' answers, `trainer-render`'s output, a TrainJob's `invalid TrainJob` condition) is made by
  `error_lines`: at most `PER_KIND` errors of one kind (one type and detail), then `and K more ...`, and
  at most `MAX_LINES` lines in all, then `and K more`. The lines it keeps print exactly as Go prints them.

- No character that is not printable (Go `unicode.IsPrint`: controls, format and bidirectional characters
  such as U+202E, zero-width joiners) reaches a line raw: a string value prints as Go's `%q` prints it
  (`"a\x00b"`, `"\u202e"`), and the path, the detail and any other value have those characters escaped
  the same way (`runtime.echo`), so a tenant's value cannot make a line read other than it says.

Deliberately missing: Go's `%#v` rendering of struct values. A bad value prints as a quoted string, a bare
number or boolean, or compact JSON for anything else. Go prints a path (map keys from input included) and
a detail as they are. Go lists every error, however many (upstream answers a
TrainJob with 1,600 bad runtime patch items with 1,600 lines).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from runtime.echo import ECHO_LIMIT, elide, escape, quote

__all__ = [
    "DETAIL_LIMIT",
    "MAX_LINES",
    "PATH_LIMIT",
    "PER_KIND",
    "ErrorType",
    "FieldError",
    "Validation",
    "error_lines",
]

PATH_LIMIT = 2 * ECHO_LIMIT
"""The most characters of a field path one error prints (a map key from input is part of the path)."""
DETAIL_LIMIT = 3 * ECHO_LIMIT
"""The most characters of a detail one error prints (a detail may quote a name from input)."""
PER_KIND = 5
"""The most errors of one kind (same type, same detail) a report lists before `and K more ...`."""
MAX_LINES = 20
"""The most lines a report lists (errors and `and K more ...` lines) before its last, `and K more`."""


class ErrorType(enum.Enum):
    """Go `field.ErrorType`, valued by its `String()` text."""

    NOT_FOUND = "Not found"
    REQUIRED = "Required value"
    DUPLICATE = "Duplicate value"
    INVALID = "Invalid value"
    NOT_SUPPORTED = "Unsupported value"
    FORBIDDEN = "Forbidden"
    TOO_LONG = "Too long"
    TOO_MANY = "Too many"
    INTERNAL = "Internal error"


_OMIT = object()
# Go prints no value for these types.
_VALUELESS = {ErrorType.REQUIRED, ErrorType.FORBIDDEN, ErrorType.TOO_LONG, ErrorType.INTERNAL}


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldError:
    """One problem with one field of an object (Go `field.Error`)."""

    path: str
    """The field, as Go prints a `field.Path`: `spec.trainer.args[0]`, `spec.annotations[key]`."""
    type: ErrorType
    message: str
    """Go's `Detail`."""
    value: Any = _OMIT
    """Go's `BadValue`; omitted for the types that print none."""

    @classmethod
    def invalid(cls, path: str, value: Any, message: str) -> FieldError:
        return cls(path=path, type=ErrorType.INVALID, value=value, message=message)

    @classmethod
    def forbidden(cls, path: str, message: str) -> FieldError:
        return cls(path=path, type=ErrorType.FORBIDDEN, message=message)

    @classmethod
    def required(cls, path: str, message: str) -> FieldError:
        return cls(path=path, type=ErrorType.REQUIRED, message=message)

    @classmethod
    def internal(cls, path: str, message: str) -> FieldError:
        return cls(path=path, type=ErrorType.INTERNAL, message=message)

    @classmethod
    def not_supported(cls, path: str, value: Any, supported: Iterable[str]) -> FieldError:
        quoted = ", ".join(f'"{s}"' for s in supported)
        return cls(
            path=path, type=ErrorType.NOT_SUPPORTED, value=value, message=f"supported values: {quoted}"
        )

    @property
    def has_value(self) -> bool:
        return self.value is not _OMIT

    def body(self) -> str:
        """Go `ErrorBody()`: the type, the value when it prints one, and the detail."""
        text = self.type.value
        if self.type not in _VALUELESS and self.has_value:
            text = f"{text}: {_render(self.value)}"
        if self.message:
            text = f"{text}: {elide(self.message, DETAIL_LIMIT)}"
        return text

    def __str__(self) -> str:
        return f"{elide(self.path, PATH_LIMIT)}: {self.body()}"

    @property
    def kind(self) -> tuple[ErrorType, str]:
        """What `error_lines` groups by: the type and the detail (not the path nor the value)."""
        return self.type, self.message


def error_lines(
    errors: Iterable[FieldError | str], *, per_kind: int = PER_KIND, max_lines: int = MAX_LINES
) -> list[str]:
    """The lines that report `errors`, bounded whatever their number: what every report of several field
    errors prints (one line each, or joined by the caller).

    1. Identical lines are listed once (as Go's `utilerrors.NewAggregate` does).
    2. Of each kind of `FieldError` (`FieldError.kind`: its type and detail), the first `per_kind` are
       listed as Go prints them; right after the last of them comes `and K more <type> errors: <detail>`.
       A plain string is a kind of its own.
    3. After `max_lines` lines, one last line `and K more` counts the errors not listed.

    So at most `max_lines + 1` lines, each bounded (`FieldError.__str__`), in the order the errors came.
    """
    unique: dict[str, FieldError | str] = {}
    for error in errors:
        unique.setdefault(
            escape(str(error)), error
        )  # a FieldError's line is escaped already; a string may not be
    totals: dict[object, int] = {}
    for error in unique.values():
        key = error.kind if isinstance(error, FieldError) else error
        totals[key] = totals.get(key, 0) + 1
    lines: list[tuple[str, int]] = []  # (line, how many errors it reports)
    listed: dict[object, int] = {}
    for line, error in unique.items():
        key = error.kind if isinstance(error, FieldError) else error
        seen = listed[key] = listed.get(key, 0) + 1
        if seen <= per_kind:
            lines.append((line, 1))
        if seen == per_kind and totals[key] > per_kind and isinstance(error, FieldError):
            more = totals[key] - per_kind
            detail = f": {elide(error.message, DETAIL_LIMIT)}" if error.message else ""
            lines.append((f"and {more} more {error.type.value} errors{detail}", more))
    if len(lines) <= max_lines:
        return [line for line, _ in lines]
    kept = lines[:max_lines]
    rest = len(unique) - sum(count for _, count in kept)
    return [*(line for line, _ in kept), f"and {rest} more"]


def _render(value: Any) -> str:
    """The value as Go prints a `BadValue`: a string as `%q` does (`runtime.echo.quote`: quoted, every
    character that is not printable escaped), a number or boolean bare, anything else as compact JSON whose
    characters that are not printable are escaped the same way (`runtime.echo.elide`); cut to
    `runtime.echo.ECHO_LIMIT` characters of the value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    try:
        if isinstance(value, (int, float)):
            return elide(str(value))
        if isinstance(value, str):
            return quote(value)
        return elide(orjson.dumps(value, default=str).decode())
    except (ValueError, TypeError):
        # An integer too long to print (Python refuses over 4300 digits) or beyond JSON's 64 bits: only
        # parsed YAML holds one (the API server stores int64 at most). Say so rather than fail to report.
        return "<a value too large to print>"


@dataclass(frozen=True, slots=True, kw_only=True)
class Validation:
    """The outcome of validating an object: field errors (reject) and warnings (admit, but tell the user)."""

    errors: tuple[FieldError, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.errors

    def __add__(self, other: Validation) -> Validation:
        return Validation(errors=self.errors + other.errors, warnings=self.warnings + other.warnings)

    @classmethod
    def of(cls, errors: Iterable[FieldError] = (), warnings: Iterable[str] = ()) -> Validation:
        return cls(errors=tuple(errors), warnings=tuple(warnings))
