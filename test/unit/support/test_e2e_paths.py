"""``support.e2e_paths``: the kwok and kind e2e paths register the same webhooks, addressed differently.

The kwok path derives its webhook configurations from ``config/webhook/`` in code (``support.launcher``),
the kind path installs ``config/webhook/``; if one gains a webhook, a rule or a failure policy the other
lacks, the e2e suite would test two different admission set-ups. Everything but ``clientConfig`` (and the
manifests' labels) must match.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controller.client.errors import NotFound
from support import e2e_paths as paths
from support import kueue, kwok


def _without_addressing(configurations: list[dict[str, Any]]) -> dict[str, Any]:
    found = {}
    for configuration in configurations:
        hooks = {}
        for hook in configuration["webhooks"]:
            hooks[hook["name"]] = {k: v for k, v in hook.items() if k != "clientConfig"}
        found[(configuration["kind"], configuration["metadata"]["name"])] = hooks
    return found


def _defaults(hooks: dict[str, Any]) -> dict[str, Any]:
    # kube-apiserver's defaults that the manifests leave out and the code spells out (or the reverse).
    defaulted = {}
    for key, hook in hooks.items():
        defaulted[key] = {
            name: {"timeoutSeconds": 10, "matchPolicy": "Equivalent", **fields}
            for name, fields in hook.items()
        }
    return defaulted


def test_both_paths_register_the_same_webhooks_apart_from_their_addressing() -> None:
    kwok = _defaults(_without_addressing(paths.webhook_configurations("kwok", port=9443)))
    kind = _defaults(_without_addressing(paths.webhook_configurations("kind")))
    assert kwok == kind


def test_the_kwok_path_calls_the_host_manager_by_url_and_the_kind_path_calls_the_service() -> None:
    hook = "validator.trainjob.trainer.kubeflow.org"
    assert paths.webhook_client_config("kwok", hook, port=9443) == {
        "url": "https://127.0.0.1:9443/validate-trainer-kubeflow-org-v1alpha1-trainjob"
    }
    assert paths.webhook_client_config("kind", hook) == {
        "service": {
            "name": "kubeflow-trainer-controller-manager",
            "namespace": "kubeflow-system",
            "path": "/validate-trainer-kubeflow-org-v1alpha1-trainjob",
        }
    }


@pytest.mark.parametrize(
    ("answer", "serving"),
    [
        pytest.param(
            'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: '
            "spec.trainer.numNodes: Invalid value: 0: must be greater than or equal to 1",
            True,
            id="a denial naming the field is the webhook's",
        ),
        pytest.param(
            'Internal error occurred: failed calling webhook "validator.trainjob.trainer.kubeflow.org": '
            "dial tcp 10.96.0.12:443: connect: connection refused",
            False,
            id="a webhook that cannot be called is not serving",
        ),
        pytest.param("", False, id="a stored probe means no validating webhook is registered"),
    ],
)
def test_the_probe_answer_tells_whether_the_validating_webhook_was_reached(
    answer: str, serving: bool
) -> None:
    assert paths.webhook_serving(answer) is serving


def test_an_unknown_flavour_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown e2e cluster flavour 'minikube'"):
        paths.webhook_configurations("minikube")


# --- Kueue: a missing binary is a missing prerequisite; kind's lack of Kueue is a skip --------------------


@pytest.fixture
def no_kueue_here(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The kwok cluster as on a machine where build-binaries.sh names a Kueue directory without ``kueue``
    and no Kueue runs; reading a cluster's state would be a failure (nothing is to be started)."""
    monkeypatch.setattr(kwok, "binary_dirs", lambda: {"KUEUE_BIN": tmp_path})
    monkeypatch.setattr(kueue, "kueue_process", lambda name: None)

    def no_state(name: str) -> None:
        raise AssertionError("the cluster was looked at before the binary")

    monkeypatch.setattr(kwok.ClusterState, "read", staticmethod(no_state))
    return tmp_path


def test_a_missing_kueue_binary_is_a_missing_prerequisite_naming_the_build(no_kueue_here: Path) -> None:
    with (
        pytest.raises(paths.KueueMissing) as raised,
        paths.running_kueue("kwok", cluster_name="trainer-e2e-pytest"),
    ):
        pass
    message = str(raised.value)
    assert str(no_kueue_here / "kueue") in message
    assert "bash hack/build-binaries.sh kueue" in message
    # A caller that knows only KueueUnavailable still skips (test_kueue.py asks prerequisite.missing).
    assert isinstance(raised.value, paths.KueueUnavailable)


def test_no_kueue_installed_on_kind_is_a_missing_prerequisite_naming_the_set_up(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    class _Api:
        def close(self) -> None:
            pass

    monkeypatch.setattr(paths.kubernetes.config, "new_client_from_config", lambda config_file: _Api())
    monkeypatch.setattr(kueue, "installed_kueue", lambda apps, core: None)
    with (
        pytest.raises(paths.KueueMissing) as raised,
        paths.running_kueue("kind", cluster_name="trainer-e2e-kind", kubeconfig=tmp_path / "kubeconfig"),
    ):
        pass
    assert str(raised.value) == paths.KUEUE_NOT_ON_KIND
    assert "hack/e2e-setup-kind.sh up" in str(raised.value)


# --- the installed manager's feature gates -----------------------------------------------------------------


class _ConfigMaps:
    """A Client stand-in that knows only ConfigMaps (``get``), keyed by (namespace, name)."""

    def __init__(self, objects: dict[tuple[str, str], dict[str, Any]]) -> None:
        self._objects = objects

    def get(self, gvk: Any, name: str, namespace: str) -> dict[str, Any]:
        assert gvk == paths.CONFIG_MAP_GVK
        try:
            return self._objects[(namespace, name)]
        except KeyError:
            raise NotFound(f"configmaps {name!r} not found", status=404) from None


def _installed(configuration: str) -> Any:
    data = {paths.CONFIG_KEY: configuration}
    return _ConfigMaps({(paths.MANAGER_NAMESPACE, paths.CONFIG_MAP): {"data": data}})


@pytest.mark.parametrize(
    ("configuration", "on"),
    [
        pytest.param("kind: Configuration\nfeatureGates:\n  TrainJobStatus: true\n", True, id="on"),
        pytest.param("kind: Configuration\nfeatureGates:\n  TrainJobStatus: false\n", False, id="off"),
        pytest.param("kind: Configuration\nfeatureGates:\n  Other: true\n", False, id="another gate"),
        pytest.param("kind: Configuration\n", False, id="no featureGates"),
    ],
)
def test_a_feature_gate_reads_as_the_installed_configuration_sets_it(configuration: str, on: bool) -> None:
    assert paths.feature_gate_on(_installed(configuration), "TrainJobStatus") is on


def test_without_an_installed_configuration_every_gate_is_off() -> None:
    assert paths.feature_gate_on(_ConfigMaps({}), "TrainJobStatus") is False
