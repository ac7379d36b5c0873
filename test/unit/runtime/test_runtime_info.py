"""`build_info` and the Info model: runtime patches, resourcesPerNode, PodSets as views of one template."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import runtime.info as info_module
from runtime.info import RuntimePatchError, build_info, upsert_env, upsert_ports, upsert_volume_mounts
from runtime.plugins.trainernode import convert_env_var
from runtime.resources import format_resource_list

if TYPE_CHECKING:
    from runtime.testing import Make


def _patch(manager: str, *jobs: dict[str, Any], metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    template: dict[str, Any] = {}
    if jobs:
        template["spec"] = {"replicatedJobs": list(jobs)}
    if metadata is not None:
        template["metadata"] = metadata
    return {"manager": manager, "trainingRuntimeSpec": {"template": template}}


def _pod_patch(job: str, **pod_spec: Any) -> dict[str, Any]:
    return {"name": job, "template": {"spec": {"template": {"spec": pod_spec}}}}


def test_labels_and_annotations_come_from_the_template_then_each_patch(make: Make) -> None:
    spec = make.runtime_spec(
        *make.default_jobs(), labels={"conflict": "runtime", "keep": "1"}, annotations={"a": "1"}
    )
    trainjob = make.trainjob(
        runtime_patches=[
            _patch("m1", metadata={"labels": {"conflict": "first"}, "annotations": {"b": "2"}}),
            _patch("m2", metadata={"labels": {"conflict": "second"}}),
        ]
    )
    info = build_info(trainjob, spec)
    assert info.labels == {"conflict": "second", "keep": "1"}
    assert info.annotations == {"a": "1", "b": "2"}


def test_pod_sets_mirror_the_replicated_jobs_in_order(make: Make) -> None:
    info = build_info(make.trainjob(), make.runtime_spec(*make.default_jobs()))
    assert [(ps.name, ps.ancestor, ps.count) for ps in info.pod_sets] == [
        ("dataset-initializer", "dataset-initializer", 1),
        ("model-initializer", "model-initializer", 1),
        ("node", "trainer", 1),
    ]


def test_trainer_count_is_ml_policy_num_nodes_only_with_an_ml_policy(make: Make) -> None:
    jobs = [make.job("node", ancestor="trainer", parallelism=3, containers=[make.container("node")])]
    with_policy = build_info(make.trainjob(), make.runtime_spec(*jobs, ml_policy={"numNodes": 100}))
    assert with_policy.pod_sets[0].count == 100
    defaulted = build_info(make.trainjob(), make.runtime_spec(*jobs, ml_policy={"torch": {}}))
    assert defaulted.pod_sets[0].count == 1
    without = build_info(make.trainjob(), make.runtime_spec(*jobs))
    assert without.pod_sets[0].count == 3


def test_counts_are_at_least_one_and_written_to_parallelism_and_completions(make: Make) -> None:
    jobs = [make.job("aux", parallelism=0, containers=[make.container("c")])]
    info = build_info(make.trainjob(), make.runtime_spec(*jobs))
    assert info.pod_sets[0].count == 1
    assert info.template["replicatedJobs"][0]["template"]["spec"] == {
        "parallelism": 1,
        "completions": 1,
        "template": {"spec": {"containers": [{"name": "c"}]}},
    }
    info.pod_sets[0].count = 7
    assert info.template["replicatedJobs"][0]["template"]["spec"]["completions"] == 7


def test_resources_per_node_merge_into_the_trainer_node_container(make: Make) -> None:
    # upstream "merged resourcesPerNode keeps runtime resources when trainjob sets gpu only"
    node = make.container("node", requests={"cpu": "1"}, limits={"cpu": "2"})
    jobs = [make.job("node", ancestor="trainer", containers=[make.container("sidecar"), node])]
    trainjob = make.trainjob(
        trainer={"resourcesPerNode": {"limits": {"nvidia.com/gpu": "4"}, "requests": {}}}
    )
    info = build_info(trainjob, make.runtime_spec(*jobs, ml_policy={"numNodes": 1}))
    assert info.find_container("node", "node") is not None
    assert info.find_container("node", "node").resources == {  # type: ignore[union-attr]
        "requests": {"cpu": "1"},
        "limits": {"cpu": "2", "nvidia.com/gpu": "4"},
    }
    assert info.find_container("node", "sidecar").resources is None  # type: ignore[union-attr]
    assert format_resource_list(info.pod_sets[0].single_pod_requests) == {"cpu": "1"}
    info.pod_sets[0].count = 100
    assert format_resource_list(info.pod_sets[0].total_requests) == {"cpu": "100"}


def test_resources_per_node_keeps_only_limits_and_requests_as_upstream(make: Make) -> None:
    # Upstream merges only the two resource lists of the runtime's node container with resourcesPerNode
    # and writes only them back: the container's resource claims (and any in resourcesPerNode) are dropped.
    node = make.container("node", requests={"cpu": "1"})
    node["resources"]["claims"] = [{"name": "gpu"}]
    jobs = [make.job("node", ancestor="trainer", containers=[node])]
    trainjob = make.trainjob(
        trainer={"resourcesPerNode": {"limits": {"nvidia.com/gpu": "1"}, "claims": [{"name": "other"}]}}
    )
    info = build_info(trainjob, make.runtime_spec(*jobs, ml_policy={"jax": {}}))
    assert info.find_container("node", "node").resources == {  # type: ignore[union-attr]
        "limits": {"nvidia.com/gpu": "1"},
        "requests": {"cpu": "1"},
    }


def test_resources_per_node_without_lists_leaves_empty_resources(make: Make) -> None:
    node = make.container("node")
    node["resources"] = {"claims": [{"name": "gpu"}]}
    jobs = [make.job("node", ancestor="trainer", containers=[node])]
    trainjob = make.trainjob(trainer={"resourcesPerNode": {"claims": [{"name": "gpu"}]}})
    info = build_info(trainjob, make.runtime_spec(*jobs, ml_policy={"jax": {}}))
    assert info.find_container("node", "node").resources == {}  # type: ignore[union-attr]


def test_resources_per_node_is_ignored_without_an_ml_policy(make: Make) -> None:
    # As upstream: no mlPolicy, no merge of resourcesPerNode.
    jobs = [make.job("node", ancestor="trainer", containers=[make.container("node", requests={"cpu": "1"})])]
    trainjob = make.trainjob(trainer={"resourcesPerNode": {"requests": {"cpu": "8"}}})
    info = build_info(trainjob, make.runtime_spec(*jobs))
    assert info.find_container("node", "node").resources == {"requests": {"cpu": "1"}}  # type: ignore[union-attr]


def test_resources_per_node_reach_the_mpi_node_job_when_the_launcher_runs_as_node(make: Make) -> None:
    # upstream builder test "MPI runLauncherAsNode applies resources to node job"
    jobs = [
        make.job("launcher", ancestor="trainer", containers=[make.container("node")]),
        make.job("node", containers=[make.container("node")]),
    ]
    trainjob = make.trainjob(trainer={"resourcesPerNode": {"requests": {"cpu": "4"}}})
    info = build_info(trainjob, make.runtime_spec(*jobs, ml_policy={"mpi": {"runLauncherAsNode": True}}))
    for job in ("launcher", "node"):
        assert info.find_container(job, "node").resources == {"requests": {"cpu": "4"}}  # type: ignore[union-attr]


def test_runtime_patches_apply_in_order_and_keep_the_runtimes_job_order(make: Make) -> None:
    # upstream "... RuntimePatches targeting the same job with different values" and "... duplicate patches"
    trainjob = make.trainjob(
        runtime_patches=[
            _patch("m1", _pod_patch("node", nodeSelector={"type": "p5.48xlarge"})),
            _patch("m2", _pod_patch("node", nodeSelector={"type": "p5en.48xlarge"}, serviceAccountName="sa")),
            _patch(
                "m3", _pod_patch("dataset-initializer", tolerations=[{"key": "gpu", "operator": "Exists"}])
            ),
        ]
    )
    info = build_info(trainjob, make.runtime_spec(*make.default_jobs()))
    assert [j["name"] for j in info.template["replicatedJobs"]] == [
        "dataset-initializer",
        "model-initializer",
        "node",
    ]
    node = info.find_pod_set("node")
    assert node is not None
    assert node.pod_spec["nodeSelector"] == {"type": "p5en.48xlarge"}
    assert node.pod_spec["serviceAccountName"] == "sa"
    dataset = info.find_pod_set("dataset-initializer")
    assert dataset is not None
    assert dataset.pod_spec["tolerations"] == [{"key": "gpu", "operator": "Exists"}]


def test_patch_env_keeps_smp_order(make: Make) -> None:
    # Strategic merge of env lists: [INIT_ENV, DATASET_PATH] patched with [INIT_ENV', NEW_VALUE]
    # gives [INIT_ENV', NEW_VALUE, DATASET_PATH].
    init = make.container("init", env=[make.env("INIT_ENV", "original"), make.env("DATASET_PATH", "runtime")])
    jobs = [
        make.job("dataset-initializer", ancestor="dataset-initializer", containers=[], init_containers=[init])
    ]
    patch = _patch(
        "m",
        _pod_patch(
            "dataset-initializer",
            initContainers=[
                {"name": "init", "env": [make.env("INIT_ENV", "override"), make.env("NEW_VALUE", "x")]}
            ],
        ),
    )
    info = build_info(make.trainjob(runtime_patches=[patch]), make.runtime_spec(*jobs))
    container = info.find_container("dataset-initializer", "init")
    assert container is not None
    assert list(container.env) == [
        make.env("INIT_ENV", "override"),
        make.env("NEW_VALUE", "x"),
        make.env("DATASET_PATH", "runtime"),
    ]


def test_empty_lists_and_nulls_in_a_patch_change_nothing(make: Make) -> None:
    # Go encodes the typed patch with omitempty: an empty tolerations list never reaches the merge.
    jobs = [
        make.job("node", containers=[make.container("node")], pod_spec={"tolerations": [{"key": "keep"}]})
    ]
    patch = _patch("m", _pod_patch("node", tolerations=[], nodeSelector=None, containers=[]))
    info = build_info(make.trainjob(runtime_patches=[patch]), make.runtime_spec(*jobs))
    assert info.pod_sets[0].pod_spec["tolerations"] == [{"key": "keep"}]


def test_a_patch_that_cannot_merge_is_a_runtime_patch_error(make: Make) -> None:
    patch = _patch("acme.io/m", _pod_patch("node", containers=[{"env": [{"name": "X"}]}]))
    with pytest.raises(RuntimePatchError, match=r"applying runtime patch of manager 'acme\.io/m'") as raised:
        build_info(make.trainjob(runtime_patches=[patch]), make.runtime_spec(*make.default_jobs()))
    assert raised.value.manager == "acme.io/m"


def test_build_info_never_mutates_its_inputs(make: Make) -> None:
    spec = make.runtime_spec(*make.default_jobs(), ml_policy={"numNodes": 2, "torch": {}})
    trainjob = make.trainjob(
        trainer={"resourcesPerNode": {"requests": {"cpu": "2"}}, "command": ["a"]},
        runtime_patches=[_patch("m", _pod_patch("node", nodeSelector={"a": "b"}))],
    )
    before = orjson.dumps([spec, trainjob])
    info = build_info(trainjob, spec)
    info.pod_sets[2].containers[0].upsert_env(make.env("X", "1"))
    info.trainer.command.append("b")  # type: ignore[union-attr]
    info.ml_policy["numNodes"] = 5  # type: ignore[index]
    assert orjson.dumps([spec, trainjob]) == before


def test_pod_sets_and_containers_are_views_of_the_one_template(make: Make) -> None:
    info = build_info(make.trainjob(), make.runtime_spec(*make.default_jobs()))
    node = info.find_pod_set_by_ancestor("trainer")
    assert node is not None
    node.containers[0].upsert_env(make.env("A", "1"))
    node.containers[0].upsert_ports({"containerPort": 29500})
    node.upsert_volumes({"name": "extra", "emptyDir": {}})
    node.add_init_container("installer").upsert_volume_mounts({"name": "extra", "mountPath": "/x"})
    pod_spec = info.template["replicatedJobs"][2]["template"]["spec"]["template"]["spec"]
    assert pod_spec["containers"][0]["env"] == [make.env("A", "1")]
    assert pod_spec["containers"][0]["ports"] == [{"containerPort": 29500}]
    assert [v["name"] for v in pod_spec["volumes"]] == ["initializer", "extra"]
    assert pod_spec["initContainers"] == [
        {"name": "installer", "volumeMounts": [{"name": "extra", "mountPath": "/x"}]}
    ]


def test_upserting_nothing_writes_no_empty_list(make: Make) -> None:
    # A TrainJob without env vars must not give the runtime's containers `env: []` (a field of their own).
    spec = make.runtime_spec(make.job("node", containers=[make.container("node")]))
    info = build_info(make.trainjob(), spec)
    (pod_set,) = info.pod_sets
    container = pod_set.containers[0]
    container.upsert_env()
    container.upsert_ports()
    container.upsert_volume_mounts(*[])
    pod_set.upsert_volumes()
    assert container.obj == {"name": "node"}
    assert "volumes" not in pod_set.pod_spec
    container.obj["env"] = []
    container.upsert_env()
    assert container.obj == {"name": "node", "env": []}  # an empty list the template has stays


def test_container_lookups_search_the_right_lists(make: Make) -> None:
    jobs = [
        make.job(
            "node",
            ancestor="trainer",
            containers=[make.container("node")],
            init_containers=[make.container("preflight"), make.container("node")],
        )
    ]
    info = build_info(make.trainjob(), make.runtime_spec(*jobs))
    assert info.find_container_by_ancestor("trainer", "preflight") is None  # regular containers only
    assert info.find_container("node", "preflight") == info.pod_sets[0].init_containers[0]
    assert info.find_container("node", "node") == info.pod_sets[0].containers[0]  # containers first
    assert info.find_container("missing", "node") is None


def test_trainer_resources_come_from_the_first_trainer_node_container_with_resources(make: Make) -> None:
    jobs = [
        make.job("aux", containers=[make.container("node", requests={"cpu": "9"})]),
        make.job("trainer", ancestor="trainer", containers=[make.container("node")]),
        make.job("node", containers=[make.container("node", limits={"nvidia.com/gpu": 1})]),
    ]
    info = build_info(make.trainjob(), make.runtime_spec(*jobs))
    assert info.trainer_resources() == {"limits": {"nvidia.com/gpu": 1}, "requests": {}}
    assert build_info(make.trainjob(), make.runtime_spec(*jobs[:2])).trainer_resources() is None


def test_trainer_overrides_come_from_spec_trainer(make: Make) -> None:
    trainjob = make.trainjob(trainer={"image": "img", "command": ["tune", "run"], "args": ["a=1"]})
    info = build_info(trainjob, make.runtime_spec(*make.default_jobs()))
    assert (info.trainer.image, info.trainer.command, info.trainer.args) == ("img", ["tune", "run"], ["a=1"])
    empty = build_info(make.trainjob(), make.runtime_spec(*make.default_jobs())).trainer
    assert (empty.image, empty.command, empty.args) == (None, None, None)


def test_a_runtime_without_a_template_gives_an_empty_info(make: Make) -> None:
    info = build_info(make.trainjob(), {})
    assert (info.pod_sets, info.template, info.ml_policy, info.labels) == ([], {}, None, {})


def test_two_unnamed_ports_count_as_the_same_port() -> None:
    # upstream apply_test "insert new port": an unnamed 9090 replaces an unnamed 8080.
    ports = [{"containerPort": 8080}]
    upsert_ports(ports, {"containerPort": 9090})
    assert ports == [{"containerPort": 9090}]
    named = [{"containerPort": 8080, "name": "http"}]
    upsert_ports(named, {"containerPort": 9090, "name": "metrics"})
    assert named == [{"containerPort": 8080, "name": "http"}, {"containerPort": 9090, "name": "metrics"}]


def test_trainjob_env_vars_are_converted_like_apply_env_var() -> None:
    assert convert_env_var({"name": "A", "value": "1"}) == {"name": "A", "value": "1"}
    assert convert_env_var(
        {
            "name": "B",
            "value": "ignored",
            "valueFrom": {"secretKeyRef": {"name": "s", "key": "k", "extra": 1}},
        }
    ) == {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
    assert convert_env_var(
        {"name": "C", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "x"}}}
    ) == {
        "name": "C",
        "valueFrom": {"fieldRef": {"fieldPath": "x"}},
    }


def test_trainjob_env_vars_get_every_field_apply_env_var_sets() -> None:
    # Go's apply.EnvVar calls WithValue(e.Value) without valueFrom, WithContainerName, WithResource and
    # WithDivisor for a resourceFieldRef, WithKey and WithName for key selectors: always, zero or not.
    assert convert_env_var({"name": "A"}) == {"name": "A", "value": ""}
    assert convert_env_var({"name": "R", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}) == {
        "name": "R",
        "valueFrom": {"resourceFieldRef": {"containerName": "", "resource": "limits.cpu", "divisor": "0"}},
    }
    assert (
        convert_env_var(
            {
                "name": "D",
                "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1024Ki"}},
            }
        )["valueFrom"]["resourceFieldRef"]["divisor"]
        == "1Mi"
    )
    assert convert_env_var(
        {"name": "K", "valueFrom": {"configMapKeyRef": {"key": "k", "optional": False}}}
    ) == {
        "name": "K",
        "valueFrom": {"configMapKeyRef": {"name": "", "key": "k", "optional": False}},
    }


# The indexed upserts ------------------------------------------------------------------------------------

_UPSERT_KEYS = st.sampled_from(["A", "B", "C", None, 1, 1.0, True, ("missing",)])


def _upsert_items(field: str) -> st.SearchStrategy[list[dict[str, Any]]]:
    item = st.builds(
        lambda key, value: {"value": value} if key == ("missing",) else {field: key, "value": value},
        _UPSERT_KEYS,
        st.integers(0, 9),
    )
    return st.lists(item, max_size=8)


@settings(max_examples=400)
@given(st.sampled_from(["name", "mountPath"]), st.data())
def test_indexed_upserts_equal_a_search_per_item(field: str, data: st.DataObject) -> None:
    items, news = data.draw(_upsert_items(field)), data.draw(_upsert_items(field))
    searched = [dict(item) for item in items]
    for new in news:  # what every upsert did before the items were indexed
        info_module._upsert(searched, new, lambda a, b: a.get(field) == b.get(field))
    indexed = [dict(item) for item in items]
    upsert = {"name": upsert_env, "mountPath": upsert_volume_mounts}[field]
    upsert(indexed, *news)
    assert repr(indexed) == repr(searched)
