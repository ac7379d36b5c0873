"""The JobSet plugin, phase by phase: validation, watches, endpoints, the rendered JobSet, and status.

Upstream tables mirrored: `jobset_test.go` (TestJobSet, TestValidate, TestBuild) and `builder_test.go`
(TestBuilderInitializer, TestBuilderTrainer, TestBuilderPodLabels, TestBuilderPodAnnotations,
TestBuilderSuspend); each case names its upstream counterpart.
"""

from __future__ import annotations

from typing import Any

import pytest

from runtime.framework import MemoryReader, PhaseError, Watch
from runtime.info import Info, build_info
from runtime.plugins.jobset import JobSet, domain_prefixed_path_errors, render_jobset
from runtime.testing import Make

PLUGIN = JobSet()


@pytest.fixture
def make() -> Make:
    """The builders with the core-runtime tables' defaults (`Make()`: the TrainJob `default/test-job` on the
    TrainingRuntime `test-runtime`), which these cases were written against, not the plugin tables' ones of
    this directory's conftest."""
    return Make()


def _info(
    make: Make, trainjob: dict[str, Any], jobs: list[dict[str, Any]] | None = None, **spec: Any
) -> Info:
    info = build_info(trainjob, make.runtime_spec(*(make.default_jobs() if jobs is None else jobs), **spec))
    PLUGIN.identify_pod_network(info, trainjob)
    return info


def _job(jobset: dict[str, Any], name: str) -> dict[str, Any]:
    return next(j for j in jobset["spec"]["replicatedJobs"] if j["name"] == name)


def _pod(jobset: dict[str, Any], name: str) -> dict[str, Any]:
    return _job(jobset, name)["template"]["spec"]["template"]  # type: ignore[no-any-return]


# PodNetwork ------------------------------------------------------------------------------------------------


def test_endpoints_use_the_trainer_count_and_the_trainjob_name_as_subdomain(make: Make) -> None:
    # upstream TestJobSet "trainer numNodes is respected rather than parallelism when replicatedJob name is
    # node"
    jobs = [make.job("node", ancestor="trainer", parallelism=1, containers=[make.container("node")])]
    trainjob = make.trainjob("tj", trainer={"numNodes": 2})
    info = build_info(trainjob, make.runtime_spec(*jobs, ml_policy={"numNodes": 3}))
    PLUGIN.identify_pod_network(info, trainjob)
    assert tuple(info.pod_sets[0].endpoints) == ("tj-node-0-0.tj", "tj-node-0-1.tj", "tj-node-0-2.tj")


def test_endpoints_use_the_network_subdomain_and_every_replica(make: Make) -> None:
    # upstream TestJobSet "subDomain in jobSetSpec is used to endpoint"
    jobs = [make.job("launcher", replicas=2, parallelism=2, containers=[make.container("node")])]
    info = _info(make, make.trainjob("tj"), jobs, network={"subdomain": "kubeflow.org"})
    assert tuple(info.pod_sets[0].endpoints) == (
        "tj-launcher-0-0.kubeflow.org",
        "tj-launcher-0-1.kubeflow.org",
        "tj-launcher-1-0.kubeflow.org",
        "tj-launcher-1-1.kubeflow.org",
    )


def test_parallelism_and_completions_follow_every_pod_set_count(make: Make) -> None:
    # upstream TestJobSet "parallelism and completions are synced for multiple podSets matched by
    # replicatedJob name": here a PodSet's count *is* its job's parallelism/completions: nothing to sync.
    jobs = [
        make.job("launcher", parallelism=5, containers=[make.container("node")]),
        make.job("node", ancestor="trainer", containers=[make.container("node")]),
    ]
    info = _info(make, make.trainjob(), jobs, ml_policy={"numNodes": 4})
    info.pod_sets[0].count = 1
    jobset = render_jobset(info, make.trainjob())
    assert [
        (j["template"]["spec"]["parallelism"], j["template"]["spec"]["completions"])
        for j in jobset["spec"]["replicatedJobs"]
    ] == [(1, 1), (4, 4)]


# WatchExtension --------------------------------------------------------------------------------------------


