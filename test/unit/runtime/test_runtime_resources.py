"""Quantities and pod requests, against the values Go's `resource.Quantity` and `PodRequests` produce."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.resources import (
    Format,
    InvalidQuantityError,
    Quantity,
    cpu_count,
    format_resource_list,
    gpu_count,
    pod_requests,
    sum_quantities,
)


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("1", "1"),
        ("0", "0"),
        ("1.5", "1500m"),
        ("500m", "500m"),
        ("1000m", "1"),
        ("0.1", "100m"),
        ("4Gi", "4Gi"),
        ("1.5Gi", "1536Mi"),  # not a whole number of Gi: the next unit down
        ("2048Ki", "2Mi"),
        ("1023Ki", "1023Ki"),
        ("0.5Ki", "512"),  # under 1024: printed as a plain decimal
        ("1k", "1k"),
        ("1E", "1E"),  # exa, not an exponent
        ("1e3", "1e3"),
        ("12e6", "12e6"),
        ("1.0000000001", "1000000001n"),  # rounded up to the nano unit
        ("-1", "-1"),
        ("+5", "5"),  # str() keeps "+5", as Go does (see test_go_writes_back_text_it_considers_canonical)
        (".5", "500m"),
        ("1.", "1"),
    ],
)
def test_quantities_print_in_gos_canonical_form(text: str, canonical: str) -> None:
    assert Quantity.parse(text).canonical() == canonical


@pytest.mark.parametrize("number", [1, 2.5, 0.25])
def test_json_numbers_parse_like_their_text(number: float) -> None:
    assert Quantity.parse(number) == Quantity.parse(str(number))


@pytest.mark.parametrize(
    ("number", "written"),
    [
        (2, "2"),
        (2.0, "2"),  # Go's encoding/json writes a whole float without a fraction
        (1000.0, "1k"),
        (1.5, "1500m"),
        (0.00001, "10u"),  # Go: 0.00001 (Python's repr says 1e-05, which would be DecimalExponent)
        (1e16, "10P"),  # Go: 10000000000000000 (Python's repr says 1e+16)
        (1e-7, "100e-9"),  # Go: 1e-7
        (1e21, "1e+21"),  # Go: 1e+21, a text its parser keeps
        (1.5e21, "1500e18"),
    ],
)
def test_json_numbers_are_read_through_the_text_go_writes_for_them(number: float, written: str) -> None:
    # What the API server sends for a number stored in a custom resource, then what Go prints for it.
    assert str(Quantity.parse(number)) == written


@pytest.mark.parametrize("text", ["", ".", "1Qi", "abc", "1 Gi", "1e", "--1", "1.2.3", True])
def test_malformed_quantities_are_rejected(text: Any) -> None:
    with pytest.raises(InvalidQuantityError):
        Quantity.parse(text)


def test_the_sum_keeps_the_format_of_its_first_non_zero_operand() -> None:
    # Go Quantity.Add: the receiver's format wins unless the receiver is zero.
    assert str(Quantity.parse("4Gi") * 102) == "408Gi"
    assert str(Quantity.parse("1") * 102) == "102"
    assert str(Quantity.parse("500m") + Quantity.parse("1")) == "1500m"
    assert (Quantity.zero() + Quantity.parse("1Gi")).format is Format.BINARY_SI
    assert str(sum_quantities([Quantity.parse("1Gi"), Quantity.parse("512Mi")])) == "1536Mi"
    assert str(sum_quantities([])) == "0"


def test_quantities_compare_by_value_not_by_format() -> None:
    assert Quantity.parse("1Ki") == Quantity.parse("1024")
    assert Quantity.parse("1500m") > Quantity.parse("1")
    assert {Quantity.parse("1"), Quantity.parse("1000m")} == {Quantity.parse("1")}


def test_ceil_rounds_up_like_go_value() -> None:
    assert Quantity.parse("500m").ceil() == 1
    assert Quantity.parse("2").ceil() == 2
    assert Quantity.parse("2001m").ceil() == 3


@given(st.integers(min_value=-(10**12), max_value=10**12), st.sampled_from(["", "m", "k", "Mi", "Gi", "e3"]))
def test_printing_then_parsing_gives_back_the_same_value(number: int, suffix: str) -> None:
    quantity = Quantity.parse(f"{number}{suffix}")
    assert Quantity.parse(str(quantity)) == quantity
    assert quantity.value == Quantity.parse(str(quantity)).value
    assert isinstance(quantity.value, Fraction)


# --- Ported from k8s.io/apimachinery/pkg/api/resource/quantity_test.go (v0.36.3) --------------------------


def _dec(mantissa: int, exponent: int) -> Fraction:
    """Go's `decQuantity(m, e, ...)` value: m * 10**e."""
    return mantissa * Fraction(10) ** exponent


