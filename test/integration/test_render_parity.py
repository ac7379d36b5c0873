"""Render parity with upstream v2.3.0: the objects `runtime.render` builds are the bodies upstream applies.

Every golden case (each runtime of `config/runtimes/` and `test/golden/runtimes/` crossed with the TrainJobs
of `test/golden/trainjobs/`, exactly as `test/unit/render/test_render_golden.py` builds them) is given to
upstream's own code, run offline by `hack/tools/upstream-render` (`support.upstream_render`), and to ours.

Both get the same stored objects: what the API server would store for each input on create. That is the
object with the CRD's schema defaults (`runtime.schema.SchemaChecker`, whose verdicts and stored values
`test_render_vs_apiserver.py` holds to kube-apiserver), a namespace for namespaced kinds (`default` when the
file has none), and the metadata the API server adds (`uid`, `resourceVersion`, `generation`,
`creationTimestamp`; not `managedFields`), which upstream copies into the runtime snapshot. An input the
schema refuses never reaches upstream's code: upstream's verdict is then "refused", and ours must refuse
too. Not modelled: the TrainJob mutating webhook's `runtimePatches[].time` (nothing built reads it).

Upstream keeps its plugins in a Go map, so its output can depend on their order, which is random: the order
of its objects, and of some env vars (PlainML and XGBoost, or PlainML and Flux, both add to the trainer
container's env). So upstream renders each case 64 times (`render-variants`), and ours must be one of its
outcomes. Verdicts: both refusing is parity; one refusing is a failure that shows the refusal. When both
build, the objects are matched by apiVersion, kind, namespace and name (never by position), and each of ours,
as JSON, must equal upstream's body exactly: `{}` is not absent, `"2"` is not `2`, `""` is not absent. Key
order is irrelevant. A failure lists every path that differs from upstream's closest outcome, with both
values, and a unified diff for the runtime snapshot's `data.runtime` text.

Normalised on both sides, since upstream's output is random there: the data of the MPI SSH Secret (upstream
generates a fresh key pair; the key names are still compared). Excused: only the differences in `EXCUSED`,
each a decision documented in docs/compatibility.md, quoted with its reason.
"""

from __future__ import annotations

import base64
import copy
import difflib
import json
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from runtime.render import PLACEHOLDER_UID, Document, RenderError, RenderOptions, render
from support import golden, upstream_render

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "test" / "golden"
RUNTIME_DIRS = (ROOT / "config" / "runtimes", GOLDEN / "runtimes")
EXISTING_DIR = GOLDEN / "existing"

"""Its `CASES` (and `SCHEMAS`, the CRDs of config/crd parsed once) are the cases compared here."""
SCHEMAS = golden.SCHEMAS
CASES = golden.CASES

STORED_AT = "2026-01-01T00:00:00Z"
"""The `creationTimestamp` every stored input gets (any fixed time: nothing built depends on it)."""
NAMESPACED = {"TrainJob", "TrainingRuntime"}
UPSTREAM_PANICS = {
    "flux-distributed/minimal": "a Flux TrainJob without spec.trainer: upstream's Flux plugin dereferences "
    "the nil trainer (brokerSettingsFromEnvironment), so its reconcile panics and nothing is applied; ours "
    'builds (docs/compatibility.md, "Objects as written")',
}
"""Cases where upstream's code panics (controller-runtime recovers; nothing is applied) and ours builds."""
RUNTIME_KINDS = ("TrainingRuntime", "ClusterTrainingRuntime")
TRAINJOB_NAME_LABEL = "trainer.kubeflow.org/trainjob-name"


@pytest.fixture(scope="module")
def upstream(prerequisite: Any) -> Any:
    try:
        return upstream_render.UpstreamRender(upstream_render.binary_path())
    except upstream_render.UpstreamRenderMissing as exc:
        prerequisite.missing(str(exc))


# --- the stored objects ---------------------------------------------------------------------------------


