"""trainer-render's schema check gives kube-apiserver's verdict on numbers, and keeps the value it stores.

Each case is a TrainJob with one number in an integer or int-or-string field, created with `dryRun=All`
on the Tier 1 kube-apiserver (the Trainer CRDs of config/crd installed, no webhook), and checked offline by
`runtime.schema.SchemaChecker` with the same CRDs. The verdicts must agree; when both accept, the value
render carries on must equal the one the API server returns.

A second table sends whole manifests (TrainJobs and ClusterTrainingRuntimes, with `dryRun=All`) to both:
names, `managedBy`, and each kind of CEL rule the CRDs carry, including the JobSet spec's embedded ones.
The verdicts must agree, and so must the field paths and the messages of the errors.

What kube-apiserver v1.36.3 does, as the table records it (go-openapi's `IsFloat64AJSONInteger` and
`IsValueValidAgainstRange`, apiserver's CEL `UnstructuredToVal`):
- a whole float where the schema says integer or int-or-string is accepted and stored as the integer
  (`2.0` → `2`, `-1.0` → `-1`), up to ±(2**53 - 1); `1.5`, `-1.5`, `1.0000000001` and `2**53` are
  rejected with 422, and so is a whole float outside the field's int32 range;
- CEL reads the float it decoded, so a rule on such a field cannot evaluate ("invalid data, expected int,
  got float64"; a runtime's `mlPolicy.flux.numProcPerNode: 2.0`, checked offline in
  test/unit/render/test_render_cli.py), while `activeDeadlineSeconds: 60.0` passes, since its only rule
  reads `oldSelf` and runs on updates only. A TrainJob's `numProcPerNode` has no rule (as upstream v2.3.0).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from controller.envtest import ControlPlane
from runtime.schema import CRD_DIR, SchemaChecker

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    id: str
    path: str
    """Dotted path under the TrainJob's `spec` (dict keys only)."""
    value: Any
    accepted: bool
    """kube-apiserver's verdict, as observed; the test checks it still holds."""
    stored: Any = None
    """What kube-apiserver returns for an accepted value (compared with its type: `1` is not `1.0`)."""


CPU = "trainer.resourcesPerNode.limits.cpu"
CASES = [
    Case(id="an integer field takes a whole float as that integer", path="trainer.numNodes", value=2.0,
         accepted=True, stored=2),
    Case(id="an integer field takes 0.0 as 0", path="trainer.numNodes", value=0.0, accepted=True, stored=0),
    Case(id="an integer field refuses a fraction", path="trainer.numNodes", value=2.5, accepted=False),
    Case(id="a whole float must fit the field's int32", path="trainer.numNodes", value=3e9, accepted=False),
    Case(id="a whole float whose only rule is a transition rule is accepted on create",
         path="activeDeadlineSeconds", value=60.0, accepted=True, stored=60),
    Case(id="a whole float in a field without rules, as upstream v2.3.0", path="trainer.numProcPerNode",
         value=2.0, accepted=True, stored=2),
    Case(id="an int-or-string quantity takes 1.0 as 1", path=CPU, value=1.0, accepted=True, stored=1),
    Case(id="an int-or-string quantity takes -1.0 as -1", path=CPU, value=-1.0, accepted=True, stored=-1),
    Case(id="an int-or-string quantity refuses 1.5", path=CPU, value=1.5, accepted=False),
    Case(id="an int-or-string quantity refuses -1.5", path=CPU, value=-1.5, accepted=False),
    Case(id="a near-integer float is not an integer", path=CPU, value=1.0000000001, accepted=False),
    Case(id="the largest whole float taken is 2**53 - 1", path=CPU, value=float(2**53 - 1), accepted=True,
         stored=2**53 - 1),
    Case(id="2**53 as a float is refused", path=CPU, value=float(2**53), accepted=False),
    Case(id="a string quantity is kept as written", path=CPU, value="1.5", accepted=True, stored="1.5"),
]  # fmt: skip


def _trainjob(path: str, value: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"runtimeRef": {"name": "torch-distributed"}}
    *parents, leaf = path.split(".")
    node = spec
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = value
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "numbers"},
        "spec": spec,
    }


def _at(obj: dict[str, Any], path: str) -> Any:
    node: Any = obj["spec"]
    for key in path.split("."):
        node = node[key]
    return node


@pytest.fixture(scope="module")
def schemas() -> SchemaChecker:
    return SchemaChecker.from_crd_dir(CRD_DIR)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_render_and_kube_apiserver_agree_on_a_number(
    case: Case, control_plane: ControlPlane, namespace: str, schemas: SchemaChecker
) -> None:
    trainjob = _trainjob(case.path, case.value)
    answer = control_plane.admin_request(
        "POST",
        f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs?dryRun=All",
        orjson.dumps(trainjob),
    )
    checked, errors = schemas.check(trainjob)

    assert answer.status in (201, 422), answer.body
    server_accepts = answer.status == 201
    assert server_accepts is case.accepted, answer.body  # kube-apiserver still behaves as recorded
    assert (not errors) is server_accepts, [str(e) for e in errors]
    if server_accepts:
        stored = _at(answer.json(), case.path)
        assert (type(stored), stored) == (type(case.stored), case.stored)
        assert (type(_at(checked, case.path)), _at(checked, case.path)) == (type(stored), stored)
    else:
        field = f"spec.{case.path}"
        assert field in answer.json()["message"]
        # render spells a map key as Go's field.Path does (`limits[cpu]`), the OpenAPI check with a dot.
        assert any(re.sub(r"\[([^]]*)\]", r".\1", e.path) == field for e in errors), [str(e) for e in errors]