def test_jobsets_owned_by_trainjobs_are_watched() -> None:
    assert list(PLUGIN.watches()) == [Watch(api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet")]


# ComponentBuilder ------------------------------------------------------------------------------------------


def test_the_rendered_jobset_carries_metadata_owner_and_suspend(make: Make) -> None:
    trainjob = make.trainjob(suspend=True)
    info = _info(make, trainjob, labels={"team": "a"}, annotations={"note": "x"})
    jobset = render_jobset(info, trainjob)
    assert jobset["apiVersion"] == "jobset.x-k8s.io/v1alpha2"
    assert jobset["kind"] == "JobSet"
    assert jobset["metadata"] == {
        "name": "test-job",
        "namespace": "default",
        "labels": {"team": "a"},
        "annotations": {"note": "x"},
        "ownerReferences": [make.owner()],
    }
    assert jobset["spec"]["suspend"] is True


def test_network_policies_and_depends_on_pass_through_from_the_template(make: Make) -> None:
    # upstream core "succeeded to build JobSet with TorchTune values from the TrainJob" (dependsOn kept)
    jobs = make.default_jobs()
    depends_on = [
        {"name": "dataset-initializer", "status": "Complete"},
        {"name": "model-initializer", "status": "Complete"},
    ]
    jobs[2]["dependsOn"] = depends_on
    policies = {
        "network": {"enableDNSHostnames": True, "subdomain": "sub", "publishNotReadyAddresses": True},
        "successPolicy": {"operator": "All", "targetReplicatedJobs": ["node"]},
        "failurePolicy": {"maxRestarts": 3, "restartStrategy": "Recreate"},
        "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
        "ttlSecondsAfterFinished": 60,
    }
    jobset = render_jobset(_info(make, make.trainjob(), jobs, **policies), make.trainjob())
    for key, value in policies.items():
        assert jobset["spec"][key] == value
    assert _job(jobset, "node")["dependsOn"] == depends_on


@pytest.mark.parametrize(("suspend", "rendered"), [(True, True), (False, False), (None, "absent")])
def test_suspend_is_copied_from_the_trainjob(make: Make, suspend: bool | None, rendered: object) -> None:
    # upstream TestBuilderSuspend "suspend set to true" / "suspend set to false" / "suspend set to nil ..."
    trainjob = make.trainjob(suspend=suspend)
    info = _info(make, trainjob, suspend=True)  # a runtime template's own suspend never survives
    assert render_jobset(info, trainjob)["spec"].get("suspend", "absent") == rendered


def test_initializer_env_storage_uri_and_secret_ref(make: Make) -> None:
    # upstream TestBuilderInitializer "dataset initializer merges Dataset.Env with storageUri and upserts
    # pre-existing container env", "model initializer with storageUri and secretRef"
    jobs = [
        make.job(
            "initializer-job",
            ancestor="dataset-initializer",
            replicas=3,
            containers=[
                make.container(
                    "dataset-initializer",
                    env=[make.env("PRE_EXISTING", "from-runtime-template"), make.env("OTHER", "keep-me")],
                )
            ],
        ),
        make.job("model", ancestor="model-initializer", containers=[make.container("model-initializer")]),
    ]
    trainjob = make.trainjob(
        initializer={
            "dataset": {
                "storageUri": "hf://my-org/my-dataset",
                "env": [
                    make.env("CUSTOM_FROM_USER", "user-value"),
                    make.env("PRE_EXISTING", "overridden-by-trainjob"),
                ],
            },
            "model": {"storageUri": "hf://my-org/my-model", "secretRef": {"name": "model-secret"}},
        }
    )
    jobset = render_jobset(_info(make, trainjob, jobs), trainjob)
    assert _job(jobset, "initializer-job")["replicas"] == 1
    assert _pod(jobset, "initializer-job")["spec"]["containers"] == [
        {
            "name": "dataset-initializer",
            "env": [
                make.env("PRE_EXISTING", "overridden-by-trainjob"),
                make.env("OTHER", "keep-me"),
                make.env("STORAGE_URI", "hf://my-org/my-dataset"),
                make.env("CUSTOM_FROM_USER", "user-value"),
            ],
            "resources": {},  # Go writes the empty struct
        }
    ]
    assert _pod(jobset, "model")["spec"]["containers"] == [
        {
            "name": "model-initializer",
            "env": [make.env("STORAGE_URI", "hf://my-org/my-model")],
            "envFrom": [{"secretRef": {"name": "model-secret"}}],
            "resources": {},
        }
    ]


def test_initializer_jobs_without_an_initializer_spec_only_get_one_replica(make: Make) -> None:
    # upstream "dataset initializer ancestor with nil Initializer spec sets replicas to 1",
    # "no ancestor label skips modification"
    jobs = [
        make.job(
            "data",
            ancestor="dataset-initializer",
            replicas=3,
            containers=[make.container("dataset-initializer")],
        ),
        make.job("other", replicas=3, containers=[make.container("dataset-initializer")]),
    ]
    jobset = render_jobset(_info(make, make.trainjob(), jobs), make.trainjob())
    assert _job(jobset, "data")["replicas"] == 1
    assert _pod(jobset, "data")["spec"]["containers"] == [{"name": "dataset-initializer", "resources": {}}]
    assert _job(jobset, "other")["replicas"] == 3


def test_trainer_image_command_args_and_env(make: Make) -> None:
    # upstream TestBuilderTrainer "trainer ancestor with image command and args" and "trainer ancestor merges
    # Trainer.Env and upserts duplicate container env keys"
    node = make.container(
        "node",
        image="runtime:img",
        command=["runtime"],
        args=["runtime"],
        env=[make.env("TRAIN_JOB", "original")],
    )
    jobs = [make.job("node", ancestor="trainer", replicas=2, containers=[node, make.container("sidecar")])]
    trainjob = make.trainjob(
        trainer={
            "image": "trainjob:img",
            "command": ["trainjob"],
            "args": ["trainjob"],
            "env": [make.env("TRAIN_JOB", "override"), make.env("TRAIN_JOB_CUSTOM", "x")],
        }
    )
    jobset = render_jobset(_info(make, trainjob, jobs), trainjob)
    assert _job(jobset, "node")["replicas"] == 1
    assert _pod(jobset, "node")["spec"]["containers"] == [
        {
            "name": "node",
            "image": "trainjob:img",
            "command": ["trainjob"],
            "args": ["trainjob"],
            "env": [make.env("TRAIN_JOB", "override"), make.env("TRAIN_JOB_CUSTOM", "x")],
            "resources": {},
        },
        {"name": "sidecar", "resources": {}},
    ]


def test_without_spec_trainer_the_trainer_job_keeps_the_runtime_container(make: Make) -> None:
    # upstream "trainer ancestor with nil Trainer spec sets replicas to 1",
    # "non-trainer ancestor is not modified"
    jobs = [
        make.job("node", ancestor="trainer", replicas=4, containers=[make.container("node", image="rt")]),
        make.job("aux", replicas=4, containers=[make.container("node", image="rt")]),
    ]
    jobset = render_jobset(_info(make, make.trainjob(), jobs), make.trainjob())
    assert (_job(jobset, "node")["replicas"], _job(jobset, "aux")["replicas"]) == (1, 4)
    assert _pod(jobset, "node")["spec"]["containers"] == [{"name": "node", "image": "rt", "resources": {}}]


def test_mpi_launcher_as_node_gives_the_node_job_the_trainer_env(make: Make) -> None:
    # upstream "MPI runLauncherAsNode injects Trainer.Env into node container" and "... composes trainer
    # fields without duplication": image/command/args only on the trainer ancestor, env on both.
    jobs = [
        make.job("launcher", ancestor="trainer", containers=[make.container("node")]),
        make.job("node", containers=[make.container("node")]),
    ]
    trainjob = make.trainjob(trainer={"image": "img", "env": [make.env("A", "1")]})
    info = _info(make, trainjob, jobs, ml_policy={"mpi": {"runLauncherAsNode": True}})
    jobset = render_jobset(info, trainjob)
    assert _pod(jobset, "launcher")["spec"]["containers"] == [
        {"name": "node", "image": "img", "env": [make.env("A", "1")], "resources": {}}
    ]
    assert _pod(jobset, "node")["spec"]["containers"] == [
        {"name": "node", "env": [make.env("A", "1")], "resources": {}}
    ]


def test_scheduler_labels_and_annotations_reach_every_pod_template(make: Make) -> None:
    # upstream TestBuilderPodLabels / TestBuilderPodAnnotations "... applied to every replicated job pod
    # template when multiple replicated jobs exist"
    jobs = make.default_jobs()
    jobs[2]["template"]["spec"]["template"]["metadata"] = {"labels": {"existing": "yes"}}
    info = _info(make, make.trainjob(), jobs)
    info.scheduler.pod_labels["scheduling.x-k8s.io/pod-group"] = "test-job"
    info.scheduler.pod_annotations["scheduling.k8s.io/group-name"] = "test-job"
    jobset = render_jobset(info, make.trainjob())
    for name in ("dataset-initializer", "model-initializer"):
        assert _pod(jobset, name)["metadata"] == {
            "labels": {"scheduling.x-k8s.io/pod-group": "test-job"},
            "annotations": {"scheduling.k8s.io/group-name": "test-job"},
        }
    assert _pod(jobset, "node")["metadata"]["labels"] == {
        "existing": "yes",
        "scheduling.x-k8s.io/pod-group": "test-job",
    }


def test_init_containers_added_by_plugins_are_rendered(make: Make) -> None:
    # upstream TestBuild "auto-append initContainers from podSet when missing from apply configuration"
    info = _info(make, make.trainjob())
    node = info.find_pod_set("node")
    assert node is not None
    installer = node.add_init_container("flux-installer")
    installer.image = "flux:img"
    installer.command = ["/bin/bash", "/etc/flux-config/init.sh"]
    installer.upsert_volume_mounts({"name": "flux-install", "mountPath": "/mnt/flux"})
    jobset = render_jobset(info, make.trainjob())
    assert _pod(jobset, "node")["spec"]["initContainers"] == [
        {
            "name": "flux-installer",
            "image": "flux:img",
            "command": ["/bin/bash", "/etc/flux-config/init.sh"],
            "volumeMounts": [{"name": "flux-install", "mountPath": "/mnt/flux"}],
        }
    ]


def test_rendering_does_not_change_info(make: Make) -> None:
    trainjob = make.trainjob(
        trainer={"env": [make.env("A", "1")], "image": "x"}, initializer={"dataset": {"storageUri": "s3://b"}}
    )
    info = _info(make, trainjob)
    before = repr(info.template)
    render_jobset(info, trainjob)
    assert repr(info.template) == before


@pytest.mark.parametrize(
    ("trainjob_suspend", "jobset_suspend", "rendered"),
    [
        (None, None, True),  # no JobSet yet: always built
        (False, False, False),  # running: never re-applied (as upstream)
        (True, False, True),  # being suspended
        (False, True, True),  # being resumed
    ],
)
def test_a_running_jobset_is_never_re_applied(
    make: Make, trainjob_suspend: bool | None, jobset_suspend: bool | None, rendered: bool
) -> None:
    trainjob = make.trainjob(suspend=trainjob_suspend)
    existing = [] if trainjob_suspend is None else [make.jobset(suspend=jobset_suspend)]
    objects = PLUGIN.build(_info(make, trainjob), trainjob, MemoryReader(existing))
    assert bool(objects) is rendered


def test_a_jobset_re_applied_keeps_the_volume_claim_policies_it_stores(make: Make) -> None:
    # JobSet's webhook defaults retentionPolicy on create only and the field is immutable: a resume that
    # sent the runtime's policies as written would be refused.
    claim = {"metadata": {"name": "initializer"}, "spec": {"resources": {"requests": {"storage": "1Gi"}}}}
    trainjob = make.trainjob(suspend=False)
    info = _info(make, trainjob, volumeClaimPolicies=[{"templates": [claim]}])
    (rendered,) = render_jobset(info, trainjob)["spec"]["volumeClaimPolicies"]
    assert "retentionPolicy" not in rendered  # as the runtime has it: what a create sends
    stored = [{"templates": [claim], "retentionPolicy": {"whenDeleted": "Delete"}}]
    existing = make.jobset(suspend=True)
    existing["spec"]["volumeClaimPolicies"] = stored
    (jobset,) = PLUGIN.build(info, trainjob, MemoryReader([existing]))
    assert jobset["spec"]["volumeClaimPolicies"] == stored


# CustomValidation ------------------------------------------------------------------------------------------


def _errors(
    make: Make,
    trainjob: dict[str, Any],
    jobs: list[dict[str, Any]] | None = None,
    *,
    old: dict[str, Any] | None = None,
    reader: MemoryReader | None = None,
) -> list[str]:
    reader = MemoryReader() if reader is None else reader
    result = PLUGIN.validate(_info(make, trainjob, jobs), old, trainjob, reader)
    return [str(e) for e in result.errors]


def test_no_initializer_means_nothing_to_check(make: Make) -> None:
    # upstream TestValidate "no initializer job"
    assert (
        _errors(
            make, make.trainjob(), [make.job("node", ancestor="trainer", containers=[make.container("node")])]
        )
        == []
    )


_REF = '{"name":"test-runtime","kind":"TrainingRuntime","apiGroup":"trainer.kubeflow.org"}'


@pytest.mark.parametrize(
    ("initializer", "jobs", "message"),
    [
        # upstream "must have dataset initializer job when trainJob is configured with input datasetConfig"
        (
            {"dataset": {}},
            [],
            "must have dataset-initializer job when trainJob is configured with input datasetConfig",
        ),
        # upstream "must have model initializer job when trainJob is configured with input modelConfig"
        (
            {"model": {}},
            [],
            "must have model-initializer job when trainJob is configured with input modelConfig",
        ),
        # upstream "must have container with name - dataset initializer in the dataset initializer job"
        (
            {"dataset": {}},
            [{"name": "dataset-initializer", "container": "other"}],
            "must have container with name - dataset-initializer in the dataset-initializer job",
        ),
        # upstream "must have volumeMount with name - initializer in the model initializer container"
        (
            {"model": {}},
            [{"name": "model-initializer", "container": "model-initializer"}],
            "must have volumeMount with name - initializer in container model-initializer of the "
            "model-initializer job",
        ),
    ],
)
def test_initializers_need_their_job_container_and_volume_mount(
    make: Make, initializer: dict[str, Any], jobs: list[dict[str, str]], message: str
) -> None:
    built = [make.job(j["name"], containers=[make.container(j["container"])]) for j in jobs]
    assert _errors(make, make.trainjob(initializer=initializer), built) == [
        f"spec.runtimeRef: Invalid value: {_REF}: {message}"
    ]


def test_valid_initializers_pass(make: Make) -> None:
    # upstream "valid dataset and model initializers together pass"
    assert _errors(make, make.trainjob(initializer={"dataset": {}, "model": {}})) == []


def _runtime_patch(manager: str = "test.io/manager", *, job: str = "node", **pod_spec: Any) -> dict[str, Any]:
    return {
        "manager": manager,
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [{"name": job, "template": {"spec": {"template": {"spec": pod_spec}}}}]
                }
            }
        },
    }


