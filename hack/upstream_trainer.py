#!/usr/bin/env python3
"""Upstream Kubeflow Trainer's Go controller manager, run out of cluster as a host process: the baseline.

Usage, as a module (``hack/`` holds scripts, so import it by path, e.g. with
``controller.envtest.load_script``)::

    upstream = load_script(Path("hack/upstream_trainer.py"), "_upstream_trainer")
    handle = upstream.start(kubeconfig, workdir, qps=50, burst=100)
    ...                                   # handle.pid, handle.metrics_url, handle.log
    handle.stop()

or as a script, which runs it in the foreground until Ctrl-C::

    python hack/upstream_trainer.py --kubeconfig admin.kubeconfig --workdir /tmp/upstream

The binary is ``trainer-controller-manager`` built by ``hack/build-binaries.sh trainer`` from the Go module
``github.com/kubeflow/trainer/v2`` at ``TRAINER_VERSION`` (``hack/versions.env``, pinned in
``hack/tools/trainer/go.mod``), unmodified, cached under ``<cache>/bin/trainer-<version>/``. This module
never builds it: :func:`binary_path` says how when it is missing.

How it is run (:func:`start`):

- the configuration is the one upstream ships (``manifests/base/manager/controller_manager_config.yaml``
  of the same module, read from the Go module cache, never copied here) with these changes only: leader
  election off; certificate management off; health probes, metrics and the webhook server on free
  ``127.0.0.1`` ports; metrics over plain HTTP; ``clientConnection.qps``/``burst`` as asked (default the
  shipped 50/100). Extra top-level fields can be merged in (``overrides``);
- certificate management off means the webhook server reads ``tls.crt``/``tls.key`` from
  controller-runtime's default directory, ``$TMPDIR/k8s-webhook-server/serving-certs``: the process gets
  ``TMPDIR=<workdir>/tmp`` and a serving certificate for 127.0.0.1 from a throwaway CA is written there. The
  webhook configurations are *not* registered with the API server (nothing calls the webhooks);
- ``--kubeconfig`` is controller-runtime's flag; upstream has no other way to name the API server;
- the process runs in its own process group with its output in ``<workdir>/manager.log``, and is stopped
  (SIGTERM, then SIGKILL) by :meth:`ManagerHandle.stop`, or at the latest when this Python process exits
  (``controller.envtest.process`` tracks it; on Linux it also dies with its parent).

:func:`start` returns once ``/readyz`` answers 200. Upstream's readiness means "the webhook server is
listening" (its check waits for the certificates and the webhook server), *not* "caches synced": the
controllers start their workers a moment later, logging ``Starting workers`` (:func:`workers_started_at`).

:class:`ManagerHandle` and :func:`launch` are not upstream-specific: ``hack/bench_scale.py`` runs our own
manager with them too.

Deliberately missing: leader election, the webhook configurations, the certificate rotator, metrics over
HTTPS or behind authentication, and Windows.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import shutil
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

from controller.client.object import deep_copy
from controller.envtest.binaries import cache_directory
from controller.envtest.certs import CertificateAuthority
from controller.envtest.errors import StartError
from controller.envtest.process import ManagedProcess, free_port, wait_until_ready
from controller.envtest.suite import load_script

REPO = Path(__file__).resolve().parent.parent

__all__ = [
    "SHIPPED_CONFIG",
    "UPSTREAM_MODULE",
    "ManagerHandle",
    "UpstreamError",
    "binary_path",
    "configuration",
    "launch",
    "shipped_configuration",
    "start",
    "workers_started_at",
]

UPSTREAM_MODULE = "github.com/kubeflow/trainer/v2"
SHIPPED_CONFIG = "manifests/base/manager/controller_manager_config.yaml"
"""Upstream's manager configuration, relative to its module directory."""
BINARY_NAME = "trainer-controller-manager"
WEBHOOK_CERT_SUBDIR = Path("k8s-webhook-server") / "serving-certs"
"""controller-runtime's default webhook certificate directory, relative to ``$TMPDIR``."""


class UpstreamError(Exception):
    """The binary or the shipped configuration is missing, or the manager did not start."""


def _thirdparty() -> Any:
    return load_script(REPO / "hack" / "thirdparty.py", "_hack_thirdparty")


def binary_path(version: str | None = None) -> Path:
    """``<cache>/bin/trainer-<version>/trainer-controller-manager`` (``TRAINER_VERSION`` by default);
    raises UpstreamError naming the build command when it is not there."""
    thirdparty = _thirdparty()
    version = version or thirdparty.read_versions()["TRAINER_VERSION"]
    path = cache_directory() / "bin" / f"trainer-{version}" / BINARY_NAME
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise UpstreamError(f"{path} is missing: build it with `bash hack/build-binaries.sh trainer`")
    return path


