#!/usr/bin/env python3
"""Print the paths of the third-party CRDs the tests install, one a line, from the Go module cache.

    python hack/thirdparty.py

Where each CRD comes from: ``test/support/thirdparty.py``. Without Go, or when the proxy cannot be reached,
it fails with a one-line message, not a stack trace.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))  # the test-support package

from support import thirdparty


def main() -> int:
    try:
        paths = thirdparty.crd_paths()
    except thirdparty.ThirdPartyError as exc:
        print(f"thirdparty: error: {exc}", file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
