"""What only real kubelets show: training Pods that really rendezvous, and the manager as users install it.

kind only (``E2E_CLUSTER=kind``, after ``hack/e2e-setup-kind.sh``); on kwok every test here skips. The
manager is the Deployment that Helm or kustomize installed (``E2E_INSTALL`` says which), running the image
built from the Dockerfile, with two replicas.

- **Rendezvous.** A TrainingRuntime with the Torch policy runs ``test/e2e/workload/allreduce.py`` (image
  ``WORKLOAD_IMAGE``) in each node: rank 0 listens on ``PET_MASTER_PORT``, the others reach it at
  ``PET_MASTER_ADDR`` through the JobSet's headless Service, and the job completes only when every rank
  got the right sum. Its three Pods are spread over the workers (two and one), and the test checks that
  they ran on two nodes: the ranks met across the Pod network. The same runtime with the master's address
  overridden to a name that does not resolve fails, so the first test cannot pass on a wrong env or DNS
  name.
- **The installed manager.** The webhooks are addressed to the Service and carry the CA that the manager's
  rotator keeps in its Secret; metrics are served over HTTPS to a bearer token allowed ``GET /metrics``
  and refused without one (scraped from a Pod, as Prometheus would); both replicas are Ready, one holds
  the Lease, and when its Pod is deleted the other takes over and reconciles a new TrainJob.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from controller.client.client import Client
from runtime.api import constants
from support import allreduce_runtime as allreduce
from support import e2e_paths as paths
from support import kind_jobs
from support.kind_jobs import (
    TIMEOUT,
    assert_on_distinct_nodes,
    create,
    skip_unless_kind,
    spread_over_nodes,
    trainjob,
    wait_finished,
)

ROOT = Path(__file__).resolve().parents[2]

MANAGER_NAMESPACE = paths.MANAGER_NAMESPACE
MANAGER_NAME = paths.MANAGER_NAME
MANAGER_SELECTOR = "app.kubernetes.io/name=trainer,app.kubernetes.io/component=manager"
CERT_SECRET = "kubeflow-trainer-webhook-cert"
LEASE_NAME = "trainer.kubeflow.org"


@pytest.fixture(scope="module", autouse=True)
def on_kind(e2e_cluster: Any) -> None:
    skip_unless_kind(e2e_cluster, "real Pods and the installed Deployment")


@pytest.fixture(scope="module")
def workload_image(on_kind: None) -> str:
    return kind_jobs.workload_image()


@pytest.fixture(scope="module")
def client(e2e_cluster: Any) -> Iterator[Client]:
    c = Client.load(str(e2e_cluster.kubeconfig), user_agent="test_kind")
    try:
        yield c
    finally:
        c.close()


# ------------------------------------------------------------------------------------------- rendezvous


def test_kind_allreduce_on_three_nodes_completes_through_the_headless_service(
    e2e_cluster: Any, namespace: str, workload_image: str, eventually: Callable[..., Any]
) -> None:
    runtime = allreduce.allreduce_runtime("allreduce", workload_image, command=["python3", "allreduce.py"])
    create(e2e_cluster, namespace, spread_over_nodes(runtime))
    create(e2e_cluster, namespace, trainjob("sum", "allreduce", num_nodes=3))

    logs: dict[str, str] = {}
    nodes: dict[str, str] = {}
    condition = wait_finished(e2e_cluster, namespace, "sum", eventually, logs, nodes=nodes)
    assert condition["type"] == "Complete", (condition, logs)
    # Every rank of 3 got the sum of [r + 1, (r + 1) ** 2] over r = 0, 1, 2, from rank 0 at the
    # master address the Torch plugin set: node 0's Pod under the JobSet's headless Service.
    lines = sorted(
        line for text in logs.values() for line in text.splitlines() if line.startswith("allreduce:")
    )
    assert [line.split(" via ")[0] for line in lines] == [
        f"allreduce: rank {rank} of 3" for rank in range(3)
    ], logs
    master = f"sum-{constants.NODE}-0-0.sum"
    assert all(f"via {master}:{constants.CONTAINER_TRAINER_PORT}: sum [6, 14]" in line for line in lines), (
        lines
    )
    assert_on_distinct_nodes(namespace, "sum", nodes)


def test_kind_allreduce_with_a_master_address_that_does_not_resolve_fails(
    e2e_cluster: Any, namespace: str, workload_image: str, eventually: Callable[..., Any]
) -> None:
    # The same program, told another master name: the ranks cannot meet, so the TrainJob must fail.
    command = ["env", "PET_MASTER_ADDR=nobody.invalid", "ALLREDUCE_TIMEOUT=15", "python3", "allreduce.py"]
    runtime = allreduce.allreduce_runtime("allreduce-lost", workload_image, command=command)
    job = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    job["backoffLimit"] = 0
    # Never, not JobSet's default OnFailure: a container restarted in place takes its first log with it, and
    # the Job deletes the Pod once that restart exhausts the backoff limit. A Failed Pod stays, log and all.
    job["template"]["spec"]["restartPolicy"] = "Never"
    create(e2e_cluster, namespace, runtime)
    create(e2e_cluster, namespace, trainjob("lost", "allreduce-lost", num_nodes=2))

    logs: dict[str, str] = {}
    condition = wait_finished(e2e_cluster, namespace, "lost", eventually, logs)
    assert condition["type"] == "Failed", condition
    assert any(
        f"could not reach nobody.invalid:{constants.CONTAINER_TRAINER_PORT}" in text for text in logs.values()
    ), logs


# ----------------------------------------------------------------------------------- the installed manager


def test_kind_webhooks_go_through_the_service_with_the_rotators_ca(e2e_cluster: Any, client: Client) -> None:
    secret = e2e_cluster.core.read_namespaced_secret(CERT_SECRET, MANAGER_NAMESPACE)
    ca = base64.b64decode(secret.data["ca.crt"])
    assert ca.startswith(b"-----BEGIN CERTIFICATE-----")
    admission = kubernetes.client.AdmissionregistrationV1Api(e2e_cluster.api)
    configurations = [
        *admission.list_validating_webhook_configuration().items,
        *admission.list_mutating_webhook_configuration().items,
    ]
    ours = [
        c for c in configurations if any(w.name.endswith(".trainer.kubeflow.org") for w in c.webhooks or [])
    ]
    assert ours, [c.metadata.name for c in configurations]
    for configuration in ours:
        for webhook in configuration.webhooks:
            service = webhook.client_config.service
            assert (service.namespace, service.name, service.port) == (MANAGER_NAMESPACE, MANAGER_NAME, 443)
            assert base64.b64decode(webhook.client_config.ca_bundle) == ca, webhook.name
    # And kube-apiserver reaches them there: a TrainJob the validating webhook refuses, by field.
    assert paths.webhook_serving(paths.webhook_answer(client)), "the validating webhook did not answer"


SCRAPER = """
import ssl, urllib.request, urllib.error
url = "https://{service}.{namespace}.svc:8443/metrics"
context = ssl.create_default_context(cafile="/ca/ca.crt")
token = open("/var/run/secrets/kubernetes.io/serviceaccount/token").read().strip()
for label, headers in (("anonymous", {{}}), ("token", {{"Authorization": "Bearer " + token}})):
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            samples = [line for line in response.read().decode().splitlines() if line and line[0] != "#"]
            names = sorted({{line.split("{{")[0].split(" ")[0] for line in samples}})
            print(label, response.status, " ".join(names))
    except urllib.error.HTTPError as e:
        print(label, e.code)
