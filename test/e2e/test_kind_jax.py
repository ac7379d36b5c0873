"""JAX for real: ``examples/trainjob-jax.yaml`` joins its processes and sums across them, from two nodes.

kind only (``E2E_CLUSTER=kind``, after ``hack/e2e-setup-kind.sh``, which builds and loads the example's
image ``kubeflow-trainer-py/example-jax``); on kwok every test here skips.

The TrainJob runs on the shipped ``jax-distributed`` ClusterTrainingRuntime with two nodes, as the example
has it, plus one runtime patch that puts its two Pods on two different workers (the test checks where they
ran): the coordination service and the collectives cross the Pod network between nodes. Each node's
process calls ``jax.distributed.initialize()`` with the ``JAX_*`` variables the JAX plugin injected: node 0
serves JAX's coordination service on the coordinator port, and every process registers with it at
``JAX_COORDINATOR_ADDRESS`` (node 0's Pod under the JobSet's headless Service). Then a psum over every
process's CPU device (gloo, JAX's CPU collectives) and an allgather of the process indices. The test reads
each Pod's log: every process must print the sum and the indices of both, which a process that did not
join the others cannot (alone, it would count one process and sum only its own value). With a wrong
coordinator address the processes never register, and the TrainJob does not complete.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from runtime.api import constants
from runtime.plugins.trainernode import JOB_COMPLETION_INDEX_FIELD_PATH
from support.kind_jobs import (
    JOBSET_NAME_LABEL,
    assert_on_distinct_nodes,
    create,
    one_pod_per_node,
    skip_unless_kind,
    wait_finished,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "trainjob-jax.yaml"


@pytest.fixture(scope="module", autouse=True)
def on_kind(e2e_cluster: Any) -> None:
    skip_unless_kind(e2e_cluster, "real Pods running the example's image")


def test_kind_jax_example_sums_across_two_processes_through_the_coordinator(
    e2e_cluster: Any, namespace: str, eventually: Callable[..., Any]
) -> None:
    body = yaml.safe_load(EXAMPLE.read_text())
    name = body["metadata"]["name"]
    num_nodes = body["spec"]["trainer"]["numNodes"]
    assert num_nodes >= 2, f"{EXAMPLE} must run several processes to test a collective"
    create(e2e_cluster, namespace, one_pod_per_node(body))
    logs: dict[str, str] = {}
    nodes: dict[str, str] = {}
    condition = wait_finished(e2e_cluster, namespace, name, eventually, logs, nodes=nodes)
    assert condition["type"] == "Complete", (condition, logs)

    # Every node was told the same coordinator, node 0's Pod under the headless Service, and its own index.
    coordinator = f"{name}-{constants.NODE}-0-0.{name}:{constants.CONTAINER_TRAINER_PORT}"
    pods = e2e_cluster.core.list_namespaced_pod(namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}").items
    assert len(pods) == num_nodes, [p.metadata.name for p in pods]
    assert_on_distinct_nodes(namespace, name, nodes)
    for pod in pods:
        (container,) = [c for c in pod.spec.containers if c.name == constants.NODE]
        env = {e.name: e for e in container.env or []}
        assert env["JAX_COORDINATOR_ADDRESS"].value == coordinator, pod.metadata.name
        assert env["JAX_NUM_PROCESSES"].value == str(num_nodes), pod.metadata.name
        assert env["JAX_PROCESS_ID"].value_from.field_ref.field_path == JOB_COMPLETION_INDEX_FIELD_PATH, (
            pod.metadata.name
        )

    # Each process i holds i + 1: every one of them got 1 + 2 + ... + n from the psum, and all indices
    # from the allgather.
    lines = sorted(line for text in logs.values() for line in text.splitlines() if line.startswith("jax:"))
    total = num_nodes * (num_nodes + 1) // 2
    assert lines == [
        f"jax: process {rank} of {num_nodes}, {num_nodes} devices: "
        f"psum {total}, allgather {list(range(num_nodes))}"
        for rank in range(num_nodes)
    ], logs
