"""`runtime.buildable`: the values the pipeline builds, one rule at admission and at build.

First the Kubernetes v1.36 rules it ports (env var names, container resource names, quantities), with the API
server's messages; then the rule through the pipeline: every hostile value a review found admitted and then
rendered (or failing every build naming no field) is refused by `validate` naming the field, and by
`new_objects` with the same field error, as a permanent error, whichever plugin the runtime uses.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from runtime.buildable import (
    MAX_INT32,
    UnbuildableError,
    checked_count,
    env_errors,
    env_var_name_problems,
    quantity_errors,
    resource_name_problems,
    runtime_errors,
    trainjob_errors,
)
from runtime.core import InvalidTrainJobError, RuntimeRegistry, UnbuildableRuntimeError
from runtime.framework import Framework, MemoryReader
from runtime.plugins import builtin_registry
from runtime.testing import Make

RELAXED = "a valid environment variable name must consist only of printable ASCII characters other than '='"
NAME_PART = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
NOT_FOR_CONTAINERS = "must be a standard resource for containers"
EXTENDED = "doesn't follow extended resource name standard"
REF = '{"name":"test-runtime","kind":"TrainingRuntime","apiGroup":"trainer.kubeflow.org"}'
NINES = "9" * 100

# The Kubernetes rules ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["A=B", "A\x00B", "A\u202eB", "caf\u00e9", "TAB\tNAME", "=", "A\x7f"])
def test_env_var_names_outside_printable_ascii_or_with_equals_are_refused_in_the_api_servers_words(
    name: str,
) -> None:
    assert env_var_name_problems(name) == [RELAXED]


@pytest.mark.parametrize("name", ["1ABC", "a.b-c", "MY VAR", "~!@#$%^&*()", "PATH"])
def test_env_var_names_kubernetes_1_36_accepts_are_accepted(name: str) -> None:
    # RelaxedEnvironmentVariableValidation is GA and locked on since v1.34 (the pinned v1.36 included):
    # `1ABC`, which the old C-identifier rule refused, is a valid name.
    assert env_var_name_problems(name) == []


def test_an_empty_env_var_name_is_a_required_value_at_its_index() -> None:
    errors = env_errors([{"name": "OK"}, {"name": ""}, {"name": "A=B"}], "spec.trainer.env")
    assert [str(e) for e in errors] == [
        "spec.trainer.env[1].name: Required value",
        f'spec.trainer.env[2].name: Invalid value: "A=B": {RELAXED}',
    ]


@pytest.mark.parametrize(
    ("name", "problems"),
    [
        ("", ["name part must be non-empty", NAME_PART, NOT_FOR_CONTAINERS]),
        ("a b", [NAME_PART, NOT_FOR_CONTAINERS]),
        ("foo", ["must be a standard resource type or fully qualified", NOT_FOR_CONTAINERS]),
        ("pods", [NOT_FOR_CONTAINERS]),
        ("/gpu", ["prefix part must be non-empty", EXTENDED]),
        (
            "a/b/c",
            [
                f"a valid label key {NAME_PART[10:]} with an optional DNS subdomain prefix and '/' "
                "(e.g. 'example.com/MyName')",
                EXTENDED,
            ],
        ),
        ("requests.example.com/gpu", ["doesn't follow extended resource name standard"]),
    ],
)
def test_resource_names_a_container_cannot_request_are_refused_in_the_api_servers_words(
    name: str, problems: list[str]
) -> None:
    assert resource_name_problems(name) == problems


@pytest.mark.parametrize(
    "name", ["cpu", "memory", "ephemeral-storage", "hugepages-2Mi", "nvidia.com/gpu", "kubernetes.io/x"]
)
def test_container_resource_names_are_accepted(name: str) -> None:
    assert resource_name_problems(name) == []


def test_quantities_must_parse_be_non_negative_and_whole_for_extended_resources() -> None:
    path = "r"
    assert [str(e) for e in quantity_errors("cpu", "-1", path)] == [
        'r: Invalid value: "-1": must be greater than or equal to 0'
    ]
    assert [str(e) for e in quantity_errors("cpu", "1e1000", path)] == [
        "r: Invalid value: \"1e1000\": quantities must be less than 1e100: '1e1000'"
    ]
    assert [str(e) for e in quantity_errors("nvidia.com/gpu", "500m", path)] == [
        'r: Invalid value: "500m": must be an integer'
    ]
    assert quantity_errors("cpu", "500m", path) == []
    assert quantity_errors("nvidia.com/gpu", NINES, path) == []  # a count: bounded where it is rendered


def test_a_count_beyond_int32_names_its_source_field() -> None:
    assert checked_count("p", "x", MAX_INT32, in_trainjob=True, what="N") == MAX_INT32
    with pytest.raises(UnbuildableError) as raised:
        checked_count("p", "x", MAX_INT32 + 1, in_trainjob=False, what="N")
    assert not raised.value.in_trainjob
    assert (
        str(raised.value.error)
        == f'p: Invalid value: "x": must make N at most {MAX_INT32}, not {MAX_INT32 + 1}'
    )


def test_every_place_a_trainjob_puts_values_into_pods_is_checked_with_its_path() -> None:
    container = {"name": "node", "env": [{"name": ""}]}
    patch_spec = {
        "replicatedJobs": [
            {
                "name": "node",
                "template": {
                    "spec": {"template": {"spec": {"initContainers": [container], "containers": [container]}}}
                },
            }
        ]
    }
    trainjob = {
        "spec": {
            "trainer": {"env": [{"name": ""}], "resourcesPerNode": {"limits": {"cpu": "-1"}}},
            "initializer": {"dataset": {"env": [{"name": ""}]}, "model": {"env": [{"name": ""}]}},
            "runtimePatches": [{"manager": "m", "trainingRuntimeSpec": {"template": {"spec": patch_spec}}}],
        }
    }
    pod = (
        "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0]"
        ".template.spec.template.spec"
    )
    assert [e.path for e in trainjob_errors(trainjob)] == [
        "spec.trainer.env[0].name",
        "spec.trainer.resourcesPerNode.limits[cpu]",
        "spec.initializer.dataset.env[0].name",
        "spec.initializer.model.env[0].name",
        f"{pod}.initContainers[0].env[0].name",
        f"{pod}.containers[0].env[0].name",
    ]


def test_odd_shapes_are_skipped_never_raised() -> None:
    assert (
        trainjob_errors({"spec": {"trainer": {"env": "x", "resourcesPerNode": []}, "runtimePatches": 3}})
        == []
    )
    assert runtime_errors({"template": {"spec": {"replicatedJobs": [None, {"template": []}]}}}) == []


# Through the pipeline: refused at admission, and by the build, naming the field ----------------------------

MAKE = Make()
TORCH = {"numNodes": 1, "torch": {}}
XGBOOST = {"numNodes": 1, "xgboost": {}}
MPI = {"numNodes": 1, "mpi": {"mpiImplementation": "OpenMPI", "numProcPerNode": 1}}
JAX = {"numNodes": 1, "jax": {}}
PLAIN: dict[str, Any] = {"numNodes": 1}


def _runtime(ml_policy: dict[str, Any], **node: Any) -> dict[str, Any]:
    container = MAKE.container("node", image="img", **node)
    return MAKE.runtime(
        MAKE.runtime_spec(MAKE.job("node", ancestor="trainer", containers=[container]), ml_policy=ml_policy)
    )


def _verdicts(runtime: dict[str, Any], **trainer: Any) -> tuple[list[str], Exception | None]:
    registry = RuntimeRegistry(Framework(builtin_registry()))
    reader = MemoryReader([runtime])
    trainjob = MAKE.trainjob(trainer=trainer, suspend=False)
    admitted = [str(e) for e in registry.validate(None, trainjob, reader).errors]
    try:
        registry.new_objects(trainjob, reader)
    except Exception as exc:  # the test asserts on what it is
        return admitted, exc
    return admitted, None


def _limit(value: str, what: str) -> str:
    return f'Invalid value: "{value}": must make {what} at most {MAX_INT32}, not {value}'


TRAINJOB_CASES = {
    # Before: admitted, then every build failed with "plugin Torch failed in EnforceMLPolicy: quantities
    # must be less than 1e100", naming no field, retried for ever...
    "torch: cpu 1e1000": (
        TORCH,
        {"resourcesPerNode": {"requests": {"cpu": "1e1000"}}},
        'spec.trainer.resourcesPerNode.requests[cpu]: Invalid value: "1e1000": quantities must be less '
        "than 1e100: '1e1000'",
    ),
    # ... while the XGBoost runtime rendered the same value.
    "xgboost: cpu 1e1000": (
        XGBOOST,
        {"resourcesPerNode": {"requests": {"cpu": "1e1000"}}},
        'spec.trainer.resourcesPerNode.requests[cpu]: Invalid value: "1e1000": quantities must be less '
        "than 1e100: '1e1000'",
    ),
    # Rendered without a word:
    "env A=B": (
        TORCH,
        {"env": [{"name": "A=B", "value": "1"}]},
        f'spec.trainer.env[0].name: Invalid value: "A=B": {RELAXED}',
    ),
    "env empty": (JAX, {"env": [{"name": "", "value": "1"}]}, "spec.trainer.env[0].name: Required value"),
    "env NUL": (
        PLAIN,
        {"env": [{"name": "A\x00B"}]},
        f'spec.trainer.env[0].name: Invalid value: "A\\x00B": {RELAXED}',
    ),
    "env RTL override": (
        PLAIN,
        {"env": [{"name": "A\u202eB"}]},
        f'spec.trainer.env[0].name: Invalid value: "A\\u202eB": {RELAXED}',
    ),
    "negative quantity": (
        XGBOOST,
        {"resourcesPerNode": {"limits": {"memory": "-1Gi"}}},
        'spec.trainer.resourcesPerNode.limits[memory]: Invalid value: "-1Gi": '
        "must be greater than or equal to 0",
    ),
    "resource name a b": (
        TORCH,
        {"resourcesPerNode": {"requests": {"a b": "1"}}},
        f'spec.trainer.resourcesPerNode.requests[a b]: Invalid value: "a b": {NAME_PART}',
    ),
    "resource name empty": (
        MPI,
        {"resourcesPerNode": {"requests": {"": "1"}}},
        'spec.trainer.resourcesPerNode.requests[]: Invalid value: "": name part must be non-empty',
    ),
    "torch: PET_NPROC_PER_NODE from 100 nines of cpu": (
        TORCH,
        {"resourcesPerNode": {"requests": {"cpu": NINES}}},
        f"spec.trainer.resourcesPerNode.requests[cpu]: {_limit(NINES, 'PET_NPROC_PER_NODE')}",
    ),
    "mpi: slots from 100 nines of GPUs": (
        MPI,
        {"resourcesPerNode": {"limits": {"nvidia.com/gpu": NINES}}},
        f"spec.trainer.resourcesPerNode.limits[nvidia.com/gpu]: {_limit(NINES, 'the MPI slots per host')}",
    ),
    "xgboost: DMLC_NUM_WORKER from 100 nines of GPUs": (
        XGBOOST,
        {"resourcesPerNode": {"limits": {"nvidia.com/gpu": NINES}}},
        f"spec.trainer.resourcesPerNode.limits[nvidia.com/gpu]: {_limit(NINES, 'DMLC_NUM_WORKER')}",
    ),
}


@pytest.mark.parametrize("case", TRAINJOB_CASES)
def test_a_trainjob_value_that_cannot_be_built_is_refused_at_admission_and_by_the_build(case: str) -> None:
    ml_policy, trainer, error = TRAINJOB_CASES[case]
    admitted, build_error = _verdicts(_runtime(ml_policy), **trainer)
    assert error in admitted
    assert isinstance(build_error, InvalidTrainJobError)  # permanent: the controller fails the TrainJob
    assert error in [str(e) for e in build_error.errors]


def test_a_mpi_slot_count_from_a_runtime_container_names_the_runtime_field() -> None:
    runtime = _runtime(MPI, resources={"limits": {"nvidia.com/gpu": NINES}})
    admitted, build_error = _verdicts(runtime)
    field = (
        "spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].resources."
        f"limits[nvidia.com/gpu]: {_limit(NINES, 'the MPI slots per host')}"
    )
    assert admitted == [f"spec.runtimeRef: Invalid value: {REF}: the runtime cannot run: {field}"]
    assert isinstance(build_error, UnbuildableRuntimeError)
    assert (
        str(build_error) == f'trainingruntimes.trainer.kubeflow.org "test-runtime" cannot be built: {field}'
    )


@pytest.mark.parametrize(
    ("node", "field"),
    [
        ({"env": [{"name": "A=B"}]}, f'env[0].name: Invalid value: "A=B": {RELAXED}'),
        (
            {"resources": {"requests": {"cpu": "-500m"}}},
            'resources.requests[cpu]: Invalid value: "-500m": must be greater than or equal to 0',
        ),
        (
            {"resources": {"limits": {"example.com/gpu": "1500m"}}},
            'resources.limits[example.com/gpu]: Invalid value: "1500m": must be an integer',
        ),
    ],
)
def test_a_runtime_value_that_cannot_be_built_is_refused_at_admission_and_by_the_build(
    node: dict[str, Any], field: str
) -> None:
    admitted, build_error = _verdicts(_runtime(TORCH, **node))
    pod = "spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0]"
    assert admitted == [f"spec.runtimeRef: Invalid value: {REF}: the runtime cannot run: {pod}.{field}"]
    assert isinstance(build_error, UnbuildableRuntimeError)
    assert (
        str(build_error)
        == f'trainingruntimes.trainer.kubeflow.org "test-runtime" cannot be built: {pod}.{field}'
    )


def test_buildable_values_still_build() -> None:
    runtime = _runtime(
        TORCH, env=[{"name": "1ABC", "value": "x"}], resources={"limits": {"nvidia.com/gpu": "8"}}
    )
    trainer = {"env": [{"name": "my.var-1", "value": "y"}], "resourcesPerNode": {"requests": {"cpu": "500m"}}}
    admitted, build_error = _verdicts(runtime, **trainer)
    assert (admitted, build_error) == ([], None)


def test_counts_beyond_int32_that_skipped_the_schema_are_refused_naming_the_field() -> None:
    # The CRDs say int32; an object written around them (etcd, an older CRD) rendered `slots=10^18` and
    # PET_NPROC_PER_NODE=10^18.
    big = 10**18
    admitted, build_error = _verdicts(_runtime(TORCH), numProcPerNode=big)
    error = f"spec.trainer.numProcPerNode: Invalid value: {big}: must be less than or equal to {MAX_INT32}"
    assert admitted == [error]
    assert isinstance(build_error, InvalidTrainJobError)
    assert [str(e) for e in build_error.errors] == [error]

    mpi = {"numNodes": 1, "mpi": {"mpiImplementation": "OpenMPI", "numProcPerNode": big}}
    admitted, build_error = _verdicts(_runtime(mpi))
    field = f"spec.mlPolicy.mpi.numProcPerNode: {_limit(str(big), 'the MPI slots per host')}".replace(
        f'"{big}"', str(big), 1
    )
    assert admitted == [f"spec.runtimeRef: Invalid value: {REF}: the runtime cannot run: {field}"]
    assert isinstance(build_error, UnbuildableRuntimeError)
    assert (
        str(build_error) == f'trainingruntimes.trainer.kubeflow.org "test-runtime" cannot be built: {field}'
    )


HOSTFILE = "must make the MPI hostfile at most 1048568 bytes (what a ConfigMap holds), not more"


def test_a_node_count_whose_mpi_hostfile_a_configmap_cannot_hold_is_refused_naming_the_count() -> None:
    # 100,000 nodes (the most an Indexed Job runs) make a 3 MB hostfile, which the API server refuses to
    # store: the TrainJob was admitted, then every build failed to apply it.
    admitted, build_error = _verdicts(_runtime(MPI), numNodes=100_000)
    error = f"spec.trainer.numNodes: Invalid value: 100000: {HOSTFILE}"
    assert admitted == [error]
    assert isinstance(build_error, InvalidTrainJobError)
    assert [str(e) for e in build_error.errors] == [error]

    admitted, build_error = _verdicts(_runtime({**MPI, "numNodes": 100_000}))
    field = f"spec.mlPolicy.numNodes: Invalid value: 100000: {HOSTFILE}"
    assert admitted == [f"spec.runtimeRef: Invalid value: {REF}: the runtime cannot run: {field}"]
    assert isinstance(build_error, UnbuildableRuntimeError)

    assert _verdicts(_runtime(MPI), numNodes=20_000) == ([], None)  # 0.6 MB: built


def test_a_jobset_etcd_cannot_store_is_refused_blaming_where_the_fix_is() -> None:
    # A 1 MB env var in the runtime's trainer container and 16 runtime patches of 80 KB each: both objects
    # are stored, and the JobSet they make (2.3 MB) never is.
    runtime = _runtime(TORCH)
    pod_template = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    pod_template["spec"]["containers"][0].setdefault("env", []).append(
        {"name": "BIG", "value": "x" * 1_000_000}
    )
    patches = [
        {
            "manager": f"m{i}.io/x",
            "trainingRuntimeSpec": {
                "template": {
                    "spec": {
                        "replicatedJobs": [
                            {
                                "name": "node",
                                "template": {
                                    "spec": {
                                        "template": {"metadata": {"annotations": {f"b/y{i}": "y" * 80_000}}}
                                    }
                                },
                            }
                        ]
                    }
                }
            },
        }
        for i in range(16)
    ]
    registry = RuntimeRegistry(Framework(builtin_registry()))
    reader = MemoryReader([runtime])
    trainjob = MAKE.trainjob(runtime_patches=patches, suspend=False)
    admitted = [str(e) for e in registry.validate(None, trainjob, reader).errors]
    assert len(admitted) == 1
    assert admitted[0].startswith(
        "spec.runtimePatches: Too long: must make a JobSet of at most 1572864 bytes"
    )
    with pytest.raises(InvalidTrainJobError, match=r"spec\.runtimePatches: Too long: must make a JobSet"):
        registry.new_objects(trainjob, reader)

    # Without the patches it fits; with 600 KB of trainer env instead, the blame is the trainer's.
    assert registry.validate(None, MAKE.trainjob(suspend=False), reader).errors == ()
    env = [{"name": f"E{i}", "value": "v" * 100_000} for i in range(6)]
    trainjob = MAKE.trainjob(trainer={"env": env}, suspend=False)
    admitted = [str(e) for e in registry.validate(None, trainjob, reader).errors]
    assert len(admitted) == 1
    assert admitted[0].startswith("spec.trainer: Too long: must make a JobSet of at most 1572864 bytes")


def _annotated_patch(manager: str, annotations: dict[str, str], *, place: str = "pod") -> dict[str, Any]:
    """A runtime patch setting `annotations` on the `node` job's pod template (`place="pod"`), its Job
    template (`"job"`) or the JobSet (`"jobset"`)."""
    metadata = {"annotations": annotations}
    if place == "jobset":
        return {"manager": manager, "trainingRuntimeSpec": {"template": {"metadata": metadata}}}
    template: dict[str, Any] = {"spec": {"template": {"metadata": metadata}}} if place == "pod" else {}
    if place == "job":
        template["metadata"] = metadata
    job = {"name": "node", "template": template}
    return {"manager": manager, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [job]}}}}


_ANNOTATIONS_TOO_LONG = "Too long: may not be more than 262144 bytes: "


@pytest.mark.parametrize(
    ("place", "where", "owner"),
    [
        ("pod", "template.spec.replicatedJobs[0].template.spec.template.metadata.annotations", "the pods"),
        ("job", "template.spec.replicatedJobs[0].template.metadata.annotations", "the Jobs"),
        ("jobset", "template.metadata.annotations", "the JobSet"),
    ],
)
def test_annotations_the_api_server_would_refuse_on_a_rendered_object_are_refused_where_the_fix_is(
    place: str, where: str, owner: str
) -> None:
    # Two patches of 150 KB each, both stored (a TrainJob's spec has no annotation limit): their 300 KB
    # on one object are more than the API server takes, at the JobSet's creation or its Jobs' or pods'.
    registry = RuntimeRegistry(Framework(builtin_registry()))
    reader = MemoryReader([_runtime(TORCH)])
    patches = [_annotated_patch(f"m{i}.io/x", {f"a.io/k{i}": "v" * 150_000}, place=place) for i in range(2)]
    trainjob = MAKE.trainjob(runtime_patches=patches, suspend=False)
    admitted = [str(e) for e in registry.validate(None, trainjob, reader).errors]
    prefix = "spec.runtimePatches[0].trainingRuntimeSpec." + where
    assert len(admitted) == 1
    assert admitted[0].startswith(f"{prefix}: {_ANNOTATIONS_TOO_LONG}{owner}")
    assert "would carry 300014 bytes of annotations" in admitted[0]
    with pytest.raises(InvalidTrainJobError, match=re.escape(prefix)):
        registry.new_objects(trainjob, reader)
    # One patch of the two fits.
    assert registry.validate(None, MAKE.trainjob(runtime_patches=patches[:1], suspend=False), reader).ok


def test_annotations_the_runtime_alone_makes_too_many_of_are_blamed_on_the_runtime() -> None:
    runtime = _runtime(TORCH)
    pod_template = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    pod_template["metadata"] = {"annotations": {"a.io/x": "x" * 300_000}}
    registry = RuntimeRegistry(Framework(builtin_registry()))
    reader = MemoryReader([runtime])
    trainjob = MAKE.trainjob(runtime_patches=[_annotated_patch("m.io/x", {"a.io/y": "small"})], suspend=False)
    admitted = [str(e) for e in registry.validate(None, trainjob, reader).errors]
    assert len(admitted) == 1
    assert "the runtime cannot run" in admitted[0]
    assert (
        "spec.template.spec.replicatedJobs[0].template.spec.template.metadata.annotations: "
        f"{_ANNOTATIONS_TOO_LONG}the pods of replicated job node would carry 300017 bytes"
    ) in admitted[0]
    with pytest.raises(UnbuildableRuntimeError, match="may not be more than 262144 bytes"):
        registry.new_objects(trainjob, reader)
