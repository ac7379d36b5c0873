"""MPI slots from GPUs: how many processes each node runs when nobody says so explicitly.

Go `enforceMLPolicy` of the MPI plugin: with neither `spec.trainer.numProcPerNode` nor a runtime
`numProcPerNode` above 1, a node with more than one GPU runs one process per GPU. The slots land in three
places, all checked: `info.ml`, the hostfile's `slots=` (one line per node pod) and the launcher's
`OMPI_MCA_orte_set_default_slots`.
"""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from runtime.plugins.mpi import MPI, ssh_key_pair

_PAIR = ssh_key_pair(ec.derive_private_key(0x5EED, ec.SECP521R1()))


def _slots(make: Any, resources: dict[str, Any] | None, *, policy_procs: int = 1) -> tuple[int, str, str]:
    """(info's num_proc_per_node, the hostfile, the launcher's default-slots env) for 2 nodes."""
    trainer: dict[str, Any] = {"numNodes": 2}
    if resources is not None:
        trainer["resourcesPerNode"] = resources
    trainjob = make.trainjob(trainer=trainer)
    mpi = {
        "numProcPerNode": policy_procs,
        "mpiImplementation": "OpenMPI",
        "sshAuthMountPath": "/root/.ssh",
        "runLauncherAsNode": False,
    }
    spec = make.runtime_spec(
        make.job("launcher", containers=[make.container("node")]),
        make.job("node", ancestor="trainer"),
        ml_policy={"numNodes": 2, "mpi": mpi},
    )
    info = make.info(trainjob, spec)
    plugin = MPI(keygen=lambda: _PAIR)
    plugin.enforce_ml_policy(info, trainjob)
    make.identify_pod_network(info, trainjob)
    objects = plugin.build(info, trainjob, make.reader())
    hostfile = next(o for o in objects if o["kind"] == "ConfigMap")["data"]["hostfile"]
    launcher = info.find_pod_set("launcher")
    assert launcher is not None
    env = {e["name"]: e.get("value") for c in launcher.containers if c.name == "node" for e in c.env}
    return info.ml.mpi_num_proc_per_node, hostfile, env.get("OMPI_MCA_orte_set_default_slots", "")


def _hostfile(slots: int) -> str:
    return f"trainJob-node-0-0.trainJob slots={slots}\ntrainJob-node-0-1.trainJob slots={slots}\n"


@pytest.mark.parametrize(
    ("resources", "slots"),
    [
        pytest.param(None, 1, id="no resources: one slot"),
        pytest.param({"limits": {"nvidia.com/gpu": 1}}, 1, id="one GPU: one slot"),
        pytest.param({"limits": {"nvidia.com/gpu": 2}}, 2, id="two GPUs: two slots"),
        pytest.param(
            {"requests": {"nvidia.com/gpu": "2"}}, 2, id="two GPUs requested as a string: two slots"
        ),
        pytest.param({"limits": {"nvidia.com/gpu": 3}}, 3, id="three GPUs: three slots"),
        pytest.param({"requests": {"cpu": "8"}}, 1, id="CPUs only: one slot"),
    ],
)
def test_the_gpu_count_of_a_node_sets_its_slots(make: Any, resources: Any, slots: int) -> None:
    num_proc, hostfile, default_slots = _slots(make, resources)
    assert num_proc == slots
    assert hostfile == _hostfile(slots)
    assert default_slots == str(slots)


def test_a_runtime_num_proc_per_node_above_one_wins_over_two_gpus(make: Any) -> None:
    num_proc, hostfile, default_slots = _slots(make, {"limits": {"nvidia.com/gpu": 2}}, policy_procs=4)
    assert (num_proc, hostfile, default_slots) == (4, _hostfile(4), "4")
