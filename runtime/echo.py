"""How a value from untrusted input is echoed in a message: at most `ECHO_LIMIT` characters.

Go origin: none. Upstream echoes values whole; a tenant's 1 MiB string (or an alias bomb's expansion) then
becomes a 1 MiB error line in an event, a condition, a log record and a terminal. Every message of the
pipeline that repeats a value from input (schema and webhook field errors, `trainer-render`'s errors,
runtime snapshot errors, YAML errors) goes through `elide`.

Guarantees: `elide(text)` is `text` when it has at most `limit` characters; otherwise its first `limit`
characters, an ellipsis and the original length, so the reader knows something was cut and how much.
"""

from __future__ import annotations

__all__ = ["ECHO_LIMIT", "elide"]

ECHO_LIMIT = 200
"""The most characters of one value a message repeats."""


def elide(text: object, limit: int = ECHO_LIMIT) -> str:
    """`text`, or its first `limit` characters + `… (N characters)` when it is longer. A value that is not a
    string (a field a tenant set to null or a number) is echoed as its `str`."""
    if not isinstance(text, str):
        text = str(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} characters)"
