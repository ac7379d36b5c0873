"""`SchemaChecker` tells what kube-apiserver would refuse (names, CEL rules, size); the CRDs ship with it.

The CEL verdicts here are checked against a real kube-apiserver in
test/integration/test_render_vs_apiserver.py; these cases pin the messages and the bounds.
"""

from __future__ import annotations

import copy
import io
from pathlib import Path
from typing import Any

import cel
import pytest
import yaml

from runtime.celvalidation import OUT_OF_BUDGET, RuleValidator
from runtime.render import run
from runtime.schema import CRD_DIR, ETCD_REQUEST_LIMIT, CRDError, SchemaChecker, oversize_warning

ROOT = Path(__file__).resolve().parents[3]
RUNTIMES = ROOT / "config" / "runtimes"
SCHEMAS = SchemaChecker.from_crd_dir(CRD_DIR)
TORCH = yaml.safe_load((RUNTIMES / "torch-distributed.yaml").read_text())


def _trainjob(name: str = "demo", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, **spec},
    }


def _runtime(**changes: Any) -> dict[str, Any]:
    runtime = copy.deepcopy(TORCH)
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = runtime
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
        node[leaf] = value
    return runtime


def _errors(obj: dict[str, Any]) -> list[str]:
    return [str(e) for e in SCHEMAS.check(obj)[1]]


_SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_RFC1035 = "<nil>: Invalid value: metadata.name must match RFC 1035 DNS label format"
_MANAGED_BY = "ManagedBy must be trainer.kubeflow.org/trainjob-controller or kueue.x-k8s.io/multikueue if set"
_NODE = (
    "containerNames must not include the main node container because PET_* envs are always injected into it"
)
_TARGETS = "spec__mlPolicy__torch__envInjection__targets"

