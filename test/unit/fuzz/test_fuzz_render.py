"""Hostile input through trainer-render (runtime.render.run, the command's own code path, with the CRD
schemas preloaded): mutated TrainJobs and runtimes (see conftest.py) as one multi-document file on stdin.

Properties: the exit status is 0 (rendered) or 2 (invalid input), never 1 (a bug); an invalid input's
report names a field path in every problem it lists, or, for a document that is not a TrainJob or runtime
at all (its ``apiVersion`` or ``kind`` is wrong, it is not an object), names the document (``<stdin>#2``);
what is rendered is YAML of objects that belong to the TrainJob.
"""

from __future__ import annotations

import io
import json
import re
from typing import Any

import yaml
from hypothesis import given, seed

from runtime.render import EXIT_INVALID, EXIT_OK, run
from runtime.schema import CRD_DIR, SchemaChecker

from .conftest import FUZZ, SEED, names_a_field, worlds

SCHEMAS = SchemaChecker.from_crd_dir(CRD_DIR)
DOCUMENT = re.compile(r"trainer-render: <stdin>(?:#\d+)?: ")
"""A refusal of a whole document, which names it (render's own messages, see runtime/render.py)."""


def render(*documents: Any) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``trainer-render -`` with the documents on stdin."""
    text = "\n---\n".join(json.dumps(d) for d in documents)
    out, err = io.StringIO(), io.StringIO()
    status = run(["-"], stdin=io.BytesIO(text.encode()), stdout=out, stderr=err, schemas=SCHEMAS)
    return status, out.getvalue(), err.getvalue()


def problems(stderr: str) -> tuple[str, list[str]]:
    """The title line and the problem lines of an invalid input's report."""
    lines = [line for line in stderr.splitlines() if not line.startswith("Warning: ")]
    titles = [line for line in lines if line.startswith("trainer-render: ")]
    assert len(titles) == 1, stderr
    return titles[0], [line.strip() for line in lines if line.startswith("  ")]


@FUZZ
@seed(SEED)
@given(world=worlds())
def test_render_renders_or_refuses_naming_the_field(world: tuple[dict[str, Any], dict[str, Any]]) -> None:
    trainjob, runtime = world
    status, out, err = render(trainjob, runtime)
    assert status in (EXIT_OK, EXIT_INVALID), err
    if status == EXIT_INVALID:
        title, listed = problems(err)
        assert "internal error" not in title, err
        if DOCUMENT.match(title):
            return  # the input is not one TrainJob and its runtimes: the document is named, and why
        # Otherwise every problem names its field (a report without problems names it in the title).
        for line in listed or [title]:
            assert names_a_field(line), err
        return
    namespace = trainjob["metadata"].get("namespace") or "default"
    for obj in yaml.safe_load_all(out):
        assert obj["metadata"]["namespace"] == namespace
        assert obj["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
