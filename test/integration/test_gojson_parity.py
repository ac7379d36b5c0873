"""runtime.api.gojson against Go itself: the same objects through Go's types and through the interpreter.

`hack/tools/gotypes` (built by `hack/build-binaries.sh gotypes`) decodes each object of
`test/unit/runtime/gojson_corpus.yaml` into its Go type as client-go does and writes it back with
`json.Marshal`, or, for a JobSet template, runs upstream's own `apply.FromTypedObjWithFields`; the
interpreter must write the same JSON, keys in the same order. The committed table must also be what the
generator writes today, so the interpreter never reads a stale or hand-edited rule.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from runtime.api import gojson

ROOT = Path(__file__).resolve().parents[2]
CORPUS = yaml.safe_load((ROOT / "test" / "unit" / "runtime" / "gojson_corpus.yaml").read_text())


@pytest.fixture(scope="module")
def gotypes(prerequisite: Any) -> Path:
    script = ["bash", str(ROOT / "hack" / "build-binaries.sh")]
    printed = subprocess.run([*script, "--print"], capture_output=True, text=True, check=True).stdout
    directory = dict(line.split("=", 1) for line in printed.splitlines())["GOTYPES_BIN"]
    binary = Path(directory) / "gotypes"
    if not binary.is_file():
        if shutil.which("go") is None:
            prerequisite.missing("the gotypes parity test needs Go >= 1.26 to build hack/tools/gotypes")
        done = subprocess.run([*script, "gotypes"], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            pytest.fail(f"hack/build-binaries.sh gotypes failed:\n{done.stderr[-4000:]}", pytrace=False)
    return binary


def _go(binary: Path, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    lines = "".join(
        json.dumps({"type": case.get("type", ""), "mode": case["mode"], "value": case["value"]}) + "\n"
        for case in cases
    )
    done = subprocess.run([str(binary), "roundtrip"], input=lines, capture_output=True, text=True, check=True)
    return [json.loads(line) for line in done.stdout.splitlines()]


def _python(case: dict[str, Any]) -> Any:
    if case["mode"] == "template":
        return gojson.go_round_trip_jobset_spec(case["value"])
    return gojson.go_json(case["value"], case["type"])


def test_the_committed_table_is_what_the_generator_writes(gotypes: Path) -> None:
    fresh = subprocess.run([str(gotypes), "table"], capture_output=True, text=True, check=True).stdout
    committed = (ROOT / "runtime" / "api" / "gotypes.json").read_text()
    assert fresh == committed, "regenerate: hack/tools/gotypes table > runtime/api/gotypes.json"


def test_the_interpreter_writes_what_go_writes(gotypes: Path) -> None:
    replies = _go(gotypes, CORPUS)
    assert len(replies) == len(CORPUS)
    for case, reply in zip(CORPUS, replies, strict=True):
        assert "error" not in reply, (case["name"], reply)
        # Same value, and same text: key order included (json.Marshal's order).
        assert json.dumps(_python(case)) == json.dumps(reply["value"]), case["name"]


def test_the_golden_runtimes_templates_are_written_as_go_writes_them(gotypes: Path) -> None:
    # Every JobSet template of the default and example runtimes, through upstream's template path.
    cases = []
    for path in sorted((ROOT / "config" / "runtimes").rglob("*.yaml")) + sorted(
        (ROOT / "test" / "golden" / "runtimes").glob("*.yaml")
    ):
        for document in yaml.safe_load_all(path.read_text()):
            if isinstance(document, dict) and document.get("kind", "").endswith("TrainingRuntime"):
                spec = document["spec"]["template"]["spec"]
                cases.append({"name": str(path.relative_to(ROOT)), "mode": "template", "value": spec})
                runtime = {"name": f"{path.name} as a TrainingRuntime", "mode": "json", "value": document}
                cases.append({**runtime, "type": gojson.TRAINING_RUNTIME})
    assert len(cases) >= 10
    for case, reply in zip(cases, _go(gotypes, cases), strict=True):
        assert "error" not in reply, (case["name"], reply)
        assert json.dumps(_python(case)) == json.dumps(reply["value"]), case["name"]