def _documents(path: Path, kinds: tuple[str, ...] | None = None) -> Iterator[dict[str, Any]]:
    """The objects of the YAML files under `path` (of `kinds` only, when given), as `trainer-render` reads
    them: a kustomization.yaml is not an object (nor are the labels it would add)."""
    files = sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml", ".json"))
    for file in files:
        for obj in yaml.safe_load_all(file.read_text()):
            wanted = kinds is None or (isinstance(obj, dict) and obj.get("kind") in kinds)
            if isinstance(obj, dict) and obj.get("kind") != "Kustomization" and wanted:
                yield obj


def _stamp(obj: dict[str, Any], *, uid: str | None = None) -> dict[str, Any]:
    """`obj` with the metadata the API server adds on create."""
    metadata = obj["metadata"]
    if obj["kind"] in NAMESPACED:
        metadata.setdefault("namespace", "default")
    else:  # the API server drops the namespace of a cluster-scoped object on create
        metadata.pop("namespace", None)
    key = f"{obj['kind']}/{metadata.get('namespace', '')}/{metadata['name']}"
    metadata.setdefault("uid", uid or str(uuid.uuid5(uuid.NAMESPACE_URL, key)))
    metadata.setdefault("resourceVersion", "1")
    metadata.setdefault("creationTimestamp", STORED_AT)
    if obj["kind"] in NAMESPACED or obj["kind"] == "ClusterTrainingRuntime":
        metadata.setdefault("generation", 1)
    return obj


@dataclass(frozen=True, slots=True)
class Stored:
    """The inputs of one case as the API server stores them, or why it refuses them."""

    trainjob: dict[str, Any] | None
    """None when the API server refuses the TrainJob."""
    written: dict[str, Any]
    """The TrainJob as written (the golden file, pointed at the case's runtime)."""
    runtimes: list[dict[str, Any]]
    existing: list[dict[str, Any]]
    schema_errors: list[str]
    """Why the API server refuses the TrainJob."""


def _stored_runtime(obj: dict[str, Any]) -> dict[str, Any]:
    """A runtime file as stored: every runtime file here is one the API server accepts."""
    checked, errors = SCHEMAS.check(obj)
    assert not errors, [str(e) for e in errors]
    return _stamp(checked)


def _stored(case: Any) -> Stored:
    trainjob = yaml.safe_load((GOLDEN / "trainjobs" / f"{case.trainjob}.yaml").read_text())
    trainjob["spec"]["runtimeRef"] = {"name": case.runtime, "kind": case.kind}
    checked, errors = SCHEMAS.check(copy.deepcopy(trainjob))
    return Stored(
        trainjob=None if errors else _stamp(checked, uid=PLACEHOLDER_UID),
        written=trainjob,
        runtimes=[_stored_runtime(o) for d in RUNTIME_DIRS for o in _documents(d, RUNTIME_KINDS)],
        existing=[_stamp(obj) for obj in _documents(EXISTING_DIR)],
        schema_errors=[str(e) for e in errors],
    )


def _ours(stored: Stored, trainjob: dict[str, Any]) -> tuple[list[dict[str, Any]] | None, str | None]:
    """Our objects for `trainjob` as JSON values (what our client sends), or our refusal."""
    try:
        result = render(
            Document(obj=trainjob, source="trainjob"),
            [Document(obj=r, source=f"runtime#{i}") for i, r in enumerate(stored.runtimes)],
            [Document(obj=e, source=f"existing#{i}") for i, e in enumerate(stored.existing)],
            RenderOptions(schemas=SCHEMAS),
        )
    except RenderError as exc:
        return None, "\n".join([str(exc), *getattr(exc, "problems", ())])
    return [json.loads(json.dumps(obj)) for obj in result.objects], None


# --- comparing ------------------------------------------------------------------------------------------

ABSENT: Any = type("Absent", (), {"__repr__": lambda self: "(absent)"})()


@dataclass(frozen=True, slots=True)
class Difference:
    kind: str
    path: str
    ours: Any
    upstream: Any
    name: str = ""
    """`metadata.name` of the object (set by `compare`)."""

    def __str__(self) -> str:
        return f"{self.kind} {self.path}: ours {_show(self.ours)}, upstream {_show(self.upstream)}"


def _show(value: Any, limit: int = 300) -> str:
    text = repr(value) if value is ABSENT else json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if _PLAIN_KEY.match(key) else f"{path}[{key}]"


