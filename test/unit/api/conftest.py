"""Fixtures for the API tests: the CRD generator loaded as a module, and the committed CRDs.

- ``gen_crds`` (session): the CRD generator, ``support.crdgen`` (``hack/gen-crds.py`` is its command line).
- ``crds`` (session): kind → the committed ``config/crd`` CustomResourceDefinition, parsed.
- ``crd_schema(kind)``: the ``openAPIV3Schema`` of that kind's only version.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from support import crdgen

ROOT = Path(__file__).resolve().parents[3]


def load_gen_crds() -> ModuleType:
    return crdgen


@pytest.fixture(scope="session")
def gen_crds() -> ModuleType:
    return load_gen_crds()


@pytest.fixture(scope="session")
def crds() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for path in sorted((ROOT / "config" / "crd").glob("*.yaml")):
        for document in yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader):
            if document and document.get("kind") == "CustomResourceDefinition":
                found[document["spec"]["names"]["kind"]] = document
    return found


@pytest.fixture(scope="session")
def crd_schema(crds: dict[str, dict[str, Any]]) -> Callable[[str], dict[str, Any]]:
    def schema(kind: str) -> dict[str, Any]:
        (version,) = crds[kind]["spec"]["versions"]
        return dict(version["schema"]["openAPIV3Schema"])

    return schema
