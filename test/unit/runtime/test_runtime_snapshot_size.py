"""A runtime whose snapshot a ConfigMap cannot hold (the API server limits a ConfigMap's data to 1 MiB), or
that the controller would not read back (more than `MAX_SNAPSHOT_NODES` YAML nodes), is refused everywhere,
exactly at the limit: by the build (a permanent `UnbuildableRuntimeError`, before anything is applied), by
the TrainJob webhook (at `spec.runtimeRef`), by the runtime webhooks (`Too long` at `spec`, conservatively)
and so by `trainer-render`. Before, the API server stored such a runtime (objects up to 1.5 MiB) and every
TrainJob using it failed to apply (or to read back) its snapshot, retried for ever (as upstream v2.3.0)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime import render
from runtime.core import RuntimeRegistry, UnbuildableRuntimeError
from runtime.core import runtime as core_runtime
from runtime.core.runtime_rules import validate_cluster_training_runtime, validate_training_runtime
from runtime.core.snapshot import (
    MAX_SNAPSHOT_BYTES,
    MAX_SNAPSHOT_NODES,
    SnapshotText,
    admitted_snapshot,
    read_snapshot,
    snapshot_text,
)
from runtime.framework import Framework, MemoryReader
from runtime.plugins import builtin_registry
from runtime.testing import Make

MAKE = Make()
REF = '{"name":"test-runtime","kind":"TrainingRuntime","apiGroup":"trainer.kubeflow.org"}'
KIND = "TrainingRuntime"


def _runtime(pad: str, kind: str = KIND) -> dict[str, Any]:
    """A runtime whose trainer container has the env var `PAD=<pad>` (a large inline script, say)."""
    container = MAKE.container("node", image="img", env=[{"name": "PAD", "value": pad}])
    job = MAKE.job("node", ancestor="trainer", containers=[container])
    runtime = MAKE.runtime(MAKE.runtime_spec(job, ml_policy={"numNodes": 1, "torch": {}}), kind=kind)
    runtime["metadata"].update(  # what the API server sets (all but resourceVersion before admission)
        uid="7c6a2a4e-0000-4000-8000-000000000000",
        creationTimestamp="2026-12-01T11:00:00Z",
        generation=1,
        resourceVersion="42",
    )
    return runtime


def _size(pad: str) -> int:
    return len(snapshot_text(_runtime(pad), KIND).text.encode())


BASE = _size("x") - 1
"""The snapshot's bytes besides the padding (one plain YAML scalar: each `x` is one byte)."""


def _verdicts(runtime: dict[str, Any]) -> tuple[list[str], Exception | None, list[dict[str, Any]]]:
    registry = RuntimeRegistry(Framework(builtin_registry()))
    reader = MemoryReader([runtime])
    trainjob = MAKE.trainjob(suspend=False)
    admitted = [str(e) for e in registry.validate(None, trainjob, reader).errors]
    try:
        return admitted, None, registry.new_objects(trainjob, reader)
    except Exception as exc:  # the test asserts on what it is
        return admitted, exc, []


def _too_large(size: int) -> str:
    return f"its runtime snapshot would be {size} bytes of YAML, more than a ConfigMap holds (1048576 bytes)"


def test_a_snapshot_of_exactly_the_limit_is_built_and_one_byte_more_is_refused_for_good() -> None:
    fits = "x" * (MAX_SNAPSHOT_BYTES - BASE)
    admitted, error, objects = _verdicts(_runtime(fits))
    assert (admitted, error) == ([], None)
    assert len(objects[0]["data"]["runtime"].encode()) == MAX_SNAPSHOT_BYTES

    admitted, error, objects = _verdicts(_runtime(fits + "x"))
    assert admitted == [
        f"spec.runtimeRef: Invalid value: {REF}: the runtime cannot run: {_too_large(MAX_SNAPSHOT_BYTES + 1)}"
    ]
    assert isinstance(error, UnbuildableRuntimeError)  # permanent: the TrainJob fails (RuntimeNotBuildable)
    assert str(error) == (
        f'trainingruntimes.trainer.kubeflow.org "test-runtime" cannot be built: '
        f"{_too_large(MAX_SNAPSHOT_BYTES + 1)}"
    )
    assert objects == []  # nothing to apply, not even the snapshot


