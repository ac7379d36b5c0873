"""A Trainer controller manager as a host process: the one launcher the demo, the tests and the benchmark use.

What every caller needs from a manager outside a cluster, done here once:

- :func:`configuration`: a ``Configuration`` (the shipped one, upstream's, or a minimal one a test writes)
  rewired for the host: the health probe, metrics and webhook server on ``127.0.0.1``, certificate
  management on or off, leader election and the client's rate limit as asked, extra top-level fields.
- :func:`serving_certificate`: with certificate management off, a serving certificate for 127.0.0.1 from a
  throwaway CA (the in-cluster rotator's certificates name the Service, which a host process does not
  have).
- :class:`ManagerHandle`: the process (``controller.envtest.process.ManagedProcess``: its own process
  group, output appended to ``<workdir>/manager.log``), its ports, its JSON log lines, readiness on
  ``/readyz``, and stop. :func:`prepare` writes the configuration and the certificate and returns a handle
  not yet started; :func:`launch` also starts it and waits until it is ready.
- :func:`webhook_configurations`: the webhook configurations of ``config/webhook/``, addressed by URL to a
  manager on ``127.0.0.1:<port>`` with the throwaway CA as ``caBundle`` (a unit test checks they differ from
  the manifests only in ``clientConfig``).

Who uses it: ``support.cluster_manager`` (``make demo`` and the kwok e2e path: our console script as the
manager's ServiceAccount, detached so it outlives the command), ``support.reliability`` and
``test/integration/cmd`` (``python -m trainer_controller_manager`` against a Tier 1 control plane), the
scale benchmark (``test/benchmark/scale``: ours with the shipped configuration), and ``support.upstream``
(upstream's Go binary with upstream's configuration, through :func:`configuration` and :func:`prepare`).

A handle's process dies with this Python process (``ManagedProcess`` ties it to its parent on Linux and
stops it at exit) unless it was prepared ``detached``. Deliberately missing: leader election of its own
making (the configuration says), metrics behind authentication, and Windows.
"""

from __future__ import annotations

import base64
import datetime
import os
import shutil
import signal
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
import yaml

from controller.client.object import deep_copy
from controller.envtest import process as envtest_process
from controller.envtest.certs import CertificateAuthority
from controller.envtest.errors import StartError
from controller.envtest.process import ManagedProcess, wait_until_ready
from support.process import http_ok

REPO = Path(__file__).resolve().parents[2]
SHIPPED_CONFIG = REPO / "config" / "manager" / "controller_manager_config.yaml"
WEBHOOK_MANIFESTS = (
    REPO / "config" / "webhook" / "mutating_webhook_configuration.yaml",
    REPO / "config" / "webhook" / "validating_webhook_configuration.yaml",
)
"""The admission webhook configurations the installed manifests register (behind the manager's Service)."""
CONSOLE_SCRIPT = "trainer-controller-manager"
MODULE = "trainer_controller_manager"
WEBHOOK_TIMEOUT_SECONDS = 10
"""kube-apiserver's default ``timeoutSeconds``, spelt out in the configurations registered by URL."""


class LaunchError(Exception):
    """The manager's executable is missing, or the manager exited or was not ready in time (the message
    holds its log tail)."""


# ------------------------------------------------------------------------------------------ configuration


def shipped_configuration() -> dict[str, Any]:
    """``config/manager/controller_manager_config.yaml``, parsed."""
    config: dict[str, Any] = yaml.safe_load(SHIPPED_CONFIG.read_text())
    return config


