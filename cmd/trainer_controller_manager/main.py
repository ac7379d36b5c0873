"""``trainer-controller-manager``: load the configuration, build the manager, run it until a signal.

Go origin: kubeflow/trainer ``cmd/trainer-controller-manager/main.go``.

Start-up, in order:

0. glibc's malloc arenas limited to two, before any thread exists (``controller.manager.memory``; an
   explicit ``MALLOC_ARENA_MAX`` wins);
1. flags (:mod:`.flags`), then logging (``controller.logging.configure``: JSON lines on stderr, console
   with ``--zap-devel``), the only place the process's logging is configured;
2. the Configuration (``--config``, else upstream's defaults) with ``--feature-gates`` applied over its
   ``featureGates``; bind addresses and the Lease namespace resolved against the Pod (:mod:`.serving`);
3. the runtime registry (``controller.trainer.setup.new_registry``: the built-in plugins, then the
   third-party ones ``plugins.enabled`` names, imported from their ``kubeflow_trainer.plugins`` entry
   points; one that cannot be loaded or built stops start-up here, before anything connects or listens,
   as a configuration error naming ``plugins.enabled[i]``), the API client with
   ``clientConnection.qps``/``burst`` (one token bucket per resource type, as controller-runtime), the
   informer cache (with the list GC tactic switched on: an
   interpreter-wide setting that only the entry point may choose), the manager (leader election from
   ``leaderElection``; the Lease client's requests time out after ``max(renewDeadline / 2, 1 s)``), the
   ``healthz`` (ping) and ``readyz`` (caches synced) checks, the certificates
   (``controller.trainer.certificates``: the rotator writing into ``--webhook-cert-dir``, or with
   ``certManagement.enable: false`` files provided by someone else; readiness check ``certificates``),
   ``/metrics`` over HTTPS from the same directory when ``metrics.secureServing`` and behind
   TokenReview/SubjectAccessReview when ``metrics.auth.enabled``, the Trainer's indexes and controllers
   (``controller.trainer.setup``), and the admission webhooks (``controller.trainer.webhooks``: HTTPS on
   ``webhook.host:webhook.port``, resolved as the other addresses, certificates from ``--webhook-cert-dir``,
   default ``/tmp/k8s-webhook-server/serving-certs``; readiness check ``webhook-server``), and with the
   ``TrainJobStatus`` gate the status server (``controller.trainer.statusserver``: HTTPS on
   ``:statusServer.port`` resolved as the other addresses, the same certificates, its own client with
   ``statusServer.qps``/``burst``), and the memory scavenger (``malloc_trim`` every minute);
4. :meth:`~controller.manager.manager.Manager.run_until_signal`: SIGTERM or SIGINT stops gracefully (a second
   one exits at once with status 1).

Exit status (also in ``--help`` and ``docs/configuration.md``):

======  =====================================================================================
``0``   stopped cleanly by SIGTERM/SIGINT
``1``   any other failure at run time (no kubeconfig, a server cannot bind, caches never synced...)
``2``   bad flags, a configuration that does not load or validate, or a plugin it enables that cannot be
        loaded or built (the log names the field)
``3``   the leader election Lease was lost (``LeaderElectionLost``): restart to stand by again
======  =====================================================================================

``readyz`` passes once the caches have synced, the certificates are in place and the webhook server
answers (upstream's waits for the certificates and the webhook server); with the ``TrainJobStatus`` gate,
also once the status server answers a TLS handshake (``status-server-readyz``; ``status-server-healthz``
too, once it has started with a certificate).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TextIO

import structlog

from controller.cache.informer_cache import Cache
from controller.logging import configure as configure_logging
from controller.manager.manager import LeaderElectionLost, Manager, ManagerOptions
from controller.manager.memory import MemoryScavenger, limit_malloc_arenas
from controller.serving.healthz import PING, Checker
from controller.serving.webhook import DEFAULT_CERT_DIR
from controller.trainer.certificates import metrics_serving, setup_certificates
from controller.trainer.config import Configuration, ConfigurationError, load_configuration
from runtime.features import TRAIN_JOB_STATUS, FeatureGateError, parse_feature_gates
from trainer_controller_manager.flags import Flags, parse_flags
from trainer_controller_manager.serving import Serving, ServingError, resolve_serving

__all__ = [
    "EXIT_FAILURE",
    "EXIT_LEADER_ELECTION_LOST",
    "EXIT_OK",
    "EXIT_USAGE",
    "Runner",
    "Settings",
    "build_manager",
    "caches_synced",
    "client_rate_limit",
    "load_settings",
    "main",
]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_LEADER_ELECTION_LOST = 3

_log = structlog.get_logger("trainer_controller_manager")


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Everything start-up decided before touching the network."""

    config: Configuration
    serving: Serving
    kubeconfig: str | None
    webhook_cert_dir: Path | None = None
    """``--webhook-cert-dir``; None: the webhook server's default."""