def _same(a: Any, b: Any) -> bool:
    """JSON equality that tells `1` from `1.0`, `true` from `1` and `"1"` from `1`."""
    return type(a) is type(b) and a == b


def _differences(kind: str, path: str, ours: Any, upstream: Any) -> Iterator[Difference]:
    if isinstance(ours, dict) and isinstance(upstream, dict):
        for key in sorted(set(ours) | set(upstream)):
            yield from _differences(kind, _child(path, key), ours.get(key, ABSENT), upstream.get(key, ABSENT))
    elif isinstance(ours, list) and isinstance(upstream, list):
        for index in range(max(len(ours), len(upstream))):
            a = ours[index] if index < len(ours) else ABSENT
            b = upstream[index] if index < len(upstream) else ABSENT
            name = next((x["name"] for x in (a, b) if isinstance(x, dict) and "name" in x), None)
            yield from _differences(kind, f"{path}[{index}{'=' + str(name) if name else ''}]", a, b)
    elif not _same(ours, upstream):
        yield Difference(kind, path.lstrip("."), ours, upstream)


def _key(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata") or {}
    where = f"{metadata['namespace']}/" if metadata.get("namespace") else ""
    return f"{obj.get('apiVersion')} {obj.get('kind')} {where}{metadata.get('name')}"


def _normalise(obj: dict[str, Any]) -> dict[str, Any]:
    """The MPI SSH Secret's data: the key names, each with a placeholder value (upstream's key is random)."""
    if obj.get("kind") == "Secret" and obj.get("type") == "kubernetes.io/ssh-auth":
        obj = {**obj, "data": dict.fromkeys(obj.get("data") or {}, "<ssh key>")}
    return obj


@dataclass(frozen=True, slots=True)
class Excuse:
    """A documented difference: where docs/compatibility.md records it, why, and what it covers."""

    where: str
    why: str
    covers: Callable[[Difference], bool]


def _label_only(d: Difference) -> bool:
    ours, path = d.ours, d.path
    if path == "metadata.labels" and d.upstream is ABSENT and isinstance(ours, dict):
        return set(ours) == {TRAINJOB_NAME_LABEL}
    return path == f"metadata.labels[{TRAINJOB_NAME_LABEL}]" and d.upstream is ABSENT


_CURVE_KEY_LINE = re.compile(r'^(\s*(?:public|secret)-key = )".*"$')


def _curve_structure(value: Any) -> list[str] | None:
    """The lines of a base64 CURVE certificate that are not comments (the sections, the name and the two key
    names), each key's value masked: upstream's derives from the UID, ours is random (a placeholder here)."""
    try:
        text = base64.b64decode(value).decode()
    except (TypeError, ValueError):
        return None
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [_CURVE_KEY_LINE.sub(r'\1"<key>"', line) for line in lines]


def _flux_text(d: Difference) -> bool:
    if d.kind == "ConfigMap" and re.fullmatch(r"data\[(entrypoint|init)\.sh\]", d.path):
        return isinstance(d.ours, str) and isinstance(d.upstream, str)
    return False


def _flux_curve_key(d: Difference) -> bool:
    if d.kind != "Secret" or not d.name.endswith("-flux-curve"):
        return False
    if d.path == "data[curve.cert]":
        structure = _curve_structure(d.ours)
        return structure is not None and structure == _curve_structure(d.upstream)
    return d.path == "immutable" and d.ours is True and d.upstream is ABSENT


EXCUSED = (
    Excuse(
        where='docs/compatibility.md, "Objects as written": the Flux scripts',
        why="our own text (upstream's scripts are not copied); what they do is the same",
        covers=_flux_text,
    ),
    Excuse(
        where='docs/compatibility.md, "Objects as written": Flux\'s CURVE certificate',
        why="a random key stored once in an immutable Secret (upstream derives it from the TrainJob's UID, "
        "which anyone who can read the TrainJob knows), and our own comment header; the sections, the name "
        "and the key names are upstream's",
        covers=_flux_curve_key,
    ),
    Excuse(
        where='docs/compatibility.md, "The API and its CRDs against upstream v2.3.0": ConfigMaps and Secrets '
        "the controller creates",
        why="the label trainer.kubeflow.org/trainjob-name on our ConfigMaps and Secrets: the controller's "
        "ConfigMap and Secret caches select on it",
        covers=lambda d: d.kind in ("ConfigMap", "Secret") and _label_only(d),
    ),
    Excuse(
        where='docs/compatibility.md, "Objects as written": a quantity Go reads but would write as a '
        "different value (DecimalSI of 1e21 or more)",
        why="Go writes the mantissa alone, changing the request a thousand-trillion-fold; ours keeps the "
        "value",
        covers=lambda d: (
            isinstance(d.ours, str)
            and isinstance(d.upstream, str)
            and re.fullmatch(r"\d+e(\d+)", d.ours) is not None
            and int(d.ours.split("e")[1]) >= 21
        ),
    ),
)


def _excuse(d: Difference) -> Excuse | None:
    return next((e for e in EXCUSED if e.covers(d)), None)


def _snapshot_diff(d: Difference) -> str:
    if not (d.path == "data.runtime" and isinstance(d.ours, str) and isinstance(d.upstream, str)):
        return ""
    lines = difflib.unified_diff(
        d.upstream.splitlines(keepends=True), d.ours.splitlines(keepends=True), "upstream", "ours"
    )
    return "".join(lines)


def compare(ours: list[dict[str, Any]], upstream: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """Every difference, one entry each (the snapshot's with a text diff below it), and the excused ones."""
    problems: list[str] = []
    excused: list[str] = []
    ours_by_key = {_key(o): _normalise(o) for o in ours}
    upstream_by_key = {_key(o): _normalise(o) for o in upstream}
    for key in sorted(set(ours_by_key) - set(upstream_by_key)):
        problems.append(f"{key}: built by ours only")
    for key in sorted(set(upstream_by_key) - set(ours_by_key)):
        problems.append(f"{key}: built by upstream only")
    for key in sorted(set(ours_by_key) & set(upstream_by_key)):
        kind = ours_by_key[key]["kind"]
        name = str(ours_by_key[key]["metadata"].get("name", ""))
        for found in _differences(kind, "", ours_by_key[key], upstream_by_key[key]):
            d = replace(found, name=name)
            excuse = _excuse(d)
            if excuse is not None:
                excused.append(f"{key} {d.path}: {excuse.why}")
                continue
            line = f"{key}: {d.path}: ours {_show(d.ours)}, upstream {_show(d.upstream)}"
            diff = _snapshot_diff(d)
            problems.append(f"{line}\n{diff.rstrip()}" if diff else line)
    return problems, excused


# --- the tests ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_render_builds_what_upstream_builds(case: Any, upstream: Any) -> None:
    stored = _stored(case)
    if stored.trainjob is None:
        # The API server refuses the TrainJob: upstream's code never sees it, and ours must refuse it too.
        ours, refusal = _ours(stored, stored.written)
        assert ours is None, f"the API server refuses {stored.schema_errors}; ours builds {len(ours)} objects"
        return
    # Upstream's outcome can depend on its plugin order (a Go map's): ours must be one of its outcomes.
    variants = upstream.render_variants([stored.trainjob, *stored.runtimes, *stored.existing])
    ours, refusal = _ours(stored, stored.trainjob)
    built = [v.objects for v in variants if v.objects is not None]
    refusals = [v.refusal for v in variants if v.refusal is not None]
    if ours is None:
        if not refusals:
            pytest.fail(f"ours refuses, upstream builds:\n{refusal}", pytrace=False)
        return
    if not built:
        if case.id in UPSTREAM_PANICS and all("panic:" in r for r in refusals):
            return  # an upstream defect we do not copy (UPSTREAM_PANICS)
        pytest.fail("upstream refuses, ours builds:\n" + "\n".join(refusals), pytrace=False)
    comparisons = [compare(ours, objects)[0] for objects in built]
    if all(comparisons):
        closest = min(comparisons, key=len)
        pytest.fail(
            f"{len(closest)} differences from upstream (of its {len(built)} outcomes, the closest):\n"
            + "\n".join(closest),
            pytrace=False,
        )


def test_runtime_snapshot_text_is_upstreams(upstream: Any) -> None:
    """`data.runtime` of each runtime's snapshot, byte for byte (the take-over reads upstream's)."""
    from runtime.core.snapshot import build_snapshot

    trainjob = _stamp(
        {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "demo"}},
        uid=PLACEHOLDER_UID,
    )
    problems = []
    for directory in RUNTIME_DIRS:
        for obj in _documents(directory, RUNTIME_KINDS):
            runtime = _stored_runtime(obj)
            theirs = upstream.snapshot(runtime)
            ours = build_snapshot(trainjob, runtime, runtime["kind"])["data"]["runtime"]
            if ours != theirs:
                diff = difflib.unified_diff(
                    theirs.splitlines(keepends=True), ours.splitlines(keepends=True), "upstream", "ours"
                )
                problems.append(f"{runtime['kind']} {runtime['metadata']['name']}:\n{''.join(diff)}")
    assert not problems, "snapshot text differs from upstream's:\n" + "\n".join(problems)


def test_the_harness_snapshot_is_what_upstreams_render_writes(upstream: Any) -> None:
    """`upstream-render snapshot` models the ConfigMap upstream's own render path writes (self-check)."""
    stored = _stored(golden.Case("torch-distributed", "minimal"))
    assert stored.trainjob is not None
    rendered = upstream.render([stored.trainjob, *stored.runtimes, *stored.existing])
    assert rendered.objects is not None, rendered.refusal
    [configmap] = [o for o in rendered.objects if o["metadata"]["name"] == "demo-runtime-snapshot"]
    [runtime] = [r for r in stored.runtimes if r["metadata"]["name"] == "torch-distributed"]
    assert configmap["data"]["runtime"] == upstream.snapshot(runtime)
    assert rendered.objects[0] is configmap  # applied first, inside NewObjects


def test_the_harness_json_to_yaml_is_go_yaml(upstream: Any) -> None:
    # sigs.k8s.io/yaml writes with its go-yaml v2 fork: keys sorted, `'` quotes, `{}` kept.
    assert upstream.json_to_yaml('{"b": 1, "a": "x: y", "c": {}}') == "a: 'x: y'\nb: 1\nc: {}\n"


def test_the_comparison_reports_every_kind_of_difference() -> None:
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}
    ours = [{**configmap, "data": {"x": "2"}, "e": {}}]
    upstream = [
        {**configmap, "data": {"x": 2}, "n": 1},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "b"}},
    ]
    problems, excused = compare(ours, upstream)
    assert problems == [
        "v1 Secret b: built by upstream only",
        'v1 ConfigMap a: data.x: ours "2", upstream 2',
        "v1 ConfigMap a: e: ours {}, upstream (absent)",
        "v1 ConfigMap a: n: ours (absent), upstream 1",
    ]
    assert excused == []


