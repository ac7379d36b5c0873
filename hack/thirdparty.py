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

if __name__ == "__main__":
    sys.exit(thirdparty.main())
