"""Upstream Kubeflow Trainer's Go controller manager, run out of cluster as a host process: the baseline.

Usage::

    from support import upstream

    handle = upstream.start(kubeconfig, workdir, qps=50, burst=100)
    ...                                   # handle.pid, handle.metrics_url, handle.log
    handle.stop()

or from the command line, which runs it in the foreground until Ctrl-C::

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
  (SIGTERM, then SIGKILL) by ``ManagerHandle.stop``, or at the latest when this Python process exits
  (``controller.envtest.process`` tracks it; on Linux it also dies with its parent). The configuration
  rewrite and the handle are ``support.launcher``'s, which starts our manager too.

:func:`start` returns once ``/readyz`` answers 200. Upstream's readiness means "the webhook server is
listening" (its check waits for the certificates and the webhook server), *not* "caches synced": the
controllers start their workers a moment later, logging ``Starting workers`` (:func:`workers_started_at`).

Deliberately missing: leader election, the webhook configurations, the certificate rotator, metrics over
HTTPS or behind authentication, and Windows.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from controller.envtest.binaries import cache_directory
from controller.envtest.process import free_port
from support import launcher, thirdparty
from support.launcher import ManagerHandle

__all__ = [
    "SHIPPED_CONFIG",
    "UPSTREAM_MODULE",
    "UpstreamError",
    "binary_path",
    "configuration",
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


class UpstreamError(launcher.LaunchError):
    """The binary or the shipped configuration is missing, or the manager did not start."""


def binary_path(version: str | None = None) -> Path:
    """``<cache>/bin/trainer-<version>/trainer-controller-manager`` (``TRAINER_VERSION`` by default);
    raises UpstreamError naming the build command when it is not there."""
    version = version or thirdparty.read_versions()["TRAINER_VERSION"]
    path = cache_directory() / "bin" / f"trainer-{version}" / BINARY_NAME
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise UpstreamError(f"{path} is missing: build it with `bash hack/build-binaries.sh trainer`")
    return path


def shipped_configuration(version: str | None = None) -> dict[str, Any]:
    """Upstream's shipped manager configuration at ``version`` (``TRAINER_VERSION`` by default), read from
    the Go module cache (``go mod download``; the build put the module there)."""
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
    """``shipped`` with the out-of-cluster changes of the module docstring (``launcher.configuration``);
    pure (``shipped`` unchanged). ``qps``/``burst`` must be positive."""
    return launcher.configuration(
        shipped,
        health_port=health_port,
        metrics_port=metrics_port,
        secure_metrics=False,
        webhook_port=webhook_port,
        cert_management=False,
        leader_election={"leaderElect": False},
        qps=qps,
        burst=burst,
        overrides=overrides,
    )


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
    config = configuration(
        shipped_configuration(),
        health_port=free_port(),
        metrics_port=free_port(),
        webhook_port=free_port(),
        qps=qps,
        burst=burst,
        overrides=overrides,
    )
    # Upstream's own flags; it reads its certificate from controller-runtime's default directory.
    handle = launcher.prepare(
        directory,
        Path(kubeconfig).resolve(),
        config,
        name="upstream-trainer-controller-manager",
        command=[str(executable)],
        cert_dir=tmp / WEBHOOK_CERT_SUBDIR,
        ca_name="trainer-bench-webhook-ca",
        log_level=log_level,
        feature_gates=feature_gates,
        environ={"TMPDIR": str(tmp)},
        cert_dir_flag=False,
    )
    try:
        return launcher.launch(handle, timeout=timeout)
    except launcher.LaunchError as exc:
        raise UpstreamError(str(exc)) from exc


def workers_started_at(log: Path, controller: str = "trainjob_controller") -> float | None:
    """When upstream's ``controller`` logged ``Starting workers`` (after its caches synced), as a Unix
    time, from the last start recorded in ``log``; None if it has not (yet)."""

    def stamp(entry: dict[str, Any]) -> object:
        return (
            entry.get("ts")
            if entry.get("msg") == "Starting workers" and entry.get("controller") == controller
            else None
        )

    return launcher.last_logged_at(log, b"Starting workers", stamp)
