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

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))  # the test-support package

from support import crdgen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    document = crdgen.CORE_DOCUMENT_FILE
    parser.add_argument(
        "--output-dir", type=Path, default=crdgen.CRD_DIR, help="where the CRDs go (config/crd)"
    )
    parser.add_argument("--check", action="store_true", help="fail with a diff if output-dir is stale")
    parser.add_argument("--openapi-dir", type=Path, help=f"read {document} here, start nothing")
    parser.add_argument("--save-openapi", type=Path, help=f"save the fetched {document} here")
    parser.add_argument("--jobset-crd", type=Path, help="JobSet's CRD file (default: Go module cache)")
    args = parser.parse_args(argv)
    try:
        if args.openapi_dir:
            core = crdgen.load_core_document(args.openapi_dir)
        else:
            core = crdgen.fetch_core_document()
        if args.save_openapi:
            args.save_openapi.mkdir(parents=True, exist_ok=True)
            (args.save_openapi / crdgen.CORE_DOCUMENT_FILE).write_text(json.dumps(core, sort_keys=True))
        files = crdgen.generate(core, crdgen.load_jobset_crd(args.jobset_crd))
    except crdgen.GenerationError as exc:
        print(f"gen-crds: error: {exc}", file=sys.stderr)
        return 2
    if args.check:
        with tempfile.TemporaryDirectory() as scratch:
            crdgen.write(files, Path(scratch))
            lines = list(crdgen.diff(Path(scratch), args.output_dir))
        if lines:
            sys.stdout.writelines(lines[:400])
            if len(lines) > 400:
                print(f"... {len(lines) - 400} more diff lines")
            print(f"gen-crds: {args.output_dir} is stale; run hack/gen-crds.py", file=sys.stderr)
            return 1
        print(f"gen-crds: {args.output_dir} is up to date")
        return 0
    crdgen.write(files, args.output_dir)
    for name, text in files.items():
        print(f"wrote {args.output_dir / name} ({crdgen.measure(text)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
