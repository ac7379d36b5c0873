"""`trainer-render --plugins` and the `--config` file's `plugins.enabled`: third-party plugins loaded from
`kubeflow_trainer.plugins` entry points by the manager's loader (`runtime.framework.load_third_party`)."""

from __future__ import annotations

import io
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from runtime.api.v1alpha1 import TrainJob
from runtime.framework import EnforceMLPolicy, PluginContext
from runtime.framework import registry as plugin_registry
from runtime.info import Info
from runtime.render import run

ROOT = Path(__file__).resolve().parents[3]
RUNTIMES = ROOT / "config" / "runtimes"
TRAINJOB = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: demo
spec:
  runtimeRef:
    name: torch-distributed
"""
CONFIG = "apiVersion: config.trainer.kubeflow.org/v1alpha1\nkind: Configuration\n"
LABEL = "acme.example.com/rendered-by"


class Acme(EnforceMLPolicy):
    name = "Acme"

    def __init__(self, context: PluginContext) -> None:
        del context

    def enforce_ml_policy(self, info: Info, trainjob: TrainJob) -> None:
        info.labels[LABEL] = self.name


@dataclass
class FakeEntryPoint:
    name: str
    target: Any

    def load(self) -> Any:
        return self.target


@pytest.fixture(autouse=True)
def installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plugin_registry, "installed_entry_points", lambda: (FakeEntryPoint("Acme", Acme),))


def _render(tmp_path: Path, *argv: str, config: str | None = None) -> tuple[int, str, str]:
    trainjob = tmp_path / "trainjob.yaml"
    trainjob.write_text(TRAINJOB)
    extra = list(argv)
    if config is not None:
        path = tmp_path / "config.yaml"
        path.write_text(CONFIG + textwrap.dedent(config))
        extra += ["--config", str(path)]
    out, err = io.StringIO(), io.StringIO()
    code = run([str(trainjob), "-r", str(RUNTIMES), "--no-schema", *extra], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _jobset_labels(out: str) -> dict[str, str]:
    (jobset,) = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "JobSet"]
    return dict(jobset["metadata"].get("labels", {}))


@pytest.mark.parametrize(
    ("argv", "config", "enabled"),
    [
        ((), None, False),
        (("--plugins", "Acme"), None, True),
        ((), "plugins: {enabled: [Acme]}\n", True),
        (("--plugins", ""), "plugins: {enabled: [Acme]}\n", False),
        (("--plugins", " Acme ,"), "plugins: {enabled: []}\n", True),
    ],
    ids=[
        "none by default",
        "enabled by the flag",
        "enabled by the configuration",
        "an empty flag replaces the configuration's list",
        "the flag's names are trimmed",
    ],
)
def test_an_enabled_plugin_changes_what_is_rendered(
    tmp_path: Path, argv: tuple[str, ...], config: str | None, enabled: bool
) -> None:
    code, out, err = _render(tmp_path, *argv, config=config)
    assert (code, err) == (0, "")
    assert (LABEL in _jobset_labels(out)) is enabled


@pytest.mark.parametrize(
    ("argv", "config", "error"),
    [
        (
            ("--plugins", "Acme,acme"),
            None,
            "trainer-render: --plugins: cannot load the plugins\n"
            '  --plugins[1]: Not found: "acme": no installed distribution provides a '
            'kubeflow_trainer.plugins entry point named "acme" (installed: Acme)\n',
        ),
        (
            ("--plugins", "Torch"),
            None,
            "trainer-render: --plugins: cannot load the plugins\n"
            '  --plugins[0]: Invalid value: "Torch": a built-in plugin, always registered: '
            "list only third-party ones\n",
        ),
        (
            (),
            "plugins: {enabled: [Nope]}\n",
            'config.yaml: cannot load the plugins\n  plugins.enabled[0]: Not found: "Nope"',
        ),
        ((), "plugins: {enabled: Acme}\n", "plugins.enabled must be a list of plugin names"),
        ((), "plugins: [Acme]\n", "plugins must be an object with a list enabled"),
    ],
    ids=[
        "an unknown name in the flag",
        "a built-in's name in the flag",
        "an unknown name in the configuration",
        "a list given as a string",
        "a bare list",
    ],
)
def test_a_plugin_that_cannot_be_loaded_exits_2_naming_the_entry(
    tmp_path: Path, argv: tuple[str, ...], config: str | None, error: str
) -> None:
    code, out, err = _render(tmp_path, *argv, config=config)
    assert (code, out) == (2, "")
    if error.endswith("\n"):
        assert err == error
    else:
        assert error in err
