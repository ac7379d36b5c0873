"""Write docs/architecture.svg, the README's picture of the controller, from the layout below.

Pure Python and deterministic (no timestamps, no fonts measured, no third-party code): the same source gives
the same bytes, so ``test/unit/docs/test_architecture_svg.py`` can check that the committed SVG is current
(it runs this script with ``--stdout``).

    .venv/bin/python hack/gen-architecture-svg.py           # rewrite docs/architecture.svg
    .venv/bin/python hack/gen-architecture-svg.py --check   # exit 1 if it is out of date

The picture is drawn by hand on a fixed grid: boxes with a title and lines of text, arrows between box edges,
short labels next to arrows. Text widths are not measured, so a line that is too long for its box shows up
only when you look at the result: render it (``rsvg-convert docs/architecture.svg -o /tmp/a.png``) after an
edit. Names in the boxes are the project's own (modules, ports, plugin and phase names), so when one of them
changes, change it here too.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

OUTPUT = Path(__file__).resolve().parent.parent / "docs" / "architecture.svg"
WIDTH, HEIGHT = 1200, 890
FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"

# (fill, stroke) by kind of thing.
STYLES = {
    "external": ("#f3f4f6", "#6b7280"),  # other programs: users, controllers, Prometheus
    "apiserver": ("#fff3dc", "#c27c0e"),
    "manager": ("#eef4fc", "#2f5f9e"),  # the manager process
    "part": ("#ffffff", "#2f5f9e"),  # a part of the manager
    "pipeline": ("#edf8ef", "#2f7d45"),  # runtime/, pure
    "phase": ("#ffffff", "#2f7d45"),
    "server": ("#ffffff", "#7c3aa8"),  # a server the manager runs
}


@dataclass(frozen=True, slots=True)
class Box:
    x: int
    y: int
    w: int
    h: int

    @property
    def left(self) -> int:
        return self.x

    @property
    def right(self) -> int:
        return self.x + self.w

    @property
    def top(self) -> int:
        return self.y

    @property
    def bottom(self) -> int:
        return self.y + self.h

    @property
    def cx(self) -> int:
        return self.x + self.w // 2


class Drawing:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def rect(self, box: Box, style: str, *, radius: int = 6, dashed: bool = False) -> None:
        fill, stroke = STYLES[style]
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        self.parts.append(
            f'<rect x="{box.x}" y="{box.y}" width="{box.w}" height="{box.h}" rx="{radius}" '
            f'fill="{fill}" stroke="{stroke}" stroke-width="1.5"{dash}/>'
        )

    def text(
        self, x: int, y: int, content: str, *, size: int = 12, bold: bool = False, anchor: str = "start",
        colour: str = "#1f2937", italic: bool = False,
    ) -> None:  # fmt: skip
        weight = ' font-weight="bold"' if bold else ""
        style = ' font-style="italic"' if italic else ""
        self.parts.append(
            f'<text x="{x}" y="{y}" font-size="{size}"{weight}{style} text-anchor="{anchor}" '
            f'fill="{colour}">{escape(content)}</text>'
        )

    def box(
        self, box: Box, style: str, title: str, lines: tuple[str, ...] = (), *, dashed: bool = False,
        centre: bool = False, package: str = "",
    ) -> None:  # fmt: skip
        """A box with a title and lines; `package`: where its code lives, at the bottom right."""
        self.rect(box, style, dashed=dashed)
        anchor, x = ("middle", box.cx) if centre else ("start", box.x + 10)
        self.text(x, box.y + 20, title, size=13, bold=True, anchor=anchor)
        for number, line in enumerate(lines):
            self.text(x, box.y + 38 + 15 * number, line, size=11, anchor=anchor)
        if package:
            self.text(box.right - 8, box.bottom - 7, package, size=10, anchor="end", colour="#4b5563",
                      italic=True)  # fmt: skip

    def arrow(
        self, points: tuple[tuple[int, int], ...], *, both: bool = False, dashed: bool = False,
        colour: str = "#374151",
    ) -> None:  # fmt: skip
        path = " ".join(f"{x},{y}" for x, y in points)
        dash = ' stroke-dasharray="5 4"' if dashed else ""
        start = ' marker-start="url(#head-start)"' if both else ""
        self.parts.append(
            f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.5"{dash}{start} '
            'marker-end="url(#head)"/>'
        )

    def label(self, x: int, y: int, content: str, *, anchor: str = "middle") -> None:
        self.text(x, y, content, size=10, anchor=anchor, colour="#4b5563", italic=True)

    def svg(self) -> str:
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="{FONT}" xml:space="preserve">\n'
            "<title>kubeflow-trainer-py: the manager, its parts, and what it talks to</title>\n"
            "<defs>\n"
            '<marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" '
            'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#374151"/></marker>\n'
            '<marker id="head-start" viewBox="0 0 10 10" refX="1" refY="5" markerWidth="8" markerHeight="8" '
            'orient="auto"><path d="M10,0 L0,5 L10,10 z" fill="#374151"/></marker>\n'
            "</defs>\n"
            f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>\n'
        )
        return head + "\n".join(self.parts) + "\n</svg>\n"


def draw() -> str:
    d = Drawing()

    # ---------------------------------------------------------------- left: the other programs in the cluster
    sdk = Box(20, 50, 262, 92)
    tools = Box(20, 172, 262, 62)
    kueue = Box(20, 264, 262, 78)
    jobset = Box(20, 372, 262, 92)
    kube = Box(20, 494, 262, 92)
    d.text(20, 32, "Users and other controllers", size=14, bold=True)
    d.box(sdk, "external", "User code + Kubeflow SDK", (
        "TrainerClient: list runtimes, train(),",
        "wait_for_job_status, get_job_events,",
        "get_job_logs, delete_job",
    ))  # fmt: skip
    d.box(tools, "external", "kubectl · kustomize · Helm", ("install (config/, charts/); apply YAML",))
    d.box(kueue, "external", "Kueue (optional)", (
        "admits a TrainJob by resuming it",
        "(spec.suspend); managedBy: MultiKueue",
    ), dashed=True)  # fmt: skip
    d.box(jobset, "external", "JobSet controller (v0.12.0)", (
        "JobSet → one Job per replicated job;",
        "its webhooks default JobSets; writes",
        "JobSet status (Completed / Failed)",
    ))  # fmt: skip
    d.box(kube, "external", "kube-controller-manager,", (
        "kube-scheduler, kubelets",
        "Jobs → Pods → containers;", "garbage collection of owned objects",
    ))  # fmt: skip

    # --------------------------------------------------------------------------------- middle: the API server
    api = Box(360, 50, 140, 740)
    d.rect(api, "apiserver")
    d.text(api.cx, api.y + 24, "kube-apiserver", size=14, bold=True, anchor="middle")
    d.text(api.cx, api.y + 42, "(+ etcd)", size=11, anchor="middle")
    resources = (
        "trainer.kubeflow.org/", "v1alpha1:", "TrainJob", "TrainingRuntime", "ClusterTraining-", "Runtime",
        "", "JobSet", "Job · Pod", "ConfigMap · Secret", "PodGroup", "Event · Lease", "TokenReview",
    )  # fmt: skip
    for number, line in enumerate(resources):
        d.text(api.cx, api.y + 80 + 17 * number, line, size=11, anchor="middle")

    for source, text in (
        (sdk, "TrainJobs"),
        (tools, "apply"),
        (kueue, "resume"),
        (jobset, "JobSets"),
        (kube, "Pods"),
    ):
        y = source.y + source.h // 2
        d.arrow(((source.right, y), (api.left, y)), both=source is not tools)
        d.label((source.right + api.left) // 2, y - 6, text)

    # ---------------------------------------------------------------------------------- right: the manager
    manager = Box(560, 50, 620, 740)
    d.rect(manager, "manager", radius=10)
    d.text(manager.x + 14, manager.y + 24, "trainer-controller-manager", size=15, bold=True)
    d.text(
        manager.x + 14, manager.y + 42,
        "one Python process (cmd/); a Deployment in kubeflow-system, or a host process for make demo",
        size=11,
    )  # fmt: skip

    informers = Box(580, 100, 200, 150)
    queue = Box(810, 100, 140, 150)
    controllers = Box(980, 100, 180, 150)
    d.box(informers, "part", "Informers + caches", (
        "list + watch; read-only dicts",
        "TrainJob, JobSet, PodGroup,",
        "runtimes, LimitRange,",
        "RuntimeClass; ConfigMap and",
        "Secret (labelled ones only);",
        "field index: runtimeRef",
    ), package="controller/informers, cache/")  # fmt: skip
    d.box(queue, "part", "Workqueues", (
        "one per controller",
        "rate-limited, FIFO",
        "a key is never",
        "processed twice",
        "at once",
    ), package="controller/workqueue/")  # fmt: skip
    d.box(controllers, "part", "Controllers", (
        "trainjob (5 workers)",
        "trainingruntime",
        "clustertrainingruntime",
        "level-based reconcile",
        "of namespace/name",
    ), package="controller/controller/")  # fmt: skip
    d.arrow(((api.right, 175), (informers.left, 175)))
    d.label((api.right + informers.left) // 2, 169, "watch")
    d.arrow(((informers.right, 175), (queue.left, 175)))
    d.label((informers.right + queue.left) // 2, 169, "keys")
    d.arrow(((queue.right, 175), (controllers.left, 175)))
    d.label((queue.right + controllers.left) // 2, 169, "keys")

    pipeline = Box(580, 285, 580, 182)
    d.rect(pipeline, "pipeline")
    d.text(pipeline.x + 10, pipeline.y + 20, "Runtime pipeline (runtime/: pure, no I/O, no threads)", size=13,
           bold=True)  # fmt: skip
    d.text(pipeline.x + 10, pipeline.y + 38,
           "TrainJob + its runtime (or the runtime snapshot) → Info → objects to apply, and the status",
           size=11)  # fmt: skip
    phases = (
        ("Enforce", "MLPolicy"), ("Enforce", "PodGroupPolicy"), ("Pod", "Network"), ("Component", "Builder"),
        ("TrainJob", "Status"),
    )  # fmt: skip
    phase_w, gap = 96, 20
    for number, (first, second) in enumerate(phases):
        phase = Box(pipeline.x + 10 + number * (phase_w + gap), pipeline.y + 52, phase_w, 42)
        d.rect(phase, "phase", radius=4)
        d.text(phase.cx, phase.y + 17, first, size=11, anchor="middle")
        d.text(phase.cx, phase.y + 32, second, size=11, anchor="middle")
        if number:
            d.arrow(((phase.left - gap, phase.y + 21), (phase.left, phase.y + 21)))
    d.text(pipeline.x + 10, pipeline.y + 116, "plugins, in registry order:", size=11, bold=True)
    plugins = (
        "ML policies: Torch · MPI · JAX · XGBoost · Flux · PlainML;  pod groups: CoScheduling · Volcano",
        "objects: the JobSet plugin, plus PodGroups, the MPI Secret and hostfile, ...;  "
        "status: TrainJobStatus",
        "admission: CustomValidation, the same plugins' checks, run by the validating webhook",
    )
    for number, line in enumerate(plugins):
        d.text(pipeline.x + 10, pipeline.y + 134 + 16 * number, line, size=11)
    d.arrow(((controllers.cx, controllers.bottom), (controllers.cx, pipeline.top)))
    d.label(controllers.cx + 6, controllers.bottom + 22, "build", anchor="start")

    client = Box(580, 495, 270, 92)
    leader = Box(880, 495, 280, 92)
    d.box(client, "part", "Client", (
        "server-side apply, field manager trainer",
        "status: JSON merge patch on /status",
        "core/v1 Events; per-type rate limits",
    ), package="controller/client/")  # fmt: skip
    d.box(leader, "part", "Leader election + certificates", (
        "Lease trainer.kubeflow.org: one leader",
        "runs the controllers; the rotator fills",
        "the webhook Secret and caBundle",
    ), package="controller/manager/, serving/certs/")  # fmt: skip
    d.arrow(((client.cx, pipeline.bottom), (client.cx, client.top)))
    d.label(client.cx + 8, pipeline.bottom + 20, "objects, in order", anchor="start")
    d.arrow(((client.left, 541), (api.right, 541)))
    d.label((api.right + client.left) // 2, 535, "apply")

    webhook = Box(580, 622, 180, 148)
    status = Box(780, 622, 180, 148)
    metrics = Box(980, 622, 180, 148)
    d.box(webhook, "server", "Webhook server", (
        ":9443, HTTPS",
        "defaults TrainJobs;",
        "validates TrainJobs and",
        "(Cluster)TrainingRuntimes",
        "fails closed",
        "certificates reloaded live",
    ), package="controller/serving/webhook/")  # fmt: skip
    d.box(status, "server", "Status server", (
        ":10443, HTTPS; feature",
        "gate TrainJobStatus",
        "pods POST progress and",
        "metrics with a projected",
        "token (TokenReview);",
        "written to trainerStatus",
    ), package="trainer/statusserver/")  # fmt: skip
    d.box(metrics, "server", "Metrics + health", (
        ":8443 /metrics (HTTPS,",
        "optional authn/authz)",
        "kubeflow_trainer_* and",
        "controller-runtime's;",
        ":8081 /healthz /readyz",
    ), package="controller/metrics, serving/")  # fmt: skip
    d.arrow(((api.right, 680), (webhook.left, 680)))
    d.label((api.right + webhook.left) // 2, 674, "admission")

    pods = Box(780, 810, 180, 66)
    prometheus = Box(980, 810, 180, 66)
    d.box(pods, "external", "Training pods", ("training code; the SDK in", "the pod reports progress"))
    d.box(prometheus, "external", "Prometheus", ("scrapes /metrics", "(ServiceMonitor)"), dashed=True)
    d.arrow(((pods.cx, pods.top), (status.cx, status.bottom)))
    d.label(pods.cx + 6, pods.top - 12, "POST", anchor="start")
    d.arrow(((prometheus.cx, prometheus.top), (metrics.cx, metrics.bottom)))
    d.label(prometheus.cx + 6, prometheus.top - 12, "scrape", anchor="start")

    # ------------------------------------------------------------------------------------------------ legend
    legend_y = 820
    legend = (
        "Arrows: what flows where (double heads: both ways). Dashed boxes: optional.",
        "Source: hack/gen-architecture-svg.py (see docs/architecture.md for the",
        "module map and contracts).",
    )
    for number, line in enumerate(legend):
        d.text(20, legend_y + 16 * number, line, size=11)
    return d.svg()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/architecture.svg is out of date")
    parser.add_argument("--stdout", action="store_true", help="print the drawing instead of writing it")
    args = parser.parse_args(argv)
    svg = draw()
    if args.stdout:
        sys.stdout.write(svg)
        return 0
    if args.check:
        current = OUTPUT.read_text() if OUTPUT.exists() else ""
        if current != svg:
            print(f"{OUTPUT} is out of date: run hack/gen-architecture-svg.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(svg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
