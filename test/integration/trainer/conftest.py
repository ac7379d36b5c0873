"""Fixtures for the Trainer controllers against the Tier 1 control plane (no JobSet controller, no GC).

- ``trainer`` (module): the real manager, in this process, as production runs it: its own informers and
  worker threads, authenticated as its ServiceAccount with the shipped RBAC (``service_account_kubeconfig``),
  leader election on (a Lease in ``kubeflow-system``, the manager's namespace), the shipped concurrency
  (TrainJob 5, runtimes 1), the Trainer's cache label selectors, health and metrics on free loopback ports.
  Stopped and joined at the end of the module. Tests reach the TrainJob reconciler, the cache and the client
  through it; every suite that uses it thus also shows that the shipped roles are sufficient.
- ``service_account_kubeconfig`` (module): the namespace ``kubeflow-system``, the ServiceAccount
  ``kubeflow-trainer-controller-manager`` and its roles and bindings, taken from ``kubectl kustomize
  config/default`` (the pinned kubectl), installed; a kubeconfig with a token from the TokenRequest API.
- ``client`` (module): a separate admin client for the test's own reads and writes (as a user would).

The object builders live in ``support.trainer_objects``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from controller import envtest
from controller.client.client import Client
from controller.envtest import Binaries, ControlPlane
from controller.manager.manager import Manager, ManagerOptions
from controller.trainer.setup import TrainerControllers, cache_by_object, new_registry, setup_with_manager
from support import install_manifests as _install

USER = "integration-test"
CONCURRENCY = {
    "TrainJob.trainer.kubeflow.org": 5,
    "TrainingRuntime.trainer.kubeflow.org": 1,
    "ClusterTrainingRuntime.trainer.kubeflow.org": 1,
}


@dataclass
class Trainer:
    """The running manager and what the tests look at."""

    manager: Manager
    controllers: TrainerControllers
    failures: list[BaseException]


def _elected(manager: Manager, failures: list[BaseException]) -> None:
    assert not failures, failures
    assert manager.elected, "the manager is not leading yet"


@pytest.fixture(scope="module")
def client(kubeconfig: Path) -> Iterator[Client]:
    c = Client.load(str(kubeconfig), user_agent=USER)
    yield c
    c.close()


@pytest.fixture(scope="module")
def service_account_kubeconfig(
    control_plane: ControlPlane, client: Client, envtest_binaries: Binaries
) -> Path:
    return _install.manager_kubeconfig(control_plane, client, envtest_binaries)


@pytest.fixture(scope="module")
def trainer(service_account_kubeconfig: Path) -> Iterator[Trainer]:
    registry = new_registry()
    options = ManagerOptions(
        leader_election=True,
        leader_election_id="trainer.kubeflow.org",
        leader_election_namespace=_install.NAMESPACE,
        health_probe_bind_address="127.0.0.1:0",
        metrics_bind_address="127.0.0.1:0",
        by_object=cache_by_object(registry),
    )
    manager = Manager.from_kubeconfig(
        str(service_account_kubeconfig), options=options, user_agent="trainer-controller-manager"
    )
    controllers = setup_with_manager(manager, registry, group_kind_concurrency=CONCURRENCY)
    failures: list[BaseException] = []

    def run() -> None:
        try:
            manager.run()
        except BaseException as exc:
            failures.append(exc)

    runner = threading.Thread(target=run, name="test/trainer-manager")
    runner.start()
    try:
        # Another module's manager (or a test holding the Lease on purpose) may still hold it: the first test
        # must not spend its own timeout waiting for the election.
        envtest.eventually(lambda: _elected(manager, failures), timeout=90, interval=0.2)
        yield Trainer(manager=manager, controllers=controllers, failures=failures)
    finally:
        manager.stop()
        runner.join(60)
        manager.client.close()
    assert not runner.is_alive(), "the manager did not stop"
    assert failures == []
