"""The TrainJobStatus plugin: pod wiring, the CA ConfigMap, settings, the feature gate, and render with it.

Upstream's tables are in `pkg/runtime/framework/plugins/trainjobstatus/trainjobstatus_test.go`:
`TestEnforceMLPolicy` (the same phase here) and `TestBuild`; each ported case names its upstream
case. The golden renderings live in `test/golden/trainjobstatus/` (see its README); regenerate them on
purpose only:

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest test/unit/plugins/test_plugins_trainjobstatus.py -q
"""

from __future__ import annotations

import base64
import difflib
import io
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from runtime.core import RuntimeRegistry
from runtime.features import FeatureGates
from runtime.framework import (
    Framework,
    Phase,
    PhaseError,
    PluginConfigurationError,
    PluginContext,
    PluginError,
    ReadError,
    Watch,
    implements,
)
from runtime.plugins import builtin_registry
from runtime.plugins.trainjobstatus import (
    StatusServerSettings,
    TrainJobStatusPlugin,
    status_path,
    tls_config_name,
    token_audience,
)
from runtime.render import DEFAULT_CRD_DIR, SchemaChecker, _parse_feature_gates, run

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "test" / "golden"
GOLDEN_CASES = GOLDEN / "trainjobstatus"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"

CA = "-----BEGIN CERTIFICATE-----\ntest-ca-cert-data\n-----END CERTIFICATE-----\n"
URL = (
    "https://kubeflow-trainer-controller-manager.kubeflow-system.svc:10443"
    "/apis/trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/test-job/status"
)
AUDIENCE = "trainer.kubeflow.org/v1alpha1/namespaces/default/trainjobs/test-job/status"
ENVS = [
    {"name": "KUBEFLOW_TRAINER_SERVER_URL", "value": URL},
    {"name": "KUBEFLOW_TRAINER_SERVER_CA_CERT", "value": "/var/run/secrets/kubeflow/trainer/ca.crt"},
    {"name": "KUBEFLOW_TRAINER_SERVER_TOKEN", "value": "/var/run/secrets/kubeflow/trainer/token"},
]
MOUNT = {"name": "kubeflow-trainer-token", "mountPath": "/var/run/secrets/kubeflow/trainer", "readOnly": True}
VOLUME = {
    "name": "kubeflow-trainer-token",
    "projected": {
        "sources": [
            {"serviceAccountToken": {"audience": AUDIENCE, "expirationSeconds": 3600, "path": "token"}},
            {"configMap": {"name": "test-job-tls-config", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        ]
    },
}


def _secret(
    data: dict[str, str] | None = None,
    *,
    name: str = "kubeflow-trainer-webhook-cert",
    namespace: str = "kubeflow-system",
) -> dict[str, Any]:
    """The certificate rotator's Secret; `data` as given, else `ca.crt` = CA (base64, as on the wire)."""
    if data is None:
        data = {"ca.crt": base64.b64encode(CA.encode()).decode()}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }


def _trainer_info(make: Any, *containers: dict[str, Any], **job: Any) -> tuple[Any, Any]:
    trainjob = make.trainjob("test-job", uid="test-uid", trainer={"numNodes": 2})
    spec = make.runtime_spec(
        make.job("node", ancestor="trainer", containers=containers or [make.container()], **job),
        ml_policy={"numNodes": 2},
    )
    return trainjob, make.info(trainjob, spec)


def _config_map(make: Any, certificate: str = CA) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "test-job-tls-config",
            "namespace": "default",
            "labels": {"trainer.kubeflow.org/trainjob-name": "test-job"},
            "ownerReferences": [make.owner("test-job", "test-uid")],
        },
        "data": {"ca.crt": certificate},
    }


# EnforceMLPolicy ------------------------------------------------------------------------------------------


def test_does_nothing_without_a_trainer_pod_set(make: Any) -> None:
    # upstream TestEnforceMLPolicy: "does nothing if no trainer pods"
    trainjob = make.trainjob("test-job", trainer={"numNodes": 1})
    info = make.info(
        trainjob, make.runtime_spec(make.job("launcher", containers=[make.container("launcher")]))
    )
    TrainJobStatusPlugin().enforce_ml_policy(info, trainjob)
    assert info.pod_sets[0].pod_spec == {"containers": [{"name": "launcher"}]}


