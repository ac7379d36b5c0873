"""docs/plugins.md: its phase list and capability matrix are generated from the code and must not drift."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from runtime.framework import Phase
from support import plugin_docs

ROOT = Path(__file__).resolve().parents[3]


def _generator() -> ModuleType:
    return plugin_docs


def test_the_committed_plugin_guide_matches_the_code() -> None:
    generator = _generator()
    current = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    assert generator.render(current) == current, (
        "docs/plugins.md is stale: run `python hack/gen-plugin-docs.py`"
    )
    assert generator.main(["--check"]) == 0


def test_the_phase_list_follows_the_enum_order() -> None:
    table = _generator().phases_block()
    positions = [table.index(f"`{phase.title}`") for phase in Phase]
    assert positions == sorted(positions)


def test_a_stale_block_is_rewritten_and_missing_markers_are_an_error() -> None:
    generator = _generator()
    stale = "intro\n<!-- BEGIN GENERATED: phases -->\nold\n<!-- END GENERATED: phases -->\n" + (
        "<!-- BEGIN GENERATED: capabilities -->\nold\n<!-- END GENERATED: capabilities -->\noutro\n"
    )
    fresh = generator.render(stale)
    assert fresh != stale and fresh.startswith("intro\n") and fresh.endswith("outro\n")
    assert "`EnforceMLPolicy`" in fresh and "| `JobSet` |" in fresh
    with pytest.raises(SystemExit, match="missing the markers"):
        generator.render("no markers here")
