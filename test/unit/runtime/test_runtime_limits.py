"""No input may exhaust the pipeline's memory or time: counts and quantities at their type's maxima.

Every case runs the whole pipeline (`RuntimeRegistry.validate`, `new_objects`, `next_status`) in a child
process that this file starts on itself, with its address space capped (`RLIMIT_AS`, 1 GiB) and a wall-clock
timeout, so a case that blows up fails on its own instead of taking the machine (or the test run) with it.
The child prints what each step answered as JSON; the test asserts that every step answered with a clear
error that names the field and says the limit (not a `MemoryError`, not an empty message), or built
objects.

Run by hand: `python test/unit/runtime/test_runtime_limits.py <case>...` prints the cases' answers;
`... property <seed> <examples>` runs the seeded hypothesis loop.
"""

from __future__ import annotations

import itertools
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from runtime.core import RuntimeRegistry
from runtime.framework import Framework, FrameworkError, MemoryReader, PluginEntry, PluginRegistry
from runtime.info import MAX_PODS_PER_JOB, MAX_PODS_PER_TRAINJOB, InvalidCountError, build_info, count_error
from runtime.plugins import TRAINJOB_STATUS_GATE, builtin_registry
from runtime.plugins.jobset import PodEndpoints
from runtime.plugins.mpi import MPI, SSHKeyPair
from runtime.resources import InvalidQuantityError, Quantity
from runtime.testing import Make

MEMORY_LIMIT = 1 << 30
"""The child's address-space cap: a pipeline that materialises an int32-sized list cannot fit in it."""
TIMEOUT_S = 120
"""The child's wall-clock limit (generous: the machine is shared; a blow-up takes far longer)."""

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
MAKE = Make(name="big", namespace="team", uid="big-uid")
NUM_NODES_ERROR = (
    f"spec.trainer.numNodes: Invalid value: {INT32_MAX}: must be less than or equal to {MAX_PODS_PER_JOB}"
)


def _keys() -> SSHKeyPair:
    return SSHKeyPair(private_key=b"private", public_key=b"public\n")


def _registry() -> RuntimeRegistry:
    registry = builtin_registry(frozenset({TRAINJOB_STATUS_GATE}))
    entries = [entry for entry in registry if entry.name != "MPI"]
    mpi_index = registry.names.index("MPI")
    entries.insert(mpi_index, PluginEntry("MPI", lambda context: MPI(context, keygen=_keys)))
    return RuntimeRegistry(Framework(PluginRegistry(entries)))


def _node(**fields: Any) -> dict[str, Any]:
    return MAKE.container("node", image="img:1", **fields)


def _runtime(
    ml_policy: Mapping[str, Any] | None,
    *,
    jobs: list[dict[str, Any]] | None = None,
    pod_group_policy: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    jobs = jobs or [MAKE.job("node", ancestor="trainer", containers=[_node()])]
    spec = MAKE.runtime_spec(*jobs, ml_policy=ml_policy, pod_group_policy=pod_group_policy)
    return MAKE.runtime(spec)


def _mpi_runtime(run_launcher_as_node: bool = False) -> dict[str, Any]:
    jobs = [
        MAKE.job("launcher", ancestor="trainer", containers=[_node()]),
        MAKE.job("node", containers=[_node()]),
    ]
    mpi = {"mpiImplementation": "OpenMPI", "numProcPerNode": 1, "runLauncherAsNode": run_launcher_as_node}
    return _runtime({"numNodes": 1, "mpi": mpi}, jobs=jobs)


_SECRET = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {"name": "kubeflow-trainer-webhook-cert", "namespace": "kubeflow-system"},
    "data": {"ca.crt": "Q0E="},
}


def _answers(runtime: Mapping[str, Any], **trainer: Any) -> dict[str, Any]:
    """What validate, new_objects and next_status answer for a TrainJob with `trainer` on `runtime`."""
    registry = _registry()
    trainjob = MAKE.trainjob(trainer=trainer or None, suspend=False)
    reader = MemoryReader([runtime, _SECRET])
    answers: dict[str, Any] = {}
    started = time.perf_counter()
    validation = registry.validate(None, trainjob, reader)
    answers["validate"] = [str(error) for error in validation.errors]
    try:
        objects = registry.new_objects(trainjob, reader)
    except FrameworkError as exc:
        answers["new_objects"] = {"error": type(exc).__name__, "message": str(exc)}
    else:
        hostfile = next((o for o in objects if o["metadata"]["name"].endswith("-mpi-hostfile")), None)
        answers["new_objects"] = {
            "kinds": [o["kind"] for o in objects],
            "hostfile_lines": hostfile["data"]["hostfile"].count("\n") if hostfile else None,
        }
    update = registry.next_status(trainjob, reader, NOW)
    answers["next_status"] = {"error": str(update.error) if update.error else None}
    answers["seconds"] = round(time.perf_counter() - started, 3)
    return answers