def shipped_configuration(version: str | None = None) -> dict[str, Any]:
    """Upstream's shipped manager configuration at ``version`` (``TRAINER_VERSION`` by default), read from
    the Go module cache (``go mod download``; the build put the module there)."""
    thirdparty = _thirdparty()
    version = version or thirdparty.read_versions()["TRAINER_VERSION"]
    try:
        path = thirdparty.module_dir(UPSTREAM_MODULE, version) / SHIPPED_CONFIG
    except thirdparty.ThirdPartyError as exc:
        raise UpstreamError(f"upstream's configuration is unavailable: {exc}") from exc
    try:
        config = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UpstreamError(f"cannot read {path}: {exc}") from exc
    if not isinstance(config, dict) or config.get("kind") != "Configuration":
        raise UpstreamError(f"{path} is not a Configuration")
    return config


def configuration(
    shipped: Mapping[str, Any],
    *,
    health_port: int,
    metrics_port: int,
    webhook_port: int,
    qps: float = 50.0,
    burst: int = 100,
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``shipped`` with the out-of-cluster changes of the module docstring; pure (``shipped`` unchanged).

    ``qps``/``burst`` must be positive (upstream reads 0 as client-go's default, 5/10, and refuses
    negatives); to lift the limiter, pass large values.
    """
    if qps <= 0:
        raise ValueError(f"qps must be positive, got {qps}")
    if burst < 1:
        raise ValueError(f"burst must be at least 1, got {burst}")
    config: dict[str, Any] = deep_copy(shipped)
    config["health"] = {**config.get("health", {}), "healthProbeBindAddress": f"127.0.0.1:{health_port}"}
    config["metrics"] = {"bindAddress": f"127.0.0.1:{metrics_port}", "secureServing": False}
    config["webhook"] = {"host": "127.0.0.1", "port": webhook_port}
    config["leaderElection"] = {**config.get("leaderElection", {}), "leaderElect": False}
    config["certManagement"] = {**config.get("certManagement", {}), "enable": False}
    config["clientConnection"] = {"qps": qps, "burst": burst}
    for key, value in (overrides or {}).items():
        config[key] = value
    return config


class ManagerHandle:
    """A controller manager process started by this module (or by ``hack/bench_scale.py``).

    ``pid`` is the manager's own pid (``env`` and ``setpriv`` exec into it), so ``/proc/<pid>`` shows its
    CPU time and memory. :meth:`stop` is idempotent.
    """

    def __init__(
        self,
        *,
        name: str,
        process: ManagedProcess,
        health_port: int,
        metrics_port: int,
        webhook_port: int,
        config: Path,
        workdir: Path,
        started_at: float,
    ) -> None:
        self.name = name
        self.process = process
        self.health_port = health_port
        self.metrics_port = metrics_port
        self.webhook_port = webhook_port
        self.config = config
        self.workdir = workdir
        self.started_at = started_at
        """Wall-clock time (``time.time()``) just before the process was started."""

    @property
    def pid(self) -> int:
        pid = self.process.pid
        if pid is None:
            raise RuntimeError(f"{self.name} has not been started")
        return pid

    @property
    def log(self) -> Path:
        return self.process.log_path

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def running(self) -> bool:
        return self.process.running()

    def ready(self) -> bool:
        """``GET /readyz`` answers 200."""
        return _http_ok(f"http://127.0.0.1:{self.health_port}/readyz")

    def metrics_text(self, timeout: float = 10.0) -> str:
        """The Prometheus text of ``/metrics``."""
        with urllib.request.urlopen(self.metrics_url, timeout=timeout) as response:
            text: str = response.read().decode("utf-8", "replace")
            return text

    def stop(self, grace: float = 30.0) -> int | None:
        """SIGTERM, SIGKILL after ``grace`` seconds; returns the exit status (None if never started)."""
        self.process.stop(grace=grace)
        return self.process.returncode()

    def __repr__(self) -> str:
        return (
            f"ManagerHandle({self.name!r}, pid={self.process.pid}, running={self.running()}, "
            f"metrics={self.metrics_url!r}, log={str(self.log)!r})"
        )


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def launch(
    name: str,
    argv: Sequence[str],
    *,
    workdir: Path,
    health_port: int,
    metrics_port: int,
    webhook_port: int,
    config: Path,
    environ: Mapping[str, str] | None = None,
    timeout: float = 60.0,
) -> ManagerHandle:
    """Start ``argv`` (with ``environ`` added to its environment) logging to ``<workdir>/manager.log`` and
    wait until ``/readyz`` on ``health_port`` answers; raises UpstreamError with the log tail otherwise."""
    prefix: list[str] = []
    if environ:
        env = shutil.which("env")
        if env is None:
            raise UpstreamError("`env` is not on PATH")
        prefix = [env, *(f"{key}={value}" for key, value in environ.items())]
    process = ManagedProcess(name, [*prefix, *argv], workdir / "manager.log")
    handle = ManagerHandle(
        name=name,
        process=process,
        health_port=health_port,
        metrics_port=metrics_port,
        webhook_port=webhook_port,
        config=config,
        workdir=workdir,
        started_at=time.time(),
    )
    process.start()
    try:
        wait_until_ready(process, handle.ready, timeout=timeout)
    except StartError as exc:
        process.stop()
        raise UpstreamError(f"{name} did not become ready: {exc}") from exc
    except BaseException:
        process.stop()
        raise
    return handle


@dataclass(frozen=True)
class Prepared:
    """What :func:`prepare` wrote: the configuration file and the loopback ports it names."""

    config: Path
    health_port: int
    metrics_port: int
    webhook_port: int


def prepare(
    directory: Path,
    base: Mapping[str, Any],
    cert_dir: Path,
    *,
    qps: float,
    burst: int,
    overrides: Mapping[str, Any] | None = None,
) -> Prepared:
    """A throwaway serving certificate in ``cert_dir``, three free loopback ports, and ``base`` changed by
    :func:`configuration` written to ``directory/config.yaml``: what either manager needs on the host."""
    CertificateAuthority.new("trainer-bench-webhook-ca").issue_serving(["127.0.0.1", "localhost"]).write(
        cert_dir, "tls.crt", "tls.key"
    )
    health, metrics, webhook = free_port(), free_port(), free_port()
    config = configuration(
        base,
        health_port=health,
        metrics_port=metrics,
        webhook_port=webhook,
        qps=qps,
        burst=burst,
        overrides=overrides,
    )
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return Prepared(path, health, metrics, webhook)


def start(
    kubeconfig: str | os.PathLike[str],
    workdir: str | os.PathLike[str],
    *,
    qps: float = 50.0,
    burst: int = 100,
    feature_gates: str = "",
    log_level: str = "info",
    overrides: Mapping[str, Any] | None = None,
    timeout: float = 60.0,
    binary: Path | None = None,
) -> ManagerHandle:
    """Start upstream's manager against ``kubeconfig`` and return once it is ready (see the module
    docstring); ``workdir`` receives the configuration, the certificates and ``manager.log``."""
    directory = Path(workdir).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    executable = binary or binary_path()
    tmp = directory / "tmp"
    prepared = prepare(
        directory,
        shipped_configuration(),
        tmp / WEBHOOK_CERT_SUBDIR,
        qps=qps,
        burst=burst,
        overrides=overrides,
    )
    config_path = prepared.config
    argv = [
        str(executable),
        f"--config={config_path}",
        f"--kubeconfig={Path(kubeconfig).resolve()}",
        f"--zap-log-level={log_level}",
    ]
    if feature_gates:
        argv.append(f"--feature-gates={feature_gates}")
    return launch(
        "upstream-trainer-controller-manager",
        argv,
        workdir=directory,
        health_port=prepared.health_port,
        metrics_port=prepared.metrics_port,
        webhook_port=prepared.webhook_port,
        config=config_path,
        environ={"TMPDIR": str(tmp)},
        timeout=timeout,
    )


def last_logged_at(log: Path, marker: bytes, stamp_of: Callable[[dict[str, Any]], object]) -> float | None:
    """The time of the last JSON line of ``log`` that contains ``marker`` and for which ``stamp_of`` gives a
    timestamp (an ISO 8601 string or Unix seconds), as a Unix time; None if there is none (or no log)."""
    found: float | None = None
    try:
        lines = log.read_bytes().splitlines()
    except OSError:
        return None
    for line in lines:
        if marker not in line:
            continue
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        stamp = stamp_of(entry) if isinstance(entry, dict) else None
        if isinstance(stamp, str):
            found = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        elif isinstance(stamp, int | float):
            found = float(stamp)
    return found


def workers_started_at(log: Path, controller: str = "trainjob_controller") -> float | None:
    """When upstream's ``controller`` logged ``Starting workers`` (after its caches synced), as a Unix
    time, from the last start recorded in ``log``; None if it has not (yet)."""

    def stamp(entry: dict[str, Any]) -> object:
        return (
            entry.get("ts")
            if entry.get("msg") == "Starting workers" and entry.get("controller") == controller
            else None
        )

    return last_logged_at(log, b"Starting workers", stamp)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--qps", type=float, default=50.0)
    parser.add_argument("--burst", type=int, default=100)
    args = parser.parse_args(argv)
    try:
        handle = start(args.kubeconfig, args.workdir, qps=args.qps, burst=args.burst)
    except UpstreamError as exc:
        print(f"upstream_trainer: error: {exc}", file=sys.stderr)
        return 1
    print(f"running: {handle!r}; Ctrl-C stops it")
    stop = threading.Event()
    with contextlib.suppress(ValueError):  # not the main thread: no handler, Ctrl-C still interrupts
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(1.0) and handle.running():
            pass
    except KeyboardInterrupt:
        pass
    code = handle.stop()
    print(f"stopped (exit status {code})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
