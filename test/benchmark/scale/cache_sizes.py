"""Bytes per cached object, per kind: what one object of each kind costs our manager's cache, before and
after the Trainer's cache transforms (`controller.trainer.cache_transforms`).

The objects are the ones the scale scenario's manager cached, listed from the API server once it settled
(managedFields and all, as an informer receives them). A fresh interpreter per kind decodes each object from
its own JSON (as a watch event or list page is decoded), applies one transform and keeps the result; the
Python heap that remains (tracemalloc), divided by the count, is the figure. Sharing between objects (the
string tables) is thus amortised over the count, as in the manager. Two transforms per kind:

- ``stripped``: managedFields stripped only, what the cache kept before the per-kind transforms;
- ``transformed``: the manager's transform of that kind (`CacheTransforms.for_kind`).

Run by the scale scenario, which keeps the objects it measured in its work directory
(``cache-objects-<kind>.json``); one figure again by hand, from ``test/``:
``python -m benchmark.scale.cache_sizes /tmp/bench-scale/cache-objects-jobset.json transformed``.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import tracemalloc
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from benchmark.scale import REPO
from controller.client.gvk import GVK
from controller.informers.shared_informer import strip_managed_fields
from controller.trainer.cache_transforms import CacheTransforms

TRANSFORMS = ("stripped", "transformed")


def _heap_per_object(blobs: Sequence[bytes], transform: Any) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [transform(orjson.loads(blob)) for blob in blobs]
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return (after - before - sys.getsizeof(kept)) / max(len(kept), 1)


def measure_kind(gvk: GVK, objects: Sequence[Mapping[str, Any]], which: str) -> float:
    """Heap bytes per object of `objects` kept under transform `which` (in this interpreter)."""
    blobs = [orjson.dumps(obj) for obj in objects]
    transform = strip_managed_fields if which == "stripped" else CacheTransforms().for_kind(gvk)
    return _heap_per_object(blobs, transform)


def measure(objects: Mapping[GVK, Sequence[Mapping[str, Any]]], workdir: Path) -> dict[str, Any]:
    """Per kind: count, JSON bytes per object (as served, managedFields included) and heap bytes per
    object under each transform, each measured in a fresh interpreter."""
    workdir.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {}
    for gvk, items in objects.items():
        if not items:
            continue
        path = workdir / f"cache-objects-{gvk.kind.lower()}.json"
        path.write_bytes(orjson.dumps({"gvk": [gvk.group, gvk.version, gvk.kind], "items": list(items)}))
        row: dict[str, Any] = {
            "objects": len(items),
            "json_bytes": sum(len(orjson.dumps(item)) for item in items) / len(items),
        }
        for which in TRANSFORMS:
            answer = subprocess.run(
                [sys.executable, "-m", "benchmark.scale.cache_sizes", str(path), which],
                cwd=REPO / "test",
                check=True,
                capture_output=True,
                text=True,
            )
            row[f"{which}_bytes"] = float(answer.stdout.strip())
        row["saved"] = 1.0 - row["transformed_bytes"] / row["stripped_bytes"]
        result[gvk.kind] = row
    return result


def main(argv: Sequence[str]) -> int:
    path, which = Path(argv[0]), argv[1]
    document = orjson.loads(path.read_bytes())
    group, version, kind = document["gvk"]
    print(measure_kind(GVK(group, version, kind), document["items"], which))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
