"""MPI on real Pods: a launcher's ``mpirun`` logs into the node Pods over SSH with what the MPI plugin wrote.

kind only (``E2E_CLUSTER=kind``, after ``hack/e2e-setup-kind.sh``, which loads the example images); on kwok
every test here skips. The runtime and the TrainJob are ``examples/trainjob-mpi.yaml``'s (the shipped
``deepspeed-distributed`` runtime with the image of ``examples/images/mpi/``: Debian's OpenMPI, mpi4py and
sshd, and no key, hostfile or MPI setting of its own). Its launcher runs ``mpirun python3 -c <all-reduce>``:
each rank adds ``rank + 1`` over ``MPI.COMM_WORLD`` and prints ``mpi: rank <r> of <n> on <host>: sum <s>``.

- ``runLauncherAsNode: true`` (the example as it is, three nodes): the hostfile lists both node Pods and the
  launcher, one slot each; mpirun runs one rank itself and logs into the two node Pods for the others.
- ``runLauncherAsNode: false``, two nodes of two slots: the hostfile lists only the node Pods; all four
  ranks run there, two per Pod.

- the launcher apart again, its ssh told (by mpirun's command line, which wins over the plugin's
  ``OMPI_MCA_plm_rsh_args``) to offer only a key it made itself: the nodes accept the Secret's key alone,
  so mpirun is refused and the TrainJob fails.

The three TrainJobs are created at once, in one namespace, and run side by side. Each one's Pods (launcher
and nodes) are spread over the workers, and a TrainJob that completes must have run on two nodes: mpirun's
ssh logins and the ranks' all-reduce crossed the Pod network between nodes.

Each test checks its TrainJob Complete, the hostfile ConfigMap the plugin wrote (its hosts are the
TrainJob's Pods under the JobSet's headless Service, its slots ``numProcPerNode``), the world the ranks saw
(the sum of the hostfile's slots, and ``numNodes * numProcPerNode``), the Pods they ran on (one rank per
slot of each host), and every rank's sum. Before mpirun the launcher prints the mode, owner and group of
the key files and the hostfile as mounted, which the test checks too: under the Pod's ``fsGroup`` the
kubelet adds group read to every file of a Secret volume, so ssh and sshd work with any mode the plugin
writes (0600 mounts as 0640), and only this check sees a key that others may read or the group may not.
So a wrong key mode, a hostfile naming hosts that do not resolve or are not the Pods, or slots that are not
``numProcPerNode`` each fail a test. The launcher never restarts and its Job allows no retry, so a broken
run fails at once with its log kept.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from controller import envtest
from runtime.api import constants
from support.kind_jobs import (
    assert_on_distinct_nodes,
    create,
    skip_unless_kind,
    spread_over_nodes,
    wait_finished,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "trainjob-mpi.yaml"
TIMEOUT = 180.0
RANK_LINE = "mpi: rank "
MOUNTED_LINE = "mounted: "
OWN_KEY = "/tmp/own-key"


@pytest.fixture(scope="module", autouse=True)
def on_kind(e2e_cluster: Any) -> None:
    skip_unless_kind(e2e_cluster, "real Pods running sshd and mpirun")


@pytest.fixture(scope="module")
def example() -> dict[str, dict[str, Any]]:
    """The example's documents by kind: its TrainingRuntime and its TrainJob."""
    documents = [d for d in yaml.safe_load_all(EXAMPLE.read_text(encoding="utf-8")) if d]
    return {d["kind"]: d for d in documents}


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    run_launcher_as_node: bool
    num_nodes: int
    num_proc_per_node: int
    own_key: bool = False
    """Whether the launcher's ssh offers a key of its own, not the Secret's (every node must refuse it)."""


CASES = {
    # The example as it is: the launcher and two nodes, one slot each.
    "mpi-as-node": Case(run_launcher_as_node=True, num_nodes=3, num_proc_per_node=1),
    # The launcher apart: two nodes of two slots.
    "mpi-apart": Case(run_launcher_as_node=False, num_nodes=2, num_proc_per_node=2),
    # The launcher apart, logging in with a key that is not the Secret's.
    "mpi-own-key": Case(run_launcher_as_node=False, num_nodes=2, num_proc_per_node=1, own_key=True),
}


# ------------------------------------------------------------------------------------------------ objects


