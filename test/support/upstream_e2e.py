"""Upstream's own e2e suite run against this controller: its spec list, its Ginkgo report, and the table.

Upstream Kubeflow Trainer's e2e suite (``test/e2e`` of ``github.com/kubeflow/trainer/v2`` at
``TRAINER_VERSION``) is compiled unmodified from the Go module by ``hack/build-binaries.sh upstream-e2e`` (a
Ginkgo test binary, ``e2e.test``) and run by ``test/e2e/test_upstream_e2e.py`` against the manager installed
on kind. This module holds what that test needs besides the cluster:

- :data:`SPECS`: every spec of the suite at that version, by its full Ginkgo name, with the stand-in image
  it runs (``test/e2e/upstream/README.md``) and what the stand-in does that the spec's assertions depend on;
  ``docs/compatibility.md`` has the same table;
- :func:`command`: the binary's command line, writing Ginkgo's JSON report (``--ginkgo.json-report``);
- :func:`read_report` / :func:`parse_report`: that report as :class:`SpecResult` values, one per spec and
  one per suite node (``BeforeSuite``...) that did not pass;
- :func:`problems`: what makes the run a failure: a spec or suite node that did not pass, a spec skipped
  or pending without a stated reason, a spec the suite ran that :data:`SPECS` does not list or one it
  lists that did not run (a new upstream version is read before it is trusted);
- :func:`table`: the Markdown table of the results, as ``docs/compatibility.md`` shows it;
- :func:`run_and_check`: run a suite's binary, print its table, fail the calling test on its problems (the
  test of upstream's suite, and of Kueue's with ``support.kueue_e2e``).

The set-up upstream's own CI makes before the suite (``hack/e2e-setup-cluster.sh`` of the module), which
the test repeats: the TrainJobStatus feature gate on (the Helm install of ``hack/e2e-setup-kind.sh``);
the runtime images tagged ``test`` (:data:`RUNTIME_IMAGE_TAGS`: an untagged image would be pulled, and the
kind nodes have no registry); the Flux runtime ``examples/flux/flux-runtime.yaml`` applied
(:data:`FLUX_RUNTIME`).

Deliberately missing: Ginkgo's own parallel mode (``ginkgo -p`` is the CLI's, not the test binary's); the
suite runs its specs one after another, as upstream's CI does.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

FLUX_RUNTIME = "examples/flux/flux-runtime.yaml"
"""Upstream's Flux ClusterTrainingRuntime, relative to the module directory; its CI applies it for e2e."""

RUNTIME_IMAGE_TAGS = {"deepspeed-distributed": "test", "xgboost-distributed": "test"}
"""The shipped runtimes whose untagged image upstream's CI retags before the suite (``:test``, its images)."""