CASES: dict[str, Callable[[], dict[str, Any]]] = {
    "torch-num-nodes-int32-max": lambda: _answers(_runtime({"numNodes": 1, "torch": {}}), numNodes=INT32_MAX),
    "torch-num-nodes-int64-max": lambda: _answers(_runtime({"numNodes": 1, "torch": {}}), numNodes=INT64_MAX),
    "mpi-num-nodes-int32-max": lambda: _answers(_mpi_runtime(), numNodes=INT32_MAX),
    "mpi-launcher-as-node-num-nodes-int32-max": lambda: _answers(_mpi_runtime(True), numNodes=INT32_MAX),
    "flux-num-nodes-int32-max": lambda: _answers(
        _runtime({"numNodes": 1, "flux": {"numProcPerNode": 1}}), numNodes=INT32_MAX
    ),
    "jax-num-nodes-int32-max": lambda: _answers(_runtime({"numNodes": 1, "jax": {}}), numNodes=INT32_MAX),
    "xgboost-num-nodes-int32-max": lambda: _answers(
        _runtime({"numNodes": 1, "xgboost": {}}), numNodes=INT32_MAX
    ),
    "plainml-coscheduling-num-nodes-int32-max": lambda: _answers(
        _runtime({"numNodes": 1}, pod_group_policy={"coscheduling": {"scheduleTimeoutSeconds": 60}}),
        numNodes=INT32_MAX,
    ),
    "runtime-ml-policy-num-nodes-int32-max": lambda: _answers(_runtime({"numNodes": INT32_MAX, "torch": {}})),
    "runtime-parallelism-and-replicas-int32-max": lambda: _answers(
        _runtime(
            {"numNodes": 1, "torch": {}},
            jobs=[
                MAKE.job("node", ancestor="trainer", containers=[_node()]),
                MAKE.job("aux", replicas=INT32_MAX, parallelism=INT32_MAX, containers=[_node()]),
            ],
        )
    ),
    "trainer-job-replicas-times-num-nodes-above-the-total": lambda: _answers(
        _mpi_runtime_with_node_replicas(2), numNodes=MAX_PODS_PER_JOB
    ),
    "runtime-replicas-times-parallelism-above-the-total": lambda: _answers(
        _runtime(
            {"numNodes": 1, "torch": {}},
            jobs=[
                MAKE.job("node", ancestor="trainer", containers=[_node()]),
                MAKE.job("aux", replicas=2, parallelism=MAX_PODS_PER_JOB, containers=[_node()]),
            ],
        ),
        numNodes=1,
    ),
    "mpi-num-nodes-at-the-limit-is-refused": lambda: _answers(_mpi_runtime(), numNodes=MAX_PODS_PER_JOB),
    "mpi-num-nodes-whose-hostfile-fits-builds": lambda: _answers(_mpi_runtime(), numNodes=20_000),
    "num-proc-per-node-and-gpus-at-int-maxima": lambda: _answers(
        _mpi_runtime(),
        numNodes=20_000,  # the most MPI nodes whose hostfile a ConfigMap holds is about 35,000
        numProcPerNode=INT32_MAX,
        resourcesPerNode={"requests": {"nvidia.com/gpu": str(INT64_MAX)}},
    ),
    "xgboost-gpus-int64-max-times-the-node-count": lambda: _answers(
        _runtime({"numNodes": 1, "xgboost": {}}),
        numNodes=MAX_PODS_PER_JOB,
        resourcesPerNode={"limits": {"nvidia.com/gpu": str(INT64_MAX)}},
    ),
    "min-resources-of-huge-quantities-times-the-node-count": lambda: _answers(
        _runtime(
            {"numNodes": 1, "torch": {}},
            pod_group_policy={"coscheduling": {"scheduleTimeoutSeconds": 60}},
        ),
        numNodes=MAX_PODS_PER_JOB,
        resourcesPerNode={"requests": {"cpu": "9e99", "memory": "8Ei", "nvidia.com/gpu": "1e99"}},
    ),
    "quantity-with-a-huge-exponent": lambda: _answers(
        _runtime(
            {"numNodes": 1, "torch": {}},
            pod_group_policy={"coscheduling": {"scheduleTimeoutSeconds": 60}},
        ),
        numNodes=2,
        resourcesPerNode={"requests": {"nvidia.com/gpu": "1e999999999", "cpu": "1e-999999999"}},
    ),
}