# Whole manifests: names, enums and CEL rules ---------------------------------------------------------------

TORCH = yaml.safe_load((ROOT / "config" / "runtimes" / "torch-distributed.yaml").read_text())


def _job(name: str = "demo", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, **spec},
    }


def _runtime(name: str = "rva-torch", **changes: Any) -> dict[str, Any]:
    """torch-distributed under another name (cluster-scoped: other tests install the real one), changed at
    `a__b__0__c` paths."""
    runtime = copy.deepcopy(TORCH)
    runtime["metadata"] = {"name": name}
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = runtime
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
        node[leaf] = value
    return runtime


_JOBSET = "spec__template__spec"
_TARGETS = "spec__mlPolicy__torch__envInjection__targets"
MANIFESTS = [
    pytest.param(_job(), id="a valid TrainJob"),
    pytest.param(_job("Demo"), id="an upper-case TrainJob name"),
    pytest.param(_job("a.b"), id="a dotted TrainJob name (a subdomain, not an RFC 1035 label)"),
    pytest.param(_job("1abc"), id="a TrainJob name that starts with a digit"),
    pytest.param(_job("a" * 64), id="a TrainJob name of 64 characters"),
    pytest.param(_job("a" * 254), id="a TrainJob name of 254 characters"),
    pytest.param(_job(managedBy="example.com/mine"), id="managedBy outside the two controllers"),
    pytest.param(_job(managedBy="kueue.x-k8s.io/multikueue"), id="managedBy MultiKueue"),
    pytest.param(_job(initializer={"dataset": {"storageUri": "not a uri"}}), id="a storageUri, no URI"),
    pytest.param(_job(initializer={"dataset": {"storageUri": "hf://x/y"}}), id="a storageUri that is a URI"),
    pytest.param(_job(suspend=True, trainer={"numNodes": 0}), id="numNodes 0 (no minimum, as upstream)"),
    pytest.param(_runtime(), id="a valid ClusterTrainingRuntime"),
    pytest.param(_runtime("rva.torch.v2"), id="a runtime name with dots"),
    pytest.param(_runtime("Torch"), id="an upper-case runtime name"),
    pytest.param(_runtime("r" * 254), id="a runtime name of 254 characters"),
    pytest.param(_runtime(spec__mlPolicy__mpi={}), id="two ML policies"),
    pytest.param(
        _runtime(spec__mlPolicy={"numNodes": 1, "flux": {"numProcPerNode": 0}}), id="flux numProcPerNode 0"
    ),
    pytest.param(
        _runtime(**{_TARGETS: [{"jobName": "node", "containerNames": ["x", "node"]}]}),
        id="env injection into the node container",
    ),
    pytest.param(
        _runtime(**{
            f"{_JOBSET}__startupPolicy": {"startupPolicyOrder": "InOrder"},
            f"{_JOBSET}__replicatedJobs__0__dependsOn": [{"name": "x", "status": "Ready"}],
        }),
        id="JobSet startupPolicy InOrder with dependsOn",
    ),
    pytest.param(
        _runtime(**{f"{_JOBSET}__volumeClaimPolicies": [
            {"templates": [{"metadata": {"name": "data", "namespace": "other"}}]}
        ]}),
        id="JobSet volumeClaimPolicies template with a namespace",
    ),
]  # fmt: skip


def _server_causes(answer: Any) -> set[tuple[str, str]]:
    """(field, message) of each cause of a 422; a rule on the resource root has no field (Go: `<nil>`)."""
    causes = (answer.json().get("details") or {}).get("causes") or []
    return {(str(cause.get("field") or "<nil>"), str(cause.get("message"))) for cause in causes}


@pytest.mark.parametrize("obj", MANIFESTS)
def test_render_and_kube_apiserver_agree_on_a_manifest(
    obj: dict[str, Any], control_plane: ControlPlane, namespace: str, schemas: SchemaChecker
) -> None:
    if obj["kind"] == "TrainJob":
        url = f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs?dryRun=All"
    else:
        url = "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes?dryRun=All"
    answer = control_plane.admin_request("POST", url, orjson.dumps(obj))
    _, errors = schemas.check(obj)

    assert answer.status in (201, 422), answer.body
    assert (not errors) is (answer.status == 201), (answer.body, [str(e) for e in errors])
    if errors:
        causes = _server_causes(answer)
        assert {e.path for e in errors} == {field for field, _ in causes}, (
            answer.body,
            [str(e) for e in errors],
        )
        # The same words, too, except where render cuts a long value short (`runtime.echo`).
        assert {(e.path, e.body()) for e in errors if "…" not in e.body()} <= causes
