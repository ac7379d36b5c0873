"""Kueue on the host (``support.kueue``, ``support.thirdparty`` ``kueue_manifests``).

What must hold without a cluster: only Kueue's own kinds and TrainJobs labelled with a queue name reach the
Kueue process (so the rest of the e2e suite never depends on it), every listener it opens is on loopback,
its manifests come from the release the binary is built from, and the certificate it insists on reading is
there. The e2e tier (``test/e2e/test_kueue.py``) runs the real thing.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from support import kueue
from support import thirdparty as _thirdparty
from support.process import ClusterError

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def thirdparty() -> ModuleType:
    return _thirdparty


def _hook(name: str, group: str, resource: str, path: str) -> dict[str, Any]:
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": path}},
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "rules": [
            {"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": [resource]}
        ],
    }


# The shape of kueue's config/components/webhook/manifests.yaml, with one webhook of each sort.
MANIFESTS = [
    {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "mutating-webhook-configuration"},
        "webhooks": [
            _hook("mclusterqueue.kb.io", "kueue.x-k8s.io", "clusterqueues", "/mutate-cq"),
            _hook("mjobset.kb.io", "jobset.x-k8s.io", "jobsets", "/mutate-jobset"),
            _hook("mpod.kb.io", "", "pods", "/mutate--v1-pod"),
            _hook("mtrainjob.kb.io", "trainer.kubeflow.org", "trainjobs", "/mutate-trainjob"),
        ],
    },
    {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "validating-webhook-configuration"},
        "webhooks": [
            _hook("vdeployment.kb.io", "apps", "deployments", "/validate-deployment"),
            _hook("vworkload.kb.io", "kueue.x-k8s.io", "workloads", "/validate-workload"),
        ],
    },
]


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    path = tmp_path / "manifests.yaml"
    path.write_text(yaml.safe_dump_all(MANIFESTS))
    return path


def test_only_kueues_own_kinds_and_queued_trainjobs_are_sent_to_the_kueue_process(manifests: Path) -> None:
    configurations = kueue.kueue_webhook_configurations(manifests, port=9443, ca_bundle=b"CA")
    hooks = {
        (c["kind"], c["metadata"]["name"]): {h["name"]: h for h in c["webhooks"]} for c in configurations
    }
    assert {k: sorted(v) for k, v in hooks.items()} == {
        ("MutatingWebhookConfiguration", "kueue-mutating-webhook-configuration"): [
            "mclusterqueue.kb.io",
            "mtrainjob.kb.io",
        ],
        ("ValidatingWebhookConfiguration", "kueue-validating-webhook-configuration"): ["vworkload.kb.io"],
    }
    mutating = hooks[("MutatingWebhookConfiguration", "kueue-mutating-webhook-configuration")]
    assert mutating["mtrainjob.kb.io"]["objectSelector"] == {
        "matchExpressions": [{"key": "kueue.x-k8s.io/queue-name", "operator": "Exists"}]
    }
    assert "objectSelector" not in mutating["mclusterqueue.kb.io"]
    assert mutating["mtrainjob.kb.io"]["clientConfig"] == {
        "url": "https://127.0.0.1:9443/mutate-trainjob",
        "caBundle": "Q0E=",
    }
    assert mutating["mtrainjob.kb.io"]["failurePolicy"] == "Fail"  # the rest as released


def test_an_integration_without_a_known_webhook_selection_is_refused(manifests: Path) -> None:
    with pytest.raises(ClusterError, match="batch/job"):
        kueue.kueue_webhook_configurations(manifests, port=1, ca_bundle=b"", frameworks=["batch/job"])


def test_every_listener_of_the_configuration_is_on_loopback_and_only_queued_trainjobs_are_managed() -> None:
    config = kueue.kueue_configuration(
        health_port=1,
        metrics_port=2,
        webhook_port=3,
        cert_dir=Path("/c"),
        frameworks=kueue.KUEUE_FRAMEWORKS,
    )
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert config["health"]["healthProbeBindAddress"] == "127.0.0.1:1"
    assert config["metrics"]["bindAddress"] == "127.0.0.1:2"
    assert config["webhook"] == {"host": "127.0.0.1", "port": 3, "certDir": "/c"}
    assert config["featureGates"] == {"VisibilityOnDemand": False}  # its server would bind every interface
    assert config["internalCertManagement"] == {"enable": False}
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["manageJobsWithoutQueueName"] is False
    assert config["integrations"] == {"frameworks": ["trainer.kubeflow.org/trainjob"]}


def test_the_metrics_certificate_is_written_once_and_then_kept(tmp_path: Path) -> None:
    directory = tmp_path / "etc" / "kueue" / "metrics" / "certs"
    kueue._ensure_kueue_metrics_certificate(directory)
    written = (directory / "tls.crt").read_bytes(), (directory / "tls.key").read_bytes()
    assert written[0].startswith(b"-----BEGIN CERTIFICATE-----")
    kueue._ensure_kueue_metrics_certificate(directory)
    assert ((directory / "tls.crt").read_bytes(), (directory / "tls.key").read_bytes()) == written


def test_an_unwritable_metrics_certificate_directory_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "etc"
    blocker.write_text("a file where a directory should be")
    with pytest.raises(ClusterError, match=r"cannot write Kueue's metrics certificate to .*etc/kueue"):
        kueue._ensure_kueue_metrics_certificate(blocker / "kueue" / "metrics" / "certs")


def test_stopping_a_kueue_that_never_ran_does_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINER_CACHE_DIR", str(tmp_path))
    kueue.stop_kueue("never-up")
    assert kueue.kueue_process("never-up") is None


def _go_download_answers(
    monkeypatch: pytest.MonkeyPatch, thirdparty: ModuleType, answer: dict[str, Any]
) -> None:
    monkeypatch.setattr(thirdparty.shutil, "which", lambda name: "/usr/bin/go")

    def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        assert argv[1:] == ["mod", "download", "-json", "sigs.k8s.io/kueue"]
        return subprocess.CompletedProcess(argv, 0, stdout=json.dumps(answer), stderr="")

    monkeypatch.setattr(thirdparty.subprocess, "run", run)


def test_kueues_manifests_come_from_the_wrapper_modules_download(
    thirdparty: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    crds = tmp_path / "config" / "components" / "crd" / "bases"
    crds.mkdir(parents=True)
    for name in ("kueue.x-k8s.io_workloads.yaml", "kueue.x-k8s.io_clusterqueues.yaml"):
        (crds / name).write_text("kind: CustomResourceDefinition\n")
    webhooks = tmp_path / "config" / "components" / "webhook" / "manifests.yaml"
    webhooks.parent.mkdir(parents=True)
    webhooks.write_text("kind: MutatingWebhookConfiguration\n")
    _go_download_answers(monkeypatch, thirdparty, {"Version": "v0.17.0", "Dir": str(tmp_path)})

    found = thirdparty.kueue_manifests({"KUEUE_VERSION": "v0.17.0"})
    assert found.crds == (crds / "kueue.x-k8s.io_clusterqueues.yaml", crds / "kueue.x-k8s.io_workloads.yaml")
    assert found.webhooks == webhooks


def test_a_wrapper_pinning_another_kueue_release_is_a_clear_error(
    thirdparty: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _go_download_answers(monkeypatch, thirdparty, {"Version": "v0.16.2", "Dir": str(tmp_path)})
    with pytest.raises(
        thirdparty.ThirdPartyError, match=r"pins sigs.k8s.io/kueue@v0.16.2 but .* says v0.17.0"
    ):
        thirdparty.kueue_manifests({"KUEUE_VERSION": "v0.17.0"})


def test_an_unpinned_kueue_is_a_clear_error(thirdparty: ModuleType) -> None:
    with pytest.raises(thirdparty.ThirdPartyError, match="KUEUE_VERSION is not set"):
        thirdparty.kueue_manifests({})


def test_the_pinned_versions_and_the_wrapper_module_agree_on_kueue(thirdparty: ModuleType) -> None:
    pinned = thirdparty.read_versions()["KUEUE_VERSION"]
    go_mod = (ROOT / "hack" / "tools" / "kueue" / "go.mod").read_text()
    assert f"sigs.k8s.io/kueue {pinned}" in go_mod


# --- Kueue in the kind cluster ---------------------------------------------------------------------------

QUEUED = {"matchExpressions": [{"key": "kueue.x-k8s.io/queue-name", "operator": "Exists"}]}


def test_in_kind_every_job_webhook_selects_queued_objects_and_kueues_own_kinds_keep_theirs(
    manifests: Path,
) -> None:
    patches = kueue.kind_webhook_patches(manifests)
    selected = {
        p["metadata"]["name"]: {h["name"]: h["objectSelector"] for h in p["webhooks"]} for p in patches
    }
    assert selected == {
        "kueue-mutating-webhook-configuration": {
            "mjobset.kb.io": QUEUED,
            "mpod.kb.io": QUEUED,
            "mtrainjob.kb.io": QUEUED,
        },
        "kueue-validating-webhook-configuration": {"vdeployment.kb.io": QUEUED},
    }


def test_the_kind_overlay_changes_kueues_image_integrations_cpu_and_job_webhooks_only(
    manifests: Path, tmp_path: Path
) -> None:
    module = tmp_path / "kueue@v0.17.0"
    (module / "config/components/webhook").mkdir(parents=True)
    (module / "config/components/manager").mkdir(parents=True)
    (module / "config/default").mkdir(parents=True)
    (module / "config/components/webhook/manifests.yaml").write_text(manifests.read_text())
    shipped = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": True},
        "integrations": {"frameworks": ["batch/job", "pod"], "externalFrameworks": ["Foo.v1.example.com"]},
    }
    (module / "config/components/manager/controller_manager_config.yaml").write_text(yaml.safe_dump(shipped))

    def overlay(frameworks: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
        directory = kueue.write_kind_overlay(
            tmp_path / "overlay",
            module_dir=module,
            image="trainer-e2e/kueue:v0.17.0-abc",
            frameworks=frameworks,
        )
        kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
        configuration = yaml.safe_load((directory / kueue.KIND_CONFIG_KEY).read_text())
        return kustomization, configuration

    kustomization, configuration = overlay(kueue.KUEUE_FRAMEWORKS)
    assert kustomization["resources"] == ["../kueue@v0.17.0/config/default"]  # relative: kustomize's rule
    assert kustomization["images"] == [
        {"name": kueue.KIND_RELEASED_IMAGE, "newName": "trainer-e2e/kueue", "newTag": "v0.17.0-abc"}
    ]
    assert configuration == {
        **shipped,
        "integrations": {
            "frameworks": ["trainer.kubeflow.org/trainjob"],
            "externalFrameworks": ["Foo.v1.example.com"],
        },
    }
    deployment_patch = yaml.safe_load(kustomization["patches"][0]["patch"])
    assert [(op["path"], op["value"]) for op in deployment_patch][:2] == [
        ("/spec/template/spec/containers/0/imagePullPolicy", "IfNotPresent"),
        ("/spec/template/spec/containers/0/resources/requests/cpu", kueue.KIND_MANAGER_CPU),
    ]
    first_hash = deployment_patch[2]["value"]
    assert [p["path"] for p in kustomization["patches"][1:]] == [
        "kueue-mutating-webhook-configuration.yaml",
        "kueue-validating-webhook-configuration.yaml",
    ]
    # Another Configuration, another pod template: applying it rolls Kueue, which reads it only at start.
    kustomization, configuration = overlay(("batch/job",))
    assert configuration["integrations"]["frameworks"] == ["batch/job"]
    assert yaml.safe_load(kustomization["patches"][0]["patch"])[2]["value"] != first_hash
