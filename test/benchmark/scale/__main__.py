"""``python -m benchmark.scale`` (``make bench-scale``, ``hack/bench_scale.py``): runs the scenarios, then
reports."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmark.scale import (
    CONTROLLERS,
    DEFAULT_SETUP,
    LIFTED_BURST,
    LIFTED_QPS,
    REPO,
    SCENARIOS,
    SETUPS,
    SHIPPED_BURST,
    SHIPPED_QPS,
    THROTTLED_BURST,
    THROTTLED_QPS,
    say,
    stamp,
)
from benchmark.scale.managers import Session
from benchmark.scale.proc import PY_SPY_MISSING, load_average, py_spy
from benchmark.scale.report import (
    _jsonable,
    dump_json,
    environment,
    evaluate_targets,
    format_table,
    plot,
    table_rows,
)
from benchmark.scale.scenarios import (
    Settings,
    run_admission,
    run_burst,
    run_ceiling,
    run_micro,
    run_scale,
    run_steady,
)
from controller.envtest.process import install_sigterm_handler
from support import upstream


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bench_scale.py", description="Our controller and upstream's, side by side at scale."
    )
    parser.add_argument("--quick", action="store_true", help="small counts and short periods: a smoke run")
    parser.add_argument(
        "--scenarios", default=",".join(SCENARIOS), help=f"comma-separated subset of {','.join(SCENARIOS)}"
    )
    parser.add_argument("--controllers", default=",".join(CONTROLLERS), help="ours, upstream or both")
    parser.add_argument(
        "--setup",
        choices=SETUPS,
        default=DEFAULT_SETUP,
        help="with scheduler-plugins' PodGroup CRD installed (default) or without it; results of the "
        "latter are kept as <scenario>@no-podgroup-crds",
    )
    parser.add_argument("--burst", type=int, help="TrainJobs in a burst (1000; quick 100)")
    parser.add_argument("--idle-seconds", type=float, help="the idle period (60; quick 10)")
    parser.add_argument("--steady-seconds", type=float, help="each steady rate's duration (60; quick 10)")
    parser.add_argument("--rates", help="steady creates/s, comma-separated (20,50)")
    parser.add_argument(
        "--admission-rate", type=int, help="admission: open-loop creates/s before the burst (20)"
    )
    parser.add_argument(
        "--admission-seconds", type=float, help="how long it creates at that rate (60; quick 10)"
    )
    parser.add_argument("--scale", type=int, help="TrainJobs in the scale scenario (10000; quick 500)")
    parser.add_argument(
        "--restarts", type=int, help="restarts in the scale scenario, their medians reported (3; quick 1)"
    )
    parser.add_argument("--ceiling", type=int, help="JobSets per ceiling run (2000; quick 300)")
    parser.add_argument(
        "--output-dir", type=Path, help="default docs/performance (quick: build/bench-scale-quick)"
    )
    parser.add_argument(
        "--workdir", type=Path, default=Path("/tmp/bench-scale"), help="logs and configurations"
    )
    parser.add_argument(
        "--report",
        action="store_true",
        help="measure nothing: print the table and redraw the plots from the results.json already there",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="a directory: py-spy samples our manager during each burst and the restart into "
        "<scenario>-<controller>.txt there",
    )
    return parser


def _split(text: str, allowed: Sequence[str], what: str) -> list[str]:
    chosen = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [part for part in chosen if part not in allowed]
    if unknown:
        raise SystemExit(f"bench_scale.py: error: --{what}: unknown {unknown}; choose from {list(allowed)}")
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.profile is not None and py_spy() is None:
        raise SystemExit(PY_SPY_MISSING)  # before any scenario, not after the first one's populate
    scenarios = [] if args.report else _split(args.scenarios, SCENARIOS, "scenarios")
    controllers = _split(args.controllers, CONTROLLERS, "controllers")
    quick = args.quick
    settings = Settings(
        burst=args.burst or (100 if quick else 1000),
        idle_s=args.idle_seconds if args.idle_seconds is not None else (10.0 if quick else 60.0),
        steady_s=args.steady_seconds or (10.0 if quick else 60.0),
        rates=tuple(int(r) for r in (args.rates or "20,50").split(",")),
        admission_rate=args.admission_rate or 20,
        admission_s=args.admission_seconds or (10.0 if quick else 60.0),
        scale=args.scale or (500 if quick else 10_000),
        restarts=args.restarts or (1 if quick else 3),
        ceiling=args.ceiling or (300 if quick else 2000),
        workdir=args.workdir,
        profile=args.profile,
    )
    output = args.output_dir or (
        REPO / "build" / "bench-scale-quick" if quick else REPO / "docs" / "performance"
    )
    output.mkdir(parents=True, exist_ok=True)
    if "upstream" in controllers and scenarios:
        upstream.binary_path()  # fail early with the build command
    install_sigterm_handler()
    results_path = output / "results.json"
    previous: dict[str, Any] = {}
    if results_path.exists():
        with contextlib.suppress(ValueError, OSError):
            previous = json.loads(results_path.read_text())
    command = "python hack/bench_scale.py " + " ".join(argv if argv is not None else sys.argv[1:])
    this_run = {
        "command": command.strip(),
        "scenarios": scenarios,
        "controllers": controllers,
        "environment": environment(),
        "settings": _jsonable(dataclasses.asdict(settings)),
    }
    report: dict[str, Any] = {
        # Every invocation that wrote into this file, oldest first; a scenario's entries come from the last
        # run that named it (each entry has its own `measured_at` and load averages).
        "runs": [*previous.get("runs", []), *([this_run] if scenarios else [])],
        "scenarios": previous.get("scenarios", {}),
    }
    results: dict[str, Any] = report["scenarios"]

    def save() -> None:
        results_path.write_text(dump_json(report))

    def profile_path(scenario: str, which: str) -> Path | None:
        if settings.profile is None or which != "ours":
            return None  # py-spy reads Python processes only
        return settings.profile / f"{scenario}-{which}.txt"

    for scenario in scenarios:
        say(f"scenario {scenario}")
        if scenario == "micro":
            results["micro"] = {**run_micro(output / "micro-benchmarks.txt"), "measured_at": stamp()}
            save()
            continue
        if scenario == "ceiling":
            with Session(settings.workdir / "ceiling") as session:
                results["ceiling"] = {**run_ceiling(session, settings.ceiling), "measured_at": stamp()}
            save()
            continue
        key = scenario if args.setup == DEFAULT_SETUP else f"{scenario}@{args.setup}"
        runs: dict[str, Any] = dict(results.get(key, {}))
        for which in controllers:
            workdir = settings.workdir / key / which
            podgroup_crds = args.setup == DEFAULT_SETUP
            with Session(workdir, coscheduling=scenario == "scale", podgroup_crds=podgroup_crds) as session:
                if scenario == "burst":
                    runs[which] = run_burst(
                        session,
                        which,
                        settings.burst,
                        qps=SHIPPED_QPS,
                        burst=SHIPPED_BURST,
                        idle_s=settings.idle_s,
                        profile=profile_path(scenario, which),
                    )
                elif scenario == "burst-lifted":
                    runs[which] = run_burst(
                        session,
                        which,
                        settings.burst,
                        qps=LIFTED_QPS,
                        burst=LIFTED_BURST,
                        idle_s=None,
                        profile=profile_path(scenario, which),
                    )
                elif scenario == "steady":
                    runs[which] = run_steady(session, which, settings.rates, settings.steady_s)
                elif scenario in ("admission", "admission-throttled"):
                    throttled = scenario == "admission-throttled"
                    runs[which] = run_admission(
                        session,
                        which,
                        rate=settings.admission_rate,
                        seconds=settings.admission_s,
                        n=settings.burst,
                        qps=THROTTLED_QPS if throttled else SHIPPED_QPS,
                        burst=THROTTLED_BURST if throttled else SHIPPED_BURST,
                    )
                elif scenario == "scale":
                    runs[which] = run_scale(
                        session,
                        which,
                        settings.scale,
                        profile=profile_path("restart", which),
                        restarts=settings.restarts,
                    )
            runs[which]["measured_at"] = stamp()
            runs[which]["setup"] = args.setup
            results[key] = runs
            save()
    this_run["environment"]["load_at_end"] = load_average()
    targets = evaluate_targets(results)
    report["targets"] = [dataclasses.asdict(t) for t in targets]
    report["plots"] = [str(p.name) for p in plot(results, output)]
    save()
    print()
    print(format_table(table_rows(results), targets))
    print(f"\nresults: {results_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())


if __name__ == "__main__":
    sys.exit(main())
