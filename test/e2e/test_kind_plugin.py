"""A third-party plugin shipped as docs/plugins.md tells users to, seen from the Pods it reaches.

kind only (``E2E_CLUSTER=kind``, after ``hack/e2e-setup-kind.sh``). The plugin is ``Example``
(``test/plugins/example_plugin``: its own distribution, entry point ``Example`` in the group
``kubeflow_trainer.plugins``), which gives every container of a TrainJob the env var
``EXAMPLE_PLUGIN_TRAINJOB`` (the TrainJob's name) and the JobSet the label ``example.kubeflow.org/plugin:
Example``. ``hack/build-images.sh plugin`` builds its wheel and its Dockerfile on the manager image, and the
Helm install of ``hack/e2e-setup-kind.sh`` runs that image with ``manager.config.plugins.enabled:
[Example]``; the kustomize install runs the plain manager image with the shipped Configuration.

What the test expects follows from the installed Configuration (``support.e2e_paths.installed_manager``):
with ``Example`` enabled, the JobSet carries the label, every Pod's container has the variable and prints
it; without, none of these. On the Helm install it must be enabled (the test fails otherwise), so a
plugin left out of the Helm values, or a plugin whose effect is gone, fails it. ``hack/e2e-setup-kind.sh
ci`` runs it on both installs: the kustomize one shows the effect absent, the Helm one present.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from controller.client.client import Client
from runtime.api import constants
from support import allreduce_runtime as allreduce
from support import e2e_paths as paths
from support.kind_jobs import (
    JOBSET_NAME_LABEL,
    create,
    skip_unless_kind,
    trainjob,
    wait_finished,
    workload_image,
)

PLUGIN = "Example"
ENV_NAME = "EXAMPLE_PLUGIN_TRAINJOB"
LABEL = "example.kubeflow.org/plugin"
"""What the plugin writes (``trainer_example_plugin.ENV_NAME`` and ``LABEL``; the plugin's distribution is
installed in the manager's image, not in the test's environment)."""
UNSET = "<unset>"


@pytest.fixture(scope="module", autouse=True)
def on_kind(e2e_cluster: Any) -> None:
    skip_unless_kind(e2e_cluster, "the installed manager's image and real Pods")


@pytest.fixture(scope="module")
def installed(e2e_cluster: Any) -> Iterator[paths.InstalledManager]:
    client = Client.load(str(e2e_cluster.kubeconfig), user_agent="test_kind_plugin")
    try:
        yield paths.installed_manager(client)
    finally:
        client.close()


def test_kind_example_plugin_reaches_the_pods_exactly_when_the_configuration_enables_it(
    e2e_cluster: Any, namespace: str, installed: paths.InstalledManager, eventually: Callable[..., Any]
) -> None:
    enabled = PLUGIN in installed.plugins
    if os.environ.get("E2E_INSTALL") == "helm":
        assert enabled, (
            f"the Helm install of hack/e2e-setup-kind.sh enables {PLUGIN} (manager.config.plugins.enabled), "
            f"but the installed Configuration has plugins.enabled={list(installed.plugins)} "
            f"(image {installed.image})"
        )
    image = workload_image()
    # Two nodes that print what the plugin told them, or that it told them nothing.
    command = ["sh", "-c", f'echo "example-plugin: ${{{ENV_NAME}-{UNSET}}}"']
    create(
        e2e_cluster,
        namespace,
        allreduce.allreduce_runtime("plugin-echo", image, command=command, num_nodes=2),
    )
    name = "plugin"
    create(e2e_cluster, namespace, trainjob(name, "plugin-echo", num_nodes=2))
    logs: dict[str, str] = {}
    condition = wait_finished(e2e_cluster, namespace, name, eventually, logs)
    assert condition["type"] == "Complete", (condition, logs)

    jobset = e2e_cluster.custom.get_namespaced_custom_object(
        constants.JOBSET_GROUP, constants.JOBSET_VERSION, namespace, "jobsets", name
    )
    labels = jobset["metadata"].get("labels") or {}
    assert labels.get(LABEL) == (PLUGIN if enabled else None), labels

    core = e2e_cluster.core
    pods = core.list_namespaced_pod(namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}").items
    assert len(pods) == 2, [p.metadata.name for p in pods]
    for pod in pods:
        (container,) = pod.spec.containers
        seen = {e.name: e.value for e in container.env or []}
        assert seen.get(ENV_NAME) == (name if enabled else None), (pod.metadata.name, seen)
        log = logs.get(pod.metadata.name, "")
        assert log.splitlines() == [f"example-plugin: {name if enabled else UNSET}"], (pod.metadata.name, log)