_DEC, _BIN, _EXP = Format.DECIMAL_SI, Format.BINARY_SI, Format.DECIMAL_EXPONENT

# TestQuantityParse: input → value and format.
PARSE_CASES = [
    ("0", _dec(0, 0), _DEC),
    ("0n", _dec(0, 0), _DEC),
    ("0Ki", _dec(0, 0), _BIN),
    ("0Ti", _dec(0, 0), _BIN),
    # "Quantity less numbers are allowed"
    ("1", _dec(1, 0), _DEC),
    # "Binary suffixes"
    ("1Ki", _dec(1024, 0), _BIN),
    ("8Ki", _dec(8 * 1024, 0), _BIN),
    ("7Mi", _dec(7 * 1024**2, 0), _BIN),
    ("6Gi", _dec(6 * 1024**3, 0), _BIN),
    ("5Ti", _dec(5 * 1024**4, 0), _BIN),
    ("4Pi", _dec(4 * 1024**5, 0), _BIN),
    ("3Ei", _dec(3 * 1024**6, 0), _BIN),
    ("100Ti", _dec(100 * 1024**4, 0), _BIN),
    # "Decimal suffixes"
    ("5n", _dec(5, -9), _DEC),
    ("4u", _dec(4, -6), _DEC),
    ("3m", _dec(3, -3), _DEC),
    ("50k", _dec(5, 4), _DEC),
    ("300T", _dec(3, 14), _DEC),
    ("2P", _dec(2, 15), _DEC),
    ("1E", _dec(1, 18), _DEC),
    # "Decimal exponents"
    ("1E-3", _dec(1, -3), _EXP),
    ("1e3", _dec(1, 3), _EXP),
    ("1E18", _dec(1, 18), _EXP),
    # "Nonstandard but still parsable"
    ("1e14", _dec(1, 14), _EXP),
    ("100.035k", _dec(100035, 0), _DEC),
    # "Things that look like floating point"
    ("0.001", _dec(1, -3), _DEC),
    ("0.0005k", _dec(5, -1), _DEC),
    ("0.00050k", _dec(5, -1), _DEC),
    ("0.05000", _dec(5, -2), _DEC),
    ("0.5e0", _dec(5, -1), _EXP),
    ("0.5e-2", _dec(5, -3), _EXP),
    ("10.035M", _dec(10035, 3), _DEC),
    ("1.3E+6", _dec(13, 5), _EXP),
    ("1.53E12", _dec(153, 10), _EXP),
    ("7.123456M", _dec(7123456, 0), _DEC),
    ("1.01E", _dec(101, 16), _DEC),
    # "Things that saturate/round"
    ("3.001n", _dec(4, -9), _DEC),
    ("1.1E-9", _dec(2, -9), _EXP),
    ("0.0000000001", _dec(1, -9), _DEC),
    ("0.5e-9", _dec(1, -9), _EXP),
    ("0.9n", _dec(1, -9), _DEC),
    ("0.00000012345", _dec(124, -9), _DEC),
    ("9Ei", Fraction(2**63 - 1), _BIN),
    ("9223372036854775807Ki", Fraction(2**63 - 1), _BIN),
    ("12E", _dec(12, 18), _DEC),
    # "We'll accept fractional binary stuff, too."
    ("100.035Ki", _dec(10243584, -2), _BIN),
    ("0.5Mi", _dec(512 * 1024, 0), _BIN),
    ("0.025Ti", _dec(274877906944, -1), _BIN),
    # "Things written by trolls"
    ("0.000000000001Ki", _dec(2, -9), _DEC),  # rounds up, changes format
    (".001", _dec(1, -3), _DEC),
    (".0001k", _dec(100, -3), _DEC),
    ("1.", _dec(1, 0), _DEC),
    ("1.G", _dec(1, 9), _DEC),
]


