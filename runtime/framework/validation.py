"""Field errors and warnings: what validation returns instead of raising.

Go origin: `k8s.io/apimachinery/pkg/util/validation/field` (`field.Error`, `field.ErrorList`, the error types
and their `Error()` text) and controller-runtime's `admission.Warnings`.

Guarantees:
- A `FieldError` prints like Go's `field.Error.Error()`: `spec.trainer.env: Invalid value: ...: detail`,
  `spec.runtimePatches: Forbidden: detail`; the webhook puts these strings in its response unchanged.
- `Validation` values are immutable and combine with `+` (errors and warnings keep their order).

Deliberately missing: Go's `%#v` rendering of struct values. A bad value prints as a quoted string, a bare
number or boolean, or compact JSON for anything else.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from runtime.echo import elide

__all__ = ["ErrorType", "FieldError", "Validation"]


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
            text = f"{text}: {self.message}"
        return text

    def __str__(self) -> str:
        return f"{self.path}: {self.body()}"


def _render(value: Any) -> str:
    """The value as Go prints a `BadValue` (JSON), cut to `runtime.echo.ECHO_LIMIT` characters."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    try:
        if isinstance(value, (int, float)):
            return elide(str(value))
        if isinstance(value, str):
            return elide(orjson.dumps(value).decode())
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