def test_runtime_patches_must_name_existing_jobs_and_containers(make: Make) -> None:
    # upstream "runtimePatches contain invalid replicated job", "... invalid initContainer", "... invalid
    # container", "runtimePatches contain envs for reserved container". The Info is built with the patches
    # merged in (as the webhook builds it), so the patches' own jobs and containers are in `info.template`:
    # checking against the runtime as written makes these errors appear (upstream's webhook misses them).
    patches = [
        _runtime_patch(job="missing"),
        _runtime_patch(initContainers=[{"name": "nope"}]),
        _runtime_patch(containers=[{"name": "nope"}, {"name": "node", "env": [make.env("A", "1")]}]),
    ]
    trainjob = make.trainjob(runtime_patches=patches)
    result = PLUGIN.validate(_info(make, trainjob), None, trainjob, MemoryReader())
    # Upstream's details, each at the item it is about (upstream: all at `spec.runtimePatches`, echoing the
    # whole list, so 1,600 bad items printed 1,600 copies of it).
    job, pod = "trainingRuntimeSpec.template.spec.replicatedJobs[0]", "template.spec.template.spec"
    assert [str(e) for e in result.errors] == [
        f'spec.runtimePatches[0].{job}.name: Invalid value: "missing": '
        "must not have replicated job that doesn't exist in the runtime job template",
        f'spec.runtimePatches[1].{job}.{pod}.initContainers[0].name: Invalid value: "nope": '
        "must not have initContainer that doesn't exist in the runtime job node",
        f'spec.runtimePatches[2].{job}.{pod}.containers[0].name: Invalid value: "nope": '
        "must not have container that doesn't exist in the runtime job node",
        f'spec.runtimePatches[2].{job}.{pod}.containers[1].env: Invalid value: [{{"name":"A","value":"1"}}]: '
        "must not have envs for the dataset-initializer, model-initializer, node containers",
    ]