def _mpi_runtime_with_node_replicas(replicas: int) -> dict[str, Any]:
    jobs = [
        MAKE.job("launcher", containers=[_node()]),
        MAKE.job("node", ancestor="trainer", replicas=replicas, containers=[_node()]),
    ]
    return _runtime({"numNodes": 1, "mpi": {"mpiImplementation": "OpenMPI", "numProcPerNode": 1}}, jobs=jobs)


def _run_capped(*args: str) -> dict[str, Any]:
    """Run this file in a child capped at MEMORY_LIMIT and TIMEOUT_S; its JSON answer (case → answers,
    or the property loop's report)."""
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": str(root)}
    completed = subprocess.run(
        [sys.executable, __file__, *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        cwd=root,
        env=env,
        check=False,
    )
    assert completed.returncode == 0, f"child failed ({completed.returncode}): {completed.stderr[-2000:]}"
    return json.loads(completed.stdout)  # type: ignore[no-any-return]


def _run_case(case: str) -> dict[str, Any]:
    return _run_capped(case)[case]


# Counts beyond what Kubernetes runs: a clear field error from the webhook path and from the build path ------


NUM_NODES_CASES = (
    "torch-num-nodes-int32-max",
    "mpi-num-nodes-int32-max",
    "mpi-launcher-as-node-num-nodes-int32-max",
    "flux-num-nodes-int32-max",
    "jax-num-nodes-int32-max",
    "xgboost-num-nodes-int32-max",
    "plainml-coscheduling-num-nodes-int32-max",
)


def test_num_nodes_int32_max_is_refused_naming_the_field_and_the_limit_whatever_the_runtime() -> None:
    # Before: the JobSet plugin built 2^31 pod names, ran out of memory after ~12 s and failed with
    # "plugin JobSet failed in PreComponentBuilder: " (a MemoryError has no message); validation passed.
    for case, answers in _run_capped(*NUM_NODES_CASES).items():
        assert NUM_NODES_ERROR in answers["validate"], case
        assert answers["new_objects"] == {
            "error": "InvalidTrainJobError",
            "message": f"invalid TrainJob: {NUM_NODES_ERROR}",
        }, case
        assert answers["next_status"]["error"] is not None, case  # no JobSet yet: the status plugin says so


def test_num_nodes_int64_max_is_refused_the_same_way() -> None:
    answers = _run_case("torch-num-nodes-int64-max")
    error = (
        f"spec.trainer.numNodes: Invalid value: {INT64_MAX}: must be less than or equal to {MAX_PODS_PER_JOB}"
    )
    assert error in answers["validate"]
    assert answers["new_objects"]["message"] == f"invalid TrainJob: {error}"


def test_a_runtime_num_nodes_beyond_the_limit_is_a_runtime_ref_error_naming_the_runtime_field() -> None:
    answers = _run_case("runtime-ml-policy-num-nodes-int32-max")
    limit = f"must be less than or equal to {MAX_PODS_PER_JOB}"
    runtime_error = f"spec.mlPolicy.numNodes: Invalid value: {INT32_MAX}: {limit}"
    assert len(answers["validate"]) == 1
    assert answers["validate"][0].startswith("spec.runtimeRef: Invalid value: ")
    assert answers["validate"][0].endswith(f"the runtime cannot run: {runtime_error}")
    # The runtime cannot be built: a permanent failure naming the runtime object and the field.
    assert answers["new_objects"] == {
        "error": "UnbuildableRuntimeError",
        "message": f'trainingruntimes.trainer.kubeflow.org "test-runtime" cannot be built: {runtime_error}',
    }


def test_runtime_replicas_and_parallelism_beyond_their_limits_are_refused_naming_the_field() -> None:
    answers = _run_case("runtime-parallelism-and-replicas-int32-max")
    replicas_error = (
        f"spec.template.spec.replicatedJobs[1].replicas: Invalid value: {INT32_MAX}: "
        f"must be less than or equal to {MAX_PODS_PER_TRAINJOB}"
    )
    assert answers["validate"][0].endswith(f"the runtime cannot run: {replicas_error}")
    assert answers["new_objects"] == {
        "error": "UnbuildableRuntimeError",
        "message": f'trainingruntimes.trainer.kubeflow.org "test-runtime" cannot be built: {replicas_error}',
    }


def test_a_trainjob_whose_pods_in_all_exceed_the_total_is_refused_by_validation_and_by_the_build() -> None:
    # numNodes is within the per-job limit, but the runtime's trainer job has two replicas: 200,000 pods.
    answers = _run_case("trainer-job-replicas-times-num-nodes-above-the-total")
    error = (
        f"spec.trainer.numNodes: Invalid value: {MAX_PODS_PER_JOB}: must be less than or equal to "
        f"{MAX_PODS_PER_TRAINJOB} pods in all: the TrainJob would run 200001 pods (replicas times pods per "
        "job, summed over the replicated jobs)"
    )
    assert answers["validate"] == [error]
    assert answers["new_objects"] == {
        "error": "InvalidTrainJobError",
        "message": f"invalid TrainJob: {error}",
    }


def test_pods_in_all_the_runtime_alone_runs_are_blamed_on_the_runtime_not_on_num_nodes() -> None:
    # Was: spec.trainer.numNodes: Invalid value: 1, though numNodes 1 is the least it can ask for; the
    # runtime's aux job (replicas 2 x parallelism 100000) is what no TrainJob can run.
    answers = _run_case("runtime-replicas-times-parallelism-above-the-total")
    error = (
        "spec.template.spec.replicatedJobs: Invalid value: 200001: must be less than or equal to "
        f"{MAX_PODS_PER_TRAINJOB} pods in all: the runtime runs 200001 pods (replicas times pods per job, "
        "summed over the replicated jobs)"
    )
    assert len(answers["validate"]) == 1
    assert answers["validate"][0].startswith("spec.runtimeRef: Invalid value: ")
    assert answers["validate"][0].endswith(f"the runtime cannot run: {error}")
    assert answers["new_objects"] == {
        "error": "UnbuildableRuntimeError",
        "message": f'trainingruntimes.trainer.kubeflow.org "test-runtime" cannot be built: {error}',
    }


# At the limit the pipeline builds, in bounded memory and time -----------------------------------------------


def test_mpi_at_the_node_limit_is_refused_as_its_hostfile_fits_no_configmap() -> None:
    # 100,000 hostfile lines are 3 MB; the API server stores 1 MiB in a ConfigMap, so the TrainJob was
    # admitted and then no build could apply its hostfile.
    answers = _run_case("mpi-num-nodes-at-the-limit-is-refused")
    error = (
        f"spec.trainer.numNodes: Invalid value: {MAX_PODS_PER_JOB}: must make the MPI hostfile at most "
        "1048568 bytes (what a ConfigMap holds), not more"
    )
    assert answers["validate"] == [error]
    refused = {"error": "InvalidTrainJobError", "message": f"invalid TrainJob: {error}"}
    assert answers["new_objects"] == refused


def test_mpi_nodes_whose_hostfile_fits_build_it_within_the_memory_cap() -> None:
    answers = _run_case("mpi-num-nodes-whose-hostfile-fits-builds")
    assert answers["validate"] == []
    assert answers["new_objects"]["hostfile_lines"] == 20_000
    print(f"MPI, 20000 nodes: validate + new_objects + next_status in {answers['seconds']} s")


def test_a_process_count_at_the_int32_maximum_builds() -> None:
    answers = _run_case("num-proc-per-node-and-gpus-at-int-maxima")
    assert answers["validate"] == []
    assert "kinds" in answers["new_objects"], answers


def test_a_worker_count_beyond_int32_is_refused_naming_the_gpu_resource() -> None:
    # Was built: DMLC_NUM_WORKER = 100000 x (2^63 - 1), a 24-digit env value no XGBoost parses.
    answers = _run_case("xgboost-gpus-int64-max-times-the-node-count")
    error = (
        f'spec.trainer.resourcesPerNode.limits[nvidia.com/gpu]: Invalid value: "{INT64_MAX}": must make '
        f"DMLC_NUM_WORKER at most {INT32_MAX}, not {MAX_PODS_PER_JOB * INT64_MAX}"
    )
    assert answers["validate"] == [error]
    assert answers["new_objects"] == {
        "error": "InvalidTrainJobError",
        "message": f"invalid TrainJob: {error}",
    }


def test_min_resources_of_huge_quantities_times_the_node_count_is_built() -> None:
    answers = _run_case("min-resources-of-huge-quantities-times-the-node-count")
    assert answers["validate"] == []
    assert "PodGroup" in answers["new_objects"]["kinds"]


def test_a_quantity_with_a_huge_exponent_is_a_clear_error_not_a_memory_error() -> None:
    answers = _run_case("quantity-with-a-huge-exponent")
    # Was a PluginError of the Torch plugin naming no field, after validation had admitted it.
    error = (
        'spec.trainer.resourcesPerNode.requests[nvidia.com/gpu]: Invalid value: "1e999999999": '
        "quantities must be less than 1e100: '1e999999999'"
    )
    assert answers["validate"] == [error]
    assert answers["new_objects"] == {
        "error": "InvalidTrainJobError",
        "message": f"invalid TrainJob: {error}",
    }


# The pieces, in process: lazy endpoints, bounded quantities, typed counts ----------------------------------


def test_pod_endpoints_are_lazy_sized_and_re_iterable() -> None:
    endpoints = PodEndpoints("tj", "node", 2, INT32_MAX, "tj")
    assert len(endpoints) == 2 * INT32_MAX  # known without making one name
    assert list(itertools.islice(endpoints, 2)) == ["tj-node-0-0.tj", "tj-node-0-1.tj"]
    assert next(iter(endpoints)) == "tj-node-0-0.tj"  # a new iteration starts again
    assert list(PodEndpoints("tj", "launcher", 2, 1, "sub")) == ["tj-launcher-0-0.sub", "tj-launcher-1-0.sub"]


@pytest.mark.parametrize(
    ("text", "printed"),
    [
        ("1e-999999999", "1e-9"),  # below 1n: rounded up to 1n, as Go
        ("-1e-30", "-1e-9"),
        ("0e999999999", "0"),
        ("0" * 5000 + "1", "0" * 5000 + "1"),  # Go writes this text back as it was written
        ("9" * 100, "9" * 100),
    ],
)
def test_quantities_with_extreme_exponents_or_digits_parse_in_bounded_time(text: str, printed: str) -> None:
    assert str(Quantity.parse(text)) == printed


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1e999999999", "quantities must be less than 1e100: '1e999999999'"),
        ("1e100", "quantities must be less than 1e100: '1e100'"),
        ("1" * 101, "quantities must have at most 100 significant digits"),
        ("1e" + "9" * 30, "unable to parse quantity's suffix: '1e" + "9" * 30 + "'"),
    ],
)
def test_quantities_beyond_any_resource_are_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(InvalidQuantityError) as caught:
        Quantity.parse(text)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("3", 'spec.trainer.numNodes: Invalid value: "3": must be an integer'),
        (True, "spec.trainer.numNodes: Invalid value: true: must be an integer"),
        (2.5, "spec.trainer.numNodes: Invalid value: 2.5: must be an integer"),
        (100_001, "spec.trainer.numNodes: Invalid value: 100001: must be less than or equal to 100000"),
    ],
)
def test_build_info_refuses_a_count_that_is_not_a_bounded_integer(value: Any, message: str) -> None:
    trainjob = MAKE.trainjob(trainer={"numNodes": value})
    spec = MAKE.runtime_spec(MAKE.job("node", ancestor="trainer", containers=[_node()]), ml_policy={})
    with pytest.raises(InvalidCountError) as caught:
        build_info(trainjob, spec)
    assert (str(caught.value), caught.value.in_trainjob) == (message, True)
    assert count_error("x", MAX_PODS_PER_JOB, MAX_PODS_PER_JOB) is None


