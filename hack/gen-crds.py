#!/usr/bin/env python3
"""Generate the Trainer CRDs (`config/crd/*.yaml`) from the TypedDicts in `runtime/api/v1alpha1.py`.

The generator is `test/support/crdgen.py` (its docstring says how, and where the embedded schemas come from);
this is its command line:

    hack/gen-crds.py                      # regenerate config/crd/ (starts a control plane, ~10 s)
    hack/gen-crds.py --check              # regenerate into a temp dir; exit 1 with a diff on drift
    hack/gen-crds.py --openapi-dir DIR    # use a saved api__v1.json instead of starting a control plane
    hack/gen-crds.py --save-openapi DIR   # also save the fetched document for later offline runs
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))  # the test-support package

from support import crdgen

if __name__ == "__main__":
    sys.exit(crdgen.main())