def test_injects_the_status_server_configuration_into_the_trainer_container(make: Any) -> None:
    # upstream TestEnforceMLPolicy: "injects runtime configuration into trainer containers"
    trainjob, info = _trainer_info(make)
    TrainJobStatusPlugin().enforce_ml_policy(info, trainjob)
    assert info.pod_sets[0].pod_spec == {
        "containers": [{"name": "node", "env": ENVS, "volumeMounts": [MOUNT]}],
        "volumes": [VOLUME],
    }
    assert info.pod_sets[0].count == 2


def test_injects_into_every_regular_container_and_leaves_init_containers_alone(make: Any) -> None:
    # upstream TestEnforceMLPolicy: "injects runtime configuration into multiple containers"
    trainjob, info = _trainer_info(
        make, make.container(), make.container("sidecar"), init_containers=[make.container("init")]
    )
    TrainJobStatusPlugin().enforce_ml_policy(info, trainjob)
    assert info.pod_sets[0].pod_spec == {
        "containers": [
            {"name": "node", "env": ENVS, "volumeMounts": [MOUNT]},
            {"name": "sidecar", "env": ENVS, "volumeMounts": [MOUNT]},
        ],
        "initContainers": [{"name": "init"}],
        "volumes": [VOLUME],
    }


def test_only_the_trainer_pod_set_is_changed(make: Any) -> None:
    trainjob = make.trainjob("test-job", uid="test-uid")
    spec = make.runtime_spec(
        make.job("dataset-initializer", ancestor="dataset-initializer", containers=[make.container("d")]),
        make.job("launcher", containers=[make.container("launcher")]),
        make.job("node", ancestor="trainer", containers=[make.container()]),
    )
    info = make.info(trainjob, spec)
    TrainJobStatusPlugin().enforce_ml_policy(info, trainjob)
    assert [ps.pod_spec for ps in info.pod_sets] == [
        {"containers": [{"name": "d"}]},
        {"containers": [{"name": "launcher"}]},
        {"containers": [{"name": "node", "env": ENVS, "volumeMounts": [MOUNT]}], "volumes": [VOLUME]},
    ]


def test_repeated_runs_upsert_rather_than_duplicate(make: Any) -> None:
    trainjob, info = _trainer_info(make)
    plugin = TrainJobStatusPlugin()
    plugin.enforce_ml_policy(info, trainjob)
    once = yaml.safe_load(yaml.safe_dump(info.pod_sets[0].pod_spec))
    plugin.enforce_ml_policy(info, trainjob)
    assert info.pod_sets[0].pod_spec == once


def test_what_the_runtime_already_has_under_these_names_is_replaced_in_place(make: Any) -> None:
    stale_volume = {"name": "kubeflow-trainer-token", "emptyDir": {}}
    trainjob, info = _trainer_info(
        make,
        make.container(
            env=[make.env("KUBEFLOW_TRAINER_SERVER_URL", "https://old"), make.env("KEEP", "1")],
            volume_mounts=[{"name": "other", "mountPath": "/var/run/secrets/kubeflow/trainer"}],
        ),
        volumes=[stale_volume, {"name": "data", "emptyDir": {}}],
    )
    TrainJobStatusPlugin().enforce_ml_policy(info, trainjob)
    assert info.pod_sets[0].pod_spec == {
        "containers": [
            {"name": "node", "env": [ENVS[0], make.env("KEEP", "1"), *ENVS[1:]], "volumeMounts": [MOUNT]}
        ],
        "volumes": [VOLUME, {"name": "data", "emptyDir": {}}],
    }


def test_the_settings_place_the_server(make: Any) -> None:
    trainjob, info = _trainer_info(make)
    settings = StatusServerSettings(operator_namespace="ops", service_name="trainer", port=8443)
    TrainJobStatusPlugin(settings=settings).enforce_ml_policy(info, trainjob)
    (container,) = info.pod_sets[0].containers
    assert container.env[0] == {
        "name": "KUBEFLOW_TRAINER_SERVER_URL",
        "value": "https://trainer.ops.svc:8443/apis/trainer.kubeflow.org/v1alpha1/namespaces/default"
        "/trainjobs/test-job/status",
    }


