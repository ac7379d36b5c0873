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
        ("+5", "5"),
        (".5", "500m"),
        ("1.", "1"),
    ],
)
def test_quantities_print_in_gos_canonical_form(text: str, canonical: str) -> None:
    assert str(Quantity.parse(text)) == canonical


@pytest.mark.parametrize("number", [1, 2.5, 0.25])
def test_json_numbers_parse_like_their_text(number: float) -> None:
    assert Quantity.parse(number) == Quantity.parse(str(number))


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


def test_pod_requests_sum_containers_and_ignore_limits() -> None:
    spec = {
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "8"}}},
            {"name": "b", "resources": {"requests": {"cpu": "500m"}}},
            {"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}},  # upstream Q5: limits do not count
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
    # Upstream Q11: Go's map order picked either; we read names sorted, so "amd.com/gpu" always wins.
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
