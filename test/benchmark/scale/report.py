"""The results: targets met or not, the table on stdout, the PNG plots and ``results.json``."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.scale import CONTROLLERS, DEFAULT_SETUP, SETUPS, say
from benchmark.scale.proc import load_average
from support import thirdparty


def steady_rates(steady: Mapping[str, Any]) -> list[int]:
    """The creation rates measured in the steady scenario's results (each controller's entry maps a rate,
    as text, to its figures, beside ``measured_at``)."""
    return sorted(
        {int(key) for runs in steady.values() if isinstance(runs, Mapping) for key in runs if key.isdigit()}
    )


def ratio(ours: float | None, upstream: float | None) -> float | None:
    if ours is None or upstream is None or upstream == 0 or math.isnan(ours) or math.isnan(upstream):
        return None
    return ours / upstream


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """One target of the scale benchmark (docs/performance/) and whether this run met it."""

    name: str
    wanted: str
    measured: str
    met: bool | None
    """None: not measured in this run."""


def _fmt(value: float | None, unit: str = "", digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f}{unit}"


def _difference(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


ADMISSION_FIGURES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("paced create p50", ("paced", "create_latency_s", "p50")),
    ("paced create p99", ("paced", "create_latency_s", "p99")),
    ("burst create p50", ("burst", "create_latency_s", "p50")),
    ("burst create p99", ("burst", "create_latency_s", "p99")),
    ("burst, all JobSets", ("burst", "wall_s")),
)
"""The admission scenario's figures that have a target (each at most 1.0x upstream's): create-request latency
with the webhooks registered, open-loop and in the burst, and the burst's end-to-end time."""


def evaluate_targets(results: Mapping[str, Any]) -> list[Target]:
    """The issue's targets against ``results`` (the ``scenarios`` part of results.json)."""
    targets: list[Target] = []

    def get(scenario: str, controller: str, *path: str) -> Any:
        node: Any = results.get(scenario, {}).get(controller)
        for key in path:
            if not isinstance(node, Mapping):
                return None
            node = node.get(key)
        return node

    def add_ratio(
        name: str, scenario: str, path: Sequence[str], limit: float, *, higher_is_better: bool = False
    ) -> None:
        ours, upstream = get(scenario, "ours", *path), get(scenario, "upstream", *path)
        r = ratio(ours, upstream)
        if r is None:
            targets.append(
                Target(
                    name=name,
                    wanted=f"{'≥' if higher_is_better else '≤'} {limit:g}x upstream",
                    measured="n/a",
                    met=None,
                )
            )
            return
        met = r >= limit if higher_is_better else r <= limit
        targets.append(
            Target(
                name=name,
                wanted=f"{'≥' if higher_is_better else '≤'} {limit:g}x upstream",
                measured=f"{r:.2f}x",
                met=met,
            )
        )

    def add_value(
        name: str, value: float | None, wanted: str, ok: Callable[[float], bool], unit: str = ""
    ) -> None:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            targets.append(Target(name=name, wanted=wanted, measured="n/a", met=None))
        else:
            targets.append(
                Target(name=name, wanted=wanted, measured=_fmt(float(value), unit), met=ok(float(value)))
            )

    for setup in ("", "@no-podgroup-crds"):
        burst, lifted, scale = f"burst{setup}", f"burst-lifted{setup}", f"scale{setup}"
        tag = f" [{setup[1:]}]" if setup else ""
        if setup and not any(key in results for key in (burst, lifted, scale)):
            continue
        add_ratio(f"burst wall time (shared limiter){tag}", burst, ("wall_s",), 1.0)
        add_ratio(f"API writes per TrainJob (burst){tag}", burst, ("requests", "writes_per_trainjob"), 1.0)
        add_value(
            f"reconcile errors in a burst (ours){tag}",
            get(burst, "ours", "reconcile_errors"),
            "0",
            lambda v: v == 0,
        )
        add_ratio(f"manager CPU per TrainJob (burst){tag}", burst, ("cpu_s_per_trainjob",), 0.6)
        add_ratio(f"RSS after the burst{tag}", burst, ("rss_mib",), 1.0)
        add_value(f"idle writes (ours){tag}", get(burst, "ours", "idle", "writes"), "0", lambda v: v == 0)
        add_value(
            f"idle requests (ours){tag}",
            get(burst, "ours", "idle", "client_requests"),
            "0",
            lambda v: v == 0,
        )
        add_ratio(f"lifted burst throughput{tag}", lifted, ("throughput_per_s",), 2.0, higher_is_better=True)
        add_ratio(f"RSS at scale, after idle{tag}", scale, ("rss_idle_mib",), 0.5)
        add_ratio(f"RSS right after the restart{tag}", scale, ("restart", "rss_mib"), 0.5)
        add_value(
            f"restart RSS above settled (ours){tag}",
            _difference(get(scale, "ours", "restart", "rss_mib"), get(scale, "ours", "rss_mib")),
            "≤ 0 MiB",
            lambda v: v <= 0,
            " MiB",
        )
        add_ratio(f"initial reconciles drained after restart{tag}", scale, ("restart", "drained_s"), 0.7)
        add_value(
            f"writes during restart (ours){tag}",
            get(scale, "ours", "restart", "writes"),
            "0",
            lambda v: v == 0,
        )
        add_ratio(f"manager CPU per TrainJob (restart){tag}", scale, ("restart", "cpu_s_per_trainjob"), 0.6)
        add_ratio(f"manager CPU per TrainJob (populating){tag}", scale, ("cpu_s_per_trainjob",), 0.6)
    for setup in ("", "@no-podgroup-crds"):
        admission = f"admission{setup}"
        if setup and admission not in results:
            continue
        tag = f" [{setup[1:]}]" if setup else ""
        for label, path in ADMISSION_FIGURES:
            add_ratio(f"admission: {label}{tag}", admission, path, 1.0)
    for rate, limit in (("20", 0.1), ("50", 1.0)):
        add_ratio(f"steady {rate}/s p99 latency", "steady", (rate, "latency_s", "p99"), 1.0)
        add_value(
            f"steady {rate}/s p99 latency (ours)",
            get("steady", "ours", rate, "latency_s", "p99"),
            f"≤ {limit:g} s",
            lambda v, limit=limit: v <= limit,
            " s",
        )
    return targets


