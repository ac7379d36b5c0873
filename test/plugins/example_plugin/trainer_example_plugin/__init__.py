"""An example third-party plugin: every container of every pod of a TrainJob gets `EXAMPLE_PLUGIN_TRAINJOB`,
the TrainJob's name, and the JobSet gets the label `example.kubeflow.org/plugin: Example`.

It runs in the manager only when the Configuration enables it by name (`plugins: {enabled: [Example]}`),
which is what the tests of the entry-point path check: its effect is in the rendered objects, and on a
cluster in the pods.
"""

from __future__ import annotations

from runtime.api.v1alpha1 import TrainJob
from runtime.api.views import TrainJobView
from runtime.framework import EnforceMLPolicy, PluginContext
from runtime.info import Info

__all__ = ["ENV_NAME", "LABEL", "Example"]

ENV_NAME = "EXAMPLE_PLUGIN_TRAINJOB"
LABEL = "example.kubeflow.org/plugin"


class Example(EnforceMLPolicy):
    """Marks the JobSet and tells every container which TrainJob it belongs to."""

    name = "Example"

    def __init__(self, context: PluginContext) -> None:
        del context  # no settings

    def enforce_ml_policy(self, info: Info, trainjob: TrainJob) -> None:
        info.labels[LABEL] = self.name
        env = {"name": ENV_NAME, "value": TrainJobView(trainjob).name}
        for pod_set in info.pod_sets:
            for container in pod_set.containers:
                container.upsert_env(env)
