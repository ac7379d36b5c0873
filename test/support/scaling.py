"""Tenant input of a chosen size, and the entry points it reaches: the scaling harness of `make bench` and of
the fuzz suite's size-scaling properties (no Go origin: upstream has no such harness).

A tenant decides the size of four kinds of collection the pipeline works through, in three places:

- kinds: `scalars` (the job template's `metadata.finalizers`: a strategic-merge union, no `maxItems`),
  `keyed` (containers' `env`: merged by name; in a runtime half of them are the trainer container's,
  which plugins upsert into), `atomic` (the pod spec's `tolerations`: replaced whole), `map` (the pod
  spec's `nodeSelector`: merged key by key);
- places: `patches` (two `spec.runtimePatches` of half the items each, overlapping by half, over a runtime
  holding one), `runtime` (a namespaced TrainingRuntime holding them, under a TrainJob whose patch touches
  two and whose `spec.trainer.env` has 100 variables), `snapshot` (that runtime read from the TrainJob's
  runtime snapshot ConfigMap, the live runtime gone).

`scenario(place, kind, size)` builds the objects so that the tenant's object (the TrainJob for `patches`, the
runtime for `runtime`, the ConfigMap for `snapshot`) is about `size` bytes of JSON, and
`entry_points(scenario)` names a call per entry point: the TrainJob admission webhooks (and the
TrainingRuntime one for a runtime) over the wire format, `RuntimeRegistry.validate`, `new_objects`,
`next_status`, and `trainer-render`. Lists beyond a `maxItems` of the CRDs are generated anyway: the API
server would refuse them, but render and the reconciler's snapshot read must still answer in time. Each call
reads a fresh copy of the runtime or snapshot (`Scenario.reader`), so no cache hides the work. `best_time` is
the least of several runs.
"""

from __future__ import annotations

import functools
import gc
import io
import itertools
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, cast

import orjson

from controller.clock import FakeClock
from controller.serving.webhook.admission import Webhook
from controller.trainer.setup import new_registry
from controller.trainer.webhooks import (
    Schemas,
    TrainingRuntimeValidator,
    TrainJobDefaulter,
    TrainJobValidator,
)
from runtime.api import constants
from runtime.api.v1alpha1 import TrainJob
from runtime.core import RuntimeRegistry
from runtime.core.snapshot import build_snapshot
from runtime.framework import FrameworkError, MemoryReader
from runtime.render import run
from runtime.schema import CRD_DIR, SchemaChecker
from runtime.testing import NOW, Make

__all__ = [
    "ENTRY_POINTS",
    "KINDS",
    "PLACES",
    "Scenario",
    "best_time",
    "entry_points",
    "scenario",
]

KINDS: Final = ("scalars", "keyed", "atomic", "map")
PLACES: Final = ("patches", "runtime", "snapshot")
ENTRY_POINTS: Final = ("admission", "validate", "new_objects", "next_status", "render")

_MAKE = Make(name="big", namespace="team", uid="big-uid", runtime_name="big-runtime")


@functools.cache
def _checker() -> SchemaChecker:
    """One schema checker for every scenario (loading it takes a second)."""
    return SchemaChecker.from_crd_dir(CRD_DIR)


@functools.cache
def _registry() -> RuntimeRegistry:
    """One registry for every call, as the manager has."""
    return new_registry()


def _items(kind: str, count: int, start: int = 0) -> Any:
    numbers = range(start, start + count)
    if kind == "scalars":
        return [f"acme.io/finalizer-{i:08d}" for i in numbers]
    if kind == "keyed":
        return [{"name": f"VARIABLE_{i:08d}", "value": "v"} for i in numbers]
    if kind == "atomic":
        return [{"key": f"acme.io/taint-{i:08d}", "operator": "Exists"} for i in numbers]
    if kind == "map":
        return {f"acme.io/label-{i:08d}": "v" for i in numbers}
    raise ValueError(f"unknown kind {kind!r}")


def _job(kind: str, count: int, start: int = 0, *, trainer_env: bool = False) -> dict[str, Any]:
    """A replicated job `node` whose template holds `count` items of `kind`: env vars go to a `sidecar`
    container (a runtime patch may not set the trainer's), half of them to the trainer `node` container
    when `trainer_env` (a runtime may)."""
    container: dict[str, Any] = {"name": "sidecar"}
    pod_spec: dict[str, Any] = {"containers": [{"name": constants.NODE}, container]}
    job_template: dict[str, Any] = {"spec": {"template": {"spec": pod_spec}}}
    items = _items(kind, count, start)
    if kind == "scalars":
        job_template["metadata"] = {"finalizers": items}
    elif kind == "keyed" and trainer_env:
        pod_spec["containers"][0]["env"], container["env"] = items[: count // 2], items[count // 2 :]
    elif kind == "keyed":
        container["env"] = items
    elif kind == "atomic":
        pod_spec["tolerations"] = items
    else:
        pod_spec["nodeSelector"] = items
    return {"name": constants.NODE, "template": job_template}


def _runtime(kind: str, count: int) -> dict[str, Any]:
    job = _job(kind, count, trainer_env=True)
    job["template"].setdefault("metadata", {})["labels"] = {
        constants.LABEL_TRAINJOB_ANCESTOR: constants.ANCESTOR_TRAINER
    }
    job["template"]["spec"]["template"]["spec"]["containers"][0]["image"] = "pytorch/pytorch:2"
    job["replicas"] = 1
    spec = _MAKE.runtime_spec(job, ml_policy={"numNodes": 2, "torch": {}})
    return _MAKE.runtime(spec)


def _patch(manager: str, job: dict[str, Any]) -> dict[str, Any]:
    return {"manager": manager, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [job]}}}}


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """The objects of one measurement; `size` is the JSON size of the tenant's object."""

    place: str
    kind: str
    items: int
    size: int
    trainjob: TrainJob
    runtime: Mapping[str, Any]
    stored: Mapping[str, Any]
    """What the webhooks, validate and new_objects read: the runtime, or only its snapshot ConfigMap."""
    reads: Iterator[int] = field(default_factory=itertools.count)
    """Numbers the snapshot texts `reader` makes, so each is new."""

    def reader(self) -> MemoryReader:
        """A reader of a fresh copy of `stored`: a new runtime object (which the typed-runtime cache has not
        seen) or a snapshot text no memo holds (a comment line added), so each call pays the cold path a
        tenant's new object does."""
        stored = dict(self.stored)
        if self.place == "snapshot":
            data = dict(stored["data"])
            data[constants.RUNTIME_SNAPSHOT_KEY] += f"# read {next(self.reads)}\n"
            stored["data"] = data
        return MemoryReader([stored])