def configuration(
    base: Mapping[str, Any],
    *,
    webhook_port: int,
    health_port: int = 0,
    metrics_port: int | None = None,
    secure_metrics: bool | None = None,
    cert_management: bool | None = None,
    leader_election: Mapping[str, Any] | None = None,
    qps: float | None = None,
    burst: int = 100,
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``base`` rewired for a manager on the host; pure (``base`` is not changed).

    - ``health.healthProbeBindAddress``: ``127.0.0.1:<health_port>`` (0: a port the manager picks and logs);
    - ``metrics``: replaced by ``bindAddress`` ``127.0.0.1:<metrics_port>`` (None: ``"0"``, off) and, when
      given, ``secureServing``;
    - ``webhook``: ``127.0.0.1:<webhook_port>``;
    - ``certManagement.enable``: ``cert_management``, when given (the other fields of ``base`` kept);
    - ``leaderElection``: ``base``'s, updated with ``leader_election`` when given;
    - ``clientConnection``: replaced by ``qps``/``burst`` when ``qps`` is given. Both must be positive (0
      reads as client-go's default, 5/10, in upstream's manager, and negatives are refused); to lift the
      limiter, pass large values;
    - ``overrides``: top-level fields replaced as they are.
    """
    if qps is not None and qps <= 0:
        raise ValueError(f"qps must be positive, got {qps}")
    if qps is not None and burst < 1:
        raise ValueError(f"burst must be at least 1, got {burst}")
    config: dict[str, Any] = deep_copy(base)
    config["health"] = {**config.get("health", {}), "healthProbeBindAddress": f"127.0.0.1:{health_port}"}
    metrics: dict[str, Any] = {"bindAddress": "0" if metrics_port is None else f"127.0.0.1:{metrics_port}"}
    if secure_metrics is not None:
        metrics["secureServing"] = secure_metrics
    config["metrics"] = metrics
    config["webhook"] = {"host": "127.0.0.1", "port": webhook_port}
    if cert_management is not None:
        config["certManagement"] = {**config.get("certManagement", {}), "enable": cert_management}
    if leader_election is not None:
        config["leaderElection"] = {**config.get("leaderElection", {}), **leader_election}
    if qps is not None:
        config["clientConnection"] = {"qps": qps, "burst": burst}
    for key, value in (overrides or {}).items():
        config[key] = value
    return config


def serving_certificate(cert_dir: Path, ca_name: str) -> bytes:
    """Write ``tls.crt``/``tls.key`` for 127.0.0.1 and localhost into ``cert_dir``, issued by a new throwaway
    CA named ``ca_name``; return the CA's certificate (PEM), the ``caBundle`` of the webhooks."""
    ca = CertificateAuthority.new(ca_name)
    ca.issue_serving(["127.0.0.1", "localhost"]).write(cert_dir, "tls.crt", "tls.key")
    return ca.cert_pem


def webhook_configurations(port: int, ca_bundle: bytes) -> list[dict[str, Any]]:
    """The webhook configurations of ``config/webhook/``, pointing at a manager on 127.0.0.1:``port`` by URL.

    Each webhook keeps everything the manifests give it (rules, failure policy, object selector, ...); only
    ``clientConfig`` differs (``url`` with the manifest's path, ``caBundle``), and ``timeoutSeconds`` is
    spelt out when the manifest leaves it to the default. The configurations keep their names.
    """
    bundle = base64.b64encode(ca_bundle).decode()
    out = []
    for path in WEBHOOK_MANIFESTS:
        manifest = yaml.safe_load(path.read_text())
        webhooks = []
        for hook in manifest["webhooks"]:
            url = f"https://127.0.0.1:{port}{hook['clientConfig']['service']['path']}"
            webhooks.append(
                {
                    **hook,
                    "clientConfig": {"url": url, "caBundle": bundle},
                    "timeoutSeconds": hook.get("timeoutSeconds", WEBHOOK_TIMEOUT_SECONDS),
                }
            )
        out.append(
            {
                "apiVersion": manifest["apiVersion"],
                "kind": manifest["kind"],
                "metadata": {"name": manifest["metadata"]["name"]},
                "webhooks": webhooks,
            }
        )
    return out


# ------------------------------------------------------------------------------------------------ command


def module_command() -> list[str]:
    """``python -m trainer_controller_manager`` with the Python running this code."""
    return [sys.executable, "-m", MODULE]


def console_script() -> Path:
    """The ``trainer-controller-manager`` console script of the Python running this code."""
    binary = Path(sys.executable).parent / CONSOLE_SCRIPT
    if not binary.exists():
        raise LaunchError(f"{binary} is missing: install the package first (`make venv`)")
    return binary


def _port(address: object) -> int | None:
    """The port of a ``host:port`` bind address; None when it is off (``"0"``) or picked by the process."""
    if not isinstance(address, str) or ":" not in address:
        return None
    port = int(address.rsplit(":", 1)[1] or 0)
    return port or None


# ------------------------------------------------------------------------------------------------- handle


class ManagerHandle:
    """A controller manager process: prepared (configuration and certificate written), then started.

    ``pid`` is the manager's own pid (``env`` and ``setpriv`` exec into it), so ``/proc/<pid>`` shows its
    CPU time and memory. :meth:`stop` is idempotent. The ports are those the configuration fixes (None for a
    port the manager picks itself: it logs the address, see :meth:`events`).
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        workdir: Path,
        config: Path,
        health_port: int | None = None,
        metrics_port: int | None = None,
        webhook_port: int | None = None,
        environ: Mapping[str, str] | None = None,
        clean_environment: bool = False,
        detached: bool = False,
        ca_pem: bytes | None = None,
    ) -> None:
        prefix: list[str] = []
        if environ or clean_environment:
            env = shutil.which("env")
            if env is None:
                raise LaunchError("`env` is not on PATH")
            prefix = [env, *(["-i"] if clean_environment else [])]
            prefix += [f"{key}={value}" for key, value in (environ or {}).items()]
        self.name = name
        self.workdir = workdir
        self.config = config
        self.health_port = health_port
        self.metrics_port = metrics_port
        self.webhook_port = webhook_port
        self.ca_pem = ca_pem
        """The throwaway CA of the serving certificate (None when the caller provided the certificate)."""
        self.detached = detached
        self.process = ManagedProcess(
            name, [*prefix, *argv], workdir / "manager.log", die_with_parent=not detached
        )
        self.started_at = 0.0
        """Wall-clock time (``time.time()``) just before the process was started."""

    # -- process

    def start(self) -> ManagerHandle:
        """Start the process (appending to its log); a detached one is left running at this process's exit."""
        self.started_at = time.time()
        self.process.start()
        if self.detached:
            envtest_process.unregister(self.process)
        return self

    def wait_ready(self, timeout: float) -> None:
        """Return once ``/readyz`` answers 200; LaunchError with the log tail if the process exits first or
        ``timeout`` passes (the process is left as it is)."""
        try:
            wait_until_ready(self.process, self.ready, timeout=timeout)
        except StartError as exc:
            raise LaunchError(f"{self.name} did not become ready: {exc}") from exc

    @property
    def pid(self) -> int:
        pid = self.process.pid
        if pid is None:
            raise RuntimeError(f"{self.name} has not been started")
        return pid

    def running(self) -> bool:
        return self.process.running()

    def returncode(self) -> int | None:
        """The exit status once the process exited, else None."""
        return self.process.returncode()

    def send_signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to the manager process itself."""
        os.kill(self.pid, sig)

    def terminate(self) -> None:
        """SIGTERM the whole process group, without waiting."""
        os.killpg(self.pid, signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL the whole process group, at once, and reap it."""
        if self.process.running():
            os.killpg(self.pid, signal.SIGKILL)
        self.process.wait_for_exit(30)

    def wait(self, timeout: float) -> int | None:
        """The exit status once the process exits within ``timeout`` seconds, else None."""
        return self.process.wait_for_exit(timeout)

    def stop(self, grace: float = 30.0) -> int | None:
        """SIGTERM, SIGKILL after ``grace`` seconds; returns the exit status (None if never started)."""
        self.process.stop(grace=grace)
        return self.process.returncode()

    # -- endpoints

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def ready(self) -> bool:
        """``GET /readyz`` on the health port answers 200."""
        return self.health_port is not None and http_ok(f"http://127.0.0.1:{self.health_port}/readyz")

    def metrics_text(self, timeout: float = 10.0) -> str:
        """The Prometheus text of ``/metrics`` (plain HTTP)."""
        with urllib.request.urlopen(self.metrics_url, timeout=timeout) as response:
            text: str = response.read().decode("utf-8", "replace")
            return text

    # -- log

    @property
    def log(self) -> Path:
        return self.process.log_path

    def tail(self, lines: int = 30) -> str:
        return self.process.log_tail(lines)

    def lines(self) -> list[dict[str, Any]]:
        """Every line of the log, decoded from JSON (``{"event": "<not json>", "text": ...}`` otherwise)."""
        try:
            raw = self.log.read_bytes()
        except FileNotFoundError:
            return []
        out: list[dict[str, Any]] = []
        for line in raw.splitlines():
            try:
                decoded = orjson.loads(line)
            except orjson.JSONDecodeError:
                decoded = {"event": "<not json>", "text": line.decode(errors="replace")}
            out.append(decoded if isinstance(decoded, dict) else {"event": "<not an object>"})
        return out

    def events(self, name: str) -> list[dict[str, Any]]:
        """Our manager's log lines of event ``name``."""
        return [line for line in self.lines() if line.get("event") == name]

    def __repr__(self) -> str:
        return (
            f"ManagerHandle({self.name!r}, pid={self.process.pid}, running={self.running()}, "
            f"metrics={self.metrics_url!r}, log={str(self.log)!r})"
        )


def prepare(
    workdir: Path,
    kubeconfig: str | os.PathLike[str],
    config: Mapping[str, Any],
    *,
    name: str = CONSOLE_SCRIPT,
    command: Sequence[str] | None = None,
    cert_dir: Path | None = None,
    ca_name: str = "trainer-host-webhook-ca",
    log_level: str | None = "info",
    feature_gates: str = "",
    environ: Mapping[str, str] | None = None,
    clean_environment: bool = False,
    detached: bool = False,
    cert_dir_flag: bool = True,
) -> ManagerHandle:
    """Our manager, not started yet: ``config`` written to ``<workdir>/config.yaml``, a throwaway serving
    certificate in ``cert_dir`` (``<workdir>/serving-certs``) unless ``config`` turns certificate management
    on (then the manager's rotator writes it there), and its command line (``command``: ``python -m
    trainer_controller_manager`` by default) with ``--config``, ``--kubeconfig``, ``--webhook-cert-dir``,
    ``--zap-log-level`` (unless None) and ``--feature-gates`` (when given). ``cert_dir_flag=False`` leaves
    ``--webhook-cert-dir`` out, for a manager that reads its certificate from a default directory
    (upstream's)."""
    workdir.mkdir(parents=True, exist_ok=True)
    config_path = workdir / "config.yaml"
    config_path.write_text(yaml.safe_dump(dict(config), sort_keys=False))
    cert_dir = cert_dir or workdir / "serving-certs"
    rotated = bool((config.get("certManagement") or {}).get("enable", False))
    ca_pem = None if rotated else serving_certificate(cert_dir, ca_name)
    argv = [*(command or module_command()), f"--config={config_path}", f"--kubeconfig={kubeconfig}"]
    if cert_dir_flag:
        argv.append(f"--webhook-cert-dir={cert_dir}")
    if log_level is not None:
        argv.append(f"--zap-log-level={log_level}")
    if feature_gates:
        argv.append(f"--feature-gates={feature_gates}")
    return ManagerHandle(
        name,
        argv,
        workdir=workdir,
        config=config_path,
        health_port=_port((config.get("health") or {}).get("healthProbeBindAddress")),
        metrics_port=_port((config.get("metrics") or {}).get("bindAddress")),
        webhook_port=(config.get("webhook") or {}).get("port"),
        environ=environ,
        clean_environment=clean_environment,
        detached=detached,
        ca_pem=ca_pem,
    )


def launch(handle: ManagerHandle, *, timeout: float = 60.0) -> ManagerHandle:
    """Start ``handle`` and wait until ``/readyz`` answers; stop it and raise LaunchError with the log tail
    otherwise."""
    handle.start()
    try:
        handle.wait_ready(timeout)
    except BaseException:
        handle.stop()
        raise
    return handle


# -------------------------------------------------------------------------------------------- log reading


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
    """When our ``controller`` logged ``controller.started`` (workers up, after its caches synced), as a
    Unix time, from the last start in ``log``."""

    def stamp(entry: dict[str, Any]) -> object:
        matches = entry.get("event") == "controller.started" and entry.get("controller") == controller
        return entry.get("timestamp") if matches else None

    return last_logged_at(log, b"controller.started", stamp)
