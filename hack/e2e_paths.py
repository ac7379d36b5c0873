#!/usr/bin/env python3
"""Wait until the Trainer manager (or Kueue) serves on an e2e cluster, as the e2e suite waits; write Kueue's
overlay for kind.

    python hack/e2e_paths.py wait-serving --flavour kind --kubeconfig K [--timeout 300]
    python hack/e2e_paths.py kueue-overlay --out DIR --image IMAGE [--frameworks F,...]
    python hack/e2e_paths.py wait-kueue --kubeconfig K [--timeout 300]

``hack/e2e-setup-kind.sh`` runs them; what "serving" means on each path is ``test/support/e2e_paths.py``,
and Kueue's overlay and readiness are ``test/support/kueue.py``'s.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))  # the test-support package

import kubernetes

from controller.client.client import Client
from support import e2e_paths, kueue, thirdparty


def _parser() -> argparse.ArgumentParser:
    description = (__doc__ or "").split("\n\n", 1)[0]
    parser = argparse.ArgumentParser(prog="hack/e2e_paths.py", description=description)
    sub = parser.add_subparsers(dest="command", required=True)
    wait = sub.add_parser("wait-serving", help="wait until the manager serves its admission webhooks")
    wait.add_argument("--flavour", choices=e2e_paths.FLAVOURS, required=True)
    wait.add_argument("--kubeconfig", required=True)
    wait.add_argument("--timeout", type=float, default=300.0, help="seconds (default 300)")
    overlay = sub.add_parser("kueue-overlay", help="write the kustomize overlay of Kueue's config/default")
    overlay.add_argument("--out", required=True, help="the overlay's directory")
    overlay.add_argument("--image", required=True, help="Kueue's image, built here")
    overlay.add_argument(
        "--frameworks",
        default=",".join(kueue.KUEUE_FRAMEWORKS),
        help="integrations.frameworks, comma-separated (default: %(default)s)",
    )
    kueue_wait = sub.add_parser("wait-kueue", help="wait until Kueue in the cluster serves its webhooks")
    kueue_wait.add_argument("--kubeconfig", required=True)
    kueue_wait.add_argument("--timeout", type=float, default=300.0, help="seconds (default 300)")
    return parser


def _wait_serving(args: argparse.Namespace) -> int:
    client = Client.load(args.kubeconfig, user_agent="e2e-paths")
    try:
        e2e_paths.wait_until_serving(client, args.flavour, timeout=args.timeout)
    except TimeoutError as exc:
        print(f"e2e_paths: {exc}; its log: {e2e_paths.manager_log_hint(args.flavour)}", file=sys.stderr)
        return 1
    finally:
        client.close()
    print(f"e2e_paths: the Trainer manager ({args.flavour}) serves its webhooks", file=sys.stderr)
    return 0


def _kueue_overlay(args: argparse.Namespace) -> int:
    frameworks = [f for f in args.frameworks.split(",") if f]
    try:
        module_dir = thirdparty.kueue_manifests().module_dir
    except thirdparty.ThirdPartyError as exc:
        print(f"e2e_paths: cannot read Kueue's manifests: {exc}", file=sys.stderr)
        return 1
    kueue.write_kind_overlay(Path(args.out), module_dir=module_dir, image=args.image, frameworks=frameworks)
    return 0


def _wait_kueue(args: argparse.Namespace) -> int:
    api = kubernetes.config.new_client_from_config(config_file=args.kubeconfig)
    try:
        kueue.wait_until_kind_kueue_serving(
            kubernetes.client.CustomObjectsApi(api), kubernetes.client.AppsV1Api(api), timeout=args.timeout
        )
    except TimeoutError as exc:
        log = f"kubectl -n {kueue.KUEUE_NAMESPACE} logs deployment/{kueue.KIND_DEPLOYMENT}"
        print(f"e2e_paths: {exc}; its log: {log}", file=sys.stderr)
        return 1
    finally:
        api.close()
    print("e2e_paths: Kueue serves its webhooks", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    commands = {"wait-serving": _wait_serving, "kueue-overlay": _kueue_overlay, "wait-kueue": _wait_kueue}
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