CASES = [
    pytest.param(_trainjob(), [], id="a valid TrainJob passes every rule"),
    pytest.param(
        _trainjob("Demo"),
        [f'metadata.name: Invalid value: "Demo": {_SUBDOMAIN}', _RFC1035],
        id="an upper-case TrainJob name fails the name check and the CRD's own rule",
    ),
    pytest.param(
        _trainjob("a.b"), [_RFC1035], id="a dotted TrainJob name is a subdomain but not an RFC 1035 label"
    ),
    pytest.param(
        _trainjob("1abc"), [_RFC1035], id="a TrainJob name must start with a letter (the CRD's rule)"
    ),
    pytest.param(
        _trainjob("a" * 64),
        ["<nil>: Invalid value: metadata.name must be no more than 63 characters"],
        id="a TrainJob name of 64 characters is too long for the CRD's rule",
    ),
    pytest.param(
        {**_trainjob(), "metadata": {"name": "demo", "namespace": "team.a"}},
        ['metadata.namespace: Invalid value: "team.a": must not contain dots'],
        id="a namespace must be a DNS-1123 label",
    ),
    pytest.param(
        _trainjob(managedBy="example.com/mine"),
        [f'spec.managedBy: Invalid value: "example.com/mine": {_MANAGED_BY}'],
        id="managedBy outside the two controllers is refused",
    ),
    pytest.param(
        _trainjob(managedBy="kueue.x-k8s.io/multikueue"), [], id="managedBy may name MultiKueue"
    ),
    pytest.param(
        _trainjob(initializer={"dataset": {"storageUri": "not a uri"}}),
        [
            'spec.initializer.dataset.storageUri: Invalid value: "not a uri": storageUri may be empty, or it '
            "must be a valid URI (scheme://...)"
        ],
        id="a storageUri must match the rule's regular expression",
    ),
    pytest.param(
        _trainjob(initializer={"dataset": {"storageUri": "hf://tatsu-lab/alpaca"}}),
        [],
        id="a URI passes the storageUri rule",
    ),
    pytest.param(
        {**_trainjob(), "status": {"trainerStatus": {"progressPercentage": 3}}},
        ["status.trainerStatus: Invalid value: lastUpdatedTime is required when trainerStatus is present"],
        id="has() on a missing field is false",
    ),
    pytest.param(
        _runtime(spec__mlPolicy__mpi={}),
        ["spec.mlPolicy: Invalid value: Only one of the policy can be configured"],
        id="filter(x, x).size() counts the ML policies set",
    ),
    pytest.param(
        _runtime(**{_TARGETS: [{"jobName": "node", "containerNames": ["init", "node"]}]}),
        [f"spec.mlPolicy.torch.envInjection.targets[0].containerNames: Invalid value: {_NODE}"],
        id="exists() finds the node container in a list",
    ),
    pytest.param(
        _runtime(spec__mlPolicy={"numNodes": 1, "flux": {"numProcPerNode": 0}}),
        ["spec.mlPolicy.flux.numProcPerNode: Invalid value: 0: NumProcPerNode in fluxPolicy must be >= 1"],
        id="a rule on an integer compares it",
    ),
    pytest.param(
        _runtime(
            spec__template__spec__startupPolicy={"startupPolicyOrder": "InOrder"},
            spec__template__spec__replicatedJobs__0__dependsOn=[{"name": "x", "status": "Ready"}],
        ),
        ["spec.template.spec: Invalid value: StartupPolicy and DependsOn APIs are mutually exclusive"],
        id="the embedded JobSet spec's rules are evaluated",
    ),
    pytest.param(
        _runtime(
            spec__template__spec__volumeClaimPolicies=[
                {"templates": [{"metadata": {"name": "data", "namespace": "other"}}]}
            ]
        ),
        [
            "spec.template.spec.volumeClaimPolicies[0]: Invalid value: namespace cannot be set for "
            "VolumeClaimPolicies templates"
        ],
        id="all() over a list of the embedded JobSet spec",
    ),
    pytest.param(
        _runtime(metadata={"name": "torch.v2"}), [], id="a runtime name may be any DNS-1123 subdomain"
    ),
    pytest.param(
        _runtime(metadata={"name": "Torch"}),
        [f'metadata.name: Invalid value: "Torch": {_SUBDOMAIN}'],
        id="a runtime name must be a DNS-1123 subdomain",
    ),
    pytest.param(
        _runtime(metadata={"name": "torch", "namespace": "Not Valid"}),
        [],
        id="a cluster-scoped object's namespace is not checked (the apiserver drops it)",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("obj", "errors"), CASES)
def test_the_apiservers_checks_of_names_and_rules(obj: dict[str, Any], errors: list[str]) -> None:
    assert _errors(obj) == errors


def test_a_name_over_253_characters_is_refused_for_every_custom_resource() -> None:
    errors = SCHEMAS.check(_trainjob("a" * 254))[1]
    assert [(e.path, e.message) for e in errors] == [
        ("metadata.name", "must be no more than 253 characters"),
        ("<nil>", "metadata.name must be no more than 63 characters"),
    ]


def test_transition_rules_do_not_run_on_create() -> None:
    # Every field of a TrainJob marked immutable has `self == oldSelf`; without an old object it would fail.
    rules = RuleValidator({"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]})
    assert not rules.has_rules
    assert _errors(_trainjob(managedBy="kueue.x-k8s.io/multikueue", suspend=True)) == []


def test_rules_are_not_run_when_the_schema_check_fails() -> None:
    # The apiserver skips CEL after a type error; the CEL verdict on the name would be noise then.
    assert _errors(_trainjob("Demo", suspend="yes")) == [
        f'metadata.name: Invalid value: "Demo": {_SUBDOMAIN}',
        'spec.suspend: Invalid value: "yes": must be of type boolean, not string',
    ]


def _schema(rule: dict[str, Any], **node: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"x": {**node, "x-kubernetes-validations": [rule]}}}


def test_a_rule_says_its_reason_and_field_path() -> None:
    rules = RuleValidator(
        _schema(
            {"rule": "self.a < 3", "message": "too many", "reason": "FieldValueForbidden", "fieldPath": ".a"},
            type="object",
        )
    )
    assert [str(e) for e in rules.validate({"x": {"a": 5}})] == ["x.a: Forbidden: too many"]


def test_a_rule_without_a_message_quotes_itself() -> None:
    rules = RuleValidator(_schema({"rule": "self != 'b'"}, type="string"))
    assert [str(e) for e in rules.validate({"x": "b"})] == [
        "x: Invalid value: \"b\": failed rule: self != 'b'"
    ]


def test_a_rule_that_cannot_be_evaluated_is_an_error() -> None:
    rules = RuleValidator(_schema({"rule": "self.a.b == 1", "message": "m"}, type="object"))
    assert [str(e) for e in rules.validate({"x": {"a": {}}})] == [
        'x: Invalid value: "object": no such key: b evaluating rule: m'
    ]


def test_rules_only_kubernetes_defines_and_rules_that_do_not_compile_are_left_to_the_apiserver() -> None:
    for rule in ("quantity(self).isGreaterThan(quantity('1'))", "self.lowerAscii() == 'a'", "self.a("):
        assert RuleValidator(_schema({"rule": rule}, type="string")).validate({"x": "A"}) == []


def test_each_rule_is_compiled_once_per_crd(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled: list[str] = []
    compile_rule = cel.compile

    def counting(source: str) -> Any:
        compiled.append(source)
        return compile_rule(source)

    monkeypatch.setattr(cel, "compile", counting)  # celvalidation imports `cel` on its first compile
    checker = SchemaChecker.from_crd_dir(CRD_DIR)
    checker.check(_trainjob())
    first = len(compiled)
    assert first > 0
    for name in ("a", "b", "Bad"):
        checker.check(_trainjob(name))
    assert len(compiled) == first


def test_evaluation_stops_when_the_cost_budget_runs_out() -> None:
    rules = RuleValidator(
        {
            "type": "object",
            "properties": {
                "items": {
                    "type": "array",
                    "items": {"type": "string"},
                    "x-kubernetes-validations": [{"rule": "!self.exists(c, c == 'node')", "message": "m"}],
                },
                "later": {"type": "string", "x-kubernetes-validations": [{"rule": "self == 'ok'"}]},
            },
        }
    )
    huge = {"items": ["x"] * 2_000_000, "later": "wrong"}
    assert [str(e) for e in rules.validate(huge)] == [f'items: Invalid value: "array": {OUT_OF_BUDGET}']
    # Within the budget, the same rules run, and the later field is checked too.
    assert [str(e) for e in rules.validate({"items": ["node"], "later": "wrong"})] == [
        "items: Invalid value: m",
        "later: Invalid value: \"wrong\": failed rule: self == 'ok'",
    ]
    assert [str(e) for e in rules.validate({"items": ["x"] * 1000}, budget=1000)] == [
        f'items: Invalid value: "array": {OUT_OF_BUDGET}'
    ]


def test_a_rule_that_reads_fields_of_self_is_handed_only_those() -> None:
    # The TrainJob's name rules sit on the resource root; the rest of a large object costs them nothing.
    rules = RuleValidator(
        {"type": "object", "x-kubernetes-validations": [{"rule": "self.metadata.name.matches('^[a-z]+$')"}]}
    )
    large = {"metadata": {"name": "demo"}, "spec": {"args": ["x"] * 300_000}}
    assert rules.validate(large) == []
    assert rules.validate({**large, "metadata": {"name": "Demo"}}) != []
    whole = RuleValidator({"type": "object", "x-kubernetes-validations": [{"rule": "size(self) < 5"}]})
    assert [e.message for e in whole.validate(large)] == [OUT_OF_BUDGET]


def test_long_strings_cost_more() -> None:
    rules = RuleValidator(_schema({"rule": "self.matches('^a+$')"}, type="string"))
    assert rules.validate({"x": "a" * 64 * 100}, budget=110) == []
    assert [e.message for e in rules.validate({"x": "a" * 64 * 200}, budget=110)] == [OUT_OF_BUDGET]


# Size ----------------------------------------------------------------------------------------------------


def test_an_object_over_etcds_request_limit_gets_a_warning() -> None:
    small = _trainjob()
    big = {**small, "metadata": {"name": "demo", "annotations": {"note": "x" * ETCD_REQUEST_LIMIT}}}
    assert oversize_warning(small, "TrainJob demo") is None
    warning = oversize_warning(big, "TrainJob demo")
    assert warning is not None
    assert (
        warning.startswith("TrainJob demo is 1573032 bytes as JSON")
        and "over etcd's default request limit" in warning
    )


def test_render_warns_about_an_oversized_trainjob_and_still_renders_it(tmp_path: Path) -> None:
    trainjob = _trainjob()
    trainjob["metadata"]["annotations"] = {"note": "x" * ETCD_REQUEST_LIMIT}
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump(trainjob))
    out, err = io.StringIO(), io.StringIO()
    code = run([str(path), "-r", str(RUNTIMES)], stdout=out, stderr=err, schemas=SCHEMAS)
    assert code == 0, err.getvalue()
    assert "over etcd's default request limit of 1572864 bytes (1.5 MiB)" in err.getvalue()
    assert "kind: JobSet" in out.getvalue()


# Where the CRDs are ----------------------------------------------------------------------------------------


def test_the_shipped_crds_are_the_ones_kustomize_installs() -> None:
    # One copy: runtime/crds is a link to config/crd, and a wheel holds the files it points to.
    assert (ROOT / "runtime" / "crds").is_symlink()
    assert CRD_DIR.resolve() == (ROOT / "config" / "crd").resolve()
    assert sorted(p.name for p in CRD_DIR.glob("*.yaml")) == sorted(
        p.name for p in (ROOT / "config" / "crd").glob("*.yaml")
    )


def test_a_directory_without_crds_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text("kind: ConfigMap\n")
    with pytest.raises(CRDError, match="no CustomResourceDefinitions found"):
        SchemaChecker.from_crd_dir(tmp_path)
    (tmp_path / "x.yaml").write_text("kind: [\n")
    with pytest.raises(CRDError, match=r"x.yaml: cannot read the CRDs"):
        SchemaChecker.from_crd_dir(tmp_path)


def test_render_reports_unreadable_crds_as_invalid_input(tmp_path: Path) -> None:
    (tmp_path / "crds").mkdir()
    (tmp_path / "crds" / "x.yaml").write_text("kind: ConfigMap\n")
    trainjob = tmp_path / "t.yaml"
    trainjob.write_text(yaml.safe_dump(_trainjob()))
    err = io.StringIO()
    code = run([str(trainjob), "-r", str(RUNTIMES), "--crd-dir", str(tmp_path / "crds")], stderr=err)
    assert code == 2
    assert "no CustomResourceDefinitions found" in err.getvalue()


# Without a schema ------------------------------------------------------------------------------------------

ODD = {
    "metadata a list": {"metadata": ["a"]},
    "a number as name": {"metadata": {"name": 5}},
    "spec null": {"spec": None},
    "spec a string": {"spec": "hello"},
    "spec a list": {"spec": [1]},
    "runtimeRef a list": {"spec": {"runtimeRef": ["x"]}},
    "trainer a list": {"spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": [1]}},
    "trainer a string": {"spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": "x"}},
    "numNodes a string": {
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": "x"}}
    },
    "numNodes a list": {"spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": [1]}}},
    "limits a list": {
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"resourcesPerNode": {"limits": [1]}},
        }
    },
    "numProcPerNode a list": {
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numProcPerNode": [1]}}
    },
    "conditions a string": {"status": {"conditions": "x"}},
    "conditions of numbers": {"status": {"conditions": [1, "a"]}},
}


