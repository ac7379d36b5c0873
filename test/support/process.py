"""Process control for the host processes of the test clusters: run a command, tell whether a pid lives,
stop a set of pids, find the processes that name a directory, wait for a condition, write YAML for them.

Go origin: none. What ``support.kwok``, ``support.jobset``, ``support.kueue`` and ``support.cluster_manager``
share; each raises :class:`ClusterError` (something the user can act on, with the relevant log tail).

Deliberately missing: Windows; the leftover-process sweep reads ``/proc`` (Linux only) and finds nothing
elsewhere.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from runtime.render import BlockDumper

HAVE_PROC = Path("/proc/self").exists()
PORT_RACE = re.compile(r"address already in use|bind: address|failed to listen", re.IGNORECASE)
"""What a component logs when another process took its port between our choice and its bind."""


class ClusterError(Exception):
    """Something the user can act on went wrong; the message says what and where the logs are."""


def http_ok(url: str) -> bool:
    """``GET url`` answers 200 within two seconds (a readiness probe)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def say(message: str) -> None:
    print(f"cluster: {message}", file=sys.stderr, flush=True)


def tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def tail_file(path: Path, lines: int = 20) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            return tail(f.read().decode("utf-8", "replace"), lines)
    except FileNotFoundError:
        return "(no log)"


def run(
    argv: Sequence[str | os.PathLike[str]],
    *,
    what: str,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = 120.0,
    check: bool = True,
) -> str:
    """Run a command to completion; return stdout; raise ClusterError with its stderr tail on failure."""
    try:
        result = subprocess.run(
            [str(a) for a in argv],
            input=stdin,
            capture_output=True,
            text=True,
            env=None if env is None else dict(env),
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError as exc:
        raise ClusterError(f"{what}: {exc.filename} not found") from exc
    except subprocess.TimeoutExpired as exc:
        raise ClusterError(f"{what}: no answer within {timeout:.0f} s") from exc
    if check and result.returncode != 0:
        raise ClusterError(
            f"{what} failed (exit {result.returncode}):\n{tail(result.stderr or result.stdout)}"
        )
    return result.stdout


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as gone; our own zombie children are reaped here)."""
    if pid <= 0:
        return False
    with contextlib.suppress(ChildProcessError):
        reaped, _ = os.waitpid(pid, os.WNOHANG)
        if reaped == pid:
            return False
    if HAVE_PROC:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            return False
        return state != "Z"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def names_directory(argv: Sequence[str], directory: Path) -> bool:
    """True if an argument is ``directory`` or a path inside it (``.../trainer-e2e-pytest`` is not in
    ``.../trainer-e2e``)."""
    inside, exact = f"{directory}{os.sep}", str(directory)
    return any(inside in arg or arg == exact or arg.endswith(f"={exact}") for arg in argv)


def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def terminate(pids: Sequence[int], *, grace: float = 10.0) -> None:
    """SIGTERM each pid, wait up to ``grace`` seconds, then SIGKILL what is left."""
    live = [p for p in pids if pid_alive(p)]
    for pid in live:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while live and time.monotonic() < deadline:
        time.sleep(0.1)
        live = [p for p in live if pid_alive(p)]
    for pid in live:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while live and time.monotonic() < deadline:
        time.sleep(0.05)
        live = [p for p in live if pid_alive(p)]


def processes_using(*directories: Path) -> list[int]:
    """Pids of processes (other than this one) whose command line names one of ``directories``.

    Every process of a cluster has such an argument: kwokctl starts each component with its data,
    certificate and log paths inside the cluster directory, and JobSet gets its config file from
    :func:`own_dir`. Reads ``/proc``; returns nothing where there is none.
    """
    if not HAVE_PROC:
        return []
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        argv = cmdline(int(entry.name))
        if any(names_directory(argv, d) for d in directories):
            found.append(int(entry.name))
    return sorted(found)


def wait_for(
    check: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    interval: float = 0.25,
    explain: Callable[[], str] | None = None,
) -> None:
    """Call ``check`` until it returns True; after ``timeout`` seconds raise ClusterError.

    ``explain`` is called only then, for text to add to the error (a log tail, say).
    """
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return
        if time.monotonic() > deadline:
            detail = f"\n{explain()}" if explain is not None else ""
            raise ClusterError(f"timed out after {timeout:.0f} s waiting for {what}{detail}")
        time.sleep(interval)


# -------------------------------------------------------------------------------------------------- kubectl


def write_yaml(path: Path, documents: Sequence[Mapping[str, Any]]) -> Path:
    """Write ``documents`` to ``path`` (multi-line strings as literal blocks); return ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.dump_all(documents, Dumper=BlockDumper, sort_keys=False))
    return path
