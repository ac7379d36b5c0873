"""Benchmark: time against the size of the tenant's object, per list or map kind, place and entry point.

The scenarios are `support.scaling`'s: a tenant object (a TrainJob whose runtime patches hold
the items, a namespaced TrainingRuntime, or a runtime snapshot ConfigMap) of 1 KiB to 1.5 MiB of JSON,
its bulk one kind of collection (`scalars`: finalizers, `keyed`: env vars, `atomic`: tolerations, `map`:
a node selector). Each entry point a tenant's object reaches is timed (the least of a few runs, the
garbage collector paused): the admission webhooks over the wire format, `RuntimeRegistry.validate`,
`new_objects` (cold: a runtime object or snapshot text no cache holds), `next_status`, and `trainer-render`.

Printed: one row per (place, kind, entry point), each cell `milliseconds / microseconds per KiB`; linear
growth shows as a per-KiB figure that stays flat (or falls, as fixed costs spread) along the row. A
snapshot beyond 1 MiB of text is refused by its bound (`runtime.core.snapshot.MAX_SNAPSHOT_BYTES`), so
that column times the refusal. Nothing is asserted (the fuzz suite's `test_size_scaling` asserts the
shape). Run with `make bench` or `pytest test/benchmark/test_bench_scaling.py -m benchmark -s`.
"""

from __future__ import annotations

import os
import platform
import sys

import pytest

from support.scaling import ENTRY_POINTS, KINDS, PLACES, best_time, entry_points, scenario

SIZES_KIB = (1, 4, 16, 64, 256, 1024, 1536)


def _repeat(size_kib: int) -> int:
    return 5 if size_kib <= 16 else 3 if size_kib <= 256 else 1


@pytest.mark.benchmark
def test_benchmark_time_against_the_size_of_tenant_objects() -> None:
    print()
    print(
        f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    header = f"{'place':9}{'kind':8}{'entry point':13}" + "".join(f"{f'{s} KiB':>16}" for s in SIZES_KIB)
    print(header)
    print("-" * len(header))
    for place in PLACES:
        for kind in KINDS:
            rows: dict[str, list[str]] = {name: [] for name in ENTRY_POINTS}
            for size_kib in SIZES_KIB:
                case = scenario(place, kind, size_kib * 1024)
                for name, call in entry_points(case).items():
                    seconds = best_time(call, _repeat(size_kib))
                    per_kib = seconds * 1e6 / (case.size / 1024)
                    rows[name].append(f"{seconds * 1e3:9.1f}/{per_kib:<6.0f}")
            for name, cells in rows.items():
                print(f"{place:9}{kind:8}{name:13}" + "".join(f"{cell:>16}" for cell in cells))
            sys.stdout.flush()
    print("cells: milliseconds / microseconds per KiB of the tenant's object (least of 5, 3 or 1 runs)")