# ============================================================================================= processes


def environment() -> dict[str, Any]:
    pinned = thirdparty.read_versions()
    try:
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        cpu = platform.processor()
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "cpus": os.cpu_count(),
        "cpu_model": cpu,
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "kubernetes": pinned.get("KUBERNETES_VERSION"),
        "etcd": pinned.get("ETCD_VERSION"),
        "upstream_trainer": pinned.get("TRAINER_VERSION"),
        "load_at_start": load_average(),
    }


def table_rows(scenarios: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """(figure, ours, upstream, ours ÷ upstream) rows for the printed table and the docs: the default set-up
    (PodGroup CRDs installed), then each other set-up measured (scenario keys `<scenario>@<setup>`), its
    labels prefixed with the set-up."""
    rows: list[tuple[str, str, str, str]] = []
    for setup in SETUPS:
        suffix = "" if setup == DEFAULT_SETUP else f"@{setup}"
        chosen = {
            name.removesuffix(suffix): runs
            for name, runs in scenarios.items()
            if (name.endswith(suffix) if suffix else "@" not in name)
        }
        prefix = "" if setup == DEFAULT_SETUP else f"[{setup}] "
        rows += [(prefix + label, *rest) for label, *rest in _setup_rows(chosen)]
    return rows


def _setup_rows(scenarios: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    rows: list[tuple[str, str, str, str]] = []

    def row(
        label: str, path: Sequence[str], scenario: str, *, unit: str = "", digits: int = 2, scale: float = 1.0
    ) -> None:
        values = []
        for controller in CONTROLLERS:
            node: Any = scenarios.get(scenario, {}).get(controller)
            for key in path:
                node = node.get(key) if isinstance(node, Mapping) else None
            values.append(None if node is None else float(node) * scale)
        if all(v is None for v in values):
            return
        r = ratio(values[0], values[1])
        rows.append((label, _fmt(values[0], unit, digits), _fmt(values[1], unit, digits), _fmt(r, "x")))

    burst = scenarios.get("burst", {})
    n = next((burst[c]["trainjobs"] for c in CONTROLLERS if c in burst), None)
    row(f"burst of {n}: all JobSets (s)", ("wall_s",), "burst")
    row("burst: API writes per TrainJob", ("requests", "writes_per_trainjob"), "burst")
    row("burst: API reads per TrainJob", ("requests", "reads_per_trainjob"), "burst")
    row("burst: failed requests", ("requests", "failed"), "burst", digits=0)
    row("burst: reconcile errors", ("reconcile_errors",), "burst", digits=0)
    row("burst: manager CPU per TrainJob (ms)", ("cpu_s_per_trainjob",), "burst", scale=1000)
    row("idle: writes", ("idle", "writes"), "burst", digits=0)
    row("idle: client requests", ("idle", "client_requests"), "burst", digits=0)
    row("idle: manager CPU (s)", ("idle", "cpu_s"), "burst")
    row("burst, limiters lifted: all JobSets (s)", ("wall_s",), "burst-lifted")
    row("burst, limiters lifted: JobSets/s", ("throughput_per_s",), "burst-lifted", digits=0)
    row("burst, limiters lifted: reconcile errors", ("reconcile_errors",), "burst-lifted", digits=0)
    row(
        "burst, limiters lifted: all API writes/s",
        ("all_writes_per_s",),
        "burst-lifted",
        digits=0,
    )
    for process in ("manager", "kube-apiserver", "etcd"):
        row(f"burst, limiters lifted: cores busy, {process}", ("cores", process), "burst-lifted")
    for rate in map(str, steady_rates(scenarios.get("steady", {}))):
        for q in ("p50", "p95", "p99"):
            row(f"steady {rate}/s: latency {q} (ms)", (rate, "latency_s", q), "steady", digits=0, scale=1000)
    for scenario in ("admission", "admission-throttled"):
        admission = scenarios.get(scenario, {})
        if not admission:
            continue
        rate = next((admission[c]["paced"]["rate_per_s"] for c in CONTROLLERS if c in admission), None)
        n = next((admission[c]["burst"]["trainjobs"] for c in CONTROLLERS if c in admission), None)
        limiter = next((admission[c].get("limiter") for c in CONTROLLERS if c in admission), None)
        prefix = "admission"
        if scenario != "admission":  # the limiter it ran under (older results have none recorded)
            prefix += f", limiter {limiter['qps']:g}/{limiter['burst']}" if limiter else ", throttled"
        for phase, what in (("paced", f"{rate} creates/s"), ("burst", f"burst of {n}")):
            for q in ("p50", "p99"):
                label = f"{prefix}, {what}: create {q} (ms)"
                row(label, (phase, "create_latency_s", q), scenario, digits=1, scale=1000)
            label = f"{prefix}, {what}: mean time in the webhook server (ms)"
            row(label, (phase, "webhook_mean_s"), scenario, digits=2, scale=1000)
            for webhook in ("defaulter", "validator"):
                label = f"{prefix}, {what}: the API server's mean {webhook} call (ms)"
                row(label, (phase, "apiserver_webhook_mean_s", webhook), scenario, digits=2, scale=1000)
        label = f"{prefix}, burst of {n}: JobSets existing at the last create's answer"
        row(label, ("burst", "jobsets_while_creating"), scenario, digits=0)
        row(f"{prefix}, burst of {n}: all JobSets (s)", ("burst", "wall_s"), scenario)
    scale = scenarios.get("scale", {})
    n = next((scale[c]["trainjobs"] for c in CONTROLLERS if c in scale), None)
    row(f"scale {n}: RSS after settle (MiB)", ("rss_mib",), "scale", digits=0)
    row(f"scale {n}: RSS after 130 s idle (MiB)", ("rss_idle_mib",), "scale", digits=0)
    row(f"scale {n}: manager CPU per TrainJob (ms)", ("cpu_s_per_trainjob",), "scale", scale=1000)
    row(f"scale {n}: API writes per TrainJob", ("requests", "writes_per_trainjob"), "scale")
    row("restart: caches synced (s)", ("restart", "caches_synced_s"), "scale", digits=1)
    row("restart: initial reconciles drained (s)", ("restart", "drained_s"), "scale", digits=1)
    row("restart: writes", ("restart", "writes"), "scale", digits=0)
    row("restart: RSS after drain (MiB)", ("restart", "rss_mib"), "scale", digits=0)
    row("restart: RSS after 130 s idle (MiB)", ("restart", "rss_idle_mib"), "scale", digits=0)
    row("restart: manager CPU per TrainJob (ms)", ("restart", "cpu_s_per_trainjob"), "scale", scale=1000)
    for kind, cache in sorted((scale.get("ours", {}).get("cache") or {}).items()):
        rows.append(
            (
                f"scale: cache bytes per {kind}, managedFields stripped → transformed",
                f"{cache['stripped_bytes']:.0f} → {cache['transformed_bytes']:.0f}",
                "",
                "",
            )
        )
    ceiling = scenarios.get("ceiling", {}).get("apply_per_s")
    if ceiling:
        rows.append(("ceiling: JobSet SSA/s, tight client", _fmt(ceiling, "", 0), "", ""))
    return rows


def format_table(rows: Sequence[tuple[str, str, str, str]], targets: Sequence[Target]) -> str:
    header = ("figure", "ours", "upstream", "ours ÷ upstream")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.append("")
    lines.append("targets:")
    for t in targets:
        mark = {True: "met", False: "NOT met", None: "not measured"}[t.met]
        lines.append(f"  {t.name}: wanted {t.wanted}, measured {t.measured}: {mark}")
    return "\n".join(lines)


def plot(scenarios: Mapping[str, Any], directory: Path) -> list[Path]:
    """PNG plots of the runs; none (with a note) without matplotlib (``pip install -e '.[bench]'``)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        say("matplotlib is not installed (pip install -e '.[bench]'): no plots")
        return []
    colours = {"ours": "tab:blue", "upstream": "tab:orange"}
    written: list[Path] = []
    bursts = [(name, scenarios[name]) for name in ("burst", "burst-lifted") if name in scenarios]
    if bursts:
        fig, axes = plt.subplots(1, len(bursts), figsize=(6 * len(bursts), 4), squeeze=False)
        for ax, (name, runs) in zip(axes[0], bursts, strict=True):
            for controller, run in runs.items():
                _arrivals(
                    ax, run["jobset_seen_s"], f"{controller} ({run['wall_s']:.1f} s)", colours.get(controller)
                )
            limit = "QPS 50 / burst 100" if name == "burst" else "limiters lifted"
            ax.set_title(f"{name}: JobSets existing ({limit})")
            ax.set_xlabel("seconds since the first TrainJob create")
            ax.set_ylabel("JobSets")
            ax.legend()
            ax.grid(alpha=0.3)
        fig.tight_layout()
        written.append(directory / "burst.png")
        fig.savefig(written[-1], dpi=100)
        plt.close(fig)
    steady = scenarios.get("steady")
    if steady:
        rates = steady_rates(steady)
        fig, axes = plt.subplots(1, len(rates), figsize=(6 * len(rates), 4), squeeze=False)
        for ax, rate in zip(axes[0], rates, strict=True):
            for controller, runs in steady.items():
                _cdf_ms(
                    ax, runs.get(str(rate), {}).get("latencies_s") or [], controller, colours.get(controller)
                )
            ax.set_xscale("log")
            ax.set_title(f"steady {rate} creates/s: TrainJob → JobSet latency")
            ax.set_xlabel("ms (log scale)")
            ax.set_ylabel("fraction of TrainJobs")
            ax.legend()
            ax.grid(alpha=0.3)
        fig.tight_layout()
        written.append(directory / "steady.png")
        fig.savefig(written[-1], dpi=100)
        plt.close(fig)
    admission = scenarios.get("admission")
    if admission:
        written.append(_plot_admission(plt, admission, directory / "admission.png", colours))
    scale = scenarios.get("scale")
    if scale:
        figures = [
            ("RSS after settle (MiB)", ("rss_mib",)),
            ("CPU per TrainJob, populate (ms)", ("cpu_s_per_trainjob",)),
            ("restart: caches synced (s)", ("restart", "caches_synced_s")),
            ("restart: reconciles drained (s)", ("restart", "drained_s")),
        ]
        fig, axes = plt.subplots(1, len(figures), figsize=(4 * len(figures), 3.5), squeeze=False)
        for ax, (title, path) in zip(axes[0], figures, strict=True):
            labels, values = [], []
            for controller, run in scale.items():
                node: Any = run
                for key in path:
                    node = node.get(key) if isinstance(node, Mapping) else None
                if node is not None:
                    labels.append(controller)
                    values.append(float(node) * (1000 if "ms" in title else 1))
            ax.bar(labels, values, color=[colours.get(c) for c in labels])
            ax.set_title(title, fontsize=10)
            ax.grid(alpha=0.3, axis="y")
        n = next(iter(scale.values()))["trainjobs"]
        fig.suptitle(f"{n} TrainJobs with JobSets and PodGroups")
        fig.tight_layout()
        written.append(directory / "scale.png")
        fig.savefig(written[-1], dpi=100)
        plt.close(fig)
    return written


def _cdf_ms(ax: Any, values: Sequence[float], label: str, colour: str | None) -> None:
    """The distribution of ``values`` (sorted seconds) as a CDF over milliseconds; nothing when empty."""
    if values:
        fractions = [i / len(values) for i in range(1, len(values) + 1)]
        ax.plot([v * 1000 for v in values], fractions, label=label, color=colour)


def _arrivals(ax: Any, times: Sequence[float], label: str, colour: str | None) -> None:
    """How many objects existed over time, from their sorted arrival times."""
    ax.step(times, range(1, len(times) + 1), where="post", label=label, color=colour)


def _plot_admission(plt: Any, runs: Mapping[str, Any], path: Path, colours: Mapping[str, str]) -> Path:
    """Create-request latency (CDFs, open-loop and burst) and the burst's JobSets over time, with the
    TrainJob webhooks registered."""
    fig, axes = plt.subplots(1, 3, figsize=(18, 4), squeeze=False)
    for ax, phase in zip(axes[0][:2], ("paced", "burst"), strict=True):
        for controller, run in runs.items():
            values = (run.get(phase) or {}).get("create_latencies_s") or []
            _cdf_ms(ax, values, controller, colours.get(controller))
        some = next(iter(runs.values())).get(phase) or {}
        what = (
            f"{some.get('rate_per_s')} creates/s" if phase == "paced" else f"burst of {some.get('trainjobs')}"
        )
        ax.set_xscale("log")
        ax.set_title(f"admission, {what}: create request latency")
        ax.set_xlabel("ms (log scale)")
        ax.set_ylabel("fraction of creates")
        ax.legend()
        ax.grid(alpha=0.3)
    ax = axes[0][2]
    for controller, run in runs.items():
        burst = run.get("burst") or {}
        label = f"{controller} ({burst.get('wall_s', math.nan):.1f} s)"
        _arrivals(ax, burst.get("jobset_seen_s") or [], label, colours.get(controller))
    ax.set_title("admission burst: JobSets existing (webhooks registered)")
    ax.set_xlabel("seconds since the first TrainJob create")
    ax.set_ylabel("JobSets")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


# ============================================================================================= main


def _jsonable(value: Any) -> Any:
    """Plain JSON: NaN and infinities as null, floats to 5 significant decimals, paths as strings."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else round(value, 5)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _jsonable(dataclasses.asdict(value))
    if isinstance(value, Path):
        return str(value)
    return value


_NUMBER_LIST = re.compile(r"\[\s*((?:-?[0-9.e+-]+|null)(?:,\s*(?:-?[0-9.e+-]+|null))*)\s*\]")


def dump_json(value: Any) -> str:
    """``value`` as indented JSON (via :func:`_jsonable`), with lists of numbers kept on one line."""
    text = json.dumps(_jsonable(value), indent=1)
    return (
        _NUMBER_LIST.sub(lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text)
        + "\n"
    )
