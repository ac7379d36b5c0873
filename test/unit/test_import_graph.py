"""The import graph: no cycles inside ``controller/`` or ``runtime/``, and import-linter contracts that cover
every module of ``controller/``'s generic machinery, so a new module cannot be forgotten.

A cycle is a strongly connected component of more than one module in the graph of direct imports (as
import-linter's own library, grimp, builds it: ``TYPE_CHECKING`` imports count, since they are seams too).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("controller", "runtime")
# Kubeflow's own wiring: it joins controller/ and runtime/, so the generic-machinery contracts leave it out.
TRAINER = "controller.trainer"


def strongly_connected_components(edges: Mapping[str, Iterable[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative (deep import chains must not hit the recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[set[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(edges[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            if successors:
                nxt = successors.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(edges.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                components.append(component)
    return components


def cycles(package: str) -> list[list[str]]:
    graph = grimp.build_graph(package)
    modules = {m for m in graph.modules if m == package or m.startswith(f"{package}.")}
    edges = {m: {i for i in graph.find_modules_directly_imported_by(m) if i in modules} for m in modules}
    return sorted(sorted(c) for c in strongly_connected_components(edges) if len(c) > 1)


def test_tarjan_finds_a_cycle_and_ignores_a_chain() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert sorted(sorted(c) for c in strongly_connected_components(edges) if len(c) > 1) == [["a", "b", "c"]]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycles_inside_the_package(package: str) -> None:
    assert cycles(package) == [], (
        f"import cycles in {package}/: each line is one strongly connected component"
    )


def _contract(name_starts_with: str) -> dict[str, Any]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for contract in config["tool"]["importlinter"]["contracts"]:
        if contract["name"].startswith(name_starts_with):
            return dict(contract)
    raise AssertionError(f"no import-linter contract named {name_starts_with!r}...")


def _uncovered(listed: Iterable[str], exempt: Iterable[str]) -> list[str]:
    prefixes = tuple(listed) + tuple(exempt)
    graph = grimp.build_graph("controller")
    return sorted(
        m
        for m in graph.modules
        if m != "controller" and not any(m == p or m.startswith(f"{p}.") for p in prefixes)
    )


def _layered() -> list[str]:
    layers = _contract("controller/ is layered")["layers"]
    return [name.strip() for layer in layers for name in layer.replace(":", "|").split("|")]


def test_every_package_of_controller_is_in_the_layers_contract() -> None:
    assert _uncovered(_layered(), []) == [], "add the new package to the layers contract in pyproject.toml"


def test_every_generic_module_is_in_the_never_imports_runtime_contract() -> None:
    listed = _contract("generic machinery in controller/ never imports runtime/")["source_modules"]
    assert _uncovered(listed, [TRAINER]) == [], "add the new module to the contract in pyproject.toml"


def test_every_generic_module_but_one_is_in_the_kubernetes_contract() -> None:
    contract = _contract("only controller/client/kubernetes_package.py imports the kubernetes package")
    assert _uncovered(contract["source_modules"], [TRAINER]) == [], (
        "add the new module to the contract in pyproject.toml"
    )
    assert contract["ignore_imports"] == ["controller.client.kubernetes_package -> kubernetes"]


def test_the_contracts_name_only_modules_that_exist() -> None:
    graph = grimp.build_graph("controller")
    named = {
        "generic machinery": _contract("generic machinery")["source_modules"],
        "only controller/client/kubernetes_package.py": _contract(
            "only controller/client/kubernetes_package.py"
        )["source_modules"],
        "layers": _layered(),
    }
    for name, modules in named.items():
        missing = [m for m in modules if m not in graph.modules]
        assert missing == [], f"{name}: stale entries {missing}"