@pytest.mark.parametrize(("text", "value", "fmt"), PARSE_CASES, ids=[c[0] for c in PARSE_CASES])
def test_parsing_reads_the_value_and_format_go_reads(text: str, value: Fraction, fmt: Format) -> None:
    # TestQuantityParse, with its negated ("-" + input) and explicitly positive ("+" + input) variants.
    for sign, factor in (("", 1), ("-", -1), ("+", 1)):
        quantity = Quantity.parse(sign + text)
        assert quantity.value == factor * value
        assert quantity.format is fmt


# TestQuantityParse's invalid list: "trailing whitespace is forbidden" covers both ends.
@pytest.mark.parametrize(
    "text",
    [
        "1.1.M",
        "1+1.0M",
        "0.1mi",
        "0.1am",
        "aoeu",
        ".5i",
        "1i",
        "-3.01i",
        "-3.01e-",
        " 1",
        "1 ",
        "1e99999999999999999999",
    ],
)
def test_go_rejects_these_and_so_do_we(text: str) -> None:
    with pytest.raises(InvalidQuantityError):
        Quantity.parse(text)


# TestQuantityString: (value, format) → canonical, and an alternate spelling that parses to the same.
STRING_CASES = [
    (_dec(1024**3, 0), _BIN, "1Gi", "1024Mi"),
    (_dec(300 * 1024**2, 0), _BIN, "300Mi", "307200Ki"),
    (_dec(1001 * 1024**3, 0), _BIN, "1001Gi", "1025024Mi"),
    (_dec(5, 0), _BIN, "5", "5000m"),
    (_dec(500, -3), _BIN, "500m", "0.5"),
    (_dec(1000, 6), _DEC, "1G", "0.001T"),
    (_dec(1, -3), _DEC, "1m", "1000u"),
    (_dec(1080, -3), _DEC, "1080m", "1.08"),
    (_dec(108, -2), _DEC, "1080m", "1080000000n"),
    (_dec(1234567, 6), _DEC, "1234567M", ""),
    (_dec(1234567, -3), _BIN, "1234567m", ""),
    (_dec(1025, 0), _BIN, "1025", ""),
    (_dec(0, 0), _BIN, "0", ""),
    (_dec(1, 9), _EXP, "1e9", ".001e12"),
    (_dec(1, -3), _EXP, "1e-3", "0.001e0"),
    (_dec(1, -9), _EXP, "1e-9", "1000e-12"),
    (_dec(80, -3), _EXP, "80e-3", ""),
    (_dec(0, 0), _EXP, "0", "00"),
    (_dec(10800, -10), _DEC, "1080n", ""),
    (_dec(1080, -6), _DEC, "1080u", ""),
]


@pytest.mark.parametrize(
    ("value", "fmt", "expect", "alternate"), STRING_CASES, ids=[c[2] for c in STRING_CASES]
)
def test_canonical_form_and_the_text_go_keeps(
    value: Fraction, fmt: Format, expect: str, alternate: str
) -> None:
    assert Quantity(value, fmt).canonical() == expect
    if value:
        assert Quantity(-value, fmt).canonical() == "-" + expect  # never "-0"
    # "did not copy canonical string on parse": the canonical text is kept as written...
    assert Quantity.parse(expect).text == expect
    if alternate:
        # ...and an alternate spelling is not ("unexpected nested string"), but prints canonically.
        parsed = Quantity.parse(alternate)
        assert parsed.text is None
        assert str(parsed) == expect


# TestQuantityParseEmit, and its negated variant.
@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("1Ki", "1Ki"),
        ("1024Mi", "1Gi"),
        ("1000M", "1G"),
        (".001Ki", "1024m"),
        (".000001Ki", "1024u"),
        (".000000001Ki", "1024n"),
        (".000000000001Ki", "2n"),
    ],
)
def test_parse_then_emit(text: str, expect: str) -> None:
    assert str(Quantity.parse(text)) == expect
    assert str(Quantity.parse("-" + text)) == "-" + expect


# --- What Go writes back: observed with apimachinery v0.36.3 (json.Marshal of ParseQuantity) -------------


