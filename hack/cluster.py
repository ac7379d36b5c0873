#!/usr/bin/env python3
"""The Tier 2 local cluster's command line: ``python hack/cluster.py up|down|env|demo|kueue-up|kueue-down``.

``make cluster-up``, ``make cluster-down``, ``make cluster-env`` and ``make demo`` run it; the Kueue commands
have no make target. Each command is a function of the test-support package (``test/support``), which the
e2e fixture uses too:

- ``up``/``down``/``env``: ``support.kwok`` (kwokctl's binary runtime on 127.0.0.1, kwok nodes and stages,
  JobSet on the host through ``support.jobset``);
- ``demo``: ``support.demo`` (the Trainer installed by ``support.install``, our manager on the host by
  ``support.cluster_manager``, and the sample TrainJob run to Complete);
- ``kueue-up``/``kueue-down``: ``support.kueue`` (Kueue with the TrainJob integration on the host).

Errors a user can act on print as one message (``cluster: error: ...``) with the relevant log tail, and
failed API requests without a traceback; SIGTERM (``make`` and CI stop jobs with it) unwinds like Ctrl-C.
"""

from __future__ import annotations

import argparse
import io
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))  # the test-support package

from controller.client.errors import ApiError, TransportError
from controller.trainer.config import parse_duration
from support.demo import demo
from support.kueue import KUEUE_FRAMEWORKS, KUEUE_QUEUE_LABEL, start_kueue, stop_kueue
from support.kwok import DEFAULT_NAME, ClusterOptions, ClusterState, down, env_lines, is_healthy, up
from support.process import ClusterError, say


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hack/cluster.py",
        description="The Tier 2 local cluster: kwokctl (binary runtime) and JobSet on 127.0.0.1.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    defaults = ClusterOptions()
    up_cmd = sub.add_parser("up", help="start the cluster (reuse it if it is already up and healthy)")
    up_cmd.add_argument("--nodes", type=int, default=defaults.nodes, help="kwok nodes (default %(default)s)")
    up_cmd.add_argument(
        "--pod-start-delay",
        type=parse_duration,
        default=defaults.pod_start_delay,
        help="Pending → Running for every pod without its own annotation (default 1s)",
    )
    up_cmd.add_argument(
        "--pod-run-time",
        type=parse_duration,
        default=defaults.pod_run_time,
        help="Running → Succeeded/Failed for every Job pod without its own annotation (default 2s)",
    )
    up_cmd.add_argument(
        "--timeout",
        type=parse_duration,
        default=defaults.timeout,
        help="upper bound for each start-up wait (default 180s)",
    )
    sub.add_parser("down", help="stop everything and remove the cluster's directories (idempotent)")
    sub.add_parser("env", help="print the shell exports for KUBECONFIG and E2E_CLUSTER")
    sub.add_parser(
        "demo",
        help="up, show health, install the Trainer API, start the manager, run the sample TrainJob to "
        "Complete, leave everything running",
    )
    sub.add_parser(
        "kueue-up",
        help="(re)start Kueue with the TrainJob integration on the host, against the running cluster",
    )
    sub.add_parser("kueue-down", help="stop Kueue and remove its webhook configurations (idempotent)")
    for command in sub.choices.values():
        command.add_argument("--name", default=DEFAULT_NAME, help="cluster name (default %(default)s)")
    return parser


def _kueue_up(name: str) -> None:
    state = ClusterState.read(name)
    if state is None or not is_healthy(state):
        raise ClusterError(f"cluster {name!r} is not up; start it with `make cluster-up`")
    started = time.monotonic()
    process = start_kueue(state)
    print(
        f"kueue pid {process.pid}: ready in {time.monotonic() - started:.1f} s; webhooks at "
        f"https://127.0.0.1:{process.webhook_port}, health http://127.0.0.1:{process.health_port}/readyz, "
        f"metrics https://127.0.0.1:{process.metrics_port}/metrics"
    )
    print(
        f"integrations: {', '.join(KUEUE_FRAMEWORKS)}; label a TrainJob with {KUEUE_QUEUE_LABEL}=<LocalQueue>"
    )
    print(f"log: {process.log}")


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)  # keep stdout in step with the progress lines on stderr
    # `make` and CI stop jobs with SIGTERM: unwind through the same clean-up path as Ctrl-C.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        if args.command == "up":
            state = up(
                ClusterOptions(
                    name=args.name,
                    nodes=args.nodes,
                    pod_start_delay=args.pod_start_delay,
                    pod_run_time=args.pod_run_time,
                    timeout=args.timeout,
                )
            )
            print(f"export KUBECONFIG={state.kubeconfig}")
        elif args.command == "down":
            down(args.name)
            say(f"cluster {args.name!r} is down")
        elif args.command == "env":
            print("\n".join(env_lines(args.name)))
        elif args.command == "demo":
            demo(args.name)
        elif args.command == "kueue-up":
            _kueue_up(args.name)
        elif args.command == "kueue-down":
            stop_kueue(args.name)
            say(f"Kueue of cluster {args.name!r} is stopped")
    except ClusterError as exc:
        print(f"cluster: error: {exc}", file=sys.stderr)
        return 1
    except (ApiError, TransportError) as exc:
        print(f"cluster: error: a request to the API server failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("cluster: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