def test_a_field_error_reports_a_value_too_large_to_print_instead_of_failing() -> None:
    # Python refuses to print an int of over 4300 digits and orjson one beyond 64 bits: the error that
    # reports such a value must still come out, naming the field and the limit.
    assert str(count_error("spec.trainer.numNodes", 10**5000, MAX_PODS_PER_JOB)) == (
        "spec.trainer.numNodes: Invalid value: <a value too large to print>: "
        f"must be less than or equal to {MAX_PODS_PER_JOB}"
    )
    assert str(count_error("spec.trainer.numNodes", [2**70], MAX_PODS_PER_JOB)).endswith("must be an integer")


@pytest.mark.parametrize("seconds", [INT32_MAX, INT64_MAX, 10**30])
def test_an_active_deadline_at_the_int_maxima_is_a_deadline_not_a_crash(seconds: int) -> None:
    # Before: int64 max raised OverflowError out of next_status (a date past year 9999).
    trainjob = MAKE.trainjob(activeDeadlineSeconds=seconds, suspend=False)
    update = _registry().next_status(trainjob, MemoryReader([]), NOW)
    assert not update.delete_jobset
    assert update.requeue_after is None or update.requeue_after > 0


# Random large counts through every entry point -------------------------------------------------------------


def test_random_large_counts_never_exhaust_memory_nor_crash() -> None:
    answers = _run_capped("property", "20260102", "300")
    assert answers["failures"] == [], answers["failures"][:3]
    assert answers["examples"] >= 300
    print(f"property: {answers['examples']} examples in {answers['seconds']} s under a 1 GiB cap")