@pytest.mark.parametrize(
    ("text", "written", "canonical"),
    [
        ("+1", "+1", "1"),  # Go's parser keeps the text when its fast path finds it canonical
        ("01", "01", "1"),
        ("1E3", "1E3", "1e3"),
        ("1e+3", "1e+3", "1e3"),
        ("1e03", "1e03", "1e3"),
        ("+1Ki", "+1Ki", "1Ki"),
        ("1.Ki", "1.Ki", "1Ki"),
        ("1025Ki", "1025Ki", "1025Ki"),
        ("1024Ki", "1Mi", "1Mi"),  # a multiple of 8: never kept
        ("1000m", "1", "1"),  # ends in 000: never kept
        ("1.0", "1", "1"),  # a fraction: never kept
        ("0.5", "500m", "500m"),  # a leading 0: never kept
        ("1100m", "1100m", "1100m"),
        ("120e5", "12e6", "12e6"),  # an exponent that is not a multiple of 3: never kept
        ("00", "0", "0"),
        ("-0", "0", "0"),
    ],
)
def test_go_writes_back_text_it_considers_canonical(text: str, written: str, canonical: str) -> None:
    quantity = Quantity.parse(text)
    assert str(quantity) == written
    assert quantity.canonical() == canonical
    assert str(quantity + Quantity.zero()) == canonical  # arithmetic drops the kept text, as Go's Add


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("999999999999Ei", "9223372036854775807"),  # BinarySI is capped at 2**63-1, as in Go
        ("1e-999999999", "1e-9"),  # rounded up to 1n; Go never returns from this one
        ("0." + "0" * 100_000 + "1", "1n"),
        ("1." + "0" * 90 + "1Ki", "1024000000001n"),  # 1024 and a bit, rounded up to the nano unit
        ("1" + "0" * 99, "1e99"),  # Go: "1" (see test_where_go_would_print_a_different_value...)
    ],
)
def test_extreme_quantities_parse_in_bounded_time(text: str, written: str) -> None:
    assert str(Quantity.parse(text)) == written


@pytest.mark.parametrize(
    "raw", ["1e999999999", "1e9999999999", "9" * 100_000, "1e100", 10**100, "1" * 101, "1." + "0" * 100]
)
def test_magnitudes_past_the_bound_are_a_clear_error(raw: str | int) -> None:
    # Kubernetes would print 1e999999999 back, and 1e9999999999 as 10e1410065406 (a 32-bit wrap); a
    # bounded error is the safe answer, and the message stays short. (An exponent past 64 bits is a
    # suffix error in Go and here: test_go_rejects_these_and_so_do_we.)
    with pytest.raises(InvalidQuantityError, match=r"less than 1e100|at most 100 significant") as caught:
        Quantity.parse(raw)
    assert len(str(caught.value)) < 200


def test_where_go_would_print_a_different_value_we_keep_the_value() -> None:
    # Go prints `1000E` as "1" (no decimal suffix past exa) and 1024 Ei as "1" (none past Ei).
    assert str(Quantity.parse("1000E")) == "1e21"
    assert Quantity.parse(str(Quantity.parse("1000E"))) == Quantity.parse("1000E")
    assert str(Quantity.parse("4Ei") * 256) == "1024Ei"


_SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
_quantity_texts = st.builds(
    lambda sign, whole, frac, suffix: f"{sign}{whole}{frac}{suffix}",
    st.sampled_from(["", "-", "+"]),
    st.from_regex(r"[0-9]{1,20}", fullmatch=True),
    st.one_of(st.just(""), st.from_regex(r"\.[0-9]{0,14}", fullmatch=True)),
    st.one_of(st.sampled_from(_SUFFIXES), st.integers(-30, 30).map(lambda e: f"e{e}")),
)


@given(_quantity_texts)
def test_canonical_form_is_a_fixed_point_and_keeps_the_value(text: str) -> None:
    quantity = Quantity.parse(text)
    canonical = quantity.canonical()
    again = Quantity.parse(canonical)
    assert again.canonical() == canonical  # idempotent
    assert again.value == quantity.value  # numeric value preserved
    assert Quantity.parse(str(quantity)).value == quantity.value  # so is what Go would write


def test_pod_requests_sum_containers_and_ignore_limits() -> None:
    spec = {
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "8"}}},
            {"name": "b", "resources": {"requests": {"cpu": "500m"}}},
            {"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}},  # as upstream: limits do not count
        ]
    }
    assert format_resource_list(pod_requests(spec)) == {"cpu": "1500m", "memory": "1Gi"}


