"""Upstream Kubeflow Trainer v2.3.0's own object-building code, run offline: `hack/tools/upstream-render`.

The Go program (its package comment is the specification) links upstream's runtime registry, plugins and
webhooks against a fake client; ``hack/build-binaries.sh upstream-render`` builds it into the directory
``--print`` names as ``UPSTREAM_RENDER_BIN`` (its name carries a hash of the program's files, so an edit
builds anew). This module runs it:

- :func:`binary_path` finds the binary, or raises :class:`UpstreamRenderMissing` naming the build command;
- :meth:`UpstreamRender.render` feeds it objects as the API server stores them and returns
  :class:`Rendered`: the JSON bodies of upstream's applies, in the order sent, or upstream's refusal;
- :meth:`UpstreamRender.render_variants` renders the same input 64 times and returns each distinct
  :class:`Rendered` (upstream's plugin order is a Go map's, and some output depends on it);
- :meth:`UpstreamRender.snapshot` returns what upstream writes into a runtime snapshot's ``data.runtime``;
- :meth:`UpstreamRender.json_to_yaml` returns ``sigs.k8s.io/yaml.JSONToYAML`` of a JSON text.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "hack" / "build-binaries.sh"
BUILD_COMMAND = "bash hack/build-binaries.sh upstream-render"
BINARY_NAME = "upstream-render"
TIMEOUT = 120.0
"""Seconds one run may take; a render takes well under a second."""

EXIT_REFUSED = 1
"""Upstream refused the input: a webhook denied an object, or building failed (stderr says which)."""


class UpstreamRenderMissing(Exception):
    """The binary is not built (the message names the command that builds it)."""


class UpstreamRenderError(Exception):
    """The program failed, not upstream's verdict: a bug here, or input it cannot decode."""


@dataclass(frozen=True, slots=True)
class Rendered:
    """One render: the apply bodies in the order upstream sent them, or why upstream refused."""

    objects: list[dict[str, Any]] | None
    refusal: str | None
    warnings: tuple[str, ...]


def binary_path() -> Path:
    """The built binary, in the directory ``hack/build-binaries.sh --print`` names."""
    done = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--print"], capture_output=True, text=True, check=False, timeout=60
    )
    if done.returncode != 0:
        raise UpstreamRenderError(f"{BUILD_SCRIPT.name} --print failed: {done.stderr.strip()}")
    dirs = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    path = Path(dirs["UPSTREAM_RENDER_BIN"]) / BINARY_NAME
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise UpstreamRenderMissing(f"{path} is missing: build it with `{BUILD_COMMAND}`")
    return path


class UpstreamRender:
    """Runs the binary at ``path``; every call is one short process."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _run(self, subcommand: str, stdin: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.path), subcommand],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
            timeout=TIMEOUT,
        )

    def _checked(self, subcommand: str, stdin: str) -> str:
        done = self._run(subcommand, stdin)
        if done.returncode != 0:
            raise UpstreamRenderError(f"upstream-render {subcommand}: exit {done.returncode}: {done.stderr}")
        return done.stdout

    def render(self, objects: Iterable[Mapping[str, Any]]) -> Rendered:
        """Upstream's applies for the one TrainJob among ``objects`` (the rest: runtimes and other objects
        in the cluster), each given as the API server stores it."""
        stream = "".join(f"---\n{json.dumps(obj)}\n" for obj in objects)
        done = self._run("render", stream)
        lines = done.stderr.splitlines()
        warnings = tuple(line.removeprefix("warning: ") for line in lines if line.startswith("warning: "))
        problems = "\n".join(line for line in lines if not line.startswith("warning: "))
        if done.returncode == EXIT_REFUSED:
            return Rendered(objects=None, refusal=problems, warnings=warnings)
        if done.returncode != 0:
            raise UpstreamRenderError(f"upstream-render render: exit {done.returncode}: {done.stderr}")
        bodies = json.loads(done.stdout)
        assert isinstance(bodies, list)
        return Rendered(objects=bodies, refusal=None, warnings=warnings)

    def render_variants(self, objects: Iterable[Mapping[str, Any]]) -> list[Rendered]:
        """Every distinct outcome of 64 renders of the same input (warnings are not collected)."""
        stream = "".join(f"---\n{json.dumps(obj)}\n" for obj in objects)
        outcomes = json.loads(self._checked("render-variants", stream))
        return [Rendered(objects=o.get("objects"), refusal=o.get("refusal"), warnings=()) for o in outcomes]

    def snapshot(self, runtime: Mapping[str, Any]) -> str:
        """What upstream stores in the snapshot ConfigMap's ``data.runtime`` for ``runtime``."""
        return self._checked("snapshot", json.dumps(runtime))

    def json_to_yaml(self, text: str) -> str:
        """``sigs.k8s.io/yaml.JSONToYAML(text)``."""
        return self._checked("json-to-yaml", text)
