#!/usr/bin/env python3
"""Wait until the Trainer manager serves its admission webhooks on an e2e cluster, as the e2e suite waits.

    python hack/e2e_paths.py wait-serving --flavour kind --kubeconfig K [--timeout 300]

``hack/e2e-setup-kind.sh`` runs it; what "serving" means on each path is ``test/support/e2e_paths.py``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))  # the test-support package

from controller.client.client import Client
from support import e2e_paths


def _parser() -> argparse.ArgumentParser:
    description = (__doc__ or "").split("\n\n", 1)[0]
    parser = argparse.ArgumentParser(prog="hack/e2e_paths.py", description=description)
    sub = parser.add_subparsers(dest="command", required=True)
    wait = sub.add_parser("wait-serving", help="wait until the manager serves its admission webhooks")
    wait.add_argument("--flavour", choices=e2e_paths.FLAVOURS, required=True)
    wait.add_argument("--kubeconfig", required=True)
    wait.add_argument("--timeout", type=float, default=300.0, help="seconds (default 300)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