def test_settings_without_a_port_fail_the_phase_and_change_nothing(make: Any) -> None:
    # upstream createEnvVars: "missing status server port"
    trainjob, info = _trainer_info(make)
    plugin = TrainJobStatusPlugin(settings=StatusServerSettings(port=None))
    with pytest.raises(PhaseError, match=r"^missing status server port$"):
        plugin.enforce_ml_policy(info, trainjob)
    assert info.pod_sets[0].pod_spec == {"containers": [{"name": "node"}]}


# ComponentBuilder -----------------------------------------------------------------------------------------


def test_builds_the_configmap_with_the_ca_of_the_webhook_secret(make: Any) -> None:
    # upstream TestBuild: "creates ConfigMap with CA cert from secret"
    trainjob, info = _trainer_info(make)
    assert TrainJobStatusPlugin().build(info, trainjob, make.reader(_secret())) == [_config_map(make)]


def test_build_does_not_change_the_info(make: Any) -> None:
    trainjob, info = _trainer_info(make)
    before = yaml.safe_dump(info.template)
    TrainJobStatusPlugin().build(info, trainjob, make.reader(_secret()))
    assert yaml.safe_dump(info.template) == before


def test_a_missing_webhook_secret_fails_the_build(make: Any) -> None:
    # upstream TestBuild: "returns error when webhook secret not found"
    trainjob, info = _trainer_info(make)
    message = 'failed to look up status server tls secret: secrets "kubeflow-trainer-webhook-cert" not found'
    with pytest.raises(PhaseError) as caught:
        TrainJobStatusPlugin().build(info, trainjob, make.reader())
    assert str(caught.value) == message


def test_the_secret_is_read_in_the_operator_namespace_under_the_configured_name(make: Any) -> None:
    trainjob, info = _trainer_info(make)
    reader = make.reader(_secret(), _secret(name="trainer-cert", namespace="default"))
    plugin = TrainJobStatusPlugin(settings=StatusServerSettings(operator_namespace="ops"))
    with pytest.raises(PhaseError, match='secrets "kubeflow-trainer-webhook-cert" not found'):
        plugin.build(info, trainjob, reader)
    reader.add(_secret(name="trainer-cert", namespace="ops"))
    plugin = TrainJobStatusPlugin(
        settings=StatusServerSettings(operator_namespace="ops", tls_secret_name="trainer-cert")
    )
    assert plugin.build(info, trainjob, reader) == [_config_map(make)]


def test_a_failing_secret_read_fails_the_build_with_the_cause_chained(make: Any) -> None:
    trainjob, info = _trainer_info(make)
    reader = make.reader(_secret())
    reader.errors[("v1", "Secret")] = RuntimeError("cache not synced")
    with pytest.raises(PhaseError) as caught:
        TrainJobStatusPlugin().build(info, trainjob, reader)
    assert (
        str(caught.value) == "failed to look up status server tls secret: reading Secret.v1: cache not synced"
    )
    assert isinstance(caught.value.__cause__, ReadError)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param({"other-key": base64.b64encode(b"other-data").decode()}, id="no ca.crt"),
        pytest.param({"ca.crt": ""}, id="an empty ca.crt"),
        pytest.param({}, id="no data"),
    ],
)
def test_a_webhook_secret_without_a_ca_fails_the_build(make: Any, data: dict[str, str]) -> None:
    # upstream TestBuild: "returns error when CA cert is missing in secret"
    trainjob, info = _trainer_info(make)
    with pytest.raises(PhaseError, match=r"^failed to find status server ca.crt in tls secret$"):
        TrainJobStatusPlugin().build(info, trainjob, make.reader(_secret(data)))


def test_a_ca_that_is_not_base64_fails_the_build(make: Any) -> None:
    trainjob, info = _trainer_info(make)
    with pytest.raises(
        PhaseError, match=r"^status server tls secret kubeflow-system/kubeflow-trainer-webhook"
    ):
        TrainJobStatusPlugin().build(info, trainjob, make.reader(_secret({"ca.crt": "not base64!"})))