def test_the_limit_is_in_bytes_not_characters() -> None:
    # 2 bytes each: fewer characters than the limit, more bytes, which is what the API server counts.
    pad = "é" * ((MAX_SNAPSHOT_BYTES - BASE) // 2 + 1)
    text = snapshot_text(_runtime(pad), KIND).text
    assert len(text) < MAX_SNAPSHOT_BYTES < len(text.encode())
    admitted, error, _ = _verdicts(_runtime(pad))
    assert isinstance(error, UnbuildableRuntimeError)
    assert admitted == [
        f"spec.runtimeRef: Invalid value: {REF}: the runtime cannot run: {_too_large(len(text.encode()))}"
    ]


def test_admission_and_the_build_make_the_snapshot_text_once_per_runtime_object(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[int] = []

    def counted(runtime: Any, kind: str) -> SnapshotText:
        made.append(1)
        return snapshot_text(runtime, kind)

    monkeypatch.setattr(core_runtime, "snapshot_text", counted)
    registry = RuntimeRegistry(Framework(builtin_registry()))
    reader = MemoryReader([_runtime("x" * 1000)])
    for name in ("a", "b", "c"):
        trainjob = MAKE.trainjob(name=name, suspend=False)
        assert registry.validate(None, trainjob, reader).ok
        registry.new_objects(trainjob, reader)
    assert len(made) == 1


@pytest.mark.parametrize("kind", ["TrainingRuntime", "ClusterTrainingRuntime"])
def test_the_runtime_webhooks_refuse_a_runtime_whose_snapshot_would_not_fit(kind: str) -> None:
    validate = validate_training_runtime if kind == KIND else validate_cluster_training_runtime
    pad = "x" * MAX_SNAPSHOT_BYTES
    runtime = _runtime(pad, kind)
    size = len(admitted_snapshot(runtime, kind).text.encode())
    assert [str(e) for e in validate(runtime).errors] == [
        f"spec: Too long: no TrainJob can run this runtime: {_too_large(size)}"
    ]
    assert validate(_runtime("x" * 1000, kind)).ok


def test_the_runtime_webhooks_estimate_is_conservative_by_a_resource_version_at_most() -> None:
    # At admission the API server has yet to set `resourceVersion`: it is counted at its longest.
    runtime = _runtime("x" * 100)
    del runtime["metadata"]["resourceVersion"]
    stored = {**runtime, "metadata": {**runtime["metadata"], "resourceVersion": "123456789"}}
    estimate = len(admitted_snapshot(runtime, KIND).text.encode())
    exact = len(snapshot_text(stored, KIND).text.encode())
    assert 0 <= estimate - exact <= 20


def test_the_size_problem_counts_utf8_bytes() -> None:
    def problem(text: str) -> str | None:
        return SnapshotText(text, nodes=1).problem()

    assert problem("x" * MAX_SNAPSHOT_BYTES) is None
    assert problem("é" * (MAX_SNAPSHOT_BYTES // 2)) is None
    assert problem("é" * (MAX_SNAPSHOT_BYTES // 2) + "x") == _too_large(MAX_SNAPSHOT_BYTES + 1)


_TOO_MANY_NODES = (
    f"its runtime snapshot would hold more than {MAX_SNAPSHOT_NODES} YAML nodes (scalars, keys and "
    "collections), more than a snapshot is read back with"
)


def _many_nodes(labels: int, kind: str = KIND) -> dict[str, Any]:
    """A runtime with `labels` labels `lnnnnnn: ""`: 2 YAML nodes each in 16 bytes, so 100,000 nodes fit
    in 1 MiB."""
    runtime = _runtime("x", kind)
    runtime["metadata"]["labels"] = {f"l{i:06d}": "" for i in range(labels)}
    return runtime


def test_a_snapshot_read_back_with_at_most_the_node_bound_is_built_and_one_node_more_is_refused() -> None:
    one, two = (snapshot_text(_many_nodes(count), KIND).nodes for count in (1, 2))
    per_label = two - one
    fits = (MAX_SNAPSHOT_NODES - (one - per_label)) // per_label
    runtime = _many_nodes(fits)
    snapshot = snapshot_text(runtime, KIND)
    assert MAX_SNAPSHOT_NODES - per_label < snapshot.nodes <= MAX_SNAPSHOT_NODES
    assert len(snapshot.text.encode()) < MAX_SNAPSHOT_BYTES  # the bytes are not what refuses it
    admitted, error, objects = _verdicts(runtime)
    assert (admitted, error) == ([], None)
    trainjob = MAKE.trainjob(suspend=False)
    read = read_snapshot(objects[0], trainjob)  # what was written reads back
    assert read["metadata"]["labels"] == runtime["metadata"]["labels"]

    over = _many_nodes(fits + 1)
    admitted, error, objects = _verdicts(over)
    assert admitted == [f"spec.runtimeRef: Invalid value: {REF}: the runtime cannot run: {_TOO_MANY_NODES}"]
    assert isinstance(error, UnbuildableRuntimeError)
    assert objects == []
    assert [str(e) for e in validate_training_runtime(over).errors] == [
        f"spec: Too long: no TrainJob can run this runtime: {_TOO_MANY_NODES}"
    ]


def test_trainer_render_exits_with_the_runtime_webhook_error(tmp_path: Path, capsys: Any) -> None:
    runtime_file, job_file = tmp_path / "runtime.yaml", tmp_path / "job.yaml"
    runtime = _runtime("x" * MAX_SNAPSHOT_BYTES)
    for key in ("uid", "resourceVersion", "creationTimestamp", "generation"):
        runtime["metadata"].pop(key, None)
    runtime_file.write_text(render.dump_yaml([runtime]))
    job_file.write_text(render.dump_yaml([MAKE.trainjob()]))
    assert render.main([str(job_file), "--runtime", str(runtime_file)]) == 2
    err = capsys.readouterr().err
    assert "is invalid" in err
    assert "spec: Too long: no TrainJob can run this runtime: its runtime snapshot would be" in err