def test_a_runtime_patch_manager_error_names_the_item(make: Make) -> None:
    trainjob = make.trainjob(runtime_patches=[_runtime_patch(), _runtime_patch("manager-1")])
    result = PLUGIN.validate(_info(make, trainjob), None, trainjob, MemoryReader())
    assert [e.path for e in result.errors] == ["spec.runtimePatches[1].manager"]


@pytest.mark.parametrize(
    ("manager", "errors"),
    [
        ("acme.io/foo", []),
        ("acme.io/foo/bar", []),
        (
            "kueue.k8s.io/",
            [
                'spec.runtimePatches.manager: Invalid value: "kueue.k8s.io/": '
                'must be a domain-prefixed path (such as "acme.io/foo")'
            ],
        ),
        (
            "manager-1",
            [
                'spec.runtimePatches.manager: Invalid value: "manager-1": '
                'must be a domain-prefixed path (such as "acme.io/foo")'
            ],
        ),
        (
            "Acme.io/x",
            ['spec.runtimePatches.manager: Invalid value: "Acme.io": a lowercase RFC 1123 subdomain'],
        ),
        ("acme.io/a b", ['spec.runtimePatches.manager: Invalid value: "a b": Invalid path']),
    ],
)
def test_patch_managers_are_domain_prefixed_paths(manager: str, errors: list[str]) -> None:
    found = [str(e) for e in domain_prefixed_path_errors("spec.runtimePatches.manager", manager)]
    assert len(found) == len(errors)
    for got, want in zip(found, errors, strict=True):
        assert got.startswith(want)