def test_a_ca_that_is_not_utf8_is_copied_as_go_would_write_it(make: Any) -> None:
    trainjob, info = _trainer_info(make)
    secret = _secret({"ca.crt": base64.b64encode(b"ca\xff").decode()})
    (config_map,) = TrainJobStatusPlugin().build(info, trainjob, make.reader(secret))
    assert config_map["data"] == {"ca.crt": "ca\ufffd"}


def test_the_plugin_watches_only_the_labelled_configmaps_trainjobs_own() -> None:
    assert list(TrainJobStatusPlugin().watches()) == [
        Watch.owned("v1", "ConfigMap", label_selector="trainer.kubeflow.org/trainjob-name")
    ]


def test_the_names_the_status_server_shares() -> None:
    assert (
        status_path("ns", "job") == "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/job/status"
    )
    assert token_audience("ns", "job") == "trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/job/status"
    assert tls_config_name("job") == "job-tls-config"


# Settings -------------------------------------------------------------------------------------------------


def test_settings_default_to_upstreams() -> None:
    expected = StatusServerSettings(
        operator_namespace="kubeflow-system",
        service_name="kubeflow-trainer-controller-manager",
        port=10443,
        tls_secret_name="kubeflow-trainer-webhook-cert",
    )
    assert StatusServerSettings() == expected
    assert StatusServerSettings.from_config({}) == expected
    empty = {"certManagement": {"webhookServiceName": "", "webhookSecretName": ""}, "statusServer": {}}
    assert StatusServerSettings.from_config(empty, operator_namespace="") == expected
    assert TrainJobStatusPlugin().settings == expected
    assert TrainJobStatusPlugin(PluginContext()).settings == expected


def test_settings_come_from_the_configuration_and_the_operator_namespace() -> None:
    config = {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
        "kind": "Configuration",
        "certManagement": {"enable": True, "webhookServiceName": "svc", "webhookSecretName": "cert"},
        "statusServer": {"port": 8443, "qps": 5, "burst": 10},
    }
    assert StatusServerSettings.from_config(config, operator_namespace="ops") == StatusServerSettings(
        operator_namespace="ops", service_name="svc", port=8443, tls_secret_name="cert"
    )
    plugin = TrainJobStatusPlugin(PluginContext(config=config))
    assert plugin.settings.server_url("a", "b").startswith("https://svc.kubeflow-system.svc:8443/")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"statusServer": {"port": 0}}, "statusServer.port: must be an integer between 1 and 65535, got 0"),
        ({"statusServer": {"port": "10443"}}, "statusServer.port: must be an integer between 1 and 65535"),
        ({"statusServer": {"port": True}}, "statusServer.port: must be an integer between 1 and 65535"),
        ({"statusServer": 10443}, "statusServer: must be an object, got 10443"),
        ({"certManagement": {"webhookSecretName": 7}}, "certManagement.webhookSecretName: must be a string"),
    ],
)
def test_a_malformed_configuration_stops_start_up(config: dict[str, Any], message: str) -> None:
    with pytest.raises(PluginConfigurationError, match=message):
        StatusServerSettings.from_config(config)
    with pytest.raises(PluginConfigurationError, match="initializing plugin 'TrainJobStatus'"):
        Framework(builtin_registry(frozenset({"TrainJobStatus"})), PluginContext(config=config))


# The feature gate, and the whole pipeline -----------------------------------------------------------------


def _pipeline(make: Any, gates: frozenset[str], *existing: dict[str, Any], **trainer: Any) -> tuple[Any, Any]:
    """The worked example (`team/demo` on a torch runtime), built by a reconcile."""
    runtime = make.runtime(
        make.runtime_spec(
            make.job("node", ancestor="trainer", containers=[make.container(image="runtime:1")]),
            ml_policy={"numNodes": 1, "torch": {"numProcPerNode": "auto"}},
        ),
        name="torch-distributed",
        namespace="team",
    )
    trainjob = make.trainjob(
        "demo",
        "team",
        uid="demo-uid",
        runtime="torch-distributed",
        kind="TrainingRuntime",
        trainer={"image": "X", "command": ["torchrun", "train.py"], "numNodes": 2, **trainer},
    )
    reader = make.reader(runtime, *existing)
    registry = RuntimeRegistry(Framework(builtin_registry(gates)))
    assert registry.validate(None, trainjob, reader).errors == ()
    return registry, registry.new_objects(trainjob, reader)


