"""Kueue's own TrainJob e2e specs run against this controller: which specs, how the suite is run, the table.

Kueue's e2e suite (the package ``test/e2e/singlecluster`` of ``sigs.k8s.io/kueue`` at ``KUEUE_VERSION``) is
compiled unmodified from the Go module by ``hack/build-binaries.sh kueue-e2e`` (a Ginkgo test binary,
``e2e.test``) and run by ``test/e2e/test_kueue_e2e.py`` against the manager and the Kueue that
``hack/e2e-setup-kind.sh`` installed, with the label filter ``feature:trainjob``: the specs of
``trainjob_test.go``. The report is read and judged with ``support.upstream_e2e`` (the same reader that
runs upstream Trainer's suite); this module holds what differs:

- :data:`SPECS`: the specs the filter selects at that version, by their full Ginkgo names, with the image
  each runs and what it does there; ``docs/compatibility.md`` has the same table;
- :func:`command` and :func:`environment`: the command line and what the suite reads from its environment
  (see below);
- :func:`selected`: the results the filter selected (Ginkgo reports the specs it filtered out as skipped).

What the suite's set-up (``suite_test.go`` ``BeforeSuite`` and ``test/util``) expects, and how it is met
without changing its code:

- ``KUBECONFIG``: the kind cluster's;
- ``kueue-system/kueue-controller-manager`` Available with no container restarted, its pods' IPs behind the
  ``kueue-webhook-service`` endpoints, and its leader-election Lease renewed: Kueue's own ``config/default``
  (``hack/e2e-setup-kind.sh`` step 8) installs those names; ``KUEUE_NAMESPACE`` is left unset (its default,
  ``kueue-system``);
- for ``feature:trainjob``, ``jobset-system/jobset-controller-manager`` and
  ``kubeflow-system/kubeflow-trainer-controller-manager`` Available with no restarts: JobSet's own manifests
  and this project's chart install those names;
- the agnhost image (``E2E_TEST_AGNHOST_IMAGE``, as Kueue's CI sets it: the name of its
  ``hack/testing/agnhost/Dockerfile`` without the digest): ``hack/build-images.sh agnhost`` builds it from
  the Kubernetes module and tags it so, and the script loads it into kind;
- the project's directory (``PROJECT_DIR``, whose parent it takes; otherwise it looks upward from the working
  directory for a Makefile, and fails): the Kueue module's directory in the Go module cache;
- ``ARTIFACTS``: where its ``ReportAfterSuite`` writes a JUnit file (else the working directory).

Deliberately missing: the suite's other specs (other integrations: Jobs, JobSets, pods, Ray, LWS... need
their operators and Kueue's other integrations on), and ``test/e2e/tas/trainjob_test.go`` (topology-aware
scheduling needs a labelled multi-node topology and Kueue's TAS configuration).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from support import upstream_e2e
from support.upstream_e2e import SUITE_NODE_TYPES, Spec, SpecResult

LABEL_FILTER = "feature:trainjob"
"""The Ginkgo label filter: the TrainJob specs of the singlecluster suite, as Kueue's CI selects them."""

_AGNHOST_EXIT = (
    "registry.k8s.io/e2e-test-images/agnhost:2.63.0: agnhost built from k8s.io/kubernetes "
    "(KUBERNETES_VERSION, whose agnhost VERSION is 2.63.0) on the Python base; `/agnhost entrypoint-tester` "
    "prints its arguments and exits 0, the TrainJob Completes and its Workload is Finished"
)
_AGNHOST_WAIT = (
    "registry.k8s.io/e2e-test-images/agnhost:2.63.0: as above; `/agnhost netexec` would serve until "
    "deleted, but its pods stay Pending (no node has the flavor's instance-type label) until the "
    "ClusterQueue's HoldAndDrain stop policy makes Kueue suspend the TrainJob"
)

SPECS: Mapping[str, Spec] = {
    "TrainJob when Creating a TrainJob Should run a TrainJob if admitted": Spec(stand_in=_AGNHOST_EXIT),
    "TrainJob when Using resource flavors with node selectors "
    "Should allow to suspend a TrainJob when injected nodeSelector": Spec(stand_in=_AGNHOST_WAIT),
}


def command(binary: Path, report: Path, *, timeout_s: int) -> list[str]:
    """The suite's command line: upstream_e2e's (verbose, the JSON report, a timeout) and the label filter."""
    return [
        *upstream_e2e.command(binary, report, timeout_s=timeout_s),
        f"-ginkgo.label-filter={LABEL_FILTER}",
    ]


def environment(
    base: Mapping[str, str], *, kubeconfig: Path, agnhost_image: str, module_dir: Path, artifacts: Path
) -> dict[str, str]:
    """The suite's environment: ``base`` with what its set-up reads (see the module's docstring)."""
    env = {k: v for k, v in base.items() if k != "KUEUE_NAMESPACE"}
    env.update(
        KUBECONFIG=str(kubeconfig),
        E2E_TEST_AGNHOST_IMAGE=agnhost_image,
        PROJECT_DIR=str(module_dir / "Makefile"),
        ARTIFACTS=str(artifacts),
    )
    return env


def selected(results: Iterable[SpecResult]) -> list[SpecResult]:
    """The results of the specs the label filter selected, and every suite node that did not pass: Ginkgo
    reports the specs it filtered out as skipped, and those are none of this run's business."""
    return [
        r
        for r in results
        if r.node_type in SUITE_NODE_TYPES or r.name in SPECS or r.state not in upstream_e2e.SKIPPED_STATES
    ]
