"""Golden files: every default runtime (and three example runtimes) x representative TrainJobs, rendered.

Each case renders `test/golden/trainjobs/<case>.yaml`, pointed at one runtime, with the real command
line (`--runtime config/runtimes --runtime test/golden/runtimes --existing test/golden/existing`) and
compares the result byte for byte with `test/golden/rendered/<runtime>/<case>.yaml` (stdout, exit 0) or
`<case>.err` (stderr, exit 2).

Regenerate on purpose only, after a deliberate change of output, and review the diff:

    UPDATE_GOLDEN=1 .venv/bin/python -m pytest test/unit/render/test_render_golden.py -q

A file that no case produces fails `test_every_golden_file_belongs_to_a_case`.
"""

from __future__ import annotations

import difflib
import io
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from runtime.render import DEFAULT_CRD_DIR, SchemaChecker, run

ROOT = Path(__file__).resolve().parents[3]
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
}
COMMON_CASES = ("minimal", "gpus", "runtime-patches", "suspend")
EXTRA_CASES = {
    "torchtune-llama3.2-1b": ("initializers", "tune-run", "tune-run-multinode"),
    "torchtune-llama3.2-3b": ("initializers", "tune-run"),
    "torchtune-qwen2.5-1.5b": ("initializers", "tune-run"),
    "torch-coscheduling": ("initializers",),
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


def _render(case: Case, workdir: Path) -> tuple[int, str, str]:
    trainjob = yaml.safe_load((GOLDEN / "trainjobs" / f"{case.trainjob}.yaml").read_text())
    trainjob["spec"]["runtimeRef"] = {"name": case.runtime, "kind": case.kind}
    (workdir / "trainjob.yaml").write_text(yaml.safe_dump(trainjob, sort_keys=False))
    out, err = io.StringIO(), io.StringIO()
    code = run(
        [
            "trainjob.yaml",
            "--runtime",
            str(ROOT / "config" / "runtimes"),
            "--runtime",
            str(GOLDEN / "runtimes"),
            "--existing",
            str(GOLDEN / "existing"),
        ],
        stdout=out,
        stderr=err,
        schemas=SCHEMAS,
    )
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rendered_output_matches_the_golden_file(
    case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # error messages name the TrainJob file relative to here
    code, out, err = _render(case, tmp_path)
    assert code in (0, 2), err
    actual, suffix, stale = (out, ".yaml", ".err") if code == 0 else (err, ".err", ".yaml")
    path = RENDERED / case.runtime / f"{case.trainjob}{suffix}"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual)
        path.with_suffix(stale).unlink(missing_ok=True)
        return
    assert path.exists(), (
        f"{path.relative_to(ROOT)} is missing: regenerate with UPDATE_GOLDEN=1 (see module doc)"
    )
    expected = path.read_text()
    if actual != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                actual.splitlines(keepends=True),
                fromfile=str(path.relative_to(ROOT)),
                tofile="rendered",
            )
        )
        pytest.fail(f"render output differs from the golden file:\n{diff}", pytrace=False)


def test_every_golden_file_belongs_to_a_case() -> None:
    wanted = {(c.runtime, c.trainjob) for c in CASES}
    found = {(p.parent.name, p.stem) for p in RENDERED.rglob("*") if p.is_file()}
    assert found - wanted == set(), "stale golden files: delete them"
    assert found >= wanted or UPDATE, "missing golden files: regenerate with UPDATE_GOLDEN=1"


def test_rendering_is_deterministic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    case = Case("deepspeed-distributed", "gpus")
    first, second = _render(case, tmp_path), _render(case, tmp_path)
    assert first == second
    assert first[0] == 0
