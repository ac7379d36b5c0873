"""The plugin-author builders of `runtime.testing`: fresh dicts, suite defaults, only the fields asked for."""

from __future__ import annotations

from runtime.testing import Make


def test_builders_share_nothing_with_their_arguments_or_each_other() -> None:
    make = Make()
    env = [make.env("A", "1")]
    container = make.container("node", env=env)
    job = make.job("node", containers=[container])
    container["env"][0]["value"] = "changed"
    job["template"]["spec"]["template"]["spec"]["containers"][0]["name"] = "changed"
    assert env == [{"name": "A", "value": "1"}]
    assert container["name"] == "node"
    assert make.trainjob() is not make.trainjob()


def test_a_suite_fixes_the_trainjob_identity_once() -> None:
    upstream = Make(name="trainJob", uid="trainJob", runtime_kind=None, created=None)
    assert upstream.trainjob(trainer={"numNodes": 2}) == {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "trainJob", "namespace": "default", "uid": "trainJob"},
        "spec": {"runtimeRef": {"name": "test-runtime"}, "trainer": {"numNodes": 2}},
    }
    assert Make().trainjob("other", kind=None, created=None)["metadata"] == {
        "name": "other",
        "namespace": "default",
        "uid": "uid",
    }
    assert Make().trainjob()["spec"]["runtimeRef"] == {
        "name": "test-runtime",
        "kind": "TrainingRuntime",
        "apiGroup": "trainer.kubeflow.org",
    }
    assert upstream.owner()["name"] == "trainJob" and Make().owner()["uid"] == "uid"


def test_left_out_arguments_leave_their_fields_out() -> None:
    make = Make()
    assert make.container() == {"name": "node"}
    assert make.job("launcher") == {
        "name": "launcher",
        "replicas": 1,
        "template": {"spec": {"template": {"spec": {"containers": []}}}},
    }
    assert make.job("launcher", replicas=None, priorityClassName="high")["template"] == {
        "spec": {"template": {"spec": {"priorityClassName": "high", "containers": []}}}
    }
    assert make.runtime_spec(make.job("node", replicas=None)) == {
        "template": {"spec": {"replicatedJobs": [make.job("node", replicas=None)]}}
    }
