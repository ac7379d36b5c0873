"""docs/architecture.svg, the README's picture, is what hack/gen-architecture-svg.py draws today.

The generator is pure Python and deterministic, so a stale picture (the source edited, the SVG not
regenerated, or the SVG edited by hand) is a failing test, and the README never shows an old drawing.
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
GENERATOR = ROOT / "hack" / "gen-architecture-svg.py"


def draw() -> str:
    """What the generator draws today (the script's ``--stdout``: it writes nothing)."""
    done = subprocess.run(
        [sys.executable, str(GENERATOR), "--stdout"], capture_output=True, text=True, check=True, timeout=120
    )
    return done.stdout


def test_the_committed_svg_is_what_the_generator_draws() -> None:
    committed = (ROOT / "docs" / "architecture.svg").read_text()
    assert committed == draw(), "docs/architecture.svg is stale: run hack/gen-architecture-svg.py"


def test_the_drawing_is_the_same_every_time_and_well_formed_xml() -> None:
    first, second = draw(), draw()
    assert first == second
    root = ET.fromstring(first)
    texts = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
    parts = (
        "kube-apiserver", "Informers + caches", "Workqueues", "Controllers", "Runtime pipeline",
        "Webhook server", "Status server", "Metrics + health", "JobSet controller", "Kueue", "Kubeflow SDK",
    )  # fmt: skip
    missing = [part for part in parts if part not in texts]
    assert not missing, missing


def test_the_readme_shows_the_picture() -> None:
    assert "](docs/architecture.svg)" in (ROOT / "README.md").read_text()
