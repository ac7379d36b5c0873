"""A toy controller process for the manager integration tests: run as a subprocess, several at once.

It reconciles ``Toy`` objects (``toys.toy.controller.test``, installed by the test) into a ConfigMap
``<name>-toy`` holding ``spec.message``, annotated with the identity of the process that wrote it, and
copies the message to ``status.observedMessage``. It owns those ConfigMaps (a deleted one comes back).

With ``--leader-election`` only the lease holder reconciles. Logs are JSON lines on stderr; each reconcile
logs ``toy.reconciled``. Exit status: 0 after SIGTERM/SIGINT, 1 when the lease was lost (as every
controller built on ``controller.manager.manager`` must do), 2 on a start-up failure.

Usage: ``python test/support/toy_manager.py --kubeconfig K --namespace NS --identity ID [--leader-election]``
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import structlog

from controller.client.client import Client
from controller.client.errors import NotFound
from controller.client.gvk import GVK
from controller.controller.builder import ControllerBuilder
from controller.controller.reconcile import Request, Result
from controller.logging import configure
from controller.manager.leaderelection import JITTER_FACTOR
from controller.manager.manager import LeaderElectionLost, Manager, ManagerError, ManagerOptions

# The lease timings of main() below (production's lease duration and renew deadline), and the slack a loaded
# 2-core machine needs on top of the algorithm's worst case: process scheduling, API latency, the polling.
LEASE_DURATION = 15.0
DEFAULT_RETRY_PERIOD = 2.0
TIMING_MARGIN = 5.0


def worst_takeover(retry_period: float) -> float:
    """client-go's worst case for a standby to take over a lease its holder stopped renewing, plus margin.

    The standby acquires a lease duration after it last *saw* the record change; it sees the last renewal
    up to one jittered retry period late, and notices the expiry up to one more late. A jittered retry
    period is at most ``retry * (1 + JitterFactor)``.
    """
    return LEASE_DURATION + 2 * retry_period * (1 + JITTER_FACTOR) + TIMING_MARGIN


TOY = GVK("toy.controller.test", "v1", "Toy")
CONFIGMAP = GVK("", "v1", "ConfigMap")
FIELD_MANAGER = "toy-controller"

_log = structlog.get_logger("toy")


class ToyReconciler:
    def __init__(self, manager: Manager, identity: str) -> None:
        self._cache: Any = manager.cache
        self._client: Client = manager.client
        self._identity = identity

    def reconcile(self, request: Request) -> Result:
        try:
            toy = self._cache.get(TOY, request.name, request.namespace)
        except NotFound:
            return Result()
        message = (toy.get("spec") or {}).get("message", "")
        self._client.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": f"{request.name}-toy",
                    "namespace": request.namespace,
                    "annotations": {"toy.controller.test/reconciled-by": self._identity},
                    "ownerReferences": [
                        {
                            "apiVersion": TOY.api_version,
                            "kind": TOY.kind,
                            "name": request.name,
                            "uid": toy["metadata"]["uid"],
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "data": {"message": message},
            },
            FIELD_MANAGER,
        )
        if (toy.get("status") or {}).get("observedMessage") != message:
            self._client.patch_status(
                TOY, request.name, {"status": {"observedMessage": message}}, request.namespace
            )
        _log.info("toy.reconciled", namespace=request.namespace, name=request.name, identity=self._identity)
        return Result()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True, help="namespace of the lease")
    parser.add_argument("--identity", required=True)
    parser.add_argument("--leader-election", action="store_true")
    parser.add_argument("--lease-id", default="toy-controller")
    parser.add_argument("--lease-duration", type=float, default=15.0)
    parser.add_argument("--renew-deadline", type=float, default=10.0)
    parser.add_argument("--retry-period", type=float, default=2.0)
    args = parser.parse_args(argv)

    configure(json=True, level="info")
    options = ManagerOptions(
        leader_election=args.leader_election,
        leader_election_id=args.lease_id,
        leader_election_namespace=args.namespace,
        lease_duration=args.lease_duration,
        renew_deadline=args.renew_deadline,
        retry_period=args.retry_period,
        identity=args.identity,
        health_probe_bind_address="127.0.0.1:0",
        metrics_bind_address="0",
    )
    manager = Manager.from_kubeconfig(args.kubeconfig, options=options)
    manager.add_healthz_check("ping", lambda: None)
    ControllerBuilder(manager).for_(TOY).owns(CONFIGMAP).complete(ToyReconciler(manager, args.identity))
    try:
        manager.run_until_signal()
    except LeaderElectionLost:
        _log.error("toy.exiting", reason="leader election lost")
        return 1
    except ManagerError as exc:
        _log.error("toy.exiting", reason=str(exc))
        return 2
    finally:
        manager.client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