def test_without_the_gate_the_plugin_is_not_registered_and_nothing_changes(make: Any) -> None:
    assert "TrainJobStatus" not in builtin_registry()
    _, objects = _pipeline(make, frozenset(), _secret())
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("ConfigMap", "demo-runtime-snapshot"),
        ("JobSet", "demo"),
    ]
    assert "KUBEFLOW_TRAINER" not in yaml.safe_dump(objects)
    assert "kubeflow-trainer-token" not in yaml.safe_dump(objects)


def test_with_the_gate_the_trainer_pods_are_wired_to_the_status_server(make: Any) -> None:
    # With the gate: the three envs, the token volume and its mount, ConfigMap demo-tls-config
    registry, objects = _pipeline(make, frozenset({"TrainJobStatus"}), _secret())
    assert builtin_registry(frozenset({"TrainJobStatus"})).names[-1] == "TrainJobStatus"
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("ConfigMap", "demo-runtime-snapshot"),
        ("JobSet", "demo"),
        ("ConfigMap", "demo-tls-config"),
    ]
    pod_spec = objects[1]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    (node,) = pod_spec["containers"]
    url = (
        "https://kubeflow-trainer-controller-manager.kubeflow-system.svc:10443"
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team/trainjobs/demo/status"
    )
    assert [e["name"] for e in node["env"]] == [
        "PET_NNODES",
        "PET_NPROC_PER_NODE",
        "PET_NODE_RANK",
        "PET_MASTER_ADDR",
        "PET_MASTER_PORT",
        "KUBEFLOW_TRAINER_SERVER_URL",
        "KUBEFLOW_TRAINER_SERVER_CA_CERT",
        "KUBEFLOW_TRAINER_SERVER_TOKEN",
    ]
    assert node["env"][5] == {"name": "KUBEFLOW_TRAINER_SERVER_URL", "value": url}
    assert node["volumeMounts"] == [MOUNT]
    (volume,) = pod_spec["volumes"]
    assert volume["projected"]["sources"] == [
        {
            "serviceAccountToken": {
                "audience": "trainer.kubeflow.org/v1alpha1/namespaces/team/trainjobs/demo/status",
                "expirationSeconds": 3600,
                "path": "token",
            }
        },
        {"configMap": {"name": "demo-tls-config", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
    ]
    assert objects[2]["data"] == {"ca.crt": CA}
    assert objects[2]["metadata"]["ownerReferences"] == [make.owner("demo", "demo-uid")]
    plugin = next(p for p in registry.framework.plugins if p.name == "TrainJobStatus")
    assert [phase for phase in Phase if implements(plugin, phase)] == [
        Phase.WATCH_EXTENSION,
        Phase.ENFORCE_ML_POLICY,
        Phase.COMPONENT_BUILDER,
    ]


def test_a_trainjob_env_of_the_same_name_wins_as_the_jobset_plugin_writes_it_last(make: Any) -> None:
    _, objects = _pipeline(
        make, frozenset({"TrainJobStatus"}), _secret(), env=[make.env("KUBEFLOW_TRAINER_SERVER_URL", "mine")]
    )
    pod_spec = objects[1]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod_spec["containers"][0]["env"]}
    assert env["KUBEFLOW_TRAINER_SERVER_URL"] == "mine"
    assert env["KUBEFLOW_TRAINER_SERVER_TOKEN"] == "/var/run/secrets/kubeflow/trainer/token"


def test_with_the_gate_a_missing_webhook_secret_fails_the_reconcile_naming_the_plugin(make: Any) -> None:
    with pytest.raises(PluginError) as caught:
        _pipeline(make, frozenset({"TrainJobStatus"}))
    assert str(caught.value) == (
        "plugin TrainJobStatus failed in ComponentBuilder: failed to look up status server tls secret: "
        'secrets "kubeflow-trainer-webhook-cert" not found'
    )


# trainer-render with the gate -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def schemas() -> SchemaChecker:
    return SchemaChecker.from_crd_dir(DEFAULT_CRD_DIR)


def _render(
    schemas: SchemaChecker, tmp_path: Path, runtime: str, trainjob: str, *options: str
) -> tuple[int, str, str]:
    document = yaml.safe_load((GOLDEN / "trainjobs" / f"{trainjob}.yaml").read_text())
    document["spec"]["runtimeRef"] = {"name": runtime, "kind": "ClusterTrainingRuntime"}
    (tmp_path / "trainjob.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    out, err = io.StringIO(), io.StringIO()
    argv = ["trainjob.yaml", "--runtime", str(ROOT / "config" / "runtimes"), *options]
    code = run(argv, stdout=out, stderr=err, schemas=schemas)
    return code, out.getvalue(), err.getvalue()


SECRETS = str(GOLDEN_CASES / "webhook-cert.yaml")
CONFIG = str(GOLDEN_CASES / "config.yaml")
GOLDEN_RENDERS = {
    # case: (runtime, trainjob, options)
    "torch-distributed-gpus": (
        "torch-distributed",
        "gpus",
        ("--feature-gates", "TrainJobStatus=true", "--existing", SECRETS),
    ),
    "deepspeed-distributed-gpus-configured": (
        "deepspeed-distributed",
        "gpus",
        ("--config", CONFIG, "--operator-namespace", "trainer-system", "--existing", SECRETS),
    ),
    "torch-distributed-minimal-without-ca-secret": (
        "torch-distributed",
        "minimal",
        ("--feature-gates", "TrainJobStatus=true"),
    ),
}


@pytest.mark.parametrize("case", list(GOLDEN_RENDERS))
def test_render_with_the_gate_matches_the_golden_file(
    case: str, schemas: SchemaChecker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # error messages name the TrainJob file relative to here
    runtime, trainjob, options = GOLDEN_RENDERS[case]
    code, out, err = _render(schemas, tmp_path, runtime, trainjob, *options)
    assert code in (0, 2), err
    actual, suffix = (out, ".yaml") if code == 0 else (err, ".err")
    path = GOLDEN_CASES / f"{case}{suffix}"
    if UPDATE:
        path.write_text(actual)
        return
    assert path.exists(), f"{path.relative_to(ROOT)} is missing: regenerate with UPDATE_GOLDEN=1"
    expected = path.read_text()
    if actual != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True), actual.splitlines(keepends=True), str(path), "rendered"
            )
        )
        pytest.fail(f"render output differs from the golden file:\n{diff}", pytrace=False)