class Runner(Protocol):
    """What :func:`main` runs: the manager, or a fake in tests."""

    def run_until_signal(self) -> None: ...


def load_settings(flags: Flags, environ: Mapping[str, str]) -> Settings:
    """The configuration with the flags' feature gates, and where to serve; raises ConfigurationError,
    FeatureGateError (``--feature-gates``) or ServingError."""
    config = load_configuration(flags.config)
    if flags.feature_gates:
        config = config.with_feature_gates(parse_feature_gates(flags.feature_gates))
    return Settings(
        config=config,
        serving=resolve_serving(config, environ),
        kubeconfig=flags.kubeconfig,
        webhook_cert_dir=flags.webhook_cert_dir,
    )


def _announce(settings: Settings) -> None:
    config = settings.config
    _log.info(
        "setup.configuration_loaded",
        qps=config.client_connection.qps,
        burst=config.client_connection.burst,
        leader_election=config.leader_election_enabled,
        group_kind_concurrency=dict(config.controller.group_kind_concurrency),
        feature_gates=sorted(config.feature_gates.enabled_set()),
        plugins=list(config.plugins.enabled),
        metrics_bind_address=settings.serving.metrics_bind_address,
        health_probe_bind_address=settings.serving.health_probe_bind_address,
        webhook_bind_address=settings.serving.webhook_bind_address,
        status_server_bind_address=(
            settings.serving.status_server_bind_address
            if config.feature_gates.enabled(TRAIN_JOB_STATUS)
            else None
        ),
    )
    metrics = config.metrics
    if metrics.bind_address != "0" and metrics.auth_enabled and not metrics.secure_serving:
        _log.warning(
            "setup.metrics_tokens_in_clear",
            note="metrics.auth.enabled without metrics.secureServing: bearer tokens travel in clear",
        )


CLIENT_GO_DEFAULT_QPS = 5.0
CLIENT_GO_DEFAULT_BURST = 10


def client_rate_limit(config: Configuration) -> tuple[float, int]:
    """``clientConnection`` as the Go manager ends up applying it: a 0 reaches client-go's REST client,
    which reads it as its default (5 QPS, burst 10)."""
    qps = config.client_connection.qps or CLIENT_GO_DEFAULT_QPS
    burst = config.client_connection.burst or CLIENT_GO_DEFAULT_BURST
    return qps, burst


def caches_synced(cache: Cache) -> Checker:
    """The readiness check: passes once the informer cache has started and synced (on every replica, the
    standbys too: they run the cache)."""

    def check() -> None:
        if not cache.has_synced():
            raise RuntimeError("caches are not synced yet")

    return check