_FORBIDDEN_UNSUSPENDED = (
    "spec.runtimePatches: Forbidden: RuntimePatches can only be modified when the TrainJob is suspended "
    "before or after the update"
)


@pytest.mark.parametrize(
    ("old_suspend", "new_suspend", "jobset_active", "errors"),
    [
        (
            None,
            None,
            None,
            [_FORBIDDEN_UNSUSPENDED],
        ),  # "forbid changes to runtimePatches when trainJob is not suspended"
        (True, True, None, []),  # "allow changes ... when trainJob is suspended and jobSet does not exist"
        (True, False, None, []),  # "allow atomic update: modify runtimePatches and unsuspend trainJob ..."
        (False, True, None, []),  # "allow atomic update: modify runtimePatches and suspend trainJob ..."
        (True, True, [0, 0], []),  # "allow changes ... suspended and jobSet exists but is inactive"
        (
            True,
            True,
            [1, 0],
            ["node"],
        ),  # "forbid changes ... suspended but jobSet has an active replicatedJob"
        (
            False,
            True,
            [1, 0],
            ["node"],
        ),  # "forbid atomic update: suspending trainJob ... active replicatedJob"
        (True, True, [2, 3], ["node", "launcher"]),  # "... has multiple active replicatedJobs"
    ],
)
def test_runtime_patches_change_only_while_suspended_and_inactive(
    make: Make,
    old_suspend: bool | None,
    new_suspend: bool | None,
    jobset_active: list[int] | None,
    errors: list[str],
) -> None:
    old = make.trainjob(suspend=old_suspend, runtime_patches=[_runtime_patch(nodeSelector={"a": "1"})])
    new = make.trainjob(suspend=new_suspend, runtime_patches=[_runtime_patch(nodeSelector={"a": "2"})])
    reader = MemoryReader()
    if jobset_active is not None:
        statuses = [
            {"name": name, "active": active, "ready": 0, "succeeded": 0, "failed": 0, "suspended": 0}
            for name, active in zip(("node", "launcher"), jobset_active, strict=True)
        ]
        reader.add(make.jobset(status={"replicatedJobsStatus": statuses}))
    found = _errors(make, new, old=old, reader=reader)
    if errors and errors[0].startswith("spec."):
        assert found == errors
    else:
        assert found == [
            "spec.runtimePatches: Forbidden: RuntimePatches cannot be modified when the JobSet's "
            f"ReplicatedJob {name} is still active"
            for name in errors
        ]


