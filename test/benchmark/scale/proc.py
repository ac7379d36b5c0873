"""A process seen through ``/proc`` (CPU seconds, resident memory), the load average, and py-spy profiles."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from benchmark.scale import say


def proc_cpu_seconds(stat: str, ticks_per_second: int) -> float:
    """User + system CPU seconds from the text of ``/proc/<pid>/stat`` (fields 14 and 15)."""
    # The command name (field 2) is in parentheses and may hold spaces: split after its closing one.
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / ticks_per_second


def proc_rss_bytes(status: str) -> int:
    """``VmRSS`` from the text of ``/proc/<pid>/status``, in bytes."""
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            value, unit = line.split()[1:3]
            if unit != "kB":
                raise ValueError(f"unexpected VmRSS unit {unit!r}")
            return int(value) * 1024
    raise ValueError("no VmRSS line (is the process a zombie?)")


def top_frames(collapsed: str, limit: int = 20) -> list[tuple[str, float]]:
    """The frames where most samples were taken (self time), as (frame, share of all samples), from
    py-spy's ``raw`` output: one line per distinct stack, ``frame;frame;...;leaf count``."""
    leaves: Counter[str] = Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        leaves[stack.rsplit(";", 1)[-1]] += int(count)
        total += int(count)
    return [(frame, n / total) for frame, n in leaves.most_common(limit)] if total else []


CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float:
    return proc_cpu_seconds(Path(f"/proc/{pid}/stat").read_text(), CLOCK_TICKS)


def rss_mib(pid: int) -> float:
    return proc_rss_bytes(Path(f"/proc/{pid}/status").read_text()) / 2**20


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


PY_SPY_MISSING = "bench_scale.py: --profile needs py-spy (pip install py-spy)"


def py_spy() -> str | None:
    """The py-spy executable beside this Python, or on the PATH; None without one."""
    return shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")


@contextlib.contextmanager
def profiled(pid: int, output: Path | None) -> Iterator[None]:
    """py-spy sampling ``pid`` (the thread holding the GIL: where Python spends CPU) while the block runs,
    its collapsed stacks written to ``output`` and the top frames printed after; nothing when ``output`` is
    None."""
    if output is None:
        yield
        return
    spy = py_spy()
    if spy is None:
        raise SystemExit(PY_SPY_MISSING)
    output.parent.mkdir(parents=True, exist_ok=True)
    argv = [
        spy,
        "record",
        "--pid",
        str(pid),
        "--rate",
        "200",
        "--gil",
        "--format",
        "raw",
        "--output",
        str(output),
    ]
    with open(output.with_suffix(".log"), "wb") as log:
        recorder = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield
    finally:
        recorder.send_signal(signal.SIGINT)  # py-spy writes what it sampled, then exits
        try:
            recorder.wait(timeout=60)
        except subprocess.TimeoutExpired:
            recorder.kill()
            recorder.wait()
    if output.exists():
        say(f"  profile: {output}")
        for frame, share in top_frames(output.read_text(), 15):
            say(f"    {share:6.1%}  {frame}")
