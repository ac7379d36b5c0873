"""How a value from untrusted input is echoed in a message: at most `ECHO_LIMIT` characters of it, and never
a character that is not printable.

Go origin: `strconv.Quote` (what `%q` prints: `k8s.io/apimachinery` `field.Error` prints a string `BadValue`
with it) and its `appendEscapedRune`, for `go_quote` and `escape`. The bound is not Go's: upstream echoes
values whole, so a tenant's 1 MiB string (or an alias bomb's expansion) becomes a 1 MiB error line in an
event, a condition, a log record and a terminal. Every message of the pipeline that repeats a value from
input (schema and webhook field errors, `trainer-render`'s errors, runtime snapshot errors, YAML errors) goes
through `elide` or `quote`.

Guarantees:
- Printable means Go's `unicode.IsPrint`: letters, marks, numbers, punctuation, symbols and the ASCII space
  (Python's `str.isprintable` is the same set). Everything else (C0 and C1 controls, DEL, format characters
  such as U+200D ZERO WIDTH JOINER and the bidirectional overrides U+202A..U+202E and isolates
  U+2066..U+2069, separators other than the space, private use, surrogates, unassigned code points) is
  printed as Go's `strconv.Quote` escapes it: `\\n`, `\\t` and the other C escapes, `\\x00`..`\\x1f` and
  `\\x7f`, `\\u202e`, `\\U000e0001`. So no character of input can make a message read other than it says;
  printable characters beyond the BMP (emoji, CJK extension B) are kept, as Go keeps them.
- `go_quote(text)` is Go's `strconv.Quote(text)` byte for byte for any text Python and Go agree is printable
  (both follow the Unicode standard; Python 3.11 knows Unicode 14.0, Go 1.2x 15.0, so a character assigned
  in between is escaped here and printed by Go).
- `escape` leaves a printable character, quotes and backslashes included, as it is, so it is idempotent:
  escaping a message twice changes nothing.
- `elide(text)` is `escape(text)` when `text` has at most `limit` characters; otherwise the escape of its
  first `limit` characters, an ellipsis and the original length, so the reader knows something was cut and
  how much. `quote(text)` is the same with `go_quote`. Each kept character prints as at most 10 (an escape
  `\\U000e0001`), so the output is bounded by the limit whatever the input; only the kept characters are
  scanned, so the cost is too.

Deliberately missing: Go's `\\x` escapes of bytes that are not UTF-8 (a Python `str` holds none; a lone
surrogate, which JSON decoding can produce, is escaped `\\udXXX`).
"""

from __future__ import annotations

import re

__all__ = ["ECHO_LIMIT", "elide", "escape", "go_quote", "quote"]

ECHO_LIMIT = 200
"""The most characters of one value a message repeats."""

_C_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}
_NOT_ASCII_PRINTABLE = re.compile(r"[^\x20-\x7e]")
_NOT_QUOTABLE_AS_IS = re.compile(r"[^\x20\x21\x23-\x5b\x5d-\x7e]")  # and '"' (0x22), '\' (0x5c)


def _escaped_rune(ch: str) -> str:
    """Go `appendEscapedRune` for a character that is not printable."""
    if ch in _C_ESCAPES:
        return _C_ESCAPES[ch]
    code = ord(ch)
    if code < 0x20 or code == 0x7F:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _escape_match(match: re.Match[str]) -> str:
    ch = match.group()
    return ch if ch.isprintable() else _escaped_rune(ch)


def _quote_match(match: re.Match[str]) -> str:
    ch = match.group()
    if ch in '"\\':
        return "\\" + ch
    return ch if ch.isprintable() else _escaped_rune(ch)


def escape(text: str) -> str:
    """`text` with each character that is not printable escaped as `strconv.Quote` escapes it; every other
    character (quotes and backslashes too) as it is."""
    if text.isprintable():
        return text
    return _NOT_ASCII_PRINTABLE.sub(_escape_match, text)


def go_quote(text: str) -> str:
    """Go `strconv.Quote(text)`: double quotes, `\\"` and `\\\\`, and the escapes of `escape`."""
    if text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    return '"' + _NOT_QUOTABLE_AS_IS.sub(_quote_match, text) + '"'


def elide(text: object, limit: int = ECHO_LIMIT) -> str:
    """`escape(text)`, or the escape of its first `limit` characters + `… (N characters)` when it is longer.
    A value that is not a string (a field a tenant set to null or a number) is echoed as its `str`."""
    if not isinstance(text, str):
        text = str(text)
    if len(text) <= limit:
        return escape(text)
    return f"{escape(text[:limit])}… ({len(text)} characters)"


def quote(text: str, limit: int = ECHO_LIMIT) -> str:
    """`go_quote(text)`, or the quote of its first `limit` characters + `… (N characters)` when longer."""
    if len(text) <= limit:
        return go_quote(text)
    return f"{go_quote(text[:limit])}… ({len(text)} characters)"
