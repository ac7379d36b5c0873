"""The repository is self-contained: no tracked file points at files outside it.

A newcomer has only the clone. Docs, code comments and tests must not send them to the team's working
notes next to the checkout, and a relative Markdown link must resolve to a file inside the repository.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# Built from parts so that this file does not match itself.
_OUTSIDE = ("../" + "shared", "/work/" + "shared")
_MD_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _tracked_files() -> list[Path]:
    done = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"`git ls-files` failed (not a git checkout?): {done.stderr}"
    return [ROOT / name for name in done.stdout.split("\0") if name]


def _text(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        return None  # deleted in the work tree but still in the index; a submodule
    if b"\0" in data[:8192]:
        return None  # binary
    return data.decode("utf-8", errors="replace")


def test_no_tracked_file_mentions_the_shared_notes_outside_the_repository() -> None:
    hits = []
    for path in _tracked_files():
        text = _text(path)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            if any(marker in line for marker in _OUTSIDE):
                hits.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not hits, "files outside the repository are mentioned:\n" + "\n".join(hits)


def test_relative_markdown_links_resolve_inside_the_repository() -> None:
    problems = []
    markdown = [
        p for p in _tracked_files() if p.suffix == ".md" and not p.is_relative_to(ROOT / "hack/tools")
    ]
    assert markdown, "no Markdown files found: the test would pass vacuously"
    for path in markdown:
        text = _text(path) or ""
        for target in _MD_LINK.findall(text):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # a URL (https:, mailto:) or an anchor in the same page
            resolved = (path.parent / target.split("#", 1)[0]).resolve()
            if not resolved.is_relative_to(ROOT):
                problems.append(f"{path.relative_to(ROOT)}: {target} points outside the repository")
            elif not resolved.exists():
                problems.append(f"{path.relative_to(ROOT)}: {target} does not exist")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("line", ["see ../" + "shared/reference/x.md", "/work/" + "shared/STYLE.md"])
def test_the_check_recognises_a_mention_of_the_shared_notes(line: str) -> None:
    assert any(marker in line for marker in _OUTSIDE)
