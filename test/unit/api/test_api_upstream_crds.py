"""Our CRDs against upstream's: kubeflow/trainer v2.3.0's generated `manifests/base/crds/*.yaml`.

Upstream's CRDs are read from the Go module `github.com/kubeflow/trainer/v2` at `TRAINER_VERSION`
(hack/versions.env), downloaded into the Go module cache by `support.thirdparty` (`go mod download`, a no-op
when the module is there). Without Go or the module that is a missing prerequisite (test/conftest.py): the
comparison is skipped, except under CI (env `CI` set) or `make test`, where it fails with the reason.

Compared: every keyword of every schema node except `description` (type, format, bounds, enums, required,
list and map types, CEL rules, defaults, int-or-string, nullable, preserve-unknown-fields...), plus names,
scope, versions, subresources and printer columns. Deliberate differences would be listed in
`DELIBERATE_DIFFERENCES` with their reason, and in docs/compatibility.md; today there are none.
Descriptions are compared by where they are, not by what they say (ours are our own words).
"""

from __future__ import annotations

import json
import typing
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn, Protocol

import pytest
import yaml

from runtime.api import v1alpha1
from support import thirdparty as _thirdparty

ROOT = Path(__file__).resolve().parents[3]
OURS = ROOT / "config" / "crd"

DELIBERATE_DIFFERENCES: dict[str, str] = {}
"""Structural difference (as `differences` words it) → why we keep it. Keep docs/compatibility.md in step."""

UNDESCRIBED_AS_KUBE_OPENAPI = {
    f"spec.runtimePatches[].trainingRuntimeSpec.template.spec.replicatedJobs[].template.spec.template.spec."
    f"{containers}[].securityContext.capabilities.{which}[]"
    for containers in ("containers", "initContainers")
    for which in ("add", "drop")
}
"""Nodes upstream describes and we do not: items of `[]Capability`, a string type whose doc controller-gen
copies onto each item and kube-openapi (our source for core types) does not."""


def thirdparty() -> ModuleType:
    return _thirdparty


class Missing(Protocol):
    """What `test/conftest.py`'s `prerequisite` fixture offers: skip, or fail when they are required."""

    def missing(self, reason: str) -> NoReturn: ...


def locate_upstream(module: ModuleType, prerequisite: Missing) -> Path:
    """Upstream's CRD directory, the module downloaded first if needed; else a missing prerequisite."""
    try:
        directory: Path = module.upstream_trainer_crd_dir()
    except module.ThirdPartyError as exc:
        prerequisite.missing(f"upstream kubeflow/trainer CRDs, to compare ours with: {exc}")
    return directory


@pytest.fixture(scope="session")
def upstream_dir(prerequisite: Missing) -> Path:
    return locate_upstream(thirdparty(), prerequisite)


def load_crd(path: Path) -> dict[str, Any]:
    for document in yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader):
        if document and document.get("kind") == "CustomResourceDefinition":
            return dict(document)
    raise AssertionError(f"{path} holds no CustomResourceDefinition")


def crd_files(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.glob("trainer.kubeflow.org_*.yaml"))


def structural_differences(gen_crds: ModuleType, ours: Any, theirs: Any) -> list[str]:
    """Every difference between two CRD documents but their descriptions and metadata annotations."""
    return list(differences(gen_crds.strip_descriptions(ours), gen_crds.strip_descriptions(theirs)))


