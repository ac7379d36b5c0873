"""Distributed XGBoost on real Pods: ``examples/trainjob-xgboost.yaml`` applied as a user applies it, its Pods
on two nodes.

kind only (``E2E_CLUSTER=kind``, after ``hack/e2e-setup-kind.sh``, which builds and loads the example's
image ``kubeflow-trainer-py/example-xgboost:0.1.0`` from ``examples/images/xgboost``); on kwok it skips.
The TrainJob runs on the shipped ``xgboost-distributed`` ClusterTrainingRuntime, and its script meets the
other workers through nothing but the XGBoost plugin's ``DMLC_*`` variables: node 0 starts XGBoost's
tracker on the address ``DMLC_TRACKER_URI`` resolves to and port ``DMLC_TRACKER_PORT``, the tracker waits
for ``DMLC_NUM_WORKER`` workers, and every worker joins with its ``DMLC_TASK_ID``, asserts that the tracker
gave it that rank, trains on its own shard of a synthetic problem and prints the world size and a digest of
its model.

The first test adds one runtime patch to the example, which puts its Pods on different workers, and checks
that they ran on two nodes: the tracker and the workers met across the Pod network between nodes.
It passes only if the TrainJob is Complete, every rank of ``numNodes`` printed once, each saw a world
of ``numNodes`` workers through node 0's Pod under the JobSet's headless Service, and all printed the same
digest. Each part of a wrong environment fails it: a tracker name of another Pod makes node 0's tracker
fail to bind, one that does not resolve ends the script after its 120 s wait; ports that differ between Pods,
or too high a worker count, leave the workers or the tracker waiting until XGBoost's 120 s timeouts; too low
a count shows in the world size; a wrong or repeated task id fails the rank assertion; and workers that
trained alone would print different digests, their shards differing. The second test makes the first of
these breaks on every run: the example told that node 1's Pod runs the tracker, on a copy of the runtime
whose Pods never restart, fails within seconds and says why in node 0's log.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from runtime.api import constants
from support.kind_jobs import (
    assert_on_distinct_nodes,
    create,
    one_pod_per_node,
    skip_unless_kind,
    wait_finished,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "trainjob-xgboost.yaml"
RUNTIME = ROOT / "config" / "runtimes" / "xgboost-distributed.yaml"
TIMEOUT = 300.0
"""Pods start in seconds with the image loaded; a broken rendezvous fails within XGBoost's 120 s timeouts,
plus the Job's restarts of a failed container under the shipped runtime."""

LINE = re.compile(r"^xgboost: rank (\d+) of (\d+) via (\S+): model ([0-9a-f]{16})$", re.MULTILINE)


@pytest.fixture(scope="module", autouse=True)
def on_kind(e2e_cluster: Any) -> None:
    skip_unless_kind(e2e_cluster, "real Pods running the example's image")


def run(
    e2e_cluster: Any,
    namespace: str,
    body: dict[str, Any],
    eventually: Callable[..., Any],
    nodes: dict[str, str] | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """Create the TrainJob; its final condition and its Pods' logs (and into ``nodes``, their nodes)."""
    create(e2e_cluster, namespace, body)
    logs: dict[str, str] = {}
    condition = wait_finished(
        e2e_cluster, namespace, body["metadata"]["name"], eventually, logs, nodes=nodes, timeout=TIMEOUT
    )
    return condition, logs


def test_kind_xgboost_example_trains_one_model_on_every_worker(
    e2e_cluster: Any, namespace: str, eventually: Callable[..., Any]
) -> None:
    body = yaml.safe_load(EXAMPLE.read_text())
    name, nodes = body["metadata"]["name"], body["spec"]["trainer"]["numNodes"]
    assert body["spec"]["runtimeRef"]["name"] == "xgboost-distributed" and nodes >= 2, body["spec"]

    placed: dict[str, str] = {}
    condition, logs = run(e2e_cluster, namespace, one_pod_per_node(body), eventually, placed)
    assert condition["type"] == "Complete", (condition, logs)
    assert_on_distinct_nodes(namespace, name, placed)

    printed = [match.groups() for text in logs.values() for match in LINE.finditer(text)]
    assert sorted(int(rank) for rank, _, _, _ in printed) == list(range(nodes)), logs
    tracker = f"{name}-{constants.NODE}-0-0.{name}:{constants.CONTAINER_TRAINER_PORT}"
    assert {(int(world), via) for _, world, via, _ in printed} == {(nodes, tracker)}, printed
    digests = {digest for _, _, _, digest in printed}
    assert len(digests) == 1, f"the workers disagree on the model: {printed}"


def test_kind_xgboost_example_told_the_tracker_address_of_another_pod_fails(
    e2e_cluster: Any, namespace: str, eventually: Callable[..., Any]
) -> None:
    # The shipped runtime as a namespaced copy whose Pods never restart, so that the failure is quick and
    # node 0's Failed Pod keeps its log (the default OnFailure restarts it until the Job's backoff limit).
    runtime = yaml.safe_load(RUNTIME.read_text())
    runtime["kind"] = constants.TRAINING_RUNTIME_KIND
    runtime["metadata"] = {"name": "xgboost-no-restarts"}
    job = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    job["backoffLimit"] = 0
    job["template"]["spec"]["restartPolicy"] = "Never"
    create(e2e_cluster, namespace, runtime)
    # The example's script, told that node 1's Pod runs the tracker.
    body = yaml.safe_load(EXAMPLE.read_text())
    name = body["metadata"]["name"]
    body["spec"]["runtimeRef"] = {"name": "xgboost-no-restarts", "kind": constants.TRAINING_RUNTIME_KIND}
    trainer = body["spec"]["trainer"]
    trainer["args"] = ["env", f"DMLC_TRACKER_URI={name}-{constants.NODE}-0-1.{name}", *trainer["args"]]

    condition, logs = run(e2e_cluster, namespace, body, eventually)
    assert condition["type"] == "Failed", condition
    assert not any(LINE.search(text) for text in logs.values()), logs
    assert any("Failed to bind socket" in text for text in logs.values()), logs
