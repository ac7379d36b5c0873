"""Pipeline benchmarks, deselected by default (run with `-m benchmark -s`); they print, never assert."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from runtime.core import RuntimeRegistry
from runtime.core.snapshot import build_snapshot
from runtime.framework import Framework, MemoryReader
from runtime.plugins import builtin_registry

if TYPE_CHECKING:
    from runtime.testing import Make


@pytest.mark.benchmark
def test_benchmark_build_and_status_of_a_torch_trainjob(make: Make) -> None:
    registry = RuntimeRegistry(Framework(builtin_registry()))
    jobs = make.default_jobs()
    jobs[2]["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "4"}}
    runtime = make.runtime(make.runtime_spec(*jobs, ml_policy={"numNodes": 2, "torch": {}}))
    trainjob = make.trainjob(
        trainer={
            "image": "x",
            "command": ["torchrun", "train.py"],
            "numNodes": 4,
            "env": [make.env("A", "1")],
        },
        initializer={"dataset": {"storageUri": "hf://d"}, "model": {"storageUri": "hf://m"}},
        suspend=False,
    )
    reader = MemoryReader([runtime, build_snapshot(trainjob, runtime, "TrainingRuntime")])
    status_reader = MemoryReader(
        [*reader.list("v1", "ConfigMap"), make.jobset(status={"replicatedJobsStatus": []})]
    )

    for label, call, rounds in (
        ("new_objects (snapshot read + JobSet render)", lambda: registry.new_objects(trainjob, reader), 2000),
        ("next_status", lambda: registry.next_status(trainjob, status_reader, make.now), 20000),
        ("validate", lambda: registry.validate(None, trainjob, MemoryReader([runtime])), 2000),
    ):
        started = time.perf_counter()
        for _ in range(rounds):
            call()
        elapsed = time.perf_counter() - started
        print(f"{label}: {rounds / elapsed:,.0f} per second ({elapsed / rounds * 1e6:,.0f} µs each)")