@pytest.mark.parametrize("change", ODD.values(), ids=ODD.keys())
@pytest.mark.parametrize("how", ["--no-schema", "no CRDs found"])
def test_without_a_schema_odd_input_is_refused_cleanly(
    change: dict[str, Any], how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({**_trainjob(), **change}))
    argv = [str(path), "-r", str(RUNTIMES)]
    if how == "--no-schema":
        argv.append("--no-schema")
    else:
        monkeypatch.setattr("runtime.render.DEFAULT_CRD_DIR", tmp_path / "no-crds")
    err = io.StringIO()
    code = run(argv, stdout=io.StringIO(), stderr=err)
    assert code == 2, err.getvalue()
    assert "internal error" not in err.getvalue() and "Traceback" not in err.getvalue()


def test_without_a_schema_the_error_says_how_to_find_the_field(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({**_trainjob(), **ODD["trainer a string"]}))
    err = io.StringIO()
    assert run([str(path), "-r", str(RUNTIMES), "--no-schema"], stderr=err) == 2
    assert err.getvalue().splitlines() == [
        f"trainer-render: {path}: cannot be rendered without schema checks",
        "  AttributeError: 'str' object has no attribute 'get'",
        "  a TrainJob or runtime does not have the shape of its CRD; drop --no-schema (or pass --crd-dir) to "
        "see which field",
    ]


