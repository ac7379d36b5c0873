"""Every rule of the shipped roles (``config/rbac``) is justified: no wildcard anywhere, and each rule is
explained by the comment written above it (the comment names each resource the rule grants) or is shown
needed by a test (``test/integration/test_install_manifests.py`` removes each rule alone and sees the
manager's request for it refused; its ``KEPT`` permissions have tests of their own).

Static: the YAML files are read with their comments, no control plane. The restricted Pod Security
Standard of the Deployment is checked by kube-apiserver's own admission in the same integration module
(``test_the_manager_pod_passes_the_restricted_pod_security_standard``: a server-side dry-run create of
the Deployment's Pod template as a Pod in a namespace labelled ``pod-security.kubernetes.io/enforce:
restricted``, since PodSecurity only warns on a Deployment); the last test here adds that the Deployment
itself draws no PodSecurity warning there.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from controller.client.client import Client
from support import rbac_probes, reliability

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RBAC = ROOT / "config" / "rbac"

ROLE_KINDS = ("Role", "ClusterRole")
_RULE_START = re.compile(r"^(\s*)- apiGroups:")


def _roles() -> list[tuple[Path, dict[str, Any], list[str]]]:
    """(file, role, the comment block above each rule in order)."""
    found = []
    for path in sorted(RBAC.glob("*.yaml")):
        text = path.read_text()
        role = yaml.safe_load(text)
        if not isinstance(role, dict) or role.get("kind") not in ROLE_KINDS:
            continue
        lines = text.splitlines()
        comments: list[str] = []
        for number, line in enumerate(lines):
            if not _RULE_START.match(line):
                continue
            above: list[str] = []
            cursor = number - 1
            while cursor >= 0 and lines[cursor].lstrip().startswith("#"):
                above.insert(0, lines[cursor].lstrip().lstrip("#").strip())
                cursor -= 1
            comments.append(" ".join(above))
        assert len(comments) == len(role.get("rules") or []), f"{path.name}: every rule starts '- apiGroups:'"
        found.append((path, role, comments))
    return found


def _mentions(comment: str, resource: str) -> bool:
    """Whether ``comment`` names ``resource`` (``trainjobs/status`` → TrainJob ... status; plural or singular,
    any case, words run together or not: ``priorityclasses`` matches "priority classes")."""
    squashed = re.sub(r"[^a-z]", "", comment.lower())
    for part in resource.split("/"):
        stem = part.lower().removesuffix("es") if part.lower().endswith("sses") else part.lower().rstrip("s")
        stem = stem.removesuffix("ie") + (
            "y" if stem.endswith("ie") else ""
        )  # priorityclasses → priorityclass
        if stem not in squashed and part.lower() not in squashed:
            return False
    return True


def _grants(rule: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


@pytest.fixture(scope="module")
def probed() -> set[tuple[str, str, str]]:
    """The permissions ``test/integration/test_install_manifests.py`` shows needed, one rule at a time."""
    return {grant for probe in rbac_probes.PROBES for grant in probe.grants} | set(rbac_probes.KEPT)


def test_no_role_of_the_manager_has_a_wildcard() -> None:
    roles = _roles()
    assert roles, "no Role or ClusterRole under config/rbac"
    for path, role, _ in roles:
        for index, rule in enumerate(role["rules"]):
            for field in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
                assert "*" not in (rule.get(field) or []), f"{path.name} rule {index}: {field} has a wildcard"
                assert not any("*" in str(v) for v in rule.get(field) or []), (
                    f"{path.name} rule {index}: {field}"
                )


def test_every_rule_is_explained_by_its_comment_or_shown_needed_by_a_test(
    probed: set[tuple[str, str, str]], figures: Any
) -> None:
    explained = exercised = 0
    unjustified = []
    for path, role, comments in _roles():
        for index, (rule, comment) in enumerate(zip(role["rules"], comments, strict=True)):
            by_comment = bool(comment) and all(_mentions(comment, r) for r in rule["resources"])
            by_test = _grants(rule) <= probed
            explained += by_comment
            exercised += by_test
            if not (by_comment or by_test):
                unjustified.append(
                    f"{path.name} rule {index} {rule['resources']} {rule['verbs']}: {comment!r}"
                )
    assert unjustified == []
    figures.report("RBAC rules justified", explained_by_comment=explained, shown_needed_by_a_test=exercised)


def test_the_shipped_deployment_draws_no_pod_security_warning_at_restricted(
    admin: Client, namespace: str, envtest_binaries: Any
) -> None:
    install = reliability.install
    kubectl = install.kubectl_beside(envtest_binaries.kube_apiserver)
    if not kubectl.is_file():
        pytest.skip(f"no kubectl beside kube-apiserver ({kubectl}) to build config/default")
    (deployment,) = [
        o for o in install.kustomize_build(kubectl, install.DEFAULT_OVERLAY) if o["kind"] == "Deployment"
    ]
    admin.patch(
        reliability.GVK("", "v1", "Namespace"),
        namespace,
        {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}},
    )
    deployment = {**deployment, "metadata": {**deployment["metadata"], "namespace": namespace}}
    answer = admin.transport.request(
        "POST",
        f"/apis/apps/v1/namespaces/{namespace}/deployments",
        query={"dryRun": "All"},
        body=orjson.dumps(deployment),
        content_type="application/json",
    )
    assert answer.status == 201, answer.body[:500]
    assert "Warning" not in answer.headers, answer.headers.get("Warning")
    # The check is live: a template that breaks the standard draws the warning here.
    broken = orjson.loads(orjson.dumps(deployment))
    broken["spec"]["template"]["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = True
    warned = admin.transport.request(
        "POST",
        f"/apis/apps/v1/namespaces/{namespace}/deployments",
        query={"dryRun": "All"},
        body=orjson.dumps(broken),
        content_type="application/json",
    )
    assert warned.status == 201 and "allowPrivilegeEscalation" in warned.headers.get("Warning", "")
