"""The JobSet controller (the ``jobset`` binary) as a host process of the kwok cluster, and its webhooks.

No leader election, metrics off, health probe and webhook server on free loopback ports, a serving
certificate from a throwaway CA (``controller.envtest.certs``), and URL-based webhook configurations pointing
at it (:func:`webhook_configurations`). The pod webhooks get the ``jobset.sigs.k8s.io/jobset-name Exists``
object selector that JobSet's kustomize patches add, so pods that are not JobSet's never depend on the JobSet
process. Like the rest of the cluster, it outlives the process that started it; ``support.kwok.down``
stops it.

Go origin: JobSet's minimal install (``config/components/webhook``) rewired for a controller outside the
cluster. Deliberately missing: JobSet's metrics endpoint and leader election (one replica).
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from controller.envtest.certs import CertificateAuthority
from controller.envtest.process import free_port
from support.process import PORT_RACE, ClusterError, http_ok, say, tail_file, terminate, write_yaml

if TYPE_CHECKING:
    from support.kwok import Kubectl

JOBSET_GROUP = "jobset.x-k8s.io"
JOBSET_CRD = f"jobsets.{JOBSET_GROUP}"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"


def webhook_configurations(module_dir: Path, *, port: int, ca_bundle: bytes) -> list[dict[str, Any]]:
    """JobSet's webhook configurations, rewired to a URL on 127.0.0.1.

    Read from ``config/components/webhook/`` in the module: the configurations and each webhook's path and
    rules from ``manifests.yaml``, object selectors from the kustomize patches (``patches/*.yaml``). Names
    get kustomize's ``jobset-`` prefix, as in a release install. A pod webhook that no patch gives a
    selector still gets ``jobset.sigs.k8s.io/jobset-name Exists``.
    """
    webhook_dir = module_dir / "config" / "components" / "webhook"
    manifests = [d for d in yaml.safe_load_all((webhook_dir / "manifests.yaml").read_text()) if d]
    selectors: dict[str, Any] = {}
    for patch_file in sorted((webhook_dir / "patches").glob("*.yaml")):
        for op in yaml.safe_load(patch_file.read_text()) or []:
            value = op.get("value") if isinstance(op, dict) else None
            if isinstance(value, dict) and value.get("name") and value.get("objectSelector"):
                selectors[value["name"]] = value["objectSelector"]
    default_pod_selector = {"matchExpressions": [{"key": JOBSET_NAME_LABEL, "operator": "Exists"}]}
    bundle = base64.b64encode(ca_bundle).decode()
    out = []
    for doc in manifests:
        if doc.get("kind") not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            continue
        webhooks = []
        for original in doc.get("webhooks", []):
            path = original["clientConfig"]["service"]["path"]
            hook = {
                **original,
                "clientConfig": {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle},
            }
            if hook["name"] in selectors:
                hook["objectSelector"] = selectors[hook["name"]]
            elif any("pods" in rule.get("resources", []) for rule in hook.get("rules", [])):
                hook["objectSelector"] = default_pod_selector
            hook.setdefault("timeoutSeconds", 10)
            webhooks.append(hook)
        out.append(
            {
                "apiVersion": doc["apiVersion"],
                "kind": doc["kind"],
                "metadata": {"name": f"jobset-{doc['metadata']['name']}"},
                "webhooks": webhooks,
            }
        )
    if not out:
        raise ClusterError(f"no webhook configurations in {webhook_dir / 'manifests.yaml'}")
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class JobSetProcess:
    pid: int
    health_port: int
    webhook_port: int
    ca_pem: bytes
    log: Path


def ready(health_port: int) -> bool:
    """JobSet's ``/readyz`` answers 200."""
    return http_ok(f"http://127.0.0.1:{health_port}/readyz")


def start(binary: Path, kubeconfig: Path, directory: Path, timeout: float) -> JobSetProcess:
    """Start the JobSet controller on the host and wait for its /readyz; retry when a port was taken."""
    jobset_dir = directory / "jobset"
    cert_dir = jobset_dir / "certs"
    ca = CertificateAuthority.new("trainer-e2e-jobset-webhook-ca")
    ca_path = jobset_dir / "ca.crt"
    ca.issue_serving(["127.0.0.1", "localhost"]).write(cert_dir, "tls.crt", "tls.key")
    ca_path.write_bytes(ca.cert_pem)
    log = jobset_dir / "jobset.log"
    for attempt in range(1, 4):
        health, webhook = free_port(), free_port()
        config = {
            "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
            "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"host": "127.0.0.1", "port": webhook, "certDir": str(cert_dir)},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
            "metrics": {"bindAddress": "0"},
        }
        config_path = write_yaml(jobset_dir / "config.yaml", [config])
        argv = [
            str(binary),
            f"--kubeconfig={kubeconfig}",
            f"--config={config_path}",
            "--leader-elect=false",
            "--metrics-bind-address=0",
            f"--health-probe-bind-address=127.0.0.1:{health}",
        ]
        with log.open("ab") as out:
            out.write(f"\n--- start attempt {attempt}: {' '.join(argv)}\n".encode())
            out.flush()
            # A session of its own: the controller outlives `hack/cluster.py up`, and a Ctrl-C in the
            # terminal that ran `up` does not reach it (`down` stops it).
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline and not ready(health):
            time.sleep(0.2)
        if proc.poll() is None and ready(health):
            return JobSetProcess(
                pid=proc.pid, health_port=health, webhook_port=webhook, ca_pem=ca.cert_pem, log=log
            )
        if proc.poll() is None:
            terminate([proc.pid])
            raise ClusterError(f"JobSet was not ready within {timeout:.0f} s; {log}:\n{tail_file(log)}")
        tail = tail_file(log)
        if not PORT_RACE.search(tail):
            raise ClusterError(f"JobSet exited with code {proc.returncode}; {log}:\n{tail}")
        say(f"JobSet lost a port race (attempt {attempt}); retrying with new ports")
    raise ClusterError(f"JobSet could not bind its ports in 3 attempts; {log}:\n{tail_file(log)}")


PROBE_JOBSET = {
    "apiVersion": f"{JOBSET_GROUP}/v1alpha2",
    "kind": "JobSet",
    "metadata": {"name": "webhook-probe", "namespace": "default"},
    "spec": {
        "replicatedJobs": [
            {
                "name": "probe",
                "template": {
                    "spec": {
                        "template": {
                            "spec": {"containers": [{"name": "c", "image": "registry.invalid/none"}]}
                        }
                    }
                },
            }
        ]
    },
}


def webhooks_serving(kubectl: Kubectl) -> bool:
    """True once kube-apiserver calls JobSet's mutating webhook: a server-side dry run is defaulted."""
    argv = [
        str(kubectl.binary),
        f"--kubeconfig={kubectl.kubeconfig}",
        "create",
        "--dry-run=server",
        "-o",
        "json",
        "-f",
        "-",
    ]
    result = subprocess.run(argv, input=json.dumps(PROBE_JOBSET), capture_output=True, text=True, check=False)
    if result.returncode != 0:
        return False
    spec = json.loads(result.stdout).get("spec", {})
    return bool(spec.get("successPolicy", {}).get("operator"))


# ------------------------------------------------------------------------------------------ up / down / env
