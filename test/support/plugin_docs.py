"""Regenerate the generated parts of docs/plugins.md from the code: the phase list and the capability matrix.

The phase list comes from `runtime.framework.Phase` (its members, in execution order, are what the framework
runs); the matrix from the built-in plugins (`runtime.plugins.builtin_registry`, every feature gate on): a
plugin takes part in a phase iff its class subclasses that phase's extension point.

Each generated block sits between `<!-- BEGIN GENERATED: <name> -->` and `<!-- END GENERATED: <name> -->`;
everything outside the markers is prose and is left alone.

    python hack/gen-plugin-docs.py           # rewrite docs/plugins.md
    python hack/gen-plugin-docs.py --check   # exit 1 (and say what differs) when the file is stale

`hack/gen-plugin-docs.py` is the command line. A unit test (`test/unit/support/test_plugin_docs.py`) runs the
check, so the docs cannot drift.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from runtime.framework import Framework, Phase, implements
from runtime.plugins import TRAINJOB_STATUS_GATE, builtin_registry

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"


def phases_block() -> str:
    """The phases, in execution order, as a Markdown table."""
    lines = [
        "| # | Phase (extension point) | Method | Runs | What a plugin does there |",
        "|---|---|---|---|---|",
    ]
    for number, phase in enumerate(Phase, start=1):
        lines.append(
            f"| {number} | `{phase.title}` | `{phase.method}` | {phase.stage.value} | {phase.summary} |"
        )
    return "\n".join(lines)


def matrix_block() -> str:
    """Which built-in plugin implements which phase, plugins in registry order."""
    framework = Framework(builtin_registry(frozenset({TRAINJOB_STATUS_GATE})))
    header = "| Plugin | " + " | ".join(phase.title for phase in Phase) + " |"
    lines = [header, "|---" * (len(Phase) + 1) + "|"]
    for plugin in framework.plugins:
        marks = " | ".join("✓" if implements(plugin, phase) else "" for phase in Phase)
        lines.append(f"| `{plugin.name}` | {marks} |")
    return "\n".join(lines)


BLOCKS = {"phases": phases_block, "capabilities": matrix_block}


def render(text: str) -> str:
    """`text` with every generated block replaced by its current content."""
    for name, build in BLOCKS.items():
        pattern = re.compile(
            rf"(<!-- BEGIN GENERATED: {name} -->\n).*?(\n<!-- END GENERATED: {name} -->)", re.DOTALL
        )
        if not pattern.search(text):
            raise SystemExit(f"{DOC}: missing the markers of the generated block {name!r}")
        text = pattern.sub(lambda m, b=build: m.group(1) + b() + m.group(2), text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when docs/plugins.md is out of date")
    args = parser.parse_args(argv)
    current = DOC.read_text(encoding="utf-8")
    wanted = render(current)
    if args.check:
        if current != wanted:
            print(f"{DOC} is out of date: run `python hack/gen-plugin-docs.py`", file=sys.stderr)
            return 1
        return 0
    if current != wanted:
        DOC.write_text(wanted, encoding="utf-8")
        print(f"updated {DOC}")
    return 0