def build_manager(settings: Settings) -> Manager:
    """The real manager, with the Trainer's controllers registered (needs a reachable API server).

    The plugins come first: a ``plugins.enabled`` entry that cannot be loaded or built raises
    ``ConfigurationError`` before any connection is made or port opened."""
    # Imported here: the Trainer glue pulls in runtime/ and every plugin; flags and configuration do not.
    from controller.trainer.setup import cache_by_object, new_registry, setup_with_manager  # noqa: PLC0415
    from controller.trainer.statusserver import setup_status_server  # noqa: PLC0415
    from controller.trainer.webhooks import RUNTIME_KINDS, setup_webhooks  # noqa: PLC0415

    config = settings.config
    if settings.serving.operator_namespace is None:
        registry = new_registry(config)
    else:
        registry = new_registry(config, operator_namespace=settings.serving.operator_namespace)
    qps, burst = client_rate_limit(config)
    election = config.leader_election if config.leader_election_enabled else None
    cert_dir = settings.webhook_cert_dir or DEFAULT_CERT_DIR
    options = ManagerOptions(
        health_probe_bind_address=settings.serving.health_probe_bind_address,
        metrics_bind_address=settings.serving.metrics_bind_address,
        leader_election=election is not None,
        leader_election_id=election.resource_name if election else "",
        leader_election_namespace=settings.serving.leader_election_namespace,
        lease_duration=election.lease_duration if election else 15.0,
        renew_deadline=election.renew_deadline if election else 10.0,
        retry_period=election.retry_period if election else 2.0,
        qps=qps,
        burst=burst,
        by_object=cache_by_object(registry),
        gc_tuning=True,  # the entry point's choice: interpreter-wide GC thresholds and freeze (see reflector)
        **metrics_serving(config, cert_dir=cert_dir),
    )
    manager = Manager.from_kubeconfig(settings.kubeconfig, options=options)
    manager.add(MemoryScavenger())  # free heap pages back to the kernel, as Go's scavenger does
    manager.add_healthz_check("healthz", PING)
    manager.add_readyz_check("readyz", caches_synced(manager.cache))
    setup_certificates(manager, config, namespace=settings.serving.operator_namespace, cert_dir=cert_dir)
    controllers = setup_with_manager(
        manager, registry, group_kind_concurrency=config.controller.group_kind_concurrency
    )
    setup_webhooks(
        manager,
        registry,
        config,
        reader=controllers.reader.confirming_misses(RUNTIME_KINDS),
        bind_address=settings.serving.webhook_bind_address or None,
        cert_dir=cert_dir,
    )
    setup_status_server(  # only with the TrainJobStatus gate; the webhook server's certificates
        manager,
        config,
        bind_address=settings.serving.status_server_bind_address or None,
        cert_dir=cert_dir,
    )
    return manager


def main(
    argv: Sequence[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    log_stream: TextIO | None = None,
    build: Callable[[Settings], Runner] | None = None,
) -> int:
    """Runs the manager; returns the exit status (the console script exits with it).

    ``argv`` defaults to ``sys.argv[1:]``, ``environ`` to ``os.environ``, ``log_stream`` to stderr and
    ``build`` to :func:`build_manager`; tests pass their own.
    """
    if (
        build is None
    ):  # the real process, before any thread exists: glibc's arenas (controller.manager.memory)
        limit_malloc_arenas(environ=os.environ if environ is None else environ)
    try:
        flags = parse_flags(sys.argv[1:] if argv is None else argv)
    except SystemExit as exc:  # argparse: usage printed (2), or --help (0)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    configure_logging(json=flags.json_logs, level=flags.log_level, stream=log_stream)
    _log.info("setup.loading_configuration", config_file=str(flags.config) if flags.config else None)
    try:
        settings = load_settings(flags, os.environ if environ is None else environ)
    except (ConfigurationError, ServingError) as exc:
        _log.error("setup.invalid_configuration", error=str(exc), field=exc.field)
        return EXIT_USAGE
    except FeatureGateError as exc:
        _log.error("setup.invalid_configuration", error=str(exc), field="--feature-gates")
        return EXIT_USAGE
    _announce(settings)
    try:
        runner = (build or build_manager)(settings)
        _log.info("setup.starting_manager")
        runner.run_until_signal()
    except ConfigurationError as exc:  # from build: a plugin plugins.enabled names cannot be loaded or built
        _log.error("setup.invalid_configuration", error=str(exc), field=exc.field)
        return EXIT_USAGE
    except LeaderElectionLost as exc:
        _log.error("setup.leader_election_lost", error=str(exc), exit_status=EXIT_LEADER_ELECTION_LOST)
        return EXIT_LEADER_ELECTION_LOST
    except KeyboardInterrupt:  # a signal before the manager's handlers were installed
        _log.info("setup.interrupted", exit_status=EXIT_OK)
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - the process's last word: logged with its traceback
        _log.exception("setup.failed", error=str(exc), exit_status=EXIT_FAILURE)
        return EXIT_FAILURE
    _log.info("setup.stopped", exit_status=EXIT_OK)
    return EXIT_OK
