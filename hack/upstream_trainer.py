#!/usr/bin/env python3
"""Run upstream Kubeflow Trainer's Go controller manager out of cluster, in the foreground until Ctrl-C.

    python hack/upstream_trainer.py --kubeconfig admin.kubeconfig --workdir /tmp/upstream

How it is configured and started: ``test/support/upstream.py`` (the module the tests and the scale
benchmark use).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))  # the test-support package

from support import upstream


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--qps", type=float, default=50.0)
    parser.add_argument("--burst", type=int, default=100)
    args = parser.parse_args(argv)
    try:
        handle = upstream.start(args.kubeconfig, args.workdir, qps=args.qps, burst=args.burst)
    except upstream.UpstreamError as exc:
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
