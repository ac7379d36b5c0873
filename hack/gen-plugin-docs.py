#!/usr/bin/env python3
"""Regenerate the generated parts of docs/plugins.md from the code: the phase list and the capability matrix.

    python hack/gen-plugin-docs.py           # rewrite docs/plugins.md
    python hack/gen-plugin-docs.py --check   # exit 1 (and say what differs) when the file is stale

The generator is ``test/support/plugin_docs.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))  # the test-support package

from support import plugin_docs

if __name__ == "__main__":
    sys.exit(plugin_docs.main())
