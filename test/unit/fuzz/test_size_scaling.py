"""Size-scaling properties: every tenant-driven entry point takes time linear in the tenant's object.

For each list or map kind in each place (`support.scaling`), the object is built at `SMALL`
and at ten times that, and each entry point (admission, validate, new_objects, next_status, render) is
timed at both. Time per byte at the large size must stay within `BOUND` times the time per byte at the
small one: a linear path gives about 1 (less, as fixed costs spread), an n log n one a little more, and a
quadratic one about 10, so it fails. It asserts the shape, never a wall-clock figure.

Robust on a loaded machine: each time is the least of `REPEAT` runs with the garbage collector paused,
the two sizes are timed alternately (so load hits both alike), times below `FLOOR` count as `FLOOR`
(too short to tell growth from noise), and a combination over the bound is measured once more with more
runs before it fails. Sizes are small enough that the whole module takes about 15 s on an idle core.
"""

from __future__ import annotations

import pytest

from support.scaling import ENTRY_POINTS, KINDS, PLACES, best_time, entry_points, scenario

SMALL = 6 * 1024
FACTOR = 10
BOUND = 3.0
REPEAT = 2
RETRY_REPEAT = 5
FLOOR = 0.002


def _per_byte_ratios(place: str, kind: str, repeat: int) -> dict[str, float]:
    """Time per byte at the large size over time per byte at the small one, per entry point."""
    small, large = scenario(place, kind, SMALL), scenario(place, kind, SMALL * FACTOR)
    small_calls, large_calls = entry_points(small), entry_points(large)
    ratios = {}
    for name in ENTRY_POINTS:
        small_time = large_time = float("inf")
        for _ in range(repeat):
            small_time = min(small_time, best_time(small_calls[name], 1))
            large_time = min(large_time, best_time(large_calls[name], 1))
        per_byte_small = max(small_time, FLOOR) / small.size
        per_byte_large = max(large_time, FLOOR) / large.size
        ratios[name] = per_byte_large / per_byte_small
    return ratios


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("place", PLACES)
def test_time_per_byte_does_not_grow_with_the_size(place: str, kind: str) -> None:
    ratios = _per_byte_ratios(place, kind, REPEAT)
    if max(ratios.values()) > BOUND:  # a loaded machine: measure again, with more runs, before failing
        ratios = _per_byte_ratios(place, kind, RETRY_REPEAT)
    grown = {name: round(ratio, 2) for name, ratio in ratios.items() if ratio > BOUND}
    assert not grown, f"time per byte at {FACTOR}x the size grew more than {BOUND}x: {grown}"


def test_the_sizes_are_what_the_property_assumes() -> None:
    # The bound is about bytes: the scenarios must really grow tenfold, in every place.
    for place in PLACES:
        for kind in KINDS:
            small, large = scenario(place, kind, SMALL), scenario(place, kind, SMALL * FACTOR)
            assert 0.7 * SMALL <= small.size <= 1.5 * SMALL, (place, kind, small.size)
            assert 8 <= large.size / small.size <= 12, (place, kind, large.size / small.size)
