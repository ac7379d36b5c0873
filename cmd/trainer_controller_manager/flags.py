"""The manager's command line: upstream's flags, spelled and parsed as Go's ``flag`` package does.

Go origin: ``cmd/trainer-controller-manager/main.go`` (``--config``, ``--feature-gates``), controller-runtime
``pkg/log/zap`` (``--zap-*``) and ``pkg/client/config`` (``--kubeconfig``).

Guarantees: every flag takes ``--name value`` or ``--name=value``; boolean flags also stand alone
(``--zap-devel``) and read Go's boolean spellings (``--zap-devel=false``). A bad flag or value is a usage
error: :func:`parse_flags` raises ``SystemExit(2)`` after printing the usage, as argparse (and Go) do.

Deliberately missing: the single-dash spellings Go also accepts (``-config``) and zap's verbosity levels
below debug (``--zap-log-level=5`` logs at debug: there is no V(5) here).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Flags", "parse_flags"]

_ZAP_LEVELS = {
    "debug": "debug",
    "info": "info",
    "warn": "warning",
    "error": "error",
    "dpanic": "critical",
    "panic": "critical",
    "fatal": "critical",
}
_GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_GO_FALSE = ("0", "f", "F", "FALSE", "false", "False")


@dataclass(frozen=True, slots=True, kw_only=True)
class Flags:
    """The parsed command line."""

    config: Path | None
    """``--config``: the Configuration file; None means upstream's defaults."""
    feature_gates: str
    """``--feature-gates``: ``Name=bool,...``, applied over the file's ``featureGates``."""
    kubeconfig: str | None
    """``--kubeconfig``: else ``$KUBECONFIG``, the in-cluster config, ``~/.kube/config``."""
    log_level: str
    """The structlog level (``debug``, ``info``, ``warning``, ``error``, ``critical``)."""
    json_logs: bool
    """JSON lines (production, the default) or structlog's console renderer (``--zap-devel``)."""
    webhook_cert_dir: Path | None = None
    """``--webhook-cert-dir``: where the webhook server reads ``tls.crt``/``tls.key``; None means
    controller-runtime's ``/tmp/k8s-webhook-server/serving-certs`` (not an upstream flag: for local runs and
    tests)."""


def _go_bool(text: str) -> bool:
    if text in _GO_TRUE:
        return True
    if text in _GO_FALSE:
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean value {text!r}")


def _zap_level(text: str) -> str:
    """``debug``/``info``/``error``... or a verbosity N > 0 (zap level -N: debug and below, here debug)."""
    if text in _ZAP_LEVELS:
        return _ZAP_LEVELS[text]
    if text.isdigit() and int(text) > 0:
        return "debug"
    raise argparse.ArgumentTypeError(
        f"invalid log level {text!r}: expected one of {', '.join(_ZAP_LEVELS)} or an integer > 0"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trainer-controller-manager",
        description="The Kubeflow Trainer controller manager: reconciles TrainJobs into JobSets.",
        epilog=(
            "Exit status: 0 stopped by SIGTERM/SIGINT, 1 runtime failure, 2 bad flags or configuration, "
            "3 leader election lost. See docs/configuration.md."
        ),
        allow_abbrev=False,
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="FILE",
        help="the Configuration file (config.trainer.kubeflow.org/v1alpha1); omit for the defaults",
    )
    parser.add_argument(
        "--feature-gates",
        default="",
        metavar="NAME=BOOL,...",
        help="feature gates, e.g. TrainJobStatus=true; override the file's featureGates",
    )
    parser.add_argument(
        "--kubeconfig", default=None, metavar="FILE", help="the kubeconfig (default: $KUBECONFIG, in-cluster)"
    )
    parser.add_argument(
        "--webhook-cert-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="the webhook server's certificate directory (tls.crt, tls.key); default "
        "/tmp/k8s-webhook-server/serving-certs",
    )
    parser.add_argument(
        "--zap-log-level",
        type=_zap_level,
        default=None,
        metavar="LEVEL",
        help="debug, info, warn, error, panic, or an integer > 0 (read as debug); default info, or debug "
        "with --zap-devel",
    )
    parser.add_argument(
        "--zap-devel",
        type=_go_bool,
        nargs="?",
        const=True,
        default=False,
        metavar="BOOL",
        help="development logging: console output and debug level",
    )
    parser.add_argument(
        "--zap-encoder",
        choices=("json", "console"),
        default=None,
        help="log line format (default json; console with --zap-devel)",
    )
    parser.add_argument(
        "--zap-stacktrace-level",
        choices=("info", "error", "panic"),
        default=None,
        help="accepted for compatibility; tracebacks are always logged with errors",
    )
    parser.add_argument(
        "--zap-time-encoding",
        choices=("epoch", "millis", "nano", "iso8601", "rfc3339", "rfc3339nano"),
        default=None,
        help="accepted for compatibility; timestamps are always ISO 8601 in UTC",
    )
    return parser


def parse_flags(argv: Sequence[str]) -> Flags:
    """Parses ``argv`` (without the program name); raises ``SystemExit`` (2 on error, 0 for ``--help``)."""
    args = _parser().parse_args(list(argv))
    devel: bool = args.zap_devel
    level: str = args.zap_log_level or ("debug" if devel else "info")
    encoder = args.zap_encoder or ("console" if devel else "json")
    return Flags(
        config=args.config,
        feature_gates=args.feature_gates,
        kubeconfig=args.kubeconfig,
        log_level=level,
        json_logs=encoder == "json",
        webhook_cert_dir=args.webhook_cert_dir,
    )