def _curve_secret(name: str, certificate: str, **extra: Any) -> dict[str, Any]:
    data = {"curve.cert": base64.b64encode(certificate.encode()).decode()}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": data, **extra}


def test_the_flux_curve_excuse_covers_the_key_values_and_immutability_only() -> None:
    def certificate(name: str, public: str, secret: str, header: str = "# ours") -> str:
        return f'{header}\nmetadata\n    name = "{name}"\ncurve\n    public-key = "{public}"\n' + (
            f'    secret-key = "{secret}"\n'
        )

    upstream = [_curve_secret("demo-flux-curve", certificate("demo", "u" * 40, "v" * 40, "# theirs"))]
    ours = [_curve_secret("demo-flux-curve", certificate("demo", "<public>", "<secret>"), immutable=True)]
    problems, excused = compare(ours, upstream)
    assert problems == []
    assert len(excused) == 2
    # The certificate's name is compared; so is any other Secret's immutability or data.
    ours = [_curve_secret("demo-flux-curve", certificate("other", "<public>", "<secret>"), immutable=True)]
    assert len(compare(ours, upstream)[0]) == 1
    other = [_curve_secret("demo-other", certificate("demo", "u" * 40, "v" * 40))]
    assert len(compare([{**other[0], "immutable": True}], other)[0]) == 1
