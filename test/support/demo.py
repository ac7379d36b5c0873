"""``make demo``: the kwok cluster, the Trainer installed, our manager on the host, and a sample TrainJob run
to Complete while its progress is printed.

What :func:`demo` does, each step idempotent: bring the cluster up if needed and show it healthy
(``support.kwok``); install the Trainer CRDs, the manager's namespace, ServiceAccount and RBAC
(``support.install``); (re)start the manager as a host process and register its webhooks
(``support.cluster_manager``); install the default ClusterTrainingRuntimes through its validating webhook;
replace the sample TrainJob ``examples/trainjob-torch.yaml`` in namespace ``demo`` and everything it owned,
create it, and print one line whenever its conditions, JobSet or pods change, until it finishes. Everything
is left running; ``make cluster-down`` stops it.

Go origin: none. Deliberately missing: anything the cluster lacks (``support.kwok``): containers do not run,
pod status comes from kwok's stages.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

from controller.client.client import Client
from controller.client.errors import AlreadyExists, NoKindMatch, NotFound
from controller.client.gvk import GVK
from runtime.api import constants
from runtime.api.v1alpha1 import TrainJob
from runtime.api.views import TrainJobView
from support import jobset, kwok
from support.cluster_manager import start_manager
from support.install import (
    JOBSET_GVK,
    MANAGER_NAMESPACE,
    MANAGER_SERVICE_ACCOUNT,
    OWNED_GVKS,
    POD_GVK,
    TRAINJOB_GVK,
    clear_trainjob,
    connect,
    controlled_by_trainjob,
    create_trainjob,
    finished_condition,
    install_for_local_manager,
    install_runtimes,
    read_manifests,
)
from support.jobset import JOBSET_NAME_LABEL
from support.kwok import DEFAULT_NAME, REPO, ClusterOptions, ClusterState, Kubectl, env_lines, up
from support.process import ClusterError, pid_alive, wait_for

DEMO_TRAINJOB = REPO / "examples" / "trainjob-torch.yaml"
DEMO_NAMESPACE = "demo"


def _describe(obj: Mapping[str, Any]) -> str:
    metadata = obj["metadata"]
    where = f"{metadata['namespace']}/" if metadata.get("namespace") else ""
    return f"{obj['kind']} {where}{metadata['name']}"


def _show_health(name: str, state: ClusterState, kubectl: Kubectl, *, reused: bool) -> None:
    if reused:  # a re-run: say so rather than report the old start-up time as if it had just happened
        age = max(0, int(time.time() - state.started_at))
        since = f"{age // 3600} h {age % 3600 // 60} min" if age >= 3600 else f"{age // 60} min {age % 60} s"
        started = f"already running, reused: started {since} ago, not restarted"
    else:
        started = f"started now in {state.start_seconds:.1f} s"
    print(f"\n== Tier 2 cluster {name!r} (API server {state.server}; {started})")
    print(kubectl("get", "nodes", "-o", "wide").rstrip())
    print("\n== Health")
    readyz = kubectl("get", "--raw=/readyz?verbose")
    print(f"kube-apiserver   {readyz.strip().splitlines()[-1]} ({readyz.count('[+]')} checks passed)")
    leases = {
        lease["metadata"]["name"]: lease["spec"].get("holderIdentity", "")
        for lease in kubectl.get_json("leases", "-n", "kube-system").get("items", [])
    }
    for component, pid in kwok.component_pids(name).items():
        holder = leases.get(component)
        leader = f"; leader lease held by {holder.split('_')[0]}" if holder else ""
        print(f"{component:<24} pid {pid:<7} {'running' if pid_alive(pid) else 'DEAD'}{leader}")
    ready = "ready" if jobset.ready(state.jobset_health_port) else "NOT READY"
    print(
        f"{'jobset-controller':<24} pid {state.jobset_pid:<7} {ready}; "
        f"webhooks at https://127.0.0.1:{state.jobset_webhook_port}"
    )


def _conditions_line(conditions: Sequence[Mapping[str, Any]]) -> str:
    return (
        "; ".join(
            f"{c['type']}={c['status']} ({c.get('reason', '')}: {c.get('message', '')})" for c in conditions
        )
        or "none"
    )


def _jobs_line(jobs: Sequence[Mapping[str, Any]]) -> str:
    counters = ("active", "ready", "succeeded", "failed", "suspended")
    return (
        "; ".join(f"{j['name']}: " + ", ".join(f"{k} {j.get(k, 0)}" for k in counters) for j in jobs)
        or "none"
    )


def _pods_line(pods: Sequence[Mapping[str, Any]]) -> str:
    phases: dict[str, int] = {}
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        phases[phase] = phases.get(phase, 0) + 1
    return ", ".join(f"{n} {phase}" for phase, n in sorted(phases.items())) or "none"


def _progress_line(client: Client, namespace: str, name: str) -> tuple[str, dict[str, Any]]:
    """One line on where the TrainJob stands: its conditions, its JobSet and its pods."""
    trainjob = client.get(TRAINJOB_GVK, name, namespace)
    view = TrainJobView(cast(TrainJob, trainjob))
    try:
        jobset = client.get(JOBSET_GVK, name, namespace)
        jobset_text = finished_condition(jobset, ("Completed", "Failed")) or (
            "suspended" if jobset["spec"].get("suspend") else "running"
        )
    except NotFound:
        jobset_text = "not created"
    pods = client.list(POD_GVK, namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}").items
    line = (
        f"conditions: {_conditions_line(view.conditions)} | JobSet: {jobset_text} | pods: {_pods_line(pods)}"
    )
    return line, trainjob


def demo(name: str = DEFAULT_NAME) -> None:
    """Bring the cluster up if needed and show it healthy; install the Trainer API; (re)start the manager;
    submit the sample TrainJob and show its progress until it finishes; leave it all running."""
    requested = time.time()
    state = up(ClusterOptions(name=name))
    kubectl = state.kubectl_runner()
    _show_health(name, state, kubectl, reused=state.started_at < requested)
    manifests = read_manifests(DEMO_TRAINJOB, (constants.TRAINJOB_KIND,))
    if len(manifests) != 1:
        raise ClusterError(f"{DEMO_TRAINJOB} must hold exactly one TrainJob")
    trainjob_name, namespace = manifests[0]["metadata"]["name"], DEMO_NAMESPACE

    client = connect(state)
    try:
        print("\n== Trainer API and the manager's RBAC (kubectl apply --server-side -k config/local)")
        crds = install_for_local_manager(state)
        print(f"CRDs Established: {', '.join(crds)}")
        account = f"{MANAGER_NAMESPACE}/{MANAGER_SERVICE_ACCOUNT}"
        print(f"ServiceAccount {account} with the shipped ClusterRole and Roles")

        print("\n== The Trainer controller manager")
        with contextlib.suppress(AlreadyExists):
            client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        started = time.monotonic()
        manager = start_manager(state)
        print(
            f"trainer-controller-manager pid {manager.pid}: ready in {time.monotonic() - started:.1f} s, "
            f"authenticated as its ServiceAccount (caches synced; leader of Lease "
            f"{MANAGER_NAMESPACE}/trainer.kubeflow.org); its admission webhooks are registered"
        )
        print(f"log: {manager.log}")

        runtimes = install_runtimes(client)  # through the manager's validating webhook
        print(f"ClusterTrainingRuntimes: {', '.join(r.split('/', 1)[1] for r in runtimes)}")

        print(f"\n== TrainJob {namespace}/{trainjob_name} from {DEMO_TRAINJOB.relative_to(REPO)}")
        clear_trainjob(client, namespace, trainjob_name)  # replace the TrainJob a previous run left
        wait_for(
            lambda: bool(client.list(GVK("", "v1", "ServiceAccount"), namespace).items),
            timeout=60,
            what=f"the default ServiceAccount in {namespace}",
        )
        created = create_trainjob(client, manifests[0], namespace)
        print(f"created with uid {created['metadata']['uid']}; the manager takes it from here")
        started = time.monotonic()
        last, trainjob = "", created
        view = TrainJobView(cast(TrainJob, trainjob))
        while time.monotonic() - started < 180:
            line, trainjob = _progress_line(client, namespace, trainjob_name)
            if line != last:
                print(f"{time.monotonic() - started:6.1f} s  {line}")
                last = line
            view = TrainJobView(cast(TrainJob, trainjob))
            if view.is_finished:
                break
            time.sleep(0.5)
        elapsed = time.monotonic() - started
        owned = [
            f"{o['kind']}/{o['metadata']['name']}"
            for gvk in (JOBSET_GVK, *OWNED_GVKS)
            for o in _list_quietly(client, gvk, namespace)
            if controlled_by_trainjob(o, trainjob_name)
        ]
    finally:
        client.close()

    print(kubectl("get", "trainjob", trainjob_name, "-n", namespace).rstrip())
    print(f"jobsStatus: {_jobs_line(view.jobs_status)}")
    print(f"owned by the TrainJob: {', '.join(owned)}")
    outcome = "Complete" if view.is_complete else "Failed" if view.is_failed else "not finished"
    print("\n== Summary")
    print(f"TrainJob {namespace}/{trainjob_name}: {outcome} {elapsed:.1f} s after it was created.")
    print("\nThe cluster and the manager keep running. Look around with:")
    for line in env_lines(name):
        print(f"  {line}")
    print(f"  kubectl get trainjobs,jobsets,pods -n {namespace}")
    print(f"  kubectl describe trainjob {trainjob_name} -n {namespace}     # conditions and events")
    print(f"  curl -s {manager.metrics_url} | grep -E '^(kubeflow_trainer|controller_runtime_reconcile)'")
    print(f"  tail -f {manager.log}")
    print("Stop everything with:  make cluster-down")
    if not view.is_complete:
        raise ClusterError(f"the demo TrainJob ended {outcome}, not Complete; see {manager.log}")


def _list_quietly(client: Client, gvk: GVK, namespace: str) -> list[dict[str, Any]]:
    try:
        return list(client.list(gvk, namespace).items)
    except (NoKindMatch, NotFound):
        return []


# --------------------------------------------------------------------------------------------- command line
