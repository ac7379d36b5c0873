"""The TrainingRuntime whose node runs ``test/e2e/workload/allreduce.py``: the kind tier's real training job.

Used by ``test/e2e/test_kind.py`` and ``test/e2e/test_kubeflow_sdk.py``: a Torch
policy (one process per node) and one replicated job, ``node``, labelled as the trainer step, whose container
runs ``command`` in ``image`` with a 120 s rendezvous deadline and a small CPU and memory request.
"""

from __future__ import annotations

from typing import Any

from runtime.api import constants


def allreduce_runtime(
    name: str, image: str, *, command: list[str], num_nodes: int = 2, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    """A TrainingRuntime named ``name`` with ``num_nodes`` nodes whose one container runs ``command``."""
    container = {
        "name": constants.NODE,
        "image": image,
        "command": command,
        "env": [{"name": "ALLREDUCE_TIMEOUT", "value": "120"}],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}},
    }
    node_job = {
        "name": constants.NODE,
        "template": {
            "metadata": {"labels": {constants.LABEL_TRAINJOB_ANCESTOR: constants.ANCESTOR_TRAINER}},
            "spec": {"template": {"spec": {"containers": [container]}}},
        },
    }
    return {
        "apiVersion": f"{constants.GROUP}/{constants.VERSION}",
        "kind": constants.TRAINING_RUNTIME_KIND,
        "metadata": {"name": name, **({"labels": labels} if labels else {})},
        "spec": {
            "mlPolicy": {"numNodes": num_nodes, "torch": {}},
            "template": {"spec": {"replicatedJobs": [node_job]}},
        },
    }
