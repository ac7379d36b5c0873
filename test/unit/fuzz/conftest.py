"""Hostile-input fuzzing: seeded Hypothesis strategies for TrainJobs, runtimes and raw HTTP requests.

How many examples each property runs: ``TRAINER_FUZZ_EXAMPLES`` (default :data:`CI_EXAMPLES`, a quick
run fit for every ``make unit``); ``make fuzz`` sets 10,000. The seed is ``TRAINER_FUZZ_SEED`` (default
:data:`DEFAULT_SEED`), so a run is repeatable: a failure prints the seed and the shrunk example, and
``TRAINER_FUZZ_SEED=<seed> make fuzz`` replays it. No example database is written.

The objects are built by mutating valid seeds (the shipped runtimes of ``config/runtimes/``, the example
TrainJob and a few built ones), zero to three mutations each (mostly one): a value replaced by any JSON
value (wrong types included), by a boundary value of its type or by a long string, a key removed, an
unknown key added, a list item repeated. So many examples are nearly valid and reach deep into validation
and the build, and the others are wrong in every way the CRD schema refuses.
"""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from runtime.api import constants
from runtime.testing import Make

ROOT = Path(__file__).resolve().parents[3]
CI_EXAMPLES = 60
DEFAULT_SEED = 20260102
EXAMPLES = int(os.environ.get("TRAINER_FUZZ_EXAMPLES", str(CI_EXAMPLES)))
SEED = int(os.environ.get("TRAINER_FUZZ_SEED", str(DEFAULT_SEED)))

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture,
    ],
)
"""The settings of every property here (combine with ``@seed(SEED)``)."""

FIELD_PATH = re.compile(
    r"(?:^|[\s\[(,])(?:request\.(?:object|oldObject)|apiVersion|kind|metadata|spec|status)(?:\.|\[|:)"
)
"""A field path in a message: ``spec.trainer.numNodes: ...``, ``metadata.name: ...``,
``request.object.kind: ...``."""
FIELD_ERROR = re.compile(
    r"(?:^|[\s\[(,])[\w.\[\]/<>\"-]+: (?:Invalid value|Required value|Forbidden|Unsupported value|"
    r"Too long|Too many|Duplicate value|Not found|Internal error)"
)
"""A Kubernetes field error at any path (``unknownField: Forbidden: field not declared in schema``)."""


def names_a_field(message: str) -> bool:
    return bool(FIELD_PATH.search(message) or FIELD_ERROR.search(message))


def served(value: Any) -> Any:
    """A value as clients read it back from the API server, after Go's JSON round trip: a whole float below
    1e21 and within int64 is an integer (`2.0` is `2`), an integer beyond int64 a float."""
    if isinstance(value, dict):
        return {key: served(item) for key, item in value.items()}
    if isinstance(value, list):
        return [served(item) for item in value]
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21 and -(2**63) <= value < 2**63:
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
        return float(value)
    return value


# --- seeds ----------------------------------------------------------------------------------------------


def _load(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if isinstance(d, dict)]


RUNTIMES: list[dict[str, Any]] = [
    d
    for path in sorted((ROOT / "config" / "runtimes").glob("*.yaml"))
    for d in _load(path)
    if d.get("kind") == constants.CLUSTER_TRAINING_RUNTIME_KIND
]
"""The shipped ClusterTrainingRuntimes (torch, deepspeed/MPI, jax, mlx, xgboost, torchtune)."""

_MAKE = Make(
    name="fuzz", namespace="team", uid="fuzz-uid", runtime_kind=constants.CLUSTER_TRAINING_RUNTIME_KIND
)
_EXAMPLE = _load(ROOT / "examples" / "trainjob-torch.yaml")[0]


def _trainjob_seeds() -> list[dict[str, Any]]:
    patch = {
        "manager": "acme.io/tuner",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {
                                    "template": {
                                        "spec": {
                                            "containers": [
                                                {"name": "node", "env": [{"name": "X", "value": "1"}]}
                                            ],
                                            "nodeSelector": {"pool": "gpu"},
                                        }
                                    }
                                }
                            },
                        }
                    ]
                }
            }
        },
    }
    return [
        {**copy.deepcopy(_EXAMPLE), "metadata": {"name": "fuzz", "namespace": "team", "uid": "fuzz-uid"}},
        dict(_MAKE.trainjob(runtime="torch-distributed")),
        dict(
            _MAKE.trainjob(
                runtime="deepspeed-distributed",
                trainer={"numNodes": 3, "numProcPerNode": 2, "env": [{"name": "A", "value": "b"}]},
            )
        ),
        dict(_MAKE.trainjob(runtime="torch-distributed", runtime_patches=[patch], suspend=True)),
        dict(
            _MAKE.trainjob(
                runtime="torchtune-llama3.2-1b",
                initializer={"dataset": {"storageUri": "hf://a/b"}, "model": {"storageUri": "hf://c/d"}},
                trainer={
                    "args": ["epochs=1", "batch_size=2"],
                    "resourcesPerNode": {"limits": {"nvidia.com/gpu": 2}},
                },
            )
        ),
    ]


