"""The golden render cases: every default runtime (and five example runtimes) x representative TrainJobs.

``test/unit/render/test_render_golden.py`` renders each :data:`CASES` entry and compares it with its file
under ``test/golden/rendered``; ``test/integration/test_render_parity.py`` renders the same cases with
upstream's code.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from runtime.render import DEFAULT_CRD_DIR, SchemaChecker

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "test" / "golden"
RENDERED = GOLDEN / "rendered"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
SCHEMAS = SchemaChecker.from_crd_dir(DEFAULT_CRD_DIR)  # what `--crd-dir config/crd` loads, parsed once

DEFAULT_RUNTIMES = (
    "torch-distributed",
    "deepspeed-distributed",
    "mlx-distributed",
    "jax-distributed",
    "xgboost-distributed",
    "torchtune-llama3.2-1b",
    "torchtune-llama3.2-3b",
    "torchtune-qwen2.5-1.5b",
)
EXAMPLE_RUNTIMES = {
    "flux-distributed": "ClusterTrainingRuntime",
    "mpi-volcano": "ClusterTrainingRuntime",
    "torch-coscheduling": "TrainingRuntime",
    "jax-volcano": "ClusterTrainingRuntime",
    "mpi-launcher-nodes": "ClusterTrainingRuntime",
}
COMMON_CASES = ("minimal", "gpus", "runtime-patches", "suspend")
EXTRA_CASES = {
    "torchtune-llama3.2-1b": ("initializers", "tune-run", "tune-run-multinode"),
    "torchtune-llama3.2-3b": ("initializers", "tune-run"),
    "torchtune-qwen2.5-1.5b": ("initializers", "tune-run"),
    "torch-coscheduling": ("initializers", "quantities"),
    "torch-distributed": ("initializers", "schema-errors"),
    "deepspeed-distributed": ("reserved-env",),
    "xgboost-distributed": ("reserved-env",),
}


@dataclass(frozen=True)
class Case:
    runtime: str
    trainjob: str
    kind: str = "ClusterTrainingRuntime"

    @property
    def id(self) -> str:
        return f"{self.runtime}/{self.trainjob}"


CASES = [
    Case(runtime, trainjob, EXAMPLE_RUNTIMES.get(runtime, "ClusterTrainingRuntime"))
    for runtime in (*DEFAULT_RUNTIMES, *EXAMPLE_RUNTIMES)
    for trainjob in (*COMMON_CASES, *EXTRA_CASES.get(runtime, ()))
]
