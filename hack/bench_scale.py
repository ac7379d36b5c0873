#!/usr/bin/env python3
"""``make bench-scale``: our controller and upstream's Go controller, side by side at scale, on one machine.

    python hack/bench_scale.py                  # everything, figures into docs/performance/
    python hack/bench_scale.py --quick          # a smoke run with small counts, into build/bench-scale-quick/
    python hack/bench_scale.py --scenarios burst,steady --controllers ours   # re-run a part

The benchmark is the package ``test/benchmark/scale`` (its docstring describes the scenarios and the
figures); this is its command line, the same as ``python -m benchmark.scale`` with ``test/`` on the path.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))  # the test-support packages

from benchmark.scale.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