TRAINJOBS = _trainjob_seeds()


# --- values ---------------------------------------------------------------------------------------------

_KEYS = st.sampled_from(
    [
        "name", "kind", "spec", "template", "replicatedJobs", "containers", "env", "value", "numNodes",
        "numProcPerNode", "command", "args", "image", "resources", "limits", "requests", "nvidia.com/gpu",
        "cpu", "metadata", "labels", "trainer.kubeflow.org/trainjob-ancestor-step", "mlPolicy", "torch",
        "mpi", "runtimePatches", "manager", "time", "unknownField", "",
    ]
)  # fmt: skip
_STRINGS = st.one_of(
    st.sampled_from(
        [
            "", "node", "trainer", "launcher", "dataset-initializer", "model-initializer",
            "torch-distributed",
            "TrainingRuntime", "ClusterTrainingRuntime", "trainer.kubeflow.org", "auto", "cpu", "gpu",
            "500m", "4Gi", "1e3", "1e309", "-1", "0", "NaN", "acme.io/x", "kueue.x-k8s.io/", "PET_NNODES",
            "2026-01-02T03:04:05Z", "é", "\x00", "a b", "../../etc", "${HOME}",
        ]
    ),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=12),  # no lone surrogates: not UTF-8
)  # fmt: skip
_INTEGERS = st.one_of(
    st.sampled_from(
        [0, 1, -1, 2, 1000, 2**31 - 1, 2**31, -(2**31) - 1, 2**53 + 1, 2**63 - 1, 2**63, -(2**64)]
    ),
    st.integers(-5, 5),
)
_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    _INTEGERS,
    st.floats(allow_nan=False, allow_infinity=False),
    _STRINGS,
)
JSON_VALUES = st.recursive(
    _LEAVES,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_KEYS, children, max_size=3),
    max_leaves=12,
)
"""Any JSON value, keys from the Trainer's field names."""

_LONG = st.sampled_from([1_000, 70_000]).map(lambda n: "x" * n)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for key, child in value.items():
            out += _paths(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            out += _paths(child, (*path, index))
    return out


def _at(root: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        root = root[key]
    return root


@st.composite
def _mutate_once(draw: st.DrawFn, obj: dict[str, Any]) -> dict[str, Any]:
    paths = [p for p in _paths(obj) if p]
    path = draw(st.sampled_from(paths))
    parent, key = _at(obj, path[:-1]), path[-1]
    action = draw(st.sampled_from(["replace", "replace", "boundary", "long", "delete", "unknown", "repeat"]))
    if action == "replace":
        parent[key] = draw(JSON_VALUES)
    elif action == "boundary":
        parent[key] = draw(st.one_of(_INTEGERS, st.sampled_from([None, "", [], {}, True, 0.5])))
    elif action == "long":
        parent[key] = draw(_LONG)
    elif action == "delete":
        if isinstance(parent, dict):
            del parent[key]
        else:
            parent.pop(key)
    elif action == "unknown":
        target = parent[key] if isinstance(parent[key], dict) else parent
        if isinstance(target, dict):
            target[draw(_KEYS)] = draw(JSON_VALUES)
    elif isinstance(parent, list):  # repeat: a duplicate list item (list-map keys collide)
        parent.append(copy.deepcopy(parent[key]))
    return obj


@st.composite
def mutated(draw: st.DrawFn, seeds: list[dict[str, Any]], max_mutations: int = 3) -> dict[str, Any]:
    """A deep copy of one of ``seeds`` with 0 to ``max_mutations`` mutations (see the module doc)."""
    obj = copy.deepcopy(draw(st.sampled_from(seeds)))
    counts = [n for n in (0, 0, 1, 1, 1, 2, 3) if n <= max_mutations]  # mostly few: deep into the pipeline
    for _ in range(draw(st.sampled_from(counts))):
        obj = draw(_mutate_once(obj))
    return obj


@st.composite
def worlds(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """(a TrainJob, a runtime), each mutated; four times in five the TrainJob names the runtime, which is a
    ClusterTrainingRuntime or, a third of the time, the same as a TrainingRuntime in the TrainJob's
    namespace."""
    runtime = draw(mutated(RUNTIMES))
    trainjob = draw(mutated(TRAINJOBS))
    name = runtime.get("metadata", {}).get("name") if isinstance(runtime.get("metadata"), dict) else None
    spec = trainjob.get("spec")
    if draw(st.integers(0, 4)) > 0 and isinstance(spec, dict) and isinstance(spec.get("runtimeRef"), dict):
        spec["runtimeRef"]["name"] = name  # mostly, it names the runtime given
        if draw(st.integers(0, 2)) == 0:
            runtime["kind"] = constants.TRAINING_RUNTIME_KIND
            if isinstance(runtime.get("metadata"), dict):
                runtime["metadata"]["namespace"] = "team"
            spec["runtimeRef"]["kind"] = constants.TRAINING_RUNTIME_KIND
    return trainjob, runtime
