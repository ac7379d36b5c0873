"""Hostile input through the TrainJob reconciler (controller.trainer.trainjob_controller), in process, over
the in-memory cluster of `test/support/fakes.py`: mutated TrainJobs and runtimes (see conftest.py)
stored as the API server stores them, then reconciled a few times in a row, as the workqueue would.

What is stored: a TrainJob only when its CRD schema accepts it (defaulted, as the API server keeps it, with
the `uid` and `creationTimestamp` the server sets); its runtime either the same way, or, in the second
property, one that breaks its CRD schema (stored by an older version of the CRD, or edited in etcd).

Properties, for every reconcile:

- **No bug escapes.** A reconcile returns, or raises what the controller retries with backoff
  (`_RETRIED`: the pipeline's `FrameworkError`s that are not permanent, API and transport errors, several
  of them joined); every exception in the chain of causes is one the code raises on purpose (`_DELIBERATE`),
  so a `TypeError` a plugin tripped over, wrapped in a `PluginError`, is a bug too.
- **Bounded work.** At most `MAX_WRITES` writes and `MAX_READS` reads (a reconcile that loops reads or
  writes without end fails here; one that spins without either is stopped by the pytest timeout).
- **Converges.** A second reconcile of an unchanged world writes nothing, and neither does one after the
  clock has moved past the requested requeue (which may write once: the deadline).
- **Its verdict is sane.** Done, or a requeue after a positive delay no longer than the TrainJob's
  `activeDeadlineSeconds`.
- **Every failure is visible** as a Warning event or a `Failed` condition, and names a field when the input
  is at fault. Two upstream texts are exempt: a runtime that does not exist (`not found
  ClusterTrainingRuntime specified in TrainJob: ...`, a state of the world the retry waits out) and an
  unsupported runtime kind (`unsupported runtime: <Kind>.<group>`, which names the runtime key; the webhook
  names the field).
"""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

from hypothesis import assume, event, example, given, seed

from controller.client.errors import ApiError, NoKindMatch, TransportError
from controller.clock import FakeClock
from controller.controller.reconcile import Request, Result
from controller.trainer.setup import new_registry
from controller.trainer.trainjob_controller import (
    EVENT_REASON_CREATION_FAILED,
    REASON_INVALID_TRAINJOB,
    ReconcileErrors,
    TrainJobReconciler,
)
from runtime.api import constants
from runtime.core.errors import PermanentError, RuntimeNotFoundError
from runtime.framework import FrameworkError
from runtime.kubeyaml import YAMLInputError
from runtime.resources import InvalidQuantityError
from runtime.schema import CRD_DIR, SchemaChecker
from runtime.strategicmerge import StrategicMergeError
from runtime.testing import NOW
from support import fakes as _fakes

from .conftest import FUZZ, RUNTIMES, SEED, TRAINJOBS, names_a_field, served, worlds

FakeCluster = _fakes.FakeCluster
FakeRecorder = _fakes.FakeRecorder

SCHEMAS = SchemaChecker.from_crd_dir(CRD_DIR)
REGISTRY = new_registry()
CREATED = NOW - timedelta(hours=1)
RECONCILES = 2
"""Reconciles in a row of one unchanged world (and as many again after the clock moves on)."""
MAX_WRITES = 8
"""Writes one reconcile may make: the snapshot, the MPI Secret, a JobSet, PodGroups, status, a delete."""
MAX_READS = 20
"""Reads one reconcile may make (the shipped runtimes take 4 to 7)."""

_RETRIED = (FrameworkError, ApiError, TransportError, NoKindMatch, ReconcileErrors)
"""What the reconciler raises on purpose: the controller requeues it with backoff."""
_DELIBERATE = (
    FrameworkError,
    ApiError,
    TransportError,
    NoKindMatch,
    ReconcileErrors,
    InvalidQuantityError,
    StrategicMergeError,
    YAMLInputError,
)
"""The exceptions code raises on purpose; anything else in a chain of causes is a bug."""
_RUNTIME_KINDS = (constants.TRAINING_RUNTIME_KIND, constants.CLUSTER_TRAINING_RUNTIME_KIND)


