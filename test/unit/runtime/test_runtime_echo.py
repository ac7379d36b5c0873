"""`runtime.echo`: how a tenant's value is repeated in a message, error line, event or condition.

Go's `field.Error` prints a string value with `%q` (`strconv.Quote`), which escapes every character that is
not printable (`unicode.IsPrint`). Before, values were echoed as JSON (`"\\u0000"`) and format, bidirectional
and C1 characters raw, so a tenant could make a line read other than it says (U+202E RIGHT-TO-LEFT OVERRIDE
reverses what follows). The expected texts are what Go 1.26's `fmt.Sprintf("%q", s)` prints.
"""

from __future__ import annotations

import ast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.buildable import trainjob_errors
from runtime.core import RuntimeRegistry
from runtime.core.errors import UnsupportedRuntimeError
from runtime.echo import ECHO_LIMIT, elide, escape, go_quote, quote
from runtime.framework import FieldError, Framework, MemoryReader, error_lines
from runtime.plugins import builtin_registry
from runtime.testing import Make

RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE

GO_QUOTED = {
    "NUL": ("a\x00b", r'"a\x00b"'),
    "RTL override": (f"{RLO}gpj.exe", r'"\u202egpj.exe"'),
    "zero-width joiner": ("a\u200db", r'"a\u200db"'),
    "C1 controls": ("\x85\x9b", r'"\u0085\u009b"'),
    "DEL": ("\x7f", r'"\x7f"'),
    "C escapes": ("\a\b\f\n\r\t\v", r'"\a\b\f\n\r\t\v"'),
    "quote and backslash": ('"q\\', r'"\"q\\"'),
    "no-break space": ("a\u00a0b", r'"a\u00a0b"'),
    "line separator": ("\u2028", r'"\u2028"'),
    "byte order mark": ("\ufeff", r'"\ufeff"'),
    "private use": ("\ue000", r'"\ue000"'),
    "astral format character": ("\U000e0001", r'"\U000e0001"'),
    "astral printable characters kept": ("😀 𠀀", '"😀 𠀀"'),
    "printable non-ASCII kept": ("日本 café", '"日本 café"'),
}


@pytest.mark.parametrize("case", GO_QUOTED)
def test_go_quote_is_strconv_quote(case: str) -> None:
    text, quoted = GO_QUOTED[case]
    assert go_quote(text) == quoted


@pytest.mark.parametrize("case", GO_QUOTED)
def test_a_string_value_prints_as_go_prints_it(case: str) -> None:
    text, quoted = GO_QUOTED[case]
    assert str(FieldError.invalid("spec.x", text, "bad")) == f"spec.x: Invalid value: {quoted}: bad"


@given(st.text())
def test_a_quoted_value_is_printable_and_reads_back_as_the_value(text: str) -> None:
    quoted = go_quote(text)
    assert quoted.isprintable()
    assert ast.literal_eval(quoted) == text  # Go's escapes are Python's


@given(st.text(), st.text(), st.text(), st.one_of(st.text(), st.dictionaries(st.text(), st.text())))
def test_no_line_carries_a_character_that_is_not_printable(
    key: str, name: str, detail: str, value: object
) -> None:
    error = FieldError.invalid(f"spec.trainer.resourcesPerNode.requests[{key}]", value, f"{detail} {name}")
    assert str(error).isprintable()
    assert all(line.isprintable() for line in error_lines([error, f"{name}\n{detail}"] * 7))


def test_a_map_key_in_a_path_is_escaped() -> None:
    # Go prints a path's keys raw; a resource name with U+202E reversed the rest of the line.
    trainjob = {"spec": {"trainer": {"resourcesPerNode": {"requests": {f"x{RLO}upc": "1"}}}}}
    lines = [str(e) for e in trainjob_errors(trainjob)]
    assert lines
    assert all(line.startswith("spec.trainer.resourcesPerNode.requests[x\\u202eupc]: ") for line in lines)
    assert all(line.isprintable() for line in lines)


def test_a_detail_and_a_json_value_are_escaped_the_same_way() -> None:
    error = FieldError.invalid("spec.x", {"k": f"a{RLO}b\x00"}, f"container {RLO}x")
    assert str(error) == 'spec.x: Invalid value: {"k":"a\\u202eb\\u0000"}: container \\u202ex'


def test_a_plain_string_in_a_report_is_escaped() -> None:
    assert error_lines([f"bad{RLO}\x00"]) == ["bad\\u202e\\x00"]


def test_escape_keeps_printable_characters_and_is_idempotent() -> None:
    text = f'a"\\b{RLO}\x00😀'
    assert escape(text) == 'a"\\b\\u202e\\x00😀'
    assert escape(escape(text)) == escape(text)


def test_a_long_value_is_cut_then_escaped_and_bounded() -> None:
    assert elide("x" * 1000) == "x" * ECHO_LIMIT + "… (1000 characters)"
    assert elide(RLO * 1000) == "\\u202e" * ECHO_LIMIT + "… (1000 characters)"
    assert quote("\x00" * 1000) == '"' + "\\x00" * ECHO_LIMIT + '"… (1000 characters)'
    assert len(quote("\U000e0001" * 10**6)) < 11 * ECHO_LIMIT + 30


def test_a_runtime_name_from_the_trainjob_is_quoted_in_messages() -> None:
    make = Make()
    trainjob = make.trainjob(runtime=f"torch{RLO}x\x00")
    errors = RuntimeRegistry(Framework(builtin_registry())).validate(None, trainjob, MemoryReader([])).errors
    assert [str(e) for e in errors] == [
        "spec.runtimeRef: Invalid value: "
        '{"name":"torch\\u202ex\\u0000","kind":"TrainingRuntime","apiGroup":"trainer.kubeflow.org"}: '
        'trainingruntimes.trainer.kubeflow.org "torch\\u202ex\\x00" not found: '
        "specified trainingRuntime must be created before the TrainJob is created"
    ]


def test_an_unsupported_runtime_kind_is_escaped_in_the_failed_condition() -> None:
    assert str(UnsupportedRuntimeError(f"Torch{RLO}.x")) == "unsupported runtime: Torch\\u202e.x"
