"""Hostile input through trainer-render (runtime.render.run, the command's own code path, with the CRD
schemas preloaded): mutated TrainJobs and runtimes (see conftest.py) as one multi-document file on stdin.

Properties: the exit status is 0 (rendered) or 2 (invalid input), never 1 (a bug); an invalid input's
report names a field path in every problem it lists, and a refusal of a whole document (its ``apiVersion``
or ``kind`` is wrong, it is a second TrainJob, it is not an object) names the document and the field
(``<stdin>#2: kind: ...``, ``<stdin>#2: <root>: ...``); what is rendered is YAML of objects that belong to
the TrainJob.

The documents are written as JSON, which is YAML, except that a character beyond the Basic Multilingual
Plane is written as YAML's ``\\U`` escape: go-yaml (and so kubeyaml) refuses JSON's surrogate pairs
(``\\ud83d\\ude00``), which would make such an example a YAML error that tests nothing of the renderer.
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
DOCUMENT = re.compile(r"trainer-render: <stdin>(?:#\d+)?: (?P<rest>.*)")
"""A refusal of a whole document, which names it (render's own messages, see runtime/render.py)."""
ROOT = re.compile(r"^<root>: ")
"""The field path of a whole document (one that is not an object)."""
_SURROGATE_PAIR = re.compile(r"(?<!\\)((?:\\\\)*)\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})")
"""JSON's escape of a character beyond U+FFFF (not itself an escaped backslash followed by ``u``)."""


def _yaml_escape(match: re.Match[str]) -> str:
    high, low = int(match[2], 16), int(match[3], 16)
    return f"{match[1]}\\U{0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00):08x}"


def to_yaml(document: Any) -> str:
    """The document as JSON that go-yaml reads back as the same value (see the module doc)."""
    return _SURROGATE_PAIR.sub(_yaml_escape, json.dumps(document))


def render(*documents: Any) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``trainer-render -`` with the documents on stdin."""
    text = "\n---\n".join(to_yaml(d) for d in documents)
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
        if document := DOCUMENT.match(title):
            # The input is not one TrainJob and its runtimes: the document is named, and the field.
            assert names_a_field(document["rest"]) or ROOT.match(document["rest"]), err
            return
        # Otherwise every problem names its field (a report without problems names it in the title).
        for line in listed or [title]:
            assert names_a_field(line), err
        return
    namespace = trainjob["metadata"].get("namespace") or "default"
    for obj in yaml.safe_load_all(out):
        assert obj["metadata"]["namespace"] == namespace
        assert obj["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
