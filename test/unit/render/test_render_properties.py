"""Property: arbitrary TrainJobs and runtimes through validation and render raise nothing but RenderError.

Inputs are generated in two layers. Most are well-typed TrainJobs whose values are adversarial (reserved
env names, zero or negative counts, odd quantities, runtime patches naming jobs and containers that may not
exist, suspended or not, several initializers) against each default runtime, so they reach the plugins.
Some have a random subtree replaced by arbitrary JSON, so they exercise the schema checks. A result is
either objects (checked for basic apply-body shape) or a `RenderError` with at least one message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.render import DEFAULT_CRD_DIR, Document, RenderError, RenderOptions, SchemaChecker, render

ROOT = Path(__file__).resolve().parents[3]
SCHEMAS = SchemaChecker.from_crd_dir(DEFAULT_CRD_DIR)
RUNTIMES = [
    Document(source=str(path), obj=yaml.safe_load(path.read_text()))
    for path in sorted((ROOT / "config" / "runtimes").glob("*.yaml"))
    if path.name != "kustomization.yaml"
] + [
    Document(source=str(path), obj=yaml.safe_load(path.read_text()))
    for path in sorted((ROOT / "test" / "golden" / "runtimes").glob("*.yaml"))
]
RUNTIME_NAMES = [(d.obj["metadata"]["name"], d.kind) for d in RUNTIMES]
OPTIONS = RenderOptions(schemas=SCHEMAS, namespace="team-a")

text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
names = st.sampled_from(["node", "launcher", "dataset-initializer", "model-initializer", "bogus", ""])
env_names = st.sampled_from(
    [
        "LOG_LEVEL",
        "PET_NNODES",
        "PET_MASTER_ADDR",
        "OMPI_MCA_plm_rsh_args",
        "DMLC_NUM_WORKER",
        "JAX_NUM_PROCESSES",
        "FLUX_QUEUE_POLICY",
        "FLUX_VIEW_IMAGE",
    ]
)
quantities = st.one_of(
    st.sampled_from(["0", "1", "500m", "2Gi", "1.5", "1e3", "0.5Gi", "-1", "100Ti"]),
    st.integers(min_value=-2, max_value=64),
)
resource_names = st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "amd.com/gpu", "example.com/fpga"])
resources = st.fixed_dictionaries(
    {},
    optional={
        "requests": st.dictionaries(resource_names, quantities, max_size=3),
        "limits": st.dictionaries(resource_names, quantities, max_size=3),
    },
)
env = st.one_of(
    st.fixed_dictionaries({"name": env_names, "value": text}),
    st.fixed_dictionaries(
        {"name": env_names, "valueFrom": st.just({"fieldRef": {"fieldPath": "metadata.name"}})}
    ),
)
trainer = st.fixed_dictionaries(
    {},
    optional={
        "image": text,
        "command": st.one_of(st.just(["tune", "run"]), st.lists(text, max_size=3)),
        "args": st.lists(
            st.one_of(
                text,
                st.sampled_from(["model.lora_attn_modules=[q]", "model.quantize_base=True", "output_dir=x"]),
            ),
            max_size=3,
        ),
        "env": st.lists(env, max_size=3, unique_by=lambda e: e["name"]),
        "numNodes": st.integers(min_value=-1, max_value=6),
        "numProcPerNode": st.integers(min_value=-1, max_value=8),
        "resourcesPerNode": resources,
    },
)
source = st.fixed_dictionaries(
    {},
    optional={
        "storageUri": st.sampled_from(["hf://org/model", "s3://bucket/path", "", "not-a-uri", "s3://"]),
        "env": st.lists(env, max_size=2, unique_by=lambda e: e["name"]),
        "secretRef": st.fixed_dictionaries({"name": st.sampled_from(["hf", ""])}),
    },
)
container_patch = st.fixed_dictionaries(
    {"name": st.sampled_from(["node", "dataset-initializer", "preflight", "ghost"])},
    optional={"env": st.lists(env, max_size=1), "securityContext": st.just({"runAsUser": 1000})},
)
pod_spec_patch = st.fixed_dictionaries(
    {},
    optional={
        "nodeSelector": st.dictionaries(
            st.sampled_from(["zone", "gpu"]), st.sampled_from(["a", "b"]), max_size=2
        ),
        "serviceAccountName": st.sampled_from(["trainer", "default"]),
        "containers": st.lists(container_patch, max_size=2, unique_by=lambda c: c["name"]),
        "initContainers": st.lists(container_patch, max_size=1),
        "priorityClassName": st.sampled_from(["training-high", "system-node-critical", "missing"]),
    },
)
patch = st.fixed_dictionaries(
    {
        "manager": st.sampled_from(["kueue.x-k8s.io/manager", "example.com/tool", "no-domain", "a.io/"]),
        "trainingRuntimeSpec": st.fixed_dictionaries(
            {},
            optional={
                "template": st.fixed_dictionaries(
                    {},
                    optional={
                        "metadata": st.just(
                            {"labels": {"a": "b"}, "annotations": {"scheduling.volcano.sh/queue-name": ""}}
                        ),
                        "spec": st.fixed_dictionaries(
                            {
                                "replicatedJobs": st.lists(
                                    st.builds(
                                        lambda name, spec: {
                                            "name": name,
                                            "template": {"spec": {"template": {"spec": spec}}},
                                        },
                                        names,
                                        pod_spec_patch,
                                    ),
                                    max_size=2,
                                    unique_by=lambda j: j["name"],
                                )
                            }
                        ),
                    },
                )
            },
        ),
    },
)
spec_fields = st.fixed_dictionaries(
    {},
    optional={
        "trainer": trainer,
        "initializer": st.fixed_dictionaries({}, optional={"dataset": source, "model": source}),
        "runtimePatches": st.lists(patch, max_size=2, unique_by=lambda p: p["manager"]),
        "suspend": st.booleans(),
        "activeDeadlineSeconds": st.integers(min_value=1, max_value=10**6),
        "managedBy": st.sampled_from(
            ["trainer.kubeflow.org/trainjob-controller", "kueue.x-k8s.io/multikueue"]
        ),
    },
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | text,
    # YAML mappings may have non-string keys; the schema check must report, not crash on, them.
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.one_of(text, st.integers(), st.booleans()), children, max_size=3)
    ),
    max_leaves=8,
)


def _trainjob(runtime: tuple[str, str], spec: dict[str, Any], name: str = "demo") -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": runtime[0], "kind": runtime[1]}, **spec},
    }


def _corrupt(obj: Any, path: list[int], junk: Any) -> Any:
    """Replace the subtree that `path` picks (indices into sorted keys or list items) with `junk`."""
    if not path or not isinstance(obj, (dict, list)) or not obj:
        return junk
    if isinstance(obj, dict):
        key = sorted(obj, key=str)[path[0] % len(obj)]
        return {**obj, key: _corrupt(obj[key], path[1:], junk)}
    index = path[0] % len(obj)
    return [*obj[:index], _corrupt(obj[index], path[1:], junk), *obj[index + 1 :]]


def _assert_renders_or_refuses(trainjob: dict[str, Any], runtimes: list[Document] = RUNTIMES) -> None:
    try:
        result = render(Document(source="t.yaml", obj=trainjob), runtimes, options=OPTIONS)
    except RenderError as exc:
        assert exc.title
        return
    for obj in result.objects:
        assert obj["apiVersion"]
        assert obj["kind"]
        assert obj["metadata"]["namespace"] == "team-a"
        assert obj["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"


FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(runtime=st.sampled_from(RUNTIME_NAMES), spec=spec_fields)
def test_well_typed_trainjobs_render_or_are_refused(runtime: tuple[str, str], spec: dict[str, Any]) -> None:
    _assert_renders_or_refuses(_trainjob(runtime, spec))


@FAST
@given(
    runtime=st.sampled_from(RUNTIME_NAMES),
    spec=spec_fields,
    path=st.lists(st.integers(0, 50), min_size=1, max_size=6),
    junk=json_values,
)
def test_trainjobs_with_arbitrary_subtrees_render_or_are_refused(
    runtime: tuple[str, str], spec: dict[str, Any], path: list[int], junk: Any
) -> None:
    # The command only ever passes mappings (load_documents refuses other documents).
    _assert_renders_or_refuses(_corrupt(_trainjob(runtime, spec), path, junk))


@FAST
@given(
    runtime_index=st.integers(0, len(RUNTIMES) - 1),
    path=st.lists(st.integers(0, 50), min_size=1, max_size=10),
    junk=json_values,
    spec=spec_fields,
)
def test_arbitrary_runtimes_render_or_are_refused(
    runtime_index: int, path: list[int], junk: Any, spec: dict[str, Any]
) -> None:
    runtime = RUNTIMES[runtime_index]
    corrupted = _corrupt(runtime.obj, path, junk)
    if not isinstance(corrupted, dict):
        return
    documents = [
        *RUNTIMES[:runtime_index],
        Document(source="r.yaml", obj=corrupted),
        *RUNTIMES[runtime_index + 1 :],
    ]
    _assert_renders_or_refuses(_trainjob(RUNTIME_NAMES[runtime_index], spec), documents)


ml_sources = st.sampled_from(
    [
        {},
        {"torch": {}},
        {"torch": {"envInjection": {"targets": [{"jobName": "node", "containerNames": ["node", "ghost"]}]}}},
        {"mpi": {"runLauncherAsNode": True}},
        {"mpi": {"numProcPerNode": 3, "sshAuthMountPath": "/ssh"}},
        {"jax": {}},
        {"xgboost": {}},
        {"flux": {"numProcPerNode": 2}},
    ]
)
pod_group_policies = st.sampled_from(
    [{}, {"coscheduling": {}}, {"volcano": {}}, {"volcano": {"networkTopology": {"mode": "soft"}}}]
)
runtime_containers = st.lists(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["node", "dataset-initializer", "model-initializer", "sidecar"])},
        optional={
            "image": st.just("busybox"),
            "command": st.lists(text, max_size=2),
            "env": st.lists(env, max_size=2, unique_by=lambda e: e["name"]),
            "resources": resources,
        },
    ),
    max_size=2,
    unique_by=lambda c: c["name"],
)
runtime_jobs = st.lists(
    st.builds(
        lambda name, ancestor, parallelism, containers, init: {
            "name": name,
            "template": {
                **(
                    {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": ancestor}}}
                    if ancestor
                    else {}
                ),
                "spec": {
                    **({"parallelism": parallelism} if parallelism is not None else {}),
                    "template": {
                        "spec": {"containers": containers, **({"initContainers": init} if init else {})}
                    },
                },
            },
        },
        st.sampled_from(["node", "launcher", "dataset-initializer", "model-initializer"]),
        st.sampled_from([None, "trainer", "dataset-initializer", "model-initializer"]),
        st.one_of(st.none(), st.integers(0, 3)),
        runtime_containers,
        st.lists(
            st.fixed_dictionaries({"name": st.sampled_from(["flux-installer", "preflight"])}), max_size=1
        ),
    ),
    max_size=3,
    unique_by=lambda j: j["name"],
)


@FAST
@given(
    num_nodes=st.one_of(st.none(), st.integers(-1, 4)),
    source=ml_sources,
    pod_group=pod_group_policies,
    jobs=runtime_jobs,
    spec=spec_fields,
)
def test_well_typed_arbitrary_runtimes_render_or_are_refused(
    num_nodes: int | None,
    source: dict[str, Any],
    pod_group: dict[str, Any],
    jobs: list[Any],
    spec: dict[str, Any],
) -> None:
    ml_policy = {**source, **({"numNodes": num_nodes} if num_nodes is not None else {})}
    runtime = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "generated"},
        "spec": {
            "mlPolicy": ml_policy,
            "podGroupPolicy": pod_group,
            "template": {"spec": {"replicatedJobs": jobs}},
        },
    }
    trainjob = _trainjob(("generated", "ClusterTrainingRuntime"), spec)
    _assert_renders_or_refuses(trainjob, [Document(source="generated.yaml", obj=runtime)])