"""


def test_kind_metrics_are_served_over_https_to_a_token_allowed_to_read_them(
    e2e_cluster: Any, namespace: str, workload_image: str, eventually: Callable[..., Any]
) -> None:
    rbac = kubernetes.client.RbacAuthorizationV1Api(e2e_cluster.api)
    role = f"{namespace}-metrics"
    rbac.create_cluster_role(
        {"metadata": {"name": role}, "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}
    )
    try:
        rbac.create_cluster_role_binding(
            {
                "metadata": {"name": role},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": namespace}],
            }
        )
        core = e2e_cluster.core
        core.create_namespaced_service_account(namespace, {"metadata": {"name": "scraper"}})
        ca = base64.b64decode(core.read_namespaced_secret(CERT_SECRET, MANAGER_NAMESPACE).data["ca.crt"])
        core.create_namespaced_config_map(
            namespace, {"metadata": {"name": "ca"}, "data": {"ca.crt": ca.decode()}}
        )
        script = SCRAPER.format(service=MANAGER_NAME, namespace=MANAGER_NAMESPACE)
        core.create_namespaced_pod(
            namespace,
            {
                "metadata": {"name": "scraper"},
                "spec": {
                    "serviceAccountName": "scraper",
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "scrape",
                            "image": workload_image,
                            "command": ["python3", "-c", script],
                            "volumeMounts": [{"name": "ca", "mountPath": "/ca"}],
                        }
                    ],
                    "volumes": [{"name": "ca", "configMap": {"name": "ca"}}],
                },
            },
        )

        def scraped() -> str:
            pod = core.read_namespaced_pod("scraper", namespace)
            assert pod.status.phase in {"Succeeded", "Failed"}, pod.status.phase
            assert pod.status.phase == "Succeeded", core.read_namespaced_pod_log("scraper", namespace)
            return str(core.read_namespaced_pod_log("scraper", namespace))

        lines = dict(line.split(" ", 1) for line in eventually(scraped, timeout=TIMEOUT).splitlines())
        assert lines["anonymous"] == "401", lines
        status, names = lines["token"].split(" ", 1)
        assert status == "200", lines
        # Whichever replica the Service picked: what leader and follower both export.
        for metric in (
            "leader_election_master_status",
            "controller_runtime_webhook_requests_total",
            "python_info",
        ):
            assert metric in names.split(), names
    finally:
        for delete in (rbac.delete_cluster_role_binding, rbac.delete_cluster_role):
            try:
                delete(role)
            except kubernetes.client.ApiException as exc:
                if exc.status != 404:
                    raise


def manager_pods(e2e_cluster: Any) -> list[Any]:
    pods = e2e_cluster.core.list_namespaced_pod(MANAGER_NAMESPACE, label_selector=MANAGER_SELECTOR).items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


def ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def lease_holder(e2e_cluster: Any) -> str:
    coordination = kubernetes.client.CoordinationV1Api(e2e_cluster.api)
    holder = coordination.read_namespaced_lease(LEASE_NAME, MANAGER_NAMESPACE).spec.holder_identity or ""
    return str(holder)


def test_kind_two_ready_replicas_and_a_leader_change_keeps_reconciling(
    e2e_cluster: Any, namespace: str, eventually: Callable[..., Any]
) -> None:
    def both_ready() -> list[str]:
        pods = manager_pods(e2e_cluster)
        assert len(pods) == 2 and all(ready(p) for p in pods), [(p.metadata.name, ready(p)) for p in pods]
        return [p.metadata.name for p in pods]

    names = eventually(both_ready, timeout=TIMEOUT)

    def holder_is_a_replica() -> str:
        holder = lease_holder(e2e_cluster)
        assert any(holder.startswith(name) for name in names), (holder, names)
        return holder

    leader = eventually(holder_is_a_replica, timeout=TIMEOUT)
    leader_pod = next(name for name in names if leader.startswith(name))
    started = time.monotonic()
    e2e_cluster.core.delete_namespaced_pod(leader_pod, MANAGER_NAMESPACE, grace_period_seconds=0)

    def taken_over() -> str:
        # The follower, or the replica the Deployment starts in the deleted one's place: a live Pod
        # other than the old leader.
        holder = lease_holder(e2e_cluster)
        live = [p.metadata.name for p in manager_pods(e2e_cluster) if p.metadata.name != leader_pod]
        assert any(holder.startswith(name) for name in live), (holder, live)
        return holder

    holder = eventually(taken_over, timeout=TIMEOUT)
    print(f"leader change: {leader_pod} -> {holder} in {time.monotonic() - started:.1f} s")

    # The new leader reconciles: a suspended TrainJob gets its JobSet.
    job = trainjob("after-failover", "torch-distributed", num_nodes=1)
    job["spec"]["runtimeRef"]["kind"] = constants.CLUSTER_TRAINING_RUNTIME_KIND
    job["spec"]["suspend"] = True
    create(e2e_cluster, namespace, job)
    custom = e2e_cluster.custom

    def jobset_exists() -> None:
        try:
            custom.get_namespaced_custom_object(
                "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", "after-failover"
            )
        except kubernetes.client.ApiException as exc:
            assert exc.status != 404, "no JobSet for the TrainJob created after the leader change"
            raise

    eventually(jobset_exists, timeout=TIMEOUT)
    # And the Deployment is back to two Ready replicas for whatever runs next.
    eventually(both_ready, timeout=TIMEOUT)