def test_init_containers_count_by_their_peak_and_sidecars_add_up() -> None:
    # The sidecar KEP formula: a restartable init container runs beside everything started after it.
    spec = {
        "initContainers": [
            {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
            {"name": "big-init", "resources": {"requests": {"cpu": "4", "memory": "2Gi"}}},
            {"name": "small-init", "resources": {"requests": {"cpu": "1"}}},
        ],
        "containers": [{"name": "main", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}],
    }
    # containers 2 + sidecar 1 = 3 CPU; big-init while the sidecar runs = 4 + 1 = 5 CPU, 2Gi.
    assert format_resource_list(pod_requests(spec)) == {"cpu": "5", "memory": "2Gi"}


def test_pod_overhead_is_added_and_pod_level_requests_win() -> None:
    spec = {
        "containers": [{"name": "main", "resources": {"requests": {"cpu": "2", "example.com/foo": "1"}}}],
        "overhead": {"cpu": "100m"},
        "resources": {"requests": {"cpu": "3"}},
    }
    assert format_resource_list(pod_requests(spec)) == {"cpu": "3100m", "example.com/foo": "1"}


def test_an_empty_pod_requests_nothing() -> None:
    assert pod_requests({}) == {}


def test_gpu_detection_is_deterministic_when_several_names_contain_gpu() -> None:
    # Upstream: Go's map order picked either; we read names sorted, so "amd.com/gpu" always wins.
    one = {"requests": {"nvidia.com/gpu": "4", "amd.com/gpu": "2"}}
    other = {"requests": {"amd.com/gpu": "2", "nvidia.com/gpu": "4"}}
    assert gpu_count(one) == gpu_count(other) == 2


def test_gpu_count_falls_back_to_limits_and_rounds_up() -> None:
    assert gpu_count({"limits": {"nvidia.com/gpu": 2}}) == 2
    assert gpu_count({"requests": {"nvidia.com/gpu": "0"}, "limits": {"nvidia.com/GPU": "3"}}) == 3
    assert gpu_count({"requests": {"example.com/gpu": "500m"}}) == 1
    assert gpu_count({"requests": {"cpu": "4"}}) == 0
    assert gpu_count(None) == 0


@pytest.mark.parametrize(
    ("resources", "cpus"),
    [
        ({"limits": {"cpu": "4"}}, 4),  # "nproc_per_node=auto with CPU limit"
        ({"requests": {"cpu": "2"}}, 2),  # "nproc_per_node=auto with CPU request but no limit"
        ({"limits": {"cpu": "2500m"}}, 3),  # "nproc_per_node=auto with millicore CPU limit"
        ({"requests": {"cpu": "0"}, "limits": {"cpu": "6"}}, 6),
        ({"requests": {"cpu": "1"}, "limits": {"cpu": "6"}}, 1),
        ({}, 0),  # "nproc_per_node=auto with no CPU resources"
    ],
)
def test_cpu_count_prefers_requests_then_limits(resources: dict[str, Any], cpus: int) -> None:
    assert cpu_count(resources) == cpus


def test_the_cpu_count_reads_only_the_cpu_entries() -> None:
    # A tenant's resourcesPerNode may hold tens of thousands of resources; the count parses only `cpu`
    # (an entry that does not parse elsewhere is the admission check's business, not the count's).
    requirements = {"requests": {"example.com/x": "not a quantity", "cpu": "1500m"}, "limits": {"y": "?"}}
    assert cpu_count(requirements) == 2
    assert cpu_count({"requests": {"cpu": "0", "x": "?"}, "limits": {"cpu": "3", "z": "?"}}) == 3


@given(
    st.integers(min_value=0, max_value=10**30),
    st.integers(min_value=0, max_value=12),
    st.sampled_from(
        ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ei", "e-9", "e-3", "e5"]
    ),
)
def test_exact_values_match_the_rational_arithmetic(digits: int, point: int, suffix: str) -> None:
    # Whole numbers of nano units are computed as one integer; the value is what exact rational arithmetic
    # rounded up to the nano unit gives, for every suffix.
    text = str(digits)
    if point and point < len(text):
        text = f"{text[:-point]}.{text[-point:]}"
    quantity = Quantity.parse(text + suffix)
    powers = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
    binary = {"Ki": 10, "Mi": 20, "Gi": 30, "Ei": 60}
    exact = Fraction(text)
    if suffix in binary:
        exact *= 2 ** binary[suffix]
    elif suffix.startswith("e"):
        exact *= Fraction(10) ** int(suffix[1:])
    else:
        exact *= Fraction(10) ** powers[suffix]
    nano = Fraction(1, 10**9)
    expected = Fraction(-((-exact) // nano)) * nano
    if suffix in binary:
        expected = min(expected, Fraction(2**63 - 1))
    assert quantity.value == expected