def test_unchanged_runtime_patches_and_creates_are_not_checked_for_immutability(make: Make) -> None:
    # upstream "allow updates to trainJob with no changes to runtimePatches",
    # "allow runtimePatches when creating a new trainJob"
    trainjob = make.trainjob(runtime_patches=[_runtime_patch(nodeSelector={"a": "1"})])
    assert (
        _errors(make, trainjob, old=make.trainjob(runtime_patches=[_runtime_patch(nodeSelector={"a": "1"})]))
        == []
    )
    assert _errors(make, trainjob) == []
    assert _errors(make, make.trainjob(runtime_patches=[]), old=make.trainjob()) == []


def test_a_jobset_read_error_is_an_internal_field_error(make: Make) -> None:
    # upstream "forbid changes to runtimePatches when trainJob is suspended but jobSet cannot be checked
    # due to a client error"
    reader = MemoryReader()
    reader.errors[("jobset.x-k8s.io/v1alpha2", "JobSet")] = ConnectionError("boom")
    old = make.trainjob(suspend=True, runtime_patches=[_runtime_patch(nodeSelector={"a": "1"})])
    new = make.trainjob(suspend=True, runtime_patches=[_runtime_patch(nodeSelector={"a": "2"})])
    assert _errors(make, new, old=old, reader=reader) == [
        "spec.runtimePatches: Internal error: reading JobSet.jobset.x-k8s.io/v1alpha2: boom"
    ]