def mpi_runtime(
    example: dict[str, dict[str, Any]], name: str, *, run_launcher_as_node: bool
) -> dict[str, Any]:
    """The example's runtime under another name, ``runLauncherAsNode`` as given, a launcher that fails at
    once (no retry of its Job, no restart of its container: a restarted container loses its log), and the
    Pods spread over the nodes."""
    runtime = copy.deepcopy(example[constants.TRAINING_RUNTIME_KIND])
    runtime["metadata"] = {"name": name}
    runtime["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"] = run_launcher_as_node
    for rjob in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        if rjob["name"] == constants.LAUNCHER:
            rjob["template"]["spec"]["backoffLimit"] = 0
            rjob["template"]["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    return spread_over_nodes(runtime)


def mpi_trainjob(example: dict[str, dict[str, Any]], name: str, case: Case) -> dict[str, Any]:
    """The example's TrainJob on runtime ``name``, with the case's counts."""
    trainjob = copy.deepcopy(example[constants.TRAINJOB_KIND])
    trainjob["metadata"] = {"name": name}
    trainjob["spec"]["runtimeRef"]["name"] = name
    trainer = trainjob["spec"]["trainer"]
    trainer["numNodes"] = case.num_nodes
    trainer["numProcPerNode"] = case.num_proc_per_node
    command = list(trainer["command"])
    assert command[0] == "mpirun", command
    if case.own_key:
        # ssh told to offer only a key the launcher made, not the Secret's: command-line MCA parameters
        # win over the plugin's OMPI_MCA_plm_rsh_args.
        rsh_args = f"-o ConnectionAttempts=10 -o IdentitiesOnly=yes -i {OWN_KEY}"
        command = [
            "sh",
            "-c",
            f"ssh-keygen -q -t ecdsa -N '' -f {OWN_KEY} && exec \"$@\"",
            "sh",
            "mpirun",
            "--mca",
            "plm_rsh_args",
            rsh_args,
            *command[1:],
        ]
    # Before mpirun, the launcher prints how the plugin's files are mounted: the keys where ssh looks for
    # them, the hostfile where mpirun is told it is.
    ssh = example[constants.TRAINING_RUNTIME_KIND]["spec"]["mlPolicy"]["mpi"]["sshAuthMountPath"]
    files = [f"{ssh}/id_rsa", f"{ssh}/id_rsa.pub", f"{ssh}/authorized_keys", "/etc/mpi/hostfile"]
    stat = f"stat -L -c '{MOUNTED_LINE}%n %a %u %g' {' '.join(files)} && exec \"$@\""
    trainer["command"] = ["sh", "-c", stat, "sh", *command]
    return trainjob


# ------------------------------------------------------------------------------------------- observation


def finished(
    e2e_cluster: Any,
    namespace: str,
    name: str,
    eventually: Callable[..., Any],
    nodes: dict[str, str] | None = None,
) -> tuple[str, str]:
    """The TrainJob's final condition type (Complete or Failed) and its launcher's log, read as soon as
    the launcher's container ended (a failed JobSet's Pods may be gone when the TrainJob says Failed);
    ``nodes`` gets the node of each of its Pods."""
    logs: dict[str, str] = {}
    condition = wait_finished(
        e2e_cluster,
        namespace,
        name,
        eventually,
        logs,
        replicated_job=constants.LAUNCHER,
        nodes=nodes,
        timeout=TIMEOUT,
    )
    return str(condition["type"]), "".join(logs.values())


def hostfile(e2e_cluster: Any, namespace: str, name: str) -> list[tuple[str, int]]:
    """The hosts and slots of the hostfile ConfigMap the MPI plugin wrote for TrainJob ``name``."""
    config_map = e2e_cluster.core.read_namespaced_config_map(f"{name}-mpi-hostfile", namespace)
    hosts = []
    for line in config_map.data["hostfile"].splitlines():
        host, slots = line.split()
        assert slots.startswith("slots="), line
        hosts.append((host, int(slots.removeprefix("slots="))))
    return hosts


def ranks(log: str) -> list[tuple[int, int, str, int]]:
    """``(rank, size, host, sum)`` of every rank's line in the launcher's log, by rank."""
    found = []
    for line in log.splitlines():
        if line.startswith(RANK_LINE):  # mpi: rank <r> of <n> on <host>: sum <s>
            words = line.removeprefix(RANK_LINE).replace(":", "").split()
            found.append((int(words[0]), int(words[2]), words[4], int(words[6])))
    return sorted(found)


@pytest.fixture(scope="module")
def started(e2e_cluster: Any, example: dict[str, dict[str, Any]]) -> Iterator[str]:
    """A namespace in which every case's runtime and TrainJob were created, all at once: they run side
    by side, so the module waits about as long as for one."""
    namespace = envtest.namespace_name("kind-mpi")
    core = e2e_cluster.core
    core.create_namespace(
        kubernetes.client.V1Namespace(metadata=kubernetes.client.V1ObjectMeta(name=namespace))
    )
    try:

        def default_service_account_exists() -> None:
            accounts = core.list_namespaced_service_account(namespace, field_selector="metadata.name=default")
            assert accounts.items, f"namespace {namespace} has no default ServiceAccount yet"

        envtest.eventually(default_service_account_exists, timeout=30.0, interval=0.25)
        for name, case in CASES.items():
            runtime = mpi_runtime(example, name, run_launcher_as_node=case.run_launcher_as_node)
            create(e2e_cluster, namespace, runtime)
            create(e2e_cluster, namespace, mpi_trainjob(example, name, case))
        yield namespace
    finally:
        core.delete_namespace(namespace, propagation_policy="Background")


def check(e2e_cluster: Any, namespace: str, eventually: Callable[..., Any], name: str) -> None:
    """Case ``name``'s TrainJob Complete, with the hostfile, world, sums, hosts and mounted files it must
    have."""
    case = CASES[name]
    nodes: dict[str, str] = {}
    outcome, log = finished(e2e_cluster, namespace, name, eventually, nodes)
    assert outcome == "Complete", log

    # The hostfile: the node Pods (and the launcher, when it is a node) under the headless Service,
    # numProcPerNode slots each.
    node_count = case.num_nodes - 1 if case.run_launcher_as_node else case.num_nodes
    pods = [f"{name}-{constants.NODE}-0-{i}" for i in range(node_count)]
    if case.run_launcher_as_node:
        pods.append(f"{name}-{constants.LAUNCHER}-0-0")
    hosts = hostfile(e2e_cluster, namespace, name)
    assert hosts == [(f"{pod}.{name}", case.num_proc_per_node) for pod in pods], hosts
    world = sum(slots for _, slots in hosts)
    assert world == case.num_nodes * case.num_proc_per_node
    # The key pair and the hostfile as the launcher's user 1000 sees them: the private key readable by the
    # Pod's fsGroup (1000) and by nobody else, the rest readable by all, each owned by root.
    mounted = {
        path.rsplit("/", 1)[1]: (int(mode, 8), int(uid), int(gid))
        for line in log.splitlines()
        if line.startswith(MOUNTED_LINE)
        for path, mode, uid, gid in [line.removeprefix(MOUNTED_LINE).split()]
    }
    assert mounted == {
        "id_rsa": (0o640, 0, 1000),
        "id_rsa.pub": (0o644, 0, 1000),
        "authorized_keys": (0o644, 0, 1000),
        "hostfile": (0o444, 0, 1000),
    }, log

    # mpirun started one rank per slot of the hostfile, on its hosts, and every rank got the sum of
    # rank + 1 over the whole world.
    seen = ranks(log)
    assert [(rank, size) for rank, size, _, _ in seen] == [(rank, world) for rank in range(world)], log
    assert {total for _, _, _, total in seen} == {world * (world + 1) // 2}, log
    assert Counter(host for _, _, host, _ in seen) == {pod: case.num_proc_per_node for pod in pods}, log
    assert sum(pod.startswith(f"{name}-{constants.NODE}-") for pod in pods) >= 2  # logged into two Pods
    assert_on_distinct_nodes(namespace, name, nodes)


# ------------------------------------------------------------------------------------------------- tests


def test_kind_mpi_launcher_as_node_runs_a_rank_itself_and_two_on_the_nodes_over_ssh(
    e2e_cluster: Any, started: str, eventually: Callable[..., Any], example: dict[str, dict[str, Any]]
) -> None:
    # The example's own numbers.
    assert example[constants.TRAINING_RUNTIME_KIND]["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"] is True
    assert example[constants.TRAINJOB_KIND]["spec"]["trainer"]["numNodes"] == CASES["mpi-as-node"].num_nodes
    check(e2e_cluster, started, eventually, "mpi-as-node")


def test_kind_mpi_launcher_apart_runs_two_ranks_on_each_node_over_ssh(
    e2e_cluster: Any, started: str, eventually: Callable[..., Any]
) -> None:
    check(e2e_cluster, started, eventually, "mpi-apart")


def test_kind_mpi_launcher_with_a_key_that_is_not_the_secrets_is_refused_by_every_node(
    e2e_cluster: Any, started: str, eventually: Callable[..., Any]
) -> None:
    name = "mpi-own-key"
    outcome, log = finished(e2e_cluster, started, name, eventually)
    assert outcome == "Failed", log
    # mpirun gives up at the first node that refuses it: the hostfile's names, as the plugin's user.
    nodes = {f"mpiuser@{name}-{constants.NODE}-0-{i}.{name}" for i in range(CASES[name].num_nodes)}
    refused = {
        line.split(":")[0] for line in log.splitlines() if line.endswith("Permission denied (publickey).")
    }
    assert refused and refused <= nodes, log
    assert ranks(log) == [], log