SUITE_NODE_TYPES = frozenset(
    {
        "BeforeSuite",
        "AfterSuite",
        "SynchronizedBeforeSuite",
        "SynchronizedAfterSuite",
        "ReportBeforeSuite",
        "ReportAfterSuite",
        "DeferCleanup (Suite)",  # Ginkgo's name for a DeferCleanup registered in a suite node
    }
)
PASSED = "passed"
SKIPPED_STATES = frozenset({"skipped", "pending"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Spec:
    """A spec of upstream's suite as this project runs it."""

    stand_in: str
    """The stand-in image(s) the spec runs, and what they do that its assertions depend on; "" for none."""
    skip_reason: str = ""
    """Why the spec may be skipped here; "" means it must pass."""


_TORCH = (
    "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime: the Python base (Debian's python3); like the real "
    "image with no command, its default `/bin/bash` exits 0 at once"
)
_TORCH_PYTHON = (
    "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime: the Python base; its python3 (ssl, urllib) runs the "
    "spec's status_update.py against the status server"
)
_PAUSE = "registry.k8s.io/pause:3.9 and :3.10: Kubernetes' pause program at /pause, running until deleted"

SPECS: Mapping[str, Spec] = {
    "TrainJob e2e when Creating TrainJob to perform the PyTorch workload "
    "should create TrainJob with PyTorch runtime reference": Spec(stand_in=_TORCH),
    "TrainJob e2e when Creating TrainJob to perform OpenMPI workload "
    "should create TrainJob with DeepSpeed runtime reference": Spec(
        stand_in=(
            "ghcr.io/kubeflow/trainer/deepspeed-runtime:test: the MPI example image (Debian's OpenMPI, "
            "sshd as mpiuser UID 1000 on port 2222); the launcher's `mpirun sleep 10` logs into the node "
            "pod over SSH with the plugin's Secret and hostfile"
        )
    ),
    "TrainJob e2e when Creating TrainJob to perform JAX workload "
    "should create TrainJob with JAX runtime reference": Spec(
        stand_in="nvcr.io/nvidia/jax:25.10-py3: the Python base; its default `/bin/bash` exits 0 at once"
    ),
    "TrainJob e2e when Creating TrainJob to perform XGBoost workload "
    "should create TrainJob with XGBoost runtime reference": Spec(
        stand_in=(
            "ghcr.io/kubeflow/trainer/xgboost-runtime:test: the Python base; its default `/bin/bash` "
            "exits 0 at once"
        )
    ),
    "TrainJob e2e when Creating TrainJob to perform Flux workload "
    "should create TrainJob with Flux runtime reference": Spec(
        stand_in=(
            "ubuntu:22.04: the Python base (bash and coreutils for the plugin's entrypoint.sh); "
            "flux-view-ubuntu:tag-jammy: a view holding a shell `flux` that encodes R, runs the lead "
            "broker's command (`flux run ... flux getattr rank`), and returns at once on a follower"
        )
    ),
    "TrainJob e2e when Creating a TrainJob with RuntimePatches "
    "should preserve user-provided manager fields": Spec(stand_in=""),
    "TrainJob e2e when Creating a TrainJob with RuntimePatches "
    "should update Time only for the changed patch on update": Spec(stand_in=""),
    "TrainJob e2e when Creating a TrainJob managed by an external controller "
    "should not be reconciled by the built-in controller": Spec(stand_in=""),
    "TrainJob e2e when Creating a TrainJob with Resource Timeouts "
    "should fail the TrainJob with DeadlineExceeded when active timeout expires": Spec(
        stand_in=(
            "none: `busybox` (untagged, so always pulled) cannot be pulled here and its pod stays "
            "waiting; the spec asserts only the deadline and the JobSet's deletion"
        )
    ),
    "TrainJob e2e when Creating TrainJob with runtime status server instrumentation "
    "should inject runtime configuration which allows the runtime status endpoint to be called": Spec(
        stand_in=_TORCH_PYTHON
    ),
    "TrainJob e2e when Updating a runtime a suspended TrainJob should use the original runtime "
    "configuration and not pick up the new configuration TrainingRuntime": Spec(stand_in=_PAUSE),
    "TrainJob e2e when Updating a runtime a suspended TrainJob should use the original runtime "
    "configuration and not pick up the new configuration ClusterTrainingRuntime": Spec(stand_in=_PAUSE),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class SpecResult:
    """One spec (or suite node) of a Ginkgo report."""

    name: str
    """The full name: container texts and the leaf's, space-separated (``ginkgo --focus`` matches it)."""
    node_type: str
    """``It`` for a spec; ``BeforeSuite`` and the like for suite nodes."""
    state: str
    """Ginkgo's: passed, failed, skipped, pending, panicked, interrupted, aborted, timedout."""
    seconds: float
    failure: str = ""
    """The failure's message and location, for a spec that did not pass."""

    @property
    def passed(self) -> bool:
        return self.state == PASSED


def command(binary: Path, report: Path, *, timeout_s: int) -> list[str]:
    """The suite's command line: verbose, no colour, the JSON report at ``report``, a suite timeout."""
    return [
        str(binary),
        "-test.v",
        "-ginkgo.v",
        "-ginkgo.no-color",
        f"-ginkgo.json-report={report}",
        f"-ginkgo.timeout={timeout_s}s",
    ]


def _full_name(spec: Mapping[str, Any]) -> str:
    texts = [str(t) for t in spec.get("ContainerHierarchyTexts") or ()]
    leaf = str(spec.get("LeafNodeText") or "")
    return " ".join(t for t in [*texts, leaf] if t) or str(spec.get("LeafNodeType") or "")


def _failure(spec: Mapping[str, Any]) -> str:
    failure = spec.get("Failure") or {}
    message = str(failure.get("Message") or "").strip()
    location = failure.get("Location") or {}
    where = f"{location.get('FileName', '')}:{location.get('LineNumber', '')}".strip(":")
    return f"{message} ({where})" if where and message else message or where


def parse_report(data: Sequence[Mapping[str, Any]]) -> list[SpecResult]:
    """The results of a Ginkgo JSON report (a list of suite reports): every spec, and every suite node that
    did not pass (a passed ``BeforeSuite`` is not a spec)."""
    results: list[SpecResult] = []
    for suite in data:
        for spec in suite.get("SpecReports") or ():
            node_type = str(spec.get("LeafNodeType") or "")
            state = str(spec.get("State") or "")
            if node_type in SUITE_NODE_TYPES and state == PASSED:
                continue
            results.append(
                SpecResult(
                    name=_full_name(spec),
                    node_type=node_type,
                    state=state,
                    seconds=int(spec.get("RunTime") or 0) / 1e9,
                    failure="" if state == PASSED else _failure(spec),
                )
            )
    return results


def read_report(path: Path) -> list[SpecResult]:
    """:func:`parse_report` of the file ``--ginkgo.json-report`` wrote."""
    return parse_report(json.loads(path.read_text(encoding="utf-8")))


def problems(results: Iterable[SpecResult], specs: Mapping[str, Spec] = SPECS) -> list[str]:
    """Why this run is a failure, one line each; empty when every listed spec passed (or was skipped with
    its stated reason) and nothing else ran."""
    found: list[str] = []
    seen: set[str] = set()
    for result in results:
        if result.node_type in SUITE_NODE_TYPES:
            found.append(f"{result.node_type} {result.state}: {result.failure}")
            continue
        seen.add(result.name)
        spec = specs.get(result.name)
        if spec is None:
            found.append(f"a spec this project does not list ran ({result.state}): {result.name}")
        elif result.state in SKIPPED_STATES:
            if not spec.skip_reason:
                found.append(f"{result.state} without a stated reason: {result.name}")
        elif not result.passed:
            found.append(f"{result.state}: {result.name}: {result.failure}")
    found += [f"did not run: {name}" for name in specs if name not in seen]
    return found


def table(results: Iterable[SpecResult], specs: Mapping[str, Spec] = SPECS) -> str:
    """A Markdown table: spec, result, seconds, stand-in (or, for a skipped spec, the reason)."""
    lines = ["| spec | result | s | stand-in used and what it does |", "|---|---|---|---|"]
    for result in results:
        spec = specs.get(result.name)
        if result.state in SKIPPED_STATES:
            note = spec.skip_reason if spec is not None and spec.skip_reason else "(no reason stated)"
        elif not result.passed:
            note = result.failure.splitlines()[0] if result.failure else ""
        else:
            note = spec.stand_in if spec is not None and spec.stand_in else "none"
        cell = note.replace("|", "\\|")
        lines.append(f"| {result.name} | {result.state} | {result.seconds:.0f} | {cell} |")
    return "\n".join(lines) + "\n"


def run_and_check(
    argv: Sequence[str],
    *,
    report: Path,
    log: Path,
    env: Mapping[str, str],
    timeout_s: float,
    title: str,
    request: pytest.FixtureRequest,
    specs: Mapping[str, Spec] = SPECS,
    cwd: Path | None = None,
    select: Callable[[list[SpecResult]], list[SpecResult]] = list,
) -> None:
    """Run a suite's binary (``argv``, writing its JSON report to ``report``) with its output in ``log``,
    print the table of the results ``select`` keeps, and fail the calling test on any of their
    :func:`problems`, on no report, or on a non-zero exit status."""
    with log.open("wb") as out:
        done = subprocess.run(
            list(argv),
            env=dict(env),
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=timeout_s,
            check=False,
        )
    if not report.is_file():
        tail = log.read_text(errors="replace")[-4000:]
        pytest.fail(
            f"the suite wrote no report (exit status {done.returncode}); its log ends:\n{tail}", pytrace=False
        )
    results = select(read_report(report))
    rendered = table(results, specs)
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"\n{title} ({len(results)} specs, exit status {done.returncode}; log: {log}):")
        reporter.write_line(rendered)
    found = problems(results, specs)
    assert not found, "\n".join([*found, "", rendered, f"the suite's log: {log}"])
    assert done.returncode == 0, f"every spec passed but the suite exited {done.returncode}; see {log}"