def scenario(place: str, kind: str, size: int) -> Scenario:
    """Objects where the tenant's object (the snapshot ConfigMap for `snapshot`) is about `size` bytes of
    JSON, its bulk `kind` items in `place`."""
    base, hundred = _scenario(place, kind, 2), _scenario(place, kind, 102)
    per_item = (hundred.size - base.size) / 100
    return _scenario(place, kind, max(2, 2 + round((size - base.size) / per_item)))


def _scenario(place: str, kind: str, count: int) -> Scenario:
    env = [{"name": f"TRAINER_{i}", "value": "x"} for i in range(100)]
    if place == "patches":
        runtime = _runtime(kind, 1)
        half = count // 2
        patches = [_patch("acme.io/a", _job(kind, half)), _patch("acme.io/b", _job(kind, half, half // 2))]
        trainjob = _MAKE.trainjob(runtime_patches=patches, trainer={"env": env}, suspend=False)
        tenant: Mapping[str, Any] = trainjob
    elif place in ("runtime", "snapshot"):
        runtime = _runtime(kind, count)
        patches = [_patch("acme.io/a", _job(kind, 2, count - 1))]
        trainjob = _MAKE.trainjob(runtime_patches=patches, trainer={"env": env}, suspend=False)
        tenant = runtime
    else:
        raise ValueError(f"unknown place {place!r}")
    objects: list[Mapping[str, Any]] = [runtime]
    if place == "snapshot":
        objects = [build_snapshot(trainjob, runtime, constants.TRAINING_RUNTIME_KIND)]
        tenant = objects[0]
    return Scenario(
        place=place,
        kind=kind,
        items=count,
        size=len(orjson.dumps(tenant)),
        trainjob=trainjob,
        runtime=runtime,
        stored=objects[0],
    )


def _review(obj: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> bytes:
    request: dict[str, Any] = {"uid": "u", "operation": "UPDATE" if old else "CREATE", "object": obj}
    if old is not None:
        request["oldObject"] = old
    return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})


def entry_points(case: Scenario) -> dict[str, Callable[[], object]]:
    """One call per entry point the scenario's tenant object reaches (`ENTRY_POINTS`, in that order)."""
    registry = _registry()
    schemas = Schemas(_checker())
    trainjob = case.trainjob
    # The snapshot is read when the live runtime is gone: on an update (validate) and on every build.
    old = trainjob if case.place == "snapshot" else None
    hooks = [
        (Webhook("/mutate", TrainJobDefaulter(FakeClock(wall=NOW), schemas=schemas)), _review(trainjob, old)),
    ]
    validating_body = _review(trainjob, old)
    if case.place == "runtime":
        hooks.append((Webhook("/runtime", TrainingRuntimeValidator(schemas=schemas)), _review(case.runtime)))

    def admission() -> object:
        answers = [hook.serve(body, "application/json") for hook, body in hooks]
        validating = Webhook("/validate", TrainJobValidator(registry, case.reader(), schemas=schemas))
        return [*answers, validating.serve(validating_body, "application/json")]

    status_reader = MemoryReader([case.stored, case.runtime, _MAKE.jobset()])
    status_trainjob = cast(TrainJob, {**trainjob, "status": {"conditions": []}})
    text = (orjson.dumps(trainjob) + b"\n---\n" + orjson.dumps(case.runtime)).decode()

    def render() -> object:
        out, err = io.StringIO(), io.StringIO()
        return run(["-"], stdin=io.BytesIO(text.encode()), stdout=out, stderr=err, schemas=_checker())

    def new_objects() -> object:
        try:
            return registry.new_objects(trainjob, case.reader())
        except FrameworkError as exc:  # refused: a snapshot beyond its bound, a patch that cannot merge
            return exc

    calls: dict[str, Callable[[], object]] = {
        "admission": admission,
        "validate": lambda: registry.validate(old, trainjob, case.reader()),
        "new_objects": new_objects,
        "next_status": lambda: registry.next_status(status_trainjob, status_reader, NOW),
        "render": render,
    }
    return {name: calls[name] for name in ENTRY_POINTS}


def best_time(call: Callable[[], object], repeat: int = 3) -> float:
    """The least wall time of `repeat` calls, in seconds, with the garbage collector paused (its pauses
    belong to whoever allocated before)."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            started = time.perf_counter()
            call()
            best = min(best, time.perf_counter() - started)
        finally:
            gc.enable()
    return best