def stored_trainjob(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The TrainJob as the API server would store it, or None when its schema refuses it."""
    if obj.get("apiVersion") != constants.API_VERSION or obj.get("kind") != constants.TRAINJOB_KIND:
        return None
    checked, errors = SCHEMAS.check(obj)
    if errors or not isinstance(checked.get("metadata"), dict):
        return None
    metadata = checked["metadata"]
    if not isinstance(metadata.get("name"), str):
        return None
    metadata.setdefault("namespace", "team")
    metadata["uid"] = "fuzz-uid"
    metadata["creationTimestamp"] = CREATED.strftime("%Y-%m-%dT%H:%M:%SZ")
    checked.pop("status", None)  # a create resets the status subresource
    return served(checked)


def is_runtime(obj: dict[str, Any]) -> bool:
    metadata = obj.get("metadata")
    return (
        obj.get("apiVersion") == constants.API_VERSION
        and obj.get("kind") in _RUNTIME_KINDS
        and isinstance(metadata, dict)
        and isinstance(metadata.get("name"), str)
    )


def causes(exc: BaseException) -> list[BaseException]:
    """The exception and its chain of causes (`__cause__`, else `__context__`)."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def deadline_of(trainjob: dict[str, Any]) -> float:
    seconds = trainjob["spec"].get("activeDeadlineSeconds")
    return float(seconds) if isinstance(seconds, int) else 0.0


def failed_condition(cluster: FakeCluster, request: Request) -> dict[str, Any] | None:
    stored = cluster.reader.get(
        constants.API_VERSION, constants.TRAINJOB_KIND, request.name, request.namespace
    )
    assert stored is not None
    for item in (stored.get("status") or {}).get("conditions") or []:
        if item.get("type") == constants.CONDITION_FAILED and item.get("status") == constants.CONDITION_TRUE:
            return dict(item)
    return None


class Run:
    """One world and its reconciler; `reconcile` asserts the per-reconcile properties."""

    def __init__(self, trainjob: dict[str, Any], runtime: dict[str, Any]) -> None:
        self.trainjob = trainjob
        self.cluster = FakeCluster(trainjob, runtime)
        self.recorder = FakeRecorder()
        self.clock = FakeClock(wall=NOW)
        self.reconciler = TrainJobReconciler(
            cache=self.cluster,
            client=self.cluster,
            reader=self.cluster.reader,
            registry=REGISTRY,
            recorder=self.recorder,
            clock=self.clock,
        )
        metadata = trainjob["metadata"]
        self.request = Request(namespace=metadata["namespace"], name=metadata["name"])

    def reconcile(self) -> tuple[Result | None, list[tuple[str, str, str]]]:
        """(the result, or None when it raised; the writes it made)."""
        writes, reads, events = len(self.cluster.writes), self.cluster.reads, len(self.recorder.events)
        result: Result | None = None
        error: BaseException | None = None
        try:
            result = self.reconciler.reconcile(self.request)
        except _RETRIED as exc:
            error = exc
        # Anything else propagates: a bug, shown with its traceback.
        made = self.cluster.writes[writes:]
        assert len(made) <= MAX_WRITES, made
        assert self.cluster.reads - reads <= MAX_READS
        new_events = self.recorder.events[events:]

        if error is not None:
            assert not isinstance(error, PermanentError), error  # recorded as a condition, never retried
            bugs = [c for c in causes(error) if not isinstance(c, _DELIBERATE)]
            assert not bugs, f"{type(bugs[0]).__name__}: {bugs[0]}"
            warnings = [e for e in new_events if e[0] == "Warning"]
            if any(isinstance(c, RuntimeNotFoundError) for c in causes(error)):
                assert warnings, error  # the world, not the input: upstream's text, no field
            elif isinstance(error, FrameworkError) or isinstance(error.__cause__, FrameworkError):
                assert warnings and all(names_a_field(e[2]) for e in warnings), (error, warnings)
        else:
            assert result is not None
            if not result.is_zero():
                assert 0 < result.requeue_after <= max(1.0, deadline_of(self.trainjob)), result
        failed = failed_condition(self.cluster, self.request)
        if failed is not None and failed.get("reason") == REASON_INVALID_TRAINJOB:
            assert names_a_field(failed["message"]), failed
            assert any(e[1] == EVENT_REASON_CREATION_FAILED for e in self.recorder.events)
        return result, made

    def outcome(self, result: Result | None, made: list[tuple[str, str, str]]) -> str:
        """What a reconcile ended in, in a few words."""
        failed = failed_condition(self.cluster, self.request)
        if failed is not None:
            return f"Failed: {failed.get('reason')}"
        if result is None:
            return "retried: " + (self.recorder.events[-1][2][42:80] if self.recorder.events else "no event")
        applied = sorted({kind for verb, kind, _ in made if verb == "apply"})
        return "applied " + ", ".join(applied) if applied else "nothing applied"

    def converges(self) -> str:
        """`RECONCILES` reconciles, the later ones writing nothing; then as many after the requeue is due.
        Returns the first one's outcome (for `--hypothesis-show-statistics`)."""
        result, made = self.reconcile()
        outcome = self.outcome(result, made)
        for _ in range(RECONCILES - 1):
            again, made = self.reconcile()
            assert made == [], made
            assert (again is None) == (result is None)
        if result is not None and result.requeue_after > 0:
            self.clock.step(result.requeue_after + 1)  # the queue's delay is a lower bound
            self.reconcile()  # the deadline may pass: the Failed condition and the JobSet's deletion
            for _ in range(RECONCILES - 1):
                assert self.reconcile()[1] == []
        return outcome


def runtime_named(name: str) -> dict[str, Any]:
    return copy.deepcopy(next(r for r in RUNTIMES if r["metadata"]["name"] == name))


def trainjob_on(runtime: str, **spec: Any) -> dict[str, Any]:
    """The plain seed TrainJob on the ClusterTrainingRuntime `runtime`, with `spec` set."""
    trainjob = copy.deepcopy(TRAINJOBS[1])
    trainjob["spec"]["runtimeRef"]["name"] = runtime
    trainjob["spec"].update(spec)
    return trainjob


_OTHER_GROUP = {"name": "torch-distributed", "kind": "ClusterTrainingRuntime", "apiGroup": "example.com"}
"""A runtime kind no runtime is registered for: `Failed` with reason `TrainingRuntimeNotSupported`."""


# Explicit worlds: each way a reconcile ends, so that even the CI run takes every path.
@example(world=(trainjob_on("torch-distributed"), runtime_named("torch-distributed")))  # built
@example(world=(trainjob_on("torch-distributed", suspend=True), runtime_named("torch-distributed")))
@example(world=(trainjob_on("deepspeed-distributed"), runtime_named("deepspeed-distributed")))  # + Secret
@example(
    world=(trainjob_on("torch-distributed", trainer={"numNodes": 0}), runtime_named("torch-distributed"))
)
@example(
    world=(trainjob_on("torch-distributed", activeDeadlineSeconds=60), runtime_named("torch-distributed"))
)
@example(
    world=(trainjob_on("torch-distributed", activeDeadlineSeconds=7200), runtime_named("torch-distributed"))
)
@example(world=(trainjob_on("missing"), runtime_named("torch-distributed")))  # retried until it exists
@example(
    world=(trainjob_on("torch-distributed", runtimeRef=_OTHER_GROUP), runtime_named("torch-distributed"))
)
@FUZZ
@seed(SEED)
@given(world=worlds())
def test_stored_trainjobs_and_runtimes_reconcile_and_converge(
    world: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    trainjob = stored_trainjob(world[0])
    assume(trainjob is not None and is_runtime(world[1]))
    assert trainjob is not None
    runtime, errors = SCHEMAS.check(world[1])
    assume(not errors)
    event(Run(trainjob, served(runtime)).converges())


@FUZZ
@seed(SEED)
@given(world=worlds())
def test_a_stored_runtime_that_breaks_its_schema_is_refused_naming_the_field(
    world: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    trainjob = stored_trainjob(world[0])
    runtime = served(world[1])
    assume(trainjob is not None and is_runtime(runtime))
    assert trainjob is not None
    assume(SCHEMAS.check(runtime)[1])  # an older CRD's object, or one edited in etcd: kept as it is
    event(Run(trainjob, runtime).converges())


# Found by this file's second property: each a focused case of what it found.


def test_a_runtime_of_the_wrong_types_is_refused_before_anything_is_built() -> None:
    # Was: the first reconcile built from the live runtime (its `labels` an array) and wrote the snapshot;
    # every later one refused that snapshot, so the TrainJob ran from an object it could never read back.
    runtime = runtime_named("torch-distributed")
    runtime["metadata"]["labels"] = []
    run = Run(stored_trainjob(trainjob_on("torch-distributed")) or {}, runtime)
    run.converges()
    assert run.cluster.writes == []
    reason, message = run.recorder.events[-1][1:]
    assert reason == EVENT_REASON_CREATION_FAILED
    assert message.endswith(
        'clustertrainingruntimes.trainer.kubeflow.org "torch-distributed" is not a runtime object: '
        "metadata.labels: expected a map of strings, found array"
    )


def test_a_runtime_quantity_that_does_not_parse_is_refused_naming_the_field() -> None:
    # Was (found by `make fuzz`): `plugin Torch failed in EnforceMLPolicy: quantities must match the
    # Kubernetes quantity syntax: 'xxx...'`, naming no field. Go's typed decoding parses every quantity.
    runtime = runtime_named("torch-distributed")
    node = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
    node["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": "x" * 1000}
    }
    run = Run(stored_trainjob(trainjob_on("torch-distributed")) or {}, runtime)
    run.converges()
    assert run.cluster.writes == []
    assert run.recorder.events[-1][2].endswith(
        "is not a runtime object: spec.template.spec.replicatedJobs[0].template.spec.template.spec"
        ".containers[0].resources.limits.nvidia.com/gpu: quantities must match the Kubernetes quantity "
        f"syntax: {'x' * 48!r}... (1000 characters)"
    )


def test_a_runtime_fixed_by_hand_is_built_on_the_next_reconcile() -> None:
    runtime = runtime_named("torch-distributed")
    broken = {**runtime, "metadata": {**runtime["metadata"], "labels": []}}
    run = Run(stored_trainjob(trainjob_on("torch-distributed")) or {}, broken)
    assert run.reconcile()[0] is None  # refused, retried with backoff
    run.cluster.reader.add(runtime)  # an update replaces the cached object
    result, made = run.reconcile()
    assert result is not None and result.is_zero()
    assert made == [("apply", "ConfigMap", "fuzz-runtime-snapshot"), ("apply", "JobSet", "fuzz")]


def test_a_runtime_patch_that_cannot_merge_names_the_patch() -> None:
    # Was: `applying runtime patch of manager 'acme.io/tuner': map item does not contain the merge key ...`.
    runtime = runtime_named("torch-distributed")
    jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    jobs.append({k: v for k, v in copy.deepcopy(jobs[0]).items() if k != "name"})  # no merge key
    trainjob = copy.deepcopy(TRAINJOBS[3])  # the one with a runtime patch of replicated job `node`
    run = Run(stored_trainjob(trainjob) or {}, runtime)
    run.converges()
    message = run.recorder.events[-1][2]
    assert "spec.runtimePatches[0]: applying runtime patch of manager 'acme.io/tuner': map item" in message


def test_an_unsupported_mpi_implementation_names_the_runtime_field_and_cuts_the_value() -> None:
    # Was: `MPI implementation for <all 1,000 characters> doesn't supported`, naming no field.
    runtime = runtime_named("deepspeed-distributed")
    runtime["spec"]["mlPolicy"]["mpi"]["mpiImplementation"] = "x" * 1000  # not in the CRD's enum
    run = Run(stored_trainjob(trainjob_on("deepspeed-distributed")) or {}, runtime)
    run.converges()
    message = run.recorder.events[-1][2]
    assert 'cannot be built: spec.mlPolicy.mpi.mpiImplementation: Invalid value: "xxx' in message
    assert "… (1000 characters) doesn't supported" in message
    assert run.recorder.events[-1][1] == EVENT_REASON_CREATION_FAILED
    assert len(message) < 1200  # each echo of the value is cut