def _property(seed: int, examples: int) -> dict[str, Any]:
    """A seeded hypothesis loop: random counts up to int32 max through validate, new_objects, next_status.

    Every answer must be field errors or a `FrameworkError` with a message; anything else is a failure.
    """
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hypothesis_seed
    from hypothesis import strategies as st

    big = st.one_of(
        st.integers(1, 4),
        st.integers(MAX_PODS_PER_JOB - 2, MAX_PODS_PER_JOB + 2),
        st.integers(MAX_PODS_PER_TRAINJOB - 2, MAX_PODS_PER_TRAINJOB + 2),
        st.integers(1, INT32_MAX),
        st.just(INT32_MAX),
    )
    policies = st.sampled_from(["torch", "mpi", "flux", "jax", "xgboost", None])
    quantities = st.sampled_from(["1", "8", str(INT64_MAX), "9Ei", "1e99", "1e999999999", "1e-999999999"])
    failures: list[str] = []
    seen = [0]

    @hypothesis_seed(seed)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(
        policy=policies,
        runtime_nodes=big,
        num_nodes=st.one_of(st.none(), big),
        num_proc=st.one_of(st.none(), big),
        parallelism=st.one_of(st.none(), big),
        replicas=st.one_of(st.none(), st.integers(1, 3), big),
        gpus=st.one_of(st.none(), quantities),
        gang=st.booleans(),
    )
    def check(
        *,
        policy: str | None,
        runtime_nodes: int,
        num_nodes: int | None,
        num_proc: int | None,
        parallelism: int | None,
        replicas: int | None,
        gpus: str | None,
        gang: bool,
    ) -> None:
        seen[0] += 1
        ml: dict[str, Any] = {"numNodes": runtime_nodes}
        if policy == "mpi":
            ml["mpi"] = {"mpiImplementation": "OpenMPI", "numProcPerNode": num_proc or 1}
        elif policy == "flux":
            ml["flux"] = {"numProcPerNode": num_proc or 1}
        elif policy is not None:
            ml[policy] = {}
        jobs = [
            MAKE.job("launcher", containers=[_node()], replicas=replicas),
            MAKE.job("node", ancestor="trainer", containers=[_node()], parallelism=parallelism),
        ]
        gang_policy = {"coscheduling": {"scheduleTimeoutSeconds": 60}} if gang else None
        runtime = _runtime(ml, jobs=jobs, pod_group_policy=gang_policy)
        trainer: dict[str, Any] = {}
        if num_nodes is not None:
            trainer["numNodes"] = num_nodes
        if num_proc is not None and policy not in ("mpi", "flux"):
            trainer["numProcPerNode"] = num_proc
        if gpus is not None:
            trainer["resourcesPerNode"] = {"requests": {"nvidia.com/gpu": gpus}}
        label = json.dumps([policy, runtime_nodes, num_nodes, num_proc, parallelism, replicas, gpus, gang])
        try:
            answers = _answers(runtime, **trainer)
        except BaseException as exc:
            failures.append(f"{label}: {type(exc).__name__}: {exc}"[:500])
            return
        for message in answers["validate"]:
            if not message.strip():
                failures.append(f"{label}: an empty validation message")
        outcome = answers["new_objects"]
        if "error" in outcome and not outcome["message"].strip():
            failures.append(f"{label}: {outcome['error']} with an empty message")

    started = time.perf_counter()
    check()
    return {"failures": failures, "examples": seen[0], "seconds": round(time.perf_counter() - started, 3)}


def _main(argv: list[str]) -> int:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    if argv[0] == "property":
        answers = _property(int(argv[1]), int(argv[2]))
    else:
        answers = {}
        for case in argv:
            try:
                answers[case] = CASES[case]()
            except MemoryError:
                answers[case] = {"escaped": "MemoryError"}
    print(json.dumps(answers))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
