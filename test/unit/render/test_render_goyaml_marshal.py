"""`kubeyaml.dump` writes the bytes upstream's `sigs.k8s.io/yaml.Marshal` writes, for every JSON value.

`goyaml_marshal.json` holds a hostile corpus (strings that read as booleans, numbers, nulls or timestamps
in YAML 1.1 or 1.2, indicators, spaces at the edges, tabs, line breaks of every kind, control and astral
characters, long strings with and without spaces, long and multi-line keys, keys that sort by go-yaml's
digit-aware order, big and negative integers, floats, empty and deeply nested collections) and, per value,
the text Go wrote for it (`yaml`) or the error Go gave (`go_error`).

How the file was produced: a throwaway Go program, outside this repository, in a module that requires
`sigs.k8s.io/yaml v1.6.0` with `go.yaml.in/yaml/v2 v2.4.3` (upstream v2.3.0's versions, from its go.mod).
It reads the JSON array of values with `json.Decoder.UseNumber`, keeps integer literals as written and
turns every other number into a float64 (what Go holds for an int field or a float field), then writes
`yaml.Marshal` of each value, or `ERROR: <message>` when it fails. To regenerate, run such a program (or
`hack/tools/upstream-render json-to-yaml`, which does the same) on the `value`s, and rewrite the `yaml`
and `go_error` fields; review the diff.

Key sets for which go-yaml's comparison is not an order (`x1y`, `x9y`, `x10y`: a digit run against a
letter) are left out: Go writes them in a different order from run to run (its map iteration is random).
"""

from __future__ import annotations

import decimal
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import kubeyaml

CASES = json.loads((Path(__file__).with_name("goyaml_marshal.json")).read_text(encoding="utf-8"))["cases"]
WRITTEN = [case for case in CASES if "yaml" in case]
REFUSED = [case for case in CASES if "go_error" in case]

DELIBERATE = {
    # go-yaml writes the key `<<` plain, and then reads it back as a merge key (its own Unmarshal fails on
    # the text): quoted here, so that the text reads back as the value.
    json.dumps({"<<": 1}): '"<<": 1\n',
}


def _id(case: dict[str, Any]) -> str:
    return json.dumps(case["value"], ensure_ascii=True)[:60]


def test_the_corpus_covers_what_the_issue_lists() -> None:
    strings = {json.dumps(c["value"]) for c in CASES}
    for hostile in ['"y"', '"0o10"', '"1e3"', '".inf"', '" a"', '"a: b"', '"a #b"', '"-"', '"a\\tb"']:
        assert any(hostile in s for s in strings), hostile
    assert len(WRITTEN) > 800 and REFUSED


@pytest.mark.parametrize("case", WRITTEN, ids=_id)
def test_dump_writes_go_yamls_bytes(case: dict[str, Any]) -> None:
    expected = DELIBERATE.get(json.dumps(case["value"]), case["yaml"])
    assert kubeyaml.dump(case["value"]) == expected


@pytest.mark.parametrize("case", REFUSED, ids=_id)
def test_a_string_go_cannot_write_is_written_escaped_and_reads_back(case: dict[str, Any]) -> None:
    # json.Marshal leaves DEL, C1 controls, U+FFFE and U+FFFF raw, and go-yaml then refuses them (a NEL
    # in a key breaks its parser): upstream writes no snapshot of such a runtime. Here it is written (a
    # lone NEL folded to a space, as go-yaml holds one in a value).
    text = kubeyaml.dump(case["value"])
    assert kubeyaml.load(text) == json.loads(json.dumps(case["value"]).replace("\\u0085", " "))


def _go_json_value(value: Any) -> Any:
    """`value` as Go's JSON round trip leaves it: a whole float below 1e21 that fits int64 is the integer
    its shortest decimal form spells (`5.368166190431145e16` is 53681661904311450, not ...448)."""
    if isinstance(value, dict):
        return {k: _go_json_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_go_json_value(v) for v in value]
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21 and -(2**63) <= value < 2**63:
        return int(decimal.Decimal(repr(value)))
    return value


_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x85"), max_size=120)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT
    | st.sampled_from(["y", "on", "0x1F", "1:30", "2001-12-14", "- a", "a\n", "a \nb", " ", "~", "..."])
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(_VALUES)
def test_what_dump_writes_reads_back_as_the_value_go_holds(value: Any) -> None:
    loaded = kubeyaml.load(kubeyaml.dump(value))
    expected = _go_json_value(value)
    assert loaded == expected
    assert json.dumps(loaded, sort_keys=True) == json.dumps(expected, sort_keys=True)  # 1 is not 1.0


@settings(max_examples=300, deadline=None)
@given(_VALUES)
def test_node_count_is_what_load_counts_in_what_dump_writes(value: Any) -> None:
    text = kubeyaml.dump(value)
    nodes = kubeyaml.node_count(value, limit=10_000)
    kubeyaml.load(text, max_nodes=nodes)
    with pytest.raises(kubeyaml.YAMLInputError, match=f"more than {nodes - 1} nodes"):
        kubeyaml.load(text, max_nodes=nodes - 1)
    for limit in range(nodes):  # counting stops past the limit, and says so
        assert limit < kubeyaml.node_count(value, limit=limit) <= nodes


def test_numbers_are_written_as_go_holds_them_after_its_json_round_trip() -> None:
    assert kubeyaml.dump([2.0, -0.0, 1e20, 1e21, 2**63, 2**64, -(2**63) - 1, 1.2345678901234567e19]) == (
        "- 2\n- 0\n- 1e+20\n- 1e+21\n- 9223372036854775808\n- 1.8446744073709552e+19\n"
        "- -9.223372036854776e+18\n- 12345678901234567000\n"
    )
    assert kubeyaml.dump([math.nan, math.inf]) == "- .nan\n- .inf\n"  # no JSON value: Go's json.Marshal fails