def test_every_golden_rendering_of_the_gate_belongs_to_a_case() -> None:
    found = {p.stem for p in GOLDEN_CASES.glob("*") if p.suffix in (".yaml", ".err")}
    assert found - {"config", "webhook-cert"} == set(GOLDEN_RENDERS)


def test_render_takes_the_gate_from_the_configuration_unless_the_flag_overrides_it(
    schemas: SchemaChecker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    options = ("--config", CONFIG, "--operator-namespace", "trainer-system", "--existing", SECRETS)
    code, on, _ = _render(schemas, tmp_path, "torch-distributed", "minimal", *options)
    assert code == 0 and "https://trainer-controller.trainer-system.svc:8443/apis/" in on
    off = ("--feature-gates", "TrainJobStatus=false")
    code, out, _ = _render(schemas, tmp_path, "torch-distributed", "minimal", *options, *off)
    assert code == 0 and "KUBEFLOW_TRAINER" not in out and "tls-config" not in out
    from_config = FeatureGates({"TrainJobStatus": True})
    assert _parse_feature_gates([], from_config) == {"TrainJobStatus"}
    assert _parse_feature_gates(["TrainJobStatus=false"], from_config) == set()


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            "statusServer:\n  port: 70000\n",
            "  initializing plugin 'TrainJobStatus': statusServer.port: must be an integer between 1 and",
        ),
        ("featureGates:\n  TrainJobStatus: yes please\n", "featureGates must map names to true or false"),
    ],
)
def test_render_rejects_a_malformed_configuration_without_a_traceback(
    schemas: SchemaChecker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: str, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.yaml").write_text(config)
    options = ("--config", "config.yaml", "--feature-gates", "TrainJobStatus=true", "--existing", SECRETS)
    code, out, err = _render(schemas, tmp_path, "torch-distributed", "minimal", *options)
    assert (code, out) == (2, "")
    assert message in err
    assert "Traceback" not in err