# Benchmarks (deselected by default; `-m benchmark -s`): they print, never assert ---------------------------


@pytest.mark.benchmark
def test_benchmark_schema_check_with_cel_rules() -> None:
    import time

    trainjob, runtime = _trainjob(), _runtime()
    rules = RuleValidator(
        _schema({"rule": "!self.exists(c, c == 'node')"}, type="array", items={"type": "string"})
    )
    for label, call, rounds in (
        ("TrainJob: names, schema, CEL", lambda: SCHEMAS.check(trainjob), 2000),
        ("ClusterTrainingRuntime: names, schema, CEL", lambda: SCHEMAS.check(runtime), 200),
        ("one rule over a list of 100,000 strings", lambda: rules.validate({"x": ["x"] * 100_000}), 5),
        ("one rule over a list past the budget", lambda: rules.validate({"x": ["x"] * 2_000_000}), 2),
    ):
        started = time.perf_counter()
        for _ in range(rounds):
            call()
        elapsed = time.perf_counter() - started
        print(f"{label}: {elapsed / rounds * 1e3:,.2f} ms each")


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize("depth", [500, 5_000, 100_000])
def test_an_object_nested_at_any_depth_is_one_field_error_never_a_recursion_error(depth: int) -> None:
    # `check` promises never to raise: it recursed once per level and raised RecursionError from depth 500.
    checked, errors = SCHEMAS.check(_trainjob(labels=_nested(depth)))
    assert [str(e) for e in errors] == [
        "spec.labels.a.a.a.a.a.a.a.a.a.a...: Forbidden: collections nested more than 128 levels deep"
    ]
    assert checked["spec"]["labels"]["a"]["a"]["a"] is not None


def test_an_object_nested_within_the_bound_is_checked_as_usual() -> None:
    trainjob = _trainjob()
    trainjob["metadata"]["annotations"] = _nested(120)
    [error] = _errors(trainjob)
    assert error.startswith('metadata.annotations: Invalid value: {"a":{"a":')
    assert error.endswith(" characters): must be a map of strings to strings")
