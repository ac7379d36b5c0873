"""``helm install`` of ``charts/kubeflow-trainer-py`` into a bare API server, and ``helm uninstall``.

A plane of its own (etcd + kube-apiserver, nothing installed): the chart's webhook configurations fail
closed and name a Service with no Pod behind it here, so they must not reach the shared plane. Asserted on
the server, not on Helm's output:

- the CRDs of ``crds/`` are created with server-side apply by Helm 4 (their managedFields say ``Apply``,
  manager ``helm``) and are established, though each runtime CRD is far beyond the 256 KiB a client-side
  apply's annotation may hold; the default runtimes (templates) are created in the same install;
- every object ``helm template`` renders exists, in the release namespace;
- the release record (the Secret ``sh.helm.release.v1.<release>.v1``: the gzipped chart and rendered
  manifest) fits the 1 MiB limit on a Secret's data, with the CRDs stored once (in the chart); the three
  CRDs alone as templates (stored twice, in the chart and in the manifest) make a record half again as large;
- ``helm upgrade`` leaves the certificates the rotator wrote into the shipped-empty Secret alone;
- ``helm uninstall`` deletes every templated object and keeps the CRDs (and so every TrainJob).

The manager does not run (Tier 1 has no kubelet); the Deployment is only created.
"""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.envtest import Binaries, ControlPlane
from support import helm as _binary

ROOT = Path(__file__).resolve().parents[2]
RELEASE = "kubeflow-trainer"
NAMESPACE = "kubeflow-system"
SECRET_LIMIT = 1024 * 1024
GROUP = "trainer.kubeflow.org"
ANNOTATION_LIMIT = 256 * 1024


Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def plane(envtest_binaries: Binaries) -> Iterator[ControlPlane]:
    with ControlPlane(envtest_binaries) as started:
        yield started


@pytest.fixture(scope="module")
def helm(prerequisite: Any, plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Run:
    path = _binary.ensure_helm(prerequisite)
    env = _binary.helm_env(tmp_path_factory.mktemp("helm-home"))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(path), *args, "--kubeconfig", str(plane.kubeconfig)],
            capture_output=True, text=True, timeout=300, env=env, check=False,
        )  # fmt: skip

    return run


@pytest.fixture(scope="module")
def kubectl(envtest_binaries: Binaries, plane: ControlPlane) -> Run:
    path = envtest_binaries.kube_apiserver.parent / "kubectl"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(path), "--kubeconfig", str(plane.kubeconfig), *args],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    return run


VALUES = ("--set", "runtimes.defaultEnabled=true")


