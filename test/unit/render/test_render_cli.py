"""`trainer-render`: inputs, options, and every way input can be invalid (exit 2, never a traceback)."""

from __future__ import annotations

import base64
import io
import re
import textwrap
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from cryptography.hazmat.primitives import serialization

from runtime.framework import FieldError
from runtime.framework.validation import MAX_LINES, PER_KIND
from runtime.render import (
    DEFAULT_CRD_DIR,
    PLACEHOLDER_UID,
    Document,
    RenderError,
    RenderOptions,
    SchemaChecker,
    _parse_feature_gates,
    dump_yaml,
    render,
    run,
)

ROOT = Path(__file__).resolve().parents[3]
RUNTIMES = ROOT / "config" / "runtimes"
SCHEMAS = SchemaChecker.from_crd_dir(DEFAULT_CRD_DIR)


def _write(tmp_path: Path, text: str, name: str = "trainjob.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


TRAINJOB = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: demo
spec:
  runtimeRef:
    name: torch-distributed
"""


def _run(*argv: str | Path, schemas: SchemaChecker | None = SCHEMAS) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run([str(a) for a in argv], stdout=out, stderr=err, schemas=schemas)
    return code, out.getvalue(), err.getvalue()


def _objects(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


def test_renders_the_snapshot_then_the_jobset_with_placeholders(tmp_path: Path) -> None:
    code, out, err = _run(_write(tmp_path, TRAINJOB), "--runtime", RUNTIMES)
    assert (code, err) == (0, "")
    snapshot, jobset = _objects(out)
    assert (snapshot["kind"], snapshot["metadata"]["name"]) == ("ConfigMap", "demo-runtime-snapshot")
    assert (jobset["kind"], jobset["metadata"]["namespace"]) == ("JobSet", "default")
    assert jobset["metadata"]["ownerReferences"][0]["uid"] == PLACEHOLDER_UID
    assert (
        jobset["spec"]["suspend"] is False
    )  # the CRD default of spec.suspend, applied as the API server does
    assert out.startswith("apiVersion: v1\n")
    assert "\n---\napiVersion: jobset.x-k8s.io/v1alpha2\n" in out


def test_namespace_and_uid_options_fill_what_the_file_leaves_out(tmp_path: Path) -> None:
    code, out, _ = _run(_write(tmp_path, TRAINJOB), "-r", RUNTIMES, "-n", "team-b", "--uid", "1234")
    jobset = _objects(out)[1]
    assert code == 0
    assert jobset["metadata"]["namespace"] == "team-b"
    assert jobset["metadata"]["ownerReferences"][0]["uid"] == "1234"


def test_a_namespace_option_that_is_not_a_namespace_name_is_an_error(tmp_path: Path) -> None:
    # Was rendered (exit 0) into every object's metadata.namespace, which no API server accepts.
    code, out, err = _run(_write(tmp_path, TRAINJOB), "-r", RUNTIMES, "-n", "Bad NS!")
    assert (code, out) == (2, "")
    assert err == (
        'trainer-render: --namespace "Bad NS!" is not a namespace name\n'
        "  a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
        "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
        "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')\n"
    )
    code, _, err = _run(_write(tmp_path, TRAINJOB), "-r", RUNTIMES, "-n", "a.b")
    assert (code, err) == (
        2,
        'trainer-render: --namespace "a.b" is not a namespace name\n  must not contain dots\n',
    )


def test_values_the_api_server_would_refuse_in_the_pods_exit_2_naming_the_fields(tmp_path: Path) -> None:
    # Was rendered without a word (exit 0); the API server refuses such pods when the Job creates them.
    text = TRAINJOB + (
        "  trainer:\n"
        '    env: [{name: A=B, value: a}, {name: "", value: b}]\n'
        "    resourcesPerNode: {requests: {cpu: '-1', 'a b': '1'}}\n"
    )
    code, out, err = _run(_write(tmp_path, text), "-r", RUNTIMES)
    assert (code, out) == (2, "")
    lines = err.splitlines()
    assert lines[0] == "trainer-render: TrainJob default/demo is invalid"
    assert lines[1:4] == [
        '  spec.trainer.env[0].name: Invalid value: "A=B": a valid environment variable name must consist '
        "only of printable ASCII characters other than '='",
        "  spec.trainer.env[1].name: Required value",
        '  spec.trainer.resourcesPerNode.requests[cpu]: Invalid value: "-1": '
        "must be greater than or equal to 0",
    ]
    assert [line.split(": ")[0] for line in lines[4:]] == [
        "  spec.trainer.resourcesPerNode.requests[a b]"
    ] * 2


def test_a_namespace_option_contradicting_the_file_is_an_error(tmp_path: Path) -> None:
    text = TRAINJOB.replace("  name: demo\n", "  name: demo\n  namespace: team-a\n")
    path = _write(tmp_path, text)
    code, out, err = _run(path, "-r", RUNTIMES, "-n", "team-b")
    assert (code, out) == (2, "")
    assert (
        err == f'trainer-render: {path}: metadata.namespace: "team-a" does not match --namespace "team-b"\n'
    )


def test_runtimes_may_share_the_trainjob_file(tmp_path: Path) -> None:
    runtime = (RUNTIMES / "jax-distributed.yaml").read_text()
    text = TRAINJOB.replace("torch-distributed", "jax-distributed") + "---\n" + runtime
    code, out, err = _run(_write(tmp_path, text))
    assert (code, err) == (0, "")
    assert "image: nvcr.io/nvidia/jax:25.10-py3" in out


def test_a_training_runtime_without_namespace_is_in_the_trainjobs_namespace(tmp_path: Path) -> None:
    runtime = _write(
        tmp_path,
        """\
        apiVersion: trainer.kubeflow.org/v1alpha1
        kind: TrainingRuntime
        metadata:
          name: local
        spec:
          template:
            spec:
              replicatedJobs:
                - name: node
                  template:
                    spec:
                      template:
                        spec:
                          containers:
                            - name: node
                              image: busybox
        """,
        "runtime.yaml",
    )
    text = TRAINJOB.replace("name: torch-distributed", "name: local\n    kind: TrainingRuntime")
    code, out, err = _run(_write(tmp_path, text), "-r", runtime, "-n", "team-c")
    assert (code, err) == (0, "")
    assert "kind: TrainingRuntime" in out


def test_cluster_scoped_objects_written_with_a_namespace_are_found_as_the_api_server_stores_them(
    tmp_path: Path,
) -> None:
    # kube-apiserver clears metadata.namespace of a cluster-scoped object on create, so `kubectl apply`
    # of a ClusterTrainingRuntime or PriorityClass written with a namespace stores it without one.
    runtime = yaml.safe_load((ROOT / "test" / "golden" / "runtimes" / "mpi-volcano.yaml").read_text())
    runtime["metadata"]["namespace"] = "kubeflow-system"
    priority_class = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "training-high", "namespace": "kubeflow-system"},
        "value": 1000,
    }
    runtime_file = tmp_path / "runtime.yaml"
    runtime_file.write_text(yaml.safe_dump(runtime))
    existing = tmp_path / "existing.yaml"
    existing.write_text(yaml.safe_dump(priority_class))
    trainjob = _write(tmp_path, TRAINJOB.replace("torch-distributed", "mpi-volcano"))
    code, out, err = _run(trainjob, "-r", runtime_file, "--existing", existing, "-n", "team-a")
    assert (code, err) == (0, "")
    snapshot = yaml.safe_load(_objects(out)[0]["data"]["runtime"])
    assert "namespace" not in snapshot["metadata"]


_JAX = (RUNTIMES / "jax-distributed.yaml").read_text()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("apiVersion: v1\nkind: [unclosed\n", ": invalid YAML: line 3, column 1: "),
        ("- just\n- a list\n", ": <root>: must be of type object (a YAML mapping), not array"),
        (TRAINJOB + "---\nplain text\n", "#2: <root>: must be of type object (a YAML mapping), not string"),
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
            ': kind: "ConfigMap" is not TrainJob, TrainingRuntime or ClusterTrainingRuntime',
        ),
        (
            TRAINJOB + "---\napiVersion: v1\nkind: ConfigMap\n",
            '#2: kind: "ConfigMap" is not TrainJob, TrainingRuntime or ClusterTrainingRuntime',
        ),
        (
            TRAINJOB + "---\napiVersion: v1\nkind: 5\n",
            "#2: kind: 5 is not TrainJob, TrainingRuntime or ClusterTrainingRuntime",
        ),
        (
            TRAINJOB + "---\nmetadata: {name: x}\n",
            "#2: kind: missing (expected TrainJob, TrainingRuntime or ClusterTrainingRuntime)",
        ),
        (
            TRAINJOB.replace("v1alpha1", "v1"),
            ': apiVersion: "trainer.kubeflow.org/v1" is not trainer.kubeflow.org/v1alpha1',
        ),
        (
            TRAINJOB + "---\n" + _JAX.replace("apiVersion: trainer.kubeflow.org/v1alpha1\n", ""),
            "#2: apiVersion: missing (expected trainer.kubeflow.org/v1alpha1)",
        ),
        (
            TRAINJOB + "---\n" + _JAX + "---\n" + TRAINJOB,
            "#3: kind: a second TrainJob (the first is {path}#1): a file holds exactly one",
        ),
        (_JAX, ": kind: no document is a TrainJob (expected exactly one)"),
        ("# nothing\n---\n", ": no documents (expected exactly one TrainJob)"),
    ],
    ids=[
        "syntax error",
        "not a mapping",
        "a second document not a mapping",
        "another kind",
        "another kind next to the trainjob",
        "a kind not a string",
        "no kind",
        "another version of the trainjob",
        "a runtime without an apiVersion",
        "two trainjobs",
        "no trainjob",
        "no document",
    ],
)
def test_unreadable_trainjob_files_exit_2_naming_the_document_and_the_field(
    tmp_path: Path, text: str, message: str
) -> None:
    path = _write(tmp_path, text)
    code, out, err = _run(path, "-r", RUNTIMES)
    assert (code, out) == (2, "")
    assert err.startswith(f"trainer-render: {path}{message.format(path=path)}")
    assert "Traceback" not in err


def test_a_missing_file_exits_2(tmp_path: Path) -> None:
    code, _, err = _run(tmp_path / "nope.yaml", "-r", RUNTIMES)
    assert code == 2
    assert err == f"trainer-render: {tmp_path / 'nope.yaml'}: no such file or directory\n"


def test_an_unknown_runtime_is_the_webhooks_not_found_error(tmp_path: Path) -> None:
    code, _, err = _run(_write(tmp_path, TRAINJOB.replace("torch-distributed", "missing")), "-r", RUNTIMES)
    assert code == 2
    assert err == (
        "trainer-render: TrainJob default/demo is invalid\n"
        '  spec.RuntimeRef: Invalid value: {"name":"missing","apiGroup":"trainer.kubeflow.org",'
        '"kind":"ClusterTrainingRuntime"}: clustertrainingruntimes.trainer.kubeflow.org "missing" not found: '
        "specified clusterTrainingRuntime must be created before the TrainJob is created\n"
    )


def _trainjob_json(tmp_path: Path, **spec_and_status: Any) -> Path:
    trainjob = yaml.safe_load(TRAINJOB)
    status = spec_and_status.pop("status", None)
    trainjob["spec"].update(spec_and_status)
    if status is not None:
        trainjob["status"] = status
    path = tmp_path / "trainjob.json"
    path.write_bytes(orjson.dumps(trainjob))
    return path


def test_ten_thousand_bad_conditions_are_reported_in_a_handful_of_lines(tmp_path: Path) -> None:
    # Each condition lacks four required fields: 40,000 errors, printed one a line (2 MB) before.
    conditions = [{"type": f"T{i}"} for i in range(10_000)]
    code, _, err = _run(_trainjob_json(tmp_path, status={"conditions": conditions}), "-r", RUNTIMES)
    assert code == 2
    lines = err.splitlines()
    assert lines[1:3] == [
        "  status.conditions[0].lastTransitionTime: Required value",
        "  status.conditions[0].message: Required value",
    ]
    assert lines[-2:] == [
        f"  and {40_000 - PER_KIND} more Required value errors",
        "  status.conditions: Too many: 10000: must have at most 8 items",
    ]
    assert len(lines) <= MAX_LINES + 2


def test_sixteen_hundred_bad_runtime_patch_items_are_named_and_bounded(tmp_path: Path) -> None:
    jobs = [{"name": f"x{j}"} for j in range(100)]
    patches = [
        {"manager": f"acme.io/m{i}", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": jobs}}}}
        for i in range(16)
    ]
    code, _, err = _run(_trainjob_json(tmp_path, runtimePatches=patches), "-r", RUNTIMES)
    assert code == 2
    detail = "must not have replicated job that doesn't exist in the runtime job template"
    assert err.splitlines() == [
        "trainer-render: TrainJob default/demo is invalid",
        *(
            f"  spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[{j}].name: "
            f'Invalid value: "x{j}": {detail}'
            for j in range(PER_KIND)
        ),
        f"  and {1600 - PER_KIND} more Invalid value errors: {detail}",
    ]


def test_a_runtime_defined_twice_is_an_error(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "torch.yaml").write_text((RUNTIMES / "torch-distributed.yaml").read_text())
    code, _, err = _run(_write(tmp_path, TRAINJOB), "-r", RUNTIMES, "-r", copy)
    assert code == 2
    assert err == (
        f'trainer-render: {copy / "torch.yaml"}: metadata.name: ClusterTrainingRuntime "torch-distributed" '
        f"is defined twice (also in {RUNTIMES / 'torch-distributed.yaml'})\n"
    )


def test_an_invalid_runtime_is_reported_with_its_file(tmp_path: Path) -> None:
    bad = (RUNTIMES / "torch-distributed.yaml").read_text().replace("numNodes: 1", "numNodes: one")
    runtime = _write(tmp_path, bad, "bad.yaml")
    code, _, err = _run(_write(tmp_path, TRAINJOB), "-r", runtime)
    assert code == 2
    assert err == (
        f'trainer-render: ClusterTrainingRuntime "torch-distributed" ({runtime}) is invalid\n'
        '  spec.mlPolicy.numNodes: Invalid value: "one": must be of type integer, not string\n'
    )


def test_a_runtime_the_runtime_webhook_refuses_is_reported_with_its_file(tmp_path: Path) -> None:
    text = (RUNTIMES / "torch-distributed.yaml").read_text()
    container = "                    - name: node\n"  # the trainer's container, not its replicated job
    assert container in text
    runtime = _write(tmp_path, text.replace(container, container.replace("node", "main")), "bad.yaml")
    code, _, err = _run(_write(tmp_path, TRAINJOB), "-r", runtime)
    assert code == 2
    assert err.startswith(
        f'trainer-render: ClusterTrainingRuntime "torch-distributed" ({runtime}) is invalid\n'
    )
    assert err.rstrip().endswith("must contain the required container for the ancestor: trainer")


def test_a_runtime_a_plugin_cannot_build_exits_2_naming_the_runtime_field(tmp_path: Path) -> None:
    # Was a build failure ("plugin MPI failed in EnforceMLPolicy: ..."): the webhook's checks now run the
    # plugins' Info phases too, so what the build refuses is refused first, naming the field.
    runtime = _write(
        tmp_path,
        """\
        apiVersion: trainer.kubeflow.org/v1alpha1
        kind: ClusterTrainingRuntime
        metadata:
          name: torch-distributed
        spec:
          mlPolicy:
            mpi:
              mpiImplementation: ""
          template:
            spec:
              replicatedJobs:
                - name: launcher
                  template:
                    spec:
                      template:
                        spec:
                          containers:
                            - name: node
        """,
        "runtime.yaml",
    )
    code, _, err = _run(_write(tmp_path, TRAINJOB), "-r", runtime)
    assert code == 2
    assert err == (
        "trainer-render: TrainJob default/demo is invalid\n"
        '  spec.RuntimeRef: Invalid value: {"name":"torch-distributed","apiGroup":"trainer.kubeflow.org",'
        '"kind":"ClusterTrainingRuntime"}: the runtime cannot run: spec.mlPolicy.mpi.mpiImplementation: '
        'Invalid value: "": MPI implementation for  doesn\'t supported\n'
    )


def test_a_trainjob_managed_elsewhere_renders_nothing(tmp_path: Path) -> None:
    text = TRAINJOB + "  managedBy: kueue.x-k8s.io/multikueue\n"
    code, out, err = _run(_write(tmp_path, text), "-r", RUNTIMES)
    assert (code, out) == (0, "")
    assert err == (
        "trainer-render: TrainJob default/demo is managed by kueue.x-k8s.io/multikueue: nothing to apply\n"
    )


def test_a_finished_trainjob_renders_nothing(tmp_path: Path) -> None:
    text = TRAINJOB + textwrap.dedent(
        """\
        status:
          conditions:
            - type: Complete
              status: "True"
              reason: AllJobsCompleted
              message: jobset completed successfully
              lastTransitionTime: "2026-01-02T03:04:05Z"
        """
    )
    code, out, err = _run(_write(tmp_path, text), "-r", RUNTIMES)
    assert (code, out) == (0, "")
    assert "has finished: nothing to apply" in err


def test_an_existing_running_jobset_is_not_rendered_again(tmp_path: Path) -> None:
    existing = _write(
        tmp_path,
        "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: demo, namespace: default}\n",
        "cluster.yaml",
    )
    code, out, _ = _run(_write(tmp_path, TRAINJOB), "-r", RUNTIMES, "--existing", existing)
    assert code == 0
    assert [o["kind"] for o in _objects(out)] == ["ConfigMap"]


def test_generated_ssh_keys_are_real_keys(tmp_path: Path) -> None:
    text = TRAINJOB.replace("torch-distributed", "deepspeed-distributed")
    code, out, _ = _run(_write(tmp_path, text), "-r", RUNTIMES, "--ssh-keys", "generate")
    secret = next(o for o in _objects(out) if o["kind"] == "Secret")
    assert code == 0
    key = serialization.load_pem_private_key(
        base64.b64decode(secret["data"]["ssh-privatekey"]), password=None
    )
    assert key.key_size == 521


def test_placeholder_ssh_keys_say_what_they_are(tmp_path: Path) -> None:
    text = TRAINJOB.replace("torch-distributed", "deepspeed-distributed")
    _, out, _ = _run(_write(tmp_path, text), "-r", RUNTIMES)
    secret = next(o for o in _objects(out) if o["kind"] == "Secret")
    assert base64.b64decode(secret["data"]["ssh-privatekey"]).startswith(
        b"<ECDSA P-521 private key: generated"
    )


FLUX_RUNTIMES = ROOT / "test" / "golden" / "runtimes" / "flux-distributed.yaml"


def _curve_certificate(out: str) -> str:
    secret = next(o for o in _objects(out) if o["kind"] == "Secret")
    return base64.b64decode(secret["data"]["curve.cert"]).decode()


def test_generated_curve_keys_are_a_fresh_x25519_pair(tmp_path: Path) -> None:
    trainjob = _write(tmp_path, TRAINJOB.replace("torch-distributed", "flux-distributed"))
    certificates = []
    for _ in range(2):
        code, out, _ = _run(trainjob, "-r", FLUX_RUNTIMES, "--curve-keys", "generate")
        assert code == 0
        certificates.append(_curve_certificate(out))
    keys = [dict(re.findall(r'^    (\S+) = "(.*)"$', c, re.MULTILINE)) for c in certificates]
    assert all(len(k["secret-key"]) == len(k["public-key"]) == 40 for k in keys)
    assert keys[0]["secret-key"] != keys[1]["secret-key"]


def test_placeholder_curve_keys_say_what_they_are(tmp_path: Path) -> None:
    trainjob = _write(tmp_path, TRAINJOB.replace("torch-distributed", "flux-distributed"))
    _, out, _ = _run(trainjob, "-r", FLUX_RUNTIMES)
    assert '    secret-key = "<Z85 secret key: generated by the controller' in _curve_certificate(out)


@pytest.mark.parametrize(
    ("gates", "error"),
    [
        (
            "TrainJobStatus=maybe",
            "--feature-gates: invalid value of TrainJobStatus=maybe: expected true or false",
        ),
        ("=true", ""),
    ],
)
def test_malformed_feature_gates_exit_2(tmp_path: Path, gates: str, error: str) -> None:
    code, _, err = _run(_write(tmp_path, TRAINJOB), "-r", RUNTIMES, "--feature-gates", gates)
    assert code == 2
    assert error in err


def test_feature_gates_are_parsed_like_kubernetes_component_flags() -> None:
    # Later settings win, as with `--feature-gates` of Kubernetes components; only enabled gates remain.
    # Values are Go's strconv.ParseBool spellings. (Unknown gates: test_render_input.py.)
    assert _parse_feature_gates(["TrainJobStatus=true, TrainJobStatus=0", ""]) == set()
    assert _parse_feature_gates(["TrainJobStatus=f", " TrainJobStatus=T "]) == {"TrainJobStatus"}


def test_rendering_a_document_that_is_not_a_trainjob_is_refused() -> None:
    runtime = Document(source="r.yaml", obj=yaml.safe_load((RUNTIMES / "torch-distributed.yaml").read_text()))
    with pytest.raises(RenderError, match=r'^r.yaml: kind: "ClusterTrainingRuntime" is not TrainJob$'):
        render(runtime, [runtime], options=RenderOptions(schemas=SCHEMAS))


def test_rendering_with_a_runtime_that_is_not_a_runtime_is_refused() -> None:
    trainjob = Document(source="j.yaml", obj=yaml.safe_load(TRAINJOB))
    with pytest.raises(
        RenderError, match=r'^j.yaml: kind: "TrainJob" is not TrainingRuntime or ClusterTrainingRuntime$'
    ):
        render(trainjob, [trainjob], options=RenderOptions(schemas=SCHEMAS))


_SECRET = "apiVersion: v1\nkind: Secret\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("metadata: [1]\n", "metadata: must be of type object, not array"),
        ("kind: JobSet\nmetadata: {name: x}\n", "apiVersion: missing (an object in the cluster has one)"),
        ("apiVersion: v1\nkind: {a: 1}\nmetadata: {name: x}\n", 'kind: {"a": 1} is not a string'),
        (_SECRET + "metadata: {name: ''}\n", "metadata.name: missing (an object in the cluster has one)"),
        (_SECRET + "metadata: {name: 5}\n", "metadata.name: 5 is not a string"),
        (_SECRET + "metadata: {name: x, namespace: [a]}\n", 'metadata.namespace: ["a"] is not a string'),
    ],
    ids=[
        "metadata not an object",
        "no apiVersion",
        "a kind not a string",
        "no name",
        "a name not a string",
        "a namespace not a string",
    ],
)
def test_an_existing_object_that_cannot_be_in_a_cluster_is_refused_naming_the_field(
    tmp_path: Path, text: str, message: str
) -> None:
    existing = _write(tmp_path, text, "existing.yaml")
    code, _, err = _run(_write(tmp_path, TRAINJOB), "-r", RUNTIMES, "--existing", existing)
    assert code == 2
    assert err == f"trainer-render: {existing}: {message}\n"


def test_missing_crds_warn_and_skip_the_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("runtime.render.DEFAULT_CRD_DIR", tmp_path / "no-crds")
    code, out, err = _run(_write(tmp_path, TRAINJOB), "-r", RUNTIMES, schemas=None)
    assert code == 0
    assert err.startswith(
        f"Warning: CRDs not found at {tmp_path / 'no-crds'}: schema checks and defaults skipped"
    )
    assert "suspend" not in _objects(out)[1]["spec"]  # no schema, no defaults


def test_an_unexpected_exception_is_an_internal_error_without_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("boom")

    monkeypatch.setattr("runtime.render.render", broken)
    code, _, err = _run(_write(tmp_path, TRAINJOB), "-r", RUNTIMES)
    assert code == 1
    assert err == (
        "trainer-render: internal error: KeyError: 'boom'\n"
        "  this is a bug in trainer-render; rerun with --traceback and report it\n"
    )
    code, _, err = _run(_write(tmp_path, TRAINJOB), "-r", RUNTIMES, "--traceback")
    assert "Traceback (most recent call last)" in err


# SchemaChecker --------------------------------------------------------------------------------------------


def _check(obj: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    checked, errors = SCHEMAS.check(obj)
    return checked, [str(e) for e in errors]


def _trainjob(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "x"},
        "spec": {"runtimeRef": {"name": "rt"}, **spec},
    }


def test_the_schema_defaults_absent_fields_and_drops_nulls() -> None:
    checked, errors = _check(_trainjob(suspend=None))
    assert errors == []
    assert checked["spec"] == {
        "runtimeRef": {"name": "rt", "apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime"},
        "suspend": False,
        "managedBy": "trainer.kubeflow.org/trainjob-controller",
    }


def test_the_schema_reports_types_bounds_lengths_and_duplicates() -> None:
    _, errors = _check(
        _trainjob(
            trainer={
                "numNodes": 2**31,
                "image": "x" * 501,
                "env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}],
                "command": "python",
            },
            runtimeRef={"name": 5},
        )
    )
    assert errors == [
        "spec.runtimeRef.name: Invalid value: 5: must be of type string, not integer",
        "spec.trainer.numNodes: Invalid value: 2147483648: must fit in int32",
        "spec.trainer.image: Too long: may not be longer than 500",
        'spec.trainer.env[1]: Duplicate value: {"name":"A","value":"2"}',
        'spec.trainer.command: Invalid value: "python": must be of type array, not string',
    ]


def test_whole_floats_in_integer_fields_are_accepted_and_kept_as_the_integers_the_server_stores() -> None:
    # kube-apiserver v1.36.3, by experiment (test/integration/test_render_vs_apiserver.py has the table).
    checked, errors = _check(
        _trainjob(
            activeDeadlineSeconds=60.0,  # its one rule reads oldSelf: not run on create
            trainer={
                "numNodes": 2.0,
                "resourcesPerNode": {
                    "limits": {"cpu": 1.0, "memory": -1.0, "nvidia.com/gpu": float(2**53 - 1)},
                    "requests": {"cpu": -0.0},
                },
            },
        )
    )
    assert errors == []
    spec = checked["spec"]
    assert spec["activeDeadlineSeconds"] == 60 and type(spec["activeDeadlineSeconds"]) is int
    assert spec["trainer"]["numNodes"] == 2 and type(spec["trainer"]["numNodes"]) is int
    assert orjson.dumps(spec["trainer"]["resourcesPerNode"]) == (
        b'{"limits":{"cpu":1,"memory":-1,"nvidia.com/gpu":9007199254740991},"requests":{"cpu":0}}'
    )


def test_floats_that_are_not_json_integers_are_refused_where_integers_are_expected() -> None:
    _, errors = _check(
        _trainjob(
            trainer={
                "numNodes": 2.5,
                "resourcesPerNode": {"limits": {"cpu": 1.5, "memory": 1.0000000001, "x.io/y": float(2**53)}},
            }
        )
    )
    assert errors == [
        "spec.trainer.numNodes: Invalid value: 2.5: must be of type integer, not number",
        "spec.trainer.resourcesPerNode.limits[cpu]: Invalid value: 1.5: must be an integer or a string",
        "spec.trainer.resourcesPerNode.limits[memory]: Invalid value: 1.0000000001: "
        "must be an integer or a string",
        "spec.trainer.resourcesPerNode.limits[x.io/y]: Invalid value: 9007199254740992.0: "
        "must be an integer or a string",
    ]


def test_a_whole_float_must_still_fit_the_fields_format_and_bounds() -> None:
    _, errors = _check(_trainjob(trainer={"numNodes": 3e9}, activeDeadlineSeconds=0.0))
    assert errors == [
        "spec.trainer.numNodes: Invalid value: 3000000000: must fit in int32",
        "spec.activeDeadlineSeconds: Invalid value: 0: should be greater than or equal to 1",
    ]


def test_a_whole_float_fails_the_cel_rules_of_its_field_as_the_servers_cel_cannot_read_it() -> None:
    # kube-apiserver: `spec.mlPolicy.flux.numProcPerNode: Invalid value: "integer": invalid data, expected
    # int, got float64 evaluating rule: NumProcPerNode in fluxPolicy must be >= 1` (even for 2.0).
    def runtime(num_proc_per_node: float) -> dict[str, Any]:
        return {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainingRuntime",
            "metadata": {"name": "x"},
            "spec": {"mlPolicy": {"flux": {"numProcPerNode": num_proc_per_node}}},
        }

    _, errors = _check(runtime(2.0))
    assert errors == [
        'spec.mlPolicy.flux.numProcPerNode: Invalid value: "integer": invalid data, expected int, '
        "got float64 evaluating rule: NumProcPerNode in fluxPolicy must be >= 1"
    ]
    assert _check(runtime(2))[1] == []
    # A TrainJob's numProcPerNode has no rule (as upstream v2.3.0): 2.0 is taken as 2.
    checked, errors = _check(_trainjob(trainer={"numProcPerNode": 2.0}))
    assert (errors, checked["spec"]["trainer"]["numProcPerNode"]) == ([], 2)


def test_the_schema_requires_required_fields() -> None:
    obj = _trainjob()
    del obj["spec"]["runtimeRef"]
    _, errors = _check(obj)
    assert errors == [str(FieldError.required("spec.runtimeRef", ""))]


def test_dump_yaml_writes_multiline_strings_as_literal_blocks() -> None:
    assert dump_yaml([{"b": "one\ntwo\n", "a": 1}, {"c": []}]) == "a: 1\nb: |\n  one\n  two\n---\nc: []\n"
    assert dump_yaml([]) == ""