def differences(ours: Any, theirs: Any, path: str = "") -> Iterator[str]:
    """Every difference between two documents (metadata annotations aside), worded with its path."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in sorted(set(ours) | set(theirs)):
            if key == "annotations" and path == ".metadata":
                continue
            if key not in theirs:
                yield f"{path}.{key}: only ours has it ({json.dumps(ours[key])[:120]})"
            elif key not in ours:
                yield f"{path}.{key}: only upstream has it ({json.dumps(theirs[key])[:120]})"
            else:
                yield from differences(ours[key], theirs[key], f"{path}.{key}")
    elif isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        for index, (mine, upstream) in enumerate(zip(ours, theirs, strict=True)):
            yield from differences(mine, upstream, f"{path}[{index}]")
    elif ours != theirs:
        yield f"{path}: ours {json.dumps(ours)[:120]}, upstream {json.dumps(theirs)[:120]}"


def schema_nodes(node: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if not isinstance(node, dict):
        return
    yield path, node
    for name, prop in node.get("properties", {}).items():
        yield from schema_nodes(prop, f"{path}.{name}" if path else name)
    yield from schema_nodes(node.get("items"), f"{path}[]")
    yield from schema_nodes(node.get("additionalProperties"), f"{path}{{}}")


def schema_of(crd: dict[str, Any]) -> dict[str, Any]:
    (version,) = crd["spec"]["versions"]
    return dict(version["schema"]["openAPIV3Schema"])


def test_the_same_crds_are_installed_as_upstream_and_no_optimization_job(upstream_dir: Path) -> None:
    assert crd_files(OURS) == crd_files(upstream_dir)
    assert not any("optimizationjob" in name for name in crd_files(OURS))


@pytest.mark.parametrize("name", crd_files(OURS))
def test_every_validation_equals_upstreams(gen_crds: ModuleType, upstream_dir: Path, name: str) -> None:
    found = [
        difference
        for difference in structural_differences(
            gen_crds, load_crd(OURS / name), load_crd(upstream_dir / name)
        )
        if difference not in DELIBERATE_DIFFERENCES
    ]
    assert found == [], (
        f"{name} differs from upstream v2.3.0 (fix it, or list it with a reason):\n" + "\n".join(found[:50])
    )


def test_the_comparison_sees_a_changed_bound_and_ignores_a_changed_description(gen_crds: ModuleType) -> None:
    base = {"type": "object", "properties": {"n": {"type": "integer", "description": "a"}}}
    bounded = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "description": "b"}}}
    assert structural_differences(gen_crds, base, base | {"description": "other"}) == []
    assert structural_differences(gen_crds, bounded, base) == [".properties.n.minimum: only ours has it (0)"]
    # A property called `description` is a field, not a description.
    named = {"type": "object", "properties": {"description": {"type": "string"}}}
    assert structural_differences(gen_crds, named, {"type": "object", "properties": {}}) == [
        '.properties.description: only ours has it ({"type": "string"})'
    ]
    assert structural_differences(gen_crds, {"metadata": {"annotations": {"a": "1"}}}, {"metadata": {}}) == []


@pytest.mark.parametrize("name", crd_files(OURS))
def test_every_node_upstream_describes_is_described(upstream_dir: Path, name: str) -> None:
    ours = dict(schema_nodes(schema_of(load_crd(OURS / name))))
    theirs = dict(schema_nodes(schema_of(load_crd(upstream_dir / name))))
    missing = {
        path
        for path, node in theirs.items()
        if "description" in node and "description" not in ours.get(path, {})
    }
    assert missing - UNDESCRIBED_AS_KUBE_OPENAPI == set()


def test_every_field_of_our_own_types_has_a_docstring(gen_crds: ModuleType) -> None:
    undocumented = []
    for name in v1alpha1.__all__:
        cls = getattr(v1alpha1, name)
        if not typing.is_typeddict(cls):
            continue
        for field in gen_crds.typed_dict_fields(cls):
            if field.doc is None and field.name not in ("apiVersion", "kind", "metadata"):
                undocumented.append(f"{name}.{field.name}")
    assert undocumented == []


class _Unreachable:
    """hack/thirdparty.py as it behaves without Go or the module."""

    class ThirdPartyError(Exception):
        pass

    def upstream_trainer_crd_dir(self) -> Path:
        raise self.ThirdPartyError("Go is not installed")


class _Recorder:
    def missing(self, reason: str) -> NoReturn:
        raise LookupError(reason)


def test_without_upstreams_crds_the_comparison_is_a_missing_prerequisite() -> None:
    # test/conftest.py's `prerequisite` skips it, or fails it under CI (test/unit/suite tests that part).
    with pytest.raises(LookupError, match="upstream kubeflow/trainer CRDs, to compare ours with: Go is not"):
        locate_upstream(typing.cast(ModuleType, _Unreachable()), _Recorder())


def test_an_unpinned_upstream_version_is_a_clear_error() -> None:
    module = thirdparty()
    with pytest.raises(module.ThirdPartyError, match="TRAINER_VERSION is not set"):
        module.upstream_trainer_crd_dir({})