@pytest.fixture(scope="module")
def rendered(helm: Run, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The templated objects (no CRDs), as a file kubectl can read with ``get -f``."""
    done = helm("template", RELEASE, str(_binary.CHART), "--namespace", NAMESPACE, *VALUES)
    assert done.returncode == 0, done.stderr
    path = tmp_path_factory.mktemp("rendered") / "objects.yaml"
    path.write_text(done.stdout)
    return path


@pytest.fixture(scope="module")
def installed(helm: Run, rendered: Path) -> subprocess.CompletedProcess[str]:
    return helm(
        "install", RELEASE, str(_binary.CHART), "--namespace", NAMESPACE, "--create-namespace", *VALUES
    )


def get_json(kubectl: Run, *args: str) -> dict[str, Any]:
    done = kubectl("get", *args, "-o", "json", "--show-managed-fields")
    assert done.returncode == 0, done.stderr
    loaded: dict[str, Any] = json.loads(done.stdout)
    return loaded


def test_install_creates_the_crds_with_server_side_apply_and_establishes_them(
    installed: subprocess.CompletedProcess[str], kubectl: Run
) -> None:
    assert installed.returncode == 0, installed.stderr
    crds = get_json(kubectl, "crd")["items"]
    by_name = {c["metadata"]["name"]: c for c in crds}
    assert sorted(by_name) == [
        "clustertrainingruntimes.trainer.kubeflow.org",
        "trainingruntimes.trainer.kubeflow.org",
        "trainjobs.trainer.kubeflow.org",
    ]
    for name, crd in by_name.items():
        managers = {(m["manager"], m["operation"]) for m in crd["metadata"]["managedFields"]}
        assert ("helm", "Apply") in managers, (name, managers)
        assert "kubectl.kubernetes.io/last-applied-configuration" not in crd["metadata"].get(
            "annotations", {}
        )
        established = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert established.get("Established") == "True", name
    # What a client-side apply would have had to store in one annotation: the whole object, as JSON.
    runtime_crd = by_name["clustertrainingruntimes.trainer.kubeflow.org"]
    assert len(json.dumps(runtime_crd["spec"])) > ANNOTATION_LIMIT


def test_every_rendered_object_exists_in_the_release_namespace(
    installed: subprocess.CompletedProcess[str], kubectl: Run, rendered: Path
) -> None:
    assert installed.returncode == 0, installed.stderr
    expected = [d for d in yaml.safe_load_all(rendered.read_text()) if d]
    found = get_json(kubectl, "-f", str(rendered))
    items = found.get("items", [found])
    assert sorted((o["kind"], o["metadata"]["name"]) for o in items) == sorted(
        (o["kind"], o["metadata"]["name"]) for o in expected
    )
    assert {o["metadata"].get("namespace", NAMESPACE) for o in items} == {NAMESPACE}
    runtimes = [o for o in items if o["kind"] == "ClusterTrainingRuntime"]
    assert len(runtimes) == 8
    assert all(
        r["metadata"]["labels"]["trainer.kubeflow.org/webhook-validation"] == "disabled" for r in runtimes
    )


def record_size(kubectl: Run, namespace: str, release: str) -> int:
    """The bytes of the release record, the data of the Secret ``sh.helm.release.v1.<release>.v1``."""
    secret = get_json(kubectl, "-n", namespace, "secret", f"sh.helm.release.v1.{release}.v1")
    return len(base64.b64decode(secret["data"]["release"]))


def test_the_release_record_fits_a_secret_and_templated_crds_would_make_it_half_again_as_large(
    installed: subprocess.CompletedProcess[str],
    helm: Run,
    kubectl: Run,
    tmp_path: Path,
    record_property: Callable[[str, Any], None],
) -> None:
    assert installed.returncode == 0, installed.stderr
    ours = record_size(kubectl, NAMESPACE, RELEASE)
    # A chart with only the three CRDs, as templates, in a group of their own (no clash with the real ones).
    chart = tmp_path / "templated-crds"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: templated-crds\nversion: 0.1.0\n")
    for crd in sorted((_binary.CHART / "crds").iterdir()):
        (chart / "templates" / crd.name).write_text(crd.read_text().replace(GROUP, "templated.example.com"))
    done = helm(
        "install", "templated-crds", str(chart), "--namespace", "templated-crds", "--create-namespace"
    )
    assert done.returncode == 0, done.stderr
    templated = record_size(kubectl, "templated-crds", "templated-crds")
    record_property("helm_release_record_bytes", ours)
    record_property("helm_release_record_bytes_crds_as_templates_only", templated)
    print(f"release record: chart {ours} bytes; the CRDs alone as templates {templated} bytes")
    assert ours < SECRET_LIMIT
    assert templated > 1.4 * ours
    done = helm("uninstall", "templated-crds", "--namespace", "templated-crds", "--wait")
    assert done.returncode == 0, done.stderr
    assert "templated.example.com" not in kubectl("get", "crd", "-o", "name").stdout


def test_an_upgrade_keeps_the_certificates_the_rotator_wrote(
    installed: subprocess.CompletedProcess[str], helm: Run, kubectl: Run
) -> None:
    assert installed.returncode == 0, installed.stderr
    # What the rotator does (an update of the data, as another field manager), then a values change.
    pem = base64.b64encode(b"not really a certificate").decode()
    patch = json.dumps({"data": {"tls.crt": pem, "tls.key": pem, "ca.crt": pem}})
    done = kubectl("-n", NAMESPACE, "patch", "secret", "kubeflow-trainer-webhook-cert", "-p", patch)
    assert done.returncode == 0, done.stderr
    done = helm(
        "upgrade", RELEASE, str(_binary.CHART), "--namespace", NAMESPACE, "--reuse-values",
        "--set", "manager.replicas=2",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    deployment = get_json(kubectl, "-n", NAMESPACE, "deployment", "kubeflow-trainer-controller-manager")
    assert deployment["spec"]["replicas"] == 2
    secret = get_json(kubectl, "-n", NAMESPACE, "secret", "kubeflow-trainer-webhook-cert")
    assert secret["data"] == {"tls.crt": pem, "tls.key": pem, "ca.crt": pem}


def test_uninstall_deletes_every_templated_object_and_keeps_the_crds(
    installed: subprocess.CompletedProcess[str], helm: Run, kubectl: Run, rendered: Path
) -> None:
    assert installed.returncode == 0, installed.stderr
    done = helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait")
    assert done.returncode == 0, done.stderr
    left = kubectl("get", "-f", str(rendered), "--ignore-not-found", "-o", "name")
    assert left.returncode == 0, left.stderr
    assert left.stdout.split() == []
    crds = [c["metadata"]["name"] for c in get_json(kubectl, "crd")["items"]]
    assert sorted(c for c in crds if c.endswith(GROUP)) == [
        "clustertrainingruntimes.trainer.kubeflow.org",
        "trainingruntimes.trainer.kubeflow.org",
        "trainjobs.trainer.kubeflow.org",
    ]