# TrainJobStatus --------------------------------------------------------------------------------------------


def _condition(
    type_: str, status: str, reason: str, message: str, time: str = "2026-01-01T00:00:00Z"
) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": time}


def test_status_copies_jobset_conditions_and_replicated_jobs_status(make: Make) -> None:
    jobset = make.jobset(
        status={
            "conditions": [
                _condition("Completed", "True", "AllJobsCompleted", "jobset completed successfully"),
                _condition("Failed", "False", "x", "y"),
            ],
            "replicatedJobsStatus": [{"name": "node", "ready": 1, "succeeded": 2, "active": 3}],
        }
    )
    trainjob = make.trainjob(
        status={"conditions": [_condition("Suspended", "False", "Resumed", "TrainJob is resumed")]}
    )
    status = PLUGIN.status(trainjob, MemoryReader([jobset]), make.now)
    assert status == {
        "conditions": [
            _condition("Suspended", "False", "Resumed", "TrainJob is resumed"),
            _condition("Complete", "True", "AllJobsCompleted", "jobset completed successfully"),
        ],
        "jobsStatus": [
            {"name": "node", "ready": 1, "succeeded": 2, "failed": 0, "active": 3, "suspended": 0}
        ],
    }
    assert "status" in trainjob and len(trainjob["status"]["conditions"]) == 1  # the TrainJob is not touched


def test_status_of_a_failed_jobset(make: Make) -> None:
    failed = _condition("Failed", "True", "FailedJobs", "jobset failed due to one or more job failures")
    status = PLUGIN.status(
        make.trainjob(), MemoryReader([make.jobset(status={"conditions": [failed]})]), make.now
    )
    assert status == {"conditions": [{**failed, "type": "Failed"}]}


def test_a_missing_jobset_is_an_error_until_the_trainjob_is_finished(make: Make) -> None:
    with pytest.raises(PhaseError, match=r'jobsets\.jobset\.x-k8s\.io "test-job" not found'):
        PLUGIN.status(make.trainjob(), MemoryReader(), make.now)
    done = make.trainjob(status={"conditions": [_condition("Complete", "True", "AllJobsCompleted", "done")]})
    assert PLUGIN.status(done, MemoryReader(), make.now) is None
